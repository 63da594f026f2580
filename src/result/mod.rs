//! The result contract (README, The result and Exit statuses): what every surface
//! returns, the error codes,
//! and the process exit status each outcome maps to.

mod isolation;
mod message;
mod network;
mod permissions;
mod termination;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use isolation::{DiffStat, JobId, RunnerInfo, SandboxInfo, SandboxMode, WorktreeInfo};
pub use message::{Delivery, Message};
pub use network::{DeniedHost, Network, NetworkInfo};
pub(crate) use permissions::counts as permission_counts;
pub use permissions::{DecidedBy, Decision, PermissionRecord};
pub use termination::{KillKind, Leak, StopReason, Termination};

/// How much of a result goes to a parent. Lean: no `displayItems`,
/// `task` cut to [`MAX_LEAN_TASK_CHARS`], and on stdout no `output` that `content[0].text`
/// already holds. Full: everything, as `result.json` keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DetailLevel {
    #[default]
    Lean,
    Full,
}

/// A task longer than this many characters is cut (plus `…`) in a lean result.
pub const MAX_LEAN_TASK_CHARS: usize = 200;

/// Top-level result: `{content, details}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub content: Vec<TextContent>,
    pub details: Details,
}

/// The result and the process exit status it maps to (130 when cancelled, which the
/// result alone cannot say).
#[derive(Debug, Clone)]
pub(crate) struct RunOutput {
    pub result: RunResult,
    pub exit_status: i32,
}

impl RunOutput {
    pub(crate) fn from_result(result: RunResult) -> Self {
        let exit_status = result.exit_status();
        RunOutput {
            result,
            exit_status,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    #[serde(rename = "type")]
    pub kind: ContentKind,
    pub text: String,
}

/// What a piece of `content` is: text, the only kind a result has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentKind {
    Text,
}

impl TextContent {
    pub fn text(text: impl Into<String>) -> Self {
        TextContent {
            kind: ContentKind::Text,
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
    /// A fan-out's scheduler, per provider and model, where a provider pushed back with
    /// rate limits or overload.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scheduler: BTreeMap<String, LaneReport>,
    /// The whole tree's spend: every result's `usage` and what the orchestrate runs they
    /// started reported (`nestedUsage`); only when some did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_usage: Option<Usage>,
}

/// What the scheduler did with one provider's (and model's) children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LaneReport {
    /// The most children it ran at once.
    pub peak: usize,
    /// The lowest number of children at once it went down to.
    pub floor: usize,
    /// Rate-limit and overload reports from the children.
    pub throttled: u32,
}

/// A background run that has not finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Background {
    /// `running`, or `dead` when its supervisor died (then the result is a failure).
    pub status: String,
    pub session_file: String,
    pub supervisor_pid: u32,
    /// A fan-out's tasks in order, each with its own run id (what `send` takes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<BackgroundTask>,
}

/// A task of a background fan-out: its agent and its own run id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTask {
    pub agent: String,
    pub run_id: String,
}

/// What a streaming update says about the run so far: counters and the tool running now.
/// `displayItems` only with `--details full`: a lean update stays small however long the
/// run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Streaming {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub display_items: Vec<DisplayItem>,
    pub usage: Usage,
    pub turn_count: u64,
    /// Tool calls so far.
    #[serde(default)]
    pub tool_calls: u64,
    /// The tool the child called last, while no text has followed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_tool: Option<String>,
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
    /// Every token counted: input, output and both cache counts (at most `u64::MAX`).
    pub fn tokens(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// Adds `other`, and says whether a sum saturated: a count stops at `u64::MAX` and a
    /// cost at `f64::MAX` (JSON has no infinity: it would be printed as null).
    pub fn add(&mut self, other: &Usage) -> bool {
        let mut saturated = false;
        let mut count = |a: &mut u64, b: u64| {
            *a = a.checked_add(b).unwrap_or_else(|| {
                saturated = true;
                u64::MAX
            })
        };
        count(&mut self.input, other.input);
        count(&mut self.output, other.output);
        count(&mut self.cache_read, other.cache_read);
        count(&mut self.cache_write, other.cache_write);
        count(&mut self.turns, other.turns);
        let cost = self.cost + other.cost;
        saturated |= !cost.is_finite();
        self.cost = add_usd(self.cost, other.cost);
        saturated
    }
}

