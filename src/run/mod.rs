//! One run end to end, as a pipeline of small typed steps:
//!
//! request + agent + config + environment --`resolve`--> [`ResolvedRun`] (or a refusal)
//! --`attempt`--> supervised child: `Outcome` + what the dialect collected
//! --`verdict`--> `Verdict` --`render`--> result (wording, sanitizing, truncation)
//! --`retry`--> another attempt when the failure was transient --> `result.json` + index.
//!
//! - `sink`: the line sink feeding the child's output through its dialect into the
//!   collector, where budgets are checked; `progress`: the streaming updates published
//!   from it; `decode`: a line's bytes as text, damaged characters replaced rather than
//!   the line dropped.
//! - `fanout`: several tasks at once, in parallel or as a chain; `schedule`: how many of
//!   their children run at once, per provider, as rate limits allow.
//! - `total`: the budget the tasks share, across the tree of nested orchestrate runs;
//!   `ledger`: how a nested run reports its spend to the one above.
//! - `resume`: what an earlier run left that its CLI can continue.

mod attempt;
mod decode;
pub(crate) mod fanout;
mod ledger;
pub(crate) mod progress;
mod render;
mod resolve;
mod resume;
pub(crate) mod retry;
pub(crate) mod schedule;
mod sink;
pub(crate) mod total;
mod verdict;

pub(crate) use progress::Observer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backends::{Backend, ResumeFrom};
use crate::config::Config;
use crate::error::RunError;
use crate::network::NetworkLog;
use crate::observe::{AttemptKind, GroupSlot, Hub, Observers, RunEvent, RunStart};
use crate::result::{exit_status, new_run_id, AttemptDetail, ErrorCode, RunResult};
use crate::session::{self, IndexEntry, IndexWorktree, RunDir, RunId, StateDir};
use crate::settings::Values;
use crate::structured;
use crate::supervisor::{Controls, StopReason};
use crate::units::Usd;
use crate::worktree::Worktree;

use attempt::{Attempt, Executed};
pub(crate) use ledger::spent_above as tree_spent_above;
use resolve::resolve;
pub(crate) use resolve::{backend_of, refuse_if_not_allowed, truncate_limits, ResolvedRun};
use schedule::{Report, Scheduler, Slot};
use total::{Inherited, TotalBudget, TotalLimits};

/// What the caller asked for: a task for an agent, and the settings it gave (flags or MCP
/// arguments), which win over the agent's and the config's.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub agent: String,
    pub task: String,
    pub cwd: Option<PathBuf>,
    pub agents_dir: Option<PathBuf>,
    /// Continue this earlier run's child session (pi, claude and codex).
    pub resume: Option<String>,
    /// A run id chosen in advance, whose folder already exists (background runs).
    pub run_id: Option<String>,
    pub settings: Values,
}

/// What one call asks for (a command line, an MCP `subagent` call): one task, or several
/// at once, or several in order.
#[derive(Debug, Clone)]
pub enum Plan {
    Single(Box<RunRequest>),
    Parallel(Vec<RunRequest>),
    Chain(Vec<RunRequest>),
}

impl Plan {
    /// The working directory its first task asks for, for loading the config.
    pub(crate) fn cwd(&self) -> Option<&Path> {
        match self {
            Plan::Single(r) => r.cwd.as_deref(),
            Plan::Parallel(rs) | Plan::Chain(rs) => rs.first().and_then(|r| r.cwd.as_deref()),
        }
    }

    /// The run id its requests carry: a background run's, chosen by whoever started it.
    pub(crate) fn run_id(&self) -> Option<&str> {
        match self {
            Plan::Single(r) => r.run_id.as_deref(),
            Plan::Parallel(rs) | Plan::Chain(rs) => rs.first().and_then(|r| r.run_id.as_deref()),
        }
    }

    /// Runs it to the end. A single run's `observer` hears its streaming updates; a
    /// fan-out's `fanout` hears each task's state. The fan-out's limits are the config's,
    /// under the tasks' own `concurrency` (every task carries the request's settings).
    pub(crate) async fn run(
        self,
        env: &RunEnv,
        controls: &Controls,
        observer: Option<Observer<'_>>,
        fanout: Option<progress::FanoutObserver>,
    ) -> RunOutput {
        let limits = |reqs: &[RunRequest]| {
            let flag = reqs.first().and_then(|r| r.settings.concurrency);
            fanout::FanoutLimits::from_config(&env.config, flag)
        };
        match self {
            Plan::Single(req) => run(&req, env, controls, observer).await,
            Plan::Parallel(reqs) => {
                let limits = limits(&reqs);
                fanout::run_parallel(reqs, env, controls, limits, fanout).await
            }
            Plan::Chain(reqs) => {
                let limits = limits(&reqs);
                fanout::run_chain(reqs, env, controls, limits, fanout).await
            }
        }
    }
}

