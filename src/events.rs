//! The normalized events every dialect parser produces, whatever the child CLI was.
//!
//! Each event is progress or not, and that is what keeps a child alive (the idle timer
//! counts progress only): the model's text, tool calls, tools starting, running and
//! finishing, usage, and other work it shows without content (`Working`). A CLI retrying
//! or reconnecting to its provider (`Retry`) is noise, and so are its own bookkeeping,
//! errors, empty messages and heartbeats.

use std::borrow::Cow;

use std::fmt;

use serde_json::value::RawValue;

use crate::result::Usage;

#[derive(Debug, Clone)]
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
    /// A text too long to unescape whole (a line of megabytes): the JSON strings of its
    /// parts as the child printed them, joined by `separator`, folded in as a delta, a
    /// message or a final text piece by piece, so that it never costs its size again.
    LongText {
        parts: Vec<&'a RawValue>,
        separator: &'static str,
        kind: TextKind,
    },
    ToolCall {
        name: Cow<'a, str>,
        args: serde_json::Value,
    },
    /// A tool began to run. `id` pairs it with its end; a CLI that gives none ends the
    /// oldest.
    ToolStart { id: Option<Cow<'a, str>> },
    /// A tool finished (successfully or not).
    ToolEnd { id: Option<Cow<'a, str>> },
    /// The model or a tool produced something that is not shown (thinking, a tool's
    /// partial output, an item update): progress without content.
    Working,
    /// The CLI is retrying or reconnecting to its provider, in its own words: noise, not
    /// progress.
    Retry(Cow<'a, str>),
    /// How long the CLI waits before that retry, where it says (claude follows its
    /// provider's `retry-after` there).
    RetryDelay(std::time::Duration),
    /// The CLI stopped itself at the cost budget orchestrate passed it (claude's
    /// `--max-budget-usd`), its cost total already reported.
    CostBudgetReached,
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
    /// The child asked for a permission and orchestrate answered it (not progress: the
    /// tool call it leads to is).
    Permission(crate::result::PermissionRecord),
    /// Something the child could not honour as asked, found while it runs (a model its
    /// protocol would not take): said in the result's `warnings`.
    Warning(Cow<'a, str>),
    /// A field of the child's stream whose value could not be used as it was (a usage
    /// count that is a string, a negative cost, an id that is a number): the rest of its
    /// line was read; the result's `warnings` say which fields, once each.
    OddField {
        /// Where it is in the CLI's own JSON (`usage.cost.total`).
        field: &'static str,
        problem: Problem,
    },
}

/// What a [`AgentEvent::LongText`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextKind {
    /// As `TextDelta`.
    Delta,
    /// As `AssistantMessage`.
    Message,
    /// As `FinalText`.
    Final,
}

/// Why a provider failure looks transient: worth another attempt after a backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    RateLimited,
    Overloaded,
    ServerError,
    Connection,
}

/// A JSON value's type, as a warning names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl JsonType {
    /// The type of a JSON text, from its first byte (serde_json has validated it).
    pub(crate) fn of(raw: &str) -> JsonType {
        match raw.as_bytes().first() {
            Some(b'n') => JsonType::Null,
            Some(b't' | b'f') => JsonType::Boolean,
            Some(b'"') => JsonType::String,
            Some(b'[') => JsonType::Array,
            Some(b'{') => JsonType::Object,
            _ => JsonType::Number,
        }
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonType::Null => "null",
            JsonType::Boolean => "a boolean",
            JsonType::Number => "a number",
            JsonType::String => "a string",
            JsonType::Array => "an array",
            JsonType::Object => "an object",
        })
    }
}

/// What was wrong with a field's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Problem {
    /// A value of another type than the field's (`null` included: it is what
    /// `JSON.stringify` writes for NaN).
    WrongType { found: JsonType, expected: JsonType },
    /// An object that is not of the field's shape (a key given twice).
    Malformed,
    /// A token count below zero: ignored.
    NegativeCount(f64),
    /// An amount of money below zero (not a credit): ignored.
    NegativeAmount(f64),
    /// A number that is not finite, or too large to be a number at all: ignored.
    NotFinite,
    /// A token count past the largest one counted: counted as that.
    TooLarge(f64),
}

impl Problem {
    /// What became of the value.
    pub fn consequence(&self) -> String {
        match self {
            Problem::TooLarge(_) => format!("counted as {}", u64::MAX),
            _ => "ignored".to_string(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::WrongType { found, expected } => write!(f, "{found}, not {expected}"),
            Problem::Malformed => f.write_str("an object of another shape"),
            Problem::NegativeCount(v) => write!(f, "{v}, a negative count"),
            Problem::NegativeAmount(v) => write!(f, "{v}, a negative amount"),
            Problem::NotFinite => f.write_str("a number out of range"),
            Problem::TooLarge(v) => write!(f, "{v}, past the largest count"),
        }
    }
}
