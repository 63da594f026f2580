//! pi (`@mariozechner/pi-coding-agent`): its command line and its `--mode json` dialect.
//!
//! Facts the parser relies on (each seen in pi's output: `tests/contract_pi.rs` runs it
//! against the mock LLM, and `tests/fixtures/pi/` holds streams it printed): the final text
//! is the text blocks of the last assistant `message_end`; usage is per request, so it is
//! summed over every assistant `message_end`; pi exits 0 in json mode even when the model
//! call failed, so failure is read from `stopReason` and `errorMessage`; `agent_end`
//! (unless `willRetry`) and `agent_settled` end the run, and pi sometimes never exits after
//! them.

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::lenient::{Amount, Count, Flag, List, Object, Str};
use super::provider::{self, ProviderHost, ProviderQuery};
use super::tools::{Permissions, Tool};
use super::{
    is_empty_json_str, short_text, text_event, write_prompt_file, BackendError, BackendSpec,
    Dialect, Invocation, InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::limits::TASK_INLINE_MAX_CHARS;
use crate::result::Usage;
use crate::sandbox::CHILD_DIR;

mod rpc;
pub(crate) use rpc::PiRpcDialect;

/// pi's own session file, in the run folder.
pub(crate) const PI_SESSION_FILE: &str = "pi-session.jsonl";

/// pi's tools for a read-only agent that names none.
const READONLY_TOOLS: &[&str] = &["read", "grep", "find", "ls"];

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "pi",
    aliases: &[],
    program: "pi",
    install_hint:
        "install it with `npm install -g @earendil-works/pi-coding-agent` (node >= 22.19; \
                   `@mariozechner/pi-coding-agent` for node 20), then log in with `pi` once",
    auto: true,
    resumes: true,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::new(PiDialect),
        talks: false,
        reports: super::Reports {
            cost: true,
            usage_while_running: true,
        },
    }),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    // Its provider is the model's `provider/` prefix, or its own settings' default.
    provider: None,
    // Its agent dir holds its settings, models, extensions and login, and the lock
    // directories it makes beside them: private. Its session file is in the child's place.
    home: Some(|env| {
        let agent: Vec<_> = env
            .dir_or_home("PI_CODING_AGENT_DIR", ".pi/agent")
            .into_iter()
            .collect();
        crate::sandbox::CliHome {
            login: agent.iter().map(|a| a.join("auth.json")).collect(),
            private: agent,
            env: super::any_provider_env(),
            ..Default::default()
        }
    }),
    provider_hosts,
};

