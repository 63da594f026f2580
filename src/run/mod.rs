//! One run end to end, as a pipeline of small typed steps:
//!
//! request + agent + config + environment --`resolve`--> [`ResolvedRun`] (or a refusal)
//! --`attempt`--> supervised child: `Outcome` + what the dialect collected
//! --`verdict`--> `Verdict` --`render`--> result (wording, sanitizing, truncation)
//! --`retry`--> another attempt when the failure was transient --> `result.json` + index.
//!
//! - `progress`: the line sink feeding the dialect, and streaming updates.
//! - `fanout`: several tasks at once, in parallel or as a chain.
//! - `resume`: what an earlier run left that its CLI can continue.

mod attempt;
pub(crate) mod fanout;
pub(crate) mod progress;
mod render;
mod resolve;
mod resume;
pub(crate) mod retry;
mod verdict;

pub(crate) use progress::Observer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::backends::{Backend, BackendChoice, ResumeFrom};
use crate::config::Config;
use crate::error::RunError;
use crate::result::{exit_status, new_run_id, ErrorCode, RunResult};
use crate::session::{self, IndexEntry, RunDir, StateDir};
use crate::structured::{self, SchemaSource};
use crate::supervisor::Controls;

use attempt::{Attempt, Executed};
use resolve::resolve;
pub(crate) use resolve::{backend_of, refuse_if_not_allowed, truncate_limits, ResolvedRun};

/// What the caller asked for.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub agent: String,
    pub task: String,
    pub backend: Option<BackendChoice>,
    pub model: Option<String>,
    pub cwd: Option<PathBuf>,
    pub agents_dir: Option<PathBuf>,
    pub runtime_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub kill_grace: Option<Duration>,
    pub terminal_exit_grace: Option<Duration>,
    pub max_output_bytes: Option<u64>,
    pub max_bytes: Option<usize>,
    pub max_lines: Option<usize>,
    /// Continue this earlier run's child session (pi, claude and codex).
    pub resume: Option<String>,
    /// A run id chosen in advance, whose folder already exists (background runs).
    pub run_id: Option<String>,
    /// Attempts in all when failures are transient (default: the config's `retries`).
    pub attempts: Option<u32>,
    /// The schema the answer must match (`--output-schema`, MCP `outputSchema`); over the
    /// agent's `output_schema:`.
    pub output_schema: Option<SchemaSource>,
}

/// What a run takes from outside the request: the effective config (files and
/// `ORCHESTRATE_*` variables), the recursion depth and the state directory.
#[derive(Debug, Clone)]
pub(crate) struct RunEnv {
    pub depth: u32,
    pub config: Config,
    pub state: StateDir,
}

impl RunEnv {
    /// Loads the config as seen from `cwd` (the project file is the nearest ancestor's),
    /// `ORCHESTRATE_DEPTH` and the state directory. A malformed value is an error naming
    /// the file or variable, the key and why.
    pub(crate) fn load(cwd: &Path) -> Result<RunEnv, RunError> {
        let depth = match std::env::var("ORCHESTRATE_DEPTH") {
            Err(_) => 0,
            Ok(v) if v.trim().is_empty() => 0,
            Ok(v) => v.trim().parse().map_err(|_| {
                RunError::invalid(format!(
                    "environment variable ORCHESTRATE_DEPTH={v:?} is not a non-negative integer"
                ))
            })?,
        };
        Ok(RunEnv {
            depth,
            config: Config::load(cwd).map_err(|e| RunError::invalid(e.to_string()))?,
            state: StateDir::from_env().map_err(|e| RunError::invalid(e.to_string()))?,
        })
    }

    /// The folder a request runs in, for loading the config that applies to it.
    pub(crate) fn cwd_of(cwd: Option<&Path>) -> PathBuf {
        cwd.map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    }
}

/// The result and the process exit status it maps to (130 when cancelled, which the
/// result alone cannot say).
#[derive(Debug, Clone)]
pub(crate) struct RunOutput {
    pub result: RunResult,
    pub exit_status: i32,
}

