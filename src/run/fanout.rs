//! Several tasks in one call: `parallel` (concurrently, under a limit, results in input
//! order) and `chain` (in order, `{previous}` replaced by the previous step's output,
//! stopping at the first failure).

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{refuse, refuse_if_not_allowed, run, Resolved, RunEnv, RunOutput, RunRequest};
use crate::result::{
    exit_status, new_run_id, Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult,
    TextContent,
};
use crate::supervisor::Controls;
use crate::truncate::{truncate_head, TruncateLimits};

pub const DEFAULT_CONCURRENCY: usize = 4;
pub const DEFAULT_MAX_TASKS: usize = 16;
/// The placeholder a chain step uses for the previous step's output.
pub const PREVIOUS: &str = "{previous}";
/// The smallest share of the output limits one task gets, however many there are.
const MIN_TASK_BYTES: usize = 2 * 1024;
const MIN_TASK_LINES: usize = 40;

/// Limits on a fan-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FanoutLimits {
    pub concurrency: usize,
    pub max_tasks: usize,
}

impl Default for FanoutLimits {
    fn default() -> Self {
        FanoutLimits {
            concurrency: DEFAULT_CONCURRENCY,
            max_tasks: DEFAULT_MAX_TASKS,
        }
    }
}

impl FanoutLimits {
    /// The config's limits, with a `--concurrency` flag on top.
    pub fn from_config(cfg: &crate::config::Config, concurrency_flag: Option<usize>) -> Self {
        FanoutLimits {
            concurrency: concurrency_flag.unwrap_or(cfg.concurrency.value),
            max_tasks: cfg.max_tasks.value,
        }
    }
}

/// Checks the task list; `None` when it may run.
fn refuse_tasks(
    reqs: &[RunRequest],
    limits: FanoutLimits,
    env: &RunEnv,
    group_id: &str,
) -> Option<RunOutput> {
    if reqs.is_empty() {
        return Some(refuse(
            ErrorCode::InvalidInput,
            "Invalid input: tasks must not be empty.",
            None,
        ));
    }
    if reqs.len() > limits.max_tasks {
        return Some(refuse(
            ErrorCode::InvalidInput,
            format!(
                "Invalid input: {} tasks given, at most {} allowed (raise max_tasks in the config).",
                reqs.len(),
                limits.max_tasks
            ),
            None,
        ));
    }
    for (i, r) in reqs.iter().enumerate() {
        if r.agent.trim().is_empty() || r.task.trim().is_empty() {
            return Some(refuse(
                ErrorCode::InvalidInput,
                format!(
                    "Invalid input: task {} needs both an agent and a task.",
                    i + 1
                ),
                None,
            ));
        }
    }
    refuse_if_not_allowed(env, group_id).map(|mut out| {
        // A refusal of the whole call keeps the mode it was asked for.
        out.result.details.mode = Mode::Management;
        out
    })
}

/// Each task's share of the output limits, so that all answers fit in the whole.
fn share(limits: TruncateLimits, n: usize) -> TruncateLimits {
    TruncateLimits {
        max_bytes: (limits.max_bytes / n.max(1)).max(MIN_TASK_BYTES),
        max_lines: (limits.max_lines / n.max(1)).max(MIN_TASK_LINES),
    }
}

/// Runs `reqs` concurrently, at most `limits.concurrency` at once.
pub async fn run_parallel(
    reqs: Vec<RunRequest>,
    env: &RunEnv,
    controls: &Controls,
    limits: FanoutLimits,
) -> RunOutput {
    let group_id = new_run_id();
    if let Some(refusal) = refuse_tasks(&reqs, limits, env, &group_id) {
        return refusal;
    }
    let whole = Resolved::of(&reqs[0], None, &env.config).truncate;
    let n = reqs.len();
    let gate = Arc::new(Semaphore::new(limits.concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (i, mut req) in reqs.into_iter().enumerate() {
        let part = share(whole, n);
        req.max_bytes = Some(part.max_bytes);
        req.max_lines = Some(part.max_lines);
        let (env, controls, gate) = (env.clone(), controls.clone(), gate.clone());
        set.spawn(async move {
            let _permit = gate
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            (i, run(&req, &env, &controls, None).await)
        });
    }
    let mut outputs: Vec<Option<RunOutput>> = (0..n).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, out)) => outputs[i] = Some(out),
            Err(e) => tracing::error!("a parallel task panicked: {e}"),
        }
    }
    let outputs: Vec<RunOutput> = outputs
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                refuse(
                    ErrorCode::SubagentFailed,
                    "orchestrate internal error: the task panicked",
                    None,
                )
            })
        })
        .collect();
    combine(Mode::Parallel, group_id, outputs, whole, None)
}

