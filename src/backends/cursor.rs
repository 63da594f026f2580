//! Cursor CLI (`cursor-agent`): `cursor-agent -p --output-format stream-json`, exactly as
//! seed 000 describes it.
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

use super::tools::Permissions;
use super::{
    parse_json, BackendError, BackendSpec, Dialect, DialectKind, Invocation, InvocationInput,
};
use crate::events::AgentEvent;
use crate::result::Usage;

pub(crate) const SPEC: BackendSpec = BackendSpec {
    name: "cursor",
    aliases: &["cursor-agent"],
    program: "cursor-agent",
    install_hint: "install it with `curl https://cursor.com/install -fsS | bash`",
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    new_dialect: Some(|| Box::<CursorDialect>::default()),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
};

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, DialectKind::Cursor);
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
    if input.agent.max_turns.is_some() {
        inv.warnings
            .push("cursor has no turn limit: max_turns is not enforced".to_string());
    }
    // No system prompt flag: the agent's prompt goes first in the message.
    inv.arg(input.task_with_instructions());
    Ok(inv)
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(default)]
    timestamp_ms: Option<Value>,
    #[serde(default)]
    model_call_id: Option<Value>,
    #[serde(default)]
    tool_call: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    is_error: bool,
    #[serde(borrow, default)]
    result: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<CursorUsage>,
    // Some builds put the usage keys at the top level.
    #[serde(rename = "inputTokens", default)]
    input_tokens: Option<u64>,
    #[serde(rename = "outputTokens", default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct CursorUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    cache_write_tokens: u64,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Vec<Block<'a>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Cow<'a, str>,
}

#[derive(Debug, Default)]
pub(crate) struct CursorDialect {
    /// Text streamed as deltas in the current segment.
    streamed: String,
    /// Text of the last complete segment.
    last_segment: Option<String>,
}

impl CursorDialect {
    fn close_segment(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if !self.streamed.is_empty() {
            let text = std::mem::take(&mut self.streamed);
            self.last_segment = Some(text.clone());
            emit(AgentEvent::AssistantMessage(Cow::Owned(text)));
            emit(AgentEvent::TurnEnd);
        }
    }
}

impl Dialect for CursorDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        match (ev.kind.as_ref(), ev.subtype.as_deref()) {
            ("system", Some("init")) => {
                if let Some(id) = ev.session_id {
                    emit(AgentEvent::SessionId(id));
                }
            }
            ("assistant", _) => {
                let text: String = ev
                    .message
                    .and_then(|raw| serde_json::from_str::<Message<'_>>(raw.get()).ok())
                    .map(|m| {
                        m.content
                            .iter()
                            .filter(|b| b.kind == "text")
                            .map(|b| b.text.as_ref())
                            .collect()
                    })
                    .unwrap_or_default();
                match (ev.timestamp_ms.is_some(), ev.model_call_id.is_some()) {
                    (true, false) => {
                        if self.streamed.is_empty() {
                            emit(AgentEvent::MessageStart);
                        }
                        self.streamed.push_str(&text);
                        emit(AgentEvent::TextDelta(Cow::Owned(text)));
                    }
                    // A flush of text already streamed: it closes the segment.
                    (true, true) => self.close_segment(emit),
                    (false, _) if !self.streamed.is_empty() => self.close_segment(emit),
                    // Without partial output every assistant event is a whole segment.
                    (false, _) => {
                        self.last_segment = Some(text.clone());
                        emit(AgentEvent::AssistantMessage(Cow::Owned(text)));
                        emit(AgentEvent::TurnEnd);
                    }
                }
            }
            ("tool_call", Some("started")) => {
                self.close_segment(emit);
                if let Some((key, body)) = ev.tool_call.and_then(|m| m.into_iter().next()) {
                    let name = key.strip_suffix("ToolCall").unwrap_or(&key).to_string();
                    let args = body.get("args").cloned().unwrap_or_default();
                    emit(AgentEvent::ToolCall {
                        name: Cow::Owned(name),
                        args,
                    });
                }
            }
            ("result", _) => {
                self.close_segment(emit);
                let u = ev.usage.unwrap_or_default();
                emit(AgentEvent::Usage(Usage {
                    input: ev.input_tokens.unwrap_or(u.input_tokens),
                    output: ev.output_tokens.unwrap_or(u.output_tokens),
                    cache_read: u.cache_read_tokens,
                    cache_write: u.cache_write_tokens,
                    cost: 0.0,
                    turns: 0,
                }));
                if ev.is_error {
                    let message = ev
                        .result
                        .unwrap_or(Cow::Borrowed("cursor reported an error result"));
                    emit(AgentEvent::ProviderError(message));
                } else if self.last_segment.is_none() {
                    if let Some(r) = ev.result {
                        emit(AgentEvent::FinalText(r));
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
                "why"
            ]
        );
        assert_eq!(inv.warnings.len(), 1);
    }
}
