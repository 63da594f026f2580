//! Streaming updates while a child runs (`-o stream-json`, MCP progress): what an observer of one run
//! hears, throttled, sanitized, and what a fan-out's observer hears of each task.

use crate::collector::Collector;
use crate::result::{DetailLevel, Details, DisplayItem, Mode, RunResult, TextContent};
use crate::sanitize::Sanitizer;

/// Receives streaming updates while the child runs. At `detail` full they
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

    pub(super) fn maybe_send(&mut self, c: &Collector) {
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
            scheduler: Default::default(),
            tree_usage: None,
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
