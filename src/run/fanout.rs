//! Several tasks in one call: `parallel` (concurrently, under a limit, results in input
//! order) and `chain` (in order, `{previous}` replaced by the previous step's output,
//! stopping at the first failure).

use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::progress::{FanoutObserver, FanoutStatus, TaskState, TaskStatus};
use super::schedule::Scheduler;
use super::total::TotalBudget;
use super::{
    not_started, not_started_spent, refuse_if_not_allowed, run, truncate_limits, Observer, RunEnv,
    RunOutput, RunRequest,
};
use crate::error::RunError;
use crate::observe::{GroupEvent, GroupSlot};
use crate::result::{
    exit_status, new_run_id, Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult,
    TextContent,
};
use crate::settings::{DEFAULT_CONCURRENCY, DEFAULT_MAX_TASKS};
use crate::supervisor::Controls;
use crate::truncate::{truncate_head, TruncateLimits};
use crate::units::Usd;

/// The placeholder a chain step uses for the previous step's output.
pub(crate) const PREVIOUS: &str = "{previous}";
/// The smallest share of the output limits one task gets, however many there are.
const MIN_TASK_BYTES: usize = 2 * 1024;
const MIN_TASK_LINES: usize = 40;

/// Limits on a fan-out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct FanoutLimits {
    /// Children at once, at most: the scheduler's ceiling.
    pub concurrency: usize,
    pub max_tasks: usize,
    /// USD over every task (`--max-total-cost`, config `max_total_cost`).
    pub max_total_cost: Option<f64>,
    /// Tokens over every task (`--max-total-tokens`, config `max_total_tokens`).
    pub max_total_tokens: Option<u64>,
    /// Whether the scheduler lowers concurrency when providers push back (config
    /// `adaptive_concurrency`).
    pub adaptive: bool,
}

impl Default for FanoutLimits {
    fn default() -> Self {
        FanoutLimits {
            concurrency: DEFAULT_CONCURRENCY,
            max_tasks: DEFAULT_MAX_TASKS,
            max_total_cost: None,
            max_total_tokens: None,
            adaptive: true,
        }
    }
}

impl FanoutLimits {
    /// The config's limits, with a `--concurrency` flag on top.
    pub(crate) fn from_config(
        cfg: &crate::config::Config,
        concurrency_flag: Option<usize>,
    ) -> Self {
        FanoutLimits {
            concurrency: concurrency_flag.unwrap_or(cfg.concurrency.value),
            max_tasks: cfg.max_tasks.value,
            max_total_cost: cfg.max_total_cost.value.map(Usd::dollars),
            max_total_tokens: cfg.max_total_tokens.value,
            adaptive: cfg.adaptive_concurrency.value,
        }
    }
}

/// The budget the tasks share: the flags (every task carries them) over the config, under
/// what the tree has left; its spend is reported up when an orchestrate above asked. None
/// when there is nothing to hold or count.
fn total_budget(
    reqs: &[RunRequest],
    limits: FanoutLimits,
    env: &RunEnv,
    controls: &Controls,
    group_id: &str,
) -> Option<Arc<TotalBudget>> {
    let first = reqs.first();
    super::shared_budget(
        first
            .and_then(|r| r.settings.max_total_cost)
            .map(Usd::dollars)
            .or(limits.max_total_cost),
        first
            .and_then(|r| r.settings.max_total_tokens)
            .or(limits.max_total_tokens),
        reqs.len(),
        (env, controls),
        group_id,
    )
}

/// Task `i`'s environment and controls: its place in the fan-out, with the fan-out's
/// total its slot in it, and its stop; and the scheduler its children start through.
fn task_env(
    env: &RunEnv,
    controls: &Controls,
    total: &Option<Arc<TotalBudget>>,
    scheduler: Option<&Arc<Scheduler>>,
    (group, i): (&Group, usize),
) -> (RunEnv, Controls) {
    let mut env = env.clone();
    // The fan-out's own id is not its tasks'.
    env.fanout_id = None;
    env.group = Some(GroupSlot {
        id: group.id.clone(),
        mode: group.mode,
        index: i,
        count: group.count,
    });
    let mut controls = controls.clone();
    if let Some(total) = total {
        env.total = Some((total.clone(), i));
        controls.budget = total.reached.clone();
    }
    env.scheduler = scheduler.cloned();
    (env, controls)
}

