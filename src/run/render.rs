//! Turns an attempt's verdict into the result a parent reads: the wording of each failure,
//! the sanitized answer, and the truncated content.

use std::ffi::OsStr;

use super::progress::sanitize_display_items;
use super::resolve::ResolvedRun;
use super::verdict::Verdict;
use super::RunOutput;
use crate::backends::Backend;
use crate::collector::Collector;
use crate::result::{
    exit_status, Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult, TextContent,
    TimeoutReason,
};
use crate::sanitize::Sanitizer;
use crate::supervisor::{Outcome, SuperviseError};
use crate::truncate::truncate_head;

/// What the renderer needs besides the verdict.
pub(crate) struct Context<'a> {
    pub run: &'a ResolvedRun,
    /// The program that was (or could not be) started.
    pub program: &'a OsStr,
    /// Restrictions of the agent its CLI could not express.
    pub warnings: &'a [String],
    pub session_file: String,
    /// The answer's JSON value, validated against the output schema.
    pub structured: Option<serde_json::Value>,
}

pub(crate) fn render(
    verdict: &Verdict,
    outcome: &Result<Outcome, SuperviseError>,
    collected: &Collector,
    ctx: &Context<'_>,
) -> RunOutput {
    let sanitizer = Sanitizer::global();
    let mut single = facts(outcome, collected, ctx);
    single.exit_code = verdict.exit_code(outcome);
    if let Verdict::Timeout(reason) = verdict {
        single.timeout_reason = Some(*reason);
    }
    let raw_text = match verdict {
        Verdict::Answered | Verdict::NotMatchingSchema(_) => {
            collected.final_text().unwrap_or_default()
        }
        _ => collected.partial_text(),
    };
    single.output = sanitizer.sanitize(raw_text).into_owned();
    sanitize_display_items(sanitizer, &mut single.display_items);
    single.structured = ctx.structured.clone().map(|mut value| {
        sanitizer.sanitize_json(&mut value);
        value
    });
    let failure = failure(verdict, outcome, collected, ctx)
        .map(|(code, message)| (code, sanitizer.sanitize(&message).into_owned()));
    single.error = failure.as_ref().map(|(_, message)| message.clone());
    let content = match (&failure, &single.structured) {
        // The validated answer, as compact JSON.
        (None, Some(value)) => value.to_string(),
        (None, None) => single.output.clone(),
        (Some((_, message)), _) if single.output.is_empty() => message.clone(),
        (Some((_, message)), _) if matches!(verdict, Verdict::NotMatchingSchema(_)) => {
            format!("{message}\n\nAnswer:\n{}", single.output)
        }
        (Some((_, message)), _) => format!("{message}\n\nPartial output:\n{}", single.output),
    };
    let (text, truncation) = truncate_head(&content, ctx.run.truncate, &ctx.session_file);
    let error = match failure {
        Some((code, message)) => Some(ErrorInfo { code, message }),
        None => truncation.map(|t| ErrorInfo {
            code: ErrorCode::SubagentOutputTruncated,
            message: t.error_message(),
        }),
    };
    let result = RunResult {
        content: vec![TextContent::text(text)],
        details: Details {
            mode: Mode::Single,
            run_id: Some(ctx.run.run_id.clone()),
            results: vec![single],
            error,
            streaming: None,
            background: None,
        },
    };
    let exit_status = match verdict {
        Verdict::Cancelled => exit_status::CANCELLED,
        _ => result.exit_status(),
    };
    RunOutput {
        result,
        exit_status,
    }
}

/// The result's facts that do not depend on how the run is judged.
fn facts(
    outcome: &Result<Outcome, SuperviseError>,
    collected: &Collector,
    ctx: &Context<'_>,
) -> SingleResult {
    let run = ctx.run;
    let o = outcome.as_ref().ok();
    SingleResult {
        run_id: None,
        agent: run.agent.name.clone(),
        task: run.task.clone(),
        exit_code: 0,
        usage: collected.usage(),
        error: None,
        session_file: ctx.session_file.clone(),
        output: String::new(),
        display_items: collected.display_items(),
        timeout_reason: None,
        backend: run.backend.backend.name().to_string(),
        model: run.model.clone(),
        duration_ms: o.map_or(0, |o| o.elapsed.as_millis() as u64),
        attempts: 1,
        skipped_lines: collected.skipped_lines(),
        leaked_processes: o.is_some_and(|o| !o.leak.is_none()),
        termination: o.map(|o| o.termination),
        leak: o.map(|o| o.leak).unwrap_or_default(),
        child_session_id: collected.session_id().map(str::to_string),
        structured: None,
        warnings: warnings(o, ctx),
    }
}

