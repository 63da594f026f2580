//! The child's lifecycle as a pure state machine: phases that hold their own deadlines and
//! reasons, the transitions between them, and what each asks the `select!` loop to do. No
//! I/O and no clock (the loop passes the time in), so every transition is tested without a
//! process.
//!
//! While the child runs, a [`Watchdog`] tells a working child from a stuck one: only
//! progress keeps it alive (see [`StreamFacts`]), a tool call in flight trades the idle
//! limit for the tool limit, and a child that only retries its provider is stopped after
//! the connect limit. The lifecycle turns whichever is due first, with the runtime limit
//! and its own phase deadlines, into one next moment for the loop's one timer.

use std::time::Duration;

use tokio::time::Instant;

use super::outcome::{KillKind, Leak, StopReason, Termination};
use crate::limits::{SupervisionLimits, KILLED_PIPE_DRAIN, MAX_CONSECUTIVE_RETRIES};
use crate::platform::LeaderExit;

/// What the child's stream has shown so far, as its dialect read it. Counters only grow;
/// the watchdog compares them with the last ones it saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamFacts {
    /// A line was a valid event of the child's dialect: from then on only progress, not
    /// any byte, keeps it alive.
    pub recognized: bool,
    /// Progress events (the model's text, tool calls, tools running and finishing, usage).
    pub progress: u64,
    /// Tool calls started and not finished.
    pub tools_in_flight: usize,
    /// Tool calls finished.
    pub tools_ended: u64,
    /// Retry or reconnect notices, and those since the last progress.
    pub retries: u64,
    pub retries_since_progress: u32,
    /// The dialect's final event arrived.
    pub terminal: bool,
    /// Why the stream asks to stop the child (a budget reached).
    pub stop: Option<StopReason>,
}

/// How long a child may go without progress, in each way the watchdog tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Patience {
    pub runtime: Duration,
    pub idle: Duration,
    /// One tool call in flight, with no tool finishing.
    pub tool: Duration,
    /// Retrying or reconnecting to the provider, with no progress.
    pub connect: Duration,
    /// Consecutive retry notices without progress that stop the child at once.
    pub max_retries: u32,
}

impl Patience {
    pub(super) fn new(limits: &SupervisionLimits) -> Patience {
        Patience {
            runtime: limits.runtime_timeout,
            idle: limits.idle_timeout,
            tool: limits.tool_timeout,
            connect: limits.connect_timeout,
            max_retries: MAX_CONSECUTIVE_RETRIES,
        }
    }
}

/// Tells a working child from a stuck one, from the times output arrived and what the
/// stream showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Watchdog {
    patience: Patience,
    last_progress: Instant,
    seen: StreamFacts,
    /// Since when tools have run with none finishing.
    tool_since: Option<Instant>,
    /// Since when, and until when, the child has only retried (no progress in between).
    noise: Option<(Instant, Instant)>,
}

impl Watchdog {
    pub(super) fn new(patience: Patience, start: Instant) -> Watchdog {
        Watchdog {
            patience,
            last_progress: start,
            seen: StreamFacts::default(),
            tool_since: None,
            noise: None,
        }
    }

    /// Output arrived on stdout or stderr. Until the stream is recognised, any output
    /// counts as progress: a CLI that prints only chatter while it starts is alive.
    pub(super) fn on_output(&mut self, now: Instant) {
        if !self.seen.recognized {
            self.last_progress = now;
        }
    }

    /// What the stream showed after a chunk of stdout.
    pub(super) fn on_facts(&mut self, f: &StreamFacts, now: Instant) {
        if f.progress > self.seen.progress || (f.recognized && !self.seen.recognized) {
            self.last_progress = now;
        }
        self.tool_since = match self.tool_since {
            _ if f.tools_in_flight == 0 => None,
            // A tool finished while others run: progress, and the next may run as long.
            Some(_) if f.tools_ended > self.seen.tools_ended => Some(now),
            Some(since) => Some(since),
            None => Some(now),
        };
        self.noise = match self.noise {
            _ if f.retries_since_progress == 0 => None,
            Some((since, _)) if f.retries > self.seen.retries => Some((since, now)),
            Some(noise) => Some(noise),
            None if f.retries > self.seen.retries => Some((now, now)),
            None => None,
        };
        self.seen = *f;
    }

