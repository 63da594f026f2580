//! Cursor CLI (`cursor-agent`): `cursor-agent -p --output-format stream-json`, as Cursor
//! documents its headless mode's stream (`system` init, `user`, `assistant`, `tool_call`
//! started and completed, `result`).
//!
//! Facts the parser relies on: each `assistant` event holds the complete text of one
//! message segment (between tool calls), and the `result` line's `result` is all segments
//! run together, so the final answer is the last segment. With `--stream-partial-output`
//! only events with `timestamp_ms` and without `model_call_id` carry new text; those with
//! both are a flush before a tool call and those with neither the end-of-turn flush, and
//! both repeat text already streamed. A tool call's name is the single key inside
//! `tool_call` (`readToolCall`, …). Cursor cannot be installed offline, so it is covered by
//! fixtures from those shapes.

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::lenient::{Count, Flag, List, Object, Str};
use super::tools::Permissions;
use super::{
    is_empty_json_str, parse_json, short_text, text_event, BackendError, BackendSpec, Dialect,
    Invocation, InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::result::Usage;

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "cursor",
    aliases: &["cursor-agent"],
    program: "cursor-agent",
    install_hint: "install it with `curl https://cursor.com/install -fsS | bash`",
    auto: true,
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::<CursorDialect>::default(),
        talks: false,
        reports: super::Reports {
            cost: false,
            usage_while_running: false,
        },
    }),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    provider: Some("cursor"),
    // Not verified against the real CLI.
    home: None,
    // Cursor's own backend, by its docs (not verified: the CLI cannot be installed
    // offline).
    provider_hosts: |_| {
        vec![
            super::provider::ProviderHost::Host("*.cursor.sh"),
            super::provider::ProviderHost::Host("*.cursor.com"),
        ]
    },
};

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
    inv.arg("-p").arg("--output-format").arg("stream-json");
    if let Some(model) = input.model() {
        inv.arg("--model").arg(model);
    }
    let p = Permissions::of(input.agent);
    // Headless runs cannot answer the workspace trust prompt.
    inv.arg("--trust");
    if p.readonly {
        // Ask mode answers questions and changes nothing.
        inv.arg("--mode").arg("ask");
    } else {
        inv.arg("--force");
    }
    if !p.tools.is_empty() {
        inv.warnings.push(format!(
            "cursor has no per-tool allow-list: {} is the restriction",
            if p.readonly {
                "ask mode"
            } else {
                "nothing (--force)"
            }
        ));
    }
    // No system prompt flag: the agent's prompt goes first in the message. After `--`, so
    // that a task that starts with `-` is never an option (cursor-agent's parser is
    // commander's, as claude's; it cannot be installed offline, so this is unproven
    // against the real CLI).
    inv.arg("--").arg(input.task_with_instructions());
    Ok(inv)
}

/// Every field but the event's type is read leniently (see [`super::lenient`]): one of
/// another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    subtype: Str<'a>,
    #[serde(borrow, default)]
    session_id: Str<'a>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    /// Only whether they are there counts.
    #[serde(borrow, default)]
    timestamp_ms: Option<&'a RawValue>,
    #[serde(borrow, default)]
    model_call_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    call_id: Str<'a>,
    #[serde(borrow, default)]
    tool_call: Option<&'a RawValue>,
    #[serde(borrow, default)]
    is_error: Flag<'a>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    usage: Object<'a, CursorUsage<'a>>,
    // Some builds put the usage keys at the top level.
    #[serde(rename = "inputTokens", borrow, default)]
    input_tokens: Count<'a>,
    #[serde(rename = "outputTokens", borrow, default)]
    output_tokens: Count<'a>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CursorUsage<'a> {
    #[serde(borrow, default)]
    input_tokens: Count<'a>,
    #[serde(borrow, default)]
    output_tokens: Count<'a>,
    #[serde(borrow, default)]
    cache_read_tokens: Count<'a>,
    #[serde(borrow, default)]
    cache_write_tokens: Count<'a>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: List<Block<'a>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
}

#[derive(Debug, Default)]
pub(crate) struct CursorDialect {
    /// Text of the current segment is being streamed as deltas (the collector keeps it).
    streaming: bool,
    /// A segment was complete.
    segment_seen: bool,
    /// A segment's turn has not ended yet: the tool calls that follow it are its own.
    turn_open: bool,
}

/// A tool call's body, `{"args": {…}, "result": {…}}`; the result is skipped unbuilt.
#[derive(Deserialize)]
struct ToolBody<'a> {
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

impl CursorDialect {
    /// The streamed text of the segment is complete; its turn stays open for its tools.
    fn close_segment(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if std::mem::take(&mut self.streaming) {
            self.segment_seen = true;
            self.turn_open = true;
            emit(AgentEvent::StreamedMessageEnd);
        }
    }

    fn close_turn(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if std::mem::take(&mut self.turn_open) {
            emit(AgentEvent::TurnEnd);
        }
    }
}

/// The tool a `tool_call` names (the key ending in `ToolCall`, e.g. `readToolCall`) and
/// its arguments.
fn tool_of(raw: &RawValue) -> Option<(String, Value)> {
    let fields: std::collections::BTreeMap<Cow<'_, str>, &RawValue> =
        serde_json::from_str(raw.get()).ok()?;
    let (key, body) = fields
        .iter()
        .find(|(k, _)| k.ends_with("ToolCall"))
        .or_else(|| fields.iter().next())?;
    let name = key.strip_suffix("ToolCall").unwrap_or(key).to_string();
    let args = serde_json::from_str::<ToolBody<'_>>(body.get())
        .ok()
        .map_or(Value::Null, |b| display_args(b.args));
    Some((name, args))
}

