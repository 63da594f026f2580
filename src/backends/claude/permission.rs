//! claude's own permission hook, answered by orchestrate: with streamed input and
//! `--permission-mode default --permission-prompt-tool stdio`, claude asks on stdout for
//! every tool call its allow rules (`--allowedTools`) do not cover, and waits for the
//! answer on stdin. The request is decided by the run's [`PermissionPolicy`] as an ACP
//! agent's is (or put to the parent under `permissions: ask`), and recorded.
//!
//! Facts this relies on (claude 2.1.332, seen against the mock LLM):
//! - A request is `{"type":"control_request","request_id":"<uuid>","request":{"subtype":
//!   "can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"echo x >
//!   f.txt","description":"write f"},"description":"write f","permission_suggestions":[…],
//!   "blocked_path":"/work/f.txt","tool_use_id":"toolu_0"}}`, printed right after the
//!   `assistant` line with the call (`blocked_path` only where claude names one; a Write's
//!   `description` is the file's name).
//! - Only in `--permission-mode default`: `dontAsk` still denies silently, and a call an
//!   allow rule covers (`Read`, `Bash(git log:*)`) is run without a request.
//! - It takes `{"type":"control_response","response":{"subtype":"success","request_id":…,
//!   "response":{"behavior":"allow","updatedInput":{…}}}}` (also without `updatedInput`),
//!   and runs the tool; or `…{"behavior":"deny","message":"…"}`, after which the model gets
//!   a `tool_result` with `is_error: true` whose content is the message, the tool is not
//!   run, and the turn's `result` lists the call in `permission_denials`. It prints each
//!   response it reads back on stdout (`type: control_response`), which is read as nothing.
//! - Unanswered, it waits: no answer within 15 s ended nothing (closing its stdin ends the
//!   wait: the model is told the request failed). An `interrupt` control request while one
//!   is open makes claude take it back itself (`{"type":"control_cancel_request",
//!   "request_id":…}`), reject the call, and end the turn with a `result`; an answer that
//!   comes after that is ignored.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::backends::ask_parent::{Decided, Question, Reply};
use crate::backends::permissions::{DecidedBy, Decision, PermissionRecord, ToolRequest};

/// A `control_request` or `control_cancel_request` line, as far as it is read.
#[derive(Deserialize)]
pub(super) struct ControlLine {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub request_id: Option<Value>,
    #[serde(default)]
    pub request: Option<ControlRequest>,
}

#[derive(Deserialize)]
pub(super) struct ControlRequest {
    #[serde(default)]
    pub subtype: String,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
}

/// One `can_use_tool` request, read.
pub(super) struct ToolAsk {
    pub request: ToolRequest,
    pub record: PermissionRecord,
    /// The call's input, given back with an allow (`updatedInput`).
    pub input: Value,
    /// The command it runs, for the parent's question.
    pub command: Option<String>,
}

/// claude's tool `name` called with `input`, as the policy sees it: what kind of call it
/// is, and the files it names.
pub(super) fn tool_ask(name: &str, input: Value, description: Option<String>) -> ToolAsk {
    let kind = match name {
        "Read" | "Grep" | "Glob" | "LS" | "NotebookRead" => Some("read"),
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => Some("edit"),
        "Bash" => Some("execute"),
        "WebFetch" | "WebSearch" => Some("fetch"),
        "EnterPlanMode" | "ExitPlanMode" => Some("switch_mode"),
        // claude's own name, judged by it: a tool the agent lists by name, or none.
        _ => None,
    };
    let field = |k: &str| input.get(k).and_then(Value::as_str).map(str::to_string);
    let paths: Vec<_> = ["file_path", "notebook_path", "path"]
        .iter()
        .filter_map(|k| field(k))
        .collect();
    let command = field("command").filter(|_| name == "Bash");
    let title = command
        .clone()
        .or_else(|| paths.first().cloned())
        .or_else(|| field("url"))
        .or_else(|| field("query"))
        .or_else(|| field("pattern"))
        .or(description);
    ToolAsk {
        request: ToolRequest {
            name: name.to_string(),
            kind: kind.map(str::to_string),
            paths: paths.iter().map(Into::into).collect(),
        },
        record: PermissionRecord {
            tool: name.to_string(),
            decision: Decision::Cancelled,
            by: DecidedBy::Stop,
            title,
            reason: None,
        },
        input,
        command,
    }
}

impl ToolAsk {
    /// The question put to the parent about it.
    pub(super) fn question(&self, agent: &str) -> String {
        Question {
            agent,
            tool: &self.request.name,
            kind: self.request.kind.as_deref(),
            command: self.command.as_deref(),
            paths: self
                .request
                .paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            title: self.record.title.as_deref(),
        }
        .message()
    }
}

/// How one request is answered: claude's request id, and the call's input (an allow
/// gives it back unchanged).
#[derive(Debug, Clone)]
pub(super) struct ClaudeReply {
    pub request_id: Value,
    pub input: Value,
}

impl ClaudeReply {
    fn line(&self, response: Value) -> Value {
        json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": self.request_id, "response": response},
        })
    }
}

impl Reply for ClaudeReply {
    fn answer(&self, decided: Decided) -> (Value, Decided) {
        let response = match decided.0 {
            Decision::Allowed => json!({"behavior": "allow", "updatedInput": self.input}),
            Decision::Rejected | Decision::Cancelled => {
                json!({"behavior": "deny", "message": denial(&decided)})
            }
        };
        (self.line(response), decided)
    }

    fn withdrawn(&self) -> Option<Value> {
        let stopped = (Decision::Cancelled, DecidedBy::Stop, None);
        Some(self.line(json!({"behavior": "deny", "message": denial(&stopped)})))
    }
}

/// What the model reads for a call it may not make: who decided, and why.
pub(super) fn denial((_, by, reason): &Decided) -> String {
    let by = match by {
        DecidedBy::Policy => "orchestrate's permission policy",
        DecidedBy::Deny => "orchestrate (permissions: deny)",
        // `allow` rejects nothing; said plainly should it ever.
        DecidedBy::Allow => "orchestrate",
        DecidedBy::Parent => "the parent agent",
        // A stop, or `send --interrupt`: either interrupts the turn.
        DecidedBy::Stop => "orchestrate: the turn is being interrupted",
    };
    match reason {
        Some(why) => format!("Permission denied by {by}: {why}."),
        None => format!("Permission denied by {by}."),
    }
}

/// The answer to a control request other than `can_use_tool` (none is asked of a client
/// for the options orchestrate passes): an error, so that claude never waits for it.
pub(super) fn unsupported(request_id: &Value, subtype: &str) -> Value {
    json!({
        "type": "control_response",
        "response": {
            "subtype": "error",
            "request_id": request_id,
            "error": format!("orchestrate does not answer {subtype:?} requests"),
        },
    })
}

/// An empty object where claude sent no input (an allow must give one back).
pub(super) fn input_or_empty(input: Option<Value>) -> Value {
    input.unwrap_or_else(|| Value::Object(Map::new()))
}
