//! orchestrate's side of an ACP conversation, as a dialect: it writes the client's
//! requests through the child's stdin and reads the agent's stdout into normalized events.
//!
//! The conversation, one prompt long:
//!
//! ```text
//! → initialize {protocolVersion: 1, no fs or terminal methods}
//! → session/new {cwd, mcpServers: []}        (or session/load to resume)
//! → session/set_config_option {model}         (when the model is set that way)
//! → session/prompt {the task}
//! ← session/update …  (text, thinking, tool calls, plan, usage)
//! ← session/request_permission …  → answered by the permission policy, or by the parent
//!                                      (`permissions: ask`, see `ask.rs`)
//! ← the prompt's response {stopReason}        → the final event; stdin is closed
//! ```
//!
//! A message sent to the run (`orchestrate send`) while the agent works is held until the
//! prompt's response, then is the next `session/prompt` of the same session in the same
//! process (`nextPrompt`); the conversation ends once a response comes with nothing held.
//! `send --interrupt` sends `session/cancel` at once, and the message is the prompt after
//! the cancelled one's response (`interrupted`).
//!
//! A stop sends `session/cancel` first (see [`AcpDialect::cancel`]); the agent answers the
//! prompt with `stopReason: cancelled`, which is the final event the supervisor waits for
//! before SIGTERM. Requests for client methods (`fs/*`, `terminal/*`: orchestrate offers
//! none, so the agent uses its own tools inside the sandbox) and unknown ones are answered
//! with "method not found".

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::wire::{
    ChunkMeta, Content, InitializeResult, Message, NewSessionResult, OptionValue,
    PermissionRequest, PromptResult, RpcError, SessionNotification, ToolCallFields, ToolMeta,
    Update,
};
use super::{ask, Conversation};
use crate::backends::ask_parent::{self, Question};
use crate::backends::permissions::{DecidedBy, Decision, PermissionRecord, ToolRequest};
use crate::backends::{parse_json, text_event, ChildInput, Delivery, Dialect, Inbox};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::result::Usage;

/// The protocol version orchestrate speaks.
const PROTOCOL_VERSION: u64 = 1;
/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// Tool calls remembered (to announce each once and pair its start and end); the oldest
/// are forgotten past this.
const MAX_TRACKED_TOOLS: usize = 256;
/// An error's `data`, as the agent sent it, is cut to this many bytes in the message.
const MAX_ERROR_DATA_BYTES: usize = 2048;

/// Where the conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not attached to a child yet (or never: a dialect that only reads, as in tests).
    Detached,
    Initializing,
    OpeningSession,
    /// `session/load`: the agent replays the session's history, which is not this run's.
    Loading,
    SettingModel,
    Prompting,
    /// `session/cancel` sent; the prompt's answer is awaited.
    Cancelling,
    /// `session/cancel` sent for a message sent with `--interrupt`: the message is the
    /// next prompt once the cancelled one is answered.
    Interrupting,
    Done,
}

/// What a response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Initialize,
    NewSession,
    LoadSession,
    SetModel,
    SetMode,
    Prompt,
}

#[derive(Debug)]
struct ToolState {
    id: String,
    started: bool,
    ended: bool,
}

pub(crate) struct AcpDialect {
    conv: Conversation,
    input: Option<ChildInput>,
    state: State,
    next_id: u64,
    pending: Vec<(u64, Pending)>,
    session_id: Option<String>,
    /// An assistant message is being streamed.
    in_message: bool,
    /// Since the last turn boundary: the agent produced something, and a tool finished
    /// (the next output is then a new model turn).
    produced: bool,
    tool_ended: bool,
    tools: VecDeque<ToolState>,
    /// The session's cost the agent reported last (`usage_update` carries the total).
    cost_seen: f64,
    /// Permission requests put to the parent and not yet emitted.
    asks: ask_parent::Asks<ask::AcpReply>,
    /// Tokens came with the chunks (qwen): the prompt's own numbers would count them twice.
    chunk_usage: bool,
    /// The run's inbox, once a child is attached.
    mailbox: Option<Box<dyn Inbox>>,
}