/// A fan-out or chain as its observers see it.
struct Group {
    id: String,
    mode: Mode,
    count: usize,
}

impl Group {
    /// Tells the observers that it starts.
    fn start(env: &RunEnv, id: String, mode: Mode, count: usize) -> Group {
        env.observe.group(&GroupEvent::Started {
            id: &id,
            mode,
            count,
            parent_run_id: env.parent_run_id.as_deref(),
        });
        Group { id, mode, count }
    }

    /// Tells the observers that it ended with `output`.
    fn end(self, env: &RunEnv, output: RunOutput) -> RunOutput {
        env.observe.group(&GroupEvent::Ended {
            id: &self.id,
            mode: self.mode,
            output: &output,
        });
        output
    }
}

/// Checks the task list before any task runs.
fn check_tasks(reqs: &[RunRequest], limits: FanoutLimits, env: &RunEnv) -> Result<(), RunError> {
    if reqs.is_empty() {
        return Err(RunError::invalid("tasks must not be empty."));
    }
    if reqs.len() > limits.max_tasks {
        return Err(RunError::invalid(format!(
            "{} tasks given, at most {} allowed (raise max_tasks in the config).",
            reqs.len(),
            limits.max_tasks
        )));
    }
    for (i, r) in reqs.iter().enumerate() {
        if r.agent.trim().is_empty() || r.task.trim().is_empty() {
            return Err(RunError::invalid(format!(
                "task {} needs both an agent and a task.",
                i + 1
            )));
        }
    }
    refuse_if_not_allowed(env)
}

fn refuse_tasks(e: RunError, group_id: &str) -> RunOutput {
    let id = e.keeps_run_id().then_some(group_id);
    RunOutput::from_result(e.to_result(id))
}

/// Each task's share of the output limits, so that all answers fit in the whole.
fn share(limits: TruncateLimits, n: usize) -> TruncateLimits {
    TruncateLimits {
        max_bytes: (limits.max_bytes / n.max(1)).max(MIN_TASK_BYTES),
        max_lines: (limits.max_lines / n.max(1)).max(MIN_TASK_LINES),
    }
}