/// The provider of the model (`--model provider/id`, else `defaultProvider` in its
/// `settings.json`): its `baseUrl` in `models.json` (a provider of the user's, or an
/// override of a built-in one), else the API hosts of a provider pi knows by name. A model
/// whose provider cannot be told gets every configured base URL and every known
/// provider's hosts.
fn provider_hosts(q: &ProviderQuery<'_>) -> Vec<ProviderHost> {
    let dir = q.env.dir_or_home("PI_CODING_AGENT_DIR", ".pi/agent");
    let read = |name: &str| {
        dir.as_ref()
            .map(|d| d.join(name))
            .and_then(|p| provider::read_json(&p).ok().flatten().map(|v| (p, v)))
    };
    let models = read("models.json");
    let provider = q.model_provider().map(str::to_string).or_else(|| {
        read("settings.json").and_then(|(_, s)| s["defaultProvider"].as_str().map(str::to_string))
    });
    let base_url = |id: &str| {
        models.as_ref().and_then(|(path, m)| {
            m["providers"][id]["baseUrl"].as_str().map(|url| {
                ProviderHost::url(url, format!("{} providers.{id}.baseUrl", path.display()))
            })
        })
    };
    match provider {
        Some(id) => match base_url(&id) {
            Some(url) => vec![url],
            None => provider::hosts_of(&id).collect(),
        },
        None => {
            let ids: Vec<String> = models
                .as_ref()
                .and_then(|(_, m)| m["providers"].as_object())
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            ids.iter()
                .filter_map(|id| base_url(id))
                .chain(
                    provider::KNOWN_PROVIDERS
                        .iter()
                        .flat_map(|p| provider::hosts_of(p)),
                )
                .collect()
        }
    }
}

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
    // Where its stdin can be a pipe, pi runs in its RPC mode (the json mode's events, with
    // commands on stdin), so that a message sent to the run reaches it while it works.
    let rpc = input.stdin_pipe;
    let mode: &[&str] = if rpc {
        &["--mode", "rpc"]
    } else {
        &["--mode", "json", "-p"]
    };
    for a in mode {
        inv.arg(*a);
    }
    // pi keeps its own session file in the run folder, so that `--resume` can continue it.
    // A resumed run starts from a copy of the earlier run's file: each run folder stays the
    // complete record of its own run.
    // The child writes it, so it is in the child's place, not in orchestrate's record.
    let session = input.run_dir.join(CHILD_DIR).join(PI_SESSION_FILE);
    // A repair turn continues the run's own session file in place: copying a file onto
    // itself would empty it.
    if let Some(from) = input.resume.filter(|from| from.run_dir != input.run_dir) {
        let earlier = from.run_dir.join(CHILD_DIR).join(PI_SESSION_FILE);
        crate::session::copy_child_file(&earlier, &session).map_err(|e| {
            BackendError::Resume(format!(
                "run {} has no pi session to continue ({}: {e})",
                from.run_id,
                earlier.display()
            ))
        })?;
    }
    inv.arg("--session").arg(&session);
    if let Some(model) = input.model() {
        inv.arg("--model").arg(model);
    }
    let (tools, warnings) = pi_tools(&Permissions::of(input.agent));
    inv.warnings = warnings;
    if !tools.is_empty() {
        inv.arg("--tools").arg(tools.join(","));
    }
    if let Some(path) = input.write_system_prompt()? {
        inv.arg("--append-system-prompt").arg(&path);
        inv.prompt_files.push(path);
    }
    let message = format!("Task: {}", input.task);
    if rpc {
        // The prompt goes as its first command, never through argv.
        inv.talk = Some(super::Talk::PiRpc { prompt: message });
    } else if input.task.chars().count() > TASK_INLINE_MAX_CHARS {
        // Very long arguments hit ARG_MAX and show up in `ps`; pi reads `@file` arguments.
        let path = input.run_dir.join("task.md");
        write_prompt_file(&path, &message)?;
        let mut arg = OsString::from("@");
        arg.push(&path);
        inv.arg(arg);
        inv.prompt_files.push(path);
    } else {
        inv.arg(message);
    }
    Ok(inv)
}

/// pi's tool names, and what a read-only agent loses. pi cannot run a shell read-only,
/// so a read-only agent never gets `bash` (nor `edit`/`write`).
fn pi_tools(p: &Permissions) -> (Vec<String>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut out: Vec<String> = Vec::new();
    for t in p.granted() {
        let name = match &t {
            Tool::Read => "read",
            Tool::Grep => "grep",
            Tool::Find => "find",
            Tool::Ls => "ls",
            Tool::Bash if p.readonly => {
                warnings.push(
                    "pi cannot sandbox bash: it was removed from this read-only agent".to_string(),
                );
                continue;
            }
            Tool::Bash => "bash",
            Tool::Edit => "edit",
            Tool::Write => "write",
            Tool::Native(n) => n.as_str(),
        };
        out.push(name.to_string());
    }
    if out.is_empty() && p.readonly {
        out = READONLY_TOOLS.iter().map(|s| s.to_string()).collect();
    }
    (out, warnings)
}

/// Only the fields the collector needs; everything else (tool results are most of the
/// bytes) is skipped without being built. Every field but the event's type is read
/// leniently (see [`super::lenient`]): one of another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(rename = "assistantMessageEvent", borrow, default)]
    assistant_message_event: Option<&'a RawValue>,
    #[serde(rename = "willRetry", borrow, default)]
    will_retry: Flag<'a>,
    #[serde(borrow, default)]
    id: Str<'a>,
    #[serde(rename = "toolCallId", borrow, default)]
    tool_call_id: Str<'a>,
    /// `auto_retry_start`: which attempt, of how many, after what.
    #[serde(borrow, default)]
    attempt: Count<'a>,
    #[serde(rename = "maxAttempts", borrow, default)]
    max_attempts: Count<'a>,
    #[serde(rename = "errorMessage", borrow, default)]
    error_message: Str<'a>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    role: Str<'a>,
    #[serde(borrow, default)]
    content: List<Block<'a>>,
    #[serde(borrow, default)]
    usage: Object<'a, PiUsage<'a>>,
    #[serde(rename = "stopReason", borrow, default)]
    stop_reason: Str<'a>,
    #[serde(rename = "errorMessage", borrow, default)]
    error_message: Option<&'a RawValue>,
}

