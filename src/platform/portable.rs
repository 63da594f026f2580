//! Any Unix (macOS, the BSDs, and Linux with the `portable` feature): a watchdog process
//! kills the child's group when orchestrate dies, and start times come from `ps`.
//!
//! The watchdog is a tiny `/bin/sh` that leads the child's process group and reads a pipe
//! whose only writer is orchestrate. When orchestrate dies, however it dies, the kernel
//! closes that writer; the watchdog's read ends and it runs `kill -s KILL 0`, which kills
//! its own group: the child, every descendant that stayed in the group, and the watchdog
//! itself. Nothing names a pid, so pid reuse cannot misdirect the signal, and because the
//! watchdog leads the group and is orchestrate's child, the group id stays reserved for as
//! long as orchestrate has not reaped it.
//!
//! The child joins the watchdog's group from its own fork, before exec. Until its exec the
//! forked child also holds the pipe's writer, so even if orchestrate dies mid-spawn the
//! watchdog's read cannot end before the child is in the group it kills.
//!
//! A shell rather than a re-exec of orchestrate: `/bin/sh` exists on every Unix, and it
//! works the same from the `orchestrate` binary, the test binaries and any other program
//! linking this library. Unlike on Linux, where the child leads its group, the child here is
//! not a group leader and so could leave the group with `setsid`; its descendants can do
//! that on either path.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use nix::fcntl::{fcntl, FcntlArg, FdFlag};
use nix::sys::signal::Signal;

use super::unix::{signal_group, StartTime};

#[cfg(test)]
pub(crate) const IMPLEMENTATION: &str = "portable";

const SHELL: &str = "/bin/sh";
/// Reads until orchestrate's end of the pipe closes, then kills the whole group. Nothing
/// is ever written to the pipe; the loop only makes a stray line harmless.
const WATCHDOG_SCRIPT: &str = "while read -r line; do :; done; kill -s KILL 0";
/// Signals the watchdog ignores, set before exec (a non-interactive shell cannot undo
/// that): the supervisor's SIGTERM to the group must not end it before the child, and
/// stop signals must not freeze it.
const WATCHDOG_IGNORED_SIGNALS: [libc::c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
];

#[derive(Debug)]
pub(super) struct ParentDeathWatch {
    watchdog: Child,
    /// Orchestrate's end of the watchdog's pipe. Closing it (orchestrate exiting, or
    /// dropping this) tells the watchdog to kill the group.
    parent_alive: Option<OwnedFd>,
}

impl ParentDeathWatch {
    /// Starts the watchdog as the leader of a new group and makes `cmd` join that group.
    pub(super) fn arm(cmd: &mut Command) -> io::Result<ParentDeathWatch> {
        let (read_end, write_end) = nix::unistd::pipe()?;
        // Where pipes cannot be created close-on-exec atomically, a fork on another
        // thread could inherit the writer in between; every spawn of a supervised child
        // runs on the one spawner thread, so none of them can.
        for fd in [&read_end, &write_end] {
            fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        }
        let mut watchdog = Command::new(SHELL);
        watchdog
            .args(["-c", WATCHDOG_SCRIPT, "orchestrate-watchdog"])
            // Nothing of the run's environment (ORCHESTRATE_RUN_ID, secrets) and no hold
            // on the working directory.
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(read_end))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        // SAFETY: signal() is async-signal-safe; the closure runs between fork and exec.
        unsafe {
            watchdog.pre_exec(|| {
                for sig in WATCHDOG_IGNORED_SIGNALS {
                    if libc::signal(sig, libc::SIG_IGN) == libc::SIG_ERR {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let watchdog_child = watchdog.spawn()?;
        // Drops our copy of the reader with the command.
        drop(watchdog);
        cmd.process_group(watchdog_child.id() as i32);
        Ok(ParentDeathWatch {
            watchdog: watchdog_child,
            parent_alive: Some(write_end),
        })
    }

    /// The watchdog leads the group.
    pub(super) fn pgid(&self) -> Option<u32> {
        Some(self.watchdog.id())
    }

    /// The child could not be started: end and reap the watchdog.
    pub(super) fn disarm(mut self) {
        self.parent_alive = None;
        let _ = signal_group(self.watchdog.id(), Signal::SIGKILL);
        let _ = self.watchdog.wait();
    }

    /// Called once the group was SIGKILLed, the watchdog with it.
    pub(super) fn reap(&mut self) {
        // Closing our end first means that even a watchdog the SIGKILL somehow missed
        // ends on its own, so the wait cannot hang.
        self.parent_alive = None;
        let _ = self.watchdog.wait();
    }

    pub(super) fn reap_if_dead(&mut self) {
        self.parent_alive = None;
        let _ = self.watchdog.try_wait();
    }

    /// What orchestrate's death does to the watchdog: its pipe closes. Returns how the
    /// watchdog ended.
    #[cfg(test)]
    pub(super) fn parent_died(&mut self) -> io::Result<std::process::ExitStatus> {
        self.parent_alive = None;
        self.watchdog.wait()
    }
}

/// A live (not zombie) process's start time as `ps` prints it (`lstart`, to the second,
/// in UTC and the C locale so that it reads the same whoever asks), or None.
///
/// `ps` works the same on Linux and macOS, so this path is tested on Linux too; a
/// platform call (`sysctl(KERN_PROC)` on macOS) would avoid the extra process.
pub(crate) fn process_start_time(pid: u32) -> Option<StartTime> {
    let ps = if Path::new("/bin/ps").exists() {
        "/bin/ps"
    } else {
        "ps"
    };
    let out = Command::new(ps)
        .args(["-o", "stat=", "-o", "lstart=", "-p"])
        .arg(pid.to_string())
        .env("LC_ALL", "C")
        .env("TZ", "UTC0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut words = text.lines().next()?.split_whitespace();
    let state = words.next()?;
    if state.starts_with('Z') {
        return None;
    }
    let started = words.collect::<Vec<_>>().join(" ");
    (!started.is_empty()).then_some(StartTime(started))
}
