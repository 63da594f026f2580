//! Named limits, with their units in their names, and their defaults (README,
//! Supervision).

use std::time::Duration;

use crate::result::{Limit, Usage};

pub(crate) const DEFAULT_RUNTIME_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3 * 60);
/// How long one tool call may run with no tool finishing (the idle timeout does not apply
/// while a tool runs).
pub(crate) const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How long a child may only retry or reconnect to its provider, with no progress,
/// before it is stopped as unable to reach it.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Consecutive retry or reconnect notices without progress that stop a child as unable to
/// reach its provider, however quickly they come.
pub(crate) const MAX_CONSECUTIVE_RETRIES: u32 = 10;
/// Between SIGTERM and SIGKILL to the child's group.
pub(crate) const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);
/// How long a child may take to exit on its own after its final event.
pub(crate) const DEFAULT_TERMINAL_EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long the pipes may stay open after the leader exited (a descendant holding them)
/// before the group is killed.
pub(crate) const DEFAULT_DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// After SIGKILL, how long to wait for the pipes to close before giving up on them.
pub(crate) const KILLED_PIPE_DRAIN: Duration = Duration::from_secs(2);
pub(crate) const DEFAULT_MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;
pub(crate) const DEFAULT_MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
pub(crate) const DEFAULT_MAX_DEPTH: u32 = 1;
/// How long a job may wait in a cluster engine's queue before it starts (it counts
/// against neither the runtime nor the idle limit meanwhile).
pub(crate) const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Tasks longer than this are passed to pi as an `@file` argument instead of inline.
pub(crate) const TASK_INLINE_MAX_CHARS: usize = 8000;

/// What the supervisor enforces on one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SupervisionLimits {
    pub runtime_timeout: Duration,
    pub idle_timeout: Duration,
    pub tool_timeout: Duration,
    pub connect_timeout: Duration,
    pub kill_grace: Duration,
    pub terminal_exit_grace: Duration,
    pub drain_after_exit: Duration,
    pub max_output_bytes: u64,
    pub max_line_bytes: usize,
    /// How long a job may wait in a cluster engine's queue before it starts.
    pub queue_timeout: Duration,
}

impl Default for SupervisionLimits {
    fn default() -> Self {
        SupervisionLimits {
            runtime_timeout: DEFAULT_RUNTIME_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            kill_grace: DEFAULT_KILL_GRACE,
            terminal_exit_grace: DEFAULT_TERMINAL_EXIT_GRACE,
            drain_after_exit: DEFAULT_DRAIN_AFTER_EXIT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            queue_timeout: DEFAULT_QUEUE_TIMEOUT,
        }
    }
}

/// What a run may spend, from the child's streaming usage. None: no budget.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Budgets {
    pub max_turns: Option<u64>,
    /// Input + output + cache-write tokens over the run.
    pub max_tokens: Option<u64>,
    /// USD.
    pub max_cost: Option<f64>,
}

impl Budgets {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Budgets::default()
    }

    /// The first budget `usage` has reached (turns, then tokens, then cost).
    pub(crate) fn reached(&self, usage: &Usage) -> Option<Limit> {
        let tokens = usage
            .input
            .saturating_add(usage.output)
            .saturating_add(usage.cache_write);
        if let Some(limit) = self.max_turns.filter(|l| usage.turns >= *l) {
            return Some(Limit::Turns {
                limit,
                used: usage.turns,
            });
        }
        if let Some(limit) = self.max_tokens.filter(|l| tokens >= *l) {
            return Some(Limit::Tokens {
                limit,
                used: tokens,
            });
        }
        self.max_cost
            .filter(|l| usage.cost >= *l)
            .map(|limit| Limit::Cost {
                limit,
                used: usage.cost,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_budget_is_reached_at_its_value_and_turns_are_checked_first() {
        let b = Budgets {
            max_turns: Some(3),
            max_tokens: Some(1000),
            max_cost: Some(0.5),
        };
        let usage = |turns, input, output, cache_write, cost| Usage {
            input,
            output,
            cache_read: 5000,
            cache_write,
            cost,
            turns,
        };
        assert_eq!(
            b.reached(&usage(2, 500, 100, 100, 0.49)),
            None,
            "cache reads do not count"
        );
        assert_eq!(
            b.reached(&usage(2, 800, 100, 100, 0.1)),
            Some(Limit::Tokens {
                limit: 1000,
                used: 1000
            })
        );
        assert_eq!(
            b.reached(&usage(2, 1, 1, 0, 0.53)),
            Some(Limit::Cost {
                limit: 0.5,
                used: 0.53
            })
        );
        assert_eq!(
            b.reached(&usage(3, 5000, 0, 0, 9.0)),
            Some(Limit::Turns { limit: 3, used: 3 })
        );
        assert_eq!(Budgets::default().reached(&usage(99, 9, 9, 9, 9.0)), None);
        assert!(Budgets::default().is_empty());
    }
}
