//! The few ACP (Agent Client Protocol, v1) messages orchestrate reads, as borrowed views of
//! a line: JSON-RPC 2.0 framing, the agent's responses, its `session/update`
//! notifications and its `session/request_permission` requests. Every field is optional
//! and unknown ones are ignored: agents add their own (`_meta`, `usage`), and one field of
//! an unexpected type must not cost the rest of the line, so fields whose type varies
//! between agents stay raw until read.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// Any JSON-RPC message: a request (`method` and `id`), a notification (`method`), or a
/// response (`id` and `result` or `error`).
#[derive(Debug, Deserialize)]
pub(super) struct Message<'a> {
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RpcError<'a> {
    #[serde(default)]
    pub code: Option<i64>,
    #[serde(borrow, default)]
    pub message: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub data: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeResult<'a> {
    #[serde(default)]
    pub protocol_version: Option<u64>,
    #[serde(borrow, default)]
    pub agent_capabilities: Option<AgentCapabilities<'a>>,
    #[serde(borrow, default)]
    pub agent_info: Option<Info<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct AgentCapabilities<'a> {
    #[serde(default)]
    pub load_session: Option<bool>,
    #[serde(borrow, default, rename = "_meta")]
    pub _meta: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Info<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct NewSessionResult<'a> {
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub config_options: Option<Vec<ConfigOption<'a>>>,
}

/// A session setting the agent offers (`session/set_config_option`): a model picker is
/// one of `category: "model"`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConfigOption<'a> {
    #[serde(borrow, default)]
    pub id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub category: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub current_value: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub options: Option<&'a RawValue>,
}

/// One choice of a select option (flat, or within a group's `options`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct OptionValue<'a> {
    #[serde(borrow, default)]
    pub value: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub options: Option<Vec<OptionValue<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptResult<'a> {
    #[serde(borrow, default)]
    pub stop_reason: Option<Cow<'a, str>>,
    /// Per-turn tokens (ACP's draft `usage`, sent by claude-agent-acp and opencode).
    #[serde(default)]
    pub usage: Option<TurnUsage>,
    #[serde(borrow, default, rename = "_meta")]
    pub _meta: Option<PromptMeta<'a>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct TurnUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub thought_tokens: u64,
    pub cached_read_tokens: u64,
    pub cached_write_tokens: u64,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct PromptMeta<'a> {
    /// gemini: the turn's tokens.
    #[serde(default)]
    pub quota: Option<Quota>,
    #[serde(skip)]
    pub _unused: std::marker::PhantomData<&'a ()>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Quota {
    #[serde(default)]
    pub token_count: Option<TokenCount>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
pub(super) struct TokenCount {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionNotification<'a> {
    #[serde(borrow, default)]
    pub session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub update: &'a RawValue,
}

/// One `session/update`: its kind (`sessionUpdate`) and the fields of the kinds that are
/// not tool calls (a tool call's are read as [`ToolCallFields`] from the same object).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Update<'a> {
    #[serde(borrow)]
    pub session_update: Cow<'a, str>,
    /// Message chunks: one content block.
    #[serde(borrow, default)]
    pub content: Option<&'a RawValue>,
    /// `usage_update`: the session's cost so far.
    #[serde(default)]
    pub cost: Option<Cost>,
    /// qwen: per-call tokens on a chunk.
    #[serde(borrow, default, rename = "_meta")]
    pub _meta: Option<&'a RawValue>,
}

/// The fields of a tool call, as `tool_call`, `tool_call_update` and a permission request
/// carry them (all optional but the id in an update).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolCallFields<'a> {
    #[serde(borrow, default)]
    pub tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub title: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub raw_input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub locations: Option<Vec<Location<'a>>>,
    #[serde(borrow, default, rename = "_meta")]
    pub _meta: Option<&'a RawValue>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Location<'a> {
    #[serde(borrow, default)]
    pub path: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(default)]
pub(super) struct Cost {
    pub amount: f64,
}

/// A content block; orchestrate reads the text of `text` blocks.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Content<'a> {
    #[serde(borrow, default, rename = "type")]
    pub kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub text: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PermissionRequest<'a> {
    #[serde(borrow, default)]
    pub tool_call: ToolCallFields<'a>,
    #[serde(borrow, default)]
    pub options: Vec<PermissionOption<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PermissionOption<'a> {
    #[serde(borrow, default)]
    pub option_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub kind: Option<Cow<'a, str>>,
}

/// The tool's own name where the agent tells it (claude-agent-acp's
/// `_meta.claudeCode.toolName`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolMeta<'a> {
    #[serde(borrow, default)]
    pub claude_code: Option<ClaudeToolMeta<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClaudeToolMeta<'a> {
    #[serde(borrow, default)]
    pub tool_name: Option<Cow<'a, str>>,
}

/// qwen's per-call tokens on a message chunk (`_meta.usage`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct ChunkMeta {
    #[serde(default)]
    pub usage: Option<ChunkUsage>,
}

#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct ChunkUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_read_tokens: u64,
    pub thought_tokens: u64,
}
