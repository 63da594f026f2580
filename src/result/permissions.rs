//! The permission decisions a result lists: one record per request a child made, and in
//! a lean result only their counts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    Allowed,
    Rejected,
    /// Answered `cancelled`: the run was being stopped, or the child offered no option of
    /// the kind decided.
    Cancelled,
}

/// Who decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DecidedBy {
    /// The rule of `permissions: policy` (or of `ask`, falling back to it).
    Policy,
    /// `permissions: allow`.
    Allow,
    /// `permissions: deny`.
    Deny,
    /// `permissions: ask`, answered by the parent.
    Parent,
    /// The run was being stopped.
    Stop,
}

/// One decision, as the result lists it: `{"tool": "execute", "decision": "allowed", "by":
/// "policy"}`, with the request's title and the rule's reason in the full result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRecord {
    pub tool: String,
    pub decision: Decision,
    pub by: DecidedBy,
    /// What the child said it wants to do (`touch pwned.txt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Why the policy decided so, or how the parent answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How many requests were allowed and rejected: what a lean result shows of its records.
pub(crate) fn counts(records: &[PermissionRecord]) -> serde_json::Value {
    let count = |d: Decision| records.iter().filter(|r| r.decision == d).count();
    let mut v = serde_json::json!({
        "allowed": count(Decision::Allowed),
        "rejected": count(Decision::Rejected),
    });
    let cancelled = count(Decision::Cancelled);
    if cancelled > 0 {
        v["cancelled"] = cancelled.into();
    }
    v
}
