//! Claude Code (`@anthropic-ai/claude-code`): its command line and its stream-json dialect.
//!
//! Facts the parser relies on (each seen in the real CLI's output:
//! `tests/contract_claude.rs` runs it against the mock LLM, and `tests/fixtures/claude/`
//! holds streams it printed): per-message `usage` on `assistant` lines comes from
//! `message_start` and is not final, so usage and cost come from the `result` line; API
//! errors arrive as a synthetic assistant message and a `result` with `is_error: true`
//! (exit 1); `error_max_turns` is a `result` subtype; `system/api_retry` lines are the CLI
//! retrying on its own.
//!
//! Where its stdin can be a pipe, claude reads its prompts there (`--input-format
//! stream-json`, see [`stream_input`]), so that a message sent to the run reaches it while
//! it works.

mod permission;
mod stream_input;
pub(crate) use stream_input::ClaudeStreamDialect;

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::lenient::{Amount, Count, Flag, List, Object, Str};
use super::provider::{self, ProviderHost, ProviderQuery};
use super::tools::{Permissions, Tool};
use super::{
    is_empty_json_str, parse_json, short_text, text_event, BackendError, BackendSpec, Dialect,
    Invocation, InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::result::Usage;

/// Shell commands a read-only agent may run: they inspect a repository and change nothing.
const READONLY_BASH_RULES: &[&str] = &[
    "Bash(git log:*)",
    "Bash(git show:*)",
    "Bash(git diff:*)",
    "Bash(git status:*)",
    "Bash(git blame:*)",
    "Bash(git ls-files:*)",
    "Bash(git rev-parse:*)",
];
/// What an agent that names no tools and may write gets.
const DEFAULT_WRITER_TOOLS: &[&str] = &[
    "Read",
    "Grep",
    "Glob",
    "Bash",
    "Edit",
    "Write",
    "WebFetch",
    "WebSearch",
];
const READONLY_TOOLS: &[&str] = &["Read", "Grep", "Glob"];

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "claude",
    aliases: &["claude-code"],
    program: "claude",
    install_hint: "install it with `npm install -g @anthropic-ai/claude-code`",
    auto: true,
    resumes: true,
    // `total_cost_usd` of a resumed session is the session's; `usage` is the run's.
    resumed_totals: super::SessionTotals {
        tokens: false,
        cost: true,
    },
    output_schema: super::SchemaRoute::Option,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::<ClaudeDialect>::default(),
        talks: false,
        // Claude keeps to a cost budget itself (`--max-budget-usd`); its per-message usage
        // counts the input while it runs.
        reports: super::Reports {
            cost: true,
            usage_while_running: true,
        },
    }),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    provider: Some("anthropic"),
    // ~/.claude (CLAUDE_CONFIG_DIR moves it, with .claude.json): settings, hooks,
    // plugins and login, private; the transcripts `--resume` continues, in projects/,
    // kept. ~/.claude.json (its settings and MCP servers, rewritten at every start) is a
    // private copy.
    home: Some(|env| {
        let config = env.dir_or_home("CLAUDE_CONFIG_DIR", ".claude");
        let dot_json = match env.get("CLAUDE_CONFIG_DIR") {
            Some(_) => config.as_ref().map(|c| c.join(".claude.json")),
            None => env.home().map(|h| h.join(".claude.json")),
        };
        let copied: Vec<_> = match env.get("CLAUDE_CONFIG_DIR") {
            Some(_) => Vec::new(),
            None => dot_json.iter().cloned().collect(),
        };
        crate::sandbox::CliHome {
            kept: config.iter().map(|c| c.join("projects")).collect(),
            login: config
                .iter()
                .map(|c| c.join(".credentials.json"))
                .chain(dot_json)
                .collect(),
            private: config.into_iter().collect(),
            copied,
            env: [
                "ANTHROPIC_*",
                "CLAUDE_*",
                "AWS_*",
                "GOOGLE_APPLICATION_CREDENTIALS",
                "CLOUD_ML_REGION",
                "VERTEX_*",
            ]
            .map(String::from)
            .to_vec(),
            ..Default::default()
        }
    }),
    provider_hosts,
};

