//! The budget a fan-out's tasks share (`--max-total-cost`, `--max-total-tokens`; a single
//! run is a fan-out of one), and how it holds for the whole tree of nested orchestrate
//! runs.
//!
//! Each task reports what its child has spent so far (from the child's own stream) and
//! what the orchestrate runs that child started reported spending (their whole trees,
//! through the ledger: [`super::ledger`]). Once the tasks together reach a budget,
//! no task starts and every running one is stopped.
//!
//! A nested orchestrate inherits what is left of its parent's budget (through its
//! environment) as a ceiling on its own, and reports its tree's spend back as it goes.
//! What a child reports is not trusted to raise anything: it only ever adds to what its
//! parent counts, and no more than the budget that child was given.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ledger::LedgerWriter;
use crate::error::RunError;
use crate::result::{add_usd, round_usd, Limit, Usage};

/// What is left of the tree's budget, as a parent hands it to a child that may start
/// orchestrate runs of its own.
pub(crate) const TREE_MAX_COST_VAR: &str = "ORCHESTRATE_TREE_MAX_COST";
pub(crate) const TREE_MAX_TOKENS_VAR: &str = "ORCHESTRATE_TREE_MAX_TOKENS";
/// The folder where a nested orchestrate reports what its tree spent.
pub(crate) const TREE_LEDGER_VAR: &str = "ORCHESTRATE_TREE_LEDGER";
/// Every variable of the tree's channel, removed from a child that may not nest.
pub(crate) const TREE_VARS: [&str; 3] = [TREE_MAX_COST_VAR, TREE_MAX_TOKENS_VAR, TREE_LEDGER_VAR];

/// What an orchestrate above this one handed down.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Inherited {
    /// USD left of the tree's cost budget when this orchestrate's parent started its child.
    pub max_cost: Option<f64>,
    /// Tokens left of the tree's token budget.
    pub max_tokens: Option<u64>,
    /// Where to report this orchestrate's spend.
    pub ledger: Option<PathBuf>,
}

impl Inherited {
    /// From this process's environment. A value that is not a budget is an error naming
    /// the variable: a budget from above is never dropped silently.
    pub(crate) fn from_env() -> Result<Inherited, RunError> {
        let get = |name: &'static str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| (name, v))
        };
        let bad = |name: &str, value: &std::ffi::OsStr, what: &str| {
            RunError::invalid(format!(
                "environment variable {name}={:?} is not {what} (set by the orchestrate that started this one)",
                value.to_string_lossy()
            ))
        };
        let max_cost = get(TREE_MAX_COST_VAR)
            .map(|(name, v)| {
                v.to_str()
                    .and_then(crate::units::parse_dollars)
                    .ok_or_else(|| bad(name, &v, "an amount of US dollars (0 or more)"))
            })
            .transpose()?;
        let max_tokens = get(TREE_MAX_TOKENS_VAR)
            .map(|(name, v)| {
                v.to_str()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or_else(|| bad(name, &v, "a number of tokens"))
            })
            .transpose()?;
        let ledger = get(TREE_LEDGER_VAR)
            .map(|(name, v)| {
                let path = PathBuf::from(&v);
                if path.is_absolute() {
                    Ok(path)
                } else {
                    Err(bad(name, &v, "an absolute path"))
                }
            })
            .transpose()?;
        Ok(Inherited {
            max_cost,
            max_tokens,
            ledger,
        })
    }
}

/// Where this orchestrate (run or fan-out `id`) reports its tree's spend, when an
/// orchestrate above gave it a ledger.
pub(crate) fn upward(inherited: &Inherited, id: &str) -> Option<LedgerWriter> {
    inherited
        .ledger
        .as_deref()
        .map(|dir| LedgerWriter::new(dir, id))
}

/// What the tasks may spend together: this orchestrate's own limits, under the tree's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TotalLimits {
    /// USD.
    pub max_cost: Option<f64>,
    /// Input + output + cache-write tokens.
    pub max_tokens: Option<u64>,
    /// The cost limit is the tree's (inherited, and no higher than this run's own).
    pub tree_cost: bool,
    pub tree_tokens: bool,
}

