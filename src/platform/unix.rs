//! What every Unix shares: one spawner thread, process groups, `killpg`, and watching a
//! child's exit with `waitid` without reaping it.

use std::io;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::OnceLock;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::imp::ParentDeathWatch;

/// A child started in a new process group that dies with orchestrate.
///
/// The group id is the child's pid on Linux; on the portable path the group is led by a
/// watchdog, so it differs. Dropping a `GroupChild` that was not reaped kills its group.
#[derive(Debug)]
pub(crate) struct GroupChild {
    pub child: Child,
    pgid: u32,
    watch: ParentDeathWatch,
    reaped: bool,
}

impl GroupChild {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn pgid(&self) -> u32 {
        self.pgid
    }

    /// SIGKILLs the whole group, then reaps the child and whatever the parent-death watch
    /// started. Until the child is reaped its zombie (or, on the portable path, the
    /// watchdog) keeps the group id from being reused, so the signal cannot reach a
    /// stranger.
    pub(crate) fn kill_and_reap(&mut self) -> io::Result<()> {
        let _ = signal_group(self.pgid, Signal::SIGKILL);
        self.reaped = true;
        let waited = self.child.wait();
        self.watch.reap();
        waited.map(drop)
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = signal_group(self.pgid, Signal::SIGKILL);
            // Reaps at once what already died; the rest is reaped when orchestrate exits.
            let _ = self.child.try_wait();
            self.watch.reap_if_dead();
        }
    }
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawns `cmd` in a new process group armed so that the group dies with orchestrate.
///
/// Every spawn happens on one long-lived thread that never exits. On Linux the
/// parent-death signal fires when the *thread* that forked the child exits, and tokio may
/// retire its worker and blocking threads at any time; routing every spawn through this
/// thread makes the signal mean exactly "orchestrate died". On the portable path it keeps
/// the spawns from racing each other: where a pipe cannot be created close-on-exec
/// atomically (macOS), a fork on another thread could inherit the watchdog's pipe.
pub(crate) fn spawn_in_new_group(mut cmd: Command) -> io::Result<GroupChild> {
    on_spawner_thread(move || {
        let watch = ParentDeathWatch::arm(&mut cmd)?;
        match cmd.spawn() {
            Ok(child) => Ok(GroupChild {
                pgid: watch.pgid().unwrap_or_else(|| child.id()),
                child,
                watch,
                reaped: false,
            }),
            Err(e) => {
                watch.disarm();
                Err(e)
            }
        }
    })
}

fn on_spawner_thread<T: Send + 'static>(
    job: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner()
        .send(Box::new(move || {
            let _ = reply_tx.send(job());
        }))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread dropped the request"))?
}

fn spawner() -> &'static mpsc::Sender<SpawnJob> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("orchestrate-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })
            .expect("failed to start the spawner thread");
        tx
    })
}

/// Sends `signal` to the whole group. A group that no longer exists is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    // A pgid of 0 or 1 would signal our own group or every process: never.
    if pgid <= 1 {
        return Err(io::Error::other(format!(
            "refusing to signal process group {pgid}"
        )));
    }
    match killpg(Pid::from_raw(pgid as i32), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Whether any process is still in the group (probed with the null signal).
pub(crate) fn group_exists(pgid: u32) -> bool {
    pgid > 1 && killpg(Pid::from_raw(pgid as i32), None).is_ok()
}

/// How the leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaderExit {
    Exited(i32),
    Signaled(i32),
}

impl LeaderExit {
    /// The shell convention: the exit code, or 128 + the signal number.
    pub(crate) fn code(self) -> i32 {
        match self {
            LeaderExit::Exited(c) => c,
            LeaderExit::Signaled(s) => 128 + s,
        }
    }
}

/// Checks whether the child has exited *without reaping it*. While its zombie exists its
/// pid, and so a group id equal to it, cannot be reused, so the group can still be
/// signalled safely to kill descendants that outlived it.
///
/// Only an exit or a death by signal counts: macOS's `waitid` may also report a stopped
/// child despite `WEXITED`, which is not an exit.
pub(crate) fn peek_exit(pid: u32) -> io::Result<Option<LeaderExit>> {
    // SAFETY: an all-zero siginfo_t is valid; waitid only writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a valid, writable siginfo_t.
    let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: waitid filled the SIGCHLD fields, or left them zero when nothing changed.
    let (si_pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if si_pid == 0 {
        return Ok(None);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => Some(LeaderExit::Exited(status)),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(LeaderExit::Signaled(status)),
        _ => None,
    })
}