/// Runs `reqs` concurrently, at most `limits.concurrency` at once. `observer`, if any, hears
/// of every task's progress.
pub(crate) async fn run_parallel(
    reqs: Vec<RunRequest>,
    env: &RunEnv,
    controls: &Controls,
    limits: FanoutLimits,
    observer: Option<FanoutObserver>,
) -> RunOutput {
    let group_id = env.fanout_id.clone().unwrap_or_else(new_run_id);
    if let Err(e) = check_tasks(&reqs, limits, env) {
        return refuse_tasks(e, &group_id);
    }
    let whole = truncate_limits(&reqs[0], &env.config);
    let n = reqs.len();
    let group = Group::start(env, group_id, Mode::Parallel, n);
    let status = observer.map(|o| Tracker::new(Mode::Parallel, &reqs, o));
    let asked: Vec<Asked> = reqs.iter().map(Asked::of).collect();
    let total = total_budget(&reqs, limits, env, controls, &group.id);
    let scheduler = Scheduler::new(limits.concurrency, limits.adaptive);
    // Tasks are resolved and wait for their lane only this many at a time, so that a
    // fan-out of thousands holds thousands of requests, not of resolved runs.
    let admitted = Arc::new(Semaphore::new(limits.concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (i, mut req) in reqs.into_iter().enumerate() {
        let part = share(whole, n);
        req.settings.max_bytes = Some(part.max_bytes);
        req.settings.max_lines = Some(part.max_lines);
        let (env, controls) = task_env(env, controls, &total, Some(&scheduler), (&group, i));
        let admitted = admitted.clone();
        let status = status.clone();
        set.spawn(async move {
            let _admitted = admitted
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            // A task still queued when orchestrate was told to stop, or once the shared
            // budget is spent, never starts (`run` looks again once its lane has room).
            let out = if controls.cancel.is_cancelled() {
                not_started()
            } else if let Some((total, _)) = env.total.as_ref().filter(|(t, _)| t.is_spent()) {
                not_started_spent(total)
            } else {
                run(&req, &env, &controls, status.as_ref().map(|s| s.task(i))).await
            };
            if let Some(s) = &status {
                s.finished(i, &out);
            }
            (i, out)
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
                RunOutput::from_result(RunResult::refusal(
                    ErrorCode::SubagentFailed,
                    "orchestrate internal error: the task panicked",
                    None,
                ))
            })
        })
        .collect();
    let mut out = combine(
        Mode::Parallel,
        group.id.clone(),
        &asked,
        outputs,
        whole,
        None,
    );
    out.result.details.scheduler = scheduler.throttled_lanes();
    out.result.details.tree_usage = total.and_then(|t| t.tree_usage());
    group.end(env, out)
}

/// Runs `reqs` one after another, each seeing the previous output in place of
/// `{previous}`. The first failure stops the chain. `observer`, if any, hears of each
/// step's progress.
pub(crate) async fn run_chain(
    reqs: Vec<RunRequest>,
    env: &RunEnv,
    controls: &Controls,
    limits: FanoutLimits,
    observer: Option<FanoutObserver>,
) -> RunOutput {
    let group_id = env.fanout_id.clone().unwrap_or_else(new_run_id);
    if let Err(e) = check_tasks(&reqs, limits, env) {
        return refuse_tasks(e, &group_id);
    }
    let whole = truncate_limits(&reqs[0], &env.config);
    let group = Group::start(env, group_id, Mode::Chain, reqs.len());
    let status = observer.map(|o| Tracker::new(Mode::Chain, &reqs, o));
    let mut asked: Vec<Asked> = Vec::new();
    let total = total_budget(&reqs, limits, env, controls, &group.id);
    let mut outputs: Vec<RunOutput> = Vec::new();
    let mut previous = String::new();
    let mut stopped_at = None;
    for (i, mut req) in reqs.into_iter().enumerate() {
        req.task = req.task.replace(PREVIOUS, &previous);
        asked.push(Asked::of(&req));
        let (env, controls) = task_env(env, controls, &total, None, (&group, i));
        let out = if controls.cancel.is_cancelled() {
            not_started()
        } else if let Some(total) = total.as_ref().filter(|t| t.is_spent()) {
            not_started_spent(total)
        } else {
            run(&req, &env, &controls, status.as_ref().map(|s| s.task(i))).await
        };
        if let Some(s) = &status {
            s.finished(i, &out);
        }
        let failed = out
            .result
            .details
            .results
            .first()
            .is_none_or(|r| r.error.is_some())
            || out.exit_status != exit_status::SUCCESS;
        // A structured answer goes on as its compact JSON, not the text it was read from.
        previous = out
            .result
            .details
            .results
            .first()
            .map(|r| match &r.structured {
                Some(value) => value.to_string(),
                None => r.output.clone(),
            })
            .unwrap_or_default();
        outputs.push(out);
        if failed {
            stopped_at = Some(i);
            break;
        }
    }
    let mut out = combine(
        Mode::Chain,
        group.id.clone(),
        &asked,
        outputs,
        whole,
        stopped_at,
    );
    out.result.details.tree_usage = total.and_then(|t| t.tree_usage());
    group.end(env, out)
}

/// What one task asked for, for its result when it never ran.
struct Asked {
    agent: String,
    task: String,
}

impl Asked {
    fn of(req: &RunRequest) -> Asked {
        Asked {
            agent: req.agent.clone(),
            task: req.task.clone(),
        }
    }
}

/// The result of a task that never ran (refused, or cancelled before its turn): what it
/// asked for, why it did not run, and the status a single run would have ended with.
fn unrun_result(asked: &Asked, out: &RunOutput) -> SingleResult {
    let message = out.result.details.error.as_ref().map_or_else(
        || {
            out.result
                .content
                .first()
                .map_or(String::new(), |c| c.text.clone())
        },
        |e| e.message.clone(),
    );
    SingleResult {
        agent: asked.agent.clone(),
        task: asked.task.clone(),
        exit_code: out.exit_status,
        error: Some(message),
        ..SingleResult::default()
    }
}

/// Every task's progress in one [`FanoutStatus`], reported to the observer whenever a task
/// streams something (at most every [`FANOUT_UPDATE_INTERVAL`]) or finishes.
#[derive(Clone)]
struct Tracker {
    status: Arc<Mutex<(FanoutStatus, Option<std::time::Instant>)>>,
    observer: FanoutObserver,
}

/// A fan-out's progress goes out at most this often while its tasks stream; a task
/// finishing always goes out.
const FANOUT_UPDATE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

impl Tracker {
    fn new(mode: Mode, reqs: &[RunRequest], observer: FanoutObserver) -> Tracker {
        Tracker {
            status: Arc::new(Mutex::new((FanoutStatus::new(mode, reqs), None))),
            observer,
        }
    }

    /// The observer of task `i`'s run: its streaming updates become its part of the status.
    fn task(&self, i: usize) -> Observer<'static> {
        let tracker = self.clone();
        Observer::new(
            crate::result::DetailLevel::Lean,
            move |update: &RunResult| {
                tracker.update(i, false, |t| t.follow(update));
            },
        )
    }

    fn finished(&self, i: usize, out: &RunOutput) {
        let ok = out.exit_status == exit_status::SUCCESS;
        self.update(i, true, |t| {
            t.state = TaskState::Done { ok };
            t.current_tool = None;
            if let Some(r) = out.result.details.results.first() {
                t.turns = r.usage.turns;
                t.tokens = r.usage.tokens();
            }
        });
    }

    /// Edits task `i`'s status and reports the whole, under the lock so that reports go
    /// out in the order of the edits.
    fn update(&self, i: usize, always: bool, edit: impl FnOnce(&mut TaskStatus)) {
        let mut guard = self.status.lock().unwrap_or_else(|p| p.into_inner());
        let (status, last_sent) = &mut *guard;
        if let Some(t) = status.tasks.get_mut(i) {
            edit(t);
        }
        let now = std::time::Instant::now();
        if !always && last_sent.is_some_and(|t| now.duration_since(t) < FANOUT_UPDATE_INTERVAL) {
            return;
        }
        *last_sent = Some(now);
        (self.observer)(status);
    }
}

