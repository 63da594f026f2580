//! The few Unix calls the supervisor needs: spawn into a new process group with a
//! parent-death signal, signal the group, and watch the leader without reaping it.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::OnceLock;

use nix::sys::signal::{killpg, Signal};
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` as the leader of a new process group whose pgid is its pid.
///
/// The fork happens on one long-lived thread that never exits: Linux delivers the
/// parent-death signal when the *thread* that forked the child exits, and tokio may retire
/// its worker and blocking threads at any time. Routing every spawn through this thread
/// makes the signal mean exactly "orchestrate died".
pub(super) fn spawn_in_new_group(mut cmd: Command) -> io::Result<Child> {
    cmd.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // calls (prctl, getppid, raise).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl; then nobody will send
            // the signal, so die now instead of running orphaned.
            if libc::getppid() as u32 != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner()
        .send((cmd, reply_tx))
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
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("failed to start the spawner thread");
        tx
    })
}

/// Sends `signal` to the whole group. A group that no longer exists is not an error.
pub(super) fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
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
pub(super) fn group_exists(pgid: u32) -> bool {
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

/// Checks whether the leader has exited *without reaping it*. While its zombie exists
/// its pid, and so the group id, cannot be reused, so the group can still be signalled
/// safely to kill descendants that outlived it.
pub(super) fn peek_exit(pid: u32) -> io::Result<Option<LeaderExit>> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(Pid::from_raw(pid as i32)), flags) {
        Ok(WaitStatus::Exited(_, code)) => Ok(Some(LeaderExit::Exited(code))),
        Ok(WaitStatus::Signaled(_, sig, _)) => Ok(Some(LeaderExit::Signaled(sig as i32))),
        Ok(_) => Ok(None),
        Err(nix::errno::Errno::EINTR) => Ok(None),
        Err(e) => Err(io::Error::from(e)),
    }
}