impl TotalLimits {
    /// This orchestrate's own totals, each lowered to what the tree has left.
    pub(crate) fn new(
        own_cost: Option<f64>,
        own_tokens: Option<u64>,
        inherited: &Inherited,
    ) -> TotalLimits {
        let tree_cost = inherited
            .max_cost
            .is_some_and(|t| own_cost.is_none_or(|o| t <= o));
        let tree_tokens = inherited
            .max_tokens
            .is_some_and(|t| own_tokens.is_none_or(|o| t <= o));
        TotalLimits {
            max_cost: if tree_cost {
                inherited.max_cost
            } else {
                own_cost
            },
            max_tokens: if tree_tokens {
                inherited.max_tokens
            } else {
                own_tokens
            },
            tree_cost,
            tree_tokens,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.max_cost.is_none() && self.max_tokens.is_none()
    }
}

/// What is left, for a child that may nest: its own ceiling, and no more than its
/// parent counts of what it reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Allowance {
    pub cost: Option<f64>,
    pub tokens: Option<u64>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Spend {
    /// The child's attempts before the current one.
    finished: Usage,
    /// The current attempt's number and what it has spent so far.
    attempt: u32,
    current: Usage,
    /// What the orchestrate runs the child started reported (their trees), as reported.
    nested: Usage,
    /// The most of `nested` this orchestrate counts: what the child was allowed when it
    /// first started.
    nested_cap: Allowance,
}

impl Spend {
    fn own(&self) -> Usage {
        sum(&self.finished, &self.current)
    }

    /// Cost and tokens this orchestrate counts for the task.
    fn counted(&self) -> (f64, u64) {
        let own = self.own();
        let nested_cost = self
            .nested_cap
            .cost
            .map_or(self.nested.cost, |cap| self.nested.cost.min(cap));
        let nested_tokens = self
            .nested_cap
            .tokens
            .map_or(budget_tokens(&self.nested), |cap| {
                budget_tokens(&self.nested).min(cap)
            });
        (
            add_usd(own.cost, nested_cost),
            budget_tokens(&own).saturating_add(nested_tokens),
        )
    }
}

/// Tokens as budgets count them: input + output + cache writes.
pub(crate) fn budget_tokens(u: &Usage) -> u64 {
    u.input
        .saturating_add(u.output)
        .saturating_add(u.cache_write)
}

/// Fieldwise sum, saturating: reported numbers may be anything.
pub(crate) fn sum(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input: a.input.saturating_add(b.input),
        output: a.output.saturating_add(b.output),
        cache_read: a.cache_read.saturating_add(b.cache_read),
        cache_write: a.cache_write.saturating_add(b.cache_write),
        cost: add_usd(a.cost, b.cost),
        turns: a.turns.saturating_add(b.turns),
    }
}

/// Fieldwise maximum: what a cumulative report adds to the last one.
fn max(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input: a.input.max(b.input),
        output: a.output.max(b.output),
        cache_read: a.cache_read.max(b.cache_read),
        cache_write: a.cache_write.max(b.cache_write),
        cost: a.cost.max(b.cost),
        turns: a.turns.max(b.turns),
    }
}

/// The shared budget of a fan-out's tasks, and their spend (with the nested runs').
#[derive(Debug)]
pub(crate) struct TotalBudget {
    limits: TotalLimits,
    spent: Mutex<Vec<Spend>>,
    /// Cancelled once a budget is reached: the tasks' supervisors stop their children.
    pub(crate) reached: CancellationToken,
    /// Where this orchestrate reports the tree's spend, when one above asked it to.
    upward: Option<LedgerWriter>,
    /// The ledger folder of the orchestrate above, where it marks the tree's budget spent.
    above: Option<PathBuf>,
    /// The ledger folders of the tasks' children that may nest, marked spent (before
    /// their children are stopped) once a budget is reached here.
    nesting: Mutex<Vec<PathBuf>>,
    /// Ends the watch on the mark above.
    stop_watch: CancellationToken,
    /// A budget was reached here: the tasks are being stopped.
    stopping: AtomicBool,
}

/// How long the orchestrate runs a child started get to stop their own children for the
/// tree's budget (they look for the mark every [`super::ledger::LEDGER_POLL_INTERVAL`])
/// before the child's whole tree is stopped.
pub(crate) const NESTED_STOP_GRACE: Duration = Duration::from_secs(2);

impl Drop for TotalBudget {
    fn drop(&mut self) {
        self.stop_watch.cancel();
    }
}