/// Runs `reqs` one after another, each seeing the previous output in place of
/// `{previous}`. The first failure stops the chain.
pub async fn run_chain(
    reqs: Vec<RunRequest>,
    env: &RunEnv,
    controls: &Controls,
    limits: FanoutLimits,
) -> RunOutput {
    let group_id = new_run_id();
    if let Some(refusal) = refuse_tasks(&reqs, limits, env, &group_id) {
        return refusal;
    }
    let whole = Resolved::of(&reqs[0], None, &env.config).truncate;
    let mut outputs: Vec<RunOutput> = Vec::new();
    let mut previous = String::new();
    let mut stopped_at = None;
    for (i, mut req) in reqs.into_iter().enumerate() {
        req.task = req.task.replace(PREVIOUS, &previous);
        let out = run(&req, env, controls, None).await;
        let failed = out
            .result
            .details
            .results
            .first()
            .is_none_or(|r| r.error.is_some())
            || out.exit_status != exit_status::SUCCESS;
        previous = out
            .result
            .details
            .results
            .first()
            .map(|r| r.output.clone())
            .unwrap_or_default();
        outputs.push(out);
        if failed {
            stopped_at = Some(i);
            break;
        }
    }
    combine(Mode::Chain, group_id, outputs, whole, stopped_at)
}

/// One result out of many: every task's SingleResult in order, one text with a heading per
/// task (parallel) or the last answer (chain), and an error naming what failed.
fn combine(
    mode: Mode,
    group_id: String,
    outputs: Vec<RunOutput>,
    whole: TruncateLimits,
    chain_stopped_at: Option<usize>,
) -> RunOutput {
    let cancelled = outputs
        .iter()
        .any(|o| o.exit_status == exit_status::CANCELLED);
    let mut results: Vec<SingleResult> = Vec::new();
    let mut sections = Vec::new();
    let mut failures = Vec::new();
    let mut truncated = false;
    for (i, out) in outputs.iter().enumerate() {
        let code = out.result.details.error.as_ref().map(|e| e.code);
        let text = out.result.content.first().map_or("", |c| c.text.as_str());
        match out.result.details.results.first() {
            Some(single) => {
                let mut single = single.clone();
                single.run_id = out.result.details.run_id.clone();
                sections.push(format!(
                    "## {}. {}: {}\n\n{}",
                    i + 1,
                    single.agent,
                    headline(&single.task),
                    text
                ));
                results.push(single);
            }
            // Refused before it ran (unknown agent, bad input): the message is the answer.
            None => sections.push(format!("## {}. (not run)\n\n{}", i + 1, text)),
        }
        match code {
            Some(ErrorCode::SubagentOutputTruncated) if out.exit_status == exit_status::SUCCESS => {
                truncated = true
            }
            Some(code) => failures.push(format!("task {} ({})", i + 1, code_name(code))),
            None => {}
        }
    }
    let error = if let Some(step) = chain_stopped_at {
        let message = outputs[step]
            .result
            .details
            .error
            .as_ref()
            .map_or("failed".to_string(), |e| e.message.clone());
        Some(ErrorInfo {
            code: outputs[step]
                .result
                .details
                .error
                .as_ref()
                .map_or(ErrorCode::SubagentFailed, |e| e.code),
            message: format!("Chain stopped at step {} of the chain: {message}", step + 1),
        })
    } else if !failures.is_empty() {
        Some(ErrorInfo {
            code: ErrorCode::SubagentFailed,
            message: format!(
                "{} of {} tasks failed: {}",
                failures.len(),
                outputs.len(),
                failures.join(", ")
            ),
        })
    } else if truncated {
        Some(ErrorInfo {
            code: ErrorCode::SubagentOutputTruncated,
            message: "Output truncated in one or more tasks".to_string(),
        })
    } else {
        None
    };
    let text = match mode {
        // A chain's answer is its last step's; the steps before it are in `results`.
        Mode::Chain => outputs
            .last()
            .and_then(|o| o.result.content.first())
            .map_or(String::new(), |c| c.text.clone()),
        _ => sections.join("\n\n"),
    };
    let session = results
        .first()
        .map_or(String::new(), |r| r.session_file.clone());
    let (text, _) = truncate_head(&text, whole, &session);
    let result = RunResult {
        content: vec![TextContent::text(text)],
        details: Details {
            mode,
            run_id: Some(group_id),
            results,
            error,
            streaming: None,
            background: None,
        },
    };
    let exit = if cancelled {
        exit_status::CANCELLED
    } else if result
        .details
        .error
        .as_ref()
        .is_some_and(|e| e.code != ErrorCode::SubagentOutputTruncated)
    {
        exit_status::FAILURE
    } else {
        exit_status::SUCCESS
    };
    RunOutput {
        result,
        exit_status: exit,
    }
}

fn headline(task: &str) -> String {
    let first = task.lines().next().unwrap_or_default();
    let cut = crate::collector::cut_utf8(first, 80);
    if cut.len() < task.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

fn code_name(code: ErrorCode) -> String {
    serde_json::to_value(code)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}