/// What a run takes from outside the request: the effective config (files and
/// `ORCHESTRATE_*` variables), the recursion depth, the state directory and what an
/// orchestrate above handed down; in a fan-out, the budget its tasks share (and the
/// task's index in it) and its scheduler; who observes it, and where it sits in a tree
/// of runs.
#[derive(Debug, Clone)]
pub(crate) struct RunEnv {
    pub depth: u32,
    pub config: Config,
    pub state: StateDir,
    pub total: Option<(Arc<TotalBudget>, usize)>,
    /// The tree's budget and ledger, from the orchestrate that started this one.
    pub inherited: Inherited,
    pub scheduler: Option<Arc<Scheduler>>,
    pub observe: Hub,
    /// The run whose child started this orchestrate (`ORCHESTRATE_RUN_ID`).
    pub parent_run_id: Option<String>,
    /// The fan-out or chain this run is a task of.
    pub group: Option<GroupSlot>,
    /// The id a fan-out or chain run in this environment takes: a background fan-out's,
    /// chosen by whoever started it (else each takes a new one).
    pub fanout_id: Option<String>,
    /// Whom `permissions: ask` asks: the MCP client of a foreground `subagent` call.
    pub parent: crate::backends::ask_parent::ParentAsk,
}

impl RunEnv {
    /// Whether this run's children may start orchestrate runs of their own (the depth
    /// limit allows one more level).
    pub(crate) fn nests(&self) -> bool {
        self.depth + 1 < self.config.max_depth.value
    }

    /// Loads the config as seen from `cwd` (the project file is the nearest ancestor's),
    /// `ORCHESTRATE_DEPTH` and the state directory. A malformed value is an error naming
    /// the file or variable, the key and why.
    pub(crate) fn load(cwd: &Path) -> Result<RunEnv, RunError> {
        let depth = match std::env::var("ORCHESTRATE_DEPTH") {
            Err(_) => 0,
            Ok(v) if v.trim().is_empty() => 0,
            Ok(v) => v.trim().parse().map_err(|_| {
                RunError::invalid(format!(
                    "environment variable ORCHESTRATE_DEPTH={v:?} is not a non-negative integer"
                ))
            })?,
        };
        Ok(RunEnv {
            depth,
            config: Config::load(cwd).map_err(|e| RunError::invalid(e.to_string()))?,
            state: StateDir::from_env().map_err(|e| RunError::invalid(e.to_string()))?,
            total: None,
            inherited: Inherited::from_env()?,
            scheduler: None,
            observe: Hub::standard(),
            parent_run_id: parent_run_id(),
            group: None,
            fanout_id: None,
            parent: Default::default(),
        })
    }

    /// An environment with no observers, no parent run and no fan-out.
    #[cfg(test)]
    pub(crate) fn bare(config: Config, state: StateDir) -> RunEnv {
        RunEnv {
            depth: 0,
            config,
            state,
            total: None,
            inherited: Default::default(),
            scheduler: None,
            observe: Hub::none(),
            parent_run_id: None,
            group: None,
            fanout_id: None,
            parent: Default::default(),
        }
    }

    /// The folder a request runs in, for loading the config that applies to it.
    pub(crate) fn cwd_of(cwd: Option<&Path>) -> PathBuf {
        cwd.map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    }
}

/// The run that started this orchestrate, as orchestrate gives its children their run's
/// id: anything else in the variable is no run of ours.
fn parent_run_id() -> Option<String> {
    let id = std::env::var("ORCHESTRATE_RUN_ID").ok()?;
    RunId::parse(&id).ok().map(|id| id.to_string())
}

pub(crate) use crate::result::RunOutput;

impl RunOutput {
    /// Whether this failed attempt is worth another one. Never after a timeout, the hard
    /// cap, a budget or a cancel: those have their own codes, reasons or exit status.
    fn transient(&self, backend: Backend) -> Option<retry::Transient> {
        // A child stopped for only retrying has had its retries.
        let (message, exit_code) = self.child_failure(&[StopReason::ProviderUnreachable])?;
        retry::classify(backend, message, exit_code)
    }

    /// Whether this failed attempt says its model cannot serve the run, so that a
    /// fallback model may: also when the CLI only retried an overloaded model until the
    /// connect limit stopped it.
    fn unavailable(&self, backend: Backend) -> Option<retry::Unavailable> {
        let (message, exit_code) = self.child_failure(&[])?;
        retry::unavailable(backend, message, exit_code)
    }

