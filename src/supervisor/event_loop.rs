//! The per-child `select!` loop: reads the pipes, feeds the lifecycle its events, and
//! carries out what it asks for.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use tokio::io::unix::AsyncFd;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::channel::{ChildInput, InputPipe};
use super::framing::{Frame, LineFramer};
use super::lifecycle::{Action, Graces, Lifecycle, Patience, StreamFacts};
use super::outcome::{Leak, Outcome, StopReason, SuperviseError};
use crate::limits::SupervisionLimits;
use crate::network::{proxy, ChildNetwork};
use crate::platform::{self, Confinement, GroupChild, LeaderExit, Leftovers, SpawnSpec};
use crate::runner::{BoxFuture, Ended, Launch, LocalStop, Runner, Stop};
use crate::sandbox::remote::ReportReader;

/// Bytes read from a pipe at once. Large enough that a fast child costs few wake-ups.
const READ_CHUNK_BYTES: usize = 128 * 1024;
const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Longer stderr lines are not read for retry notices (they are still logged).
const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// When both pipes are closed but no SIGCHLD has told us about the leader yet, look again
/// this often, so that a lost wake-up can never hang a run.
const EXIT_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);
/// How often the run's inbox is looked at while a child that can take messages runs: one
/// `stat` of a file that is absent unless a message was sent.
pub(crate) const MAIL_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// What to run.
#[derive(Debug)]
pub(crate) struct ChildSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// Added to the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Removed from the inherited environment.
    pub env_remove: Vec<OsString>,
    /// What the child may write and reach.
    pub confinement: Confinement,
    /// The child's stdin is a pipe fed from this handle (a backend that talks to its
    /// child); `None`: /dev/null.
    pub stdin: Option<ChildInput>,
    /// Where it runs: the runner prepares the engine, wraps the command, says when a
    /// queued child started, carries out stops, and settles the run once the process
    /// started here is gone.
    pub runner: Box<dyn Runner>,
    /// With `network: provider`: the policy its proxy serves the listeners made in the
    /// child's network namespace with.
    pub network: Option<ChildNetwork>,
    /// The sandbox is built where the child runs, by orchestrate's own process there
    /// (`orchestrate sandbox-exec`), whose first line on stderr says which layers held:
    /// taken off the stream, it is the outcome's `sandbox_layers`.
    pub layers_reported: bool,
}

/// Receives the child's stdout as framed lines, in order.
pub(crate) trait LineSink {
    fn on_line(&mut self, line: &[u8]);
    fn on_too_long(&mut self, bytes: u64);
    /// A line of stderr (never the answer; some CLIs say only there that they retry).
    fn on_stderr_line(&mut self, _line: &[u8]) {}
    /// What the stream has shown so far: progress, tools, retries, its final event, a
    /// budget reached.
    fn facts(&self) -> StreamFacts;
    /// Called after each chunk of stdout: a place to publish progress, at most once per
    /// read rather than once per line.
    fn after_chunk(&mut self) {}
    /// A graceful stop begins: asks the child to stop its work through its own protocol
    /// (written to its stdin). Returns false when there was nothing to cancel, and the
    /// stop goes on to SIGTERM at once.
    fn cancel(&mut self) -> bool {
        false
    }
    /// Whether messages sent to the run reach the child while it runs: the loop then calls
    /// [`LineSink::check_mail`] every [`MAIL_CHECK_INTERVAL`].
    fn listens(&self) -> bool {
        false
    }
    fn check_mail(&mut self) {}
}

/// Where the raw bytes go: the session copy of stdout, the stderr log, and the record of
/// what was written to the child's stdin (when it has a pipe there).
pub(crate) struct OutputSinks<'a> {
    pub stdout_copy: &'a mut (dyn Write + Send),
    pub stderr_copy: &'a mut (dyn Write + Send),
    pub stdin_copy: Option<&'a mut (dyn Write + Send)>,
}

/// Requests from outside the loop. `cancel` stops gracefully; `kill` stops at once;
/// `budget` stops gracefully because a budget shared with other runs (a fan-out's total
/// cost) was spent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Controls {
    pub cancel: CancellationToken,
    pub kill: CancellationToken,
    pub budget: CancellationToken,
}

