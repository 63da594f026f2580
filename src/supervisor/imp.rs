//! The per-child state machine and its one `select!` loop.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::pin::pin;
use std::process::{Command, Stdio};

use nix::sys::signal::Signal;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::framing::{Frame, LineFramer};
use super::outcome::{Outcome, StopReason, SuperviseError};
use super::unix::{self, LeaderExit};
use crate::limits::{SupervisionLimits, KILLED_PIPE_DRAIN};

/// Bytes read from a pipe at once. Large enough that a fast child costs few wake-ups.
const READ_CHUNK_BYTES: usize = 128 * 1024;
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// When both pipes are closed but no SIGCHLD has told us about the leader yet, look again
/// this often, so that a lost wake-up can never hang a run.
const EXIT_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct ChildSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Added to the inherited environment.
    pub env: Vec<(OsString, OsString)>,
}

/// Receives the child's stdout as framed lines, in order.
pub(crate) trait LineSink {
    fn on_line(&mut self, line: &[u8]);
    fn on_too_long(&mut self, bytes: u64);
    /// Whether the dialect's final event has been seen.
    fn terminal_seen(&self) -> bool;
    /// Called after each chunk of stdout: a place to publish progress, at most once per
    /// read rather than once per line.
    fn after_chunk(&mut self) {}
}

/// Where the raw bytes go: the session copy of stdout, and the stderr log.
pub(crate) struct OutputSinks<'a> {
    pub stdout_copy: &'a mut (dyn Write + Send),
    pub stderr_copy: &'a mut (dyn Write + Send),
}

/// Requests from outside the loop. `cancel` stops gracefully; `kill` stops at once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Controls {
    pub cancel: CancellationToken,
    pub kill: CancellationToken,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// The final event arrived; the child may still exit on its own until the timer fires.
    ExitGrace,
    /// SIGTERM sent to the group; SIGKILL when the timer fires.
    Terminating,
    /// SIGKILL sent; the pipes get a last bounded chance to close.
    Killed,
    /// The leader exited on its own but descendants still hold a pipe.
    Draining,
}

struct Machine<'a> {
    pgid: u32,
    limits: SupervisionLimits,
    phase: Phase,
    phase_deadline: Option<Instant>,
    stop: Option<StopReason>,
    escalated_to_kill: bool,
    leaked: bool,
    exit: Option<LeaderExit>,
    stdout_open: bool,
    stderr_open: bool,
    stdout_bytes: u64,
    stderr_bytes: u64,
    over_cap: bool,
    stderr_tail: Vec<u8>,
    framer: LineFramer,
    sink: &'a mut (dyn LineSink + Send),
    out: OutputSinks<'a>,
    session_write_error: Option<String>,
    last_activity: Instant,
}

