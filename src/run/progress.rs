//! The line sink that feeds the child's stdout through its dialect into the collector,
//! and the streaming updates (SPEC section 1) published from it.

use std::sync::Arc;

use super::total::TotalCost;
use crate::backends::Dialect;
use crate::collector::Collector;
use crate::result::{Details, DisplayItem, Mode, RunResult, TextContent};
use crate::sanitize::Sanitizer;
use crate::supervisor::{LineSink, StopReason, StreamFacts};

/// Feeds the child's lines through its dialect into the collector.
pub(super) struct DialectSink<'o, 'x> {
    pub dialect: Box<dyn Dialect>,
    pub collector: Collector,
    pub progress: Option<Progress<'o, 'x>>,
    /// A line was a valid event of the dialect.
    pub recognized: bool,
    /// The fan-out's total cost budget, and this task's index in it.
    pub total: Option<(Arc<TotalCost>, usize)>,
}

/// Receives streaming updates (SPEC section 1) while the child runs.
pub(crate) type Observer<'o> = Box<dyn FnMut(&RunResult) + Send + 'o>;

/// Streaming updates go out at most this often.
pub(super) const STREAMING_UPDATE_INTERVAL: std::time::Duration =
    std::time::Duration::from_millis(100);

pub(super) struct Progress<'o, 'x> {
    observer: &'o mut Observer<'x>,
    run_id: String,
    last_revision: u64,
    last_sent: Option<std::time::Instant>,
}

impl<'o, 'x> Progress<'o, 'x> {
    pub(super) fn new(observer: &'o mut Observer<'x>, run_id: &str) -> Self {
        Progress {
            observer,
            run_id: run_id.to_string(),
            last_revision: 0,
            last_sent: None,
        }
    }

    fn maybe_send(&mut self, c: &Collector) {
        if c.revision() == self.last_revision {
            return;
        }
        let now = std::time::Instant::now();
        if self
            .last_sent
            .is_some_and(|t| now.duration_since(t) < STREAMING_UPDATE_INTERVAL)
        {
            return;
        }
        self.last_revision = c.revision();
        self.last_sent = Some(now);
        (self.observer)(&streaming_update(&self.run_id, c));
    }
}

/// A streaming update: what the child has said so far, sanitized like the final result.
fn streaming_update(run_id: &str, c: &Collector) -> RunResult {
    let sanitizer = Sanitizer::global();
    let mut items = c.display_items();
    let usage = c.usage();
    sanitize_display_items(sanitizer, &mut items);
    RunResult {
        content: vec![TextContent::text(
            sanitizer.sanitize(c.latest_text()).into_owned(),
        )],
        details: Details {
            mode: Mode::Single,
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: Some(crate::result::Streaming {
                display_items: items,
                usage,
                turn_count: usage.turns,
            }),
            background: None,
        },
    }
}

pub(super) fn sanitize_display_items(sanitizer: &Sanitizer, items: &mut [DisplayItem]) {
    for item in items {
        match item {
            DisplayItem::Text { text } => {
                if let std::borrow::Cow::Owned(s) = sanitizer.sanitize(text) {
                    *text = s;
                }
            }
            DisplayItem::ToolCall { args, .. } => sanitizer.sanitize_json(args),
        }
    }
}

impl LineSink for DialectSink<'_, '_> {
    fn on_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let collector = &mut self.collector;
        let text = super::decode::decode_line(line);
        let mut goes_on = false;
        let ok = self
            .dialect
            .parse_line(&text, &mut |e| goes_on |= collector.apply(e));
        if !ok {
            self.collector.note_skipped_line();
        }
        self.recognized |= ok;
        if let Some((total, task)) = &self.total {
            // Every task's spend counts at once; this task is stopped for the total where
            // a budget of its own would stop it (see `Collector::apply`).
            let reached = total.report(*task, self.collector.usage().cost);
            if let Some(limit) = reached.filter(|_| goes_on && !self.collector.terminal_seen()) {
                self.collector.note_limit(limit);
            }
        }
    }

    fn on_too_long(&mut self, _bytes: u64) {
        self.collector.note_skipped_line();
    }

    fn on_stderr_line(&mut self, line: &[u8]) {
        let collector = &mut self.collector;
        let text = String::from_utf8_lossy(line);
        self.dialect.parse_stderr_line(&text, &mut |e| {
            collector.apply(e);
        });
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
    }
}
