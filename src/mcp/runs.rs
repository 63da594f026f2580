//! The tools that reach a run already started (a `subagent` call with `background: true`,
//! or any run by its id): `send` a message into it, `wait` for its result, `stop` it. Each
//! does what the command of the same name does, without blocking the server: waits are
//! polls that a cancel from the client ends.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::background::{self, look, Look, RunState};
use crate::error::RunError;
use crate::live::inbox::sent;
use crate::live::stop::request_run;
use crate::result::RunResult;
use crate::session::{RunId, RunIdPrefix, StateDir};

/// How long `wait` waits unless told.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// How long `stop` waits for the run's result once asked.
const STOP_WAIT: Duration = Duration::from_secs(30);
/// How often a wait looks for the result.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SendArgs {
    pub run_id: String,
    pub message: String,
    // Cancel the current turn for it.
    #[serde(default)]
    pub interrupt: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct WaitArgs {
    pub run_id: String,
    // Default 300000 (5 minutes).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StopArgs {
    pub run_id: String,
}

/// A tool's arguments; a wrong or unknown one is `INVALID_INPUT` saying which.
pub(crate) fn parse<T: DeserializeOwned>(args: JsonObject) -> Result<T, RunError> {
    serde_json::from_value(serde_json::Value::Object(args))
        .map_err(|e| RunError::invalid(e.to_string()))
}

/// How a wait ended: the run's result and exit status, or that it still runs.
pub(crate) enum Waited {
    Ended(Box<RunResult>, i32),
    StillRunning(Box<RunResult>),
}

fn find(run_id: &str) -> Result<(StateDir, RunId), RunError> {
    let state = StateDir::from_env().map_err(|e| RunError::invalid(e.to_string()))?;
    let prefix =
        RunIdPrefix::parse(run_id).map_err(|e| RunError::invalid(format!("runId: {e}")))?;
    let id = state
        .find_run(&prefix)
        .map_err(|e| RunError::invalid(e.to_string()))?;
    Ok((state, id))
}

pub(crate) fn send(args: SendArgs) -> Result<RunResult, RunError> {
    let (state, id) = find(&args.run_id)?;
    crate::live::inbox::send(&state, &id, &args.message, args.interrupt)
        .map_err(|e| RunError::invalid(e.to_string()))?;
    Ok(sent(&id, args.interrupt))
}

pub(crate) async fn wait(args: WaitArgs, cancel: &CancellationToken) -> Result<Waited, RunError> {
    let (state, id) = find(&args.run_id)?;
    let timeout = args.timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
    until_ended(&state, &id, timeout, false, cancel).await
}

/// Stops the run: SIGTERM to a background run's supervisor, a stop request to any other
/// run (a task of a fan-out); then its result, once written.
pub(crate) async fn stop(args: StopArgs, cancel: &CancellationToken) -> Result<Waited, RunError> {
    let (state, id) = find(&args.run_id)?;
    let unread = |e: std::io::Error| RunError::invalid(format!("cannot read run {id}: {e}"));
    let foreground = match background::state(&state.run_dir(&id)).map_err(unread)? {
        RunState::Running(record) => {
            background::signal_supervisor(&record, Signal::SIGTERM)
                .map_err(|e| RunError::invalid(format!("cannot stop run {id}: {e}")))?;
            false
        }
        RunState::Unknown => {
            request_run(&state, &id).map_err(RunError::invalid)?;
            true
        }
        RunState::Finished(..) | RunState::Dead(_) => false,
    };
    until_ended(&state, &id, STOP_WAIT, foreground, cancel).await
}

/// Looks for the run's result until it is there, `timeout` passes, or `cancel`. A run
/// that is no background one is unknown, unless `foreground` (it is running, and has no
/// result until it ends).
async fn until_ended(
    state: &StateDir,
    id: &RunId,
    timeout: Duration,
    foreground: bool,
    cancel: &CancellationToken,
) -> Result<Waited, RunError> {
    let started = Instant::now();
    loop {
        let over = started.elapsed() >= timeout || cancel.is_cancelled();
        match look(state, id)
            .map_err(|e| RunError::invalid(format!("cannot read run {id}: {e}")))?
        {
            Look::Ended(result, status) => return Ok(Waited::Ended(result, status)),
            Look::Unknown if !foreground => {
                return Err(RunError::invalid(format!(
                    "no background run {id} (see `orchestrate runs`)"
                )))
            }
            Look::Running(result) if over => return Ok(Waited::StillRunning(result)),
            Look::Unknown if over => {
                return Err(RunError::invalid(format!(
                    "run {id} did not stop within {}s of the stop request; it is still running",
                    timeout.as_secs()
                )))
            }
            Look::Running(_) | Look::Unknown => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL_INTERVAL) => {}
            _ = cancel.cancelled() => {}
        }
    }
}
