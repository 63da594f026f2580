//! The sandbox policy: which mode a run gets, and what its child (and everything the child
//! starts) may write in it. The mechanism is the platform's (`crate::platform`: Landlock
//! on Linux); this module only decides.
//!
//! - `read-only`: nothing is writable but the run folder (with the child's private
//!   temporary directory in it, its `TMPDIR`), the directories the child CLI must write
//!   to work at all (each backend declares its own, found with the real CLIs), and the
//!   terminal devices.
//! - `workspace-write`: the same plus the working directory (or the run's worktree, with
//!   the repository's `.git` entries a worktree writes to).
//! - `off`: wherever the child's user may write.
//!
//! The default is `read-only` for an agent that cannot write and `workspace-write` for the
//! others, when the sandbox can be had; else `off`, with a warning in the result. A mode
//! asked for explicitly (flag, MCP argument, agent key, config) that cannot be had refuses
//! the run instead: running unconfined would break the promise it was asked for.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::backends::Backend;
use crate::platform::Confinement;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    Off,
}

impl SandboxMode {
    pub const NAMES: &'static str = "read-only, workspace-write, off";

    pub fn parse(s: &str) -> Result<SandboxMode, String> {
        match s.trim() {
            "read-only" | "readonly" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "off" | "none" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode {other:?} (use {})",
                SandboxMode::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What held, as the result reports it: `sandbox: {mode, mechanism}`. (The network is
/// the result's `network`.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    pub mode: SandboxMode,
    /// `landlock`, or `none` when the mode is `off`.
    pub mechanism: String,
}

/// A run's sandbox, decided before anything is spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxPlan {
    pub mode: SandboxMode,
    /// The mechanism enforcing `mode` (None when `off`).
    pub mechanism: Option<&'static str>,
    /// Why the default sandbox could not be had (then `mode` is `off`).
    pub warning: Option<String>,
}

impl SandboxPlan {
    pub(crate) fn info(&self) -> SandboxInfo {
        SandboxInfo {
            mode: self.mode,
            mechanism: self.mechanism.unwrap_or("none").to_string(),
        }
    }

    pub(crate) fn confines(&self) -> bool {
        self.mode != SandboxMode::Off
    }
}

/// Decides the run's sandbox. `requested` is the mode asked for (flag, agent key, config),
/// `None` for the default; `readonly` says whether the agent can write.
pub(crate) fn plan(
    requested: Option<SandboxMode>,
    readonly: bool,
    backend: Backend,
    mechanism: Result<&'static str, String>,
) -> Result<SandboxPlan, String> {
    let off = |warning| SandboxPlan {
        mode: SandboxMode::Off,
        mechanism: None,
        warning,
    };
    let mode = requested.unwrap_or(if readonly {
        SandboxMode::ReadOnly
    } else {
        SandboxMode::WorkspaceWrite
    });
    if mode == SandboxMode::Off {
        return Ok(off(None));
    }
    let mechanism = match (mechanism, requested) {
        (Ok(m), _) => m,
        (Err(why), Some(_)) => {
            return Err(format!(
                "sandbox {mode} was asked for, but no sandbox can be had here: {why}"
            ))
        }
        (Err(why), None) => {
            return Ok(off(Some(format!(
                "no sandbox ({why}): the child may write wherever its user can"
            ))))
        }
    };
    if backend.spec().writable_dirs.is_none() && requested.is_none() {
        return Ok(off(Some(format!(
            "no sandbox by default for {backend}: the directories it must write to have not been verified (ask for one with --sandbox)"
        ))));
    }
    Ok(SandboxPlan {
        mode,
        mechanism: Some(mechanism),
        warning: None,
    })
}

/// The sandbox of a child that runs on another machine (a Slurm node), where orchestrate's
/// own (Landlock) does not reach: none, said in a warning. A mode asked for explicitly
/// refuses the run rather than go unconfined. (The network's is `network::remote_plan`.)
pub(crate) fn remote_plan(
    requested: Option<SandboxMode>,
    runner: &str,
) -> Result<SandboxPlan, String> {
    if let Some(mode) = requested.filter(|m| *m != SandboxMode::Off) {
        return Err(format!(
            "sandbox {mode} was asked for, but orchestrate's sandbox does not reach a child that runs through the {runner} runner (use --sandbox off, or --runner local)"
        ));
    }
    Ok(SandboxPlan {
        mode: SandboxMode::Off,
        mechanism: None,
        warning: requested.is_none().then(|| {
            format!(
                "no sandbox: the child runs through the {runner} runner, on a node where orchestrate's sandbox does not reach; only its CLI's own permissions apply"
            )
        }),
    })
}

/// The child's environment as a backend sees it when declaring its directories: the
/// variables the invocation sets over orchestrate's own.
pub struct ChildEnv<'a> {
    pub overrides: &'a [(OsString, OsString)],
}

impl ChildEnv<'_> {
    pub fn get(&self, key: &str) -> Option<OsString> {
        self.overrides
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os(key))
            .filter(|v| !v.is_empty())
    }

    /// `$key`, else `$HOME/<default>`.
    pub fn dir_or_home(&self, key: &str, default: &str) -> Option<PathBuf> {
        self.get(key)
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(default)))
    }

    pub fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }
}