/// A content block: `text` or `toolCall` (others are skipped). A flat struct rather than
/// a tagged enum, so that the arguments stay raw JSON until they are shown (a tagged enum
/// would buffer the whole block first).
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Str<'a>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct PiUsage<'a> {
    #[serde(borrow, default)]
    input: Count<'a>,
    #[serde(borrow, default)]
    output: Count<'a>,
    #[serde(rename = "cacheRead", borrow, default)]
    cache_read: Count<'a>,
    #[serde(rename = "cacheWrite", borrow, default)]
    cache_write: Count<'a>,
    #[serde(borrow, default)]
    cost: Object<'a, PiCost<'a>>,
}

#[derive(Deserialize, Default)]
struct PiCost<'a> {
    #[serde(borrow, default)]
    total: Amount<'a>,
}

impl PiUsage<'_> {
    /// The usage, each odd field ignored (and said).
    fn read(self, emit: &mut dyn FnMut(AgentEvent<'_>)) -> Usage {
        Usage {
            input: self.input.read("usage.input", emit).unwrap_or(0),
            output: self.output.read("usage.output", emit).unwrap_or(0),
            cache_read: self.cache_read.read("usage.cacheRead", emit).unwrap_or(0),
            cache_write: self.cache_write.read("usage.cacheWrite", emit).unwrap_or(0),
            cost: self
                .cost
                .read_not_null("usage.cost", emit)
                .and_then(|c| c.total.read("usage.cost.total", emit))
                .unwrap_or(0.0),
            turns: 0,
        }
    }
}

#[derive(Deserialize)]
struct MessageEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
}

#[derive(Debug, Default)]
pub(crate) struct PiDialect;

/// Events nothing is taken from, which pi writes with large payloads (`turn_end` repeats
/// the whole message that `message_end` gave, and the tool results): a line that leads
/// with one of these types and ends as an object does is not read further.
const UNREAD_EVENTS: &[&str] = &["turn_start", "turn_end"];

/// A `message_update` as pi writes it, read in one pass: its event's type and, for text,
/// the delta itself (borrowed where it has no escapes). A line of another shape is read
/// the lenient way ([`Line`]).
#[derive(Deserialize)]
struct Update<'a> {
    #[serde(rename = "assistantMessageEvent", borrow)]
    event: UpdateEvent<'a>,
}

#[derive(Deserialize)]
struct UpdateEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
}

impl PiDialect {
    /// A `message_update` read in one pass; false when it is not of the usual shape (or
    /// long enough that its text must not be unescaped whole), for the lenient reading.
    fn fast_update(line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        if line.len() > crate::collector::LONG_TEXT_JSON_BYTES {
            return false;
        }
        let Ok(Update { event }) = serde_json::from_str::<Update<'_>>(line) else {
            return false;
        };
        match event {
            UpdateEvent {
                kind,
                delta: Some(delta),
            } if kind == "text_delta" => emit(AgentEvent::TextDelta(delta)),
            UpdateEvent { kind, .. } if kind != "error" => emit(AgentEvent::Working),
            _ => {}
        }
        true
    }
}