impl RunOutput {
    pub(crate) fn from_result(result: RunResult) -> Self {
        let exit_status = result.exit_status();
        RunOutput {
            result,
            exit_status,
        }
    }

    /// Whether this failed attempt is worth another one. Never after a timeout, the hard
    /// cap or a cancel: those have their own codes or exit status.
    fn transient(&self, backend: Backend) -> Option<retry::Transient> {
        let error = self.result.details.error.as_ref()?;
        if error.code != ErrorCode::SubagentFailed || self.exit_status == exit_status::CANCELLED {
            return None;
        }
        let single = self.result.details.results.first()?;
        retry::classify(
            backend,
            single.error.as_deref().unwrap_or(&error.message),
            single.exit_code,
        )
    }
}

/// Runs one task to the end. Never panics on bad input; every failure is a result.
pub(crate) async fn run(
    req: &RunRequest,
    env: &RunEnv,
    controls: &Controls,
    observer: Option<Observer<'_>>,
) -> RunOutput {
    let run_id = req.run_id.clone().unwrap_or_else(new_run_id);
    let run = match resolve(req, env, &run_id) {
        Ok(run) => run,
        Err(e) => {
            let id = e.keeps_run_id().then_some(run_id.as_str());
            return RunOutput::from_result(e.to_result(id));
        }
    };
    let run_dir = match run_folder(&run, env) {
        Ok(dir) => dir,
        Err(e) => return RunOutput::from_result(e.to_result(Some(&run_id))),
    };
    let started_at_ms = session::now_unix_ms();
    let attempt = Attempt {
        run: &run,
        env,
        run_dir: &run_dir,
        message: None,
    };
    let output = attempts(&attempt, controls, observer).await;
    record(&run, env, &run_dir, &output, started_at_ms);
    output
}

/// A background run's folder was made by whoever chose its id; any other run makes its own.
fn run_folder(run: &ResolvedRun, env: &RunEnv) -> Result<RunDir, RunError> {
    if run.preset_dir {
        return Ok(env.state.run_dir(&run.run_id));
    }
    env.state
        .create_run(&run.run_id)
        .map_err(|source| RunError::Io {
            action: "create the run folder",
            path: env.state.run_dir(&run.run_id).path,
            source,
        })
}

/// The task's turn, retried while its failures are transient; then, when its answer does
/// not match the output schema, one repair turn continuing the child's own session (where
/// its CLI can), retried the same way. The repair turn counts like any child run:
/// `attempts` is every run of the child, `usage` and `durationMs` are summed over both
/// turns, and the full record's `displayItems` hold both.
async fn attempts(
    attempt: &Attempt<'_>,
    controls: &Controls,
    mut observer: Option<Observer<'_>>,
) -> RunOutput {
    let (first, n) = retried(attempt, 1, controls, &mut observer).await;
    let (Some(mismatch), Some(schema)) = (first.mismatch, &attempt.run.output_schema) else {
        return with_attempts(first.output, n);
    };
    let mut output = first.output;
    let from = match repair_from(attempt, &output) {
        Ok(from) => from,
        Err(why) => {
            if let Some(single) = output.result.details.results.first_mut() {
                single.warnings.push(format!(
                    "no repair turn for the answer that does not match the output schema: {why}"
                ));
            }
            return with_attempts(output, n);
        }
    };
    if controls.cancel.is_cancelled() {
        return with_attempts(output, n);
    }
    let run = ResolvedRun {
        resume: Some(from),
        ..attempt.run.clone()
    };
    let message = structured::repair_prompt(schema, &mismatch);
    let repair = Attempt {
        run: &run,
        message: Some(&message),
        ..*attempt
    };
    let (second, last) = retried(&repair, n + 1, controls, &mut observer).await;
    let mut second = second.output;
    if let (Some(before), Some(after)) = (
        output.result.details.results.first_mut(),
        second.result.details.results.first_mut(),
    ) {
        let totals = attempt.run.backend.backend.spec().resumed_totals;
        after.usage = totals.combine(&before.usage, &after.usage);
        after.duration_ms += before.duration_ms;
        let mut items = std::mem::take(&mut before.display_items);
        items.append(&mut after.display_items);
        after.display_items = items;
        for w in before.warnings.drain(..) {
            if !after.warnings.contains(&w) {
                after.warnings.push(w);
            }
        }
    }
    with_attempts(second, last)
}

