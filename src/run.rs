//! One run end to end: refusals checked before anything is spawned, the run folder, the
//! supervised child, and the result built from its outcome.

use std::path::PathBuf;
use std::time::Duration;

use crate::agents::{self, AgentDef, DiscoveryOptions};
use crate::backends::{Backend, BackendError, Dialect, InvocationInput};
use crate::collector::Collector;
use crate::limits::{SupervisionLimits, DEFAULT_MAX_DEPTH};
use crate::result::{
    exit_status, new_run_id, Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult,
    TextContent, TimeoutReason,
};
use crate::sanitize::Sanitizer;
use crate::session::{self, IndexEntry, StateDir};
use crate::supervisor::{self, ChildSpec, Controls, LineSink, OutputSinks, StopReason};
use crate::truncate::{truncate_head, TruncateLimits};

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
    let attempt = Attempt {
        req,
        env,
        agent,
        backend,
        cwd,
        run_id,
        limits,
    };
    attempt.execute(controls, observer).await
}

struct Attempt<'a> {
    req: &'a RunRequest,
    env: &'a RunEnv,
    agent: &'a AgentDef,
    backend: Backend,
    cwd: PathBuf,
    run_id: String,
    limits: SupervisionLimits,
}

/// Feeds the child's lines through its dialect into the collector.
struct DialectSink<'o> {
    dialect: Box<dyn Dialect>,
    collector: Collector,
    progress: Option<Progress<'o>>,
}

/// Receives streaming updates (SPEC section 1) while the child runs.
pub type Observer<'o> = Box<dyn FnMut(&RunResult) + Send + 'o>;

/// Streaming updates go out at most this often.
pub const STREAMING_UPDATE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

struct Progress<'o> {
    observer: Observer<'o>,
    run_id: String,
    last_revision: u64,
    last_sent: Option<std::time::Instant>,
}

impl Progress<'_> {
    fn maybe_send(&mut self, c: &Collector) {
        if c.revision() == self.last_revision {
            return;
        }
        let now = std::time::Instant::now();
        if self
            .last_sent
            .is_some_and(|t| now.duration_since(t) < STREAMING_UPDATE_INTERVAL)
        {
            return;
        }
        self.last_revision = c.revision();
        self.last_sent = Some(now);
        (self.observer)(&streaming_update(&self.run_id, c));
    }
}

/// A streaming update: what the child has said so far, sanitized like the final result.
fn streaming_update(run_id: &str, c: &Collector) -> RunResult {
    let sanitizer = Sanitizer::global();
    let mut items = c.display_items();
    sanitize_display_items(sanitizer, &mut items);
    RunResult {
        content: vec![TextContent::text(
            sanitizer.sanitize(c.latest_text()).into_owned(),
        )],
        details: Details {
            mode: Mode::Single,
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: Some(crate::result::Streaming {
                display_items: items,
                usage: c.usage(),
                turn_count: c.usage().turns,
            }),
        },
    }
}

fn sanitize_display_items(sanitizer: &Sanitizer, items: &mut [crate::result::DisplayItem]) {
    for item in items {
        match item {
            crate::result::DisplayItem::Text { text } => {
                if let std::borrow::Cow::Owned(s) = sanitizer.sanitize(text) {
                    *text = s;
                }
            }
            crate::result::DisplayItem::ToolCall { args, .. } => sanitizer.sanitize_json(args),
        }
    }
}

impl LineSink for DialectSink<'_> {
    fn on_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let collector = &mut self.collector;
        let ok = match simdutf8::basic::from_utf8(line) {
            Ok(text) => self.dialect.parse_line(text, &mut |e| collector.apply(e)),
            Err(_) => false,
        };
        if !ok {
            self.collector.note_skipped_line();
        }
    }

    fn on_too_long(&mut self, _bytes: u64) {
        self.collector.note_skipped_line();
    }

    fn terminal_seen(&self) -> bool {
        self.collector.terminal_seen()
    }

    fn after_chunk(&mut self) {
        if let Some(p) = self.progress.as_mut() {
            p.maybe_send(&self.collector);
        }
    }
}

