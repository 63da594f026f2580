//! Named limits, with their units in their names, and their defaults (SPEC sections 5 and 7).

use std::time::Duration;

pub(crate) const DEFAULT_RUNTIME_TIMEOUT: Duration = Duration::from_secs(15 * 60);
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3 * 60);
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
/// Tasks longer than this are passed to pi as an `@file` argument instead of inline.
pub(crate) const TASK_INLINE_MAX_CHARS: usize = 8000;

/// What the supervisor enforces on one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SupervisionLimits {
    pub runtime_timeout: Duration,
    pub idle_timeout: Duration,
    pub kill_grace: Duration,
    pub terminal_exit_grace: Duration,
    pub drain_after_exit: Duration,
    pub max_output_bytes: u64,
    pub max_line_bytes: usize,
}

impl Default for SupervisionLimits {
    fn default() -> Self {
        SupervisionLimits {
            runtime_timeout: DEFAULT_RUNTIME_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            kill_grace: DEFAULT_KILL_GRACE,
            terminal_exit_grace: DEFAULT_TERMINAL_EXIT_GRACE,
            drain_after_exit: DEFAULT_DRAIN_AFTER_EXIT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}
