//! One run end to end: refusals checked before anything is spawned, the run folder, the
//! supervised child (retried when the failure was transient), and the result.
//!
//! - `attempt`: one child process and the result built from its outcome.
//! - `progress`: the line sink feeding the dialect, and streaming updates.
//! - `retry`: which failures are transient, and the backoff between attempts.

mod attempt;
mod progress;
pub mod retry;

pub use progress::{Observer, STREAMING_UPDATE_INTERVAL};

use std::path::PathBuf;
use std::time::Duration;

use crate::agents::{self, DiscoveryOptions};
use crate::backends::Backend;
use crate::limits::{SupervisionLimits, DEFAULT_MAX_DEPTH};
use crate::result::{exit_status, new_run_id, ErrorCode, Mode, RunResult};
use crate::session::{self, StateDir};
use crate::supervisor::Controls;
use crate::truncate::TruncateLimits;

use attempt::Attempt;

/// What the caller asked for.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub agent: String,
    pub task: String,
    pub backend: Option<String>,
    pub model: Option<String>,
    pub cwd: Option<PathBuf>,
    pub agents_dir: Option<PathBuf>,
    pub runtime_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub kill_grace: Option<Duration>,
    pub terminal_exit_grace: Option<Duration>,
    pub max_output_bytes: Option<u64>,
    pub truncate: TruncateLimits,
    /// Attempts in all when failures are transient (default [`retry::DEFAULT_ATTEMPTS`]).
    pub attempts: Option<u32>,
}

/// Settings that come from the environment of orchestrate itself.
#[derive(Debug, Clone)]
pub struct RunEnv {
    pub depth: u32,
    pub max_depth: u32,
    pub disabled: bool,
    pub state: StateDir,
}

impl RunEnv {
    /// Reads `ORCHESTRATE_DEPTH`, `ORCHESTRATE_MAX_DEPTH`, `ORCHESTRATE_DISABLED` and the
    /// state directory. A malformed value is an error naming the variable.
    pub fn from_env() -> Result<RunEnv, String> {
        let number = |name: &str, default: u32| -> Result<u32, String> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(v) if v.trim().is_empty() => Ok(default),
                Ok(v) => v.trim().parse().map_err(|_| {
                    format!("environment variable {name}={v:?} is not a non-negative integer")
                }),
            }
        };
        let disabled = match std::env::var("ORCHESTRATE_DISABLED") {
            Err(_) => false,
            Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "0" | "false" | "no" | "off" => false,
                "1" | "true" | "yes" | "on" => true,
                _ => {
                    return Err(format!(
                    "environment variable ORCHESTRATE_DISABLED={v:?} is not a boolean (use 1 or 0)"
                ))
                }
            },
        };
        Ok(RunEnv {
            depth: number("ORCHESTRATE_DEPTH", 0)?,
            max_depth: number("ORCHESTRATE_MAX_DEPTH", DEFAULT_MAX_DEPTH)?,
            disabled,
            state: StateDir::from_env().map_err(|e| e.to_string())?,
        })
    }
}

/// The result and the process exit status it maps to (130 when cancelled, which the
/// result alone cannot say).
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub result: RunResult,
    pub exit_status: i32,
}

