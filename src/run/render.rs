//! Turns an attempt's verdict into the result a parent reads: the wording of each failure,
//! the sanitized answer, and the truncated content.

use std::ffi::OsStr;

use super::progress::sanitize_display_items;
use super::resolve::ResolvedRun;
use super::verdict::Verdict;
use super::RunOutput;
use crate::backends::Backend;
use crate::collector::{Collector, KeptText};
use crate::limits::MAX_CONSECUTIVE_RETRIES;
use crate::network::{ChildNetwork, Network, NetworkInfo};
use crate::result::{
    exit_status, Details, ErrorCode, ErrorInfo, Limit, Mode, RunResult, SingleResult, TextContent,
    TimeoutReason,
};
use crate::runner::RunnerInfo;
use crate::sanitize::Sanitizer;
use crate::supervisor::{Outcome, SuperviseError};
use crate::truncate::{truncate_head_of_longer, Missing, TruncateLimits};

/// What the renderer needs besides the verdict.
pub(crate) struct Context<'a> {
    pub run: &'a ResolvedRun,
    /// The dialect the child's stream was read in (a backend's, the command backend's
    /// agent names which).
    pub dialect: Backend,
    /// The program that was (or could not be) started.
    pub program: &'a OsStr,
    /// Restrictions of the agent its CLI could not express.
    pub warnings: &'a [String],
    /// The child's proxy and what it refused (`network: provider`).
    pub network: Option<&'a ChildNetwork>,
    /// The model this attempt ran (the run's, or a fallback).
    pub model: Option<&'a str>,
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
    match verdict {
        Verdict::Timeout(reason) => single.timeout_reason = Some(*reason),
        Verdict::Budget { limit, .. } => single.limit = Some(*limit),
        _ => {}
    }
    // An answer that does not match the output schema is still the answer, shown whole.
    let answer = match verdict {
        Verdict::Answered | Verdict::NotMatchingSchema(_) => collected.final_kept(),
        _ => collected.partial_kept(),
    };
    let raw_text = answer.map_or("", KeptText::as_str);
    // Of an answer longer than orchestrate keeps, the rest is only counted: the marker
    // says how long it was and where it is whole.
    let missing = answer
        .filter(|a| a.is_cut())
        .map_or(Missing::default(), |a| {
            let (bytes, lines) = a.totals();
            Missing {
                bytes: (bytes as usize).saturating_sub(raw_text.len()),
                lines: (lines as usize).saturating_sub(raw_text.lines().count()),
            }
        });
    let body = sanitizer.sanitize(raw_text).into_owned();
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
        (None, None) => body.clone(),
        (Some((_, message)), _) if body.is_empty() => message.clone(),
        (Some((_, message)), _) if matches!(verdict, Verdict::NotMatchingSchema(_)) => {
            format!("{message}\n\nAnswer:\n{body}")
        }
        (Some((_, message)), _) => format!("{message}\n\nPartial output:\n{body}"),
    };
    let (text, truncation) =
        truncate_head_of_longer(&content, missing, ctx.run.truncate, &ctx.session_file);
    single.output = if missing == Missing::default() {
        body
    } else {
        let whole = TruncateLimits {
            max_bytes: usize::MAX,
            max_lines: usize::MAX,
        };
        truncate_head_of_longer(&body, missing, whole, &ctx.session_file).0
    };
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
            scheduler: Default::default(),
            tree_usage: None,
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
        model: ctx.model.map(str::to_string),
        duration_ms: o.map_or(0, |o| o.elapsed.as_millis() as u64),
        attempts: 1,
        skipped_lines: collected.skipped_lines(),
        leaked_processes: o.is_some_and(|o| !o.leak.is_none()),
        termination: o.map(|o| o.termination),
        leak: o.map(|o| o.leak).unwrap_or_default(),
        child_session_id: collected.session_id().map(str::to_string),
        structured: None,
        warnings: warnings(o, collected, ctx),
        limit: None,
        attempts_detail: Vec::new(),
        sandbox: Some(match o {
            // Where the child ran elsewhere, the layers its node reported.
            Some(o) => run.sandbox.held(&o.sandbox_layers.held),
            _ => run.sandbox.info(),
        }),
        network: Some(network_info(o, ctx)),
        worktree: None,
        runner: runner_info(o, ctx),
        nested_usage: None,
        permissions: collected.permissions().0.to_vec(),
        messages: Vec::new(),
    }
}

/// The network the child had: what its plan said, unless the default `provider` could not
/// be had at the spawn (then the host's); with `provider`, what was allowed and refused.
fn network_info(outcome: Option<&Outcome>, ctx: &Context<'_>) -> NetworkInfo {
    let fell_back = outcome.is_some_and(|o| o.network_fallback.is_some());
    match ctx.network {
        Some(net) if !fell_back => {
            let mut info = net.info();
            let sanitizer = Sanitizer::global();
            for d in &mut info.denied {
                d.host = sanitizer.sanitize(&d.host).into_owned();
            }
            info
        }
        Some(_) => NetworkInfo {
            mode: Network::On,
            ..NetworkInfo::default()
        },
        None => NetworkInfo {
            mode: ctx.run.network.mode,
            ..NetworkInfo::default()
        },
    }
}