/// Anthropic's API (`ANTHROPIC_BASE_URL` moves it) and the host that refreshes a
/// claude.ai login's token (`platform.claude.com`, in claude 2.1.332's binary); or
/// Bedrock, Vertex AI or Foundry when claude is switched to one of them. Its other
/// traffic (update checks, telemetry, error reports) is not its provider's.
fn provider_hosts(q: &ProviderQuery<'_>) -> Vec<ProviderHost> {
    let on = |var: &str| {
        q.env
            .get(var)
            .is_some_and(|v| !matches!(v.to_str(), Some("0" | "false" | "")))
    };
    let var = |var: &str| q.env.get(var).map(|v| v.to_string_lossy().into_owned());
    if on("CLAUDE_CODE_USE_BEDROCK") {
        let region = var("AWS_REGION")
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".into());
        return vec![q.env_url("ANTHROPIC_BEDROCK_BASE_URL").unwrap_or_else(|| {
            ProviderHost::url(
                format!("https://bedrock-runtime.{region}.amazonaws.com"),
                "AWS_REGION",
            )
        })];
    }
    if on("CLAUDE_CODE_USE_VERTEX") {
        let api = q.env_url("ANTHROPIC_VERTEX_BASE_URL").unwrap_or_else(|| {
            match var("CLOUD_ML_REGION").as_deref() {
                None | Some("global") => ProviderHost::Host("aiplatform.googleapis.com"),
                Some(region) => ProviderHost::url(
                    format!("https://{region}-aiplatform.googleapis.com"),
                    "CLOUD_ML_REGION",
                ),
            }
        });
        return vec![api, ProviderHost::Host("oauth2.googleapis.com")];
    }
    if on("CLAUDE_CODE_USE_FOUNDRY") {
        return q
            .env_url("ANTHROPIC_FOUNDRY_BASE_URL")
            .or_else(|| {
                var("ANTHROPIC_FOUNDRY_RESOURCE").map(|r| {
                    ProviderHost::url(
                        format!("https://{r}.services.ai.azure.com"),
                        "ANTHROPIC_FOUNDRY_RESOURCE",
                    )
                })
            })
            .into_iter()
            .collect();
    }
    match q.env_url("ANTHROPIC_BASE_URL") {
        Some(url) => vec![url],
        None => provider::hosts_of("anthropic").collect(),
    }
}

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
    inv.arg("-p")
        .arg("--output-format")
        .arg("stream-json")
        .arg("--verbose");
    let streamed = input.stdin_pipe;
    if streamed {
        // Every user message it takes is printed back (`isReplay`): how the dialect knows
        // whether a message went into the turn under way or became a turn of its own.
        inv.arg("--input-format")
            .arg("stream-json")
            .arg("--replay-user-messages");
    }
    if let Some(model) = input.model() {
        inv.arg("--model").arg(model);
    }
    // Claude reports its cost only in its final `result` line, too late to stop it by:
    // it keeps to the budget itself (and says so with `error_max_budget_usd`). Turns and
    // tokens orchestrate counts from the stream, as for every CLI.
    if let Some(usd) = input.max_cost {
        inv.arg("--max-budget-usd").arg(usd.to_string());
    }
    if let Some(path) = input.write_system_prompt()? {
        inv.arg("--append-system-prompt-file").arg(&path);
        inv.prompt_files.push(path);
    }
    let p = Permissions::of(input.agent);
    let (tools, allowed) = claude_tools(&p, streamed, &mut inv.warnings);
    if streamed {
        // claude asks orchestrate, on stdout, for every tool use the allow rules do not
        // cover, and waits for the answer on stdin (see `permission`): the run's
        // permission policy decides it. `dontAsk` would deny it without asking.
        inv.arg("--permission-mode")
            .arg("default")
            .arg("--permission-prompt-tool")
            .arg("stdio");
    } else {
        // `dontAsk` denies every tool use that the allow rules do not cover: a claude
        // that cannot be answered must not wait for an answer.
        inv.arg("--permission-mode").arg("dontAsk");
    }
    if input.outer_sandbox {
        // Its own (opt-in, bubblewrap) sandbox cannot mount inside orchestrate's, which
        // would leave the Bash tool unable to run: orchestrate's is the guard.
        inv.arg("--settings")
            .arg(r#"{"sandbox":{"enabled":false}}"#);
    }
    if !tools.is_empty() {
        inv.arg("--tools").arg(tools.join(","));
    }
    if let Some(from) = input.resume {
        // Before the allow rules: those take several values and would swallow the flag's.
        inv.arg("--resume").arg(from.session_id("claude")?);
    }
    if let Some(schema) = input.output_schema {
        // claude offers the model a `StructuredOutput` tool with this schema as its input,
        // checks the call against it (a mismatch is a tool error the model sees), and puts
        // the value, as JSON text, in the `result` line.
        inv.arg("--json-schema").arg(schema.compact());
    }
    inv.arg("--allowedTools");
    for rule in allowed {
        inv.arg(rule);
    }
    if streamed {
        // The task is the first user message on stdin, never in argv; the variadic
        // `--allowedTools` is last, with nothing after it to swallow.
        inv.talk = Some(super::Talk::ClaudeStream {
            prompt: input.task.to_string(),
            policy: Box::new(input.permissions.clone()),
        });
        return Ok(inv);
    }
    // The task last, after `--`: it ends the variadic `--allowedTools`, and a task that
    // starts with `-` (a bullet list, `--version`) is the prompt, never an option. Checked
    // against claude 2.1.332: after `--` even a subcommand's name (`doctor`) is the prompt.
    inv.arg("--").arg(input.task);
    Ok(inv)
}