impl AcpDialect {
    pub(crate) fn new(conv: Conversation) -> AcpDialect {
        AcpDialect {
            conv,
            input: None,
            state: State::Detached,
            next_id: 0,
            pending: Vec::new(),
            session_id: None,
            in_message: false,
            produced: false,
            tool_ended: false,
            tools: VecDeque::new(),
            cost_seen: 0.0,
            asks: ask_parent::Asks::default(),
            chunk_usage: false,
            mailbox: None,
        }
    }

    fn send(&self, value: &Value) {
        if let Some(input) = &self.input {
            if let Err(e) = input.send_json(value) {
                tracing::debug!("not written to the ACP agent: {e}");
            }
        }
    }

    fn request(&mut self, method: &str, params: Value, kind: Pending) {
        let id = self.next_id;
        self.next_id += 1;
        self.pending.push((id, kind));
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    fn reply(&self, id: &RawValue, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn reply_error(&self, id: &RawValue, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// The conversation is over: the agent reads end of file (most exit on it).
    fn finish(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        self.settle_asks(emit);
        self.end_message(emit);
        if self.produced {
            self.produced = false;
            emit(AgentEvent::TurnEnd);
        }
        self.state = State::Done;
        emit(AgentEvent::Terminal);
        if let Some(input) = &self.input {
            input.close();
        }
    }

    fn fail(&mut self, message: String, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        emit(AgentEvent::ProviderError(Cow::Owned(message)));
        self.finish(emit);
    }

    fn session_params(&self) -> Value {
        json!({"cwd": self.conv.cwd, "mcpServers": []})
    }

    fn prompt(&mut self) {
        let text = self.conv.prompt.clone();
        self.prompt_with(&text);
    }

    fn prompt_with(&mut self, text: &str) {
        let params = json!({
            "sessionId": self.session_id,
            "prompt": [{"type": "text", "text": text}],
        });
        self.request("session/prompt", params, Pending::Prompt);
        self.state = State::Prompting;
    }

    /// A prompt was answered: what was sent to the run meanwhile is the next prompt, as
    /// `delivery`; returns false when nothing was, and the conversation ends.
    fn prompt_held(&mut self, delivery: Delivery) -> bool {
        let Some(mailbox) = &self.mailbox else {
            return false;
        };
        // A last look: a message sent just now still reaches this process.
        mailbox.collect();
        let held = mailbox.write_held(delivery);
        if held.is_empty() {
            return false;
        }
        self.prompt_with(&held.join("\n\n"));
        true
    }

    fn set_mode_or_prompt(&mut self) {
        match self.conv.mode.clone() {
            Some(mode) => {
                let params = json!({"sessionId": self.session_id, "modeId": mode});
                self.request("session/set_mode", params, Pending::SetMode);
                self.state = State::SettingModel;
            }
            None => self.prompt(),
        }
    }

    /// Cancels the prompt under way; the questions still out to the parent about it are
    /// withdrawn (each answered `cancelled`, and the parent told).
    fn send_cancel(&self) {
        self.send(&json!({
            "jsonrpc": "2.0",
            "method": "session/cancel",
            "params": {"sessionId": self.session_id},
        }));
        self.asks.withdraw_all(self.input.as_ref());
    }

    fn end_message(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if self.in_message {
            self.in_message = false;
            emit(AgentEvent::StreamedMessageEnd);
        }
    }

    /// The model produces something: after a tool finished, a new turn has begun.
    fn model_output(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if self.tool_ended {
            self.tool_ended = false;
            self.end_message(emit);
            emit(AgentEvent::TurnEnd);
        }
        self.produced = true;
    }

    fn on_response(
        &mut self,
        kind: Pending,
        result: Option<&RawValue>,
        error: Option<&RawValue>,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) {
        if let Some(error) = error {
            let message = error_message(error);
            match kind {
                // The model is the agent's business: run on with its own.
                Pending::SetModel => {
                    emit(AgentEvent::Warning(Cow::Owned(format!(
                        "the agent did not take model {}: {message}",
                        self.conv.model.as_deref().unwrap_or_default()
                    ))));
                    self.set_mode_or_prompt();
                }
                Pending::SetMode => {
                    emit(AgentEvent::Warning(Cow::Owned(format!(
                        "the agent did not take mode {}: it may act without asking: {message}",
                        self.conv.mode.as_deref().unwrap_or_default()
                    ))));
                    self.prompt();
                }
                Pending::Initialize => self.fail(format!("ACP initialize failed: {message}"), emit),
                Pending::NewSession => {
                    self.fail(format!("ACP session/new failed: {message}"), emit)
                }
                Pending::LoadSession => self.fail(
                    format!(
                        "ACP session/load of session {} failed: {message}",
                        self.conv.resume.as_deref().unwrap_or_default()
                    ),
                    emit,
                ),
                Pending::Prompt => self.fail(message, emit),
            }
            return;
        }
        let raw = result.map_or("null", RawValue::get);
        match kind {
            Pending::Initialize => {
                let init: InitializeResult<'_> = serde_json::from_str(raw).unwrap_or_default();
                if let Some(v) = init.protocol_version.filter(|v| *v != PROTOCOL_VERSION) {
                    let agent = init
                        .agent_info
                        .and_then(|i| i.name)
                        .unwrap_or(Cow::Borrowed("the agent"));
                    return self.fail(
                        format!("{agent} speaks ACP version {v}; orchestrate speaks version {PROTOCOL_VERSION}"),
                        emit,
                    );
                }
                let loads = init
                    .agent_capabilities
                    .and_then(|c| c.load_session)
                    .unwrap_or(false);
                match self.conv.resume.clone() {
                    Some(_) if !loads => self.fail(
                        "the agent cannot load an earlier session (it does not offer ACP's session/load): it cannot resume"
                            .to_string(),
                        emit,
                    ),
                    Some(id) => {
                        let mut params = self.session_params();
                        params["sessionId"] = json!(id);
                        self.request("session/load", params, Pending::LoadSession);
                        self.state = State::Loading;
                    }
                    None => {
                        let params = self.session_params();
                        self.request("session/new", params, Pending::NewSession);
                        self.state = State::OpeningSession;
                    }
                }
            }
            Pending::NewSession => {
                let session: NewSessionResult<'_> = serde_json::from_str(raw).unwrap_or_default();
                let Some(id) = session.session_id else {
                    return self.fail("ACP session/new answered without a sessionId".into(), emit);
                };
                self.session_id = Some(id.to_string());
                emit(AgentEvent::SessionId(id));
                self.set_model_or_prompt(session.config_options.as_deref(), emit);
            }
            Pending::LoadSession => {
                self.session_id.clone_from(&self.conv.resume);
                if let Some(id) = &self.conv.resume {
                    emit(AgentEvent::SessionId(Cow::Owned(id.clone())));
                }
                let session: NewSessionResult<'_> = serde_json::from_str(raw).unwrap_or_default();
                self.set_model_or_prompt(session.config_options.as_deref(), emit);
            }
            Pending::SetModel => self.set_mode_or_prompt(),
            Pending::SetMode => self.prompt(),
            Pending::Prompt => {
                let r: PromptResult<'_> = serde_json::from_str(raw).unwrap_or_default();
                self.end_message(emit);
                if !self.chunk_usage {
                    let usage = match (
                        r.usage,
                        r._meta.and_then(|m| m.quota).and_then(|q| q.token_count),
                    ) {
                        (Some(u), _) => Some(Usage {
                            input: u.input_tokens,
                            output: u.output_tokens + u.thought_tokens,
                            cache_read: u.cached_read_tokens,
                            cache_write: u.cached_write_tokens,
                            ..Usage::default()
                        }),
                        (None, Some(t)) => Some(Usage {
                            input: t.input_tokens,
                            output: t.output_tokens,
                            ..Usage::default()
                        }),
                        (None, None) => None,
                    };
                    if let Some(u) = usage {
                        emit(AgentEvent::Usage(u));
                    }
                }
                match r.stop_reason.as_deref() {
                    Some("refusal") => emit(AgentEvent::ProviderError(Cow::Borrowed(
                        "the agent refused to go on (stopReason: refusal)",
                    ))),
                    Some("max_tokens") => emit(AgentEvent::Warning(Cow::Borrowed(
                        "the agent stopped at its token limit (stopReason: max_tokens): the answer may be cut short",
                    ))),
                    Some("max_turn_requests") => emit(AgentEvent::Warning(Cow::Borrowed(
                        "the agent stopped at its own limit of model requests (stopReason: max_turn_requests)",
                    ))),
                    _ => {}
                }
                let cancelled = r.stop_reason.as_deref() == Some("cancelled");
                if !cancelled {
                    if let Some(mailbox) = &self.mailbox {
                        mailbox.answered();
                    }
                }
                let next = match self.state {
                    State::Interrupting => Some(Delivery::Interrupted),
                    State::Prompting if !cancelled => Some(Delivery::NextPrompt),
                    // Stopped: what is held is not delivered.
                    _ => None,
                };
                if next.is_some_and(|delivery| self.prompt_held(delivery)) {
                    // The answer so far was this turn's: the next prompt's is the run's.
                    if self.produced {
                        self.produced = false;
                        emit(AgentEvent::TurnEnd);
                    }
                    return;
                }
                self.finish(emit);
            }
        }
    }

    /// Sets the model through the agent's model option when the command line could not,
    /// then prompts.
    fn set_model_or_prompt(
        &mut self,
        options: Option<&[super::wire::ConfigOption<'_>]>,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) {
        let Some(model) = self
            .conv
            .model
            .clone()
            .filter(|_| self.conv.model_by_option)
        else {
            return self.set_mode_or_prompt();
        };
        let picker = options
            .unwrap_or_default()
            .iter()
            .find(|o| o.category.as_deref() == Some("model"));
        let Some(picker) = picker else {
            emit(AgentEvent::Warning(Cow::Owned(format!(
                "the agent offers no model option over ACP: model {model} was not set"
            ))));
            return self.set_mode_or_prompt();
        };
        let values: Vec<String> = picker
            .options
            .and_then(|raw| serde_json::from_str::<Vec<OptionValue<'_>>>(raw.get()).ok())
            .map(|v| flatten_values(&v))
            .unwrap_or_default();
        let current = picker
            .current_value
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
        if current.as_deref() == Some(model.as_str()) {
            return self.set_mode_or_prompt();
        }
        if !values.is_empty() && !values.contains(&model) {
            emit(AgentEvent::Warning(Cow::Owned(format!(
                "model {model} is not one the agent offers ({}): it runs with {}",
                values.join(", "),
                current.as_deref().unwrap_or("its default")
            ))));
            return self.set_mode_or_prompt();
        }
        let params = json!({
            "sessionId": self.session_id,
            "configId": picker.id,
            "value": model,
        });
        self.request("session/set_config_option", params, Pending::SetModel);
        self.state = State::SettingModel;
    }

    fn on_update(&mut self, raw: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(n) = parse_json::<SessionNotification<'_>>(raw) else {
            return false;
        };
        let Ok(update) = serde_json::from_str::<Update<'_>>(n.update.get()) else {
            return false;
        };
        // The history a session/load replays is an earlier run's; another session's
        // updates are not this run's either.
        if self.state == State::Loading
            || (n.session_id.is_some() && n.session_id.as_deref() != self.session_id.as_deref())
        {
            return true;
        }
        match update.session_update.as_ref() {
            "agent_message_chunk" => {
                let content: Content<'_> = update
                    .content
                    .and_then(|c| serde_json::from_str(c.get()).ok())
                    .unwrap_or_default();
                if let Some(meta) = update._meta {
                    if let Ok(ChunkMeta { usage: Some(u) }) = serde_json::from_str(meta.get()) {
                        self.chunk_usage = true;
                        emit(AgentEvent::Usage(Usage {
                            input: u.input_tokens.saturating_sub(u.cached_read_tokens),
                            output: u.output_tokens + u.thought_tokens,
                            cache_read: u.cached_read_tokens,
                            ..Usage::default()
                        }));
                    }
                }
                match (content.kind.as_deref(), content.text) {
                    (Some("text") | None, Some(text)) => {
                        self.model_output(emit);
                        if !self.in_message {
                            self.in_message = true;
                            emit(AgentEvent::MessageStart);
                        }
                        emit(text_event(vec![text], "", TextKind::Delta));
                    }
                    _ => emit(AgentEvent::Working),
                }
            }
            "agent_thought_chunk" => {
                self.model_output(emit);
                emit(AgentEvent::Working);
            }
            "tool_call" | "tool_call_update" => {
                let Ok(fields) = serde_json::from_str::<ToolCallFields<'_>>(n.update.get()) else {
                    return false;
                };
                let new_call = update.session_update == "tool_call";
                self.on_tool(fields, new_call, emit);
            }
            "plan" => emit(AgentEvent::Working),
            "usage_update" => {
                if let Some(cost) = update.cost {
                    let delta = cost.amount - self.cost_seen;
                    if delta > 0.0 && delta.is_finite() {
                        self.cost_seen = cost.amount;
                        emit(AgentEvent::Usage(Usage {
                            cost: delta,
                            ..Usage::default()
                        }));
                    }
                }
            }
            // The user's own message echoed, commands, modes, config, session info.
            _ => {}
        }
        true
    }

    /// A tool call or an update of one: announced (a display item) the first time it is
    /// seen, started and ended as its status says.
    fn on_tool(
        &mut self,
        fields: ToolCallFields<'_>,
        new_call: bool,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) {
        let id = fields
            .tool_call_id
            .as_deref()
            .unwrap_or_default()
            .to_string();
        let known = self.tools.iter().position(|t| t.id == id);
        let at = match known {
            Some(at) => at,
            None if new_call || fields.title.is_some() || fields.kind.is_some() => {
                self.end_message(emit);
                self.model_output(emit);
                self.announce(&fields, emit);
                self.track(id.clone())
            }
            // An update of a call never announced, with nothing to show: progress only.
            None => {
                emit(AgentEvent::Working);
                return;
            }
        };
        let status = fields.status.as_deref().unwrap_or("pending");
        let t = &mut self.tools[at];
        match status {
            "in_progress" | "pending" if !t.started => {
                t.started = true;
                emit(AgentEvent::ToolStart {
                    id: Some(Cow::Owned(id)),
                });
            }
            "completed" | "failed" if !t.ended => {
                if !t.started {
                    t.started = true;
                    emit(AgentEvent::ToolStart {
                        id: Some(Cow::Owned(id.clone())),
                    });
                }
                t.ended = true;
                self.tool_ended = true;
                emit(AgentEvent::ToolEnd {
                    id: Some(Cow::Owned(id)),
                });
            }
            _ => emit(AgentEvent::Working),
        }
    }

    fn track(&mut self, id: String) -> usize {
        if self.tools.len() == MAX_TRACKED_TOOLS {
            self.tools.pop_front();
        }
        self.tools.push_back(ToolState {
            id,
            started: false,
            ended: false,
        });
        self.tools.len() - 1
    }

    fn announce(&self, fields: &ToolCallFields<'_>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        let name = tool_name(fields);
        let args = match fields.raw_input {
            Some(raw) if raw.get() != "null" => display_args(Some(raw)),
            _ => json!({"title": fields.title}),
        };
        emit(AgentEvent::ToolCall {
            name: Cow::Owned(name),
            args,
        });
    }

    fn on_permission(
        &mut self,
        id: &RawValue,
        params: Option<&RawValue>,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) -> bool {
        let Some(req) = params.and_then(|p| parse_json::<PermissionRequest<'_>>(p.get())) else {
            self.reply_error(
                id,
                -32602,
                "invalid params: a permission request needs toolCall and options",
            );
            return false;
        };
        let tool = &req.tool_call;
        let request = ToolRequest {
            name: tool_name(tool),
            // ACP's default kind, where the name is not the tool's own (a title is free
            // text: "Read" may be anything).
            kind: tool
                .kind
                .as_deref()
                .map(str::to_string)
                .or_else(|| own_tool_name(tool).is_none().then(|| "other".to_string())),
            paths: tool
                .locations
                .iter()
                .flatten()
                .filter_map(|l| l.path.as_deref().map(Into::into))
                .collect(),
        };
        let options: ask::Options = req
            .options
            .iter()
            .filter_map(|o| {
                let id = serde_json::from_str(o.option_id?.get()).ok()?;
                Some((o.kind.as_deref()?.to_string(), id))
            })
            .collect();
        let record = PermissionRecord {
            tool: request.name.clone(),
            decision: Decision::Cancelled,
            by: DecidedBy::Stop,
            title: tool.title.as_deref().map(str::to_string),
            reason: None,
        };
        // gemini sends no tool_call for a call it asked about: the request is where it
        // first appears, and it is shown once allowed.
        let call = tool
            .tool_call_id
            .as_deref()
            .filter(|id| !self.tools.iter().any(|t| t.id == *id))
            .map(|id| ask::Unannounced {
                id: id.to_string(),
                name: tool_name(tool),
                args: match tool.raw_input {
                    Some(raw) if raw.get() != "null" => display_args(Some(raw)),
                    _ => json!({"title": tool.title}),
                },
            });
        if matches!(self.state, State::Cancelling | State::Interrupting) {
            self.reply(id, json!({"outcome": {"outcome": "cancelled"}}));
            emit(AgentEvent::Permission(record));
            return true;
        }
        let decided = self.conv.policy.decide(&request);
        if let (Some(asker), Some(input)) = (self.conv.policy.parent(), &self.input) {
            let command = command_of(tool.raw_input);
            let question = Question {
                agent: &asker.agent,
                tool: &request.name,
                kind: request.kind.as_deref(),
                command: command.as_deref(),
                paths: request
                    .paths
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                title: tool.title.as_deref(),
            }
            .message();
            let asked = self.asks.ask(
                asker,
                input,
                ask_parent::Request {
                    reply: ask::AcpReply {
                        id: serde_json::from_str(id.get()).unwrap_or(Value::Null),
                        options: options.clone(),
                        call: call.clone(),
                    },
                    record: record.clone(),
                    fallback: decided.clone(),
                    question,
                },
            );
            match asked {
                ask_parent::Asking::Out => return true,
                ask_parent::Asking::TooMany => emit(AgentEvent::Warning(Cow::Owned(format!(
                    "permissions ask: {} questions of this run were already out to the parent; more requests were decided by policy",
                    ask_parent::MAX_OPEN_QUESTIONS
                )))),
                ask_parent::Asking::NoRuntime => {}
            }
        }
        let (decision, by, reason) = decided;
        let (outcome, decision, by, reason) = ask::outcome(&options, decision, by, reason);
        self.reply(id, json!({"outcome": outcome}));
        emit(AgentEvent::Permission(PermissionRecord {
            decision,
            by,
            reason,
            ..record
        }));
        if let Some(call) = call.filter(|_| decision == Decision::Allowed) {
            self.announce_asked(call, emit);
        }
        true
    }

    /// A call first seen in its permission request, allowed: shown, and tracked.
    fn announce_asked(&mut self, call: ask::Unannounced, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if self.tools.iter().any(|t| t.id == call.id) {
            return;
        }
        self.end_message(emit);
        self.model_output(emit);
        emit(AgentEvent::ToolCall {
            name: Cow::Owned(call.name),
            args: call.args,
        });
        self.track(call.id);
    }

    /// Emits the parent's decisions that came since the last line.
    fn settle_asks(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        for settled in self.asks.take_settled() {
            if let Some(warning) = settled.warning {
                emit(AgentEvent::Warning(Cow::Owned(warning)));
            }
            let allowed = settled.record.decision == Decision::Allowed;
            emit(AgentEvent::Permission(settled.record));
            if let Some(call) = settled.reply.call.filter(|_| allowed) {
                self.announce_asked(call, emit);
            }
        }
    }
}

/// The command a call runs, where its input names one (`command`: a string, or a list of
/// words).
fn command_of(raw: Option<&RawValue>) -> Option<String> {
    let input: Value = serde_json::from_str(raw?.get()).ok()?;
    match input.get("command")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(words) => Some(
            words
                .iter()
                .map(|w| w.as_str().map_or_else(|| w.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

/// The tool's name for display and for the policy: its own name where the agent gives it,
/// else its kind, else its title.
fn tool_name(fields: &ToolCallFields<'_>) -> String {
    own_tool_name(fields)
        .or_else(|| {
            fields
                .kind
                .as_deref()
                .filter(|k| *k != "other")
                .map(str::to_string)
        })
        .or_else(|| fields.title.as_deref().map(str::to_string))
        .unwrap_or_else(|| "tool".to_string())
}

/// The tool's own name, where the agent tells it (claude-agent-acp's
/// `_meta.claudeCode.toolName`).
fn own_tool_name(fields: &ToolCallFields<'_>) -> Option<String> {
    fields
        ._meta
        .and_then(|m| serde_json::from_str::<ToolMeta<'_>>(m.get()).ok())
        .and_then(|m| m.claude_code)
        .and_then(|c| c.tool_name)
        .map(Cow::into_owned)
}

fn flatten_values(values: &[OptionValue<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        if let Some(value) = &v.value {
            out.push(value.to_string());
        }
        if let Some(group) = &v.options {
            out.extend(flatten_values(group));
        }
    }
    out
}

/// A JSON-RPC error as one line: its message, its data (cut), and its code.
fn error_message(raw: &RawValue) -> String {
    let e: RpcError<'_> = serde_json::from_str(raw.get()).unwrap_or_default();
    let mut out = e
        .message
        .map(Cow::into_owned)
        .unwrap_or_else(|| "the agent reported an error".to_string());
    if let Some(data) = e.data.map(RawValue::get).filter(|d| *d != "null") {
        let data = match serde_json::from_str::<String>(data) {
            Ok(s) => s,
            Err(_) => data.to_string(),
        };
        let cut = crate::collector::cut_utf8(&data, MAX_ERROR_DATA_BYTES);
        out.push_str(": ");
        out.push_str(cut);
    }
    if let Some(code) = e.code {
        out.push_str(&format!(" (code {code})"));
    }
    out
}

impl Dialect for AcpDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        self.settle_asks(emit);
        let Some(msg) = parse_json::<Message<'_>>(line) else {
            return false;
        };
        match (msg.method.as_deref(), msg.id) {
            // A request of the agent's.
            (Some(method), Some(id)) => match method {
                "session/request_permission" => self.on_permission(id, msg.params, emit),
                other => {
                    self.reply_error(
                        id,
                        METHOD_NOT_FOUND,
                        &format!(
                            "Method not found: {other} (orchestrate offers no client methods)"
                        ),
                    );
                    true
                }
            },
            (Some("session/update"), None) => {
                msg.params.is_some_and(|p| self.on_update(p.get(), emit))
            }
            // Notifications orchestrate has no use for.
            (Some(_), None) => true,
            // A response to one of orchestrate's requests.
            (None, Some(id)) => {
                let Ok(id) = serde_json::from_str::<u64>(id.get()) else {
                    return false;
                };
                let Some(at) = self.pending.iter().position(|(p, _)| *p == id) else {
                    // Not a request of this conversation (nothing waits for it).
                    return msg.result.is_some() || msg.error.is_some();
                };
                let (_, kind) = self.pending.remove(at);
                self.on_response(kind, msg.result, msg.error, emit);
                true
            }
            (None, None) => false,
        }
    }

    fn attach(&mut self, input: ChildInput) {
        self.input = Some(input);
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": {
                "fs": {"readTextFile": false, "writeTextFile": false},
                "terminal": false,
            },
            "clientInfo": {"name": "orchestrate", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request("initialize", params, Pending::Initialize);
        self.state = State::Initializing;
    }

    /// Sends `session/cancel` while a prompt is under way; before the prompt (still
    /// starting, or setting the model) there is nothing to cancel, and SIGTERM comes at
    /// once.
    fn cancel(&mut self) -> bool {
        match self.state {
            State::Prompting => self.send_cancel(),
            // Already cancelled for a message: its answer is now the stop's.
            State::Interrupting => {}
            _ => return false,
        }
        self.state = State::Cancelling;
        true
    }

    fn listen(&mut self, inbox: Box<dyn Inbox>) -> bool {
        self.mailbox = Some(inbox);
        true
    }

    /// While a prompt is under way, takes what was sent: held for the prompt's end, or,
    /// for a message sent with `--interrupt`, the prompt is cancelled at once.
    fn check_mail(&mut self) {
        if self.state != State::Prompting {
            return;
        }
        let Some(mailbox) = &self.mailbox else {
            return;
        };
        if mailbox.collect().interrupt {
            self.send_cancel();
            self.state = State::Interrupting;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::inbox::{queue_for_test, Mailbox};
    use crate::session::RunDir;
    use pretty_assertions::assert_eq;

    /// A dialect attached and listening, past the handshake: its first prompt is sent.
    fn prompting() -> (AcpDialect, ChildInput, Mailbox, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = RunDir {
            path: dir.path().to_path_buf(),
        };
        let mut d = AcpDialect::new(Conversation {
            prompt: "Task: t".into(),
            ..Conversation::reading()
        });
        let input = ChildInput::new();
        let mailbox = Mailbox::new(&run_dir);
        d.attach(input.clone());
        assert!(d.listen(Box::new(mailbox.clone())));
        let mut events = Vec::new();
        for line in [
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#,
        ] {
            d.parse_line(line, &mut |e| events.push(format!("{e:?}")));
        }
        assert_eq!(
            methods(&input),
            ["initialize", "session/new", "session/prompt"]
        );
        (d, input, mailbox, dir)
    }

    fn methods(input: &ChildInput) -> Vec<String> {
        input
            .drain_lines()
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                match v["method"].as_str() {
                    Some("session/prompt") => {
                        let text = v["params"]["prompt"][0]["text"].as_str().unwrap();
                        if text == "Task: t" {
                            "session/prompt".to_string()
                        } else {
                            format!("session/prompt {text}")
                        }
                    }
                    Some(m) => m.to_string(),
                    None => format!("reply {}", v["id"]),
                }
            })
            .collect()
    }

    fn answer(d: &mut AcpDialect, id: u64, stop: &str) -> Vec<String> {
        let mut events = Vec::new();
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"{stop}"}}}}"#);
        d.parse_line(&line, &mut |e| events.push(format!("{e:?}")));
        events
    }

