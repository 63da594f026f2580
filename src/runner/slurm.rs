//! The Slurm runner: the child's command line under `srun`, and the job seen from outside
//! through `squeue` and `scancel`.
//!
//! What Slurm does, as measured on Slurm 22.05 (and why this module does what it does):
//! - `srun` streams the task's stdout and stderr and returns its exit status (128+N when a
//!   signal killed it). Without `--unbuffered` stdout stays a pipe and lines still arrive
//!   as they are written; with it the task would get a pseudo-terminal, which changes how
//!   agent CLIs print.
//! - A SIGTERM to `srun` kills the step at once, with no grace: a graceful stop is
//!   `scancel --signal=TERM`, which reaches every process of the step and nothing more.
//! - `srun` returns 0 on a node failure (the job ends `NODE_FAIL`), and a job can outlive
//!   its `srun` (when srun and its helper process die together, until the cluster's
//!   `InactiveLimit` or the job's `--time`): the job's own state, not srun's status, says
//!   how it ended and whether it is gone.
//! - `--chdir` to a missing directory runs the task in `/tmp` and returns 0, so the
//!   directory is checked first; a controller that is down costs srun ~10 s of retries
//!   where `scontrol ping` answers at once.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::watchdog::Watchdog;
use super::{
    BoxFuture, Ended, EngineError, JobId, JobSpec, Kind, Launch, LocalStop, Queue, Runner, Settled,
    Stop,
};

pub(super) const KIND: Kind = Kind {
    name: "slurm",
    title: "Slurm",
    here: false,
    start,
    abandon,
};

/// Longest wait for one `squeue`/`scancel`/`scontrol` call (a controller that does not
/// answer makes them retry for about its `MessageTimeout`, 10 s by default).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a queued job is looked at: quickly at first (most jobs start at once), then
/// less often, so that a fan-out of many queued jobs does not load the controller.
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(100);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// After srun exited: how long to wait for Slurm to report the job gone (a step that
/// ignores SIGTERM is SIGKILLed after the cluster's `KillWait`, 30 s by default).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// After `scancel --signal=KILL`, how long srun gets to report the step's end and exit on
/// its own before it is SIGKILLed here. Killed at once, srun cannot tell Slurm the job is
/// over, and the job stays COMPLETING for seconds longer.
const SRUN_EXIT_AFTER_KILL: Duration = Duration::from_secs(2);
/// Once orchestrate is gone, how long its watchdog keeps looking for a job of the run's
/// name after cancelling it: a request srun sent just before it died can still make one.
const ABANDON_WATCH: Duration = Duration::from_secs(3);
const ABANDON_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// States after which a job runs nothing any more (`squeue --states`' long names).
const FINAL_STATES: &[&str] = &[
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "REVOKED",
    "SPECIAL_EXIT",
    "TIMEOUT",
];
/// Final states that are the engine's failure rather than the task's own ending.
const ENGINE_FAILURES: &[&str] = &[
    "BOOT_FAIL",
    "DEADLINE",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
];