/// One result out of many: every task's SingleResult in order, one text with a heading per
/// task (parallel) or the last answer (chain), and an error naming what failed.
fn combine(
    mode: Mode,
    group_id: String,
    asked: &[Asked],
    outputs: Vec<RunOutput>,
    whole: TruncateLimits,
    chain_stopped_at: Option<usize>,
) -> RunOutput {
    let (results, sections) = results_and_sections(asked, &outputs);
    let error = match chain_stopped_at {
        Some(step) => Some(chain_error(&outputs[step], step)),
        None => parallel_error(&outputs),
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
        .iter()
        .map(|r| r.session_file.clone())
        .find(|f| !f.is_empty())
        .unwrap_or_default();
    let (text, _) = truncate_head(&text, whole, &session);
    let exit = combined_exit_status(&outputs, error.as_ref());
    RunOutput {
        result: RunResult {
            content: vec![TextContent::text(text)],
            details: Details {
                mode,
                run_id: Some(group_id),
                results,
                error,
                streaming: None,
                background: None,
                scheduler: Default::default(),
                tree_usage: None,
            },
        },
        exit_status: exit,
    }
}

/// Each task's result, with its own run id, and a section of the combined answer for it:
/// one per task, in order, whether it ran or not.
fn results_and_sections(
    asked: &[Asked],
    outputs: &[RunOutput],
) -> (Vec<SingleResult>, Vec<String>) {
    let mut results: Vec<SingleResult> = Vec::new();
    let mut sections = Vec::new();
    for (i, (asked, out)) in asked.iter().zip(outputs).enumerate() {
        let text = out.result.content.first().map_or("", |c| c.text.as_str());
        let single = match out.result.details.results.first() {
            Some(single) => {
                let mut single = single.clone();
                single.run_id = out.result.details.run_id.clone();
                single
            }
            // Refused before it ran (unknown agent, disabled agent), or cancelled before
            // its turn: the message is the answer.
            None => unrun_result(asked, out),
        };
        sections.push(format!(
            "## {}. {}: {}\n\n{}",
            i + 1,
            single.agent,
            headline(&single.task),
            text
        ));
        results.push(single);
    }
    (results, sections)
}

/// 130 when orchestrate was cancelled; else 0 when nothing failed (a truncated answer is
/// no failure); else the status the failed tasks share (2 for an unknown agent, 124 for
/// timeouts, …), or 1 when they failed differently.
fn combined_exit_status(outputs: &[RunOutput], error: Option<&ErrorInfo>) -> i32 {
    if outputs
        .iter()
        .any(|o| o.exit_status == exit_status::CANCELLED)
    {
        return exit_status::CANCELLED;
    }
    if error.is_none_or(|e| e.code == ErrorCode::SubagentOutputTruncated)
        && outputs
            .iter()
            .all(|o| o.exit_status == exit_status::SUCCESS)
    {
        return exit_status::SUCCESS;
    }
    let mut failed = outputs
        .iter()
        .map(|o| o.exit_status)
        .filter(|s| *s != exit_status::SUCCESS);
    match failed.next() {
        Some(first) if failed.all(|s| s == first) => first,
        _ => exit_status::FAILURE,
    }
}

fn chain_error(step_output: &RunOutput, step: usize) -> ErrorInfo {
    let error = step_output.result.details.error.as_ref();
    ErrorInfo {
        code: error.map_or(ErrorCode::SubagentFailed, |e| e.code),
        message: format!(
            "Chain stopped at step {} of the chain: {}",
            step + 1,
            error.map_or("failed", |e| e.message.as_str())
        ),
    }
}

/// Which tasks failed; a truncated but successful task is not a failure.
fn parallel_error(outputs: &[RunOutput]) -> Option<ErrorInfo> {
    let mut failures = Vec::new();
    let mut truncated = false;
    for (i, out) in outputs.iter().enumerate() {
        match out.result.details.error.as_ref().map(|e| e.code) {
            Some(ErrorCode::SubagentOutputTruncated) if out.exit_status == exit_status::SUCCESS => {
                truncated = true
            }
            Some(code) => failures.push(format!("task {} ({})", i + 1, code.as_str())),
            None => {}
        }
    }
    if !failures.is_empty() {
        return Some(ErrorInfo {
            code: shared_code(outputs).unwrap_or(ErrorCode::SubagentFailed),
            message: format!(
                "{} of {} tasks failed: {}",
                failures.len(),
                outputs.len(),
                failures.join(", ")
            ),
        });
    }
    truncated.then(|| ErrorInfo {
        code: ErrorCode::SubagentOutputTruncated,
        message: "Output truncated in one or more tasks".to_string(),
    })
}

/// The error code every failed task has, when they all have the same one.
fn shared_code(outputs: &[RunOutput]) -> Option<ErrorCode> {
    let mut codes = outputs
        .iter()
        .filter(|o| o.exit_status != exit_status::SUCCESS)
        .filter_map(|o| o.result.details.error.as_ref().map(|e| e.code));
    let first = codes.next()?;
    codes.all(|c| c == first).then_some(first)
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
