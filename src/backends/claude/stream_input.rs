//! claude's streamed input (`claude -p --input-format stream-json --replay-user-messages`):
//! the stream-json events on stdout, and user messages on stdin, one JSON object a line
//! (`{"type":"user","message":{"role":"user","content":"…"}}`). The task is the first; a
//! message sent to the run while claude works is written at once, and claude takes it at
//! its next tool-call boundary, into the turn under way (`steered`); one that comes after
//! a turn ended is the next user message (`nextPrompt`). `send --interrupt` writes an
//! `interrupt` control request and the messages follow the interrupted turn's end
//! (`interrupted`); a stop interrupts the turn the same way before the kill grace. Once a
//! turn ends with nothing held or untaken, stdin is closed, on which claude exits.
//!
//! claude asks here too before a tool call its allow rules do not cover (`can_use_tool`
//! control requests, see [`super::permission`]): each is answered by the run's
//! permission policy, or put to the parent, and recorded.
//!
//! Facts this relies on (claude 2.1.332, seen against the mock LLM): each turn ends with a
//! `result` line while stdin stays open, and each turn repeats the `system/init` line.
//! A result's `usage` and `num_turns` are that turn's own, its `total_cost_usd` the
//! process's so far. Every user message claude takes is printed back with `isReplay: true`
//! (the task too): a message written while a tool runs comes back before the turn's
//! `result` (claude appended it to the tool's result for the model); one written while
//! the model answers without tools comes back after it, as a turn of its own. An
//! interrupted turn ends with a `result` of subtype `error_during_execution`.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{json, Value};

use super::permission::{self, ClaudeReply, ControlLine};
use super::ClaudeDialect;
use crate::backends::ask_parent::{self, Asking, Asks, Reply};
use crate::backends::permissions::{DecidedBy, Decision, PermissionPolicy, PermissionRecord};
use crate::backends::{ChildInput, Delivery, Dialect, Inbox};
use crate::events::AgentEvent;
use crate::result::Usage;

/// Where the conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not attached to a child (a dialect that only reads).
    Detached,
    /// A turn is under way, or a user message is written for one.
    Turn,
    /// An interrupt was sent for a message sent with `--interrupt`: the turn's `result`
    /// ends it, and the messages are the next user message.
    Interrupting,
    /// An interrupt was sent for a stop: the turn's `result` ends the conversation.
    Stopping,
    Done,
}

/// A user line printed back, as far as it is read.
#[derive(Deserialize)]
struct Replay<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(rename = "isReplay", default)]
    is_replay: bool,
}

/// How claude prints a user message it took (`"isReplay":true`, no space: claude writes
/// compact JSON). Inside a string the quotes would be escaped, so a tool's output cannot
/// hold this sequence; a line that has it is read whole to be sure.
const REPLAY_MARK: &str = r#""isReplay":true"#;

/// What claude's requests to orchestrate hold (`control_request`, and
/// `control_cancel_request` when it takes one back): compact JSON, as for [`REPLAY_MARK`];
/// a line that has it is read whole to be sure.
const CONTROL_MARK: &str = r#""type":"control_"#;

pub(crate) struct ClaudeStreamDialect {
    read: ClaudeDialect,
    prompt: String,
    input: Option<ChildInput>,
    mailbox: Option<Box<dyn Inbox>>,
    state: State,
    /// The user messages written and not yet printed back (claude has not taken them),
    /// oldest first, each with the sent messages it carries (none for the task).
    untaken: VecDeque<Vec<String>>,
    /// A turn ended while messages were untaken: claude runs them as a turn of their own.
    between_turns: bool,
    /// The turns answered so far, added up: tokens and turns of each `result`, and the
    /// cost of the latest (claude's own running total).
    total: Usage,
    /// Control requests sent, for their ids.
    requests: u64,
    /// Model turns ended since the last `result`: an interrupted turn's count, whose
    /// `num_turns` claude inflates (2 for one cut-off request, 3 for one cut off in its
    /// tool call, as 2.1.332 reports them).
    turn_ends: u64,
    /// How claude's permission requests are answered.
    policy: PermissionPolicy,
    /// Permission requests put to the parent and not yet emitted.
    asks: Asks<ClaudeReply>,
}

impl ClaudeStreamDialect {
    pub(crate) fn new(prompt: String, policy: PermissionPolicy) -> ClaudeStreamDialect {
        ClaudeStreamDialect {
            read: ClaudeDialect::default(),
            prompt,
            policy,
            asks: Asks::default(),
            input: None,
            mailbox: None,
            state: State::Detached,
            untaken: VecDeque::new(),
            between_turns: false,
            total: Usage::default(),
            requests: 0,
            turn_ends: 0,
        }
    }

