//! The messages sent to a run (`orchestrate send`), as its result lists them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a message reached the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Delivery {
    /// Into the turn under way, in the same child process: the agent reads it before its
    /// next model request (pi's steering).
    Steered,
    /// As a new prompt to the same child process, in its session, once its turn ended
    /// (ACP's `session/prompt`).
    NextPrompt,
    /// The turn under way was cancelled for it (`send --interrupt`), and it was the next
    /// prompt to the same child process (ACP's `session/cancel`, pi's `abort`).
    Interrupted,
    /// As a new turn of the child's own session, once its turn ended and its process
    /// exited: a new process continued the session (where its CLI can take nothing while
    /// it runs, or the message came as it exited).
    AfterTurn,
    /// In a turn that failed before it answered (its CLI could not load the session, a
    /// limit stopped it, the child exited): the run's answer is the one before, and its
    /// warnings or error say why.
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