    /// The child's own failure, as its message and exit code: not a timeout, the hard
    /// cap, a budget, a cancel, nor a stop for one of `also_not`.
    fn child_failure(&self, also_not: &[StopReason]) -> Option<(&str, i32)> {
        let error = self.result.details.error.as_ref()?;
        if error.code != ErrorCode::SubagentFailed || self.exit_status == exit_status::CANCELLED {
            return None;
        }
        let single = self.result.details.results.first()?;
        let stop = single.termination.and_then(|t| t.stop_reason());
        if single.limit.is_some() || stop.is_some_and(|s| also_not.contains(&s)) {
            return None;
        }
        Some((
            single.error.as_deref().unwrap_or(&error.message),
            single.exit_code,
        ))
    }

    /// This attempt, for `attemptsDetail`.
    fn detail(&self, model: Option<&str>) -> AttemptDetail {
        let single = self.result.details.results.first();
        AttemptDetail {
            model: model.map(str::to_string),
            exit_code: single.map_or(self.exit_status, |r| r.exit_code),
            error: single.and_then(|r| r.error.clone()).or_else(|| {
                self.result
                    .details
                    .error
                    .as_ref()
                    .map(|e| e.message.clone())
            }),
        }
    }
}

/// Runs one task to the end. Never panics on bad input; every failure is a result.
pub(crate) async fn run(
    req: &RunRequest,
    env: &RunEnv,
    controls: &Controls,
    observer: Option<Observer<'_>>,
) -> RunOutput {
    let run_id = req.run_id.clone().unwrap_or_else(new_run_id);
    let run = match resolve(req, env, &run_id) {
        Ok(run) => run,
        Err(e) => {
            let id = e.keeps_run_id().then_some(run_id.as_str());
            return RunOutput::from_result(e.to_result(id));
        }
    };
    // A single run holds the tree's budget as a fan-out of one.
    let own_total = single_total(req, env, controls, &run_id);
    let (single, single_controls);
    let (env, controls) = match &own_total {
        Some(total) => {
            single = RunEnv {
                total: Some((total.clone(), 0)),
                ..env.clone()
            };
            // Its children's nested runs may spend the budget between its own reports.
            single_controls = Controls {
                budget: total.reached.clone(),
                ..controls.clone()
            };
            (&single, &single_controls)
        }
        None => (env, controls),
    };
    // In a fan-out, the child waits for its place in its provider's lane. A task still
    // waiting when orchestrate was told to stop, or once the shared budget is spent,
    // never starts.
    let slot = match &env.scheduler {
        Some(s) => match s
            .acquire(
                &schedule::lane(run.backend.backend, run.model.as_deref()),
                &controls.cancel,
            )
            .await
        {
            Some(slot) => Some(slot),
            None => return not_started(),
        },
        None => None,
    };
    if let Some((total, _)) = env.total.as_ref().filter(|(t, _)| t.is_spent()) {
        return not_started_spent(total);
    }
    let run_dir = match run_folder(&run, env) {
        Ok(dir) => dir,
        Err(e) => return RunOutput::from_result(e.to_result(Some(&run_id))),
    };
    let started_at_ms = session::now_unix_ms();
    // This run alone can be stopped from outside (`orchestrate stop`, `watch`).
    let (controls, _stoppable) = crate::live::stop::register(&run_dir.path, controls);
    let controls = &controls;
    let mut observers = env.observe.run(&RunStart {
        run_id: &run.run_id,
        agent: &run.agent.name,
        backend: run.backend.backend.name(),
        model: run.model.as_deref(),
        task: &run.task,
        cwd: &run.cwd,
        run_dir: &run_dir.path,
        depth: env.depth,
        parent_run_id: env.parent_run_id.as_deref(),
        group: env.group.as_ref(),
    });
    let worktree = if run.worktree {
        match make_worktree(&run, env).await {
            Ok(wt) => Some(wt),
            Err(e) => {
                let mut output = RunOutput::from_result(e.to_result(Some(&run_id)));
                record(&run, env, &run_dir, &mut output, started_at_ms);
                observers.emit(&RunEvent::Ended { output: &output });
                return output;
            }
        }
    } else {
        None
    };
    let network_log = Arc::new(NetworkLog::default());
    let mailbox = crate::live::inbox::Mailbox::new(&run_dir);
    let attempt = Attempt {
        run: &run,
        env,
        run_dir: &run_dir,
        network_log: &network_log,
        mailbox: &mailbox,
        worktree: worktree.as_ref().map(|(wt, _)| wt),
        message: None,
    };
    let mut output = attempts(&attempt, slot, controls, observer, &mut observers).await;
    if let Some((wt, warning)) = worktree {
        finish_worktree(&run, wt, warning, &mut output).await;
    }
    if let Some((total, task)) = &env.total {
        if let Some(single) = output.result.details.results.first_mut() {
            single.nested_usage = total.nested(*task);
        }
    }
    if let Some(total) = &own_total {
        output.result.details.tree_usage = total.tree_usage();
    }
    record(&run, env, &run_dir, &mut output, started_at_ms);
    observers.emit(&RunEvent::Ended { output: &output });
    output
}