    fn send(&self, line: &serde_json::Value) {
        if let Some(input) = &self.input {
            if let Err(e) = input.send_json(line) {
                tracing::debug!("not written to claude: {e}");
            }
        }
    }

    fn write_user(&mut self, text: &str, carries: Vec<String>) {
        self.send(&json!({"type": "user", "message": {"role": "user", "content": text}}));
        self.untaken.push_back(carries);
    }

    fn interrupt(&mut self) {
        self.requests += 1;
        self.send(&json!({
            "type": "control_request",
            "request_id": format!("orchestrate-{}", self.requests),
            "request": {"subtype": "interrupt"},
        }));
    }

    /// claude printed back a user message it took.
    fn taken(&mut self) {
        let Some(carries) = self.untaken.pop_front() else {
            return;
        };
        if std::mem::take(&mut self.between_turns) {
            // Written during a turn, but that turn ended without it: it began a turn.
            if let Some(mailbox) = &self.mailbox {
                mailbox.delivered_as(&carries, Delivery::NextPrompt);
            }
        }
    }

    /// A `result` ended a turn; `error` is its failure, if it failed.
    fn turn_ended(&mut self, error: Option<String>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        let delivery = match (self.state, error) {
            // The failure of a turn orchestrate interrupted is none of the run's.
            (State::Interrupting, _) => Delivery::Interrupted,
            (State::Stopping, _) => return self.finish(emit),
            (State::Turn, None) => Delivery::NextPrompt,
            (State::Turn | State::Detached | State::Done, error) => {
                if let Some(e) = error {
                    emit(AgentEvent::ProviderError(e.into()));
                }
                return self.finish(emit);
            }
        };
        if !self.untaken.is_empty() {
            // claude goes on with what it has not taken yet, as its next turn.
            self.between_turns = true;
            return;
        }
        self.state = State::Turn;
        let held = match &self.mailbox {
            Some(mailbox) => {
                mailbox.answered();
                mailbox.collect();
                mailbox.write_held(delivery)
            }
            None => Vec::new(),
        };
        if held.is_empty() {
            return self.finish(emit);
        }
        let text = held.join("\n\n");
        self.write_user(&text, held);
    }

    fn finish(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        self.asks.withdraw_all(self.input.as_ref());
        self.settle_asks(emit);
        self.state = State::Done;
        emit(AgentEvent::Terminal);
        if let Some(input) = &self.input {
            input.close();
        }
    }

    /// Emits the parent's decisions that came since the last line.
    fn settle_asks(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        for settled in self.asks.take_settled() {
            if let Some(warning) = settled.warning {
                emit(AgentEvent::Warning(Cow::Owned(warning)));
            }
            emit(AgentEvent::Permission(settled.record));
        }
    }

    /// A control line from claude: a permission request answered (or put to the parent),
    /// or one claude takes back. False when the line is none.
    fn on_control(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Ok(c) = serde_json::from_str::<ControlLine>(line) else {
            return false;
        };
        let id = c.request_id.unwrap_or(Value::Null);
        match (c.kind.as_str(), c.request) {
            ("control_cancel_request", _) => {
                // The question is moot: claude rejected the call itself (an interrupt).
                self.asks.withdraw_where(|r| r.request_id == id, None);
                self.settle_asks(emit);
                true
            }
            ("control_request", Some(req)) if req.subtype == "can_use_tool" => {
                let name = req.tool_name.unwrap_or_else(|| "tool".to_string());
                let ask = permission::tool_ask(
                    &name,
                    permission::input_or_empty(req.input),
                    req.description,
                );
                self.on_permission(id, ask, emit);
                true
            }
            ("control_request", Some(req)) => {
                self.send(&permission::unsupported(&id, &req.subtype));
                true
            }
            _ => false,
        }
    }