/// Where the child ran, for a run that did not run here.
fn runner_info(outcome: Option<&Outcome>, ctx: &Context<'_>) -> Option<RunnerInfo> {
    let runner = &ctx.run.runner;
    if runner.kind.here() {
        return None;
    }
    let settled = outcome.map(|o| &o.settled);
    Some(RunnerInfo {
        kind: runner.kind.name().to_string(),
        name: runner.named().map(str::to_string),
        job_id: settled.and_then(|s| s.job_id.clone()),
        node: settled.and_then(|s| s.node.clone()),
        queue_wait_ms: outcome.map_or(0, |o| o.queue_wait.as_millis() as u64),
        state: settled.and_then(|s| s.state.clone()),
    })
}

/// What the run could not honour: the CLI's own limits, a session file that could not be
/// written (the run went on without it), fields of the child's stream that could not be
/// used, a budget its stream could not hold.
fn warnings(outcome: Option<&Outcome>, collected: &Collector, ctx: &Context<'_>) -> Vec<String> {
    let mut warnings = ctx.warnings.to_vec();
    warnings.extend(collected.warnings().iter().cloned());
    let dropped_permissions = collected.permissions().1;
    warnings.extend(ctx.run.sandbox.warning.iter().cloned());
    warnings.extend(ctx.run.network.warning.iter().cloned());
    if let Some(net) = ctx.network {
        warnings.extend(net.warnings.iter().cloned());
    }
    if let Some(why) = outcome.and_then(|o| o.network_fallback.as_ref()) {
        warnings.push(crate::network::fallback_warning(why));
    }
    warnings.extend(stream_warnings(collected, ctx));
    if let Some(e) = outcome.and_then(|o| o.session_write_error.as_ref()) {
        warnings.push(format!("the session file could not be written: {e}"));
    }
    if let Some(o) = outcome {
        warnings.extend(o.settled.warnings.iter().cloned());
    }
    if dropped_permissions > 0 {
        warnings.push(format!(
            "the child asked for {dropped_permissions} more permissions than the result lists (the first {} are)",
            crate::collector::MAX_PERMISSION_RECORDS
        ));
    }
    if ctx.run.sandbox.confines() {
        for (layer, why) in outcome.map_or(&[][..], |o| &o.sandbox_layers.missing[..]) {
            warnings.push(format!("sandbox layer {layer} missing: {why}"));
        }
    }
    if let Some(why) = outcome.and_then(|o| o.containment_degraded.as_ref()) {
        warnings.push(format!(
            "no PID namespace for the child ({why}): descendants that outlive it are killed when the run ends, but would survive orchestrate itself being killed"
        ));
    }
    warnings
}

/// What the child's stream did not give as it should have: each field that could not be
/// used (once, however many lines had it), a usage sum that saturated, and a budget that
/// nothing in the stream could be checked against.
fn stream_warnings(collected: &Collector, ctx: &Context<'_>) -> Vec<String> {
    let cli = ctx.run.backend.backend.name();
    let mut out: Vec<String> = collected
        .odd_fields()
        .iter()
        .map(|odd| {
            let times = match odd.times {
                1 => "1 time".to_string(),
                n => format!("{n} times"),
            };
            format!(
                "{cli}'s \"{}\": {} ({times}); {}",
                odd.field,
                odd.problem,
                odd.problem.consequence()
            )
        })
        .collect();
    if collected.usage_saturated() {
        out.push(
            "the usage sums passed the largest value they can hold and were kept at it".to_string(),
        );
    }
    // A dialect without a cost at all is said before the run, with the command line.
    let reports = ctx.dialect.reports();
    let (has_cost, has_usage) = (reports.cost, reports.usage_while_running);
    let (cost_reported, tokens_reported) = collected.reported();
    let budgets = &ctx.run.budgets;
    if let Some(limit) = budgets.max_tokens.filter(|_| has_usage && !tokens_reported) {
        out.push(format!(
            "the token budget {limit} could not be held: {cli} reported no token usage"
        ));
    }
    if let Some(limit) = budgets.max_cost.filter(|_| has_cost && !cost_reported) {
        out.push(format!(
            "the cost budget {} could not be held: {cli} reported no cost",
            usd(limit)
        ));
    }
    out
}

