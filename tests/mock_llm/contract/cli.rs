//! What the shared scenarios need to know about one agent CLI: how to point it at the
//! mock, what it sends, how it names and shows its tools, and what it does on a 401, a
//! hung stream and a refused write. One [`Cli`] per CLI lives in [`super::clis`].

use serde_json::{json, Value};

use super::Sandbox;
use crate::mock_llm::{Api, MockLlm, MockUsage, Reply};

pub struct Cli {
    /// The `--backend` name, and the first part of each test's name.
    pub name: &'static str,
    /// The variable naming the pinned binary (written by `scripts/install-agent-clis` to
    /// `<cache>/env.sh`).
    pub var: &'static str,
    /// `--model` for every run.
    pub model: &'static str,
    /// Points the CLI at the mock and keeps it offline: environment, config files under
    /// the sandbox's HOME. The proxy variables already point at the mock.
    pub configure: fn(&mut Sandbox, &MockLlm),
    pub wire: Wire,
    /// Where the agent's prompt reaches the model.
    pub prompt_in: PromptIn,
    pub traffic: Traffic,
    /// The prices the CLI computes a cost from; None: it reports no cost.
    pub prices: Option<Prices>,
    /// The model's call of the CLI's shell tool running a command, and how orchestrate
    /// shows it.
    pub shell: fn(&str) -> ToolUse,
    /// The model's call of the CLI's own write tool putting "x\n" in a file (absolute
    /// path), and how orchestrate shows it.
    pub write: fn(&str) -> ToolUse,
    /// The tools the `worker` agent (`tools: read, bash`) is offered.
    pub worker_tools: Offered,
    /// `(agent, warning)`: the warnings orchestrate adds to each agent's result.
    pub warnings: &'static [(&'static str, &'static str)],
    /// What the CLI reports for a 401.
    pub unauthorized: Unauthorized,
    pub hang: Hang,
    /// Writes (or shells) a restricted agent attempts, each a test of its own.
    pub refusals: &'static [Refusal],
    /// Whether `orchestrate run --resume` can continue the CLI's session.
    pub resume: Option<Resume>,
    /// How an output schema reaches the model (structured answers).
    pub output_schema: SchemaSent,
    /// Whether the "tool that never returns" scenario runs (the tool's shell must die
    /// with the run).
    pub tool_never_returns: bool,
    /// What the CLI does when its provider's port is closed.
    pub unreachable: Unreachable,
    /// A second model the CLI accepts, for the fallback scenario; None: it does not run.
    pub fallback_model: Option<&'static str>,
    /// Attempts of the first model in that scenario: 2 where the CLI gives up on an
    /// overloaded model by itself (orchestrate retries once), 1 where it retries until
    /// the connect limit stops it.
    pub fallback_attempts: usize,
    /// How the CLI shows its provider's rate limit while it retries, which is what a
    /// fan-out's scheduler follows; None where it retries silently.
    pub rate_limit: Option<RateLimit>,
    /// Files the CLI runs code from or takes its settings from, in its own home (settings,
    /// hooks, extensions, plugins): a hostile shell tries to plant code in each. Some
    /// exist (written by `configure`), some not.
    pub config_plants: fn(&Sandbox) -> Vec<std::path::PathBuf>,
    /// `(scenario, defect)`: scenarios that fail because of a known defect in
    /// orchestrate; reported ignored with the defect as the reason until it is fixed
    /// (`--ignored` runs them).
    pub known_defects: &'static [(&'static str, &'static str)],
}

/// What every conversation request must look like.
pub struct Wire {
    pub api: Api,
    /// Path and query.
    pub path: &'static str,
    /// The header carrying the key, and its value.
    pub auth: (&'static str, &'static str),
    /// JSON whose every leaf the request body must carry (see [`subset_of`]).
    pub body: &'static str,
}

#[derive(Clone, Copy)]
pub enum PromptIn {
    /// The request's system prompt (or instructions).
    System,
    /// The first message of the conversation, in front of the task.
    FirstMessage,
}

