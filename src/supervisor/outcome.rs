//! Typed outcomes of a supervised child: how it ended, and what became of its descendants.
//! The kinds of ending ([`Termination`], [`Leak`]) are the result contract's own
//! (`crate::result`); this module adds what the supervisor knows beyond them.

use std::time::Duration;

use crate::platform::{Containment, LeaderExit};
pub(crate) use crate::result::{KillKind, Leak, StopReason, Termination};
use crate::runner::slurm::JobView;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub exit: LeaderExit,
    pub termination: Termination,
    pub leak: Leak,
    /// What held the child's tree.
    pub containment: Containment,
    /// Why a weaker containment than a PID namespace was used, when it was.
    pub containment_degraded: Option<String>,
    pub stdout_bytes: u64,
    /// The last few KiB of stderr, for error messages.
    pub stderr_tail: String,
    /// Set when writing the session copy failed; the run goes on without it.
    pub session_write_error: Option<String>,
    pub elapsed: Duration,
    /// What the cluster engine said about the child's job (None for a local child).
    pub remote: Option<RemoteReport>,
}

/// A child that ran as a job of a cluster engine (Slurm): what became of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteReport {
    /// The job's last state seen, with its id and node (None: the engine refused it before
    /// it had an id, or could not be asked).
    pub job: Option<JobView>,
    /// The node it ran on, as seen while it ran (a finished job may no longer say).
    pub node: Option<String>,
    /// From the submission until it started, or until it was given up on.
    pub queue_wait: Duration,
    /// It was seen running, or it printed.
    pub started: bool,
    /// Why it was pending at the last look before it started (or was given up on).
    pub pending_reason: Option<String>,
    /// The engine still listed it as unfinished when orchestrate stopped waiting for it.
    pub lingering: bool,
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
    /// The cluster engine cannot take the job (no srun, its controller down, …).
    #[error("{0}")]
    Engine(#[from] crate::runner::slurm::SlurmError),
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
