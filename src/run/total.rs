//! A cost budget shared by the tasks of a fan-out (`--max-total-cost`): each task reports
//! what it has spent so far; once the tasks together reach the budget, no task starts and
//! every running one is stopped.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use crate::result::{add_usd, round_usd, Limit};

/// What the tasks spent together, kept finite however much each reported.
fn sum(spent: &[f64]) -> f64 {
    spent.iter().fold(0.0, |total, cost| add_usd(total, *cost))
}

#[derive(Debug)]
pub(crate) struct TotalCost {
    /// USD.
    limit: f64,
    /// What each task has spent so far, by its index.
    spent: Mutex<Vec<f64>>,
    /// Cancelled once the budget is reached: the tasks' supervisors stop their children.
    pub(crate) reached: CancellationToken,
}

impl TotalCost {
    pub(crate) fn new(limit: f64, tasks: usize) -> TotalCost {
        TotalCost {
            limit,
            spent: Mutex::new(vec![0.0; tasks]),
            reached: CancellationToken::new(),
        }
    }

    /// Task `task` has spent `cost` so far. Returns the budget, with what all the tasks
    /// spent, once they have together reached it (and stops every task).
    pub(crate) fn report(&self, task: usize, cost: f64) -> Option<Limit> {
        let used = {
            let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = spent.get_mut(task) {
                *slot = slot.max(cost);
            }
            sum(&spent)
        };
        (used >= self.limit).then(|| {
            self.reached.cancel();
            self.limit_with(used)
        })
    }

    /// The budget with what the tasks have spent so far.
    pub(crate) fn limit_reached(&self) -> Limit {
        self.limit_with(self.used())
    }

    /// The budget and what the tasks have spent so far, in USD.
    pub(crate) fn amounts(&self) -> (f64, f64) {
        (self.limit, round_usd(self.used()))
    }

    pub(crate) fn is_spent(&self) -> bool {
        self.reached.is_cancelled() || self.used() >= self.limit
    }

    fn used(&self) -> f64 {
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        sum(&spent)
    }

    fn limit_with(&self, used: f64) -> Limit {
        Limit::Cost {
            limit: self.limit,
            used: round_usd(used),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_tasks_together_reach_the_budget_and_stop_every_task() {
        let total = TotalCost::new(1.0, 3);
        assert_eq!(total.report(0, 0.4), None);
        assert_eq!(total.report(1, 0.3), None);
        // A task's report is its total so far, not an increment.
        assert_eq!(total.report(0, 0.5), None);
        assert!(!total.is_spent());
        assert_eq!(
            total.report(2, 0.2),
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
    fn absurd_costs_add_up_to_the_largest_amount_never_infinity() {
        let total = TotalCost::new(1.0, 2);
        assert_eq!(
            total.report(0, f64::MAX),
            Some(Limit::Cost {
                limit: 1.0,
                used: f64::MAX
            })
        );
        assert_eq!(
            total.report(1, 1e308),
            Some(Limit::Cost {
                limit: 1.0,
                used: f64::MAX
            })
        );
        assert_eq!(total.amounts(), (1.0, f64::MAX));
    }
}