    /// The stop the watchdog would make next, and when: the idle limit from the last
    /// progress, or the tool limit while tools run; the connect limit while the child only
    /// retries (at once after too many retries in a row).
    pub(super) fn next(&self) -> (Instant, StopReason) {
        let p = &self.patience;
        let mut next = match self.tool_since {
            Some(since) => (since + p.tool, StopReason::ToolTimeout),
            None => (self.last_progress + p.idle, StopReason::IdleTimeout),
        };
        if let Some((since, last)) = self.noise {
            let due = if self.seen.retries_since_progress >= p.max_retries {
                last
            } else {
                since + p.connect
            };
            if due < next.0 {
                next = (due, StopReason::ProviderUnreachable);
            }
        }
        next
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Submitted to a cluster engine and waiting in its queue until `until` (the queue
    /// timeout): neither the runtime nor the idle limit counts yet.
    Queued {
        until: Instant,
    },
    Running,
    /// The final event arrived; the child may still exit on its own until `until`.
    ExitGrace {
        until: Instant,
    },
    /// The child was asked through its own protocol to stop its work (ACP's
    /// `session/cancel`); SIGTERM follows when it says it has, or at `until`.
    Cancelling {
        reason: StopReason,
        until: Instant,
    },
    /// SIGTERM sent to the group; SIGKILL at `kill_at`.
    Terminating {
        reason: StopReason,
        kill_at: Instant,
    },
    /// SIGKILL sent to the group (`reason` is None when only descendants holding the pipes
    /// were left). The pipes get until `give_up_at` to close; None once given up on.
    Killed {
        reason: Option<StopReason>,
        kill: KillKind,
        give_up_at: Option<Instant>,
    },
    /// The child exited on its own but descendants still hold a pipe; the group is killed
    /// at `until`.
    Draining {
        until: Instant,
    },
}

/// What a transition asks the loop to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Nothing,
    /// Ask the child to stop its work through its own protocol.
    Cancel,
    /// SIGTERM to the group.
    Terminate,
    /// SIGKILL to the group.
    Kill,
    /// Stop reading the pipes: they stayed open after SIGKILL.
    AbandonPipes,
}

/// The waits between phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Graces {
    /// From a protocol cancel to SIGTERM, for a child that talks a protocol that has one;
    /// zero for the others (a stop starts with SIGTERM).
    pub cancel: Duration,
    /// From SIGTERM to SIGKILL.
    pub kill: Duration,
    /// For the child to exit on its own after its final event.
    pub terminal_exit: Duration,
    /// For the pipes to close after the child exited.
    pub drain_after_exit: Duration,
    /// For the pipes to close after SIGKILL.
    pub killed_pipe_drain: Duration,
}

impl Graces {
    /// `cancels`: the child talks a protocol with a cancel of its own, which then gets
    /// the kill grace before SIGTERM.
    pub(super) fn new(limits: &SupervisionLimits, cancels: bool) -> Graces {
        Graces {
            cancel: if cancels {
                limits.kill_grace
            } else {
                Duration::ZERO
            },
            kill: limits.kill_grace,
            terminal_exit: limits.terminal_exit_grace,
            drain_after_exit: limits.drain_after_exit,
            killed_pipe_drain: KILLED_PIPE_DRAIN,
        }
    }
}

/// How the child ended, once it has, and what became of its descendants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lifecycle {
    graces: Graces,
    patience: Patience,
    runtime_deadline: Instant,
    watchdog: Watchdog,
    phase: Phase,
    ended: Option<(LeaderExit, Termination)>,
    leak: Leak,
}

impl Lifecycle {
    /// The child was started at `start`: every limit counts from there.
    pub(super) fn new(graces: Graces, patience: Patience, start: Instant) -> Lifecycle {
        Lifecycle {
            graces,
            patience,
            runtime_deadline: start + patience.runtime,
            watchdog: Watchdog::new(patience, start),
            phase: Phase::Running,
            ended: None,
            leak: Leak::None,
        }
    }

    /// A child submitted to a cluster engine at `submitted`: it waits in the queue, for at
    /// most `queue_timeout`, until [`Lifecycle::started`]; every other limit counts from
    /// then.
    pub(super) fn queued(
        graces: Graces,
        patience: Patience,
        submitted: Instant,
        queue_timeout: Duration,
    ) -> Lifecycle {
        Lifecycle {
            phase: Phase::Queued {
                until: submitted + queue_timeout,
            },
            ..Lifecycle::new(graces, patience, submitted)
        }
    }

    /// The queued child started running at `now`: the runtime and idle limits count from
    /// here. (Nothing changes for a child that was not queued.)
    pub(super) fn started(&mut self, now: Instant) {
        if let Phase::Queued { .. } = self.phase {
            self.phase = Phase::Running;
            self.runtime_deadline = now + self.patience.runtime;
            self.watchdog = Watchdog::new(self.patience, now);
        }
    }

    #[cfg(test)]
    pub(super) fn is_queued(&self) -> bool {
        matches!(self.phase, Phase::Queued { .. })
    }

    /// Output arrived (see [`Watchdog::on_output`]).
    pub(super) fn on_output(&mut self, now: Instant) {
        self.watchdog.on_output(now);
    }

