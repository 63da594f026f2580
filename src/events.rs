//! The normalized events every dialect parser produces, whatever the child CLI was.

use std::borrow::Cow;

use crate::result::Usage;

#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent<'a> {
    /// An assistant message began; streamed text starts over.
    MessageStart,
    /// A streamed piece of assistant text.
    TextDelta(Cow<'a, str>),
    /// A complete assistant message's text (its text blocks joined). The last one is the
    /// run's final text. Empty for a message that only called tools.
    AssistantMessage(Cow<'a, str>),
    /// The text streamed since `MessageStart` is a complete assistant message (for CLIs
    /// that send the text only as deltas): as `AssistantMessage` with that text.
    StreamedMessageEnd,
    /// The CLI's own statement of the final answer (a `result` line). It overrides the last
    /// message's text but adds no display item.
    FinalText(Cow<'a, str>),
    ToolCall {
        name: Cow<'a, str>,
        args: serde_json::Value,
    },
    /// Usage of one request or turn, added to the run's sum.
    Usage(Usage),
    /// The CLI's own total for the whole run; replaces the sum (Claude's `result` line).
    UsageTotal(Usage),
    /// One assistant turn completed.
    TurnEnd,
    /// The provider or the CLI reported an error that fails the run unless a later
    /// successful message supersedes it.
    ProviderError(Cow<'a, str>),
    /// A later message succeeded: an earlier provider error was retried away.
    Recovered,
    /// The child's own session or thread id, for resuming.
    SessionId(Cow<'a, str>),
    /// The dialect's final event: the child has nothing more to say.
    Terminal,
}

/// Why a provider failure looks transient: worth another attempt after a backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    RateLimited,
    Overloaded,
    ServerError,
    Connection,
}
