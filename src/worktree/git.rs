//! orchestrate's own git. It runs outside any sandbox, on a worktree a hostile child has
//! just worked in, so it runs no program that a repository, a configuration file or the
//! environment names: no hooks, fsmonitor, filters, external diff or textconv, credential
//! helpers, pagers, editors, signing programs, automatic gc, lazy fetches or transports.
//!
//! Three layers, so that none is the only one:
//! - the environment: every `GIT_*` variable is dropped (`GIT_DIR`, `GIT_CONFIG_PARAMETERS`,
//!   `GIT_EXEC_PATH`, `GIT_EXTERNAL_DIFF`, …) but the commit identity and the choice of
//!   configuration files;
//! - fixed `-c` settings, which outrank every configuration file ([`FIXED`]);
//! - for every key of the effective configuration that names a program under a name of
//!   its own (`filter.<driver>.clean`, `diff.<driver>.textconv`, `hook.<name>.command`,
//!   `credential.<url>.helper`, …), a `-c` that empties it ([`Git::neutralized`]).
//!
//! Every step is bounded in time: a configuration include or a nested repository's `HEAD`
//! that is a FIFO would otherwise block git, and orchestrate with it, for ever.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::WorktreeError;

/// How long a quick step (rev-parse, config, status, diff, ref updates) may take.
pub(crate) const STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a step that reads or writes every file may take (checkout, add, commit).
pub(crate) const WORK_TIMEOUT: Duration = Duration::from_secs(600);

/// `GIT_*` variables that are kept: who commits, and which configuration files the user
/// chose (their programs are neutralized like any other file's).
const KEPT_VARS: [&str; 7] = [
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
];

/// Settings that switch off every program git would otherwise start on its own.
const FIXED: [&str; 20] = [
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=true",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gpg.program=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    // A submodule's own status would run a git inside it, under its own configuration.
    "diff.ignoreSubmodules=dirty",
    "sequence.editor=true",
];

/// The last part of a configuration key that names a program to run, under a name of the
/// user's or the repository's choosing (`filter.lfs.clean`, `diff.pdf.textconv`,
/// `merge.ours.driver`, `hook.lint.command`, `credential.https://x.helper`,
/// `gpg.ssh.program`, `mergetool.vim.cmd`, `trailer.sign.command`, …).
const PROGRAM_VARS: [&str; 10] = [
    "clean",
    "smudge",
    "process",
    "textconv",
    "command",
    "cmd",
    "driver",
    "helper",
    "program",
    "defaultkeycommand",
];

/// Where a git command runs.
#[derive(Debug, Clone)]
pub(crate) enum At<'a> {
    /// Found from a folder, as a user's git would (only for the user's own checkout,
    /// before a child ran: to find the repository).
    Discover(&'a Path),
    /// The repository's shared git dir, no work tree.
    Repository(&'a Path),
    /// A worktree orchestrate made: its git dir and work tree named, never looked up
    /// through the work tree's `.git`, which the child can rewrite.
    Worktree {
        git_dir: &'a Path,
        work_tree: &'a Path,
    },
}

impl At<'_> {
    fn describe(&self) -> String {
        match self {
            At::Discover(p) | At::Repository(p) => p.display().to_string(),
            At::Worktree { work_tree, .. } => work_tree.display().to_string(),
        }
    }
}

/// A git for one place, with the `-c` settings that neutralize the programs its
/// configuration names.
#[derive(Debug, Clone)]
pub(crate) struct Git<'a> {
    at: At<'a>,
    neutralized: Vec<String>,
}

impl<'a> Git<'a> {
    /// A git with the fixed settings only; [`Git::neutralized`] adds the rest.
    pub(crate) fn new(at: At<'a>) -> Git<'a> {
        Git {
            at,
            neutralized: Vec::new(),
        }
    }

    /// The same git, also emptying every program the effective configuration names (read
    /// here, once: orchestrate calls this after the child is gone).
    pub(crate) fn neutralized(mut self) -> Result<Git<'a>, WorktreeError> {
        let names = self.run(&["config", "--list", "--name-only", "-z"], STEP_TIMEOUT)?;
        self.neutralized = overrides(&names);
        Ok(self)
    }