    /// The stream showed `facts` (see [`Watchdog::on_facts`]).
    pub(super) fn on_facts(&mut self, facts: &StreamFacts, now: Instant) {
        self.watchdog.on_facts(facts, now);
    }

    /// The next moment something is due: the runtime limit or the watchdog's stop while
    /// the child runs, the phase's own deadline after that. The loop sleeps until then
    /// and calls [`Lifecycle::tick`].
    pub(super) fn next_due(&self) -> Option<Instant> {
        match self.phase {
            Phase::Queued { until } => Some(until),
            Phase::Running => Some(self.runtime_deadline.min(self.watchdog.next().0)),
            Phase::ExitGrace { until } => Some(self.runtime_deadline.min(until)),
            _ => self.deadline(),
        }
    }

    /// Time passed: carries out whatever is due at `now`, the runtime limit first.
    pub(super) fn tick(&mut self, now: Instant, pipes_open: bool) -> Action {
        if let Phase::Queued { until } = self.phase {
            if now >= until {
                return self.stop(StopReason::QueueTimeout, now, pipes_open);
            }
            return Action::Nothing;
        }
        if self.counts_time() && now >= self.runtime_deadline {
            return self.stop(StopReason::RuntimeTimeout, now, pipes_open);
        }
        if self.phase == Phase::Running {
            let (due, reason) = self.watchdog.next();
            if now >= due {
                return self.stop(reason, now, pipes_open);
            }
            return Action::Nothing;
        }
        match self.deadline() {
            Some(due) if now >= due => self.deadline_passed(now, pipes_open),
            _ => Action::Nothing,
        }
    }

    #[cfg(test)]
    pub(super) fn phase(&self) -> Phase {
        self.phase
    }

    pub(super) fn has_exited(&self) -> bool {
        self.ended.is_some()
    }