/// What the child may write, beyond its own directories.
pub(crate) struct Writable<'a> {
    /// The run folder (session files, the pi session, the private TMPDIR).
    pub run_dir: &'a Path,
    /// The working directory, or the worktree's paths (workspace-write only).
    pub workspace: &'a [PathBuf],
    /// orchestrate's state directory, when the child may itself start runs (depth).
    pub state_root: Option<&'a Path>,
}

/// Devices every program writes to; the terminal ones for CLIs that run their shell
/// under a pseudo-terminal (gemini).
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The private temporary directory's name in the run folder.
pub(crate) const PRIVATE_TMP: &str = "tmp";

/// The platform's confinement for `plan` and the environment variables the child gets
/// with it (`TMPDIR`). Creates the directories the child must write to that do not exist
/// yet: a rule can only name an existing path.
pub(crate) fn confinement(
    plan: &SandboxPlan,
    backend: Backend,
    env: &ChildEnv<'_>,
    writable: &Writable<'_>,
) -> std::io::Result<(Confinement, Vec<(OsString, OsString)>)> {
    let mut c = Confinement::default();
    if !plan.confines() {
        return Ok((c, Vec::new()));
    }
    let tmp = writable.run_dir.join(PRIVATE_TMP);
    create_private_dir(&tmp)?;
    let mut paths = vec![writable.run_dir.to_path_buf()];
    if let Some(dirs) = backend.spec().writable_dirs {
        for dir in dirs(env) {
            create_private_dir(&dir)?;
            paths.push(dir);
        }
    }
    if plan.mode == SandboxMode::WorkspaceWrite {
        paths.extend(writable.workspace.iter().cloned());
    }
    paths.extend(writable.state_root.map(Path::to_path_buf));
    paths.extend(DEVICES.iter().map(PathBuf::from).filter(|p| p.exists()));
    c.writable = Some(paths);
    c.private_tmp = Some(tmp.clone());
    let vars = vec![(OsString::from("TMPDIR"), tmp.into_os_string())];
    Ok((c, vars))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
}

