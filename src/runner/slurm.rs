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
use std::time::Duration;

use tokio::process::Command;
use tokio::sync::watch;
use tokio::time::Instant;

/// Longest wait for one `squeue`/`scancel`/`scontrol` call (a controller that does not
/// answer makes them retry for about its `MessageTimeout`, 10 s by default).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a queued job is looked at: quickly at first (most jobs start at once), then
/// less often, so that a fan-out of many queued jobs does not load the controller.
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(100);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(2);
/// After srun exited: how long to wait for Slurm to report the job gone (a step that
/// ignores SIGTERM is SIGKILLed after the cluster's `KillWait`, 30 s by default).
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(100);

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
pub(crate) enum SlurmError {
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

/// The job a run submits: its name, and how long it may wait in the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SlurmJob {
    /// `orchestrate-<runId>` (and `.<attempt>` for a retry): how the job is found and
    /// cancelled before its id is known.
    pub name: String,
    pub queue_timeout: Duration,
}

impl SlurmJob {
    pub(crate) fn new(run_id: &str, attempt: u32, queue_timeout: Duration) -> SlurmJob {
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

/// `srun --quiet --job-name=… --chdir=… --export=ALL --time=<minutes> [args…] -- program
/// args…`: the program and arguments to spawn instead of the child's own. `time_limit` is
/// the run's runtime limit plus its kill grace (Slurm counts in whole minutes).
pub(crate) fn command_line(
    job: &SlurmJob,
    cwd: &Path,
    time_limit: Duration,
    runner_args: &[String],
    program: &OsString,
    args: &[OsString],
) -> (OsString, Vec<OsString>) {
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
    out.push(program.clone());
    out.extend(args.iter().cloned());
    ("srun".into(), out)
}

/// Before a job is submitted: `srun` is there, its configuration is, the working directory
/// is, and the controller answers (`scontrol ping` says so at once where srun would retry
/// for seconds).
pub(crate) async fn preflight(cwd: &Path) -> Result<(), SlurmError> {
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
pub(crate) struct JobView {
    pub id: u64,
    pub node: Option<String>,
    /// `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, …
    pub state: String,
    /// Why it is pending (`Resources`, `Priority`, `PartitionTimeLimit`, …); None when
    /// Slurm gives none.
    pub reason: Option<String>,
}

impl JobView {
    pub(crate) fn is_pending(&self) -> bool {
        matches!(self.state.as_str(), "PENDING" | "CONFIGURING" | "REQUEUED")
    }

    pub(crate) fn is_final(&self) -> bool {
        FINAL_STATES.contains(&self.state.as_str())
    }

    /// Slurm ended the job for its own reasons (a node failed, a limit of the cluster).
    pub(crate) fn is_engine_failure(&self) -> bool {
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

/// The newest job called `name` (a retry of the same run has a name of its own), in any
/// state Slurm still remembers.
pub(crate) async fn find(name: &str) -> Result<Option<JobView>, SlurmError> {
    let out = run(
        "squeue",
        &[
            "-h",
            "-t",
            "all",
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
pub(crate) async fn state(id: u64) -> Result<Option<JobView>, SlurmError> {
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
pub(crate) enum Target {
    Name(String),
    Id(u64),
}

/// Sends `signal` to the job's processes (`scancel --signal`), or cancels the job when
/// None. Runs in the background: a stop must not wait for the controller.
pub(crate) fn scancel(target: Target, signal: Option<&'static str>) {
    tokio::spawn(async move {
        if let Err(e) = cancel(&target, signal).await {
            tracing::warn!("scancel of {target:?} failed: {e}");
        }
    });
}

pub(crate) async fn cancel(target: &Target, signal: Option<&str>) -> Result<(), SlurmError> {
    let mut args: Vec<String> = Vec::new();
    if let Some(sig) = signal {
        args.push(format!("--signal={sig}"));
    }
    match target {
        Target::Name(name) => args.push(format!("--name={name}")),
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

/// Watches the queue until the job called `name` has started (or already ended): each
/// look is sent on the channel, the last one not pending. Stops when the receiver is
/// dropped.
pub(crate) fn watch_start(name: String) -> watch::Receiver<Option<JobView>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let mut interval = FIRST_POLL_INTERVAL;
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            match find(&name).await {
                Ok(Some(view)) => {
                    let done = !view.is_pending();
                    if tx.send(Some(view)).is_err() || done {
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
pub(crate) struct Settled {
    /// The job's last state seen (None: no job was ever made, or Slurm could not say).
    pub last: Option<JobView>,
    /// Slurm still listed it as not finished when orchestrate stopped waiting.
    pub lingering: bool,
}

/// Waits until Slurm reports the job finished or forgotten. A job still running after its
/// srun is gone (srun was killed) is cancelled. `known` is its id when seen while it ran.
pub(crate) async fn settle(name: &str, known: Option<u64>, timeout: Duration) -> Settled {
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
                    return Settled {
                        last,
                        lingering: false,
                    };
                }
            }
            // Never made (refused), or already forgotten.
            Ok(None) => {
                return Settled {
                    last,
                    lingering: false,
                }
            }
            Err(e) => tracing::debug!("squeue for job {name}: {e}"),
        }
        if Instant::now() >= deadline {
            return Settled {
                lingering: true,
                last,
            };
        }
        tokio::time::sleep(SETTLE_POLL_INTERVAL).await;
    }
}

/// Slurm's own words in srun's stderr: its `error:` and `fatal:` lines.
pub(crate) fn srun_errors(stderr: &str) -> Vec<&str> {
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
        let (program, args) = command_line(
            &job,
            Path::new("/work/repo"),
            Duration::from_secs(15 * 60 + 5),
            &["--partition=gpu".to_string()],
            &"pi".into(),
            &["--mode".into(), "json".into()],
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
