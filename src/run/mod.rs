//! One run end to end: refusals checked before anything is spawned, the run folder, the
//! supervised child (retried when the failure was transient), and the result.
//!
//! - `attempt`: one child process and the result built from its outcome.
//! - `progress`: the line sink feeding the dialect, and streaming updates.
//! - `retry`: which failures are transient, and the backoff between attempts.

mod attempt;
pub mod fanout;
mod progress;
mod resume;
pub mod retry;

pub use progress::{Observer, STREAMING_UPDATE_INTERVAL};

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agents::{self, AgentDef, DiscoveryOptions};
use crate::backends::Backend;
use crate::config::{Config, Source};
use crate::limits::SupervisionLimits;
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
    pub max_bytes: Option<usize>,
    pub max_lines: Option<usize>,
    /// Continue this earlier run's child session (pi, claude and codex).
    pub resume: Option<String>,
    /// A run id chosen in advance, whose folder already exists (background runs).
    pub run_id: Option<String>,
    /// Attempts in all when failures are transient (default [`retry::DEFAULT_ATTEMPTS`]).
    pub attempts: Option<u32>,
}

/// What a run takes from outside the request: the effective config (files and
/// `ORCHESTRATE_*` variables), the recursion depth and the state directory.
#[derive(Debug, Clone)]
pub struct RunEnv {
    pub depth: u32,
    pub config: Config,
    pub state: StateDir,
}

impl RunEnv {
    /// Loads the config as seen from `cwd` (the project file is the nearest ancestor's),
    /// `ORCHESTRATE_DEPTH` and the state directory. A malformed value is an error naming
    /// the file or variable, the key and why.
    pub fn load(cwd: &Path) -> Result<RunEnv, String> {
        let depth = match std::env::var("ORCHESTRATE_DEPTH") {
            Err(_) => 0,
            Ok(v) if v.trim().is_empty() => 0,
            Ok(v) => v.trim().parse().map_err(|_| {
                format!(
                    "environment variable ORCHESTRATE_DEPTH={v:?} is not a non-negative integer"
                )
            })?,
        };
        Ok(RunEnv {
            depth,
            config: Config::load(cwd).map_err(|e| e.to_string())?,
            state: StateDir::from_env().map_err(|e| e.to_string())?,
        })
    }

    /// The folder a request runs in, for loading the config that applies to it.
    pub fn cwd_of(cwd: Option<&Path>) -> PathBuf {
        cwd.map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    }
}

/// A run's effective settings: a flag wins, then the agent file's key, then the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub limits: SupervisionLimits,
    pub truncate: TruncateLimits,
    pub attempts: u32,
}

impl Resolved {
    pub fn of(req: &RunRequest, agent: Option<&AgentDef>, cfg: &Config) -> Resolved {
        let pick = |flag: Option<Duration>, agent: Option<Duration>, cfg: Duration| {
            flag.or(agent).unwrap_or(cfg)
        };
        Resolved {
            limits: SupervisionLimits {
                runtime_timeout: pick(
                    req.runtime_timeout,
                    agent.and_then(|a| a.timeout),
                    cfg.timeout.value,
                ),
                idle_timeout: pick(
                    req.idle_timeout,
                    agent.and_then(|a| a.idle_timeout),
                    cfg.idle_timeout.value,
                ),
                kill_grace: req.kill_grace.unwrap_or(cfg.kill_grace.value),
                terminal_exit_grace: req.terminal_exit_grace.unwrap_or(cfg.exit_grace.value),
                max_output_bytes: req.max_output_bytes.unwrap_or(cfg.max_output_bytes.value),
                ..SupervisionLimits::default()
            },
            truncate: TruncateLimits {
                max_bytes: req.max_bytes.unwrap_or(cfg.max_bytes.value),
                max_lines: req.max_lines.unwrap_or(cfg.max_lines.value),
            },
            attempts: req.attempts.unwrap_or(cfg.retries.value).max(1),
        }
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

/// The switches checked before anything is spawned: subagents disabled, or too deep.
fn refuse_if_not_allowed(env: &RunEnv, run_id: &str) -> Option<RunOutput> {
    let disabled = &env.config.disabled;
    if disabled.value {
        let how = match &disabled.source {
            Source::Env(var) => format!("Unset {var} (or set it to 0) to enable them."),
            Source::User(path) | Source::Project(path) => {
                format!(
                    "Set `disabled = false` in {} to enable them.",
                    path.display()
                )
            }
            _ => "Set ORCHESTRATE_DISABLED=0 to enable them.".to_string(),
        };
        return Some(refuse(
            ErrorCode::SubagentsDisabled,
            format!("Subagents are disabled. {how}"),
            Some(run_id.to_string()),
        ));
    }
    let max_depth = env.config.max_depth.value;
    if env.depth >= max_depth {
        return Some(refuse(
            ErrorCode::SubagentDepthExceeded,
            format!(
                "Maximum subagent depth ({max_depth}) exceeded. Subagents cannot call other subagents."
            ),
            Some(run_id.to_string()),
        ));
    }
    None
}

/// Runs one task to the end. Never panics on bad input; every failure is a result.
pub async fn run(
    req: &RunRequest,
    env: &RunEnv,
    controls: &Controls,
    observer: Option<Observer<'_>>,
) -> RunOutput {
    // `--resume` fills what the earlier run knew: its agent, backend and folder.
    let resumed = match &req.resume {
        None => None,
        Some(id) => match resume::load(env, id, req) {
            Ok(r) => Some(r),
            Err(message) => {
                return refuse(
                    ErrorCode::InvalidInput,
                    format!("Invalid input: {message}"),
                    None,
                )
            }
        },
    };
    let (req, resume_from) = match &resumed {
        Some((filled, from)) => (filled, Some(from.clone())),
        None => (req, None),
    };
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
    // A background run's id was chosen (and its folder made) by the caller that started it.
    let preset_dir = req.run_id.is_some();
    let run_id = req.run_id.clone().unwrap_or_else(new_run_id);
    if let Some(refusal) = refuse_if_not_allowed(env, &run_id) {
        return refusal;
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
        .unwrap_or(&env.config.backend.value);
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

    let settings = Resolved::of(req, Some(agent), &env.config);
    let created = if preset_dir {
        Ok(env.state.run_dir(&run_id))
    } else {
        env.state.create_run(&run_id)
    };
    let run_dir = match created {
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
        settings,
        run_dir,
        resume: resume_from,
    };
    let max_attempts = settings.attempts;
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
