//! What every Unix shares: one spawner thread, process groups, `killpg`, and watching a
//! child's exit with `waitid` without reaping it.

use std::io;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

type SpawnJob = Box<dyn FnOnce() + Send>;

/// Runs `job` on a thread that lives as long as orchestrate, and returns its result: the
/// main thread when called there (on Linux), else the one spawner thread.
///
/// On Linux the parent-death signal fires when the *thread* that forked the child exits,
/// and tokio may retire its worker and blocking threads at any time; routing every spawn
/// through a thread that never ends before the process makes the signal mean exactly
/// "orchestrate died". A one-off run drives its child from the main thread, and spawning
/// there saves the two hops to the spawner thread and back (a tenth of a millisecond or
/// more of every run). Spawns never race each other, wherever they run (one lock): the
/// pipes of one spawn exist only while no other spawn forks (the controller is a copy
/// that does not exec, so close-on-exec does not keep them from it; where a pipe cannot
/// be created close-on-exec atomically, macOS, a fork on another thread could inherit
/// the watchdog's pipe).
pub(super) fn on_lasting_thread<T: Send + 'static>(
    job: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    if on_main_thread() {
        let _one_at_a_time = lock_spawns();
        return job();
    }
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

/// Whether this is the process's main thread, which ends only with the process.
#[cfg(target_os = "linux")]
fn on_main_thread() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) == libc::c_long::from(libc::getpid()) }
}

#[cfg(not(target_os = "linux"))]
fn on_main_thread() -> bool {
    false
}

fn lock_spawns() -> MutexGuard<'static, ()> {
    static SPAWNS: Mutex<()> = Mutex::new(());
    // A spawn that panicked left nothing half-done that the next one relies on.
    SPAWNS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn spawner() -> &'static mpsc::Sender<SpawnJob> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("orchestrate-spawner".into())
            .spawn(move || {
                for job in rx {
                    let _one_at_a_time = lock_spawns();
                    job();
                }
            })
            .expect("failed to start the spawner thread");
        tx
    })
}

/// Sends `signal` to the whole group. A group that no longer exists is not an error.
#[cfg_attr(all(target_os = "linux", not(feature = "portable")), allow(dead_code))]
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
#[cfg_attr(all(target_os = "linux", not(feature = "portable")), allow(dead_code))]
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