    pub(crate) fn command(&self, args: &[&OsStr]) -> Command {
        let mut cmd = Command::new("git");
        for (key, _) in std::env::vars_os() {
            let is_git = key.as_encoded_bytes().starts_with(b"GIT_");
            let kept = key.to_str().is_some_and(|k| KEPT_VARS.contains(&k));
            if is_git && !kept {
                cmd.env_remove(&key);
            }
        }
        for var in ["GIT_ASKPASS", "SSH_ASKPASS", "PAGER", "EDITOR", "VISUAL"] {
            cmd.env_remove(var);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_EDITOR", "true")
            .env("GIT_PAGER", "cat")
            .arg("--no-pager")
            .arg("--no-replace-objects");
        for setting in FIXED
            .iter()
            .copied()
            .chain(self.neutralized.iter().map(String::as_str))
        {
            cmd.arg("-c").arg(setting);
        }
        match &self.at {
            At::Discover(dir) => {
                cmd.arg("-C").arg(dir);
            }
            At::Repository(git_dir) => {
                cmd.arg(dir_arg("--git-dir=", git_dir));
            }
            At::Worktree { git_dir, work_tree } => {
                cmd.arg(dir_arg("--git-dir=", git_dir))
                    .arg(dir_arg("--work-tree=", work_tree))
                    .current_dir(work_tree);
            }
        }
        cmd.args(args).stdin(Stdio::null());
        cmd
    }

    /// Runs `git ARGS` to its end (at most `timeout`) and returns its stdout.
    pub(crate) fn run(&self, args: &[&str], timeout: Duration) -> Result<String, WorktreeError> {
        let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        self.run_os(&args, timeout)
    }

    pub(crate) fn run_os(
        &self,
        args: &[&OsStr],
        timeout: Duration,
    ) -> Result<String, WorktreeError> {
        let failed = |message: String| WorktreeError::Git {
            args: args
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            dir: self.at.describe(),
            message,
        };
        match run_bounded(self.command(args), timeout)? {
            Finished::Exited {
                success: true,
                stdout,
                ..
            } => Ok(String::from_utf8_lossy(&stdout).into_owned()),
            Finished::Exited { stderr, .. } => {
                Err(failed(String::from_utf8_lossy(&stderr).trim().to_string()))
            }
            Finished::TimedOut => Err(failed(format!(
                "did not finish within {} s and was stopped",
                timeout.as_secs()
            ))),
        }
    }
}

fn dir_arg(flag: &str, dir: &Path) -> OsString {
    let mut arg = OsString::from(flag);
    arg.push(dir);
    arg
}

/// `-c KEY=` for each key of `git config --list --name-only -z` that names a program;
/// `filter.<driver>.required=false` too, since an emptied filter that is required fails.
fn overrides(names: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in names.split('\0').filter(|k| !k.is_empty()) {
        let key = key.trim();
        let Some((section, rest)) = key.split_once('.') else {
            continue;
        };
        // Only keys with a subsection name: the fixed ones cover the others.
        let Some((_subsection, var)) = rest.rsplit_once('.') else {
            if section.eq_ignore_ascii_case("pager") {
                out.push(format!("{key}=false"));
            }
            continue;
        };
        let var = var.to_ascii_lowercase();
        if PROGRAM_VARS.contains(&var.as_str()) {
            out.push(format!("{key}="));
        }
        if section.eq_ignore_ascii_case("filter") && var == "required" {
            out.push(format!("{key}=false"));
        }
    }
    out.sort();
    out.dedup();
    out
}

enum Finished {
    Exited {
        success: bool,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    TimedOut,
}

/// Runs `cmd` in a process group of its own, killing the group if it outlives `timeout`.
/// The kill can never reach another process: git is waited for without being reaped
/// (`waitid` with `WNOWAIT`) until the watchdog has stood down, so its pid, and so its
/// group's id, cannot have been reused when the watchdog signals it.
fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Finished, WorktreeError> {
    use std::os::unix::process::CommandExt;
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(WorktreeError::NoGit)?;
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    // (stood down, fired)
    let state = Arc::new((Mutex::new((false, false)), Condvar::new()));
    let watchdog = {
        let state = Arc::clone(&state);
        std::thread::spawn(move || {
            let (lock, cvar) = &*state;
            let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            let (mut guard, _) = cvar
                .wait_timeout_while(guard, timeout, |(stood_down, _)| !*stood_down)
                .unwrap_or_else(|p| p.into_inner());
            if !guard.0 {
                guard.1 = true;
                // SAFETY: `pid` is not reaped yet (see above), so the group is git's.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
        })
    };
    let mut out = Vec::new();
    let _ = stdout.read_to_end(&mut out);
    // Exited (or killed), not reaped.
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    let fired = {
        let (lock, cvar) = &*state;
        let mut guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        guard.0 = true;
        cvar.notify_all();
        guard.1
    };
    let _ = watchdog.join();
    let status = child.wait().map_err(WorktreeError::Io)?;
    let err = err_reader.join().unwrap_or_default();
    if fired {
        return Ok(Finished::TimedOut);
    }
    Ok(Finished::Exited {
        success: status.success(),
        stdout: out,
        stderr: err,
    })
}

/// Reads a small metadata file without following a symbolic link, without blocking on a
/// FIFO, and only if it is a regular file of at most `max_bytes`. `Ok(None)`: no such file.
pub(crate) fn read_plain_file(path: &Path, max_bytes: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > max_bytes {
        return Err(std::io::Error::other(format!(
            "larger than {max_bytes} bytes"
        )));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// An absolute path from git's output line.
pub(crate) fn absolute(base: &Path, line: &str) -> PathBuf {
    let p = Path::new(line.trim_end_matches('\n'));
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn every_program_the_configuration_names_is_emptied() {
        let names = "user.name\0filter.lfs.clean\0filter.lfs.smudge\0filter.lfs.process\0\
                     filter.lfs.required\0diff.pdf.textconv\0diff.pdf.command\0merge.x.driver\0\
                     hook.lint.command\0credential.https://example.com.helper\0gpg.ssh.program\0\
                     pager.log\0core.editor\0remote.origin.url\0Filter.Evil.Clean\0";
        assert_eq!(
            overrides(names),
            vec![
                "Filter.Evil.Clean=",
                "credential.https://example.com.helper=",
                "diff.pdf.command=",
                "diff.pdf.textconv=",
                "filter.lfs.clean=",
                "filter.lfs.process=",
                "filter.lfs.required=false",
                "filter.lfs.smudge=",
                "gpg.ssh.program=",
                "hook.lint.command=",
                "merge.x.driver=",
                "pager.log=false",
            ]
        );
    }

    #[test]
    fn a_step_that_outlives_its_bound_is_stopped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let start = std::time::Instant::now();
        let finished = run_bounded(cmd, Duration::from_millis(200)).unwrap();
        assert!(matches!(finished, Finished::TimedOut));
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_fifo_or_a_symbolic_link_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link")).unwrap();
        std::fs::write(dir.path().join("plain"), "x\n").unwrap();
        assert!(read_plain_file(&fifo, 100).is_err());
        assert!(read_plain_file(&dir.path().join("link"), 100).is_err());
        assert_eq!(
            read_plain_file(&dir.path().join("plain"), 100).unwrap(),
            Some(b"x\n".to_vec())
        );
        assert_eq!(
            read_plain_file(&dir.path().join("none"), 100).unwrap(),
            None
        );
        assert!(read_plain_file(&dir.path().join("plain"), 1).is_err());
    }
}