/// The tool set (`--tools`) and the allow rules (`--allowedTools`). `asks`: claude asks
/// orchestrate about what the rules do not cover, so they restrict nothing the policy
/// would not.
fn claude_tools(
    p: &Permissions,
    asks: bool,
    warnings: &mut Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let granted = p.granted();
    if granted.is_empty() {
        let tools: &[&str] = if p.readonly {
            READONLY_TOOLS
        } else {
            DEFAULT_WRITER_TOOLS
        };
        let tools: Vec<String> = tools.iter().map(|s| s.to_string()).collect();
        return (
            if p.readonly {
                tools.clone()
            } else {
                Vec::new()
            },
            tools,
        );
    }
    let mut tools: Vec<String> = Vec::new();
    let mut allowed: Vec<String> = Vec::new();
    for t in granted {
        let name = match &t {
            Tool::Read => "Read",
            Tool::Grep => "Grep",
            Tool::Find | Tool::Ls => "Glob",
            Tool::Bash => "Bash",
            Tool::Edit => "Edit",
            Tool::Write => "Write",
            Tool::Native(n) => n.as_str(),
        };
        if tools.iter().any(|x| x == name) {
            continue;
        }
        tools.push(name.to_string());
        if t == Tool::Bash && p.readonly {
            allowed.extend(READONLY_BASH_RULES.iter().map(|s| s.to_string()));
            if !asks {
                warnings.push(
                "claude: bash is limited to read-only git commands (log, show, diff, status, blame, ls-files, rev-parse) for this read-only agent".to_string(),
            );
            }
        } else {
            allowed.push(name.to_string());
        }
    }
    (tools, allowed)
}

