//! The messages sent to a run (`orchestrate send`), as its result lists them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a message reached the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    /// As a new turn of the child's own session, once its turn ended.
    AfterTurn,
    /// In a new turn of the child's session that failed before it answered (its CLI could
    /// not load the session, a limit stopped it): the run's answer is the one before, and
    /// its warnings say why.
    Failed,
    /// Never: the run ended (failed, stopped) before it could be delivered.
    NotDelivered,
}

/// A message sent to a run, in its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// When it was sent, in milliseconds since the Unix epoch.
    pub at: u64,
    pub text: String,
    pub delivery: Delivery,
}