#[derive(Debug, thiserror::Error)]
enum SlurmError {
    #[error("srun is not on PATH: install Slurm's client commands (Debian: slurm-client) where orchestrate runs, or use --runner local")]
    NoSrun,
    #[error("SLURM_CONF names {}, which does not exist", .0.display())]
    NoConfig(PathBuf),
    #[error("Slurm's controller did not answer: {0}")]
    ControllerDown(String),
    #[error("the working directory {} does not exist here (srun would run the job in /tmp instead)", .0.display())]
    NoCwd(PathBuf),
    #[error("{program} failed: {source}")]
    Command {
        program: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{program} did not answer within {}s", COMMAND_TIMEOUT.as_secs())]
    CommandTimeout { program: &'static str },
}

impl From<SlurmError> for EngineError {
    fn from(e: SlurmError) -> EngineError {
        match e {
            SlurmError::NoSrun => EngineError::NotInstalled(Box::new(e)),
            e => EngineError::Refused(Box::new(e)),
        }
    }
}

/// The job of one attempt: its name (`orchestrate-<runId>`, and `.<attempt>` for a retry:
/// how it is found, and cancelled before its id is known), and how long it may wait in
/// the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SlurmJob {
    name: String,
    queue_timeout: Duration,
}

impl SlurmJob {
    fn new(run_id: &str, attempt: u32, queue_timeout: Duration) -> SlurmJob {
        let name = match attempt {
            0 | 1 => format!("orchestrate-{run_id}"),
            n => format!("orchestrate-{run_id}.{n}"),
        };
        SlurmJob {
            name,
            queue_timeout,
        }
    }
}

fn start(spec: &JobSpec<'_>) -> Box<dyn Runner> {
    Box::new(Slurm {
        job: SlurmJob::new(spec.run_id, spec.attempt, spec.queue_timeout),
        cwd: spec.cwd.to_path_buf(),
        time_limit: spec.time_limit,
        args: spec.args.to_vec(),
        seen: Arc::default(),
        watchdog: None,
        warnings: Vec::new(),
    })
}

/// One attempt's child as a Slurm job.
#[derive(Debug)]
struct Slurm {
    job: SlurmJob,
    cwd: PathBuf,
    time_limit: Duration,
    args: Vec<String>,
    /// What the queue showed, as the watcher of its start saw it.
    seen: Arc<Mutex<Seen>>,
    /// Cancels the job should orchestrate die before it is settled.
    watchdog: Option<Watchdog>,
    warnings: Vec<String>,
}

/// The looks at a job in the queue.
#[derive(Debug, Default)]
struct Seen {
    /// The last one.
    last: Option<JobView>,
    /// Why it was pending at the last look before it started.
    pending_reason: Option<String>,
}

impl Slurm {
    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whom scancel is for: the job's id once known (a name could also match a job of a
    /// later attempt), else its name.
    fn target(&self) -> Target {
        match &self.seen().last {
            Some(view) => Target::Id(view.id),
            None => Target::Name(self.job.name.clone()),
        }
    }
}

impl Runner for Slurm {
    /// The preflight, and the watchdog that cancels the job should orchestrate die (both
    /// at once: each is a process start and a few milliseconds).
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async move {
            let (watchdog, ready) =
                tokio::join!(Watchdog::start(&KIND, &self.job.name), preflight(&self.cwd));
            match watchdog {
                Ok(w) => self.watchdog = Some(w),
                Err(e) => self.warnings.push(format!(
                    "no watchdog for Slurm job {} ({e}): had orchestrate been killed, the job would have run on until the cluster's InactiveLimit or its --time",
                    self.job.name
                )),
            }
            if let Err(e) = ready {
                // Nothing was submitted: nothing to cancel.
                if let Some(w) = self.watchdog.take() {
                    w.settled().await;
                }
                return Err(e.into());
            }
            Ok(())
        })
    }

    fn wrap(&self, child: Launch) -> Launch {
        command_line(&self.job, &self.cwd, self.time_limit, &self.args, child)
    }

    fn queue(&mut self) -> Option<Queue> {
        let started = watch_start(self.job.name.clone(), self.seen.clone());
        Some(Queue {
            timeout: self.job.queue_timeout,
            started: Box::pin(async move {
                if started.await.is_err() {
                    std::future::pending::<()>().await;
                }
            }),
        })
    }

    /// A graceful stop signals the step's processes through Slurm (a SIGTERM to srun
    /// would kill the step at once, with no grace); a job still in the queue is
    /// cancelled, as SIGTERM to its srun also does. A kill SIGKILLs the step, and srun
    /// here if it has not exited shortly after.
    fn stop(&mut self, stop: Stop, started: bool) -> LocalStop {
        let target = self.target();
        match stop {
            Stop::Graceful if !started => {
                tracing::debug!(?target, "cancelling the queued Slurm job");
                scancel(Target::Name(self.job.name.clone()), None);
                LocalStop {
                    signal: Some(Stop::Graceful),
                    kill_after: None,
                }
            }
            Stop::Graceful => {
                tracing::debug!(?target, "SIGTERM to the Slurm job's processes");
                scancel(target, Some("TERM"));
                LocalStop::default()
            }
            Stop::Kill => {
                tracing::debug!(?target, "SIGKILL to the Slurm job's processes");
                scancel(target, Some("KILL"));
                LocalStop {
                    signal: None,
                    kill_after: Some(SRUN_EXIT_AFTER_KILL),
                }
            }
        }
    }

    /// Waits until Slurm reports the job finished or forgotten (a job can outlive its
    /// srun), then lets the watchdog go.
    fn settle<'a>(&'a mut self, ended: Ended<'a>) -> BoxFuture<'a, Settled> {
        Box::pin(async move {
            let (known, seen_node, pending_reason) = {
                let seen = self.seen();
                let last = seen.last.as_ref();
                (
                    last.map(|v| v.id),
                    last.and_then(|v| v.node.clone()),
                    seen.pending_reason.clone(),
                )
            };
            let gone = wait_gone(&self.job.name, known, SETTLE_TIMEOUT).await;
            // The node as seen while it ran (a finished job may no longer say).
            let node = seen_node.or_else(|| gone.last.as_ref().and_then(|v| v.node.clone()));
            let failure = failure(gone.last.as_ref(), node.as_deref(), &ended);
            let mut warnings = std::mem::take(&mut self.warnings);
            if gone.lingering {
                warnings.push(format!(
                    "Slurm still listed job {} as {} {}s after its srun had exited; it was cancelled",
                    gone.last
                        .as_ref()
                        .map_or("(unknown)".to_string(), |j| j.id.to_string()),
                    gone.last.as_ref().map_or("unfinished", |j| j.state.as_str()),
                    SETTLE_TIMEOUT.as_secs()
                ));
            }
            if let Some(w) = self.watchdog.take() {
                w.settled().await;
            }
            Settled {
                job_id: gone.last.as_ref().map(|v| JobId::Number(v.id)),
                node,
                state: gone.last.map(|v| v.state),
                pending_reason,
                failure,
                warnings,
            }
        })
    }

    /// srun leaves a helper of its own behind for a moment (it would cancel the job
    /// should srun alone die).
    fn owns_local_leftovers(&self) -> bool {
        true
    }
}