/// The budget a single run holds as a fan-out of one, when it has one to hold: a total
/// budget of its own, the tree's from above, or children that may start runs of their
/// own (whose spend it counts and reports up). None in a fan-out, which holds its own.
fn single_total(
    req: &RunRequest,
    env: &RunEnv,
    controls: &Controls,
    run_id: &str,
) -> Option<Arc<TotalBudget>> {
    if env.total.is_some() {
        return None;
    }
    let cfg = &env.config;
    shared_budget(
        req.settings
            .max_total_cost
            .or(cfg.max_total_cost.value)
            .map(Usd::dollars),
        req.settings.max_total_tokens.or(cfg.max_total_tokens.value),
        1,
        (env, controls),
        run_id,
    )
}

/// The budget `tasks` tasks (a fan-out's, or a single run's as a fan-out of one, `id`)
/// share: `max_cost` and `max_tokens` under what the tree has left, its spend reported up
/// when an orchestrate above asked. None when there is nothing to hold or count: no
/// limit, no child that may nest, no orchestrate above.
pub(super) fn shared_budget(
    max_cost: Option<f64>,
    max_tokens: Option<u64>,
    tasks: usize,
    (env, controls): (&RunEnv, &Controls),
    id: &str,
) -> Option<Arc<TotalBudget>> {
    let limits = TotalLimits::new(max_cost, max_tokens, &env.inherited);
    if limits.is_empty() && !env.nests() && env.inherited.ledger.is_none() {
        return None;
    }
    Some(Arc::new(
        TotalBudget::new(limits, tasks, total::upward(&env.inherited, id))
            .under(&controls.budget, &env.inherited),
    ))
}

/// A task that never started: orchestrate was told to stop while it waited.
pub(crate) fn not_started() -> RunOutput {
    RunOutput {
        result: RunResult::refusal(ErrorCode::SubagentFailed, NOT_STARTED, None),
        exit_status: exit_status::CANCELLED,
    }
}

pub(crate) const NOT_STARTED: &str =
    "Not started: orchestrate was cancelled before this task's turn.";

/// A task that never started because the tasks before it spent the shared budget.
pub(crate) fn not_started_spent(total: &TotalBudget) -> RunOutput {
    RunOutput::from_result(RunResult::refusal(
        ErrorCode::SubagentFailed,
        format!(
            "Not started: {}",
            render::spent_message(&total.limit_reached())
        ),
        None,
    ))
}

/// The run's worktree (made off the runtime's thread: checking out a large tree takes a
/// while), and a warning when the working directory had uncommitted changes.
async fn make_worktree(
    run: &ResolvedRun,
    env: &RunEnv,
) -> Result<(Worktree, Option<String>), RunError> {
    let (cwd, root, id) = (run.cwd.clone(), env.state.root.clone(), run.run_id.clone());
    let made = tokio::task::spawn_blocking(move || Worktree::create(&cwd, &root, &id))
        .await
        .map_err(std::io::Error::other);
    match made {
        Ok(Ok(wt)) => Ok(wt),
        Ok(Err(e)) if e.is_bad_input() => Err(RunError::invalid(e.to_string())),
        Ok(Err(e)) => Err(RunError::Io {
            action: "create the worktree",
            path: run.cwd.clone(),
            source: std::io::Error::other(e.to_string()),
        }),
        Err(source) => Err(RunError::Io {
            action: "create the worktree",
            path: run.cwd.clone(),
            source,
        }),
    }
}

/// Commits what the child left in the worktree, puts what it changed in the result, and
/// removes the worktree when it changed nothing.
async fn finish_worktree(
    run: &ResolvedRun,
    wt: Worktree,
    warning: Option<String>,
    output: &mut RunOutput,
) {
    let first_line = run.task.lines().next().unwrap_or_default();
    let subject: String = first_line.chars().take(72).collect();
    let message = format!(
        "orchestrate: {} (run {})\n\n{subject}",
        run.agent.name, run.run_id
    );
    let finished = tokio::task::spawn_blocking(move || wt.finish(&message)).await;
    let Some(single) = output.result.details.results.first_mut() else {
        return;
    };
    single.warnings.extend(warning);
    match finished {
        Ok(Ok((info, warnings))) => {
            single.worktree = Some(info);
            single.warnings.extend(warnings);
        }
        Ok(Err(e)) => single
            .warnings
            .push(format!("the worktree could not be finished: {e}")),
        Err(e) => single
            .warnings
            .push(format!("the worktree could not be finished: {e}")),
    }
}