/// Every field but the event's type is read leniently (see [`super::lenient`]): one of
/// another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    subtype: Str<'a>,
    #[serde(borrow, default)]
    session_id: Str<'a>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    event: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    is_error: Flag<'a>,
    #[serde(borrow, default)]
    num_turns: Count<'a>,
    #[serde(borrow, default)]
    total_cost_usd: Amount<'a>,
    #[serde(borrow, default)]
    usage: Object<'a, ClaudeUsage<'a>>,
    #[serde(borrow, default)]
    errors: List<Str<'a>>,
    /// Set on the synthetic `assistant` line (model `<synthetic>`) by which claude reports
    /// a failed API call: its text is claude's error message, not the model's answer.
    #[serde(borrow, default)]
    is_api_error_message: Flag<'a>,
    #[serde(borrow, default)]
    api_error_status: Option<&'a RawValue>,
    /// `system/api_retry`: which attempt of how many, and why (a string there; raw here,
    /// so that another line's `error` of another shape cannot fail the line).
    #[serde(borrow, default)]
    attempt: Count<'a>,
    #[serde(borrow, default)]
    max_retries: Count<'a>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error_status: Count<'a>,
    /// How long it waits before the retry: its provider's `retry-after` when it sent one
    /// (claude 2.1.332 against a 429 asking for 7 s: 7068 ms), else its own backoff.
    #[serde(borrow, default)]
    retry_delay_ms: Count<'a>,
}

#[derive(Debug, Deserialize, Default, Clone, Copy)]
struct ClaudeUsage<'a> {
    #[serde(borrow, default)]
    input_tokens: Count<'a>,
    #[serde(borrow, default)]
    output_tokens: Count<'a>,
    #[serde(borrow, default)]
    cache_read_input_tokens: Count<'a>,
    #[serde(borrow, default)]
    cache_creation_input_tokens: Count<'a>,
}

impl ClaudeUsage<'_> {
    /// The usage, each odd field ignored (and said).
    fn usage(self, cost: f64, turns: u64, emit: &mut dyn FnMut(AgentEvent<'_>)) -> Usage {
        Usage {
            input: self
                .input_tokens
                .read("usage.input_tokens", emit)
                .unwrap_or(0),
            output: self
                .output_tokens
                .read("usage.output_tokens", emit)
                .unwrap_or(0),
            cache_read: self
                .cache_read_input_tokens
                .read("usage.cache_read_input_tokens", emit)
                .unwrap_or(0),
            cache_write: self
                .cache_creation_input_tokens
                .read("usage.cache_creation_input_tokens", emit)
                .unwrap_or(0),
            cost,
            turns,
        }
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Str<'a>,
    #[serde(borrow, default)]
    content: List<Block<'a>>,
    /// From the API's `message_start`: the input is final, the output not yet.
    #[serde(borrow, default)]
    usage: Object<'a, ClaudeUsage<'a>>,
}

/// A `user` line's message: tool results, by the id of the call they answer.
#[derive(Deserialize)]
struct UserMessage<'a> {
    #[serde(borrow, default)]
    content: List<UserBlock<'a>>,
}

#[derive(Deserialize)]
struct UserBlock<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    tool_use_id: Str<'a>,
}

/// A content block: `text` or `tool_use` (others are skipped). A flat struct rather than
/// a tagged enum, so that the tool's input stays raw JSON until it is shown.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Str<'a>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Str<'a>,
}

/// A raw Anthropic SSE event inside a `stream_event` line (`--include-partial-messages`).
#[derive(Deserialize)]
struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    delta: Option<StreamDelta<'a>>,
}

#[derive(Deserialize)]
struct StreamDelta<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
}

#[derive(Debug, Default)]
pub(crate) struct ClaudeDialect {
    /// The API message being printed. Claude prints one `assistant` line per content
    /// block, and lines of one message share its id; the message (a turn) ends when its
    /// tools' results come back, another message begins, or the run ends.
    open: Option<OpenMessage>,
}

#[derive(Debug)]
struct OpenMessage {
    id: Option<String>,
    /// Its usage as the API's `message_start` gave it (the output count is not final;
    /// the `result` line's total replaces the sum).
    usage: Option<Usage>,
}

impl ClaudeDialect {
    /// Ends the turn of the message being printed, with its usage so far.
    fn close_message(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if let Some(open) = self.open.take() {
            if let Some(u) = open.usage {
                emit(AgentEvent::Usage(u));
            }
            emit(AgentEvent::TurnEnd);
        }
    }
}