impl Dialect for PiDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        match super::leading_type(line) {
            Some(kind) if UNREAD_EVENTS.contains(&kind) && line.trim_end().ends_with('}') => {
                return true
            }
            Some("message_update") if Self::fast_update(line, emit) => return true,
            _ => {}
        }
        let Ok(ev) = serde_json::from_str::<Line<'_>>(line) else {
            // Valid JSON that is not an object with a string `type` is not a pi event
            // either; both count as skipped.
            return false;
        };
        match ev.kind.as_ref() {
            "session" => {
                if let Some(id) = ev.id.read("id", emit) {
                    emit(AgentEvent::SessionId(id));
                }
            }
            "message_start" => {
                if let Some(m) = ev.message.and_then(parse_message) {
                    if m.role.is("assistant") {
                        emit(AgentEvent::MessageStart);
                    }
                }
            }
            "message_update" => {
                let update = ev
                    .assistant_message_event
                    .and_then(|raw| serde_json::from_str::<MessageEvent<'_>>(raw.get()).ok());
                match update {
                    Some(MessageEvent {
                        kind,
                        delta: Some(delta),
                    }) if kind == "text_delta" => {
                        emit(text_event(vec![delta], "", TextKind::Delta))
                    }
                    // The model streams thinking or a tool call's arguments.
                    Some(MessageEvent { kind, .. }) if kind != "error" => emit(AgentEvent::Working),
                    _ => {}
                }
            }
            "tool_execution_start" => {
                let id = ev.tool_call_id.read("toolCallId", emit);
                emit(AgentEvent::ToolStart { id })
            }
            "tool_execution_end" => {
                let id = ev.tool_call_id.read("toolCallId", emit);
                emit(AgentEvent::ToolEnd { id })
            }
            "tool_execution_update"
            | "auto_compaction_start"
            | "auto_compaction_end"
            | "compaction_start"
            | "compaction_end" => emit(AgentEvent::Working),
            "auto_retry_start" => {
                let attempt = match (
                    ev.attempt.read_nullable("attempt", emit),
                    ev.max_attempts.read_nullable("maxAttempts", emit),
                ) {
                    (Some(a), Some(m)) => format!(" {a}/{m}"),
                    (Some(a), None) => format!(" {a}"),
                    _ => String::new(),
                };
                let why = ev
                    .error_message
                    .read("errorMessage", emit)
                    .unwrap_or_default();
                emit(AgentEvent::Retry(Cow::Owned(format!(
                    "retry{attempt}: {why}"
                ))));
            }
            "message_end" => {
                if let Some(m) = ev.message.and_then(parse_message) {
                    if m.role.is("assistant") {
                        emit_assistant_message(m, emit);
                    }
                }
            }
            "agent_end" if !ev.will_retry.read("willRetry", emit) => emit(AgentEvent::Terminal),
            "agent_settled" => emit(AgentEvent::Terminal),
            _ => {}
        }
        true
    }
}

fn parse_message(raw: &RawValue) -> Option<Message<'_>> {
    serde_json::from_str(raw.get()).ok()
}