impl Attempt<'_> {
    fn failure(&self, message: String) -> RunOutput {
        refuse(
            ErrorCode::SubagentFailed,
            message,
            Some(self.run_id.clone()),
        )
    }

    async fn execute(&self, controls: &Controls, observer: Option<Observer<'_>>) -> RunOutput {
        let started_at_ms = session::now_unix_ms();
        let run_dir = match self.env.state.create_run(&self.run_id) {
            Ok(d) => d,
            Err(e) => {
                return self.failure(format!("orchestrate could not create the run folder: {e}"))
            }
        };
        let model = self.req.model.as_deref().or(self.agent.model.as_deref());
        let invocation = match self.backend.build(&InvocationInput {
            agent: self.agent,
            task: &self.req.task,
            model,
            run_dir: &run_dir.path,
        }) {
            Ok(i) => i,
            // A misconfigured agent is bad input; a file that cannot be written is not.
            Err(e @ (BackendError::Command(_) | BackendError::Unknown(_))) => {
                return refuse(
                    ErrorCode::InvalidInput,
                    format!("Invalid input: agent {}: {e}", self.agent.name),
                    Some(self.run_id.clone()),
                )
            }
            Err(e) => return self.failure(format!("orchestrate could not prepare the child: {e}")),
        };
        let (mut session_file, mut stderr_file) = match (
            run_dir.create_file(session::SESSION_FILE),
            run_dir.create_file(session::STDERR_FILE),
        ) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => {
                return self.failure(format!(
                    "orchestrate could not create the session files: {e}"
                ))
            }
        };
        let mut env = invocation.env.clone();
        env.push((
            "ORCHESTRATE_DEPTH".into(),
            (self.env.depth + 1).to_string().into(),
        ));
        env.push(("ORCHESTRATE_RUN_ID".into(), self.run_id.clone().into()));
        let spec = ChildSpec {
            program: invocation.program.clone(),
            args: invocation.args.clone(),
            cwd: self.cwd.clone(),
            env,
        };
        let mut sink = DialectSink {
            dialect: invocation.dialect.parser(),
            collector: Collector::new(),
            progress: observer.map(|observer| Progress {
                observer,
                run_id: self.run_id.clone(),
                last_revision: 0,
                last_sent: None,
            }),
        };
        let outcome = supervisor::supervise(
            &spec,
            self.limits,
            &mut sink,
            OutputSinks {
                stdout_copy: &mut session_file,
                stderr_copy: &mut stderr_file,
            },
            controls,
        )
        .await;

        let session_path = run_dir.session_file().to_string_lossy().into_owned();
        let output = self.build_output(outcome, &sink.collector, &session_path, &invocation);

        if let Err(e) = run_dir.write_result(&output.result) {
            tracing::warn!("failed to write {}: {e}", run_dir.result_file().display());
        }
        let single = output.result.details.results.first();
        let entry = IndexEntry {
            run_id: self.run_id.clone(),
            agent: self.agent.name.clone(),
            backend: self.backend.name().to_string(),
            model: model.map(str::to_string),
            started_at_ms,
            duration_ms: single.map_or(0, |r| r.duration_ms),
            exit_code: single.map_or(1, |r| r.exit_code),
            error: output.result.details.error.as_ref().map(|e| {
                serde_json::to_value(e.code)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            }),
            usage: single.map(|r| r.usage).unwrap_or_default(),
            cwd: self.cwd.to_string_lossy().into_owned(),
            session_file: session_path,
        };
        if let Err(e) = self.env.state.append_index(&entry) {
            tracing::warn!("failed to append to the run index: {e}");
        }
        output
    }

    fn build_output(
        &self,
        outcome: Result<supervisor::Outcome, supervisor::SuperviseError>,
        collector: &Collector,
        session_path: &str,
        invocation: &crate::backends::Invocation,
    ) -> RunOutput {
        let sanitizer = Sanitizer::global();
        let cli = self.backend.name();
        let mut single = SingleResult {
            agent: self.agent.name.clone(),
            task: self.req.task.clone(),
            exit_code: 0,
            usage: collector.usage(),
            error: None,
            session_file: session_path.to_string(),
            output: String::new(),
            display_items: collector.display_items(),
            timeout_reason: None,
            backend: cli.to_string(),
            model: self.req.model.clone().or_else(|| self.agent.model.clone()),
            duration_ms: 0,
            attempts: 1,
            skipped_lines: collector.skipped_lines(),
            leaked_processes: false,
            warnings: invocation.warnings.clone(),
        };
        let mut process_exit = None;
        // (error code, message) when the run failed.
        let failure: Option<(ErrorCode, String)> = match outcome {
            Err(e) => {
                single.exit_code = if e.is_not_found() { 127 } else { 126 };
                let hint = if e.is_not_found() {
                    format!(
                        " ({} not found on PATH; {})",
                        invocation.program.to_string_lossy(),
                        self.backend.install_hint()
                    )
                } else {
                    String::new()
                };
                Some((
                    ErrorCode::SubagentFailed,
                    format!("Subagent could not start: {e}{hint}"),
                ))
            }
            Ok(o) => {
                single.duration_ms = o.elapsed.as_millis() as u64;
                single.leaked_processes = o.leaked;
                single.exit_code = o.exit.code();
                let stderr_hint = stderr_summary(&o.stderr_tail);
                match o.stop {
                    Some(StopReason::RuntimeTimeout) => {
                        single.exit_code = 124;
                        single.timeout_reason = Some(TimeoutReason::Runtime);
                        Some((
                            ErrorCode::SubagentTimeout,
                            format!(
                                "Subagent exceeded maximum runtime after {}ms.",
                                self.limits.runtime_timeout.as_millis()
                            ),
                        ))
                    }
                    Some(StopReason::IdleTimeout) => {
                        single.exit_code = 124;
                        single.timeout_reason = Some(TimeoutReason::Idle);
                        Some((
                            ErrorCode::SubagentTimeout,
                            format!(
                                "Subagent timed out after {}ms without activity.",
                                self.limits.idle_timeout.as_millis()
                            ),
                        ))
                    }
                    Some(StopReason::OutputCap) => Some((
                        ErrorCode::SubagentOutputTruncated,
                        format!(
                            "Subagent output passed the hard cap of {} bytes (max output bytes); the child was stopped.",
                            self.limits.max_output_bytes
                        ),
                    )),
                    Some(StopReason::Cancelled) => {
                        process_exit = Some(exit_status::CANCELLED);
                        Some((
                            ErrorCode::SubagentFailed,
                            "Subagent was cancelled; its process group was stopped.".to_string(),
                        ))
                    }
                    Some(StopReason::AfterTerminalEvent) | None => {
                        let finished = o.stop == Some(StopReason::AfterTerminalEvent);
                        if finished {
                            // It said everything and was only slow to exit: that is success.
                            single.exit_code = 0;
                        }
                        // `exitCode` stays the child's own code: pi exits 0 on a provider
                        // error, and `error` is what says the run failed.
                        if let Some(err) = collector.provider_error() {
                            Some((ErrorCode::SubagentFailed, format!("{cli} reported an error: {err}")))
                        } else if single.exit_code != 0 {
                            let how = match o.exit {
                                supervisor::LeaderExit::Exited(c) => match self.backend.explain_exit(c) {
                                    Some(why) => format!("exited with code {c} ({why})"),
                                    None => format!("exited with code {c}"),
                                },
                                supervisor::LeaderExit::Signaled(s) => {
                                    format!("was killed by signal {s} ({})", signal_name(s))
                                }
                            };
                            Some((ErrorCode::SubagentFailed, format!("{cli} {how}{stderr_hint}")))
                        } else if collector.final_text().is_none_or(|t| t.trim().is_empty()) {
                            Some((
                                ErrorCode::SubagentFailed,
                                format!(
                                    "{cli} exited without a final answer ({} bytes of output, {} unusable lines){stderr_hint}",
                                    o.stdout_bytes,
                                    collector.skipped_lines()
                                ),
                            ))
                        } else {
                            None
                        }
                    }
                }
            }
        };

        let raw_text = match &failure {
            None => collector.final_text().unwrap_or_default(),
            Some(_) => collector.partial_text(),
        };
        single.output = sanitizer.sanitize(raw_text).into_owned();
        sanitize_display_items(sanitizer, &mut single.display_items);

        let (content_text, error) = match failure {
            None => (single.output.clone(), None),
            Some((code, message)) => {
                let message = sanitizer.sanitize(&message).into_owned();
                single.error = Some(message.clone());
                let text = if single.output.is_empty() {
                    message.clone()
                } else {
                    format!("{message}\n\nPartial output:\n{}", single.output)
                };
                (text, Some(ErrorInfo { code, message }))
            }
        };
        let (text, truncation) = truncate_head(&content_text, self.req.truncate, session_path);
        let error = match (error, truncation) {
            (Some(e), _) => Some(e),
            (None, Some(t)) => Some(ErrorInfo {
                code: ErrorCode::SubagentOutputTruncated,
                message: t.error_message(),
            }),
            (None, None) => None,
        };
        let result = RunResult {
            content: vec![TextContent::text(text)],
            details: Details {
                mode: Mode::Single,
                run_id: Some(self.run_id.clone()),
                results: vec![single],
                error,
                streaming: None,
            },
        };
        let exit = process_exit.unwrap_or_else(|| result.exit_status());
        RunOutput {
            result,
            exit_status: exit,
        }
    }
}

/// The last non-empty stderr lines, for an error message.
fn stderr_summary(tail: &str) -> String {
    let lines: Vec<&str> = tail
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(5);
    format!(": {}", lines[start..].join("\n"))
}

fn signal_name(sig: i32) -> &'static str {
    nix::sys::signal::Signal::try_from(sig).map_or("unknown signal", |s| s.as_str())
}