/// What Slurm did to a job: refused it before it started (srun failed), or ended it for
/// reasons of its own. In Slurm's words: srun's `error:` lines where it printed some.
fn failure(job: Option<&JobView>, node: Option<&str>, ended: &Ended<'_>) -> Option<String> {
    let said = srun_errors(ended.stderr_tail).join("; ");
    let said = |fallback: String| {
        if said.is_empty() {
            fallback
        } else {
            said.clone()
        }
    };
    match job {
        Some(job) if job.is_engine_failure() => Some(format!(
            "Slurm ended job {} {}{}: {}",
            job.id,
            job.state,
            node.map_or(String::new(), |n| format!(" on node {n}")),
            said(format!("srun exited with code {}", ended.exit_code))
        )),
        // No job at all: srun failed before Slurm made one (a bad partition, say).
        None if !ended.started && ended.exit_code != 0 => Some(format!(
            "Slurm did not run the job: {}",
            said(format!(
                "srun exited with code {} before the job started",
                ended.exit_code
            ))
        )),
        _ => None,
    }
}

/// The watchdog's work once orchestrate died before the job settled: cancel whatever job
/// of the attempt's name this user has, queued or running (srun died with orchestrate,
/// and nobody else would end it before the cluster's `InactiveLimit` or the job's
/// `--time`). Slurm's own stop follows: SIGTERM to the job's processes, SIGKILL after the
/// cluster's `KillWait`.
fn abandon(name: String) -> BoxFuture<'static, Result<(), String>> {
    Box::pin(async move {
        let target = Target::Name(name.clone());
        let mut result = cancel(&target, None).await;
        let deadline = Instant::now() + ABANDON_WATCH;
        while Instant::now() < deadline {
            tokio::time::sleep(ABANDON_POLL_INTERVAL).await;
            match find(&name).await {
                Ok(Some(view)) if !view.is_final() && view.state != "COMPLETING" => {
                    result = cancel(&target, None).await;
                }
                Ok(_) => {}
                Err(e) => result = Err(e),
            }
        }
        result.map_err(|e| e.to_string())
    })
}