/// What the run could not honour: the CLI's own limits, and a session file that could not
/// be written (the run went on without it).
fn warnings(outcome: Option<&Outcome>, ctx: &Context<'_>) -> Vec<String> {
    let mut warnings = ctx.warnings.to_vec();
    if let Some(e) = outcome.and_then(|o| o.session_write_error.as_ref()) {
        warnings.push(format!("the session file could not be written: {e}"));
    }
    warnings
}

/// The error code and message of a failed attempt, in the contract's words.
fn failure(
    verdict: &Verdict,
    outcome: &Result<Outcome, SuperviseError>,
    collected: &Collector,
    ctx: &Context<'_>,
) -> Option<(ErrorCode, String)> {
    let limits = &ctx.run.limits;
    let failed = |message: String| Some((ErrorCode::SubagentFailed, message));
    match verdict {
        Verdict::Answered => None,
        Verdict::NotStarted { not_found, error } => failed(format!(
            "Subagent could not start: {error}{}",
            if *not_found { not_found_hint(ctx) } else { String::new() }
        )),
        Verdict::Timeout(TimeoutReason::Runtime) => Some((
            ErrorCode::SubagentTimeout,
            format!(
                "Subagent exceeded maximum runtime after {}ms.",
                limits.runtime_timeout.as_millis()
            ),
        )),
        Verdict::Timeout(TimeoutReason::Idle) => Some((
            ErrorCode::SubagentTimeout,
            format!(
                "Subagent timed out after {}ms without activity.",
                limits.idle_timeout.as_millis()
            ),
        )),
        Verdict::Capped => Some((
            ErrorCode::SubagentOutputTruncated,
            format!(
                "Subagent output passed the hard cap of {} bytes (max output bytes); the child was stopped.",
                limits.max_output_bytes
            ),
        )),
        Verdict::Cancelled => {
            failed("Subagent was cancelled; its process group was stopped.".to_string())
        }
        Verdict::NotMatchingSchema(mismatch) => failed(format!(
            "Answer does not match the output schema: {mismatch}"
        )),
        Verdict::ProviderError(_) | Verdict::Exited(_) | Verdict::Signaled(_) | Verdict::NoAnswer => {
            failed(child_failure(verdict, outcome, collected, ctx.run.backend.backend))
        }
    }
}

/// How the child itself failed: its own error, its exit, or its silence.
fn child_failure(
    verdict: &Verdict,
    outcome: &Result<Outcome, SuperviseError>,
    collected: &Collector,
    backend: Backend,
) -> String {
    let cli = backend.name();
    let stderr = outcome
        .as_ref()
        .map_or(String::new(), |o| stderr_summary(&o.stderr_tail));
    match verdict {
        Verdict::ProviderError(err) => format!("{cli} reported an error: {err}"),
        Verdict::Exited(code) => {
            let why = backend
                .explain_exit(*code)
                .map_or(String::new(), |why| format!(" ({why})"));
            format!("{cli} exited with code {code}{why}{stderr}")
        }
        Verdict::Signaled(sig) => {
            format!(
                "{cli} was killed by signal {sig} ({}){stderr}",
                signal_name(*sig)
            )
        }
        _ => format!(
            "{cli} exited without a final answer ({} bytes of output, {} unusable lines){stderr}",
            outcome.as_ref().map_or(0, |o| o.stdout_bytes),
            collected.skipped_lines()
        ),
    }
}

/// Why the program was not found, and how to install it. When `auto` found no CLI at all,
/// every one it tried is named.
fn not_found_hint(ctx: &Context<'_>) -> String {
    let selection = &ctx.run.backend;
    if selection.auto && !selection.installed {
        let tried: Vec<String> = Backend::AUTO_ORDER
            .iter()
            .map(|b| b.program().to_string_lossy().into_owned())
            .collect();
        return format!(
            " (no agent CLI found on PATH; tried {}). Install one, for example claude: {}",
            tried.join(", "),
            Backend::Claude.install_hint()
        );
    }
    format!(
        " ({} not found on PATH; {})",
        ctx.program.to_string_lossy(),
        selection.backend.install_hint()
    )
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
