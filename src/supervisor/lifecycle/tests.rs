use super::*;
use pretty_assertions::assert_eq;

const GRACES: Graces = Graces {
    cancel: Duration::ZERO,
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
        let a = self.life.terminal_event(self.at(s));
        if a != Action::Nothing {
            self.actions.push(a);
        }
        self
    }
}

/// A child that talks a protocol with a cancel: 5 s for it, as for SIGTERM.
const CANCELLING: Graces = Graces {
    cancel: Duration::from_secs(5),
    ..GRACES
};

#[test]
fn a_stop_of_a_talking_child_starts_with_its_cancel_and_its_end_of_turn_brings_sigterm() {
    let mut r = Run::new(CANCELLING);
    r.stop(StopReason::RuntimeTimeout, 1.0, true);
    assert_eq!(
        r.life.phase(),
        Phase::Cancelling {
            reason: StopReason::RuntimeTimeout,
            until: r.at(6.0)
        }
    );
    assert!(!r.life.counts_time() && !r.life.is_running());
    // A second reason, a budget reached meanwhile, changes nothing.
    r.stop(StopReason::Budget, 1.5, true);
    // The child says its turn ended (ACP: the prompt's `cancelled` stop reason).
    r.terminal(1.6);
    assert_eq!(
        r.actions,
        [Action::Cancel, Action::Nothing, Action::Terminate]
    );
    assert_eq!(
        r.life.phase(),
        Phase::Terminating {
            reason: StopReason::RuntimeTimeout,
            kill_at: r.at(6.6)
        }
    );
    r.exit(LeaderExit::Signaled(libc::SIGTERM), 1.7, false);
    assert_eq!(
        r.life.finish(false),
        Some((
            LeaderExit::Signaled(libc::SIGTERM),
            Termination::Terminated {
                reason: StopReason::RuntimeTimeout
            },
            Leak::None
        ))
    );
}

#[test]
fn a_cancel_ignored_for_the_grace_brings_sigterm_then_sigkill() {
    let mut r = Run::new(CANCELLING);
    r.stop(StopReason::IdleTimeout, 1.0, true);
    assert_eq!(r.wake(true), 6.0);
    assert_eq!(
        r.life.phase(),
        Phase::Terminating {
            reason: StopReason::IdleTimeout,
            kill_at: r.at(11.0)
        }
    );
    assert_eq!(r.wake(true), 11.0);
    assert_eq!(r.actions, [Action::Cancel, Action::Terminate, Action::Kill]);
    r.exit(LeaderExit::Signaled(libc::SIGKILL), 11.01, false);
    assert_eq!(
        r.life.finish(false).map(|(_, t, _)| t),
        Some(Termination::Killed {
            reason: StopReason::IdleTimeout,
            kill: KillKind::Escalated
        })
    );
}

#[test]
fn a_child_that_exits_after_its_cancel_was_stopped_by_orchestrate() {
    let mut r = Run::new(CANCELLING);
    r.stop(StopReason::Cancelled, 1.0, true);
    r.exit(LeaderExit::Exited(0), 1.5, true);
    // Its pipes still open: drained as after any exit, then what holds them is killed.
    assert_eq!(r.life.phase(), Phase::Draining { until: r.at(2.0) });
    r.terminal(1.6);
    assert_eq!(r.actions, [Action::Cancel], "nothing to SIGTERM");
    assert_eq!(
        r.life.finish(false),
        Some((
            LeaderExit::Exited(0),
            Termination::Terminated {
                reason: StopReason::Cancelled
            },
            Leak::None
        ))
    );
}

#[test]
fn nothing_to_cancel_means_sigterm_at_once_and_a_second_cancel_kills() {
    let mut r = Run::new(CANCELLING);
    r.stop(StopReason::OutputCap, 1.0, true);
    let a = r.life.cancel_unavailable(r.at(1.0));
    assert_eq!(a, Action::Terminate);
    let mut r2 = Run::new(CANCELLING);
    r2.stop(StopReason::Cancelled, 1.0, true).kill(1.5, true);
    assert_eq!(r2.actions, [Action::Cancel, Action::Kill]);
    assert_eq!(
        r2.life.phase(),
        Phase::Killed {
            reason: Some(StopReason::Cancelled),
            kill: KillKind::Immediate,
            give_up_at: Some(r2.at(4.5))
        }
    );
}

#[test]
fn a_talking_child_past_its_final_event_or_with_no_grace_is_not_cancelled() {
    let mut r = Run::new(CANCELLING);
    r.terminal(1.0);
    assert_eq!(r.wake(true), 3.0);
    assert_eq!(r.actions, [Action::Terminate]);
    let mut r = Run::new(Graces {
        kill: Duration::ZERO,
        ..CANCELLING
    });
    r.stop(StopReason::RuntimeTimeout, 1.0, true);
    assert_eq!(r.actions, [Action::Kill]);
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
    r.stop(StopReason::OutputCap, 1.0, true)
        .exit(LeaderExit::Signaled(libc::SIGKILL), 1.01, true);
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
