//! One run's `invoke_agent` span and the `execute_tool` spans of its child's tool calls.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::time::SystemTime;

use super::context::SpanContext;
use super::export::Exporter;
use super::span::{Kind, SpanData, Value};
use crate::collector::cut_utf8;
use crate::events::AgentEvent;
use crate::observe::{AttemptKind, RunEvent, RunObserver, RunStart};
use crate::result::RunOutput;
use crate::result::{Limit, Usage};
use crate::sanitize::Sanitizer;

/// A text attribute (an error, a tool's name or id) at most, after sanitizing.
const MAX_ATTRIBUTE_BYTES: usize = 1024;
/// The task or the answer, when content is captured, at most.
const MAX_CONTENT_BYTES: usize = 16 * 1024;
/// Tool calls waiting to start, or running, kept at most: a child that starts tools it
/// never ends cannot grow them without bound.
const MAX_OPEN_TOOLS: usize = 256;

/// An attempt's span while its child runs.
struct OpenAttempt {
    context: SpanContext,
    start: SystemTime,
    kind: AttemptKind,
    model: Option<String>,
}

/// The tracer of one run.
pub(super) struct RunTrace {
    /// Where spans go (and whether content is captured); `None` hands the context on and
    /// records nothing.
    export: Option<(&'static Exporter, bool)>,
    /// This run's span; its id is the parent of every attempt's child.
    context: SpanContext,
    parent: Option<SpanContext>,
    /// Recorded only when exported and sampled.
    recording: bool,
    start: SystemTime,
    attributes: Vec<(&'static str, Value)>,
    /// The last attempt's number, and its span while it runs: the parent of its child's
    /// spans and of its tool calls.
    attempt: u32,
    open_attempt: Option<OpenAttempt>,
    session_id: Option<String>,
    limit: Option<Limit>,
    /// Tool calls seen that have not started yet, oldest first: name and when.
    called: VecDeque<(String, SystemTime)>,
    /// Tools running: id, name (if its call came first), since when.
    running: VecDeque<(Option<String>, Option<String>, SystemTime)>,
    /// The task, sanitized, when content is captured.
    task: Option<String>,
}

impl RunTrace {
    pub(super) fn start(
        export: Option<(&'static Exporter, bool)>,
        parent: Option<SpanContext>,
        start: &RunStart<'_>,
    ) -> RunTrace {
        let at = SystemTime::now();
        let (context, recording) = match (&export, &parent) {
            (None, Some(given)) => (given.clone(), false),
            (_, Some(p)) => (p.child(), p.sampled),
            (_, None) => (SpanContext::root(), true),
        };
        let recording = recording && export.is_some();
        let mut attributes = Vec::new();
        let mut task = None;
        if recording {
            attributes = vec![
                ("gen_ai.operation.name", Value::from("invoke_agent")),
                (
                    "gen_ai.provider.name",
                    super::provider(start.backend, start.model).into(),
                ),
                ("gen_ai.agent.name", text(start.agent).into()),
                ("gen_ai.agent.id", start.run_id.into()),
                ("orchestrate.backend", start.backend.into()),
                ("orchestrate.depth", u64::from(start.depth).into()),
            ];
            if let Some(model) = start.model {
                attributes.push(("gen_ai.request.model", text(model).into()));
            }
            if let Some(parent) = start.parent_run_id {
                attributes.push(("orchestrate.parent_run_id", parent.into()));
            }
            if let Some(group) = start.group {
                attributes.push(("orchestrate.workflow.id", group.id.as_str().into()));
                attributes.push(("orchestrate.workflow.task", (group.index as u64).into()));
            }
            if export.is_some_and(|(_, capture)| capture) {
                task = Some(content(start.task));
            }
        }
        RunTrace {
            export,
            context,
            parent,
            recording,
            start: at,
            attributes,
            attempt: 0,
            open_attempt: None,
            session_id: None,
            limit: None,
            called: VecDeque::new(),
            running: VecDeque::new(),
            task,
        }
    }

    fn push(&self, span: SpanData) {
        if let Some((exporter, _)) = self.export {
            exporter.push(span);
        }
    }

    fn on_child(&mut self, at: SystemTime, event: &AgentEvent<'_>) {
        match event {
            AgentEvent::ToolCall { name, .. } => {
                if self.called.len() == MAX_OPEN_TOOLS {
                    self.called.pop_front();
                }
                self.called.push_back((text(name), at));
            }
            AgentEvent::ToolStart { id } => {
                if self.running.len() == MAX_OPEN_TOOLS {
                    self.running.pop_front();
                }
                // Its call came first (most CLIs), or comes with its end (codex's edits).
                let (name, since) = match self.called.pop_front() {
                    Some((name, called_at)) => (Some(name), called_at),
                    None => (None, at),
                };
                self.running
                    .push_back((id.as_deref().map(text), name, since));
            }
            AgentEvent::ToolEnd { id } => {
                let found = match id {
                    Some(id) => {
                        let id = text(id);
                        self.running
                            .iter()
                            .position(|(have, ..)| have.as_deref() == Some(id.as_str()))
                    }
                    None => (!self.running.is_empty()).then_some(0),
                };
                let Some(i) = found else { return };
                let Some((id, name, since)) = self.running.remove(i) else {
                    return;
                };
                let name = name
                    .or_else(|| self.called.pop_back().map(|(n, _)| n))
                    .unwrap_or_else(|| "tool".to_string());
                self.tool_span(name, id, since, at, false);
            }
            AgentEvent::SessionId(id) => self.session_id = Some(text(id)),
            _ => {}
        }
    }

    /// Tool calls still open when an attempt ends: a call that never started (a CLI that
    /// reports calls only) is a span of its own instant, a tool still running ends now.
    fn close_tools(&mut self, at: SystemTime) {
        for (name, called_at) in std::mem::take(&mut self.called) {
            self.tool_span(name, None, called_at, called_at, false);
        }
        for (id, name, since) in std::mem::take(&mut self.running) {
            let name = name.unwrap_or_else(|| "tool".to_string());
            self.tool_span(name, id, since, at, true);
        }
    }

    fn tool_span(
        &self,
        name: String,
        id: Option<String>,
        start: SystemTime,
        end: SystemTime,
        unfinished: bool,
    ) {
        let mut attributes = vec![
            ("gen_ai.operation.name", Value::from("execute_tool")),
            ("gen_ai.tool.name", name.clone().into()),
            ("orchestrate.attempt", u64::from(self.attempt).into()),
        ];
        if let Some(id) = id {
            attributes.push(("gen_ai.tool.call.id", id.into()));
        }
        let error = unfinished.then(|| {
            attributes.push(("error.type", "unfinished".into()));
            "the attempt ended before the tool did".to_string()
        });
        let parent = self
            .open_attempt
            .as_ref()
            .map_or(&self.context, |a| &a.context);
        self.push(SpanData {
            context: parent.child(),
            parent: Some(parent.span_id),
            parent_is_remote: false,
            name: format!("execute_tool {name}"),
            kind: Kind::Internal,
            start,
            end,
            attributes,
            error,
        });
    }

    /// The attempt's span: why it ran, its model, how it ended. Its usage stays on the
    /// run's span, so that a backend adding up `invoke_agent` spans counts it once.
    fn end_attempt(&mut self, at: SystemTime, output: &RunOutput) {
        self.close_tools(at);
        let Some(attempt) = self.open_attempt.take() else {
            return;
        };
        let mut attributes = vec![
            ("orchestrate.attempt", u64::from(self.attempt).into()),
            ("orchestrate.attempt.kind", attempt.kind.as_str().into()),
        ];
        if let Some(model) = attempt.model {
            attributes.push(("gen_ai.request.model", model.into()));
        }
        let error = error_of(output, &mut attributes);
        self.push(SpanData {
            context: attempt.context,
            parent: Some(self.context.span_id),
            parent_is_remote: false,
            name: format!("attempt {}", attempt.kind.as_str()),
            kind: Kind::Internal,
            start: attempt.start,
            end: at,
            attributes,
            error,
        });
    }

    fn end(&mut self, at: SystemTime, output: &RunOutput) {
        let mut attributes = std::mem::take(&mut self.attributes);
        let result = output.result.details.results.first();
        if let Some(r) = result {
            if let Some(model) = &r.model {
                attributes.push(("gen_ai.response.model", text(model).into()));
            }
            usage_attributes(&r.usage, &mut attributes);
            if let Some(session) = r
                .child_session_id
                .as_deref()
                .map(text)
                .or(self.session_id.take())
            {
                attributes.push(("gen_ai.conversation.id", session.into()));
            }
            if let Some(limit) = r.limit.or(self.limit) {
                attributes.push(("orchestrate.limit.kind", limit_kind(&limit).into()));
            }
        }
        if self.attempt > 0 {
            attributes.push(("orchestrate.attempt.count", u64::from(self.attempt).into()));
        }
        if let Some(task) = self.task.take() {
            attributes.push(("gen_ai.input.messages", messages("user", &task).into()));
            if let Some(answer) = output.result.content.first().map(|c| content(&c.text)) {
                attributes.push((
                    "gen_ai.output.messages",
                    messages("assistant", &answer).into(),
                ));
            }
        }
        let error = error_of(output, &mut attributes);
        let name = match attributes.iter().find(|(k, _)| *k == "gen_ai.agent.name") {
            Some((_, Value::Str(agent))) => format!("invoke_agent {agent}"),
            _ => "invoke_agent".to_string(),
        };
        self.push(SpanData {
            context: self.context.clone(),
            parent: self.parent.as_ref().map(|p| p.span_id),
            parent_is_remote: self.parent.is_some(),
            name,
            kind: Kind::Client,
            start: self.start,
            end: at,
            attributes,
            error,
        });
    }
}

impl RunObserver for RunTrace {
    fn on_event(&mut self, at: SystemTime, event: &RunEvent<'_>) {
        if !self.recording {
            return;
        }
        match event {
            RunEvent::Child(e) => self.on_child(at, e),
            RunEvent::Attempt { n, model, kind } => {
                self.attempt = *n;
                self.open_attempt = Some(OpenAttempt {
                    context: self.context.child(),
                    start: at,
                    kind: *kind,
                    model: model.map(text),
                });
            }
            RunEvent::LimitReached(limit) => self.limit = Some(*limit),
            RunEvent::AttemptEnded { output, .. } => self.end_attempt(at, output),
            RunEvent::Ended { output } => {
                self.end_attempt(at, output);
                self.end(at, output);
            }
            RunEvent::Stopped(_) | RunEvent::Retrying { .. } | RunEvent::FallingBack { .. } => {}
        }
    }

    fn child_env(&mut self, _attempt: u32, env: &mut Vec<(OsString, OsString)>) {
        // The attempt's span when one is recorded, else the run's (the given context).
        let context = self
            .open_attempt
            .as_ref()
            .map_or(&self.context, |a| &a.context);
        env.push(("TRACEPARENT".into(), context.traceparent().into()));
        if context.trace_state.is_empty() {
            // An inherited TRACESTATE belongs to the inherited TRACEPARENT, replaced here.
            if std::env::var_os("TRACESTATE").is_some() {
                env.push(("TRACESTATE".into(), OsString::new()));
            }
        } else {
            env.push(("TRACESTATE".into(), context.trace_state.clone().into()));
        }
    }
}

/// The usage attributes: tokens as the conventions count them (input includes the
/// cached), and the cost, which they do not define.
pub(super) fn usage_attributes(usage: &Usage, attributes: &mut Vec<(&'static str, Value)>) {
    attributes.extend([
        (
            "gen_ai.usage.input_tokens",
            (usage.input + usage.cache_read + usage.cache_write).into(),
        ),
        ("gen_ai.usage.output_tokens", usage.output.into()),
        (
            "gen_ai.usage.cache_read.input_tokens",
            usage.cache_read.into(),
        ),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            usage.cache_write.into(),
        ),
        ("orchestrate.usage.cost_usd", usage.cost.into()),
        ("orchestrate.usage.turns", usage.turns.into()),
    ]);
}

/// `error.type` (the result's error code) and the span's error description, for a result
/// that failed.
pub(super) fn error_of(
    output: &RunOutput,
    attributes: &mut Vec<(&'static str, Value)>,
) -> Option<String> {
    if output.exit_status == 0 {
        return None;
    }
    let error = output.result.details.error.as_ref();
    let kind = error.map_or("_OTHER", |e| e.code.as_str());
    attributes.push(("error.type", kind.into()));
    Some(error.map_or_else(
        || format!("exit status {}", output.exit_status),
        |e| text(&e.message),
    ))
}

fn limit_kind(limit: &Limit) -> &'static str {
    match limit {
        Limit::Turns { .. } => "turns",
        Limit::Tokens { .. } => "tokens",
        Limit::Cost { .. } => "cost",
        Limit::TreeCost { .. } => "treeCost",
        Limit::TreeTokens { .. } => "treeTokens",
    }
}

/// A short text as it may leave the process: sanitized and cut.
fn text(s: &str) -> String {
    cut(Sanitizer::global().sanitize(s), MAX_ATTRIBUTE_BYTES)
}

/// The task or the answer: sanitized and cut.
fn content(s: &str) -> String {
    cut(Sanitizer::global().sanitize(s), MAX_CONTENT_BYTES)
}

fn cut(s: Cow<'_, str>, max: usize) -> String {
    if s.len() <= max {
        s.into_owned()
    } else {
        format!("{}…", cut_utf8(&s, max))
    }
}

/// One message in the conventions' JSON shape for `gen_ai.{input,output}.messages`.
fn messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}