struct Machine<'a> {
    group: GroupChild,
    limits: SupervisionLimits,
    life: Lifecycle,
    stdout_open: bool,
    stderr_open: bool,
    stdout_bytes: u64,
    stderr_bytes: u64,
    stderr_tail: Vec<u8>,
    framer: LineFramer,
    stderr_framer: LineFramer,
    sink: &'a mut (dyn LineSink + Send),
    out: OutputSinks<'a>,
    session_write_error: Option<String>,
    runner: &'a mut dyn Runner,
    /// When the child started: at once, or when its engine started it (or it printed).
    started: Option<Instant>,
    /// When the local process is SIGKILLed, if it has not exited after a stop through
    /// the engine.
    kill_local_at: Option<Instant>,
    /// Takes the sandbox's report of its layers off stderr, where the child runs
    /// elsewhere (`ChildSpec::layers_reported`).
    report: Option<ReportReader>,
}

/// Runs `spec` to the end under `limits` and returns how it ended. Every path leaves the
/// child's group killed and its leader reaped, and its runner settled.
pub(crate) async fn supervise<'a>(
    spec: &'a mut ChildSpec,
    limits: SupervisionLimits,
    sink: &'a mut (dyn LineSink + Send),
    out: OutputSinks<'a>,
    controls: &Controls,
) -> Result<Outcome, SuperviseError> {
    // Registered before the spawn so that an early exit cannot be missed.
    let mut sigchld = signal(SignalKind::child())?;

    // An engine that cannot take the child says so at once, in its own words.
    spec.runner.prepare().await?;
    let launch = spec.runner.wrap(Launch {
        program: spec.program.clone(),
        args: spec.args.clone(),
    });
    let queue = spec.runner.queue();

    let start = Instant::now();
    // From here on, dropping `group` on an early return kills the child's whole tree.
    let mut group = platform::spawn(SpawnSpec {
        program: launch.program.clone(),
        args: launch.args,
        cwd: spec.cwd.clone(),
        env: spec.env.clone(),
        env_remove: spec.env_remove.clone(),
        confinement: spec.confinement.clone(),
        stdin_pipe: spec.stdin.is_some(),
    })
    .map_err(|source| SuperviseError::Spawn {
        program: launch.program.to_string_lossy().into_owned(),
        source,
    })?;
    // The proxy lives until this function returns: after the child's whole tree is gone.
    let (_proxy, network_fallback) = match &spec.network {
        None => (None, None),
        Some(net) => match group.take_listeners() {
            Some(listeners) => (
                Some(proxy::serve(
                    net.policy.clone(),
                    net.log.clone(),
                    listeners,
                )?),
                None,
            ),
            None => (
                None,
                Some(
                    group
                        .degraded()
                        .unwrap_or("no network namespace here")
                        .to_string(),
                ),
            ),
        },
    };
    let mut stdout = pipe::Receiver::from_owned_fd(group.take_stdout().expect("piped"))?;
    let mut stderr = pipe::Receiver::from_owned_fd(group.take_stderr().expect("piped"))?;
    let OutputSinks {
        stdout_copy,
        stderr_copy,
        stdin_copy,
    } = out;
    let mut input = match (&spec.stdin, group.take_stdin()) {
        (Some(handle), Some(fd)) => Some(InputPipe::new(
            handle.clone(),
            pipe::Sender::from_owned_fd(fd)?,
            stdin_copy,
        )),
        _ => None,
    };
    let waker = input.is_some().then(|| spec.stdin.clone()).flatten();
    let out = OutputSinks {
        stdout_copy,
        stderr_copy,
        stdin_copy: None,
    };
    // Where the child's exit arrives on a pipe of its own (its controller reports it),
    // rather than only as SIGCHLD.
    let exit_notice = match group.exit_notice() {
        // SAFETY: the AsyncFd owns the descriptor (a duplicate), which stays open and the
        // same for its whole life.
        Some(fd) => Some(unsafe { AsyncFd::register(fd?) }.map_err(std::io::Error::from)?),
        None => None,
    };

    // Every limit counts from the same instant as `elapsed` (before the spawn), so none is
    // late by the time the spawn took; a job in a queue counts them from when it starts.
    let graces = Graces::new(&limits, input.is_some());
    let life = match &queue {
        Some(queue) => Lifecycle::queued(graces, Patience::new(&limits), start, queue.timeout),
        None => Lifecycle::new(graces, Patience::new(&limits), start),
    };
    let mut started_signal = queue.map(|q| q.started);
    let mut m = Machine {
        group,
        limits,
        life,
        stdout_open: true,
        stderr_open: true,
        stdout_bytes: 0,
        stderr_bytes: 0,
        stderr_tail: Vec::new(),
        framer: LineFramer::new(limits.max_line_bytes),
        stderr_framer: LineFramer::new(MAX_STDERR_LINE_BYTES),
        sink,
        out,
        session_write_error: None,
        runner: &mut *spec.runner,
        started: started_signal.is_none().then_some(start),
        kill_local_at: None,
        report: spec.layers_reported.then(ReportReader::new),
    };

    let mut obuf = vec![0u8; READ_CHUNK_BYTES];
    let mut ebuf = vec![0u8; READ_CHUNK_BYTES / 4];
    let far_future = start + std::time::Duration::from_secs(86_400 * 365);

    let listens = m.sink.listens();
    let mut next_mail_check = start + MAIL_CHECK_INTERVAL;
    m.look_for_exit()?;
    loop {
        if m.life.has_exited() && !m.pipes_open() {
            break;
        }
        // One timer for whatever is due next: the runtime limit, the watchdog's idle, tool
        // or connect limit, or the phase's own deadline. Recomputed each turn of the loop,
        // so it is never armed for a moment that has moved.
        let due = m.life.next_due();
        let counts_time = m.life.counts_time();
        tokio::select! {
            _ = controls.kill.cancelled(), if m.life.accepts_kill() => {
                m.look_for_exit()?;
                let action = m.life.kill(Instant::now(), m.pipes_open());
                m.act(action);
            }
            _ = controls.cancel.cancelled(), if counts_time => {
                m.stop(StopReason::Cancelled)?;
            }
            // A shared budget spent elsewhere stops a child still working, not one that
            // has given its answer.
            _ = controls.budget.cancelled(), if m.life.is_running() => {
                m.stop(StopReason::Budget)?;
            }
            r = stdout.read(&mut obuf), if m.stdout_open => match r {
                Ok(0) | Err(_) => {
                    m.stdout_open = false;
                    m.finish_stdout();
                    m.on_pipe_closed()?;
                }
                Ok(n) => m.on_stdout(&obuf[..n])?,
            },
            r = stderr.read(&mut ebuf), if m.stderr_open => match r {
                Ok(0) | Err(_) => {
                    m.stderr_open = false;
                    if let Some(held) = m.report.as_mut().map(ReportReader::finish) {
                        m.pass_stderr(&held);
                    }
                    m.on_pipe_closed()?;
                }
                Ok(n) => m.on_stderr(&ebuf[..n])?,
            },
            _ = sigchld.recv(), if !m.life.has_exited() => {
                m.look_for_exit()?;
            }
            ready = exit_readable(exit_notice.as_ref()), if !m.life.has_exited() => {
                if let Ok(mut guard) = ready {
                    guard.clear_ready();
                }
                m.look_for_exit()?;
            }
            _ = tokio::time::sleep(EXIT_POLL_INTERVAL), if !m.life.has_exited() && !m.pipes_open() => {
                m.look_for_exit()?;
            }
            // The child's stdin takes what is queued for it, as fast as it reads.
            w = write_input(input.as_mut()), if input.as_ref().is_some_and(InputPipe::wants_write) => {
                if let Some(p) = input.as_mut() {
                    p.written(w);
                }
            }
            // Something was queued from outside the loop (its own writes are seen at the
            // next turn), or the input was closed.
            () = input_queued(waker.as_ref()), if input.is_some() => {
                if let Some(p) = input.as_mut() {
                    p.close_if_done();
                }
            }
            _ = sleep_until(m.kill_local_at.unwrap_or(far_future)), if m.kill_local_at.is_some() && !m.life.has_exited() => {
                m.kill_local();
            }
            () = started(started_signal.as_mut()), if started_signal.is_some() && !m.life.has_exited() => {
                started_signal = None;
                m.job_started(Instant::now());
            }
            // Messages sent to the run, for a child that takes them while it works.
            _ = sleep_until(next_mail_check), if listens && m.life.is_running() => {
                next_mail_check = Instant::now() + MAIL_CHECK_INTERVAL;
                m.sink.check_mail();
            }
            _ = sleep_until(due.unwrap_or(far_future)), if due.is_some() => {
                // Decide on the child's state as it is now, not as a late SIGCHLD left it.
                m.look_for_exit()?;
                let action = m.life.tick(Instant::now(), m.pipes_open());
                m.act(action);
            }
        }
    }

    drop(started_signal);
    // Writers are told that the child's input is gone.
    drop(input);
    // Kills descendants that outlived the child (closed their pipes, left its group).
    m.group.kill_and_reap()?;
    let leftovers = m.group.leftovers();
    let (exit, termination, leak) = m
        .life
        .finish(leftovers != Leftovers::None)
        .expect("the loop ends only after the leader exited");
    let stderr_tail = String::from_utf8_lossy(&m.stderr_tail).into_owned();
    // The run is over only once the engine is done with the child (a job can outlive the
    // process that submitted it).
    let settled = m
        .runner
        .settle(Ended {
            exit_code: exit.code(),
            stderr_tail: &stderr_tail,
            started: m.started.is_some(),
        })
        .await;
    let queue_wait = m
        .started
        .unwrap_or_else(Instant::now)
        .saturating_duration_since(start);
    let elapsed = start.elapsed();

    // What the leftovers were found in decides how they are named.
    let leak = match (leak, leftovers) {
        // The engine's own helpers, not descendants of the agent that outlived it.
        (Leak::StayedInGroup | Leak::Outlived, _) if m.runner.owns_local_leftovers() => Leak::None,
        (Leak::StayedInGroup, Leftovers::InTree) => Leak::Outlived,
        (leak, _) => leak,
    };
    Ok(Outcome {
        exit,
        termination,
        leak,
        containment: m.group.containment(),
        containment_degraded: m.group.degraded().map(str::to_string),
        sandbox_layers: match &m.report {
            None => m.group.layers().clone(),
            Some(report) => report.layers().cloned().unwrap_or_default(),
        },
        stdout_bytes: m.stdout_bytes,
        stderr_tail,
        session_write_error: m.session_write_error,
        elapsed,
        queue_wait,
        settled,
        network_fallback,
    })
}