/// Runs `spec` to the end under `limits` and returns how it ended. Every path leaves the
/// child's group killed and its leader reaped.
pub(crate) async fn supervise<'a>(
    spec: &ChildSpec,
    limits: SupervisionLimits,
    sink: &'a mut (dyn LineSink + Send),
    out: OutputSinks<'a>,
    controls: &Controls,
) -> Result<Outcome, SuperviseError> {
    // Registered before the spawn so that an early exit cannot be missed.
    let mut sigchld = signal(SignalKind::child())?;

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        // Shells keep PWD in step with the working directory, and some CLIs (opencode)
        // take their project folder from it rather than from getcwd().
        .env("PWD", &spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = unix::spawn_in_new_group(cmd).map_err(|source| SuperviseError::Spawn {
        program: spec.program.to_string_lossy().into_owned(),
        source,
    })?;
    let pid = child.id();
    // From here on, any early return must not leave the group behind.
    let guard = GroupGuard { pgid: pid };

    let mut stdout = pipe::Receiver::from_owned_fd(child.stdout.take().expect("piped").into())?;
    let mut stderr = pipe::Receiver::from_owned_fd(child.stderr.take().expect("piped").into())?;

    let mut m = Machine {
        pgid: pid,
        limits,
        phase: Phase::Running,
        phase_deadline: None,
        stop: None,
        escalated_to_kill: false,
        leaked: false,
        exit: None,
        stdout_open: true,
        stderr_open: true,
        stdout_bytes: 0,
        stderr_bytes: 0,
        over_cap: false,
        stderr_tail: Vec::new(),
        framer: LineFramer::new(limits.max_line_bytes),
        sink,
        out,
        session_write_error: None,
        last_activity: start,
    };

    let runtime_deadline = start + limits.runtime_timeout;
    let mut idle = pin!(tokio::time::sleep(limits.idle_timeout));
    let mut obuf = vec![0u8; READ_CHUNK_BYTES];
    let mut ebuf = vec![0u8; READ_CHUNK_BYTES / 4];
    let far_future = start + std::time::Duration::from_secs(86_400 * 365);

    m.exit = unix::peek_exit(pid)?;
    loop {
        if m.exit.is_some() && !m.stdout_open && !m.stderr_open {
            break;
        }
        let phase_deadline = m.phase_deadline.unwrap_or(far_future);
        let counting_time = matches!(m.phase, Phase::Running | Phase::ExitGrace);
        tokio::select! {
            _ = controls.kill.cancelled(), if m.phase != Phase::Killed => {
                m.request_stop(StopReason::Cancelled);
                m.kill_now();
            }
            _ = controls.cancel.cancelled(), if counting_time => {
                m.request_stop(StopReason::Cancelled);
            }
            r = stdout.read(&mut obuf), if m.stdout_open => match r {
                Ok(0) | Err(_) => {
                    m.stdout_open = false;
                    m.finish_stdout();
                    m.on_pipe_closed(pid)?;
                }
                Ok(n) => m.on_stdout(&obuf[..n]),
            },
            r = stderr.read(&mut ebuf), if m.stderr_open => match r {
                Ok(0) | Err(_) => {
                    m.stderr_open = false;
                    m.on_pipe_closed(pid)?;
                }
                Ok(n) => m.on_stderr(&ebuf[..n]),
            },
            _ = sigchld.recv(), if m.exit.is_none() => {
                if let Some(exit) = unix::peek_exit(pid)? {
                    m.on_leader_exit(exit);
                }
            }
            _ = tokio::time::sleep(EXIT_POLL_INTERVAL), if m.exit.is_none() && !m.stdout_open && !m.stderr_open => {
                if let Some(exit) = unix::peek_exit(pid)? {
                    m.on_leader_exit(exit);
                }
            }
            _ = sleep_until(runtime_deadline), if counting_time => {
                m.request_stop(StopReason::RuntimeTimeout);
            }
            _ = &mut idle, if m.phase == Phase::Running => {
                // The timer is not reset per chunk (that would cost a timer-wheel update
                // per read); it is re-armed lazily from the last activity instead.
                let due = m.last_activity + m.limits.idle_timeout;
                if due > Instant::now() {
                    idle.as_mut().reset(due);
                } else {
                    m.request_stop(StopReason::IdleTimeout);
                }
            }
            _ = sleep_until(phase_deadline), if m.phase_deadline.is_some() => {
                m.on_phase_deadline();
            }
        }
    }

    // The leader's zombie still pins the group id, so this cannot hit a stranger. It
    // reaches descendants that closed their pipes but stayed in the group.
    let _ = unix::signal_group(pid, Signal::SIGKILL);
    std::mem::forget(guard);
    child.wait()?;
    // A zombie leader answers signals too, so survivors can only be counted once it is
    // reaped; a null signal cannot harm whoever answers.
    if unix::group_exists(pid) {
        m.leaked = true;
    }
    let elapsed = start.elapsed();

    let exit = m.exit.expect("loop ends only after the leader exited");
    Ok(Outcome {
        exit,
        stop: m.stop,
        escalated_to_kill: m.escalated_to_kill,
        leaked: m.leaked,
        stdout_bytes: m.stdout_bytes,
        stderr_bytes: m.stderr_bytes,
        stderr_tail: String::from_utf8_lossy(&m.stderr_tail).into_owned(),
        session_write_error: m.session_write_error,
        elapsed,
    })
}

fn deliver(sink: &mut (dyn LineSink + Send), frame: Frame<'_>) {
    match frame {
        Frame::Line(line) => sink.on_line(line),
        Frame::TooLong { bytes } => sink.on_too_long(bytes),
    }
}

/// Kills the group if `supervise` returns early through `?`.
struct GroupGuard {
    pgid: u32,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = unix::signal_group(self.pgid, Signal::SIGKILL);
    }
}