/// `$XDG_<kind>_HOME/<app>` (an absolute value only, as the XDG spec says), else
/// `$HOME/<default>/<app>`.
pub(crate) fn xdg_dir(env: &ChildEnv<'_>, var: &str, default: &str, app: &str) -> Option<PathBuf> {
    env.get(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| env.home().map(|h| h.join(default)))
        .map(|base| base.join(app))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_default_follows_whether_the_agent_can_write() {
        let ok = || Ok("landlock");
        let p = plan(None, true, Backend::Pi, ok()).unwrap();
        assert_eq!(
            (p.mode, p.mechanism),
            (SandboxMode::ReadOnly, Some("landlock"))
        );
        let p = plan(None, false, Backend::Pi, ok()).unwrap();
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
        let p = plan(Some(SandboxMode::Off), true, Backend::Pi, ok()).unwrap();
        assert_eq!(
            (p.mode, p.mechanism, p.warning),
            (SandboxMode::Off, None, None)
        );
    }

    #[test]
    fn without_a_mechanism_the_default_is_off_with_a_warning_and_a_request_is_refused() {
        let none = || Err("Landlock is not in this kernel".to_string());
        let p = plan(None, true, Backend::Claude, none()).unwrap();
        assert_eq!(
            (p.mode, p.warning.as_deref()),
            (
                SandboxMode::Off,
                Some("no sandbox (Landlock is not in this kernel): the child may write wherever its user can")
            )
        );
        assert_eq!(
            plan(Some(SandboxMode::ReadOnly), true, Backend::Claude, none()),
            Err("sandbox read-only was asked for, but no sandbox can be had here: Landlock is not in this kernel".to_string())
        );
        // Off needs no mechanism.
        assert!(plan(Some(SandboxMode::Off), true, Backend::Claude, none()).is_ok());
    }

    #[test]
    fn a_backend_whose_directories_are_unverified_is_off_by_default_but_may_ask() {
        let p = plan(None, false, Backend::Cursor, Ok("landlock")).unwrap();
        assert_eq!(p.mode, SandboxMode::Off);
        assert!(p.warning.unwrap().contains("have not been verified"));
        let p = plan(
            Some(SandboxMode::WorkspaceWrite),
            false,
            Backend::Cursor,
            Ok("landlock"),
        )
        .unwrap();
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
    }

    #[test]
    fn modes_and_network_parse_and_serialize_by_their_names() {
        for m in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::Off,
        ] {
            assert_eq!(SandboxMode::parse(m.name()), Ok(m));
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                serde_json::json!(m.name())
            );
        }
        assert_eq!(
            SandboxMode::parse("rw"),
            Err("unknown sandbox mode \"rw\" (use read-only, workspace-write, off)".into())
        );
        let info = SandboxInfo {
            mode: SandboxMode::ReadOnly,
            mechanism: "landlock".into(),
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"mode": "read-only", "mechanism": "landlock"})
        );
    }

    #[test]
    fn a_confinement_writes_to_the_run_folder_the_clis_dirs_and_in_workspace_write_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let (run, home, work) = (
            dir.path().join("run"),
            dir.path().join("home"),
            dir.path().join("work"),
        );
        for d in [&run, &home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let overrides = vec![(OsString::from("HOME"), home.clone().into_os_string())];
        let env = ChildEnv {
            overrides: &overrides,
        };
        let workspace = [work.clone()];
        let writable = Writable {
            run_dir: &run,
            workspace: &workspace,
            state_root: None,
        };
        let ro = plan(None, true, Backend::Codex, Ok("landlock")).unwrap();
        let (c, vars) = confinement(&ro, Backend::Codex, &env, &writable).unwrap();
        let devices: Vec<PathBuf> = DEVICES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect();
        let mut want = vec![run.clone(), home.join(".codex")];
        want.extend(devices.iter().cloned());
        assert_eq!(c.writable.as_ref(), Some(&want));
        assert!(home.join(".codex").is_dir(), "created for the rule");
        assert_eq!(c.private_tmp, Some(run.join("tmp")));
        assert_eq!(
            vars,
            [(OsString::from("TMPDIR"), run.join("tmp").into_os_string())]
        );
        let ww = plan(None, false, Backend::Codex, Ok("landlock")).unwrap();
        let (c, _) = confinement(&ww, Backend::Codex, &env, &writable).unwrap();
        let mut want = vec![run.clone(), home.join(".codex"), work.clone()];
        want.extend(devices);
        assert_eq!(c.writable.as_ref(), Some(&want));
        let off = plan(
            Some(SandboxMode::Off),
            false,
            Backend::Codex,
            Ok("landlock"),
        )
        .unwrap();
        let (c, vars) = confinement(&off, Backend::Codex, &env, &writable).unwrap();
        assert_eq!((c, vars), (Confinement::default(), Vec::new()));
    }
}