#[derive(Clone, Copy)]
pub enum Traffic {
    /// Every request is the conversation: no side requests, no other host (a `CONNECT`).
    ConversationOnly,
    /// Beside the conversation, only title requests (answered as side traffic).
    TitleRequests,
}

#[derive(Clone, Copy)]
pub struct Prices {
    /// $ per million tokens.
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
}

/// The tools a request offers the model (sorted names).
#[derive(Clone, Copy)]
pub enum Offered {
    Exactly(&'static [&'static str]),
    Including(&'static [&'static str]),
    Excluding(&'static [&'static str]),
}

pub struct Unauthorized {
    /// The CLI's own exit code, as the result's `exitCode`.
    pub exit_code: i32,
    pub turns: u64,
}

pub struct Hang {
    /// `--idle-timeout`: longer than the CLI can stay silent while it starts on a loaded
    /// machine, or the timeout measures startup rather than the hang.
    pub idle_timeout_secs: u64,
    /// Whether the CLI printed the text streamed before the hang (then it is kept).
    pub partial_text: bool,
    /// The fewest processes in the CLI's tree (a launcher, a relaunch).
    pub min_processes: usize,
    /// Extra environment for the runs that end in a timeout (the hang, the tool that
    /// never returns).
    pub env: &'static [(&'static str, &'static str)],
    /// Where the stop asks the CLI to end its turn and it does, printing the answer it
    /// was cut off in as a message (one turn, shown): the cost it reports for that answer.
    pub ends_its_turn: Option<f64>,
}

/// A CLI whose provider cannot be reached (its base URL's port is closed).
pub struct Unreachable {
    /// Extra environment (the CLI's own retries back on, where the sandbox turns them off).
    pub env: &'static [(&'static str, &'static str)],
    /// Words of the CLI's own that orchestrate's error must carry.
    pub words: &'static str,
    /// Whether it retries until orchestrate's connect limit stops it (else it gives up
    /// by itself first).
    pub stopped: bool,
}

/// A CLI that shows a 429 as it retries (observed against the mock's rate limit).
pub struct RateLimit {
    /// Turns the CLI's own retries back on, where the sandbox turns them off.
    pub retries_on: fn(&mut Sandbox),
    /// Whether it says how long it waits (the provider's `retry-after`).
    pub says_delay: bool,
}

/// How the CLI passes an output schema on to the model, and how the model answers with it.
#[derive(Clone, Copy)]
pub enum SchemaSent {
    /// As a tool whose input schema is the schema (claude's `StructuredOutput`): the model
    /// answers by calling it, the CLI checks the call and ends the turn. When the model
    /// answers with text instead, the CLI asks it once more to call the tool
    /// (`text_requests` requests in all), then ends with that text.
    Tool {
        name: &'static str,
        /// The turns the CLI counts for an answer given by calling the tool.
        turns: u64,
        text_requests: usize,
    },
    /// As the Responses API's `text.format` (codex): a strict `json_schema` named
    /// `codex_output_schema`; the answer is the final message's text.
    TextFormat,
    /// In the first message, after the task (orchestrate asks for it there).
    Prompt,
}

impl SchemaSent {
    /// The model's reply answering `value` as the CLI takes it, and how orchestrate shows
    /// that reply.
    pub fn answer(self, value: &Value, usage: MockUsage) -> (Reply, Value) {
        match self {
            SchemaSent::Tool { name, .. } => (
                Reply::tool(name, value.clone(), usage),
                tool_item(name, value),
            ),
            SchemaSent::TextFormat | SchemaSent::Prompt => {
                let text = value.to_string();
                (Reply::text(&text, usage), text_item(&text))
            }
        }
    }

    /// The requests of a turn whose answer is text.
    pub fn text_requests(self) -> usize {
        match self {
            SchemaSent::Tool { text_requests, .. } => text_requests,
            SchemaSent::TextFormat | SchemaSent::Prompt => 1,
        }
    }
}