impl TotalBudget {
    pub(crate) fn new(limits: TotalLimits, tasks: usize, upward: Option<LedgerWriter>) -> Self {
        TotalBudget {
            limits,
            spent: Mutex::new(vec![Spend::default(); tasks]),
            reached: CancellationToken::new(),
            upward,
            above: None,
            nesting: Mutex::new(Vec::new()),
            stop_watch: CancellationToken::new(),
            stopping: AtomicBool::new(false),
        }
    }

    /// Reached also when `budget` is cancelled (a budget above, as the supervisor's
    /// controls carry it), and when the orchestrate above marks the tree's budget spent in
    /// `inherited`'s ledger folder (watched from now on: must be called within the
    /// runtime).
    pub(crate) fn under(mut self, budget: &CancellationToken, inherited: &Inherited) -> Self {
        self.reached = budget.child_token();
        self.above = inherited.ledger.clone();
        if let Some(dir) = &self.above {
            super::ledger::watch_spent(dir.clone(), self.reached.clone(), self.stop_watch.clone());
        }
        self
    }

    /// The ledger folder of a task's child that may nest: marked spent when a budget is
    /// reached (at once when one already is).
    pub(crate) fn nesting(&self, dir: &std::path::Path) {
        if self.reached.is_cancelled() {
            super::ledger::mark_spent(dir);
        }
        self.nesting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(dir.to_path_buf());
    }

    /// Whether the orchestrate above marked the tree's budget spent.
    fn spent_above(&self) -> bool {
        self.above.as_deref().is_some_and(super::ledger::is_spent)
    }