fn emit_assistant_message(m: Message<'_>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
    // Text blocks are joined with a line break between the non-empty ones.
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for block in m.content.0 {
        if block.kind.is("text") {
            texts.extend(block.text.filter(|t| !is_empty_json_str(t)));
        } else if block.kind.is("toolCall") {
            calls.push((
                block.name.read("toolCall.name", emit).unwrap_or_default(),
                display_args(block.arguments),
            ));
        }
    }
    if texts.is_empty() {
        emit(AgentEvent::AssistantMessage(Cow::Borrowed("")));
    } else {
        emit(text_event(texts, "\n", TextKind::Message));
    }
    for (name, args) in calls {
        emit(AgentEvent::ToolCall { name, args });
    }
    if let Some(u) = m.usage.read_not_null("usage", emit) {
        let usage = u.read(emit);
        emit(AgentEvent::Usage(usage));
    }
    emit(AgentEvent::TurnEnd);
    let stop_reason = m.stop_reason.read("stopReason", emit);
    match stop_reason.as_deref() {
        Some("error") | Some("aborted") => {
            let reason = stop_reason.as_deref().unwrap_or_default();
            let message = m
                .error_message
                .map(|e| short_text(e).into_owned())
                .unwrap_or_else(|| format!("the model call ended with stopReason {reason:?}"));
            emit(AgentEvent::ProviderError(Cow::Owned(message)));
        }
        _ => emit(AgentEvent::Recovered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::Collector;
    use crate::result::DisplayItem;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn collect(lines: &[&str]) -> (Collector, u64) {
        let mut d = PiDialect;
        let mut c = Collector::new();
        let mut skipped = 0;
        for l in lines {
            if !d.parse_line(l, &mut |e| {
                c.apply(e);
            }) {
                skipped += 1;
            }
        }
        (c, skipped)
    }

    const TOOL_TURN: &str = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/a.rs"}}],"usage":{"input":100,"output":10,"cacheRead":5,"cacheWrite":2,"totalTokens":117,"cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3}},"stopReason":"toolUse"}}"#;
    const FINAL_TURN: &str = r#"{"message":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Answer: a.rs"}],"role":"assistant","usage":{"input":200,"output":20,"cacheRead":50,"cacheWrite":0,"cost":{"total":0.5}},"stopReason":"stop","newField":1},"type":"message_end"}"#;

    #[test]
    fn sums_usage_over_assistant_messages_and_takes_the_last_text() {
        let (c, skipped) = collect(&[
            r#"{"type":"session","version":3,"id":"s-1","cwd":"/r"}"#,
            r#"{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"Task: x"}]}}"#,
            TOOL_TURN,
            r#"{"type":"tool_execution_end","toolCallId":"c1","toolName":"read","result":{"content":[{"type":"text","text":"fn main() {}"}]},"isError":false}"#,
            r#"{"type":"message_end","message":{"role":"toolResult","content":[{"type":"text","text":"fn main() {}"}]}}"#,
            FINAL_TURN,
            r#"{"type":"agent_end","messages":[]}"#,
        ]);
        assert_eq!(skipped, 0);
        assert_eq!(
            c.usage(),
            Usage {
                input: 300,
                output: 30,
                cache_read: 55,
                cache_write: 2,
                cost: 0.8,
                turns: 2
            }
        );
        assert_eq!(c.final_text(), Some("Answer: a.rs"));
        assert_eq!(c.session_id(), Some("s-1"));
        assert!(c.terminal_seen());
        assert_eq!(c.provider_error(), None);
        assert_eq!(
            c.display_items(),
            vec![
                DisplayItem::Text {
                    text: "Looking.".into()
                },
                DisplayItem::ToolCall {
                    name: "read".into(),
                    args: json!({"path": "src/a.rs"})
                },
                DisplayItem::Text {
                    text: "Answer: a.rs".into()
                },
            ]
        );
    }

    #[test]
    fn error_stop_reason_is_a_provider_error_even_on_exit_zero() {
        let (c, _) = collect(&[
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"cost":{"total":0}},"stopReason":"error","errorMessage":"401 Incorrect API key provided"}}"#,
            r#"{"type":"agent_end","messages":[]}"#,
        ]);
        assert_eq!(c.provider_error(), Some("401 Incorrect API key provided"));
        assert_eq!(c.final_text(), Some(""));
    }

    #[test]
    fn a_retried_error_does_not_fail_the_run() {
        let (c, _) = collect(&[
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}"#,
            r#"{"type":"agent_end","messages":[],"willRetry":true}"#,
            r#"{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"overloaded"}"#,
        ]);
        assert!(
            !c.terminal_seen(),
            "agent_end with willRetry is not the end"
        );
        let (c, _) = collect(&[
            r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}"#,
            FINAL_TURN,
            r#"{"type":"agent_settled"}"#,
        ]);
        assert_eq!(c.provider_error(), None);
        assert!(c.terminal_seen());
    }

    #[test]
    fn text_deltas_in_both_message_update_shapes_build_partial_text() {
        let (c, _) = collect(&[
            r#"{"type":"message_start","message":{"role":"assistant","content":[]}}"#,
            r#"{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"Hel"}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hel","partial":{"role":"assistant"}}}"#,
            r#"{"type":"message_update","usage":{"input":1},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"lo \u00e9"}}"#,
            r#"{"type":"message_update","assistantMessageEvent":{"type":"toolcall_start","id":"x","toolName":"read"}}"#,
        ]);
        assert_eq!(c.partial_text(), "Hello é");
        assert_eq!(c.final_text(), None);
    }

    /// Each line's events as `PiDialect` gives them.
    fn events_of(line: &str) -> (bool, Vec<String>) {
        let mut seen = Vec::new();
        let read = PiDialect.parse_line(line, &mut |e| seen.push(format!("{e:?}")));
        (read, seen)
    }

    #[test]
    fn a_message_update_reads_the_same_in_one_pass_as_the_lenient_way() {
        // The one-pass reading needs the type first; with another field first the same
        // line is read the lenient way.
        let events = [
            r#""assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"plain"}"#,
            r#""usage":{"input":1},"assistantMessageEvent":{"type":"text_delta","delta":"a \"quote\" \u00e9\n\\ 漢字"}"#,
            r#""assistantMessageEvent":{"type":"thinking_delta","delta":"hm"}"#,
            r#""assistantMessageEvent":{"type":"toolcall_start","id":"x","toolName":"read"}"#,
            r#""assistantMessageEvent":{"type":"error","reason":"aborted"}"#,
            // Odd shapes: the one-pass reading declines them, and they read as before.
            r#""assistantMessageEvent":{"type":"text_delta","delta":42}"#,
            r#""assistantMessageEvent":"text_delta""#,
            r#""assistantMessageEvent":{"delta":"no type"}"#,
        ];
        for event in events {
            let fast = format!(r#"{{"type":"message_update",{event}}}"#);
            let lenient = format!(r#"{{{event},"type":"message_update"}}"#);
            assert_eq!(events_of(&fast), events_of(&lenient), "{event}");
        }
        assert_eq!(
            events_of(&format!(r#"{{"type":"message_update",{}}}"#, events[1])),
            (
                true,
                vec![format!(
                    "{:?}",
                    AgentEvent::TextDelta("a \"quote\" é\n\\ 漢字".into())
                )]
            )
        );
    }

    #[test]
    fn turn_lines_are_not_read_past_their_type_but_garbage_still_is_skipped() {
        let turn_end = r#"{"type":"turn_end","message":{"role":"assistant","content":[{"type":"text","text":"Answer"}]},"toolResults":[]}"#;
        assert_eq!(events_of(turn_end), (true, vec![]));
        assert_eq!(events_of(r#"{"type":"turn_start"}"#), (true, vec![]));
        // Cut short, it is no object: skipped, as any line that is not JSON.
        assert_eq!(
            events_of(r#"{"type":"turn_end","message":{"ro"#),
            (false, vec![])
        );
    }

    #[test]
    fn garbage_lines_are_skipped_and_unknown_events_ignored() {
        let (c, skipped) = collect(&[
            "hello world",
            "[1,2]",
            "",
            r#"{"no_type":true}"#,
            r#"{"type":"queue_update","whatever":[1]}"#,
            r#"{"type":"message_end","message":{"role":"system","content":[{"type":"text","text":"sys"}]}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"image","data":"..."}],"stopReason":"brand_new_reason"}}"#,
        ]);
        assert_eq!(skipped, 4);
        assert_eq!(c.final_text(), Some(""));
        assert_eq!(c.provider_error(), None);
    }

    use crate::backends::test_support::agent;

    #[test]
    fn command_line_passes_model_tools_prompt_file_and_task() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(
            &["Read", "Grep", "Glob", "Write", "Bash"],
            true,
            "Be brief.",
        );
        let inv = build(
            "pi".into(),
            &InvocationInput {
                agent: &a,
                task: "find auth",
                model: Some("m-1"),
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
        let prompt = dir.path().join("system-prompt.md");
        assert_eq!(
            inv.args,
            [
                "--mode",
                "json",
                "-p",
                "--session",
                dir.path()
                    .join(CHILD_DIR)
                    .join(PI_SESSION_FILE)
                    .to_str()
                    .unwrap(),
                "--model",
                "m-1",
                "--tools",
                "read,grep,find",
                "--append-system-prompt",
                prompt.to_str().unwrap(),
                "Task: find auth",
            ]
            .map(OsString::from)
            .to_vec()
        );
        assert_eq!(std::fs::read_to_string(&prompt).unwrap(), "Be brief.");
        assert_eq!(inv.prompt_files, vec![prompt]);
        assert_eq!(
            inv.warnings,
            ["pi cannot sandbox bash: it was removed from this read-only agent"]
        );
    }

    #[test]
    fn long_tasks_go_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&[], false, "");
        let task = "x".repeat(TASK_INLINE_MAX_CHARS + 1);
        let inv = build(
            "pi".into(),
            &InvocationInput {
                agent: &a,
                task: &task,
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
        let file = dir.path().join("task.md");
        assert_eq!(
            inv.args.last().unwrap(),
            &OsString::from(format!("@{}", file.display()))
        );
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("Task: {task}")
        );
        assert!(!inv
            .args
            .iter()
            .any(|a| a == "--tools" || a == "--append-system-prompt"));
    }

    #[test]
    fn a_repair_turn_continues_the_runs_own_session_file_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join(CHILD_DIR).join(PI_SESSION_FILE);
        std::fs::create_dir_all(session.parent().unwrap()).unwrap();
        std::fs::write(&session, "{\"type\":\"session\"}\n").unwrap();
        let a = agent(&[], false, "");
        let from = crate::backends::ResumeFrom {
            run_id: "ab12cd34".into(),
            session_id: Some("s".into()),
            run_dir: dir.path().to_path_buf(),
        };
        let inv = build(
            "pi".into(),
            &InvocationInput {
                agent: &a,
                task: "again",
                model: None,
                run_dir: dir.path(),
                resume: Some(&from),
                output_schema: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
            },
        )
        .unwrap();
        assert!(inv.args.contains(&session.clone().into_os_string()));
        assert_eq!(
            std::fs::read_to_string(&session).unwrap(),
            "{\"type\":\"session\"}\n"
        );
    }
}
