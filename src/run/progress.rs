//! The line sink that feeds the child's stdout through its dialect into the collector,
//! and the streaming updates (SPEC section 1) published from it.

use std::sync::Arc;
use std::time::SystemTime;

use super::total::TotalCost;
use crate::backends::Dialect;
use crate::collector::Collector;
use crate::observe::{Observers, RunEvent};
use crate::result::{DetailLevel, Details, DisplayItem, Mode, RunResult, TextContent};
use crate::sanitize::Sanitizer;
use crate::supervisor::{LineSink, StopReason, StreamFacts};

/// Feeds the child's lines through its dialect into the collector, and hands every event
/// to the run's observers.
pub(super) struct DialectSink<'o, 'x> {
    pub dialect: Box<dyn Dialect>,
    pub collector: Collector,
    pub progress: Option<Progress<'o, 'x>>,
    /// A line was a valid event of the dialect.
    pub recognized: bool,
    /// The fan-out's total cost budget, and this task's index in it.
    pub total: Option<(Arc<TotalCost>, usize)>,
    pub observers: &'o mut Observers,
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

/// Receives streaming updates (SPEC section 1) while the child runs. At `detail` full they
/// carry the display items too.
pub(crate) struct Observer<'o> {
    pub detail: DetailLevel,
    pub on_update: Box<dyn FnMut(&RunResult) + Send + 'o>,
}

/// Hears of a fan-out's progress: every task's state, whenever one changes.
pub(crate) type FanoutObserver = std::sync::Arc<dyn Fn(&FanoutStatus) + Send + Sync>;

/// Where each task of a fan-out (parallel or chain) stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FanoutStatus {
    pub mode: Mode,
    pub tasks: Vec<TaskStatus>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TaskStatus {
    pub agent: String,
    pub state: TaskState,
    pub turns: u64,
    pub tokens: u64,
    pub current_tool: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskState {
    Waiting,
    Running,
    Done { ok: bool },
}

impl FanoutStatus {
    pub(crate) fn new(mode: Mode, reqs: &[super::RunRequest]) -> Self {
        FanoutStatus {
            mode,
            tasks: reqs
                .iter()
                .map(|r| TaskStatus {
                    agent: r.agent.clone(),
                    state: TaskState::Waiting,
                    turns: 0,
                    tokens: 0,
                    current_tool: None,
                })
                .collect(),
        }
    }

    /// One line: how many tasks are done, what the running ones do, tokens in all.
    pub(crate) fn message(&self) -> String {
        let n = self.tasks.len();
        let done = self
            .tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Done { .. }))
            .count();
        let failed = self
            .tasks
            .iter()
            .filter(|t| t.state == TaskState::Done { ok: false })
            .count();
        let tokens: u64 = self.tasks.iter().map(|t| t.tokens).sum();
        let running: Vec<String> = self
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state == TaskState::Running)
            .map(|(i, t)| {
                let tool = t
                    .current_tool
                    .as_ref()
                    .map_or(String::new(), |name| format!(", running {name}"));
                format!("{}. {} turn {}{tool}", i + 1, t.agent, t.turns)
            })
            .collect();
        let what = match self.mode {
            Mode::Chain => "steps",
            _ => "tasks",
        };
        let failed = if failed > 0 {
            format!(" ({failed} failed)")
        } else {
            String::new()
        };
        let running = if running.is_empty() {
            String::new()
        } else {
            format!("; {}", running.join("; "))
        };
        format!("{done}/{n} {what} done{failed}{running}; {tokens} tokens")
    }
}

impl TaskStatus {
    /// Takes in a streaming update of this task's run.
    pub(crate) fn follow(&mut self, update: &RunResult) {
        self.state = TaskState::Running;
        if let Some(s) = &update.details.streaming {
            self.turns = s.turn_count;
            self.tokens = s.usage.tokens();
            self.current_tool.clone_from(&s.current_tool);
        }
    }
}

impl<'o> Observer<'o> {
    pub(crate) fn new(detail: DetailLevel, on_update: impl FnMut(&RunResult) + Send + 'o) -> Self {
        Observer {
            detail,
            on_update: Box::new(on_update),
        }
    }
}

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
        let update = streaming_update(&self.run_id, c, self.observer.detail);
        (self.observer.on_update)(&update);
    }
}

/// A streaming update: what the child has said so far, sanitized like the final result.
/// Of a message still being written, only its finished lines: see [`settled_text`].
fn streaming_update(run_id: &str, c: &Collector, detail: DetailLevel) -> RunResult {
    let sanitizer = Sanitizer::global();
    let mut items = match detail {
        DetailLevel::Full => c.display_items(),
        DetailLevel::Lean => Vec::new(),
    };
    let usage = c.usage();
    sanitize_display_items(sanitizer, &mut items);
    let text = if c.text_is_streaming() {
        settled_text(c.latest_text())
    } else {
        c.latest_text()
    };
    RunResult {
        content: vec![TextContent::text(sanitizer.sanitize(text).into_owned())],
        details: Details {
            mode: Mode::Single,
            run_id: Some(run_id.to_string()),
            results: Vec::new(),
            error: None,
            streaming: Some(crate::result::Streaming {
                display_items: items,
                usage,
                turn_count: usage.turns,
                tool_calls: c.tool_calls(),
                current_tool: c.current_tool().map(str::to_string),
            }),
            background: None,
        },
    }
}

/// The part of a message still being written that can be shown: up to its last line
/// break. The sanitizer recognises a secret only whole (a `ghp_` token needs its 36
/// characters, a URL password its `@host`), so the line being written, where one may be
/// half-way, waits until it ends. A secret that spans lines is a PEM key, whose body the
/// sanitizer masks line by line as far as it goes.
fn settled_text(text: &str) -> &str {
    text.rfind('\n').map_or("", |i| &text[..=i])
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
        if let Some((total, task)) = &self.total {
            // Every task's spend counts at once; this task is stopped for the total where
            // a budget of its own would stop it (see `Collector::apply`).
            let reached = total.report(*task, self.collector.usage().cost);
            if let Some(limit) = reached.filter(|_| goes_on && !self.collector.terminal_seen()) {
                self.collector.note_limit(limit);
            }
        }
        self.limit_reached_unless(had_limit);
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
}
