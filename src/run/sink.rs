//! The line sink the supervisor feeds the child's output to: each stdout line through the
//! child's dialect into the collector, where budgets are checked (a fan-out's total one
//! here, with every task's spend), and what the collector knows back to the supervisor
//! (progress, tools in flight, a budget reached), which decides when the child is idle or
//! stopped. Every event goes to the run's observers as it is read; streaming updates go
//! out, and the observers flush, after each chunk.
//! In a fan-out, the scheduler hears from here how the child's provider answers.

use std::sync::Arc;
use std::time::SystemTime;

use super::progress::Progress;
use super::schedule::{Report, Slot};
use super::total::TotalBudget;
use crate::backends::{Backend, Dialect};
use crate::collector::Collector;
use crate::observe::{Observers, RunEvent};
use crate::supervisor::{LineSink, StopReason, StreamFacts};

/// Feeds the child's lines through its dialect into the collector, and hands every event
/// to the run's observers.
pub(super) struct DialectSink<'o, 'x> {
    pub dialect: Box<dyn Dialect>,
    pub collector: Collector,
    pub progress: Option<Progress<'o, 'x>>,
    /// A line was a valid event of the dialect.
    pub recognized: bool,
    /// The budget the tasks share, this task's index in it and the attempt's number.
    pub total: Option<(Arc<TotalBudget>, usize, u32)>,
    /// In a fan-out, the child's place in its lane: it hears of rate limits and
    /// successful requests as they come.
    pub lane: Option<LaneSignals<'o>>,
    pub observers: &'o mut Observers,
    /// The dialect takes messages sent to the run while its child runs.
    pub listens: bool,
}

impl DialectSink<'_, '_> {
    /// Records a budget reached outside this run (see [`Collector::note_limit`]), and
    /// tells the observers when it is the first.
    pub(super) fn note_limit(&mut self, limit: crate::result::Limit) {
        let had = self.collector.limit().is_some();
        self.collector.note_limit(limit);
        self.limit_reached_unless(had);
    }

    fn limit_reached_unless(&mut self, had: bool) {
        if had || self.observers.is_empty() {
            return;
        }
        if let Some(limit) = self.collector.limit() {
            self.observers.emit(&RunEvent::LimitReached(limit));
        }
    }
}

/// Tells a fan-out's scheduler how the child's provider answers: its CLI retrying for a
/// rate limit or overload (with the delay it waits, where it says), a request that
/// produced output.
pub(super) struct LaneSignals<'s> {
    slot: &'s Slot,
    backend: Backend,
    retries: u64,
    output_tokens: u64,
}

impl<'s> LaneSignals<'s> {
    pub(super) fn new(slot: &'s Slot, backend: Backend) -> Self {
        LaneSignals {
            slot,
            backend,
            retries: 0,
            output_tokens: 0,
        }
    }

    fn follow(&mut self, c: &Collector) {
        if c.retries() > self.retries {
            self.retries = c.retries();
            if c.last_retry()
                .is_some_and(|words| super::retry::congestion(self.backend, words))
            {
                self.slot.report(Report::Throttled {
                    delay: c.retry_delay(),
                });
            }
        }
        let output = c.usage().output;
        if output > self.output_tokens {
            self.output_tokens = output;
            self.slot.report(Report::Success);
        }
    }
}

impl LineSink for DialectSink<'_, '_> {
    fn on_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let collector = &mut self.collector;
        let had_limit = collector.limit().is_some();
        let text = super::decode::decode_line(line);
        let mut goes_on = false;
        let ok = if self.observers.is_empty() {
            self.dialect
                .parse_line(&text, &mut |e| goes_on |= collector.apply(e))
        } else {
            // One clock read per line, however many events it holds.
            let (at, observers) = (SystemTime::now(), &mut *self.observers);
            self.dialect.parse_line(&text, &mut |e| {
                observers.emit_at(at, &RunEvent::Child(&e));
                goes_on |= collector.apply(e);
            })
        };
        if !ok {
            self.collector.note_skipped_line();
        }
        self.recognized |= ok;
        if let Some((total, task, attempt)) = &self.total {
            // Every task's spend counts at once; this task is stopped for the total where
            // a budget of its own would stop it (see `Collector::apply`).
            let reached = total.report(*task, *attempt, &self.collector.usage());
            if let Some(limit) = reached.filter(|_| goes_on && !self.collector.terminal_seen()) {
                self.collector.note_limit(limit);
            }
        }
        if let Some(lane) = &mut self.lane {
            lane.follow(&self.collector);
        }
        self.limit_reached_unless(had_limit);
    }

    fn listens(&self) -> bool {
        self.listens
    }

    fn check_mail(&mut self) {
        self.dialect.check_mail();
    }

    fn on_too_long(&mut self, _bytes: u64) {
        self.collector.note_skipped_line();
    }

    fn on_stderr_line(&mut self, line: &[u8]) {
        let collector = &mut self.collector;
        let had_limit = collector.limit().is_some();
        let text = String::from_utf8_lossy(line);
        let (at, observers) = (SystemTime::now(), &mut *self.observers);
        self.dialect.parse_stderr_line(&text, &mut |e| {
            observers.emit_at(at, &RunEvent::Child(&e));
            collector.apply(e);
        });
        if let Some(lane) = &mut self.lane {
            lane.follow(&self.collector);
        }
        self.limit_reached_unless(had_limit);
    }

    fn facts(&self) -> StreamFacts {
        let c = &self.collector;
        let terminal = c.terminal_seen();
        StreamFacts {
            recognized: self.recognized,
            progress: c.progress(),
            tools_in_flight: c.tools_in_flight(),
            tools_ended: c.tools_ended(),
            retries: c.retries(),
            retries_since_progress: c.retries_since_progress(),
            terminal,
            // A CLI that stopped itself at its budget is not stopped again.
            stop: (c.limit().is_some() && !terminal).then_some(StopReason::Budget),
        }
    }

    fn after_chunk(&mut self) {
        if let Some(p) = self.progress.as_mut() {
            p.maybe_send(&self.collector);
        }
        self.observers.flush();
    }

    fn cancel(&mut self) -> bool {
        self.dialect.cancel()
    }
}
