//! The result contract (SPEC sections 1–3): what every surface returns, the error codes,
//! and the process exit status each outcome maps to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::sandbox::SandboxInfo;
use crate::supervisor::{Leak, Termination};
use crate::worktree::WorktreeInfo;

/// Top-level result: `{content, details}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub content: Vec<TextContent>,
    pub details: Details,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    #[serde(rename = "type")]
    pub kind: TextKind,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TextKind {
    Text,
}

impl TextContent {
    pub fn text(text: impl Into<String>) -> Self {
        TextContent {
            kind: TextKind::Text,
            text: text.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Single,
    Management,
    Parallel,
    Chain,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    pub mode: Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub results: Vec<SingleResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<Streaming>,
    /// Only in the answer of `run --background` and of `wait`/`stop` on an unfinished run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<Background>,
}

/// A background run that has not finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Background {
    /// `running`, or `dead` when its supervisor died (then the result is a failure).
    pub status: String,
    pub session_file: String,
    pub supervisor_pid: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Streaming {
    pub display_items: Vec<DisplayItem>,
    pub usage: Usage,
    pub turn_count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorInfo {
    pub code: ErrorCode,
    pub message: String,
}

/// Token usage summed over every turn of a run. Missing numbers are 0, never null.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// USD.
    pub cost: f64,
    pub turns: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.cost += other.cost;
        self.turns += other.turns;
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum DisplayItem {
    Text {
        text: String,
    },
    ToolCall {
        name: String,
        args: serde_json::Value,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutReason {
    Runtime,
    Idle,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SingleResult {
    /// The task's own run id, in parallel and chain results (each task has its own folder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub agent: String,
    pub task: String,
    pub exit_code: i32,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub session_file: String,
    pub output: String,
    pub display_items: Vec<DisplayItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<TimeoutReason>,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub duration_ms: u64,
    pub attempts: u32,
    /// Lines of the child's stdout that were not usable events (non-JSON, invalid UTF-8,
    /// over the line limit). Counted so that a child printing garbage is visible, not fatal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_lines: u64,
    /// Set when descendants of the child outlived it and orchestrate had to kill them
    /// (`leak` says how); kept beside `leak` for readers of earlier results.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub leaked_processes: bool,
    /// How the child process ended; absent when it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination: Option<Termination>,
    /// Descendants that outlived the child; only when some did.
    #[serde(default, skip_serializing_if = "Leak::is_none")]
    pub leak: Leak,
    /// The child CLI's own session or thread id (what `run --resume` continues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_session_id: Option<String>,
    /// Restrictions of the agent that its CLI cannot express (tools it cannot limit, a
    /// turn limit it does not have), so that nothing is relaxed silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The sandbox the child ran in: `{mode, mechanism}` (`mechanism` is `none` when the
    /// mode is `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The git worktree the child worked in (`--isolation worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The eight error codes of SPEC section 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidInput,
    SubagentsDisabled,
    UnknownAgent,
    SubagentDisabled,
    SubagentDepthExceeded,
    SubagentTimeout,
    SubagentFailed,
    SubagentOutputTruncated,
}

/// Process exit statuses of SPEC section 3.
pub mod exit_status {
    pub const SUCCESS: i32 = 0;
    pub const FAILURE: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const REFUSED: i32 = 3;
    pub const TIMEOUT: i32 = 124;
    pub const CANCELLED: i32 = 130;
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 8] = [
        ErrorCode::InvalidInput,
        ErrorCode::SubagentsDisabled,
        ErrorCode::UnknownAgent,
        ErrorCode::SubagentDisabled,
        ErrorCode::SubagentDepthExceeded,
        ErrorCode::SubagentTimeout,
        ErrorCode::SubagentFailed,
        ErrorCode::SubagentOutputTruncated,
    ];

    /// Its name in the contract, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::SubagentsDisabled => "SUBAGENTS_DISABLED",
            ErrorCode::UnknownAgent => "UNKNOWN_AGENT",
            ErrorCode::SubagentDisabled => "SUBAGENT_DISABLED",
            ErrorCode::SubagentDepthExceeded => "SUBAGENT_DEPTH_EXCEEDED",
            ErrorCode::SubagentTimeout => "SUBAGENT_TIMEOUT",
            ErrorCode::SubagentFailed => "SUBAGENT_FAILED",
            ErrorCode::SubagentOutputTruncated => "SUBAGENT_OUTPUT_TRUNCATED",
        }
    }

    /// The mode a result carrying this error has when no run took place.
    pub fn mode(self) -> Mode {
        match self {
            ErrorCode::SubagentsDisabled | ErrorCode::SubagentDepthExceeded => Mode::Management,
            _ => Mode::Single,
        }
    }

    pub fn exit_status(self) -> i32 {
        match self {
            ErrorCode::InvalidInput | ErrorCode::UnknownAgent => exit_status::USAGE,
            ErrorCode::SubagentsDisabled
            | ErrorCode::SubagentDisabled
            | ErrorCode::SubagentDepthExceeded => exit_status::REFUSED,
            ErrorCode::SubagentTimeout => exit_status::TIMEOUT,
            ErrorCode::SubagentFailed | ErrorCode::SubagentOutputTruncated => exit_status::FAILURE,
        }
    }
}

impl RunResult {
    /// A result for a refusal before anything ran: `content` carries the message.
    pub fn refusal(code: ErrorCode, message: impl Into<String>, run_id: Option<String>) -> Self {
        let message = message.into();
        RunResult {
            content: vec![TextContent::text(message.clone())],
            details: Details {
                mode: code.mode(),
                run_id,
                results: Vec::new(),
                error: Some(ErrorInfo { code, message }),
                streaming: None,
                background: None,
            },
        }
    }

    /// The process exit status for this result (SPEC section 3). A run that was
    /// cancelled by a signal exits 130 whatever else it says; the caller knows that.
    pub fn exit_status(&self) -> i32 {
        match &self.details.error {
            None => exit_status::SUCCESS,
            Some(e) if e.code == ErrorCode::SubagentOutputTruncated => {
                // Truncated-but-successful is success; a run stopped at the hard cap failed.
                if self.details.results.iter().all(|r| r.error.is_none()) {
                    exit_status::SUCCESS
                } else {
                    exit_status::FAILURE
                }
            }
            Some(e) => e.code.exit_status(),
        }
    }

    /// Serializes to one line. Never fails in practice; if it did, a minimal valid JSON
    /// error object is returned instead, so stdout is never invalid JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| internal_error_json(&e.to_string()))
    }
}

/// The JSON printed when orchestrate itself fails in a way that left no result.
pub fn internal_error_json(message: &str) -> String {
    let result = RunResult::refusal(
        ErrorCode::SubagentFailed,
        format!("orchestrate internal error: {message}"),
        None,
    );
    serde_json::to_string(&result).unwrap_or_else(|_| {
        r#"{"content":[{"type":"text","text":"orchestrate internal error"}],"details":{"mode":"single","results":[],"error":{"code":"SUBAGENT_FAILED","message":"orchestrate internal error"}}}"#.to_string()
    })
}

/// A v4 UUID's first 8 hex characters.
pub fn new_run_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    id[..8].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn single_result_serializes_to_the_contract_shape() {
        let r = SingleResult {
            run_id: None,
            agent: "explorer".into(),
            task: "find auth".into(),
            exit_code: 124,
            usage: Usage::default(),
            error: Some("Subagent timed out after 1000ms without activity.".into()),
            session_file: "/s/session.jsonl".into(),
            output: "partial".into(),
            display_items: vec![
                DisplayItem::Text { text: "hi".into() },
                DisplayItem::ToolCall {
                    name: "read".into(),
                    args: json!({"path": "a"}),
                },
            ],
            timeout_reason: Some(TimeoutReason::Idle),
            backend: "pi".into(),
            model: None,
            duration_ms: 1001,
            attempts: 1,
            skipped_lines: 0,
            leaked_processes: false,
            termination: None,
            leak: Leak::None,
            child_session_id: None,
            warnings: Vec::new(),
            sandbox: None,
            worktree: None,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "agent": "explorer", "task": "find auth", "exitCode": 124,
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                "error": "Subagent timed out after 1000ms without activity.",
                "sessionFile": "/s/session.jsonl", "output": "partial",
                "displayItems": [{"type": "text", "text": "hi"}, {"type": "toolCall", "name": "read", "args": {"path": "a"}}],
                "timeoutReason": "idle", "backend": "pi", "durationMs": 1001, "attempts": 1
            })
        );
    }

    #[test]
    fn refusal_has_mode_code_and_exit_status() {
        let r = RunResult::refusal(
            ErrorCode::SubagentDepthExceeded,
            "too deep",
            Some("abcd1234".into()),
        );
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({
                "content": [{"type": "text", "text": "too deep"}],
                "details": {"mode": "management", "runId": "abcd1234", "results": [],
                            "error": {"code": "SUBAGENT_DEPTH_EXCEEDED", "message": "too deep"}}
            })
        );
        assert_eq!(r.exit_status(), 3);
        assert_eq!(
            RunResult::refusal(ErrorCode::UnknownAgent, "x", None).exit_status(),
            2
        );
        assert_eq!(
            RunResult::refusal(ErrorCode::InvalidInput, "x", None).exit_status(),
            2
        );
        assert_eq!(
            RunResult::refusal(ErrorCode::SubagentTimeout, "x", None).exit_status(),
            124
        );
        assert_eq!(
            RunResult::refusal(ErrorCode::SubagentFailed, "x", None).exit_status(),
            1
        );
    }

    #[test]
    fn error_code_names_are_their_serialized_form() {
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }

    #[test]
    fn run_id_is_eight_hex_chars() {
        let id = new_run_id();
        assert_eq!(id.len(), 8);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(id, new_run_id());
    }
}
