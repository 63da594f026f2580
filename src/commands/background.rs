//! `run --background`, `wait`, `stop` and `send`: start a detached run, wait for its result,
//! stop it, send it a message.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::run::{print_result, OutputFormat};
use crate::background::{self, look, Look, RunState};
use crate::error::RunError;
use crate::result::{exit_status, ErrorCode, RunResult, TextContent};
use crate::session::{FindRunError, RunId, RunIdPrefix, StateDir};

/// How often `wait` looks for the result.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// How long `stop` waits for the supervisor to stop its child and write the result.
const STOP_WAIT: Duration = Duration::from_secs(30);

fn refuse(format: OutputFormat, e: RunError) -> i32 {
    print_result(format, &e.to_result(None), e.exit_status())
}

fn state_dir(format: OutputFormat) -> Result<StateDir, i32> {
    StateDir::from_env().map_err(|e| refuse(format, RunError::invalid(e.to_string())))
}

/// Starts the run described by `run_args` (the `run …` arguments without `--background`):
/// `what` runs (an agent's name, or a fan-out's description), and for a fan-out its mode
/// and each task's agent.
pub fn start(
    run_args: Vec<OsString>,
    what: &str,
    fanout: Option<background::FanoutPlan>,
    format: OutputFormat,
) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    match background::start(&run_args, &state, None, fanout) {
        Ok(started) => {
            let run_id = &started.run_id;
            let mut text = format!(
                "Started {what} in the background as run {run_id}. `orchestrate wait {run_id}` prints its result; `orchestrate stop {run_id}` stops it."
            );
            if let Some(f) = &started.fanout {
                let tasks: Vec<String> = f
                    .tasks
                    .iter()
                    .map(|t| format!("{} {}", t.agent, t.run_id))
                    .collect();
                text.push_str(&format!(
                    " Its tasks' runs (`orchestrate send` takes these): {}.",
                    tasks.join(", ")
                ));
            }
            print_result(format, &started.result(text), exit_status::SUCCESS)
        }
        Err(e) => {
            let r = RunResult::refusal(
                ErrorCode::SubagentFailed,
                format!("could not start the background run: {e}"),
                None,
            );
            print_result(format, &r, exit_status::FAILURE)
        }
    }
}

/// The run `prefix` names, or the exit status after saying why there is none.
fn find_run(state: &StateDir, prefix: &RunIdPrefix, format: OutputFormat) -> Result<RunId, i32> {
    state.find_run(prefix).map_err(|e| match e {
        FindRunError::NoMatch(p) => unknown_run(&p, format),
        other => refuse(format, RunError::invalid(other.to_string())),
    })
}

fn unknown_run(run_id: &dyn std::fmt::Display, format: OutputFormat) -> i32 {
    refuse(
        format,
        RunError::invalid(format!(
            "no background run {run_id} (see `orchestrate runs`)"
        )),
    )
}

/// How a background run ended, or that it still runs after `timeout`.
enum Waited {
    Ended(Box<RunResult>, i32),
    StillRunning(Box<RunResult>),
}

