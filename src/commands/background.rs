//! `run --background`, `wait` and `stop`: start a detached run, wait for its result, stop it.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::run::{print_result, OutputFormat};
use crate::background::{self, RunState};
use crate::error::RunError;
use crate::result::{exit_status, Background, Details, ErrorCode, Mode, RunResult, TextContent};
use crate::session::StateDir;

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

/// Starts the run described by `run_args` (the `run …` arguments without `--background`).
pub fn start(run_args: Vec<OsString>, agent: &str, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    match background::start(&run_args, &state) {
        Ok((run_id, run_dir, pid)) => {
            let session = run_dir.session_file().to_string_lossy().into_owned();
            let result = RunResult {
                content: vec![TextContent::text(format!(
                    "Started {agent} in the background as run {run_id}. `orchestrate wait {run_id}` prints its result; `orchestrate stop {run_id}` stops it."
                ))],
                details: Details {
                    mode: Mode::Single,
                    run_id: Some(run_id),
                    results: Vec::new(),
                    error: None,
                    streaming: None,
                    background: Some(Background { status: "running".into(), session_file: session, supervisor_pid: pid }),
                },
            };
            print_result(format, &result, exit_status::SUCCESS)
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

fn unknown_run(run_id: &str, format: OutputFormat) -> i32 {
    refuse(
        format,
        RunError::invalid(format!(
            "no background run {run_id:?} (see `orchestrate runs`)"
        )),
    )
}

fn running(run_id: &str, record: &background::SupervisorRecord, session: String) -> RunResult {
    RunResult {
        content: vec![TextContent::text(format!("Run {run_id} is still running."))],
        details: Details {
            mode: Mode::Single,
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: None,
            background: Some(Background {
                status: "running".into(),
                session_file: session,
                supervisor_pid: record.pid,
            }),
        },
    }
}

/// Waits for a background run and prints its result, exiting as the run would have in the
/// foreground. With a timeout that passes first: prints that it is still running, exit 124.
pub fn wait(run_id: &str, timeout: Option<Duration>, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let run_dir = state.run_dir(run_id);
    let started = Instant::now();
    loop {
        match background::state(&run_dir) {
            Ok(RunState::Finished(result, status)) => return print_result(format, &result, status),
            Ok(RunState::Dead(record)) => {
                return match background::mark_dead(&run_dir, run_id, &record) {
                    Ok((result, status)) => print_result(format, &result, status),
                    Err(e) => super::run::print_internal_error(format, &e.to_string()),
                };
            }
            Ok(RunState::Unknown) => return unknown_run(run_id, format),
            Ok(RunState::Running(record)) => {
                if timeout.is_some_and(|t| started.elapsed() >= t) {
                    let session = run_dir.session_file().to_string_lossy().into_owned();
                    return print_result(format, &running(run_id, &record, session), 124);
                }
            }
            Err(e) => {
                return super::run::print_internal_error(
                    format,
                    &format!("cannot read run {run_id}: {e}"),
                )
            }
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Stops a background run: SIGTERM to its supervisor, which stops the child's whole group
/// and writes a cancelled result; then prints that result.
pub fn stop(run_id: &str, format: OutputFormat) -> i32 {
    let state = match state_dir(format) {
        Ok(s) => s,
        Err(status) => return status,
    };
    let run_dir = state.run_dir(run_id);
    match background::state(&run_dir) {
        Ok(RunState::Running(record)) => {
            // The record was just checked against the pid's start time: this is our process.
            if let Err(e) = kill(Pid::from_raw(record.pid as i32), Signal::SIGTERM) {
                tracing::warn!("failed to signal the supervisor (pid {}): {e}", record.pid);
            }
            wait(run_id, Some(STOP_WAIT), format)
        }
        Ok(_) => wait(run_id, Some(Duration::ZERO), format),
        Err(e) => {
            super::run::print_internal_error(format, &format!("cannot read run {run_id}: {e}"))
        }
    }
}
