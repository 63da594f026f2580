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
    pub(super) fn new(limits: &SupervisionLimits) -> Graces {
        Graces {
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
            Phase::Queued { until } | Phase::ExitGrace { until } | Phase::Draining { until } => {
                Some(until)
            }
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
    pub(super) fn terminal_event(&mut self, now: Instant) {
        if self.phase == Phase::Running {
            self.phase = Phase::ExitGrace {
                until: now + self.graces.terminal_exit,
            };
        }
    }

    /// Stops the child gracefully (SIGTERM, SIGKILL after the grace) unless a stop is
    /// already under way: the first reason wins.
    pub(super) fn stop(&mut self, reason: StopReason, now: Instant, pipes_open: bool) -> Action {
        match self.phase {
            Phase::Terminating { .. } | Phase::Killed { .. } => Action::Nothing,
            // Nothing is left to stop but descendants holding the pipes.
            _ if self.has_exited() => {
                self.kill_group(Some(reason), KillKind::Leftovers, now, pipes_open)
            }
            _ if self.graces.kill.is_zero() => {
                self.kill_group(Some(reason), KillKind::Immediate, now, pipes_open)
            }
            _ => {
                self.phase = Phase::Terminating {
                    reason,
                    kill_at: now + self.graces.kill,
                };
                Action::Terminate
            }
        }
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
            Phase::Terminating { reason, .. } => Termination::Terminated { reason },
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
                Phase::Queued { .. } | Phase::Running | Phase::ExitGrace { .. }
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
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const GRACES: Graces = Graces {
        kill: Duration::from_secs(5),
        terminal_exit: Duration::from_secs(2),
        drain_after_exit: Duration::from_millis(500),
        killed_pipe_drain: Duration::from_secs(3),
    };

    /// Scaled down: runtime 100 s, idle 10 s, a tool 30 s, connect 20 s, 4 retries.
    const PATIENCE: Patience = Patience {
        runtime: Duration::from_secs(100),
        idle: Duration::from_secs(10),
        tool: Duration::from_secs(30),
        connect: Duration::from_secs(20),
        max_retries: 4,
    };

    fn secs(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    /// The state after `steps`, as (phase, actions asked for, outcome if finished).
    struct Run {
        t0: Instant,
        life: Lifecycle,
        actions: Vec<Action>,
    }

    impl Run {
        fn new(graces: Graces) -> Run {
            let t0 = Instant::now();
            Run {
                t0,
                life: Lifecycle::new(graces, PATIENCE, t0),
                actions: Vec::new(),
            }
        }
        fn with_patience(patience: Patience) -> Run {
            let t0 = Instant::now();
            Run {
                t0,
                life: Lifecycle::new(GRACES, patience, t0),
                actions: Vec::new(),
            }
        }
        /// Output at `s`, and then what the stream showed.
        fn facts(&mut self, s: f64, f: StreamFacts) -> &mut Self {
            self.life.on_output(self.at(s));
            self.life.on_facts(&f, self.at(s));
            self
        }
        /// Sleeps until the next due moment and ticks; returns when that was (seconds).
        fn wake(&mut self, pipes_open: bool) -> f64 {
            let due = self.life.next_due().expect("something is due");
            let a = self.life.tick(due, pipes_open);
            self.actions.push(a);
            due.duration_since(self.t0).as_secs_f64()
        }
        fn at(&self, s: f64) -> Instant {
            secs(self.t0, s)
        }
        fn stop(&mut self, reason: StopReason, s: f64, pipes_open: bool) -> &mut Self {
            let a = self.life.stop(reason, self.at(s), pipes_open);
            self.actions.push(a);
            self
        }
        fn kill(&mut self, s: f64, pipes_open: bool) -> &mut Self {
            let a = self.life.kill(self.at(s), pipes_open);
            self.actions.push(a);
            self
        }
        fn deadline(&mut self, pipes_open: bool) -> &mut Self {
            let due = self.life.deadline().expect("a deadline is set");
            let a = self.life.deadline_passed(due, pipes_open);
            self.actions.push(a);
            self
        }
        fn exit(&mut self, exit: LeaderExit, s: f64, pipes_open: bool) -> &mut Self {
            self.life.leader_exited(exit, self.at(s), pipes_open);
            self
        }
        fn terminal(&mut self, s: f64) -> &mut Self {
            self.life.terminal_event(self.at(s));
            self
        }
    }

    #[test]
    fn a_child_that_exits_on_its_own_is_exited_with_nothing_asked() {
        let mut r = Run::new(GRACES);
        r.exit(LeaderExit::Exited(3), 1.0, false);
        assert_eq!(r.life.phase(), Phase::Running);
        assert_eq!(r.life.deadline(), None);
        assert_eq!(r.actions, []);
        assert_eq!(
            r.life.finish(false),
            Some((
                LeaderExit::Exited(3),
                Termination::Exited { code: 3 },
                Leak::None
            ))
        );
    }

    #[test]
    fn a_signal_orchestrate_did_not_send_is_signaled() {
        let mut r = Run::new(GRACES);
        r.exit(LeaderExit::Signaled(11), 1.0, false);
        assert_eq!(
            r.life.finish(false),
            Some((
                LeaderExit::Signaled(11),
                Termination::Signaled { signal: 11 },
                Leak::None
            ))
        );
    }

    #[test]
    fn a_stop_sends_sigterm_and_an_exit_within_the_grace_is_terminated() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::IdleTimeout, 1.0, true);
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::IdleTimeout,
                kill_at: r.at(6.0)
            }
        );
        assert!(!r.life.counts_time());
        r.exit(LeaderExit::Signaled(libc::SIGTERM), 1.1, false);
        assert_eq!(r.actions, [Action::Terminate]);
        assert_eq!(
            r.life.finish(false),
            Some((
                LeaderExit::Signaled(libc::SIGTERM),
                Termination::Terminated {
                    reason: StopReason::IdleTimeout
                },
                Leak::None
            ))
        );
    }

    #[test]
    fn the_first_reason_wins() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::RuntimeTimeout, 1.0, true)
            .stop(StopReason::OutputCap, 1.5, true)
            .stop(StopReason::Cancelled, 2.0, true);
        assert_eq!(
            r.actions,
            [Action::Terminate, Action::Nothing, Action::Nothing]
        );
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::RuntimeTimeout,
                kill_at: r.at(6.0)
            }
        );
    }

    #[test]
    fn sigterm_ignored_until_the_grace_ends_is_an_escalated_kill() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::RuntimeTimeout, 1.0, true).deadline(true);
        assert_eq!(
            r.life.phase(),
            Phase::Killed {
                reason: Some(StopReason::RuntimeTimeout),
                kill: KillKind::Escalated,
                give_up_at: Some(r.at(9.0))
            }
        );
        assert!(!r.life.accepts_kill());
        r.exit(LeaderExit::Signaled(libc::SIGKILL), 6.01, false);
        assert_eq!(r.actions, [Action::Terminate, Action::Kill]);
        assert_eq!(
            r.life.finish(true),
            Some((
                LeaderExit::Signaled(libc::SIGKILL),
                Termination::Killed {
                    reason: StopReason::RuntimeTimeout,
                    kill: KillKind::Escalated
                },
                // Members of the group killed with the child did not outlive it.
                Leak::None
            ))
        );
    }

    #[test]
    fn a_zero_grace_kills_at_once() {
        let mut r = Run::new(Graces {
            kill: Duration::ZERO,
            ..GRACES
        });
        r.stop(StopReason::OutputCap, 1.0, true).exit(
            LeaderExit::Signaled(libc::SIGKILL),
            1.01,
            true,
        );
        assert_eq!(r.actions, [Action::Kill]);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Killed {
                reason: StopReason::OutputCap,
                kill: KillKind::Immediate
            }
        );
    }

    #[test]
    fn a_second_cancel_cuts_the_grace_short_and_keeps_the_first_reason() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::IdleTimeout, 1.0, true)
            .kill(1.5, true)
            .kill(1.6, true)
            .exit(LeaderExit::Signaled(libc::SIGKILL), 1.7, false);
        assert_eq!(
            r.actions,
            [Action::Terminate, Action::Kill, Action::Nothing]
        );
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Killed {
                reason: StopReason::IdleTimeout,
                kill: KillKind::Immediate
            }
        );
    }

    #[test]
    fn a_kill_without_a_stop_under_way_is_an_immediate_cancel() {
        let mut r = Run::new(GRACES);
        r.kill(1.0, true)
            .exit(LeaderExit::Signaled(libc::SIGKILL), 1.01, false);
        assert_eq!(r.actions, [Action::Kill]);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Killed {
                reason: StopReason::Cancelled,
                kill: KillKind::Immediate
            }
        );
    }

    #[test]
    fn after_the_final_event_the_child_may_exit_on_its_own() {
        let mut r = Run::new(GRACES);
        r.terminal(1.0);
        assert_eq!(r.life.phase(), Phase::ExitGrace { until: r.at(3.0) });
        assert!(r.life.counts_time());
        // Only the exit grace and the runtime limit apply now, not the idle limit.
        assert_eq!(r.life.next_due(), Some(r.at(3.0)));
        r.exit(LeaderExit::Exited(0), 1.5, false);
        assert_eq!(r.actions, []);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Exited { code: 0 }
        );
    }

    #[test]
    fn a_child_slow_to_exit_after_its_final_event_is_stopped_for_that_reason() {
        let mut r = Run::new(GRACES);
        r.terminal(1.0)
            .deadline(true)
            .exit(LeaderExit::Signaled(libc::SIGTERM), 3.1, false);
        assert_eq!(r.actions, [Action::Terminate]);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Terminated {
                reason: StopReason::AfterTerminalEvent
            }
        );
    }

    #[test]
    fn descendants_holding_the_pipes_are_drained_then_killed() {
        let mut r = Run::new(GRACES);
        r.terminal(1.0).exit(LeaderExit::Exited(0), 1.2, true);
        assert_eq!(r.life.phase(), Phase::Draining { until: r.at(1.7) });
        assert!(!r.life.counts_time());
        r.deadline(true);
        assert_eq!(
            r.life.phase(),
            Phase::Killed {
                reason: None,
                kill: KillKind::Leftovers,
                give_up_at: Some(r.at(4.7))
            }
        );
        assert_eq!(r.actions, [Action::Kill]);
        assert_eq!(
            r.life.finish(true),
            Some((
                LeaderExit::Exited(0),
                Termination::Exited { code: 0 },
                Leak::HeldPipes
            ))
        );
    }

    #[test]
    fn a_stop_after_the_child_exited_kills_the_leftovers_for_that_reason() {
        let mut r = Run::new(GRACES);
        r.exit(LeaderExit::Exited(0), 1.0, true)
            .stop(StopReason::OutputCap, 1.2, true);
        assert_eq!(r.actions, [Action::Kill]);
        assert_eq!(
            r.life.finish(false),
            Some((
                LeaderExit::Exited(0),
                Termination::Killed {
                    reason: StopReason::OutputCap,
                    kill: KillKind::Leftovers
                },
                Leak::HeldPipes
            ))
        );
    }

    #[test]
    fn descendants_that_ignore_sigterm_and_hold_the_pipes_after_the_child_are_a_leak() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::RuntimeTimeout, 1.0, true).exit(
            LeaderExit::Signaled(libc::SIGTERM),
            1.01,
            true,
        );
        // Still terminating: the grace is for the whole group.
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::RuntimeTimeout,
                kill_at: r.at(6.0)
            }
        );
        r.deadline(true);
        assert_eq!(r.actions, [Action::Terminate, Action::Kill]);
        assert_eq!(
            r.life.finish(false),
            Some((
                LeaderExit::Signaled(libc::SIGTERM),
                Termination::Terminated {
                    reason: StopReason::RuntimeTimeout
                },
                Leak::HeldPipes
            ))
        );
    }

    #[test]
    fn pipes_open_after_sigkill_are_abandoned_once() {
        let mut r = Run::new(GRACES);
        r.exit(LeaderExit::Exited(0), 1.0, true)
            .deadline(true)
            .deadline(true);
        assert_eq!(r.actions, [Action::Kill, Action::AbandonPipes]);
        assert_eq!(
            r.life.phase(),
            Phase::Killed {
                reason: None,
                kill: KillKind::Leftovers,
                give_up_at: None
            }
        );
        assert_eq!(r.life.deadline(), None, "nothing more to wait for");
        assert_eq!(
            r.life.finish(true).unwrap().2,
            Leak::Abandoned,
            "the worst leak is kept"
        );
    }

    #[test]
    fn the_give_up_deadline_with_the_pipes_closed_only_waits_for_the_exit() {
        let mut r = Run::new(GRACES);
        r.kill(1.0, false).deadline(false);
        assert_eq!(r.actions, [Action::Kill, Action::Nothing]);
        assert_eq!(r.life.deadline(), None);
        r.exit(LeaderExit::Signaled(libc::SIGKILL), 10.0, false);
        assert_eq!(r.life.finish(false).unwrap().2, Leak::None);
    }

    #[test]
    fn members_left_in_the_group_after_an_own_exit_stayed_in_it() {
        let mut r = Run::new(GRACES);
        r.exit(LeaderExit::Exited(0), 1.0, false);
        assert_eq!(
            r.life.finish(true),
            Some((
                LeaderExit::Exited(0),
                Termination::Exited { code: 0 },
                Leak::StayedInGroup
            ))
        );
    }

    fn progress(n: u64) -> StreamFacts {
        StreamFacts {
            recognized: true,
            progress: n,
            ..StreamFacts::default()
        }
    }

    #[test]
    fn only_progress_resets_the_idle_limit_once_the_stream_is_recognised() {
        // Chatter before recognition counts: the child is starting.
        let mut r = Run::new(GRACES);
        r.life.on_output(r.at(5.0));
        assert_eq!(r.life.next_due(), Some(r.at(15.0)));
        // Recognised at 6 s; later output that is not progress (stderr, noise lines)
        // does not count.
        r.facts(6.0, progress(0));
        r.life.on_output(r.at(12.0));
        r.facts(14.0, progress(0));
        assert_eq!(r.life.next_due(), Some(r.at(16.0)));
        r.facts(15.0, progress(1));
        assert_eq!(r.wake(true), 25.0);
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::IdleTimeout,
                kill_at: r.at(30.0)
            }
        );
    }

    #[test]
    fn a_tool_in_flight_trades_the_idle_limit_for_the_tool_limit() {
        let tool = |progress, in_flight, ended| StreamFacts {
            recognized: true,
            progress,
            tools_in_flight: in_flight,
            tools_ended: ended,
            ..StreamFacts::default()
        };
        // A silent tool from 1 s: not stopped at 11 s (idle), but at 31 s (tool).
        let mut r = Run::new(GRACES);
        r.facts(1.0, tool(1, 1, 0));
        assert_eq!(r.wake(true), 31.0);
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::ToolTimeout,
                kill_at: r.at(36.0)
            }
        );
        // Tools finishing restart it; with none left the idle limit is back.
        let mut r = Run::new(GRACES);
        r.facts(1.0, tool(1, 2, 0)).facts(25.0, tool(2, 1, 1));
        assert_eq!(r.life.next_due(), Some(r.at(55.0)));
        r.facts(40.0, tool(3, 0, 2));
        assert_eq!(r.life.next_due(), Some(r.at(50.0)));
        assert_eq!(r.wake(true), 50.0);
        assert!(matches!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::IdleTimeout,
                ..
            }
        ));
    }

    #[test]
    fn a_child_that_only_retries_is_stopped_after_the_connect_limit() {
        let noise = |progress, retries, since| StreamFacts {
            recognized: true,
            progress,
            retries,
            retries_since_progress: since,
            ..StreamFacts::default()
        };
        // Progress at 1 s, then a retry every 3 s: stopped 20 s after the first.
        let mut r = Run::new(GRACES);
        r.facts(1.0, noise(1, 0, 0));
        for (i, s) in [2.0, 5.0, 8.0].into_iter().enumerate() {
            r.facts(s, noise(1, i as u64 + 1, i as u32 + 1));
        }
        assert_eq!(r.wake(true), 11.0, "the idle limit comes first here");
        let mut r = Run::new(GRACES);
        r.facts(1.0, noise(1, 0, 0)).facts(2.0, noise(1, 1, 1));
        // Progress again clears the noise.
        r.facts(3.0, noise(2, 1, 0));
        assert_eq!(r.life.next_due(), Some(r.at(13.0)));

        // With a longer idle limit the connect limit stops it.
        let mut r = Run::with_patience(Patience {
            idle: Duration::from_secs(60),
            ..PATIENCE
        });
        r.facts(1.0, noise(1, 0, 0));
        r.facts(2.0, noise(1, 1, 1)).facts(10.0, noise(1, 2, 2));
        assert_eq!(r.wake(true), 22.0);
        assert!(matches!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::ProviderUnreachable,
                ..
            }
        ));
        // Too many retries in a row stop it at the last one.
        let mut r = Run::new(GRACES);
        r.facts(1.0, noise(1, 0, 0));
        for n in 1..=4 {
            r.facts(1.0 + f64::from(n) * 0.1, noise(1, u64::from(n), n));
        }
        assert_eq!(r.wake(true), 1.4);
    }

    #[test]
    fn the_runtime_limit_counts_through_the_exit_grace_and_comes_first() {
        let mut r = Run::new(GRACES);
        // Progress every 9 s keeps the idle limit away; the runtime limit ends it.
        for i in 1..12u32 {
            r.facts(f64::from(i) * 9.0, progress(u64::from(i)));
        }
        assert_eq!(r.wake(true), 100.0);
        assert!(matches!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::RuntimeTimeout,
                ..
            }
        ));
    }

    fn queued(queue_timeout: f64) -> Run {
        let t0 = Instant::now();
        Run {
            t0,
            life: Lifecycle::queued(GRACES, PATIENCE, t0, Duration::from_secs_f64(queue_timeout)),
            actions: Vec::new(),
        }
    }

    #[test]
    fn a_queued_job_counts_no_limit_until_it_starts_and_then_counts_them_from_its_start() {
        let mut r = queued(600.0);
        assert!(r.life.is_queued() && r.life.is_running() && r.life.counts_time());
        // Only the queue timeout is due while it waits, however long past the idle limit.
        assert_eq!(r.life.next_due(), Some(r.at(600.0)));
        r.life.started(r.at(500.0));
        assert!(!r.life.is_queued());
        assert_eq!(r.life.phase(), Phase::Running);
        // The idle limit (10 s) from the start, not from the submission.
        assert_eq!(r.wake(true), 510.0);
        assert!(matches!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::IdleTimeout,
                ..
            }
        ));
        // Started again: nothing changes.
        r.life.started(r.at(520.0));
        assert!(matches!(r.life.phase(), Phase::Terminating { .. }));
    }

    #[test]
    fn a_job_that_never_starts_is_stopped_at_the_queue_timeout() {
        let mut r = queued(60.0);
        assert_eq!(r.wake(true), 60.0);
        assert_eq!(
            r.life.phase(),
            Phase::Terminating {
                reason: StopReason::QueueTimeout,
                kill_at: r.at(65.0)
            }
        );
        r.exit(LeaderExit::Exited(1), 60.1, false);
        assert_eq!(r.actions, [Action::Terminate]);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Terminated {
                reason: StopReason::QueueTimeout
            }
        );
        // A job refused at once (its engine's client failed) is the child's own exit.
        let mut r = queued(60.0);
        r.exit(LeaderExit::Exited(1), 0.05, false);
        assert_eq!(
            r.life.finish(false).unwrap().1,
            Termination::Exited { code: 1 }
        );
    }

    #[test]
    fn nothing_is_finished_before_the_child_exits() {
        let mut r = Run::new(GRACES);
        r.stop(StopReason::Cancelled, 1.0, true);
        assert_eq!(r.life.finish(false), None);
    }
}
