//! The sandbox policy: which mode a run gets, and what its child (and everything the child
//! starts) sees and may write in it. The mechanism is the platform's (`crate::platform`:
//! namespaces, Landlock and seccomp on Linux); this module only decides.
//!
//! The child is hostile: nothing it does may run code outside the sandbox, change anything
//! outside its writable places (metadata included), reach the user's credentials, or alter
//! orchestrate's own records, during the run or after it (README, "The sandbox").
//!
//! - `read-only`: the whole filesystem read-only; writable only the child's own place
//!   (`runs/<id>/child`: its `TMPDIR`, its CLI's session file, a nested orchestrate's
//!   state), the folders its CLI keeps sessions in (each backend declares them), and the
//!   terminal devices. Its CLI's settings are shown through a private layer thrown away
//!   after the run ([`view`]).
//! - `workspace-write`: the same plus the working directory (or the run's worktree), with
//!   its protected paths (`.git`, editor and agent settings) read-only.
//! - `off`: wherever the child's user may write.
//!
//! The default is `read-only` for an agent that cannot write and `workspace-write` for the
//! others, when the sandbox can be had; else `off`, with a warning in the result. A mode
//! asked for explicitly (flag, MCP argument, agent key, config) that cannot be had refuses
//! the run instead: running unconfined would break the promise it was asked for. The same
//! holds for each layer the platform cannot build (a mount namespace, Landlock): the
//! default runs without it, saying which guarantee is missing; an explicit mode refuses.
//!
//! A child that runs on another machine (a runner whose engine is not local, such as
//! Slurm) gets the same sandbox there: `orchestrate sandbox-exec`, started on the node in
//! front of the agent's command, builds it with the node's own namespaces, Landlock and
//! seccomp ([`remote`]; the command is `commands/sandbox_exec.rs`).

mod env;
mod git_config;
mod git_credentials;
mod logins;
pub(crate) mod remote;
mod view;

pub(crate) use view::Placeholders;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::platform::Confinement;
pub(crate) use crate::result::{SandboxInfo, SandboxMode};

/// A run's sandbox, decided before anything is spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxPlan {
    pub mode: SandboxMode,
    /// The mechanism enforcing `mode` (None when `off`).
    pub mechanism: Option<&'static str>,
    /// Why the default sandbox could not be had (then `mode` is `off`).
    pub warning: Option<String>,
    /// The mode was asked for explicitly: a layer that cannot be had refuses the run.
    pub requested: bool,
}

impl SandboxPlan {
    /// What the plan promises, before the child's spawn says which layers held.
    pub(crate) fn info(&self) -> SandboxInfo {
        SandboxInfo {
            mode: self.mode,
            mechanism: self.mechanism.unwrap_or("none").to_string(),
            layers: Vec::new(),
        }
    }

