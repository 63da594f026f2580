//! One attempt: the child's command line, the supervised process, and the result built
//! from how it ended.

use std::path::PathBuf;

use super::progress::{sanitize_display_items, DialectSink, Observer, Progress};
use super::{refuse, RunEnv, RunOutput, RunRequest};
use crate::agents::AgentDef;
use crate::backends::{Backend, BackendError, Invocation, InvocationInput};
use crate::collector::Collector;
use crate::result::{
    exit_status, Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult, TextContent,
    TimeoutReason,
};
use crate::sanitize::Sanitizer;
use crate::session::{self, IndexEntry, RunDir};
use crate::supervisor::{self, ChildSpec, Controls, OutputSinks, StopReason};
use crate::truncate::truncate_head;

pub(super) struct Attempt<'a> {
    pub req: &'a RunRequest,
    pub env: &'a RunEnv,
    pub agent: &'a AgentDef,
    pub backend: Backend,
    pub cwd: PathBuf,
    pub run_id: String,
    pub settings: super::Resolved,
    pub run_dir: RunDir,
    pub resume: Option<crate::backends::ResumeFrom>,
}

/// Attempt 1 writes `session.jsonl` and `stderr.log`; a retry writes
/// `session.attempt-N.jsonl` and `stderr.attempt-N.log` beside them, so every attempt keeps
/// its own record.
fn attempt_file_names(n: u32) -> (String, String) {
    if n <= 1 {
        (
            session::SESSION_FILE.to_string(),
            session::STDERR_FILE.to_string(),
        )
    } else {
        (
            format!("session.attempt-{n}.jsonl"),
            format!("stderr.attempt-{n}.log"),
        )
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

    pub async fn execute(
        &self,
        n: u32,
        controls: &Controls,
        observer: Option<&mut Observer<'_>>,
    ) -> RunOutput {
        let run_dir = &self.run_dir;
        let model = self.req.model.as_deref().or(self.agent.model.as_deref());
        let invocation = match self.backend.build(&InvocationInput {
            agent: self.agent,
            task: &self.req.task,
            model,
            run_dir: &run_dir.path,
            resume: self.resume.as_ref(),
        }) {
            Ok(i) => i,
            // A misconfigured agent is bad input; a file that cannot be written is not.
            Err(
                e @ (BackendError::Command(_) | BackendError::Unknown(_) | BackendError::Resume(_)),
            ) => {
                return refuse(
                    ErrorCode::InvalidInput,
                    format!("Invalid input: agent {}: {e}", self.agent.name),
                    Some(self.run_id.clone()),
                )
            }
            Err(e) => return self.failure(format!("orchestrate could not prepare the child: {e}")),
        };
        let (session_name, stderr_name) = attempt_file_names(n);
        let (mut session_file, mut stderr_file) = match (
            run_dir.create_file(&session_name),
            run_dir.create_file(&stderr_name),
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
            self.settings.limits,
            &mut sink,
            OutputSinks {
                stdout_copy: &mut session_file,
                stderr_copy: &mut stderr_file,
            },
            controls,
        )
        .await;
        let session_path = run_dir
            .path
            .join(&session_name)
            .to_string_lossy()
            .into_owned();
        self.build_output(outcome, &sink.collector, &session_path, &invocation)
    }

    /// Writes `result.json` and the run's line in `runs.jsonl`.
    pub fn record(&self, output: &RunOutput, started_at_ms: u64) {
        if let Err(e) = self.run_dir.write_result(&output.result) {
            tracing::warn!(
                "failed to write {}: {e}",
                self.run_dir.result_file().display()
            );
        }
        let single = output.result.details.results.first();
        let entry = IndexEntry {
            run_id: self.run_id.clone(),
            agent: self.agent.name.clone(),
            backend: self.backend.name().to_string(),
            model: self.req.model.clone().or_else(|| self.agent.model.clone()),
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
            session_file: single
                .map(|r| r.session_file.clone())
                .unwrap_or_else(|| self.run_dir.session_file().to_string_lossy().into_owned()),
        };
        if let Err(e) = self.env.state.append_index(&entry) {
            tracing::warn!("failed to append to the run index: {e}");
        }
    }

    fn build_output(
        &self,
        outcome: Result<supervisor::Outcome, supervisor::SuperviseError>,
        collector: &Collector,
        session_path: &str,
        invocation: &Invocation,
    ) -> RunOutput {
        let sanitizer = Sanitizer::global();
        let cli = self.backend.name();
        let mut single = SingleResult {
            run_id: None,
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
            termination: None,
            leak: Default::default(),
            child_session_id: collector.session_id().map(str::to_string),
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
                single.termination = Some(o.termination);
                single.leak = o.leak;
                single.leaked_processes = !o.leak.is_none();
                if let Some(e) = &o.session_write_error {
                    single
                        .warnings
                        .push(format!("the session file could not be written: {e}"));
                }
                single.exit_code = o.exit.code();
                let stderr_hint = stderr_summary(&o.stderr_tail);
                match o.stop() {
                    Some(StopReason::RuntimeTimeout) => {
                        single.exit_code = 124;
                        single.timeout_reason = Some(TimeoutReason::Runtime);
                        Some((
                            ErrorCode::SubagentTimeout,
                            format!(
                                "Subagent exceeded maximum runtime after {}ms.",
                                self.settings.limits.runtime_timeout.as_millis()
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
                                self.settings.limits.idle_timeout.as_millis()
                            ),
                        ))
                    }
                    Some(StopReason::OutputCap) => Some((
                        ErrorCode::SubagentOutputTruncated,
                        format!(
                            "Subagent output passed the hard cap of {} bytes (max output bytes); the child was stopped.",
                            self.settings.limits.max_output_bytes
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
                        let finished = o.stop() == Some(StopReason::AfterTerminalEvent);
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
        let (text, truncation) = truncate_head(&content_text, self.settings.truncate, session_path);
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
                background: None,
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