/// `a + b` in USD, kept at `f64::MAX` rather than becoming infinite.
pub fn add_usd(a: f64, b: f64) -> f64 {
    let sum = a + b;
    if sum.is_finite() {
        sum
    } else {
        f64::MAX
    }
}

/// A sum of costs rounded to a ten-billionth of a dollar: sums of per-request costs drift
/// in the last bits (0.0005 + 0.0007 = 0.0012000000000000001). Amounts too large for that
/// to matter are left as they are (scaling them up would make them infinite).
pub fn round_usd(amount: f64) -> f64 {
    if amount.abs() < 1e6 {
        (amount * 1e10).round() / 1e10
    } else {
        amount
    }
}

/// The budget that stopped a child: `{"kind": "turns", "limit": 2,
/// "used": 2}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Limit {
    Turns {
        limit: u64,
        used: u64,
    },
    /// Input + output + cache-write tokens.
    Tokens {
        limit: u64,
        used: u64,
    },
    /// USD.
    Cost {
        limit: f64,
        used: f64,
    },
    /// The tree's cost budget (`--max-total-cost` over nested orchestrate runs): USD
    /// spent by every run of the tree this orchestrate knows of.
    TreeCost {
        limit: f64,
        used: f64,
    },
    /// The tree's token budget (`--max-total-tokens`), as [`Limit::Tokens`] counts them.
    TreeTokens {
        limit: u64,
        used: u64,
    },
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
    /// One tool call ran past the tool limit with no tool finishing.
    Tool,
    /// The job waited in the cluster engine's queue for the queue timeout without starting.
    Queue,
}

/// One attempt of a run that took several (retries, fallback models): which model, how
/// its child ended, and its error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    /// Absent from a lean result on stdout when `content[0].text` holds it.
    #[serde(default)]
    pub output: String,
    /// Only in the full shape (`--details full`, `result.json`).
    #[serde(default)]
    pub display_items: Vec<DisplayItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_reason: Option<TimeoutReason>,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub duration_ms: u64,
    pub attempts: u32,
    /// Lines of the child's stdout that were not usable events (non-JSON, not an event,
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
    /// The answer's JSON value, validated against the output schema (structured answers);
    /// `content[0].text` holds it as compact JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<serde_json::Value>,
    /// Restrictions of the agent that its CLI cannot express (tools it cannot limit, a
    /// budget it cannot be held to), so that nothing is relaxed silently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The budget that stopped the child, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
    /// Every attempt, in order, when there was more than one (`model` is then the one
    /// that gave this result).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts_detail: Vec<AttemptDetail>,
    /// The sandbox the child ran in: `{mode, mechanism}` (`mechanism` is `none` when the
    /// mode is `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The child's network: `{mode}`, and with `provider` the hosts it was allowed and
    /// those it was refused (`denied: [{host, count}]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkInfo>,
    /// The git worktree the child worked in (`--isolation worktree`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeInfo>,
    /// Where the child ran, when not here: the engine, the job's id, node and final state,
    /// and how long it waited to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<RunnerInfo>,
    /// What the orchestrate runs this child started reported spending (their whole
    /// trees), as they reported it; only when they reported something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_usage: Option<Usage>,
    /// Every permission the child asked for and how it was answered, in order (a lean
    /// result has only the counts: `{"allowed": 2, "rejected": 1}`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionRecord>,
    /// The messages sent to the run (`orchestrate send`), in order, and how each reached
    /// the child; only when there were some.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The eight error codes every surface answers with.
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