/// `srun --quiet --job-name=… --chdir=… --export=ALL --time=<minutes> [args…] -- program
/// args…`: the program and arguments to spawn instead of the child's own. `time_limit` is
/// the run's runtime limit plus its kill grace (Slurm counts in whole minutes).
fn command_line(
    job: &SlurmJob,
    cwd: &Path,
    time_limit: Duration,
    runner_args: &[String],
    child: Launch,
) -> Launch {
    let minutes = time_limit.as_secs().div_ceil(60).max(1);
    let mut chdir = OsString::from("--chdir=");
    chdir.push(cwd.as_os_str());
    let mut out: Vec<OsString> = vec![
        "--quiet".into(),
        format!("--job-name={}", job.name).into(),
        chdir,
        "--export=ALL".into(),
        format!("--time={minutes}").into(),
    ];
    out.extend(runner_args.iter().map(OsString::from));
    out.push("--".into());
    out.push(child.program);
    out.extend(child.args);
    Launch {
        program: "srun".into(),
        args: out,
    }
}

/// Before a job is submitted: `srun` is there, its configuration is, the working directory
/// is, and the controller answers (`scontrol ping` says so at once where srun would retry
/// for seconds).
async fn preflight(cwd: &Path) -> Result<(), SlurmError> {
    if crate::platform::find_program("srun".as_ref()).is_none() {
        return Err(SlurmError::NoSrun);
    }
    if let Some(conf) = std::env::var_os("SLURM_CONF").filter(|c| !c.is_empty()) {
        let conf = PathBuf::from(conf);
        // srun retries a missing configuration file for a minute before it gives up.
        if !conf.exists() {
            return Err(SlurmError::NoConfig(conf));
        }
    }
    if !cwd.is_dir() {
        return Err(SlurmError::NoCwd(cwd.to_path_buf()));
    }
    let out = run("scontrol", &["ping"]).await?;
    if !out.status.success() {
        // Its first line says it; a banner of asterisks follows.
        let said = text_of(&out).lines().next().unwrap_or_default().to_string();
        return Err(SlurmError::ControllerDown(if said.is_empty() {
            format!("scontrol ping exited with {}", out.status)
        } else {
            said
        }));
    }
    Ok(())
}

/// A job as `squeue` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JobView {
    pub id: u64,
    pub node: Option<String>,
    /// `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, …
    pub state: String,
    /// Why it is pending (`Resources`, `Priority`, `PartitionTimeLimit`, …); None when
    /// Slurm gives none.
    pub reason: Option<String>,
}

impl JobView {
    fn is_pending(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "CONFIGURING" | "REQUEUED")
    }

    fn is_final(&self) -> bool {
        FINAL_STATES.contains(&self.state.as_str())
    }

    /// Slurm ended the job for its own reasons (a node failed, a limit of the cluster).
    fn is_engine_failure(&self) -> bool {
        ENGINE_FAILURES.contains(&self.state.as_str())
    }
}

/// The `-o` format every query uses, and its parser.
const VIEW_FORMAT: &str = "%i|%N|%T|%r";

fn parse_view(line: &str) -> Option<JobView> {
    let mut parts = line.trim().split('|');
    let id = parts.next()?.trim().parse().ok()?;
    let some = |s: Option<&str>| {
        s.map(str::trim)
            .filter(|s| !s.is_empty() && *s != "None" && *s != "(null)")
            .map(str::to_string)
    };
    let node = some(parts.next());
    let state = parts.next()?.trim().to_string();
    let reason = some(parts.next());
    Some(JobView {
        id,
        node,
        state,
        reason,
    })
}

/// `--user=<uid>`: name filters of `squeue` and `scancel` match this user's jobs only
/// (Slurm's job names are not unique, and a name is all there is before the id is known;
/// as root, scancel would otherwise cancel every user's job of that name).
fn this_user() -> String {
    format!("--user={}", nix::unistd::getuid())
}

