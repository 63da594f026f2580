//! Typed outcomes of a supervised child.

use std::time::Duration;

use super::unix::LeaderExit;

/// Why orchestrate stopped the child (the first reason wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    RuntimeTimeout,
    IdleTimeout,
    /// The child's total output passed the hard cap.
    OutputCap,
    /// A signal to orchestrate or a cancel from the MCP client.
    Cancelled,
    /// The dialect's final event arrived and the child did not exit within the grace.
    /// The run still counts as finished.
    AfterTerminalEvent,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub exit: LeaderExit,
    pub stop: Option<StopReason>,
    /// SIGKILL was needed (the grace ran out, or a second cancel).
    pub escalated_to_kill: bool,
    /// Descendants outlived the leader (holding its pipes, or still in its group) and
    /// were killed.
    pub leaked: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// The last few KiB of stderr, for error messages.
    pub stderr_tail: String,
    /// Set when writing the session copy failed; the run goes on without it.
    pub session_write_error: Option<String>,
    pub elapsed: Duration,
}

impl Outcome {
    /// A clean exit with nothing said, for tests to adjust.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Outcome {
        Outcome {
            exit: LeaderExit::Exited(0),
            stop: None,
            escalated_to_kill: false,
            leaked: false,
            stdout_bytes: 0,
            stderr_bytes: 0,
            stderr_tail: String::new(),
            session_write_error: None,
            elapsed: Duration::from_millis(1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SuperviseError {
    #[error("failed to start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to watch the child: {0}")]
    Io(#[from] std::io::Error),
}

impl SuperviseError {
    /// Whether the program could not be found (exit code 127 by shell convention).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, SuperviseError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}