    fn deliveries(mailbox: &Mailbox) -> Vec<(String, Delivery)> {
        mailbox
            .messages()
            .into_iter()
            .map(|m| (m.text, m.delivery))
            .collect()
    }

    /// A message that arrives just as the prompt is answered, after the last tick, is
    /// still the next prompt of the same process: the answer's handling looks once more.
    #[test]
    fn a_message_that_comes_with_the_prompts_answer_is_the_next_prompt() {
        let (mut d, input, mailbox, dir) = prompting();
        d.check_mail();
        queue_for_test(
            &RunDir {
                path: dir.path().into(),
            },
            "one more",
            false,
        );
        let events = answer(&mut d, 2, "end_turn");
        assert!(!events.iter().any(|e| e == "Terminal"), "{events:?}");
        assert_eq!(methods(&input), ["session/prompt one more"]);
        assert!(input.is_open());
        let events = answer(&mut d, 3, "end_turn");
        assert!(events.iter().any(|e| e == "Terminal"), "{events:?}");
        assert!(!input.is_open(), "the conversation is over");
        assert_eq!(
            deliveries(&mailbox),
            [("one more".to_string(), Delivery::NextPrompt)]
        );
    }

    /// The child exits (or is stopped) after it took a message and before it answered it:
    /// `failed`; one that was held when the run was stopped: `notDelivered`.
    #[test]
    fn a_message_whose_turn_never_answers_failed_and_one_held_at_a_stop_was_not_delivered() {
        let (mut d, input, mailbox, dir) = prompting();
        let run_dir = RunDir {
            path: dir.path().into(),
        };
        queue_for_test(&run_dir, "first", false);
        answer(&mut d, 2, "end_turn");
        assert_eq!(methods(&input), ["session/prompt first"]);
        // The next prompt is under way; a second message is held for its end, then the
        // run is stopped.
        queue_for_test(&run_dir, "second", false);
        d.check_mail();
        assert!(d.cancel());
        let events = answer(&mut d, 3, "cancelled");
        assert!(events.iter().any(|e| e == "Terminal"), "{events:?}");
        assert_eq!(methods(&input), ["session/cancel"]);
        assert_eq!(
            deliveries(&mailbox),
            [
                ("first".to_string(), Delivery::Failed),
                ("second".to_string(), Delivery::NotDelivered)
            ]
        );
    }

    /// `--interrupt` cancels at once; a stop that comes meanwhile sends no second cancel
    /// and the message is not delivered.
    #[test]
    fn an_interrupt_cancels_once_and_a_stop_meanwhile_wins() {
        let (mut d, input, mailbox, dir) = prompting();
        queue_for_test(
            &RunDir {
                path: dir.path().into(),
            },
            "stop that",
            true,
        );
        d.check_mail();
        assert_eq!(methods(&input), ["session/cancel"]);
        assert!(d.cancel(), "the cancel under way is the stop's");
        assert_eq!(methods(&input), Vec::<String>::new());
        let events = answer(&mut d, 2, "cancelled");
        assert!(events.iter().any(|e| e == "Terminal"), "{events:?}");
        assert_eq!(
            deliveries(&mailbox),
            [("stop that".to_string(), Delivery::NotDelivered)]
        );
    }
}