    /// Marks the nesting children's ledgers spent, then stops every task: at once, or,
    /// where a child started orchestrate runs of its own, after [`NESTED_STOP_GRACE`], so
    /// that those runs stop their children for the tree's budget and give their partial
    /// answers back before the tree is killed. (A task that reports meanwhile is stopped
    /// at that report; none starts.)
    fn stop_all(&self) {
        if self.reached.is_cancelled() || self.stopping.swap(true, Ordering::Relaxed) {
            return;
        }
        let nesting = self.nesting.lock().unwrap_or_else(|p| p.into_inner());
        for dir in nesting.iter() {
            super::ledger::mark_spent(dir);
        }
        let handle = tokio::runtime::Handle::try_current();
        match handle {
            Ok(handle) if !nesting.is_empty() => {
                let reached = self.reached.clone();
                handle.spawn(async move {
                    tokio::time::sleep(NESTED_STOP_GRACE).await;
                    reached.cancel();
                });
            }
            _ => self.reached.cancel(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Spend>> {
        self.spent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Task `task`'s attempt `attempt` has spent `usage` so far (from its own stream).
    /// Returns the budget reached, once the tasks together have reached one (and stops
    /// every task).
    pub(crate) fn report(&self, task: usize, attempt: u32, usage: &Usage) -> Option<Limit> {
        self.update(task, |s| {
            if attempt != s.attempt {
                s.finished = sum(&s.finished, &s.current);
                s.attempt = attempt;
                s.current = Usage::default();
            }
            s.current = max(&s.current, usage);
        })
    }

    /// The orchestrate runs task `task`'s child started have reported `nested` in all.
    pub(crate) fn report_nested(&self, task: usize, nested: &Usage) -> Option<Limit> {
        self.update(task, |s| s.nested = max(&s.nested, nested))
    }

    fn update(&self, task: usize, edit: impl FnOnce(&mut Spend)) -> Option<Limit> {
        let (reached, whole) = {
            let mut spent = self.lock();
            let slot = spent.get_mut(task)?;
            let before = (slot.own(), slot.nested);
            edit(slot);
            let changed = before != (slot.own(), slot.nested);
            let reached = self.check(&spent);
            let whole = (changed && self.upward.is_some()).then(|| whole_tree(&spent));
            (reached, whole)
        };
        if let (Some(upward), Some(whole)) = (&self.upward, whole) {
            upward.write(&whole);
        }
        if reached.is_some() {
            self.stop_all();
        }
        reached
    }

    /// What task `task`'s child may spend through the runs it starts, now: what is left.
    /// The first allowance a task gets caps what this orchestrate counts of its reports.
    pub(crate) fn allowance(&self, task: usize) -> Allowance {
        let mut spent = self.lock();
        let (cost, tokens) = totals(&spent);
        let left = Allowance {
            cost: self.limits.max_cost.map(|l| (l - cost).max(0.0)),
            tokens: self.limits.max_tokens.map(|l| l.saturating_sub(tokens)),
        };
        if let Some(slot) = spent.get_mut(task) {
            let cap = &mut slot.nested_cap;
            if cap.cost.is_none() && cap.tokens.is_none() {
                *cap = left;
            }
        }
        left
    }

    fn check(&self, spent: &[Spend]) -> Option<Limit> {
        let (cost, tokens) = totals(spent);
        let nested = spent.iter().any(|s| s.nested != Usage::default());
        if let Some(limit) = self.limits.max_tokens.filter(|l| tokens >= *l) {
            return Some(if self.limits.tree_tokens || nested {
                Limit::TreeTokens {
                    limit,
                    used: tokens,
                }
            } else {
                Limit::Tokens {
                    limit,
                    used: tokens,
                }
            });
        }
        let limit = self.limits.max_cost.filter(|l| cost >= *l)?;
        let used = round_usd(cost);
        Some(if self.limits.tree_cost || nested {
            Limit::TreeCost { limit, used }
        } else {
            Limit::Cost { limit, used }
        })
    }

    /// The budget reached (the first that is, as [`TotalBudget::report`] says), with
    /// what the tasks have spent so far.
    pub(crate) fn limit_reached(&self) -> Limit {
        let spent = self.lock();
        self.check(&spent).unwrap_or_else(|| {
            let (cost, tokens) = totals(&spent);
            // Spent elsewhere in the tree: the tree's budget, with what this orchestrate
            // counts of it.
            if self.spent_above() {
                return match (self.limits.max_cost, self.limits.max_tokens) {
                    (None, Some(limit)) => Limit::TreeTokens {
                        limit,
                        used: tokens,
                    },
                    (cost_limit, _) => Limit::TreeCost {
                        limit: cost_limit.unwrap_or_default(),
                        used: round_usd(cost),
                    },
                };
            }
            match self
                .limits
                .max_tokens
                .filter(|_| self.limits.max_cost.is_none())
            {
                Some(limit) => Limit::Tokens {
                    limit,
                    used: tokens,
                },
                None => Limit::Cost {
                    limit: self.limits.max_cost.unwrap_or_default(),
                    used: round_usd(cost),
                },
            }
        })
    }

    pub(crate) fn is_spent(&self) -> bool {
        self.reached.is_cancelled()
            || self.stopping.load(Ordering::Relaxed)
            || self.check(&self.lock()).is_some()
    }

    /// What task `task`'s nested runs reported, if anything.
    pub(crate) fn nested(&self, task: usize) -> Option<Usage> {
        self.lock()
            .get(task)
            .map(|s| s.nested)
            .filter(|n| *n != Usage::default())
    }

    /// Every task's own spend and its nested runs', when some nested run reported.
    pub(crate) fn tree_usage(&self) -> Option<Usage> {
        let spent = self.lock();
        spent
            .iter()
            .any(|s| s.nested != Usage::default())
            .then(|| whole_tree(&spent))
    }
}

/// What the tasks spent together, counted against the budget: cost, tokens.
fn totals(spent: &[Spend]) -> (f64, u64) {
    spent.iter().fold((0.0, 0u64), |(c, t), s| {
        let (sc, st) = s.counted();
        (add_usd(c, sc), t.saturating_add(st))
    })
}

/// Everything the tasks and their nested runs spent, as reported.
fn whole_tree(spent: &[Spend]) -> Usage {
    let mut u = spent.iter().fold(Usage::default(), |acc, s| {
        sum(&sum(&acc, &s.own()), &s.nested)
    });
    u.cost = round_usd(u.cost);
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn cost(c: f64) -> Usage {
        Usage {
            cost: c,
            ..Usage::default()
        }
    }

    fn limits(max_cost: Option<f64>, max_tokens: Option<u64>) -> TotalLimits {
        TotalLimits::new(max_cost, max_tokens, &Inherited::default())
    }

    #[test]
    fn the_tasks_together_reach_the_budget_and_stop_every_task() {
        let total = TotalBudget::new(limits(Some(1.0), None), 3, None);
        assert_eq!(total.report(0, 1, &cost(0.4)), None);
        assert_eq!(total.report(1, 1, &cost(0.3)), None);
        // A task's report is its attempt's total so far, not an increment.
        assert_eq!(total.report(0, 1, &cost(0.5)), None);
        assert!(!total.is_spent());
        assert_eq!(
            total.report(2, 1, &cost(0.2)),
            Some(Limit::Cost {
                limit: 1.0,
                used: 1.0
            })
        );
        assert!(total.reached.is_cancelled());
        assert!(total.is_spent());
        assert_eq!(
            total.limit_reached(),
            Limit::Cost {
                limit: 1.0,
                used: 1.0
            }
        );
    }

    #[test]
    fn a_retry_adds_to_what_the_attempts_before_it_spent() {
        let total = TotalBudget::new(limits(Some(1.0), None), 1, None);
        assert_eq!(total.report(0, 1, &cost(0.6)), None);
        assert_eq!(
            total.report(0, 2, &cost(0.4)),
            Some(Limit::Cost {
                limit: 1.0,
                used: 1.0
            })
        );
    }

    #[test]
    fn tokens_count_input_output_and_cache_writes() {
        let total = TotalBudget::new(limits(None, Some(1000)), 2, None);
        let u = |input, cache_read| Usage {
            input,
            output: 100,
            cache_read,
            cache_write: 50,
            ..Usage::default()
        };
        assert_eq!(total.report(0, 1, &u(300, 10_000)), None);
        assert_eq!(
            total.report(1, 1, &u(400, 0)),
            Some(Limit::Tokens {
                limit: 1000,
                used: 1000
            })
        );
    }

    #[test]
    fn nested_spend_counts_toward_the_tree_up_to_what_the_child_was_allowed() {
        let total = TotalBudget::new(limits(Some(1.0), None), 2, None);
        assert_eq!(total.report(1, 1, &cost(0.3)), None);
        assert_eq!(
            total.allowance(0),
            Allowance {
                cost: Some(0.7),
                tokens: None
            }
        );
        // A child that claims more than it was given is counted for what it was given.
        assert_eq!(
            total.report_nested(0, &cost(50.0)),
            Some(Limit::TreeCost {
                limit: 1.0,
                used: 1.0
            })
        );
        assert_eq!(total.nested(0), Some(cost(50.0)), "as reported");
        assert_eq!(total.nested(1), None);
        assert_eq!(total.tree_usage().map(|u| u.cost), Some(50.3));
    }

    #[test]
    fn a_report_never_lowers_what_was_counted() {
        let total = TotalBudget::new(limits(Some(1.0), None), 1, None);
        total.allowance(0);
        assert_eq!(total.report_nested(0, &cost(0.6)), None);
        assert_eq!(total.report_nested(0, &cost(0.1)), None);
        assert_eq!(total.nested(0), Some(cost(0.6)));
    }

    #[test]
    fn an_inherited_budget_lowers_the_own_one_and_names_the_tree() {
        let inherited = Inherited {
            max_cost: Some(0.5),
            max_tokens: Some(10_000),
            ledger: None,
        };
        let l = TotalLimits::new(Some(2.0), Some(100), &inherited);
        assert_eq!(
            l,
            TotalLimits {
                max_cost: Some(0.5),
                max_tokens: Some(100),
                tree_cost: true,
                tree_tokens: false,
            }
        );
        let total = TotalBudget::new(l, 1, None);
        assert_eq!(
            total.report(0, 1, &cost(0.5)),
            Some(Limit::TreeCost {
                limit: 0.5,
                used: 0.5
            })
        );
        let l = TotalLimits::new(None, None, &inherited);
        assert_eq!((l.max_cost, l.max_tokens), (Some(0.5), Some(10_000)));
        assert!(TotalLimits::new(None, None, &Inherited::default()).is_empty());
    }

    #[test]
    fn absurd_costs_add_up_to_the_largest_amount_never_infinity() {
        let total = TotalBudget::new(limits(Some(1.0), None), 2, None);
        assert_eq!(
            total.report(0, 1, &cost(f64::MAX)),
            Some(Limit::Cost {
                limit: 1.0,
                used: f64::MAX
            })
        );
        assert_eq!(
            total.report(1, 1, &cost(1e308)),
            Some(Limit::Cost {
                limit: 1.0,
                used: f64::MAX
            })
        );
    }
}