    /// When the current phase ends by itself.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running => None,
            Phase::Queued { until }
            | Phase::ExitGrace { until }
            | Phase::Draining { until }
            | Phase::Cancelling { until, .. } => Some(until),
            Phase::Terminating { kill_at, .. } => Some(kill_at),
            Phase::Killed { give_up_at, .. } => give_up_at,
        }
    }

    /// Whether the runtime timeout and a graceful cancel still apply: not once a stop is
    /// under way or the child has exited.
    pub(super) fn counts_time(&self) -> bool {
        matches!(
            self.phase,
            Phase::Queued { .. } | Phase::Running | Phase::ExitGrace { .. }
        )
    }

    /// Whether the child is still working towards its answer, or waiting in a queue to
    /// start on it (not past its final event, not being stopped, not exited).
    pub(super) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Queued { .. })
    }

    /// Whether an immediate kill still has something to do.
    pub(super) fn accepts_kill(&self) -> bool {
        !matches!(self.phase, Phase::Killed { .. })
    }

    /// The dialect's final event arrived: give the child a short while to exit on its own.
    /// After a protocol cancel it says the child stopped its work: SIGTERM follows at once.
    pub(super) fn terminal_event(&mut self, now: Instant) -> Action {
        match self.phase {
            Phase::Running => {
                self.phase = Phase::ExitGrace {
                    until: now + self.graces.terminal_exit,
                };
                Action::Nothing
            }
            Phase::Cancelling { reason, .. } if !self.has_exited() => self.terminate(reason, now),
            _ => Action::Nothing,
        }
    }

    /// Stops the child gracefully unless a stop is already under way (the first reason
    /// wins): a protocol cancel first where the child has one and is still at work, then
    /// SIGTERM, then SIGKILL after the grace.
    pub(super) fn stop(&mut self, reason: StopReason, now: Instant, pipes_open: bool) -> Action {
        match self.phase {
            Phase::Terminating { .. } | Phase::Killed { .. } | Phase::Cancelling { .. } => {
                Action::Nothing
            }
            // Nothing is left to stop but descendants holding the pipes.
            _ if self.has_exited() => {
                self.kill_group(Some(reason), KillKind::Leftovers, now, pipes_open)
            }
            _ if self.graces.kill.is_zero() => {
                self.kill_group(Some(reason), KillKind::Immediate, now, pipes_open)
            }
            // Still at work (a child past its final event has nothing left to cancel).
            Phase::Running if !self.graces.cancel.is_zero() => {
                self.phase = Phase::Cancelling {
                    reason,
                    until: now + self.graces.cancel,
                };
                Action::Cancel
            }
            _ => self.terminate(reason, now),
        }
    }

    /// The child had nothing to cancel (its protocol had not started a turn, or its
    /// input is closed): SIGTERM at once.
    pub(super) fn cancel_unavailable(&mut self, now: Instant) -> Action {
        match self.phase {
            Phase::Cancelling { reason, .. } if !self.has_exited() => self.terminate(reason, now),
            _ => Action::Nothing,
        }
    }

    fn terminate(&mut self, reason: StopReason, now: Instant) -> Action {
        self.phase = Phase::Terminating {
            reason,
            kill_at: now + self.graces.kill,
        };
        Action::Terminate
    }

    /// Kills at once (a second cancel): keeps the reason of a stop under way, else the
    /// cancel is the reason.
    pub(super) fn kill(&mut self, now: Instant, pipes_open: bool) -> Action {
        match self.phase {
            Phase::Killed { .. } => Action::Nothing,
            Phase::Terminating { reason, .. } => {
                self.kill_group(Some(reason), KillKind::Immediate, now, pipes_open)
            }
            _ if self.has_exited() => self.kill_group(
                Some(StopReason::Cancelled),
                KillKind::Leftovers,
                now,
                pipes_open,
            ),
            _ => self.kill_group(
                Some(StopReason::Cancelled),
                KillKind::Immediate,
                now,
                pipes_open,
            ),
        }
    }

    /// The current phase's deadline passed.
    pub(super) fn deadline_passed(&mut self, now: Instant, pipes_open: bool) -> Action {
        match self.phase {
            Phase::Running => Action::Nothing,
            Phase::Queued { .. } => self.stop(StopReason::QueueTimeout, now, pipes_open),
            Phase::ExitGrace { .. } => self.stop(StopReason::AfterTerminalEvent, now, pipes_open),
            // The child did not end its work within the grace.
            Phase::Cancelling { reason, .. } => self.terminate(reason, now),
            Phase::Terminating { reason, .. } => {
                self.kill_group(Some(reason), KillKind::Escalated, now, pipes_open)
            }
            Phase::Draining { .. } => self.kill_group(None, KillKind::Leftovers, now, pipes_open),
            Phase::Killed {
                reason,
                kill,
                give_up_at,
            } => {
                self.phase = Phase::Killed {
                    reason,
                    kill,
                    give_up_at: None,
                };
                if give_up_at.is_some() && pipes_open {
                    // Whatever still holds the pipes survived SIGKILL to the group: it
                    // left the group. Stop reading rather than hang.
                    self.leak = Leak::Abandoned;
                    Action::AbandonPipes
                } else {
                    Action::Nothing
                }
            }
        }
    }

    /// The child exited (seen without reaping it).
    pub(super) fn leader_exited(&mut self, exit: LeaderExit, now: Instant, pipes_open: bool) {
        if self.has_exited() {
            return;
        }
        let termination = match self.phase {
            Phase::Queued { .. }
            | Phase::Running
            | Phase::ExitGrace { .. }
            | Phase::Draining { .. } => Termination::on_its_own(exit),
            Phase::Terminating { reason, .. } | Phase::Cancelling { reason, .. } => {
                Termination::Terminated { reason }
            }
            Phase::Killed {
                reason: Some(reason),
                kill,
                ..
            } => Termination::Killed { reason, kill },
            Phase::Killed { reason: None, .. } => Termination::on_its_own(exit),
        };
        self.ended = Some((exit, termination));
        if pipes_open
            && matches!(
                self.phase,
                Phase::Queued { .. }
                    | Phase::Running
                    | Phase::ExitGrace { .. }
                    | Phase::Cancelling { .. }
            )
        {
            self.phase = Phase::Draining {
                until: now + self.graces.drain_after_exit,
            };
        }
    }

    /// How it all ended, once the child has exited and the pipes are closed.
    /// `others_in_group`: whether the group still had members after the child was reaped.
    pub(super) fn finish(&self, others_in_group: bool) -> Option<(LeaderExit, Termination, Leak)> {
        let (exit, termination) = self.ended?;
        // After a SIGKILL sent while the child lived, whatever is left in the group died
        // with it rather than outliving it.
        let leak = if self.leak.is_none()
            && others_in_group
            && !matches!(self.phase, Phase::Killed { .. })
        {
            Leak::StayedInGroup
        } else {
            self.leak
        };
        Some((exit, termination, leak))
    }

    fn kill_group(
        &mut self,
        reason: Option<StopReason>,
        kill: KillKind,
        now: Instant,
        pipes_open: bool,
    ) -> Action {
        if let Some((_, termination)) = &mut self.ended {
            if pipes_open {
                self.leak = Leak::HeldPipes;
            }
            // The child had exited on its own; the stop's reason still decides the result.
            if let (Some(reason), Termination::Exited { .. } | Termination::Signaled { .. }) =
                (reason, *termination)
            {
                *termination = Termination::Killed {
                    reason,
                    kill: KillKind::Leftovers,
                };
            }
        }
        self.phase = Phase::Killed {
            reason,
            kill,
            give_up_at: Some(now + self.graces.killed_pipe_drain),
        };
        Action::Kill
    }
}

#[cfg(test)]
mod tests;