impl RunOutput {
    fn from_result(result: RunResult) -> Self {
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

fn refuse(code: ErrorCode, message: impl Into<String>, run_id: Option<String>) -> RunOutput {
    RunOutput::from_result(RunResult::refusal(code, message, run_id))
}

/// Runs one task to the end. Never panics on bad input; every failure is a result.
pub async fn run(
    req: &RunRequest,
    env: &RunEnv,
    controls: &Controls,
    observer: Option<Observer<'_>>,
) -> RunOutput {
    if req.agent.trim().is_empty() {
        return refuse(
            ErrorCode::InvalidInput,
            "Invalid input: agent is required and must not be empty.",
            None,
        );
    }
    if req.task.trim().is_empty() {
        return refuse(
            ErrorCode::InvalidInput,
            "Invalid input: task is required and must not be empty.",
            None,
        );
    }
    let run_id = new_run_id();
    if env.disabled {
        return refuse(
            ErrorCode::SubagentsDisabled,
            "Subagents are disabled. Unset ORCHESTRATE_DISABLED (or set it to 0) to enable them.",
            Some(run_id),
        );
    }
    if env.depth >= env.max_depth {
        return refuse(
            ErrorCode::SubagentDepthExceeded,
            format!(
                "Maximum subagent depth ({}) exceeded. Subagents cannot call other subagents.",
                env.max_depth
            ),
            Some(run_id),
        );
    }
    let cwd = match &req.cwd {
        Some(dir) if !dir.is_dir() => {
            return refuse(
                ErrorCode::InvalidInput,
                format!(
                    "Invalid input: cwd {} is not an existing directory.",
                    dir.display()
                ),
                None,
            )
        }
        Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
        None => match std::env::current_dir() {
            Ok(d) => d,
            Err(e) => {
                return refuse(
                    ErrorCode::InvalidInput,
                    format!("Invalid input: the current directory is not usable: {e}"),
                    None,
                )
            }
        },
    };

    let catalog = agents::discover(&DiscoveryOptions::from_env(
        cwd.clone(),
        req.agents_dir.clone(),
    ));
    for p in catalog.problems() {
        tracing::warn!("skipped agent file: {p}");
    }
    let Some(agent) = catalog.get(&req.agent) else {
        let mut message = format!(
            "Unknown agent: {}. Available agents: {}",
            req.agent,
            catalog.names_sorted().join(", ")
        );
        if !catalog.problems().is_empty() {
            message.push_str(&format!(
                " ({} agent file(s) could not be read; `orchestrate agents` lists why)",
                catalog.problems().len()
            ));
        }
        return refuse(ErrorCode::UnknownAgent, message, Some(run_id));
    };
    if !agent.enabled {
        return refuse(
            ErrorCode::SubagentDisabled,
            format!(
                "Subagent {} is disabled by its definition ({}): set `enabled: true` there to use it.",
                agent.name,
                agent.source.display()
            ),
            Some(run_id),
        );
    }
    let backend_name = req
        .backend
        .as_deref()
        .or(agent.backend.as_deref())
        .unwrap_or("auto");
    let backend = match Backend::select(backend_name) {
        Ok(sel) if sel.auto && !sel.installed => {
            let tried: Vec<String> = Backend::AUTO_ORDER
                .iter()
                .map(|b| b.program().to_string_lossy().into_owned())
                .collect();
            let mut out = refuse(
                ErrorCode::SubagentFailed,
                format!(
                    "Subagent could not start: no agent CLI found on PATH (tried {}); install one, e.g. {}",
                    tried.join(", "),
                    Backend::Claude.install_hint()
                ),
                Some(run_id),
            );
            out.result.details.mode = Mode::Single;
            return out;
        }
        Ok(sel) => sel.backend,
        Err(e) => return refuse(ErrorCode::InvalidInput, format!("Invalid input: {e}"), None),
    };

    let limits = SupervisionLimits {
        runtime_timeout: req
            .runtime_timeout
            .or(agent.timeout)
            .unwrap_or(SupervisionLimits::default().runtime_timeout),
        idle_timeout: req
            .idle_timeout
            .or(agent.idle_timeout)
            .unwrap_or(SupervisionLimits::default().idle_timeout),
        kill_grace: req
            .kill_grace
            .unwrap_or(SupervisionLimits::default().kill_grace),
        terminal_exit_grace: req
            .terminal_exit_grace
            .unwrap_or(SupervisionLimits::default().terminal_exit_grace),
        max_output_bytes: req
            .max_output_bytes
            .unwrap_or(SupervisionLimits::default().max_output_bytes),
        ..SupervisionLimits::default()
    };
    let run_dir = match env.state.create_run(&run_id) {
        Ok(d) => d,
        Err(e) => {
            return refuse(
                ErrorCode::SubagentFailed,
                format!("orchestrate could not create the run folder: {e}"),
                Some(run_id),
            )
        }
    };
    let started_at_ms = session::now_unix_ms();
    let attempt = Attempt {
        req,
        env,
        agent,
        backend,
        cwd,
        run_id,
        limits,
        run_dir,
    };
    let max_attempts = req.attempts.unwrap_or(retry::DEFAULT_ATTEMPTS).max(1);
    let mut observer = observer;
    let mut n = 1;
    let mut output = loop {
        let out = attempt.execute(n, controls, observer.as_mut()).await;
        let Some(kind) = (n < max_attempts).then(|| out.transient(backend)).flatten() else {
            break out;
        };
        let wait = retry::backoff(n);
        tracing::warn!(
            "attempt {n} of {max_attempts} failed ({kind:?}); retrying in {:.1}s",
            wait.as_secs_f64()
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = controls.cancel.cancelled() => {
                let mut out = out;
                out.exit_status = exit_status::CANCELLED;
                break out;
            }
        }
        n += 1;
    };
    if let Some(single) = output.result.details.results.first_mut() {
        single.attempts = n;
    }
    attempt.record(&output, started_at_ms);
    output
}