pub struct Resume {
    /// A file the CLI's session must be saved in, in the run folder.
    pub session_file: Option<&'static str>,
}

/// A restricted agent's attempts to write: none may succeed, and the model must be told
/// each was refused.
pub struct Refusal {
    /// The test's name (after `<cli>::`).
    pub test: &'static str,
    pub agent: &'static str,
    /// The model's final text after the attempts.
    pub answer: &'static str,
    /// The turns orchestrate counts (a turn is a model response the CLI reported).
    pub turns: u64,
    /// The attempts, given the absolute path of the file they try to write (pwned.txt
    /// in the working directory).
    pub attempts: fn(&str) -> Vec<Attempt>,
    /// What the first request offers.
    pub offered: Offered,
    /// Files put in the working directory first, `(name, contents)`.
    pub workdir_files: &'static [(&'static str, &'static str)],
}

pub struct Attempt {
    pub tool: ToolUse,
    /// What the tool's result, as the model sees it, says.
    pub refusal: String,
    /// The decision the result's `permissions` records for it, where the CLI asked
    /// orchestrate.
    pub permission: Option<Value>,
}

impl Attempt {
    pub fn new(tool: ToolUse, refusal: impl Into<String>) -> Attempt {
        Attempt {
            tool,
            refusal: refusal.into(),
            permission: None,
        }
    }

    /// The CLI asked orchestrate about it, which decided as `record` says.
    pub fn asked(mut self, record: Value) -> Attempt {
        self.permission = Some(record);
        self
    }
}

/// A tool call the mock makes, and the display item orchestrate shows for it (None: the
/// CLI prints nothing for it).
#[derive(Clone)]
pub struct ToolUse {
    pub reply: Reply,
    pub shown: Option<Value>,
}

impl ToolUse {
    /// A call of `name` with `args`, shown as it was made.
    pub fn call(name: &str, args: Value) -> ToolUse {
        ToolUse {
            shown: Some(tool_item(name, &args)),
            reply: Reply::tool(name, args, MockUsage::default()),
        }
    }

    /// A freeform ("custom") tool call; see [`Reply::CustomToolCall`].
    pub fn custom(name: &str, input: &str) -> ToolUse {
        ToolUse {
            shown: Some(tool_item(name, &json!({ "input": input }))),
            reply: Reply::custom_tool(name, input, MockUsage::default()),
        }
    }

    /// The name of the tool called.
    pub fn name(&self) -> &str {
        match &self.reply {
            Reply::ToolCall { name, .. } | Reply::CustomToolCall { name, .. } => name,
            other => panic!("not a tool call: {other:?}"),
        }
    }

    /// Shown as a call of `name` with `args` instead.
    pub fn shown_as(self, name: &str, args: Value) -> ToolUse {
        ToolUse {
            shown: Some(tool_item(name, &args)),
            ..self
        }
    }

    /// Not shown at all.
    pub fn hidden(self) -> ToolUse {
        ToolUse {
            shown: None,
            ..self
        }
    }

    /// The call, reporting `usage`.
    pub fn with_usage(self, usage: MockUsage) -> ToolUse {
        let reply = match self.reply {
            Reply::ToolCall { name, args, .. } => Reply::ToolCall { name, args, usage },
            Reply::CustomToolCall { name, input, .. } => {
                Reply::CustomToolCall { name, input, usage }
            }
            other => other,
        };
        ToolUse { reply, ..self }
    }
}

/// A `toolCall` display item.
pub fn tool_item(name: &str, args: &Value) -> Value {
    json!({"type": "toolCall", "name": name, "args": args})
}

/// A `text` display item.
pub fn text_item(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `actual` cut down to the keys `expected` has, recursively through objects: equal to
/// `expected` exactly when `actual` carries every leaf of it.
pub fn subset_of(actual: &Value, expected: &Value) -> Value {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => Value::Object(
            e.iter()
                .filter_map(|(k, ev)| a.get(k).map(|av| (k.clone(), subset_of(av, ev))))
                .collect(),
        ),
        _ => actual.clone(),
    }
}
