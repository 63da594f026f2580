//! Typed outcomes of a supervised child: how it ended, and what became of its descendants.
//! The kinds of ending ([`Termination`], [`Leak`]) are the result contract's own
//! (`crate::result`); this module adds what the supervisor knows beyond them.

use std::time::Duration;

use crate::platform::{Containment, LeaderExit};
pub(crate) use crate::result::{KillKind, Leak, StopReason, Termination};
use crate::runner::{EngineError, Settled};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub exit: LeaderExit,
    pub termination: Termination,
    pub leak: Leak,
    /// What held the child's tree.
    pub containment: Containment,
    /// Why a weaker containment than a PID namespace was used, when it was.
    pub containment_degraded: Option<String>,
    /// The sandbox layers that held, and those missing with why.
    pub sandbox_layers: crate::platform::Layers,
    pub stdout_bytes: u64,
    /// The last few KiB of stderr, for error messages.
    pub stderr_tail: String,
    /// Set when writing the session copy failed; the run goes on without it.
    pub session_write_error: Option<String>,
    pub elapsed: Duration,
    /// From the start until its engine started the child (zero where it starts at once),
    /// or until it was given up on.
    pub queue_wait: Duration,
    /// What the runner said once the engine was done with the child.
    pub settled: Settled,
    /// The child was to have a network of its own (`network: provider` by default) but
    /// could not, and ran with the host's: why.
    pub network_fallback: Option<String>,
}

impl Outcome {
    /// Why orchestrate stopped the child, if it did.
    pub(crate) fn stop(&self) -> Option<StopReason> {
        self.termination.stop_reason()
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
    /// The engine the runner hands the child to cannot take it, in its own words.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl SuperviseError {
    /// Whether the program could not be found (exit code 127 by shell convention).
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, SuperviseError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

impl Termination {
    /// What the child's own exit says when orchestrate had no part in it.
    pub(super) fn on_its_own(exit: LeaderExit) -> Termination {
        match exit {
            LeaderExit::Exited(code) => Termination::Exited { code },
            LeaderExit::Signaled(signal) => Termination::Signaled { signal },
        }
    }
}