/// The error code and message of a failed attempt, in the contract's words.
fn failure(
    verdict: &Verdict,
    outcome: &Result<Outcome, SuperviseError>,
    collected: &Collector,
    ctx: &Context<'_>,
) -> Option<(ErrorCode, String)> {
    let limits = &ctx.run.limits;
    let engine = ctx.run.runner.kind.title();
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
        Verdict::Timeout(TimeoutReason::Queue) => Some((
            ErrorCode::SubagentTimeout,
            format!(
                "Subagent's job waited in {engine}'s queue for {}ms without starting (queue timeout{}); it was cancelled.",
                limits.queue_timeout.as_millis(),
                outcome
                    .as_ref()
                    .ok()
                    .and_then(|o| o.settled.pending_reason.as_ref())
                    .map_or(String::new(), |why| format!("; {engine}'s reason: {why}"))
            ),
        )),
        Verdict::Engine(why) => failed(format!("Subagent could not run on {engine}: {why}")),
        Verdict::Timeout(TimeoutReason::Tool) => Some((
            ErrorCode::SubagentTimeout,
            format!(
                "Subagent timed out after {}ms in a tool call that did not finish (tool timeout).",
                limits.tool_timeout.as_millis()
            ),
        )),
        Verdict::Budget { limit, total } => failed(budget_message(
            *limit,
            *total,
            collected.usage().turns,
        )),
        Verdict::Unreachable { words, retries } => {
            let how = if *retries >= MAX_CONSECUTIVE_RETRIES {
                format!("it retried {retries} times in a row without progress")
            } else {
                format!(
                    "it only retried, without progress, for {}ms (connect timeout)",
                    limits.connect_timeout.as_millis()
                )
            };
            let words = if words.is_empty() {
                "(it gave no reason)"
            } else {
                words
            };
            failed(format!(
                "{} could not reach its provider: {words}. Stopped: {how}.",
                ctx.run.backend.backend.name()
            ))
        }
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
        Verdict::NotMatchingSchema(mismatch) => {
            failed(format!("Answer {}: {mismatch}", mismatch.what()))
        }
        Verdict::ProviderError(_) | Verdict::Exited(_) | Verdict::Signaled(_) | Verdict::Unanswered => {
            failed(child_failure(verdict, outcome, collected, ctx.run.backend.backend))
        }
    }
}

/// `Subagent stopped: cost budget $0.50 reached after 7 turns ($0.53 used).`
fn budget_message(limit: Limit, total: bool, turns: u64) -> String {
    let after = match turns {
        1 => "after 1 turn".to_string(),
        n => format!("after {n} turns"),
    };
    match limit {
        Limit::Turns { limit, .. } => {
            format!("Subagent stopped: turn budget {limit} reached {after}.")
        }
        Limit::Tokens { limit, used } if total => format!(
            "Subagent stopped: the total token budget {limit} of its fan-out was reached {after} ({used} tokens used by all tasks)."
        ),
        Limit::Tokens { limit, used } => {
            format!("Subagent stopped: token budget {limit} reached {after} ({used} tokens used).")
        }
        Limit::Cost { limit, used } if total => format!(
            "Subagent stopped: the total cost budget {} of its fan-out was reached {after} ({} used by all tasks).",
            usd(limit),
            usd(used)
        ),
        Limit::Cost { limit, used } => format!(
            "Subagent stopped: cost budget {} reached {after} ({} used).",
            usd(limit),
            usd(used)
        ),
        Limit::TreeCost { limit, used } => format!(
            "Subagent stopped: the tree's cost budget {} was reached {after} ({} used across the tree, nested orchestrate runs included).",
            usd(limit),
            usd(used)
        ),
        Limit::TreeTokens { limit, used } => format!(
            "Subagent stopped: the tree's token budget {limit} was reached {after} ({used} tokens used across the tree, nested orchestrate runs included)."
        ),
    }
}

/// Why a task did not start: `the total cost budget $1.00 of this fan-out was spent
/// ($1.02 used by the tasks before it).`
pub(crate) fn spent_message(limit: &Limit) -> String {
    match *limit {
        Limit::Cost { limit, used } => format!(
            "the total cost budget {} of this fan-out was spent ({} used by the tasks before it).",
            usd(limit),
            usd(used)
        ),
        Limit::Tokens { limit, used } => format!(
            "the total token budget {limit} of this fan-out was spent ({used} tokens used by the tasks before it)."
        ),
        Limit::TreeCost { limit, used } => format!(
            "the tree's cost budget {} was spent ({} used across the tree, nested orchestrate runs included).",
            usd(limit),
            usd(used)
        ),
        Limit::TreeTokens { limit, used } => format!(
            "the tree's token budget {limit} was spent ({used} tokens used across the tree, nested orchestrate runs included)."
        ),
        Limit::Turns { limit, .. } => format!("the turn budget {limit} was spent."),
    }
}

/// Dollars as people write them: cents, or the first significant digits of a fraction
/// of a cent.
pub(crate) fn usd(amount: f64) -> String {
    if amount >= 1e9 {
        // An absurd amount (a child's report, or a sum kept at the largest one).
        format!("${amount:.1e}")
    } else if amount >= 0.1 || amount == 0.0 {
        format!("${amount:.2}")
    } else {
        let digits = (-amount.log10()).ceil() as usize + 1;
        let s = format!("{amount:.digits$}");
        format!("${}", s.trim_end_matches('0'))
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
        let tried: Vec<String> = Backend::auto_order()
            .map(|b| b.program().to_string_lossy().into_owned())
            .collect();
        let first = Backend::auto_order()
            .next()
            .expect("auto picks some backend");
        return format!(
            " (no agent CLI found on PATH; tried {}). Install one, for example {first}: {}",
            tried.join(", "),
            first.install_hint()
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