/// A background run's folder was made by whoever chose its id; any other run makes its own.
fn run_folder(run: &ResolvedRun, env: &RunEnv) -> Result<RunDir, RunError> {
    let id = RunId::parse(&run.run_id).map_err(|e| RunError::invalid(e.to_string()))?;
    if run.preset_dir {
        return Ok(env.state.run_dir(&id));
    }
    env.state.create_run(&id).map_err(|source| RunError::Io {
        action: "create the run folder",
        path: env.state.run_dir(&id).path,
        source,
    })
}

/// The task's turns (see [`answered`]), then one turn for what was sent to the run
/// (`orchestrate send`) and not taken by the running child (see `Dialect::listen`) each
/// time a turn ends with messages queued, continuing the child's own session with them,
/// as long as its turns succeed; messages that arrive when the run
/// can deliver no more are listed as not delivered. `attempts` counts every run of the
/// child, `usage` and `durationMs` are summed over every turn, and `messages` lists what
/// was sent and how it was delivered.
async fn attempts(
    attempt: &Attempt<'_>,
    slot: Option<Slot>,
    controls: &Controls,
    mut observer: Option<Observer<'_>>,
    observers: &mut Observers,
) -> RunOutput {
    use crate::live::inbox::{self, Delivery};
    let run = attempt.run;
    let resumes = run.backend.backend.spec().resumes;
    let mut details = Vec::new();
    let mut messages = Vec::new();
    let not_delivered = |queued: Vec<inbox::Queued>| {
        queued
            .into_iter()
            .map(|q| q.delivered(Delivery::NotDelivered))
    };
    if !resumes {
        messages.extend(not_delivered(inbox::refuse_all(attempt.run_dir)));
    }
    let (mut output, mut n, model) = answered(
        attempt,
        slot,
        controls,
        &mut observer,
        observers,
        &mut details,
    )
    .await;
    // Each turn that ends takes what was sent meanwhile, where the CLI can continue.
    if resumes {
        loop {
            let deliverable = output.exit_status == exit_status::SUCCESS
                && !controls.cancel.is_cancelled()
                && !controls.budget.is_cancelled();
            let from = deliverable
                .then(|| repair_from(attempt, &output).ok())
                .flatten();
            let queued = inbox::take(attempt.run_dir, from.is_some());
            if queued.is_empty() {
                break;
            }
            let slot = match from {
                Some(_) => place(attempt, model, controls).await,
                None => Err(()),
            };
            let (Some(from), Ok(slot)) = (from, slot) else {
                messages.extend(not_delivered(queued));
                messages.extend(not_delivered(inbox::take(attempt.run_dir, false)));
                break;
            };
            let text = queued
                .iter()
                .map(|q| q.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n");
            let turn = ResolvedRun {
                resume: Some(from),
                ..run.clone()
            };
            let next = Attempt {
                run: &turn,
                message: Some(&text),
                ..*attempt
            };
            let watching = Watching {
                streaming: &mut observer,
                observers,
            };
            let (after, last, _) = tried(
                &next,
                &[model],
                (n + 1, AttemptKind::Message),
                slot,
                controls,
                watching,
                &mut details,
            )
            .await;
            n = last;
            let unanswered = after.output.exit_status != exit_status::SUCCESS
                && after
                    .output
                    .result
                    .details
                    .results
                    .first()
                    .is_none_or(|r| r.output.is_empty());
            if unanswered {
                // The turn failed before it answered (its CLI could not load the session, a
                // limit stopped it): the run's answer stays the one it had, and no more turns.
                messages.extend(queued.into_iter().map(|q| q.delivered(Delivery::Failed)));
                output = kept(run, output, after.output);
                messages.extend(not_delivered(inbox::take(attempt.run_dir, false)));
                break;
            }
            messages.extend(queued.into_iter().map(|q| q.delivered(Delivery::AfterTurn)));
            output = continued(run, output, after.output);
        }
    }
    let mut output = with_attempts(output, n, details);
    if let Some(single) = output.result.details.results.first_mut() {
        // What the child took while it ran, then what the run gave it after its turns.
        let mut all = attempt.mailbox.messages();
        all.append(&mut messages);
        all.sort_by_key(|m| m.at);
        single.messages = all;
    }
    output
}

/// The task's turn, with the run's model and then each fallback model while one is
/// unavailable, each retried while its failures are transient (see [`tried`]); then, when
/// its answer does not match the output schema, one repair turn continuing the child's own
/// session (where its CLI can) with the model that answered, retried the same way. The
/// repair turn counts like any child run: `attempts` is every run of the child (and
/// `attemptsDetail` lists them when there was more than one), `usage` and `durationMs` are
/// summed over both turns, and the full record's `displayItems` hold both. In a fan-out,
/// `slot` is the first attempt's place in its lane; every later one waits for its own.
/// Returns the last turn's output, the number of its last attempt and its model.
async fn answered<'m>(
    attempt: &Attempt<'m>,
    slot: Option<Slot>,
    controls: &Controls,
    observer: &mut Option<Observer<'_>>,
    observers: &mut Observers,
    details: &mut Vec<AttemptDetail>,
) -> (RunOutput, u32, Option<&'m str>) {
    let run = attempt.run;
    let models: Vec<Option<&str>> = std::iter::once(run.model.as_deref())
        .chain(run.fallback_models.iter().map(|m| Some(m.as_str())))
        .collect();
    let watching = Watching {
        streaming: observer,
        observers,
    };
    let (first, n, model) = tried(
        attempt,
        &models,
        (1, AttemptKind::First),
        slot,
        controls,
        watching,
        details,
    )
    .await;
    let (Some(mismatch), Some(schema)) = (first.mismatch, &run.output_schema) else {
        return (first.output, n, model);
    };
    let mut output = first.output;
    let from = match repair_from(attempt, &output) {
        Ok(from) => from,
        Err(why) => {
            if let Some(single) = output.result.details.results.first_mut() {
                single.warnings.push(format!(
                    "no repair turn for the answer that {}: {why}",
                    mismatch.what()
                ));
            }
            return (output, n, model);
        }
    };
    if controls.cancel.is_cancelled() {
        return (output, n, model);
    }
    let Ok(slot) = place(attempt, model, controls).await else {
        return (output, n, model);
    };
    let repaired = ResolvedRun {
        resume: Some(from),
        ..run.clone()
    };
    let message = structured::repair_prompt(schema, &mismatch);
    let repair = Attempt {
        run: &repaired,
        message: Some(&message),
        ..*attempt
    };
    let watching = Watching {
        streaming: observer,
        observers,
    };
    let (second, last, _) = tried(
        &repair,
        &[model],
        (n + 1, AttemptKind::Repair),
        slot,
        controls,
        watching,
        details,
    )
    .await;
    (continued(run, output, second.output), last, model)
}