    /// Answers a permission request by the policy, or puts it to the parent (its answer
    /// is then written when it comes); while the turn is being interrupted, rejects it.
    fn on_permission(
        &mut self,
        id: Value,
        ask: permission::ToolAsk,
        emit: &mut dyn FnMut(AgentEvent<'_>),
    ) {
        let reply = ClaudeReply {
            request_id: id,
            input: ask.input.clone(),
        };
        let stopping = matches!(
            self.state,
            State::Interrupting | State::Stopping | State::Done
        );
        let decided = if stopping {
            (Decision::Cancelled, DecidedBy::Stop, None)
        } else {
            self.policy.decide(&ask.request)
        };
        if let (false, Some(asker), Some(input)) = (stopping, self.policy.parent(), &self.input) {
            let asked = self.asks.ask(
                asker,
                input,
                ask_parent::Request {
                    reply: reply.clone(),
                    record: ask.record.clone(),
                    fallback: decided.clone(),
                    question: ask.question(&asker.agent),
                },
            );
            match asked {
                Asking::Out => return,
                Asking::TooMany => emit(AgentEvent::Warning(Cow::Owned(format!(
                    "permissions ask: {} questions of this run were already out to the parent; more requests were decided by policy",
                    ask_parent::MAX_OPEN_QUESTIONS
                )))),
                Asking::NoRuntime => {}
            }
        }
        let (line, (decision, by, reason)) = reply.answer(decided);
        self.send(&line);
        emit(AgentEvent::Permission(PermissionRecord {
            decision,
            by,
            reason,
            ..ask.record
        }));
    }
}

impl Dialect for ClaudeStreamDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        if self.policy.parent().is_some() {
            self.settle_asks(emit);
        }
        // claude writes its requests and the lines it prints back with their type first:
        // other lines (the answer, tool results' text) are not searched for the marks.
        let kind = crate::backends::leading_type(line);
        if kind.is_none_or(|k| k.starts_with("control_"))
            && line.contains(CONTROL_MARK)
            && self.on_control(line, emit)
        {
            return true;
        }
        if kind.is_none_or(|k| k == "user") && line.contains(REPLAY_MARK) {
            if let Ok(r) = serde_json::from_str::<Replay<'_>>(line) {
                if r.is_replay && r.kind == "user" {
                    self.taken();
                    return true;
                }
            }
        }
        let mut ended = false;
        let mut error: Option<String> = None;
        let total = &mut self.total;
        let turn_ends = &mut self.turn_ends;
        let interrupted = matches!(self.state, State::Interrupting | State::Stopping);
        let known = self.read.parse_line(line, &mut |ev| match ev {
            AgentEvent::TurnEnd => {
                *turn_ends += 1;
                emit(AgentEvent::TurnEnd);
            }
            AgentEvent::UsageTotal(mut turn) => {
                if interrupted {
                    turn.turns = *turn_ends;
                }
                *turn_ends = 0;
                total.input = total.input.saturating_add(turn.input);
                total.output = total.output.saturating_add(turn.output);
                total.cache_read = total.cache_read.saturating_add(turn.cache_read);
                total.cache_write = total.cache_write.saturating_add(turn.cache_write);
                total.turns = total.turns.saturating_add(turn.turns);
                total.cost = turn.cost;
                emit(AgentEvent::UsageTotal(*total));
            }
            // Said once the turn's end decides whether it is the run's failure.
            AgentEvent::ProviderError(e) => error = Some(e.into_owned()),
            AgentEvent::Terminal => ended = true,
            other => emit(other),
        });
        if ended {
            self.turn_ended(error, emit);
        } else if let Some(e) = error {
            emit(AgentEvent::ProviderError(e.into()));
        }
        known
    }

    fn attach(&mut self, input: ChildInput) {
        self.input = Some(input);
        self.state = State::Turn;
        let prompt = std::mem::take(&mut self.prompt);
        self.write_user(&prompt, Vec::new());
    }

    /// The turn under way is interrupted; its `result` ends the conversation.
    /// The questions still out to the parent are withdrawn (each call denied: claude has
    /// usually taken the request back on the interrupt already, and ignores the answer).
    fn cancel(&mut self) -> bool {
        let interrupted = match self.state {
            State::Turn | State::Interrupting => {
                self.interrupt();
                self.state = State::Stopping;
                true
            }
            State::Detached | State::Stopping | State::Done => false,
        };
        self.asks.withdraw_all(self.input.as_ref());
        interrupted
    }

    fn listen(&mut self, inbox: Box<dyn Inbox>) -> bool {
        self.mailbox = Some(inbox);
        true
    }

    /// While a turn is under way: a message is written at once (claude takes it at its
    /// next tool-call boundary, or as its next turn), or, sent with `--interrupt`, held
    /// while the turn is interrupted.
    fn check_mail(&mut self) {
        if self.state != State::Turn {
            return;
        }
        let Some(mailbox) = &self.mailbox else {
            return;
        };
        if mailbox.collect().interrupt {
            self.interrupt();
            self.state = State::Interrupting;
            return;
        }
        for text in mailbox.write_held(Delivery::Steered) {
            let line = text.clone();
            self.write_user(&line, vec![text]);
        }
    }
}

#[cfg(test)]
mod tests;