    /// What held, from the layers the spawn reports.
    pub(crate) fn held(&self, layers: &[&str]) -> SandboxInfo {
        use crate::platform::layer;
        let mechanism = if !self.confines() {
            "none"
        } else if layers.contains(&layer::MOUNTS) {
            "namespaces"
        } else if layers.contains(&layer::LANDLOCK) {
            "landlock"
        } else {
            "none"
        };
        SandboxInfo {
            mode: self.mode,
            mechanism: mechanism.to_string(),
            layers: if self.confines() {
                layers.iter().map(|l| l.to_string()).collect()
            } else {
                Vec::new()
            },
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
    cli: &CliNeeds,
    mechanism: Result<&'static str, String>,
) -> Result<SandboxPlan, String> {
    let off = |warning| SandboxPlan {
        mode: SandboxMode::Off,
        mechanism: None,
        warning,
        requested: requested.is_some(),
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
    if cli.home.is_none() && requested.is_none() {
        return Ok(off(Some(format!(
            "no sandbox by default for {}: the directories it must write to have not been verified (ask for one with --sandbox)",
            cli.name
        ))));
    }
    Ok(SandboxPlan {
        mode,
        mechanism: Some(mechanism),
        warning: None,
        requested: requested.is_some(),
    })
}

/// What the sandbox must know of the child's CLI (and of the others), as their backends
/// declare it.
#[derive(Debug, Clone)]
pub(crate) struct CliNeeds {
    /// The CLI's name, for messages.
    pub name: &'static str,
    /// Where it keeps its state, and what its child may do there; `None`: not verified,
    /// so no sandbox by default.
    pub home: Option<fn(&ChildEnv<'_>) -> CliHome>,
    /// Every other CLI's home: their logins are hidden from this one's child.
    pub others: Vec<fn(&ChildEnv<'_>) -> CliHome>,
}

impl CliNeeds {
    /// Its home as the child's environment places it.
    pub(crate) fn home(&self, env: &ChildEnv<'_>) -> CliHome {
        self.home.map(|h| h(env)).unwrap_or_default()
    }
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

/// The places of a run, as the sandbox needs them.
pub(crate) struct Places<'a> {
    /// orchestrate's state directory: hidden from the child but for the run folder.
    pub state_root: &'a Path,
    /// orchestrate's other state directories (those it uses when not told otherwise),
    /// hidden where they are not this one (nor hold it).
    pub other_states: &'a [PathBuf],
    /// The run folder: orchestrate's record of the run, read-only to the child.
    pub run_dir: &'a Path,
    /// The working directory, or the worktree (written in workspace-write only).
    pub workspace: &'a [PathBuf],
    /// The repository's git folders the workspace uses that are not inside it (a
    /// worktree's admin folder and the shared `.git`): read-only in every mode.
    pub git: &'a [PathBuf],
    /// The child may start runs of its own (the depth limit allows one more level).
    pub nests: bool,
}

/// The child's own place in the run folder: what it writes for the run (its TMPDIR, its
/// CLI's session file, a nested orchestrate's state). Whatever is read back from it is the
/// child's data, never orchestrate's record.
pub(crate) const CHILD_DIR: &str = "child";
/// The private temporary directory's name in the child's place.
pub(crate) const PRIVATE_TMP: &str = "tmp";
/// A nested orchestrate's state directory, in the child's place.
pub(crate) const NESTED_STATE: &str = "state";
pub(crate) use crate::platform::OUTER_VAR;

/// What the child gets: the platform's confinement, the variables set and removed in its
/// environment, and what the sandbox holds for the run ([`Held`]).
pub(crate) struct Prepared {
    pub confinement: Confinement,
    pub env: Vec<(OsString, OsString)>,
    pub env_remove: Vec<OsString>,
    pub held: Held,
}

/// `path` with `.` and `..` resolved lexically: for paths that may not exist yet (a
/// permission request's file, what a git configuration names), so nothing is looked up
/// on disk; the sandbox covers whatever a link does.
pub(crate) fn normalize_lexically(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What the sandbox holds while the child lives, to be dropped once its tree is gone:
/// the placeholders of protected paths that did not exist (removed when no other run
/// holds them), its CLI's login as it was (a token refreshed in the private layer is
/// written back, see `logins`), and its private TMPDIR (emptied: an ordinary folder where
/// no mount namespace made it a tmpfs).
#[derive(Debug, Default)]
pub(crate) struct Held {
    placeholders: Placeholders,
    logins: Option<logins::Logins>,
    tmp: Option<PathBuf>,
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(std::mem::take(&mut self.placeholders));
        drop(self.logins.take());
        if let Some(tmp) = self.tmp.take() {
            if !is_empty_dir(&tmp) {
                // Not followed if the child made it a link.
                let _ = std::fs::remove_dir_all(tmp);
            }
        }
    }
}

/// Whether `path` is a folder (not a link to one) with nothing in it. An empty TMPDIR
/// stays in the run folder: where a tmpfs was mounted on it, the folder under it is
/// always empty, and removing a folder frees its block, which a disk mounted with
/// `discard` trims there and then (0.3 to 1.2 ms, every run, on such a machine).
fn is_empty_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}

impl Held {
    /// The placeholders held, for tests and messages.
    #[allow(dead_code)]
    pub(crate) fn placeholders(&self) -> &Placeholders {
        &self.placeholders
    }
}

/// The platform's confinement for `plan`, and the child's environment with it. Creates
/// the child's place and the folders its CLI must write that do not exist yet.
pub(crate) fn confinement(
    plan: &SandboxPlan,
    cli: &CliNeeds,
    env: &ChildEnv<'_>,
    places: &Places<'_>,
) -> std::io::Result<Prepared> {
    // The network's part (a namespace of its own, the proxy's listeners) is the network
    // policy's: `run::attempt` adds it.
    let mut c = Confinement::default();
    if !plan.confines() {
        return Ok(Prepared {
            confinement: c,
            env: Vec::new(),
            env_remove: Vec::new(),
            held: Held::default(),
        });
    }
    c.strict = plan.requested;
    c.harden = true;
    c.outer = std::env::var(OUTER_VAR)
        .unwrap_or_default()
        .split(',')
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let child = places.run_dir.join(CHILD_DIR);
    let tmp = child.join(PRIVATE_TMP);
    create_private_dir(&tmp)?;
    let mut vars = vec![(OsString::from("TMPDIR"), tmp.clone().into_os_string())];
    if places.nests {
        let state = child.join(NESTED_STATE);
        create_private_dir(&state)?;
        vars.push(("ORCHESTRATE_STATE_DIR".into(), state.into_os_string()));
    }
    let home = cli.home(env);
    let built = view::build(&view::Input {
        mode: plan.mode,
        cli,
        env,
        home: &home,
        places,
        child: &child,
        tmp: &tmp,
    })?;
    let logins = logins::Logins::new(built.logins)?;
    let mut view = built.view;
    view.logins = logins.as_ref().map(|l| crate::platform::LoginCopies {
        files: l.paths(),
        into: l.copies(),
    });
    vars.extend(built.env);
    c.writable = Some(built.writable);
    c.view = Some(view);
    Ok(Prepared {
        confinement: c,
        env: vars,
        env_remove: env::scrubbed(&home, env),
        held: Held {
            placeholders: built.placeholders,
            logins,
            tmp: Some(tmp),
        },
    })
}

pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", dir.display())))
}

/// Where a CLI keeps its state, as the sandbox shows it to that CLI's own child. Each
/// backend declares its own in its file (found by running the real CLI under the
/// sandbox and reading what it wrote and what failed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliHome {
    /// Its folders (settings, extensions, hooks, plugins, caches, logs): the child reads
    /// them as they are, and what it writes there goes to a private layer thrown away
    /// after the run, never to the user's files. Created when missing.
    pub private: Vec<PathBuf>,
    /// Folders whose writes must outlive the run (the sessions `--resume` continues):
    /// the real ones, writable. Created when missing.
    pub kept: Vec<PathBuf>,
    /// Files outside its folders that it rewrites (claude's `~/.claude.json`): the child
    /// writes a private copy, thrown away after the run.
    pub copied: Vec<PathBuf>,
    /// Its configuration in a project (names at the top of the workspace, among the
    /// protected ones). The folders it writes when it starts there (opencode writes
    /// `.opencode/.gitignore`) are private, like `private`, instead of read-only.
    pub project: Vec<&'static str>,
    /// A variable that makes it ignore a project's configuration, set in workspace-write
    /// when the workspace has none of `project` (nothing is lost then): the empty
    /// placeholders that hold those names would be a configuration of its own to set up
    /// (opencode installs its plugin package into a `.opencode` folder at every start).
    pub project_off_env: Option<(&'static str, &'static str)>,
    /// Its login: readable by its own child (through `private`), hidden from the
    /// children of every other CLI.
    pub login: Vec<PathBuf>,
    /// The variables it reaches its provider with (names, or prefixes ending in `*`):
    /// kept in its child's environment, where other secret-looking ones are removed.
    pub env: Vec<String>,
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
    use crate::backends::Backend;
    use pretty_assertions::assert_eq;

    fn needs(name: &str) -> CliNeeds {
        Backend::named(name).sandbox_needs()
    }

    #[test]
    fn the_default_follows_whether_the_agent_can_write() {
        let ok = || Ok("landlock");
        let p = plan(None, true, &needs("pi"), ok()).unwrap();
        assert_eq!(
            (p.mode, p.mechanism),
            (SandboxMode::ReadOnly, Some("landlock"))
        );
        let p = plan(None, false, &needs("pi"), ok()).unwrap();
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
        let p = plan(Some(SandboxMode::Off), true, &needs("pi"), ok()).unwrap();
        assert_eq!(
            (p.mode, p.mechanism, p.warning),
            (SandboxMode::Off, None, None)
        );
    }

    #[test]
    fn without_a_mechanism_the_default_is_off_with_a_warning_and_a_request_is_refused() {
        let none = || Err("Landlock is not in this kernel".to_string());
        let p = plan(None, true, &needs("claude"), none()).unwrap();
        assert_eq!(
            (p.mode, p.warning.as_deref()),
            (
                SandboxMode::Off,
                Some("no sandbox (Landlock is not in this kernel): the child may write wherever its user can")
            )
        );
        assert_eq!(
            plan(Some(SandboxMode::ReadOnly), true, &needs("claude"), none()),
            Err("sandbox read-only was asked for, but no sandbox can be had here: Landlock is not in this kernel".to_string())
        );
        // Off needs no mechanism.
        assert!(plan(Some(SandboxMode::Off), true, &needs("claude"), none()).is_ok());
    }

    #[test]
    fn a_backend_whose_directories_are_unverified_is_off_by_default_but_may_ask() {
        let p = plan(None, false, &needs("cursor"), Ok("landlock")).unwrap();
        assert_eq!(p.mode, SandboxMode::Off);
        assert!(p.warning.unwrap().contains("have not been verified"));
        let p = plan(
            Some(SandboxMode::WorkspaceWrite),
            false,
            &needs("cursor"),
            Ok("landlock"),
        )
        .unwrap();
        assert_eq!(p.mode, SandboxMode::WorkspaceWrite);
    }

    #[test]
    fn modes_parse_and_serialize_by_their_names() {
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
            layers: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"mode": "read-only", "mechanism": "landlock"})
        );
    }

    #[test]
    fn a_confinement_writes_the_childs_place_and_its_clis_sessions_and_in_workspace_write_the_workspace(
    ) {
        use crate::platform::MountKind;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (state, home, work) = (root.join("state"), root.join("home"), root.join("work"));
        let run = state.join("runs/abcd1234");
        for d in [&run, &home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let overrides = vec![(OsString::from("HOME"), home.clone().into_os_string())];
        let env = ChildEnv {
            overrides: &overrides,
        };
        let workspace = [work.clone()];
        let places = Places {
            state_root: &state,
            other_states: &[],
            run_dir: &run,
            workspace: &workspace,
            git: &[],
            nests: false,
        };
        let kinds = |p: &Prepared, path: &Path| -> Vec<MountKind> {
            let view = p.confinement.view.as_ref().unwrap();
            view.mounts
                .iter()
                .filter(|(m, _)| m == path)
                .map(|(_, k)| k.clone())
                .collect()
        };
        let ro = plan(None, true, &needs("codex"), Ok("namespaces")).unwrap();
        let p = confinement(&ro, &needs("codex"), &env, &places).unwrap();
        let child = run.join(CHILD_DIR);
        assert_eq!(kinds(&p, &child), [MountKind::Writable]);
        assert_eq!(kinds(&p, &child.join("tmp")), [MountKind::Scratch]);
        assert_eq!(kinds(&p, &state), [MountKind::Emptied]);
        // Carried into the emptied state, read-only.
        assert!(p.confinement.view.as_ref().unwrap().visible.contains(&run));
        assert_eq!(kinds(&p, &home.join(".codex")), [MountKind::Private]);
        assert_eq!(
            kinds(&p, &home.join(".codex/sessions")),
            [MountKind::Writable]
        );
        assert_eq!(
            kinds(&p, &work),
            [],
            "read-only: the workspace is not writable"
        );
        assert!(
            home.join(".codex/sessions").is_dir(),
            "created for the mount"
        );
        assert_eq!(
            p.env,
            [(OsString::from("TMPDIR"), child.join("tmp").into_os_string())]
        );
        assert!(p.confinement.harden && !p.confinement.strict);

        let ww = plan(None, false, &needs("codex"), Ok("namespaces")).unwrap();
        let p = confinement(&ww, &needs("codex"), &env, &places).unwrap();
        assert_eq!(kinds(&p, &work), [MountKind::Writable]);
        // The protected names, held by placeholders while the run lasts.
        assert_eq!(kinds(&p, &work.join(".vscode")), [MountKind::ReadOnly]);
        assert!(work.join(".vscode").is_dir());
        drop(p);
        assert!(
            !work.join(".vscode").exists(),
            "the placeholder went with the run"
        );

        let off = plan(
            Some(SandboxMode::Off),
            false,
            &needs("codex"),
            Ok("namespaces"),
        )
        .unwrap();
        let p = confinement(&off, &needs("codex"), &env, &places).unwrap();
        assert_eq!(
            (p.confinement, p.env, p.env_remove),
            (Confinement::default(), Vec::new(), Vec::new())
        );
    }

    #[test]
    fn the_state_is_emptied_but_for_the_run_and_other_state_directories_are_hidden_unless_they_hold_it(
    ) {
        use crate::platform::MountKind;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        // The outer orchestrate's default state holds this (nested) run's state.
        let outer = root.join("home/.local/state/orchestrate");
        let state = outer.join("runs/00000000/child/state");
        let (other, run) = (root.join("xdg/orchestrate"), state.join("runs/abcd1234"));
        for d in [&run, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let overrides = vec![(OsString::from("HOME"), root.join("home").into_os_string())];
        let env = ChildEnv {
            overrides: &overrides,
        };
        let others = [
            outer.clone(),
            other.clone(),
            root.join("missing/orchestrate"),
        ];
        let places = Places {
            state_root: &state,
            other_states: &others,
            run_dir: &run,
            workspace: &[],
            git: &[],
            nests: false,
        };
        let ro = plan(None, true, &needs("codex"), Ok("namespaces")).unwrap();
        let p = confinement(&ro, &needs("codex"), &env, &places).unwrap();
        let view = p.confinement.view.as_ref().unwrap();
        let of = |path: &Path| -> Vec<MountKind> {
            view.mounts
                .iter()
                .filter(|(m, _)| m == path)
                .map(|(_, k)| k.clone())
                .collect()
        };
        assert_eq!(of(&state), [MountKind::Emptied]);
        assert!(view.visible.contains(&run));
        assert_eq!(of(&other), [MountKind::Hidden]);
        assert_eq!(of(&outer), []);
        assert_eq!(of(&root.join("missing/orchestrate")), []);
    }

    #[test]
    fn a_clis_own_project_folder_is_private_and_a_configuration_the_workspace_lacks_is_off() {
        use crate::platform::MountKind;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (state, home, work) = (root.join("state"), root.join("home"), root.join("work"));
        let run = state.join("runs/abcd1234");
        for d in [&run, &home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let overrides = vec![(OsString::from("HOME"), home.into_os_string())];
        let env = ChildEnv {
            overrides: &overrides,
        };
        let workspace = [work.clone()];
        let places = Places {
            state_root: &state,
            other_states: &[],
            run_dir: &run,
            workspace: &workspace,
            git: &[],
            nests: false,
        };
        let own = work.join(".opencode");
        let kinds = |p: &Prepared| -> Vec<MountKind> {
            let view = p.confinement.view.as_ref().unwrap();
            view.mounts
                .iter()
                .filter(|(m, _)| *m == own)
                .map(|(_, k)| k.clone())
                .collect()
        };
        let off = (
            OsString::from("OPENCODE_DISABLE_PROJECT_CONFIG"),
            OsString::from("1"),
        );
        let ww = plan(None, false, &needs("opencode"), Ok("namespaces")).unwrap();
        let ro = plan(None, true, &needs("opencode"), Ok("namespaces")).unwrap();

        // No opencode configuration in the workspace: its folder is held, privately, and
        // opencode told to ignore a project configuration (there is none to lose).
        let p = confinement(&ww, &needs("opencode"), &env, &places).unwrap();
        assert_eq!(kinds(&p), [MountKind::Private]);
        assert!(p.env.contains(&off), "{:?}", p.env);
        // Another run meanwhile takes the placeholder for what it is.
        let q = confinement(&ww, &needs("opencode"), &env, &places).unwrap();
        assert!(q.env.contains(&off), "{:?}", q.env);
        drop((p, q));
        assert!(!own.exists(), "the placeholder went with the runs");

        // A project of its own: read through the private layer in both modes, and used.
        std::fs::create_dir_all(own.join("agent")).unwrap();
        for (mode, name) in [(&ww, "workspace-write"), (&ro, "read-only")] {
            let p = confinement(mode, &needs("opencode"), &env, &places).unwrap();
            assert_eq!(kinds(&p), [MountKind::Private], "{name}");
            assert!(!p.env.contains(&off), "{name}: {:?}", p.env);
        }
        // Another CLI's: read-only.
        let p = confinement(&ww, &needs("codex"), &env, &places).unwrap();
        assert_eq!(kinds(&p), [MountKind::ReadOnly]);
    }
}