/// `before`, the answer a run keeps when the turn that continued its session (`after`)
/// failed without one: with both turns' usage, duration and display items, and the
/// failure in its warnings.
fn kept(run: &ResolvedRun, mut before: RunOutput, after: RunOutput) -> RunOutput {
    let why = after
        .result
        .details
        .results
        .first()
        .and_then(|r| r.error.clone())
        .or_else(|| {
            after
                .result
                .details
                .error
                .as_ref()
                .map(|e| e.message.clone())
        })
        .unwrap_or_else(|| format!("exit status {}", after.exit_status));
    let joined = continued(run, before.clone(), after);
    if let (Some(single), Some(joined)) = (
        before.result.details.results.first_mut(),
        joined.result.details.results.first(),
    ) {
        single.usage = joined.usage;
        single.duration_ms = joined.duration_ms;
        single.display_items = joined.display_items.clone();
        single.warnings = joined.warnings.clone();
        single.warnings.push(format!(
            "the turn with the messages sent to the run failed, so the answer is the one before them: {why}"
        ));
    }
    before
}

/// A turn that continued the child's session after `before`: its output, with the usage,
/// duration, display items and warnings of both.
fn continued(run: &ResolvedRun, mut before: RunOutput, mut after: RunOutput) -> RunOutput {
    if let (Some(before), Some(after)) = (
        before.result.details.results.first_mut(),
        after.result.details.results.first_mut(),
    ) {
        let totals = run.backend.backend.spec().resumed_totals;
        after.usage = totals.combine(&before.usage, &after.usage);
        after.duration_ms += before.duration_ms;
        let mut items = std::mem::take(&mut before.display_items);
        items.append(&mut after.display_items);
        after.display_items = items;
        for w in before.warnings.drain(..) {
            if !after.warnings.contains(&w) {
                after.warnings.push(w);
            }
        }
    }
    after
}

