//! The watchdog: a small process that outlives orchestrate, to cancel a job that
//! orchestrate can no longer stop.
//!
//! A local child is in orchestrate's own tree (a PID namespace whose init dies with
//! orchestrate), so it dies with orchestrate however orchestrate dies. A job an engine runs
//! elsewhere does not, and the engine's local client (srun) is in that tree too: it dies
//! before it can cancel anything, and the job runs on until the engine's own limits end it.
//! So before a job is submitted, its runner starts `orchestrate runner-watchdog KIND JOB`:
//! orchestrate's own executable again, in a session of its own (out of orchestrate's PID
//! namespace, process group and terminal, so that nothing that kills orchestrate's tree
//! reaches it), reading a pipe whose write end only orchestrate holds (close-on-exec, and
//! the child's controller closes everything it inherits). The job settled → orchestrate
//! writes `settled` and the watchdog exits. End of file without it → orchestrate is gone
//! (SIGKILL, a crash, a dropped attempt), and the watchdog asks the engine to cancel the
//! job (`Kind::abandon`), then exits. It holds no descriptor of orchestrate's but that pipe:
//! its output goes to /dev/null, so a parent reading orchestrate's output to its end never
//! waits for it.

use std::io::{self, BufRead, Write};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use super::{BoxFuture, Kind};

/// The hidden subcommand the watchdog runs as.
pub(crate) const COMMAND: &str = "runner-watchdog";
/// What the watchdog says once it is in a session of its own, and what orchestrate says
/// once the job is settled.
const READY: &str = "ready";
const SETTLED: &str = "settled";
/// How long a watchdog may take to say it is ready (an exec of orchestrate: milliseconds).
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a watchdog told `settled` gets to exit before it is left to be reaped later.
const EXIT_TIMEOUT: Duration = Duration::from_secs(1);

/// A started watchdog. Dropped without [`Watchdog::settled`], it cancels the job: right
/// for every path where the job may still exist.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum WatchdogError {
    #[error("could not start it: {0}")]
    Spawn(#[source] io::Error),
    #[error("it did not say it was ready within {}s", READY_TIMEOUT.as_secs())]
    NotReady,
    #[error("it said {0:?} instead of ready")]
    Unexpected(String),
}

impl Watchdog {
    /// Starts the watchdog of job `handle` (as `kind`'s abandon step names it), and
    /// returns once it is in a session of its own.
    pub(crate) async fn start(kind: &Kind, handle: &str) -> Result<Watchdog, WatchdogError> {
        let mut cmd = Command::new(own_executable());
        cmd.arg0("orchestrate")
            .args([COMMAND, kind.name(), handle])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(WatchdogError::Spawn)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        let mut line = String::new();
        let said =
            tokio::time::timeout(READY_TIMEOUT, BufReader::new(stdout).read_line(&mut line)).await;
        let watchdog = Watchdog { child, stdin };
        match said {
            Ok(Ok(_)) if line.trim() == READY => Ok(watchdog),
            Ok(Ok(_)) => Err(WatchdogError::Unexpected(line.trim().to_string())),
            Ok(Err(_)) | Err(_) => Err(WatchdogError::NotReady),
        }
    }

    /// The job is settled: the watchdog exits and leaves it alone.
    pub(crate) async fn settled(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let said = format!("{SETTLED}\n");
            if let Err(e) = stdin.write_all(said.as_bytes()).await {
                tracing::warn!("failed to tell the runner's watchdog the job is settled: {e}");
            }
        }
        // Reaped here when it exits at once, as it does; else tokio reaps it later.
        let _ = tokio::time::timeout(EXIT_TIMEOUT, self.child.wait()).await;
    }
}

/// orchestrate's own executable, to run again as the watchdog.
fn own_executable() -> std::path::PathBuf {
    // The running binary even if its file was replaced or removed since it started.
    #[cfg(target_os = "linux")]
    return "/proc/self/exe".into();
    #[cfg(not(target_os = "linux"))]
    return std::env::current_exe().unwrap_or_else(|_| "orchestrate".into());
}

/// The watchdog process: `orchestrate runner-watchdog KIND HANDLE`. Returns its exit
/// status.
pub(super) fn serve(
    abandon: fn(String) -> BoxFuture<'static, Result<(), String>>,
    handle: &str,
) -> i32 {
    close_inherited_descriptors();
    // Out of orchestrate's process group and session: a SIGKILL to orchestrate's group
    // (a parent's shell tool timing out) or a hangup of its terminal does not reach it.
    if let Err(e) = nix::unistd::setsid() {
        eprintln!("orchestrate {COMMAND}: setsid: {e}");
        return 1;
    }
    let mut stdout = io::stdout().lock();
    if writeln!(stdout, "{READY}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        // orchestrate is gone already: what it started may be running all the same.
        tracing::debug!("orchestrate went before the watchdog was ready");
    }
    let stdin = io::stdin().lock();
    for line in stdin.lines() {
        match line {
            Ok(line) if line.trim() == SETTLED => return 0,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    // End of file without `settled`: orchestrate died before the job was settled.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("orchestrate {COMMAND}: {e}");
            return 1;
        }
    };
    match runtime.block_on(abandon(handle.to_string())) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("orchestrate {COMMAND}: could not cancel {handle}: {e}");
            1
        }
    }
}

/// Closes every descriptor but 0-2: whatever orchestrate inherited without
/// close-on-exec (a pipe its own parent reads to its end, say) must not be held open by a
/// process that outlives orchestrate.
fn close_inherited_descriptors() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain system call; nothing in this process uses a descriptor above 2 yet.
    if unsafe { libc::syscall(libc::SYS_close_range, 3u32, libc::c_uint::MAX, 0u32) } == 0 {
        return;
    }
    let open: Vec<i32> = std::fs::read_dir("/dev/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|fd| *fd > 2)
                .collect()
        })
        .unwrap_or_default();
    for fd in open {
        // SAFETY: as above (the directory's own descriptor is closed already: EBADF).
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_hidden_command_is_the_one_the_command_line_knows() {
        let cli =
            crate::cli::Cli::try_parse_from(["orchestrate", COMMAND, "slurm", "job-1"]).unwrap();
        assert!(matches!(
            cli.command,
            crate::cli::Command::RunnerWatchdog { kind, handle } if kind == "slurm" && handle == "job-1"
        ));
    }
}