/// Process exit statuses, one per kind of outcome.
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
                scheduler: Default::default(),
                tree_usage: None,
            },
        }
    }

    /// The process exit status for this result. A run that was
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

    /// Serializes the full shape to one line. Never fails in practice; if it did, a minimal
    /// valid JSON error object is returned instead, so stdout is never invalid JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| internal_error_json(&e.to_string()))
    }

    /// One line of what a parent reading stdout gets at `level`: lean leaves out
    /// `displayItems` and each successful result's `output` that `content[0].text`
    /// already holds.
    pub fn to_stdout_line(&self, level: DetailLevel) -> String {
        if level == DetailLevel::Full {
            return self.to_json_line();
        }
        match serde_json::to_value(self) {
            Ok(mut v) => {
                let text = self.content.first().map_or("", |c| c.text.as_str());
                lean_details(&mut v["details"], Some(text));
                v.to_string()
            }
            Err(e) => internal_error_json(&e.to_string()),
        }
    }

    /// The details an MCP client gets as `structuredContent` at `level`: lean ones keep
    /// `output`, since some clients show the model only `structuredContent`.
    pub fn details_value(&self, level: DetailLevel) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.details).unwrap_or_else(|e| {
            serde_json::json!({"mode": "single", "results": [], "error": {
                "code": "SUBAGENT_FAILED",
                "message": format!("orchestrate internal error: {e}")}})
        });
        if level == DetailLevel::Lean {
            lean_details(&mut v, None);
        }
        v
    }
}

/// Leaves out of serialized details what a parent does not act on: each
/// result's `displayItems` and its sandbox's `layers`, its `task` past [`MAX_LEAN_TASK_CHARS`], the `output` of a
/// successful structured answer, and, when `shown` (the text the parent reads) is given,
/// the `output` of a successful result that it already holds whole (a single run's answer,
/// a parallel task's section); a streaming update's `displayItems`.
fn lean_details(details: &mut serde_json::Value, shown: Option<&str>) {
    let mode = details.get("mode").and_then(serde_json::Value::as_str);
    let (parallel, single) = (mode == Some("parallel"), mode == Some("single"));
    if let Some(results) = details
        .get_mut("results")
        .and_then(serde_json::Value::as_array_mut)
    {
        for r in results
            .iter_mut()
            .filter_map(serde_json::Value::as_object_mut)
        {
            r.remove("displayItems");
            if let Some(records) = r.get("permissions") {
                let records: Vec<PermissionRecord> =
                    serde_json::from_value(records.clone()).unwrap_or_default();
                r.insert("permissions".to_string(), permission_counts(&records));
            }
            // The layers that held: the warnings name any that is missing.
            if let Some(sandbox) = r
                .get_mut("sandbox")
                .and_then(serde_json::Value::as_object_mut)
            {
                sandbox.remove("layers");
            }
            if !r.contains_key("error") {
                leave_out_the_usual(r, single);
            }
            // A failed result keeps its partial output (nothing of the child's answer is
            // lost), even where the content quotes it. A parallel task's answer is a section of the content; a
            // chain's earlier steps are not the answer, whatever they have in common with it.
            // A structured answer is `structured` (and compact JSON in the content): the
            // raw text it was read from is not sent again.
            let structured = r.contains_key("structured") && !r.contains_key("error");
            let held = match (shown, r.get("output").and_then(serde_json::Value::as_str)) {
                (Some(text), Some(output)) if !r.contains_key("error") => {
                    text == output || (parallel && text.contains(output))
                }
                _ => false,
            } || structured;
            if held {
                r.remove("output");
            }
            lean_network(r);
            if let Some(serde_json::Value::String(task)) = r.get_mut("task") {
                if let Some((cut, _)) = task.char_indices().nth(MAX_LEAN_TASK_CHARS) {
                    task.truncate(cut);
                    task.push('…');
                }
            }
        }
    }
    if let Some(s) = details
        .get_mut("streaming")
        .and_then(serde_json::Value::as_object_mut)
    {
        s.remove("displayItems");
    }
}