/// In a fan-out, a place in `model`'s lane for the next attempt (None elsewhere);
/// `Err` when orchestrate was told to stop while it waited.
async fn place(
    attempt: &Attempt<'_>,
    model: Option<&str>,
    controls: &Controls,
) -> Result<Option<Slot>, ()> {
    let Some(scheduler) = &attempt.env.scheduler else {
        return Ok(None);
    };
    let lane = schedule::lane(attempt.run.backend.backend, model);
    scheduler
        .acquire(&lane, &controls.cancel)
        .await
        .map(Some)
        .ok_or(())
}

/// The run's own child session, for its repair turn; why there is none otherwise.
fn repair_from(attempt: &Attempt<'_>, output: &RunOutput) -> Result<ResumeFrom, String> {
    let backend = attempt.run.backend.backend;
    if !backend.spec().resumes {
        return Err(format!("{backend} cannot continue its session"));
    }
    let session_id = output
        .result
        .details
        .results
        .first()
        .and_then(|r| r.child_session_id.clone())
        .ok_or_else(|| format!("{backend} reported no session id to continue"))?;
    Ok(ResumeFrom {
        run_id: attempt.run.run_id.clone(),
        session_id: Some(session_id),
        run_dir: attempt.run_dir.path.clone(),
    })
}

fn with_attempts(mut output: RunOutput, n: u32, details: Vec<AttemptDetail>) -> RunOutput {
    if let Some(single) = output.result.details.results.first_mut() {
        single.attempts = n;
        if details.len() > 1 {
            single.attempts_detail = details;
        }
    }
    output
}

/// Runs attempts of one turn, numbered from `first`, until one is not worth repeating: a
/// success, a failure neither a retry nor another model can fix, or the last try of the
/// last model. Each model gets the run's attempts for transient failures (a fan-out's
/// throttles are forgiven a few times, see [`retry::LANE_THROTTLES_FORGIVEN`]); a model that is
/// unavailable (quota, rate limit, overload, unknown) after them gives way to the next of
/// `models`. A retry waits for the backoff, or longer when the provider asked for longer.
/// A cancel during a backoff ends it at once. In a fan-out, each attempt holds a place
/// in its model's lane (`slot` is the first's), tells the scheduler how its provider
/// answered, and gives the place up while it waits. Each attempt is added to `details`;
/// returns the last attempt, its number and its model.
async fn tried<'m>(
    attempt: &Attempt<'_>,
    models: &[Option<&'m str>],
    (first, first_kind): (u32, AttemptKind),
    mut slot: Option<Slot>,
    controls: &Controls,
    watching: Watching<'_, '_, '_>,
    details: &mut Vec<AttemptDetail>,
) -> (Executed, u32, Option<&'m str>) {
    let Watching {
        streaming,
        observers,
    } = watching;
    let max_tries = attempt.run.attempts;
    let backend = attempt.run.backend.backend;
    let mut n = first;
    let mut kind = first_kind;
    let mut m = 0;
    let mut tries = retry::Tries::FIRST;
    loop {
        let model = models[m];
        observers.emit(&RunEvent::Attempt { n, model, kind });
        let mut out = attempt
            .execute(
                n,
                model,
                controls,
                streaming.as_mut(),
                slot.as_ref(),
                observers,
            )
            .await;
        observers.emit(&RunEvent::AttemptEnded {
            n,
            output: &out.output,
        });
        details.push(out.output.detail(model));
        let transient = out.output.transient(backend);
        let lane_throttle = slot.as_ref().is_some_and(Slot::narrows)
            && matches!(
                transient,
                Some(retry::Transient::RateLimited | retry::Transient::Overloaded)
            )
            && out.output.unavailable(backend) != Some(retry::Unavailable::Quota);
        if let Some(slot) = &slot {
            match transient {
                Some(retry::Transient::RateLimited | retry::Transient::Overloaded) => {
                    slot.report(Report::Throttled {
                        delay: out.provider_delay,
                    })
                }
                _ if out.output.exit_status == exit_status::SUCCESS => slot.report(Report::Success),
                _ => {}
            }
        }
        // The place is given up while the attempt waits to be tried again.
        drop(slot.take());
        let next = tries.next(transient, lane_throttle, max_tries);
        if let (Some(why), retry::Next::Retry | retry::Next::RetryForgiven) = (transient, next) {
            let wait = retry::backoff(tries.all()).max(
                out.provider_delay
                    .unwrap_or_default()
                    .min(schedule::MAX_PROVIDER_DELAY),
            );
            let counted = tries.counted;
            let uncounted = match next {
                retry::Next::RetryForgiven => " (the fan-out's lane was full: not counted)",
                _ => "",
            };
            tracing::warn!(
                "attempt {counted} of {max_tries} failed ({why:?}); retrying in {:.1}s{uncounted}",
                wait.as_secs_f64()
            );
            observers.emit(&RunEvent::Retrying {
                attempt: counted,
                of: max_tries,
                reason: why.as_str(),
                wait,
            });
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = controls.cancel.cancelled() => {
                    out.output.exit_status = exit_status::CANCELLED;
                    return (out, n, model);
                }
            }
            match place(attempt, model, controls).await {
                Ok(next) => slot = next,
                Err(()) => {
                    out.output.exit_status = exit_status::CANCELLED;
                    return (out, n, model);
                }
            }
            n += 1;
            match next {
                retry::Next::RetryForgiven => tries.forgiven += 1,
                _ => tries.counted += 1,
            }
            kind = AttemptKind::Retry;
            continue;
        }
        match out.output.unavailable(backend) {
            Some(why) if m + 1 < models.len() => {
                tracing::warn!(
                    "model {} is unavailable ({why:?}); falling back to {}",
                    model.unwrap_or("(the CLI's default)"),
                    models[m + 1].unwrap_or_default()
                );
                observers.emit(&RunEvent::FallingBack {
                    from: model,
                    to: models[m + 1],
                    reason: why.as_str(),
                });
                match place(attempt, models[m + 1], controls).await {
                    Ok(next) => slot = next,
                    Err(()) => {
                        out.output.exit_status = exit_status::CANCELLED;
                        return (out, n, model);
                    }
                }
                m += 1;
                n += 1;
                tries = retry::Tries::FIRST;
                kind = AttemptKind::Fallback;
            }
            _ => return (out, n, model),
        }
    }
}