/// Writes what the child's stdin takes; never where there is no pipe.
async fn write_input(input: Option<&mut InputPipe<'_>>) -> std::io::Result<usize> {
    match input {
        Some(p) => p.write_some().await,
        None => std::future::pending().await,
    }
}

/// Resolves when a writer outside the loop queued something for the child.
async fn input_queued(input: Option<&ChildInput>) {
    match input {
        Some(handle) => handle.queued().await,
        None => std::future::pending().await,
    }
}

/// Resolves once the engine has started a queued child; never where there is no queue.
async fn started(signal: Option<&mut BoxFuture<'static, ()>>) {
    match signal {
        Some(signal) => signal.await,
        None => std::future::pending().await,
    }
}

/// Waits until the child's exit notice is readable; never, where there is none.
async fn exit_readable(
    notice: Option<&AsyncFd<OwnedFd>>,
) -> std::io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, OwnedFd>> {
    match notice {
        Some(fd) => fd.readable().await,
        None => std::future::pending().await,
    }
}

fn deliver(sink: &mut (dyn LineSink + Send), frame: Frame<'_>) {
    match frame {
        Frame::Line(line) => sink.on_line(line),
        Frame::TooLong { bytes } => sink.on_too_long(bytes),
    }
}

impl Machine<'_> {
    fn pipes_open(&self) -> bool {
        self.stdout_open || self.stderr_open
    }

    fn on_stdout(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        // A queued job that prints has started, whether or not the queue said so yet.
        self.job_started(Instant::now());
        self.life.on_output(Instant::now());
        let Some(chunk) = self.admit(chunk, true)? else {
            return Ok(());
        };
        if let Err(e) = self.out.stdout_copy.write_all(chunk) {
            self.note_session_error(e);
        }
        let sink = &mut *self.sink;
        self.framer.push(chunk, &mut |frame| deliver(sink, frame));
        self.sink.after_chunk();
        self.read_facts()
    }

    fn finish_stdout(&mut self) {
        let sink = &mut *self.sink;
        self.framer.finish(&mut |frame| deliver(sink, frame));
        let _ = self.out.stdout_copy.flush();
    }

    /// Hands the lifecycle what the stream showed, and stops the child at once when the
    /// stream asks (a budget reached: within the chunk that reached it).
    fn read_facts(&mut self) -> std::io::Result<()> {
        let facts = self.sink.facts();
        let now = Instant::now();
        self.life.on_facts(&facts, now);
        if let Some(reason) = facts.stop {
            self.stop(reason)?;
        }
        if facts.terminal {
            let action = self.life.terminal_event(now);
            self.act(action);
        }
        Ok(())
    }

    fn on_stderr(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        self.life.on_output(Instant::now());
        let Some(chunk) = self.admit(chunk, false)? else {
            return Ok(());
        };
        match self.report.as_mut().and_then(|r| r.push(chunk)) {
            Some(passed) => self.pass_stderr(&passed),
            None => self.pass_stderr(chunk),
        }
        self.read_facts()
    }

    fn pass_stderr(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        let _ = self.out.stderr_copy.write_all(chunk);
        self.stderr_tail.extend_from_slice(chunk);
        if self.stderr_tail.len() > STDERR_TAIL_BYTES * 2 {
            let cut = self.stderr_tail.len() - STDERR_TAIL_BYTES;
            self.stderr_tail.drain(..cut);
        }
        let sink = &mut *self.sink;
        self.stderr_framer.push(chunk, &mut |frame| {
            if let Frame::Line(line) = frame {
                sink.on_stderr_line(line);
            }
        });
    }

    /// Counts the chunk against the hard cap and returns the part that fits. Past the cap
    /// the child is stopped and its further output is read and dropped, so it never
    /// blocks on a full pipe while it is being stopped.
    fn admit<'c>(&mut self, chunk: &'c [u8], is_stdout: bool) -> std::io::Result<Option<&'c [u8]>> {
        let before = self.stdout_bytes + self.stderr_bytes;
        let n = chunk.len() as u64;
        if is_stdout {
            self.stdout_bytes += n;
        } else {
            self.stderr_bytes += n;
        }
        let max = self.limits.max_output_bytes;
        if before > max {
            // Already over the cap, and the stop is under way.
            return Ok(None);
        }
        let room = max - before;
        if n > room {
            self.stop(StopReason::OutputCap)?;
            return Ok((room > 0).then(|| &chunk[..room as usize]));
        }
        Ok(Some(chunk))
    }

    fn note_session_error(&mut self, e: std::io::Error) {
        if self.session_write_error.is_none() {
            tracing::warn!("failed to write the session file: {e}");
            self.session_write_error = Some(e.to_string());
        }
    }

    fn stop(&mut self, reason: StopReason) -> std::io::Result<()> {
        self.look_for_exit()?;
        let action = self.life.stop(reason, Instant::now(), self.pipes_open());
        if action != Action::Nothing {
            tracing::debug!(?reason, id = self.group.id(), "stopping the child");
        }
        self.act(action);
        Ok(())
    }

    /// A queued child has started: its engine said so, or it printed.
    fn job_started(&mut self, now: Instant) {
        if self.started.is_none() {
            self.started = Some(now);
            self.life.started(now);
        }
    }

    fn act(&mut self, action: Action) {
        let stop = match action {
            Action::Nothing => return,
            Action::Cancel => {
                if !self.sink.cancel() {
                    let next = self.life.cancel_unavailable(Instant::now());
                    self.act(next);
                }
                return;
            }
            Action::AbandonPipes => {
                tracing::warn!("the child's pipes stayed open after SIGKILL; giving up on them");
                self.stdout_open = false;
                self.stderr_open = false;
                self.finish_stdout();
                return;
            }
            Action::Terminate => Stop::Graceful,
            Action::Kill => Stop::Kill,
        };
        let local = self.runner.stop(stop, self.started.is_some());
        self.act_locally(local);
    }

    /// What a stop means for the process started here.
    fn act_locally(&mut self, local: LocalStop) {
        match local.signal {
            None => {}
            Some(Stop::Graceful) => {
                tracing::debug!(id = self.group.id(), "SIGTERM to the child's tree");
                if let Err(e) = self.group.terminate() {
                    tracing::warn!("failed to send SIGTERM to the child's tree: {e}");
                }
            }
            Some(Stop::Kill) => self.kill_local(),
        }
        if let Some(after) = local.kill_after {
            self.kill_local_at = Some(Instant::now() + after);
        }
    }

    /// SIGKILL to the tree of the process started here.
    fn kill_local(&mut self) {
        self.kill_local_at = None;
        tracing::debug!(id = self.group.id(), "SIGKILL to the child's tree");
        if let Err(e) = self.group.kill() {
            tracing::warn!("failed to kill the child's tree: {e}");
        }
    }

    /// Tells the lifecycle if the leader has exited (without reaping it).
    fn look_for_exit(&mut self) -> std::io::Result<()> {
        if !self.life.has_exited() {
            if let Some(exit) = self.group.peek_exit()? {
                self.on_leader_exit(exit);
            }
        }
        Ok(())
    }

    fn on_leader_exit(&mut self, exit: LeaderExit) {
        self.life
            .leader_exited(exit, Instant::now(), self.pipes_open());
    }

    fn on_pipe_closed(&mut self) -> std::io::Result<()> {
        if !self.pipes_open() {
            self.look_for_exit()?;
        }
        Ok(())
    }
}