/// This user's newest job called `name` (a retry of the same run has a name of its own),
/// in any state Slurm still remembers.
async fn find(name: &str) -> Result<Option<JobView>, SlurmError> {
    let out = run(
        "squeue",
        &[
            "-h",
            "-t",
            "all",
            &this_user(),
            &format!("--name={name}"),
            "-o",
            VIEW_FORMAT,
        ],
    )
    .await?;
    if !out.status.success() {
        return Err(SlurmError::ControllerDown(text_of(&out)));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(parse_view)
        .max_by_key(|v| v.id))
}

/// Job `id` as Slurm sees it now; None once Slurm no longer knows it (purged after its
/// `MinJobAge`).
async fn state(id: u64) -> Result<Option<JobView>, SlurmError> {
    let out = run(
        "squeue",
        &["-h", "-t", "all", "-j", &id.to_string(), "-o", VIEW_FORMAT],
    )
    .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(view) = stdout.lines().find_map(parse_view) {
        return Ok(Some(view));
    }
    let said = text_of(&out);
    if out.status.success() || said.contains("Invalid job id") {
        return Ok(None);
    }
    Err(SlurmError::ControllerDown(said))
}

/// Whom `scancel` is for: the job by name until its id is known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Name(String),
    Id(u64),
}

/// Sends `signal` to the job's processes (`scancel --signal`), or cancels the job when
/// None. Runs in the background: a stop must not wait for the controller.
fn scancel(target: Target, signal: Option<&'static str>) {
    tokio::spawn(async move {
        if let Err(e) = cancel(&target, signal).await {
            tracing::warn!("scancel of {target:?} failed: {e}");
        }
    });
}

async fn cancel(target: &Target, signal: Option<&str>) -> Result<(), SlurmError> {
    let mut args: Vec<String> = Vec::new();
    if let Some(sig) = signal {
        args.push(format!("--signal={sig}"));
    }
    match target {
        Target::Name(name) => {
            args.push(this_user());
            args.push(format!("--name={name}"));
        }
        // A signal goes to the job's step (srun's one step is step 0): SIGKILL to the job
        // as a whole would cancel it and keep it COMPLETING for the cluster's KillWait,
        // where the step's end lets srun report it and exit at once.
        Target::Id(id) if signal.is_some() => args.push(format!("{id}.0")),
        Target::Id(id) => args.push(id.to_string()),
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run("scancel", &args).await?;
    if !out.status.success() {
        return Err(SlurmError::ControllerDown(text_of(&out)));
    }
    Ok(())
}

/// Watches the queue until the job called `name` has started (or already ended), keeping
/// each look in `seen`; the receiver hears once it is no longer pending. Stops when the
/// receiver is dropped.
fn watch_start(name: String, seen: Arc<Mutex<Seen>>) -> oneshot::Receiver<()> {
    let (mut tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut interval = FIRST_POLL_INTERVAL;
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            match find(&name).await {
                Ok(Some(view)) => {
                    tracing::debug!(job = view.id, state = %view.state, node = ?view.node, reason = ?view.reason, "slurm job");
                    let pending = view.is_pending();
                    {
                        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                        if pending {
                            seen.pending_reason = view.reason.clone();
                        }
                        seen.last = Some(view);
                    }
                    if !pending {
                        let _ = tx.send(());
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::debug!("squeue for job {name}: {e}"),
            }
            interval = (interval * 2).min(MAX_POLL_INTERVAL);
        }
    });
    rx
}

/// What became of the job once srun had exited.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Gone {
    /// The job's last state seen (None: no job was ever made, or Slurm could not say).
    last: Option<JobView>,
    /// Slurm still listed it as not finished when orchestrate stopped waiting.
    lingering: bool,
}