/// Who hears of a run's attempts: the streaming updates' observer, and the run's
/// observers.
struct Watching<'s, 'o, 'v> {
    streaming: &'s mut Option<Observer<'o>>,
    observers: &'v mut Observers,
}

/// Writes `result.json` and the run's line in `runs.jsonl`. What cannot be written (a full
/// disk, a state directory turned read-only) is said in the result's `warnings`: the result
/// itself still reaches its caller.
fn record(
    run: &ResolvedRun,
    env: &RunEnv,
    run_dir: &RunDir,
    output: &mut RunOutput,
    started_at_ms: u64,
) {
    if let Err(e) = run_dir.write_result(&output.result) {
        not_recorded(output, crate::background::unrecorded_warning(run_dir, &e));
    }
    let single = output.result.details.results.first();
    let entry = IndexEntry {
        run_id: run.run_id.clone(),
        agent: run.agent.name.clone(),
        backend: run.backend.backend.name().to_string(),
        // The model that answered: the run's own, or the fallback that took over.
        model: single
            .and_then(|r| r.model.clone())
            .or_else(|| run.model.clone()),
        started_at_ms,
        duration_ms: single.map_or(0, |r| r.duration_ms),
        exit_code: single.map_or(1, |r| r.exit_code),
        error: output
            .result
            .details
            .error
            .as_ref()
            .map(|e| e.code.as_str().to_string()),
        usage: single.map(|r| r.usage).unwrap_or_default(),
        cwd: run.cwd.to_string_lossy().into_owned(),
        // Kept worktrees are listed by `runs` until removed.
        worktree: single
            .and_then(|r| r.worktree.as_ref())
            .filter(|w| w.kept)
            .map(|w| IndexWorktree {
                path: w.path.clone(),
                branch: w.branch.clone(),
                repository: w.repository.clone(),
            }),
        session_file: single
            .map(|r| r.session_file.clone())
            .unwrap_or_else(|| run_dir.session_file().to_string_lossy().into_owned()),
        task: Some(crate::session::index_task(&run.task)),
    };
    if let Err(e) = env.state.append_index(&entry) {
        let index = env.state.root.join(session::INDEX_FILE);
        // The error names the file when it came from opening it.
        let e = e.to_string();
        let warning = if e.contains(&*index.to_string_lossy()) {
            format!("the run could not be added to the run index: {e}")
        } else {
            format!(
                "the run could not be added to the run index {}: {e}",
                index.display()
            )
        };
        not_recorded(output, warning);
    }
}

/// Says in the result's `warnings` (and the log) what of the run could not be recorded.
fn not_recorded(output: &mut RunOutput, warning: String) {
    tracing::warn!("{warning}");
    if let Some(single) = output.result.details.results.first_mut() {
        if !single.warnings.contains(&warning) {
            single.warnings.push(warning);
        }
    }
}