impl Dialect for CursorDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        let subtype = ev.subtype.read("subtype", emit);
        match (ev.kind.as_ref(), subtype.as_deref()) {
            ("system", Some("init")) => {
                if let Some(id) = ev.session_id.read("session_id", emit) {
                    emit(AgentEvent::SessionId(id));
                }
            }
            ("assistant", _) => {
                let parts: Vec<&RawValue> = ev
                    .message
                    .and_then(|raw| serde_json::from_str::<Message<'_>>(raw.get()).ok())
                    .map(|m| {
                        m.content
                            .0
                            .into_iter()
                            .filter(|b| b.kind.is("text"))
                            .filter_map(|b| b.text)
                            .collect()
                    })
                    .unwrap_or_default();
                let says = parts.iter().any(|p| !is_empty_json_str(p));
                let text = |kind| {
                    if parts.is_empty() {
                        AgentEvent::AssistantMessage(Cow::Borrowed(""))
                    } else {
                        text_event(parts.clone(), "", kind)
                    }
                };
                match (ev.timestamp_ms.is_some(), ev.model_call_id.is_some()) {
                    (true, false) => {
                        if !self.streaming {
                            self.close_turn(emit);
                            emit(AgentEvent::MessageStart);
                        }
                        self.streaming |= says;
                        if !parts.is_empty() {
                            emit(text(TextKind::Delta));
                        }
                    }
                    // A flush of text already streamed: it closes the segment.
                    (true, true) => self.close_segment(emit),
                    (false, _) if self.streaming => self.close_segment(emit),
                    // Without partial output every assistant event is a whole segment.
                    (false, _) => {
                        self.close_turn(emit);
                        self.segment_seen = true;
                        self.turn_open = true;
                        emit(text(TextKind::Message));
                    }
                }
            }
            ("tool_call", Some("started")) => {
                self.close_segment(emit);
                if let Some((name, args)) = ev.tool_call.and_then(tool_of) {
                    emit(AgentEvent::ToolCall {
                        name: Cow::Owned(name),
                        args,
                    });
                }
                let id = ev.call_id.read("call_id", emit);
                emit(AgentEvent::ToolStart { id });
                // The segment that called the tool ends with it: the next is a new turn.
                self.close_turn(emit);
            }
            ("tool_call", Some("completed")) => {
                let id = ev.call_id.read("call_id", emit);
                emit(AgentEvent::ToolEnd { id })
            }
            ("thinking", _) => emit(AgentEvent::Working),
            // Seen in captures: the CLI losing its connection and trying again.
            ("connection" | "retry", subtype) => emit(AgentEvent::Retry(Cow::Owned(format!(
                "{} {}",
                ev.kind,
                subtype.unwrap_or_default()
            )))),
            ("result", _) => {
                self.close_segment(emit);
                self.close_turn(emit);
                let u = ev.usage.read_not_null("usage", emit).unwrap_or_default();
                let input = ev.input_tokens.read_nullable("inputTokens", emit);
                let output = ev.output_tokens.read_nullable("outputTokens", emit);
                let usage = Usage {
                    input: input
                        .or_else(|| u.input_tokens.read("usage.inputTokens", emit))
                        .unwrap_or(0),
                    output: output
                        .or_else(|| u.output_tokens.read("usage.outputTokens", emit))
                        .unwrap_or(0),
                    cache_read: u
                        .cache_read_tokens
                        .read("usage.cacheReadTokens", emit)
                        .unwrap_or(0),
                    cache_write: u
                        .cache_write_tokens
                        .read("usage.cacheWriteTokens", emit)
                        .unwrap_or(0),
                    cost: 0.0,
                    turns: 0,
                };
                emit(AgentEvent::Usage(usage));
                if ev.is_error.read("is_error", emit) {
                    let message = ev
                        .result
                        .map(short_text)
                        .unwrap_or(Cow::Borrowed("cursor reported an error result"));
                    emit(AgentEvent::ProviderError(message));
                } else if !self.segment_seen {
                    if let Some(r) = ev.result {
                        emit(text_event(vec![r], "", TextKind::Final));
                    }
                }
                emit(AgentEvent::Terminal);
            }
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::test_support::{agent, args};

    use pretty_assertions::assert_eq;

    #[test]
    fn read_only_agents_use_ask_mode() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], true, "");
        let inv = build(
            "cursor-agent".into(),
            &InvocationInput {
                agent: &a,
                task: "why",
                model: Some("gpt-5"),
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--model",
                "gpt-5",
                "--trust",
                "--mode",
                "ask",
                "--",
                "why"
            ]
        );
        assert_eq!(inv.warnings.len(), 1);
    }

    #[test]
    fn a_task_that_starts_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        for task in ["--version", "- find auth\n- check tests", "-"] {
            let inv = build(
                "cursor-agent".into(),
                &InvocationInput {
                    agent: &a,
                    task,
                    model: None,
                    run_dir: dir.path(),
                    resume: None,
                    max_cost: None,
                    outer_sandbox: false,
                    permissions: &crate::backends::permissions::PermissionPolicy::default(),
                    stdin_pipe: false,
                    output_schema: None,
                },
            )
            .unwrap();
            let got = args(&inv);
            assert_eq!(got[got.len() - 2..], ["--", task], "{got:?}");
        }
    }
}