impl Machine<'_> {
    fn on_stdout(&mut self, chunk: &[u8]) {
        self.last_activity = Instant::now();
        let Some(chunk) = self.admit(chunk, true) else {
            return;
        };
        if let Err(e) = self.out.stdout_copy.write_all(chunk) {
            self.note_session_error(e);
        }
        let sink = &mut *self.sink;
        self.framer.push(chunk, &mut |frame| deliver(sink, frame));
        self.sink.after_chunk();
        if self.phase == Phase::Running && self.sink.terminal_seen() {
            self.phase = Phase::ExitGrace;
            self.phase_deadline = Some(Instant::now() + self.limits.terminal_exit_grace);
        }
    }

    fn finish_stdout(&mut self) {
        let sink = &mut *self.sink;
        self.framer.finish(&mut |frame| deliver(sink, frame));
        let _ = self.out.stdout_copy.flush();
    }

    fn on_stderr(&mut self, chunk: &[u8]) {
        self.last_activity = Instant::now();
        let Some(chunk) = self.admit(chunk, false) else {
            return;
        };
        let _ = self.out.stderr_copy.write_all(chunk);
        self.stderr_tail.extend_from_slice(chunk);
        if self.stderr_tail.len() > STDERR_TAIL_BYTES * 2 {
            let cut = self.stderr_tail.len() - STDERR_TAIL_BYTES;
            self.stderr_tail.drain(..cut);
        }
    }

    /// Counts the chunk against the hard cap and returns the part that fits. Past the cap
    /// the child is stopped and its further output is read and dropped, so it never
    /// blocks on a full pipe while it is being stopped.
    fn admit<'c>(&mut self, chunk: &'c [u8], is_stdout: bool) -> Option<&'c [u8]> {
        let total = self.stdout_bytes + self.stderr_bytes;
        let room = self.limits.max_output_bytes.saturating_sub(total);
        let n = chunk.len() as u64;
        if is_stdout {
            self.stdout_bytes += n;
        } else {
            self.stderr_bytes += n;
        }
        if self.over_cap {
            return None;
        }
        if n > room {
            self.over_cap = true;
            self.request_stop(StopReason::OutputCap);
            return (room > 0).then(|| &chunk[..room as usize]);
        }
        Some(chunk)
    }

    fn note_session_error(&mut self, e: std::io::Error) {
        if self.session_write_error.is_none() {
            tracing::warn!("failed to write the session file: {e}");
            self.session_write_error = Some(e.to_string());
        }
    }

    /// Starts a graceful stop unless one is already under way.
    fn request_stop(&mut self, reason: StopReason) {
        if matches!(self.phase, Phase::Terminating | Phase::Killed) {
            return;
        }
        if self.exit.is_some() {
            // Nothing left to stop but descendants holding the pipes.
            self.stop.get_or_insert(reason);
            self.kill_now();
            return;
        }
        self.stop.get_or_insert(reason);
        if self.limits.kill_grace.is_zero() {
            self.kill_now();
            return;
        }
        tracing::debug!(
            ?reason,
            pgid = self.pgid,
            "stopping the child: SIGTERM to its group"
        );
        if let Err(e) = unix::signal_group(self.pgid, Signal::SIGTERM) {
            tracing::warn!("failed to send SIGTERM to group {}: {e}", self.pgid);
        }
        self.phase = Phase::Terminating;
        self.phase_deadline = Some(Instant::now() + self.limits.kill_grace);
    }

    fn kill_now(&mut self) {
        if self.phase == Phase::Killed {
            return;
        }
        tracing::debug!(pgid = self.pgid, "SIGKILL to the child's group");
        if let Err(e) = unix::signal_group(self.pgid, Signal::SIGKILL) {
            tracing::warn!("failed to send SIGKILL to group {}: {e}", self.pgid);
        }
        self.phase = Phase::Killed;
        self.phase_deadline = Some(Instant::now() + KILLED_PIPE_DRAIN);
    }

    fn on_phase_deadline(&mut self) {
        self.phase_deadline = None;
        match self.phase {
            Phase::Running => {}
            Phase::ExitGrace => self.request_stop(StopReason::AfterTerminalEvent),
            Phase::Terminating => {
                self.escalated_to_kill = true;
                self.kill_now();
            }
            Phase::Draining => {
                self.leaked = true;
                self.kill_now();
            }
            Phase::Killed => {
                // Whatever still holds the pipes survived SIGKILL to the group (it left
                // the group). Stop reading rather than hang.
                tracing::warn!("the child's pipes stayed open after SIGKILL; giving up on them");
                self.leaked = true;
                self.stdout_open = false;
                self.stderr_open = false;
                self.finish_stdout();
            }
        }
    }

    fn on_leader_exit(&mut self, exit: LeaderExit) {
        self.exit = Some(exit);
        if (self.stdout_open || self.stderr_open)
            && matches!(self.phase, Phase::Running | Phase::ExitGrace)
        {
            self.phase = Phase::Draining;
            self.phase_deadline = Some(Instant::now() + self.limits.drain_after_exit);
        }
    }

    fn on_pipe_closed(&mut self, pid: u32) -> std::io::Result<()> {
        if self.exit.is_none() && !self.stdout_open && !self.stderr_open {
            if let Some(exit) = unix::peek_exit(pid)? {
                self.on_leader_exit(exit);
            }
        }
        Ok(())
    }
}