impl Dialect for ClaudeDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        let subtype = ev.subtype.read("subtype", emit);
        match (ev.kind.as_ref(), subtype.as_deref()) {
            ("system", Some("init")) => {
                if let Some(id) = ev.session_id.read("session_id", emit) {
                    emit(AgentEvent::SessionId(id));
                }
            }
            ("assistant", _) => {
                let Some(m) = ev
                    .message
                    .and_then(|raw| serde_json::from_str::<Message<'_>>(raw.get()).ok())
                else {
                    return true;
                };
                let api_error_status = ev.api_error_status.filter(|s| s.get() != "null");
                if ev.is_api_error_message.read("is_api_error_message", emit)
                    || api_error_status.is_some()
                {
                    // Observed with 2.1.332 on a 401: the error is not assistant text (it
                    // must not become `output` or a display item) and not a model turn.
                    // The `result` line that follows repeats it and ends the run.
                    let text: String = m
                        .content
                        .0
                        .into_iter()
                        .filter(|b| b.kind.is("text"))
                        .filter_map(|b| b.text.map(short_text))
                        .collect();
                    if !text.is_empty() {
                        emit(AgentEvent::ProviderError(Cow::Owned(text)));
                    }
                    return true;
                }
                let id = m.id.read("message.id", emit).map(Cow::into_owned);
                let same = matches!(&self.open, Some(open) if open.id.is_some() && open.id == id);
                if !same {
                    self.close_message(emit);
                    self.open = Some(OpenMessage { id, usage: None });
                }
                if let Some(u) = m.usage.read("message.usage", emit) {
                    let usage = u.usage(0.0, 0, emit);
                    if let Some(open) = self.open.as_mut() {
                        open.usage = Some(usage);
                    }
                }
                let mut texts = Vec::new();
                let mut calls = Vec::new();
                for b in m.content.0 {
                    if b.kind.is("text") {
                        texts.extend(b.text.filter(|t| !is_empty_json_str(t)));
                    } else if b.kind.is("tool_use") {
                        calls.push((
                            b.name.read("tool_use.name", emit).unwrap_or_default(),
                            display_args(b.input),
                            b.id.read("tool_use.id", emit),
                        ));
                    }
                }
                if !texts.is_empty() {
                    emit(text_event(texts, "", TextKind::Message));
                }
                // Claude runs each tool as soon as its block is complete.
                for (name, args, id) in calls {
                    emit(AgentEvent::ToolCall { name, args });
                    emit(AgentEvent::ToolStart { id });
                }
            }
            ("user", _) => {
                let results = ev
                    .message
                    .and_then(|raw| serde_json::from_str::<UserMessage<'_>>(raw.get()).ok());
                for b in results.map(|m| m.content.0).unwrap_or_default() {
                    if b.kind.is("tool_result") {
                        let id = b.tool_use_id.read("tool_result.tool_use_id", emit);
                        emit(AgentEvent::ToolEnd { id });
                    }
                }
                // The message's tools have answered: its turn is over.
                self.close_message(emit);
            }
            ("system", Some("api_retry")) => {
                let attempt = match (
                    ev.attempt.read_nullable("attempt", emit),
                    ev.max_retries.read_nullable("max_retries", emit),
                ) {
                    (Some(a), Some(m)) => format!(" {a}/{m}"),
                    (Some(a), None) => format!(" {a}"),
                    _ => String::new(),
                };
                let why = ev
                    .error
                    .and_then(|raw| serde_json::from_str::<Cow<'_, str>>(raw.get()).ok())
                    .unwrap_or(Cow::Borrowed("unknown error"));
                let status = ev
                    .error_status
                    .read_nullable("error_status", emit)
                    .map_or(String::new(), |s| format!(" (HTTP {s})"));
                emit(AgentEvent::Retry(Cow::Owned(format!(
                    "API retry{attempt}: {why}{status}"
                ))));
                if let Some(ms) = ev.retry_delay_ms.read_nullable("retry_delay_ms", emit) {
                    emit(AgentEvent::RetryDelay(std::time::Duration::from_millis(ms)));
                }
            }
            ("stream_event", _) => {
                let Some(se) = ev
                    .event
                    .and_then(|raw| serde_json::from_str::<StreamEvent<'_>>(raw.get()).ok())
                else {
                    return true;
                };
                match se.kind.as_ref() {
                    "message_start" => emit(AgentEvent::MessageStart),
                    "content_block_delta" => match se.delta.and_then(|d| d.text) {
                        Some(t) => emit(text_event(vec![t], "", TextKind::Delta)),
                        // Thinking, or a tool call's arguments.
                        None => emit(AgentEvent::Working),
                    },
                    _ => {}
                }
            }
            ("result", subtype) => {
                self.close_message(emit);
                let cost = ev
                    .total_cost_usd
                    .read("total_cost_usd", emit)
                    .unwrap_or(0.0);
                let turns = ev.num_turns.read_nullable("num_turns", emit).unwrap_or(0);
                let usage = match ev.usage.read_not_null("usage", emit) {
                    Some(u) => u.usage(cost, turns, emit),
                    None => Usage {
                        cost,
                        turns,
                        ..Usage::default()
                    },
                };
                emit(AgentEvent::UsageTotal(usage));
                if subtype == Some("error_max_budget_usd") {
                    emit(AgentEvent::CostBudgetReached);
                }
                let errors: Vec<Cow<'_, str>> = ev
                    .errors
                    .0
                    .into_iter()
                    .filter_map(|e| e.read("errors", emit))
                    .collect();
                if ev.is_error.read("is_error", emit)
                    || subtype.is_some_and(|s| s.starts_with("error"))
                {
                    let message = if !errors.is_empty() {
                        errors.join("; ")
                    } else if let Some(r) = ev.result.filter(|r| !is_empty_json_str(r)) {
                        short_text(r).into_owned()
                    } else {
                        format!("claude ended with {}", subtype.unwrap_or("an error"))
                    };
                    emit(AgentEvent::ProviderError(Cow::Owned(message)));
                } else if let Some(r) = ev.result {
                    emit(text_event(vec![r], "", TextKind::Final));
                }
                emit(AgentEvent::Terminal);
            }
            _ => {}
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::test_support::{agent, args};

    use pretty_assertions::assert_eq;

    #[test]
    fn read_only_agents_get_read_tools_and_git_only_bash() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "grep", "find", "ls", "bash"], true, "Look only.");
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task: "audit",
                model: Some("sonnet"),
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        let prompt = dir.path().join("system-prompt.md");
        let mut want = vec![
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "sonnet",
            "--append-system-prompt-file",
            prompt.to_str().unwrap(),
            "--permission-mode",
            "dontAsk",
            "--tools",
            "Read,Grep,Glob,Bash",
            "--allowedTools",
            "Read",
            "Grep",
            "Glob",
        ];
        want.extend(READONLY_BASH_RULES);
        want.extend(["--", "audit"]);
        assert_eq!(args(&inv), want);
        assert_eq!(inv.warnings.len(), 1);
    }

    /// Turns are counted by orchestrate from the stream (a backend is not even told the
    /// agent's turn budget); the cost, which claude reports only at the end, is claude's
    /// own to keep to.
    #[test]
    fn writers_get_their_tools_allowed_and_the_cost_budget() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "edit", "write", "bash"], false, "");
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task: "fix",
                model: None,
                run_dir: dir.path(),
                resume: None,
                max_cost: Some(0.5),
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--max-budget-usd",
                "0.5",
                "--permission-mode",
                "dontAsk",
                "--tools",
                "Read,Edit,Write,Bash",
                "--allowedTools",
                "Read",
                "Edit",
                "Write",
                "Bash",
                "--",
                "fix",
            ]
        );
        assert!(inv.warnings.is_empty());
    }

    #[test]
    fn a_task_that_starts_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        for task in ["--version", "- find auth\n- check tests", "-"] {
            let inv = build(
                "claude".into(),
                &InvocationInput {
                    agent: &a,
                    task,
                    model: None,
                    run_dir: dir.path(),
                    resume: None,
                    max_cost: None,
                    outer_sandbox: false,
                    permissions: &crate::backends::permissions::PermissionPolicy::default(),
                    stdin_pipe: false,
                    output_schema: None,
                },
            )
            .unwrap();
            let got = args(&inv);
            assert_eq!(got[got.len() - 2..], ["--", task], "{got:?}");
        }
    }

    #[test]
    fn with_a_stdin_pipe_the_task_is_the_first_user_message_and_never_an_argument() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "bash"], false, "");
        let task = "--version";
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task,
                model: None,
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: true,
                output_schema: None,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--input-format",
                "stream-json",
                "--replay-user-messages",
                "--permission-mode",
                "default",
                "--permission-prompt-tool",
                "stdio",
                "--tools",
                "Read,Bash",
                "--allowedTools",
                "Read",
                "Bash",
            ]
        );
        assert_eq!(
            inv.talk,
            Some(crate::backends::Talk::ClaudeStream {
                prompt: task.to_string(),
                policy: Box::default(),
            })
        );
    }

    /// With streamed input claude asks orchestrate about every command past the git
    /// rules, so the rules are no restriction to warn of.
    #[test]
    fn a_read_only_agent_with_streamed_input_keeps_its_git_rules_and_its_other_commands_are_asked()
    {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "bash"], true, "");
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task: "audit",
                model: None,
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: true,
                output_schema: None,
            },
        )
        .unwrap();
        let mut want = vec![
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
            "--replay-user-messages",
            "--permission-mode",
            "default",
            "--permission-prompt-tool",
            "stdio",
            "--tools",
            "Read,Bash",
            "--allowedTools",
            "Read",
        ];
        want.extend(READONLY_BASH_RULES);
        assert_eq!(args(&inv), want);
        assert_eq!(inv.warnings, Vec::<String>::new());
        assert!(inv.talk.as_ref().is_some_and(|t| t.asks_permissions()));
    }

    #[test]
    fn inside_orchestrates_sandbox_claudes_own_is_switched_off() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "bash"], false, "");
        let build_with = |outer_sandbox| {
            args(
                &build(
                    "claude".into(),
                    &InvocationInput {
                        agent: &a,
                        task: "t",
                        model: None,
                        run_dir: dir.path(),
                        resume: None,
                        outer_sandbox,
                        permissions: &crate::backends::permissions::PermissionPolicy::default(),
                        stdin_pipe: false,
                        max_cost: None,
                        output_schema: None,
                    },
                )
                .unwrap(),
            )
        };
        let setting = r#"{"sandbox":{"enabled":false}}"#;
        let with = build_with(true);
        let at = with
            .iter()
            .position(|a| a == "--settings")
            .expect("--settings");
        assert_eq!(with[at + 1], setting);
        assert!(!build_with(false).iter().any(|a| a == "--settings"));
    }

    #[test]
    fn an_output_schema_is_passed_as_json_schema_in_a_resumed_session_too() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        let schema = crate::structured::OutputSchema::compile(
            serde_json::json!({"type": "object", "required": ["n"]}),
        )
        .unwrap();
        let from = crate::backends::ResumeFrom {
            run_id: "ab12cd34".into(),
            session_id: Some("sess-1".into()),
            run_dir: dir.path().to_path_buf(),
        };
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task: "repair it",
                model: None,
                run_dir: dir.path(),
                resume: Some(&from),
                output_schema: Some(&schema),
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "dontAsk",
                "--tools",
                "Read",
                "--resume",
                "sess-1",
                "--json-schema",
                "{\"required\":[\"n\"],\"type\":\"object\"}",
                "--allowedTools",
                "Read",
                "--",
                "repair it",
            ]
        );
    }
}