/// The run's own child session, for its repair turn; why there is none otherwise.
fn repair_from(attempt: &Attempt<'_>, output: &RunOutput) -> Result<ResumeFrom, String> {
    let backend = attempt.run.backend.backend;
    if !backend.spec().resumes {
        return Err(format!("{backend} cannot continue its session"));
    }
    let session_id = output
        .result
        .details
        .results
        .first()
        .and_then(|r| r.child_session_id.clone())
        .ok_or_else(|| format!("{backend} reported no session id to continue"))?;
    Ok(ResumeFrom {
        run_id: attempt.run.run_id.clone(),
        session_id: Some(session_id),
        run_dir: attempt.run_dir.path.clone(),
    })
}

fn with_attempts(mut output: RunOutput, n: u32) -> RunOutput {
    if let Some(single) = output.result.details.results.first_mut() {
        single.attempts = n;
    }
    output
}

/// Runs attempts of one turn, numbered from `first`, until one is not worth repeating: a
/// success, a failure a retry cannot fix, or the last try allowed. A cancel during the
/// backoff ends it at once. Returns the last attempt and its number.
async fn retried(
    attempt: &Attempt<'_>,
    first: u32,
    controls: &Controls,
    observer: &mut Option<Observer<'_>>,
) -> (Executed, u32) {
    let max_tries = attempt.run.attempts;
    let backend = attempt.run.backend.backend;
    let mut n = first;
    let mut tries = 1;
    loop {
        let out = attempt.execute(n, controls, observer.as_mut()).await;
        let Some(kind) = (tries < max_tries)
            .then(|| out.output.transient(backend))
            .flatten()
        else {
            return (out, n);
        };
        let wait = retry::backoff(tries);
        tracing::warn!(
            "attempt {tries} of {max_tries} failed ({kind:?}); retrying in {:.1}s",
            wait.as_secs_f64()
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = controls.cancel.cancelled() => {
                let mut out = out;
                out.output.exit_status = exit_status::CANCELLED;
                return (out, n);
            }
        }
        n += 1;
        tries += 1;
    }
}

/// Writes `result.json` and the run's line in `runs.jsonl`.
fn record(
    run: &ResolvedRun,
    env: &RunEnv,
    run_dir: &RunDir,
    output: &RunOutput,
    started_at_ms: u64,
) {
    if let Err(e) = run_dir.write_result(&output.result) {
        tracing::warn!("failed to write {}: {e}", run_dir.result_file().display());
    }
    let single = output.result.details.results.first();
    let entry = IndexEntry {
        run_id: run.run_id.clone(),
        agent: run.agent.name.clone(),
        backend: run.backend.backend.name().to_string(),
        model: run.model.clone(),
        started_at_ms,
        duration_ms: single.map_or(0, |r| r.duration_ms),
        exit_code: single.map_or(1, |r| r.exit_code),
        error: output
            .result
            .details
            .error
            .as_ref()
            .map(|e| e.code.as_str().to_string()),
        usage: single.map(|r| r.usage).unwrap_or_default(),
        cwd: run.cwd.to_string_lossy().into_owned(),
        session_file: single
            .map(|r| r.session_file.clone())
            .unwrap_or_else(|| run_dir.session_file().to_string_lossy().into_owned()),
    };
    if let Err(e) = env.state.append_index(&entry) {
        tracing::warn!("failed to append to the run index: {e}");
    }
}