/// Leaves out of a successful result what a parent does not act on: what says nothing
/// happened (a clean exit's termination, one attempt, a sandbox that held, the network
/// on), the child CLI's own session id (a run is continued by its run id), which CLI ran
/// and how long it took; and in a single run, the agent and the task the parent named
/// itself. What it acts on stays: the exit code, usage and cost, the session file, and
/// whatever says something happened (a worktree, warnings, retries, a leak, a runner, a
/// structured answer). The full record keeps everything.
fn leave_out_the_usual(r: &mut serde_json::Map<String, serde_json::Value>, single: bool) {
    use serde_json::json;
    if r.get("termination") == Some(&json!({"kind": "exited", "code": 0})) {
        r.remove("termination");
    }
    if r.get("attempts") == Some(&json!(1)) {
        r.remove("attempts");
    }
    let held = |s: &serde_json::Value| s["mode"] != "off";
    if r.get("sandbox").is_some_and(held) {
        r.remove("sandbox");
    }
    for key in ["childSessionId", "backend", "durationMs"] {
        r.remove(key);
    }
    if single {
        r.remove("agent");
        r.remove("task");
    }
}

/// A lean result's `network` is there only when the proxy refused something, so that a
/// parent sees an attempt to reach another host: `{mode, denied}`. What was allowed, and
/// a network where nothing was refused, are in the full result.
fn lean_network(result: &mut serde_json::Map<String, serde_json::Value>) {
    let refused = result
        .get("network")
        .and_then(|n| n.get("denied"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|d| !d.is_empty());
    if !refused {
        result.remove("network");
    } else if let Some(n) = result
        .get_mut("network")
        .and_then(serde_json::Value::as_object_mut)
    {
        n.remove("allowed");
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
            agent: "explorer".into(),
            task: "find auth".into(),
            exit_code: 124,
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
            duration_ms: 1001,
            attempts: 1,
            ..SingleResult::default()
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

    fn single(task: &str, output: &str, error: Option<&str>) -> SingleResult {
        SingleResult {
            agent: "explorer".into(),
            task: task.into(),
            exit_code: if error.is_some() { 1 } else { 0 },
            error: error.map(str::to_string),
            session_file: "/s/session.jsonl".into(),
            output: output.into(),
            display_items: vec![DisplayItem::ToolCall {
                name: "read".into(),
                args: json!({"path": "a"}),
            }],
            backend: "pi".into(),
            duration_ms: 5,
            attempts: 1,
            ..SingleResult::default()
        }
    }

    fn result(mode: Mode, text: &str, results: Vec<SingleResult>) -> RunResult {
        RunResult {
            content: vec![TextContent::text(text)],
            details: Details {
                mode,
                run_id: Some("abcd1234".into()),
                results,
                error: None,
                streaming: None,
                background: None,
                scheduler: Default::default(),
                tree_usage: None,
            },
        }
    }

    #[test]
    fn a_lean_result_on_stdout_has_the_answer_once_and_no_display_items() {
        let r = result(
            Mode::Single,
            "the answer",
            vec![single("find auth", "the answer", None)],
        );
        let lean: serde_json::Value =
            serde_json::from_str(&r.to_stdout_line(DetailLevel::Lean)).unwrap();
        assert_eq!(
            lean,
            json!({
                "content": [{"type": "text", "text": "the answer"}],
                "details": {"mode": "single", "runId": "abcd1234", "results": [{
                    "exitCode": 0,
                    "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                    "sessionFile": "/s/session.jsonl"
                }]}
            })
        );
        // Full is the whole record, as result.json keeps it.
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&r.to_stdout_line(DetailLevel::Full))
                .unwrap(),
            serde_json::to_value(&r).unwrap()
        );
    }

    #[test]
    fn lean_keeps_an_output_the_content_does_not_hold_and_a_failures_partial_output() {
        let truncated = result(
            Mode::Single,
            "the ans",
            vec![single("t", "the answer", None)],
        );
        let v: serde_json::Value =
            serde_json::from_str(&truncated.to_stdout_line(DetailLevel::Lean)).unwrap();
        assert_eq!(v["details"]["results"][0]["output"], json!("the answer"));
        let failed = result(
            Mode::Single,
            "it broke\n\nPartial output:\npart",
            vec![single("t", "part", Some("it broke"))],
        );
        let v: serde_json::Value =
            serde_json::from_str(&failed.to_stdout_line(DetailLevel::Lean)).unwrap();
        assert_eq!(v["details"]["results"][0]["output"], json!("part"));
    }

    #[test]
    fn lean_parallel_results_leave_out_the_outputs_their_sections_hold() {
        let r = result(
            Mode::Parallel,
            "## 1. explorer: a\n\nalpha\n\n## 2. explorer: b\n\nbeta",
            vec![single("a", "alpha", None), single("b", "beta", None)],
        );
        let v: serde_json::Value =
            serde_json::from_str(&r.to_stdout_line(DetailLevel::Lean)).unwrap();
        let outputs: Vec<Option<&serde_json::Value>> = v["details"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("output"))
            .collect();
        assert_eq!(outputs, [None, None]);
    }

    #[test]
    fn lean_chain_steps_keep_their_outputs_unless_one_is_the_answer() {
        let r = result(
            Mode::Chain,
            "third saw [second]",
            vec![
                single("a", "second", None),
                single("b", "third saw [second]", None),
            ],
        );
        let v: serde_json::Value =
            serde_json::from_str(&r.to_stdout_line(DetailLevel::Lean)).unwrap();
        let outputs: Vec<Option<&serde_json::Value>> = v["details"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.get("output"))
            .collect();
        assert_eq!(outputs, [Some(&json!("second")), None]);
    }

    #[test]
    fn a_lean_structured_answer_is_the_content_and_structured_without_the_raw_text() {
        let mut answered = single("t", "Here:\n```json\n{\"n\": 1}\n```", None);
        answered.structured = Some(json!({"n": 1}));
        let r = result(Mode::Single, r#"{"n":1}"#, vec![answered.clone()]);
        let lean: serde_json::Value =
            serde_json::from_str(&r.to_stdout_line(DetailLevel::Lean)).unwrap();
        assert_eq!(
            lean,
            json!({
                "content": [{"type": "text", "text": "{\"n\":1}"}],
                "details": {"mode": "single", "runId": "abcd1234", "results": [{
                    "exitCode": 0,
                    "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                    "sessionFile": "/s/session.jsonl",
                    "structured": {"n": 1}
                }]}
            })
        );
        assert_eq!(
            r.details_value(DetailLevel::Lean)["results"][0].get("output"),
            None
        );
        assert_eq!(
            r.details_value(DetailLevel::Full)["results"][0]["output"],
            json!(answered.output)
        );
    }

    #[test]
    fn lean_tasks_are_cut_to_200_characters() {
        let task = "é".repeat(MAX_LEAN_TASK_CHARS + 1);
        let r = result(Mode::Parallel, "x", vec![single(&task, "x", None)]);
        let v = r.details_value(DetailLevel::Lean);
        assert_eq!(
            v["results"][0]["task"],
            json!(format!("{}…", "é".repeat(MAX_LEAN_TASK_CHARS)))
        );
        let exact = "é".repeat(MAX_LEAN_TASK_CHARS);
        let r = result(Mode::Parallel, "x", vec![single(&exact, "x", None)]);
        assert_eq!(
            r.details_value(DetailLevel::Lean)["results"][0]["task"],
            json!(exact)
        );
    }

    /// A success costs the parent what it acts on; a failure keeps everything, and the
    /// full record keeps everything always.
    #[test]
    fn a_lean_success_leaves_out_what_says_nothing_happened() {
        let usual = |error: Option<&str>| SingleResult {
            exit_code: if error.is_some() { 1 } else { 0 },
            termination: Some(Termination::Exited {
                code: if error.is_some() { 1 } else { 0 },
            }),
            child_session_id: Some("0b5c6a4e".into()),
            sandbox: Some(SandboxInfo {
                mode: SandboxMode::ReadOnly,
                mechanism: "namespaces".into(),
                layers: vec!["mounts".into(), "seccomp".into()],
            }),
            ..single("find auth", "the answer", error)
        };
        let r = result(Mode::Single, "the answer", vec![usual(None)]);
        assert_eq!(
            r.details_value(DetailLevel::Lean)["results"][0],
            json!({
                "exitCode": 0, "output": "the answer",
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                "sessionFile": "/s/session.jsonl"
            })
        );
        // What says something happened stays.
        let eventful = SingleResult {
            attempts: 2,
            termination: Some(Termination::Terminated {
                reason: StopReason::AfterTerminalEvent,
            }),
            sandbox: Some(SandboxInfo {
                mode: SandboxMode::Off,
                mechanism: "none".into(),
                layers: Vec::new(),
            }),
            warnings: vec!["no sandbox".into()],
            ..usual(None)
        };
        let r = result(Mode::Parallel, "the answer", vec![eventful]);
        assert_eq!(
            r.details_value(DetailLevel::Lean)["results"][0],
            json!({
                "agent": "explorer", "task": "find auth", "exitCode": 0, "output": "the answer",
                "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                "sessionFile": "/s/session.jsonl", "attempts": 2,
                "termination": {"kind": "terminated", "reason": "afterTerminalEvent"},
                "sandbox": {"mode": "off", "mechanism": "none"},
                "warnings": ["no sandbox"]
            })
        );
        // A failure keeps all but the display items and the sandbox's layers (its
        // warnings name any layer that did not hold).
        let failed = result(Mode::Single, "it broke", vec![usual(Some("it broke"))]);
        let mut full = serde_json::to_value(&failed.details.results[0]).unwrap();
        full.as_object_mut().unwrap().remove("displayItems");
        full["sandbox"].as_object_mut().unwrap().remove("layers");
        assert_eq!(failed.details_value(DetailLevel::Lean)["results"][0], full);
        assert_eq!(
            serde_json::to_value(&failed.details).unwrap(),
            failed.details_value(DetailLevel::Full)
        );
    }

    #[test]
    fn mcp_details_keep_the_output() {
        let r = result(
            Mode::Single,
            "the answer",
            vec![single("t", "the answer", None)],
        );
        let lean = r.details_value(DetailLevel::Lean);
        assert_eq!(lean["results"][0]["output"], json!("the answer"));
        assert_eq!(lean["results"][0].get("displayItems"), None);
        assert_eq!(
            r.details_value(DetailLevel::Full),
            serde_json::to_value(&r.details).unwrap()
        );
    }

    #[test]
    fn limits_and_attempts_serialize_to_their_documented_shapes() {
        assert_eq!(
            serde_json::to_value([
                Limit::Turns { limit: 2, used: 2 },
                Limit::Tokens {
                    limit: 1000,
                    used: 1200,
                },
                Limit::Cost {
                    limit: 0.5,
                    used: 0.53,
                },
            ])
            .unwrap(),
            json!([
                {"kind": "turns", "limit": 2, "used": 2},
                {"kind": "tokens", "limit": 1000, "used": 1200},
                {"kind": "cost", "limit": 0.5, "used": 0.53},
            ])
        );
        assert_eq!(
            serde_json::to_value(AttemptDetail {
                model: Some("mock-1".into()),
                exit_code: 0,
                error: Some("pi reported an error: 503 overloaded".into()),
            })
            .unwrap(),
            json!({"model": "mock-1", "exitCode": 0, "error": "pi reported an error: 503 overloaded"})
        );
        assert_eq!(
            serde_json::to_value(TimeoutReason::Tool).unwrap(),
            json!("tool")
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