/// Waits until Slurm reports the job finished or forgotten. A job still running after its
/// srun is gone (srun was killed) is cancelled. `known` is its id when seen while it ran.
async fn wait_gone(name: &str, known: Option<u64>, timeout: Duration) -> Gone {
    let deadline = Instant::now() + timeout;
    let mut id = known;
    let mut last: Option<JobView> = None;
    let mut cancelled = false;
    loop {
        let view = match id {
            Some(id) => state(id).await,
            None => find(name).await,
        };
        match view {
            Ok(Some(view)) => {
                id = Some(view.id);
                let done = view.is_final();
                if !done && !cancelled && view.state != "COMPLETING" {
                    // Its srun is gone: nobody will end this job but Slurm's own limits.
                    tracing::debug!(job = view.id, state = %view.state, "cancelling a job that outlived its srun");
                    let _ = cancel(&Target::Id(view.id), None).await;
                    cancelled = true;
                }
                last = Some(view);
                if done {
                    return Gone {
                        last,
                        lingering: false,
                    };
                }
            }
            // Never made (refused), or already forgotten.
            Ok(None) => {
                return Gone {
                    last,
                    lingering: false,
                }
            }
            Err(e) => tracing::debug!("squeue for job {name}: {e}"),
        }
        if Instant::now() >= deadline {
            return Gone {
                lingering: true,
                last,
            };
        }
        tokio::time::sleep(SETTLE_POLL_INTERVAL).await;
    }
}

/// Slurm's own words in srun's stderr: its `error:` and `fatal:` lines.
fn srun_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| {
            (l.starts_with("srun:") || l.starts_with("slurmstepd"))
                && (l.contains("error:") || l.contains("fatal:"))
        })
        .collect()
}

async fn run(program: &'static str, args: &[&str]) -> Result<std::process::Output, SlurmError> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(COMMAND_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(source)) => Err(SlurmError::Command { program, source }),
        Err(_) => Err(SlurmError::CommandTimeout { program }),
    }
}

fn text_of(out: &std::process::Output) -> String {
    let mut s = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if s.is_empty() {
        s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_child_runs_under_srun_with_its_limits_and_the_runners_args_after_ours() {
        let job = SlurmJob::new("ab12cd34", 1, Duration::from_secs(600));
        let Launch { program, args } = command_line(
            &job,
            Path::new("/work/repo"),
            Duration::from_secs(15 * 60 + 5),
            &["--partition=gpu".to_string()],
            Launch {
                program: "pi".into(),
                args: vec!["--mode".into(), "json".into()],
            },
        );
        assert_eq!(program, "srun");
        assert_eq!(
            args,
            [
                "--quiet",
                "--job-name=orchestrate-ab12cd34",
                "--chdir=/work/repo",
                "--export=ALL",
                "--time=16",
                "--partition=gpu",
                "--",
                "pi",
                "--mode",
                "json"
            ]
            .map(OsString::from)
        );
        assert_eq!(
            SlurmJob::new("ab12cd34", 2, Duration::ZERO).name,
            "orchestrate-ab12cd34.2"
        );
    }

    #[test]
    fn squeue_lines_are_read_into_views() {
        assert_eq!(
            parse_view("260|vm|RUNNING|None"),
            Some(JobView {
                id: 260,
                node: Some("vm".into()),
                state: "RUNNING".into(),
                reason: None
            })
        );
        let pending = parse_view("69||PENDING|Resources").unwrap();
        assert_eq!(
            (
                pending.node.clone(),
                pending.is_pending(),
                pending.reason.as_deref()
            ),
            (None, true, Some("Resources"))
        );
        assert!(parse_view("slurm_load_jobs error: Invalid job id specified").is_none());
        let failed = parse_view("71|vm|NODE_FAIL|NodeDown").unwrap();
        assert!(failed.is_final() && failed.is_engine_failure());
        let done = parse_view("72|vm|COMPLETED|None").unwrap();
        assert!(done.is_final() && !done.is_engine_failure());
        assert!(!parse_view("73|vm|COMPLETING|None").unwrap().is_final());
    }

    #[test]
    fn slurms_own_error_lines_are_picked_from_stderr() {
        let stderr = "some agent chatter\nsrun: error: invalid partition specified: nope\nsrun: error: Unable to allocate resources: Invalid partition name specified\n";
        assert_eq!(
            srun_errors(stderr),
            [
                "srun: error: invalid partition specified: nope",
                "srun: error: Unable to allocate resources: Invalid partition name specified"
            ]
        );
    }
}