/// Waits for a background run to end, at most `timeout`. A supervisor that died is
/// recorded as the run's failure.
fn wait_for_end(
    state: &StateDir,
    run_id: &RunId,
    timeout: Option<Duration>,
    format: OutputFormat,
) -> Result<Waited, i32> {
    let started = Instant::now();
    loop {
        match look(state, run_id) {
            Ok(Look::Ended(result, status)) => return Ok(Waited::Ended(result, status)),
            Ok(Look::Unknown) => return Err(unknown_run(run_id, format)),
            Ok(Look::Running(result)) => {
                if timeout.is_some_and(|t| started.elapsed() >= t) {
                    return Ok(Waited::StillRunning(result));
                }
            }
            Err(e) => {
                return Err(super::run::print_internal_error(
                    format,
                    &format!("cannot read run {run_id}: {e}"),
                ))
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Waits for a background run and prints its result, exiting as the run would have in the
/// foreground. With a timeout that passes first: prints that it is still running, exit 124.
pub fn wait(prefix: &RunIdPrefix, timeout: Option<Duration>, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let run_id = match find_run(&state, prefix, format) {
        Ok(id) => id,
        Err(status) => return status,
    };
    match wait_for_end(&state, &run_id, timeout, format) {
        Ok(Waited::Ended(result, status)) => print_result(format, &result, status),
        Ok(Waited::StillRunning(result)) => print_result(format, &result, exit_status::TIMEOUT),
        Err(status) => status,
    }
}

pub(crate) use crate::live::stop::request_run as request_stop;

/// `orchestrate stop` of a run that is not a background one: a stop request, then its
/// result once written.
fn stop_one_run(state: &StateDir, run_id: &RunId, format: OutputFormat) -> i32 {
    let dir = match request_stop(state, run_id) {
        Ok(dir) => dir,
        // Already over: its result is the answer.
        Err(_) if state.run_dir(run_id).result_file().exists() => state.run_dir(run_id),
        Err(why) => return refuse(format, RunError::invalid(why)),
    };
    let started = Instant::now();
    while started.elapsed() < STOP_WAIT {
        if let Ok(bytes) = std::fs::read(dir.result_file()) {
            if let Ok(result) = serde_json::from_slice::<RunResult>(&bytes) {
                return print_result(format, &result, exit_status::SUCCESS);
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    let e = RunError::invalid(format!(
        "Run {run_id} did not stop within {}s of the stop request; it is still running.",
        STOP_WAIT.as_secs()
    ));
    print_result(
        format,
        &e.to_result(Some(run_id.as_str())),
        exit_status::FAILURE,
    )
}

/// Stops a background run: SIGTERM to its supervisor, which stops the child's whole group
/// and writes a cancelled result; then prints the run's result. Exit 0 once the run has
/// ended (stopped now, or earlier on its own: its own status is in the result); 1 when it
/// still runs after [`STOP_WAIT`].
pub fn stop(prefix: &RunIdPrefix, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let run_id = match find_run(&state, prefix, format) {
        Ok(id) => id,
        Err(status) => return status,
    };
    let run_id = &run_id;
    let run_dir = state.run_dir(run_id);
    let wait_limit = match background::state(&run_dir) {
        Ok(RunState::Running(record)) => {
            if let Err(e) = background::signal_supervisor(&record, Signal::SIGTERM) {
                tracing::warn!("failed to signal the supervisor (pid {}): {e}", record.pid);
            }
            STOP_WAIT
        }
        // Not a background run: one of the runs of an orchestrate running in the
        // foreground (a fan-out's task, an MCP call), stopped on its own.
        Ok(RunState::Unknown) => {
            return stop_one_run(&state, run_id, format);
        }
        Ok(_) => Duration::ZERO,
        Err(e) => {
            return super::run::print_internal_error(
                format,
                &format!("cannot read run {run_id}: {e}"),
            )
        }
    };
    match wait_for_end(&state, run_id, Some(wait_limit), format) {
        Ok(Waited::Ended(result, _)) => print_result(format, &result, exit_status::SUCCESS),
        Ok(Waited::StillRunning(mut result)) => {
            result.content = vec![TextContent::text(format!(
                "Run {run_id} did not stop within {}s of SIGTERM to its supervisor; it is still running.",
                STOP_WAIT.as_secs()
            ))];
            print_result(format, &result, exit_status::FAILURE)
        }
        Err(status) => status,
    }
}

/// Queues `message` for the run `prefix` names (see `live::inbox`), and says so.
pub fn send(prefix: &RunIdPrefix, message: &str, interrupt: bool, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let run_id = match find_run(&state, prefix, format) {
        Ok(id) => id,
        Err(status) => return status,
    };
    match crate::live::inbox::send(&state, &run_id, message, interrupt) {
        Ok(_) => print_result(
            format,
            &crate::live::inbox::sent(&run_id, interrupt),
            exit_status::SUCCESS,
        ),
        Err(e) => refuse(format, RunError::invalid(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::line::EVENTS_FILE;

    /// A nested run's `events.jsonl` is written in the child's place, where a hostile
    /// child can write anything: here it names this very process as its supervisor,
    /// listening on SIGUSR1 (whose default action would end this test). No signal goes.
    #[test]
    fn a_nested_runs_recorded_supervisor_is_never_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: dir.path().to_path_buf(),
        };
        let nested = dir.path().join("runs/ab12cd34/child/state/runs/cd34ab12");
        std::fs::create_dir_all(&nested).unwrap();
        let me = std::process::id();
        let forged = serde_json::json!({
            "at": 1, "type": "run", "runId": "cd34ab12", "agent": "a", "backend": "pi",
            "task": "t", "cwd": "/", "depth": 1,
            "supervisor": {
                "pid": me,
                "startTime": crate::platform::process_start_time(me),
                "startedAtMs": 1,
                "pidNs": crate::observe::events_file::pid_namespace(),
                "stopSignal": "SIGUSR1",
            },
        });
        std::fs::write(nested.join(EVENTS_FILE), format!("{forged}\n")).unwrap();
        let id = RunId::parse("cd34ab12").unwrap();
        assert_eq!(
            request_stop(&state, &id).map(|d| d.path),
            Err("run cd34ab12 was started by the child of run ab12cd34: stop run ab12cd34".into())
        );
        assert!(!nested.join(crate::live::stop::STOP_REQUEST_FILE).exists());
    }
}