/// When a process started, as the platform tells it. Two values are comparable only when
/// they come from the same build of orchestrate; with the pid, one names one process and
/// not a later one that reused its pid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct StartTime(pub(super) String);

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn wait_for_exit(pid: u32) -> LeaderExit {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(exit) = peek_exit(pid).expect("waitid") {
                return exit;
            }
            assert!(Instant::now() < deadline, "pid {pid} never exited");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn an_exit_is_seen_without_reaping_and_a_zombie_has_no_start_time() {
        let mut group = spawn_in_new_group(sh("exit 3")).expect("spawn");
        let pid = group.pid();
        assert_eq!(wait_for_exit(pid), LeaderExit::Exited(3));
        // Not reaped: it is still there to be seen again, as a zombie.
        assert_eq!(peek_exit(pid).unwrap(), Some(LeaderExit::Exited(3)));
        assert_eq!(process_start_time(pid), None, "a zombie is not alive");
        group.kill_and_reap().unwrap();
        assert_eq!(process_start_time(pid), None);
    }

    #[test]
    fn a_death_by_signal_and_a_live_process_start_time() {
        let mut group = spawn_in_new_group(sh("exec sleep 30")).expect("spawn");
        let pid = group.pid();
        let started = process_start_time(pid).expect("a live child has a start time");
        assert_eq!(
            process_start_time(pid),
            Some(started),
            "stable while it runs"
        );
        assert_eq!(peek_exit(pid).unwrap(), None);
        signal_group(group.pgid(), Signal::SIGTERM).unwrap();
        assert_eq!(wait_for_exit(pid), LeaderExit::Signaled(libc::SIGTERM));
        group.kill_and_reap().unwrap();
        assert!(!group_exists(group.pgid()), "nothing left in the group");
    }

    #[test]
    fn the_child_is_in_a_new_group_that_is_not_ours() {
        let mut group = spawn_in_new_group(sh("exec sleep 30")).expect("spawn");
        // SAFETY: getpgid has no preconditions.
        let child_pgid = unsafe { libc::getpgid(group.pid() as libc::pid_t) } as u32;
        let ours = unsafe { libc::getpgrp() } as u32;
        assert_eq!(child_pgid, group.pgid());
        assert_ne!(child_pgid, ours);
        match super::super::IMPLEMENTATION {
            "linux" => assert_eq!(group.pgid(), group.pid(), "the child leads its group"),
            _ => assert_ne!(group.pgid(), group.pid(), "the watchdog leads the group"),
        }
        group.kill_and_reap().unwrap();
        assert!(!group_exists(group.pgid()));
    }

    #[test]
    fn a_failed_spawn_is_an_error() {
        let err = spawn_in_new_group(Command::new("/nonexistent/program")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    /// What orchestrate's death does on the portable path, without killing the test: the
    /// watchdog's pipe closes, and it kills the whole group and itself.
    #[cfg(any(not(target_os = "linux"), feature = "portable"))]
    #[test]
    fn when_the_watchdogs_pipe_closes_it_kills_the_group_and_itself() {
        use std::os::unix::process::ExitStatusExt;
        // A descendant that would outlive the child: the watchdog must get it too.
        let mut group = spawn_in_new_group(sh("sleep 30 & wait")).expect("spawn");
        let pid = group.pid();
        let watchdog = group.watch.parent_died().expect("wait for the watchdog");
        assert_eq!(watchdog.signal(), Some(libc::SIGKILL), "{watchdog:?}");
        assert_eq!(wait_for_exit(pid), LeaderExit::Signaled(libc::SIGKILL));
        group.kill_and_reap().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while group_exists(group.pgid()) {
            assert!(
                Instant::now() < deadline,
                "the sleep outlived the group's kill"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A failed spawn ends the watchdog it had started: it was the only member of its
    /// group, so the group is gone.
    #[cfg(any(not(target_os = "linux"), feature = "portable"))]
    #[test]
    fn a_failed_spawn_ends_its_watchdog() {
        let mut cmd = Command::new("/nonexistent/program");
        let watch = crate::platform::imp::ParentDeathWatch::arm(&mut cmd).expect("watchdog");
        let pgid = watch.pgid().expect("the watchdog leads the group");
        assert!(group_exists(pgid));
        watch.disarm();
        assert!(!group_exists(pgid));
    }

    #[test]
    fn signalling_group_0_or_1_is_refused() {
        for pgid in [0, 1] {
            let err = signal_group(pgid, Signal::SIGKILL).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("refusing to signal process group {pgid}")
            );
            assert!(!group_exists(pgid));
        }
    }

    use super::super::process_start_time;
}
