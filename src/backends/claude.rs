//! Claude Code (`@anthropic-ai/claude-code`): its command line and its stream-json dialect.
//!
//! Facts the parser relies on (see `reference/child-clis.md`): per-message `usage` on
//! `assistant` lines comes from `message_start` and is not final, so usage and cost come
//! from the `result` line; API errors arrive as a synthetic assistant message and a
//! `result` with `is_error: true` (exit 1); `error_max_turns` is a `result` subtype;
//! `system/api_retry` lines are the CLI retrying on its own.

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::tools::{Permissions, Tool};
use super::{
    parse_json, BackendError, BackendSpec, Dialect, DialectKind, Invocation, InvocationInput,
};
use crate::events::AgentEvent;
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

pub(crate) const SPEC: BackendSpec = BackendSpec {
    name: "claude",
    aliases: &["claude-code"],
    program: "claude",
    install_hint: "install it with `npm install -g @anthropic-ai/claude-code`",
    resumes: true,
    // `total_cost_usd` of a resumed session is the session's; `usage` is the run's.
    resumed_totals: super::SessionTotals {
        tokens: false,
        cost: true,
    },
    output_schema: super::SchemaRoute::Option,
    build,
    new_dialect: Some(|| Box::<ClaudeDialect>::default()),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
};

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, DialectKind::Claude);
    // The prompt comes first: `--tools` and `--allowedTools` take several values and would
    // swallow a prompt placed after them.
    inv.arg("-p")
        .arg(input.task)
        .arg("--output-format")
        .arg("stream-json")
        .arg("--verbose");
    if let Some(model) = input.model() {
        inv.arg("--model").arg(model);
    }
    if let Some(n) = input.agent.max_turns {
        inv.arg("--max-turns").arg(n.to_string());
    }
    if let Some(path) = input.write_system_prompt()? {
        inv.arg("--append-system-prompt-file").arg(&path);
        inv.prompt_files.push(path);
    }
    let p = Permissions::of(input.agent);
    let (tools, allowed) = claude_tools(&p, &mut inv.warnings);
    // `dontAsk` denies every tool use that the allow rules do not cover: headless runs
    // cannot answer a prompt, and a denial is safer than a hang.
    inv.arg("--permission-mode").arg("dontAsk");
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
    Ok(inv)
}

/// The tool set (`--tools`) and the allow rules (`--allowedTools`).
fn claude_tools(p: &Permissions, warnings: &mut Vec<String>) -> (Vec<String>, Vec<String>) {
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
            warnings.push(
                "claude: bash is limited to read-only git commands (log, show, diff, status, blame, ls-files, rev-parse) for this read-only agent".to_string(),
            );
        } else {
            allowed.push(name.to_string());
        }
    }
    (tools, allowed)
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    event: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<Cow<'a, str>>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    num_turns: Option<u64>,
    #[serde(default)]
    total_cost_usd: Option<f64>,
    #[serde(default)]
    usage: Option<ClaudeUsage>,
    #[serde(default)]
    errors: Vec<String>,
    /// Set on the synthetic `assistant` line (model `<synthetic>`) by which claude reports
    /// a failed API call: its text is claude's error message, not the model's answer.
    #[serde(default)]
    is_api_error_message: bool,
    #[serde(default)]
    api_error_status: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaudeUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_creation_input_tokens: u64,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Vec<Block<'a>>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum Block<'a> {
    #[serde(rename = "text")]
    Text {
        #[serde(borrow, default)]
        text: Cow<'a, str>,
    },
    #[serde(rename = "tool_use")]
    ToolUse {
        #[serde(borrow, default)]
        name: Cow<'a, str>,
        #[serde(default)]
        input: serde_json::Value,
    },
    #[serde(other)]
    Other,
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
    text: Option<Cow<'a, str>>,
}

#[derive(Debug, Default)]
pub(crate) struct ClaudeDialect {
    /// Claude prints one `assistant` line per content block; lines of one API message
    /// share its id, and a new id is a new turn.
    last_message_id: Option<String>,
}

impl Dialect for ClaudeDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        match (ev.kind.as_ref(), ev.subtype.as_deref()) {
            ("system", Some("init")) => {
                if let Some(id) = ev.session_id {
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
                if ev.is_api_error_message || ev.api_error_status.is_some() {
                    // Observed with 2.1.332 on a 401: the error is not assistant text (it
                    // must not become `output` or a display item) and not a model turn.
                    // The `result` line that follows repeats it and ends the run.
                    let text: String = m
                        .content
                        .into_iter()
                        .filter_map(|b| match b {
                            Block::Text { text } => Some(text),
                            _ => None,
                        })
                        .collect();
                    if !text.is_empty() {
                        emit(AgentEvent::ProviderError(Cow::Owned(text)));
                    }
                    return true;
                }
                let id = m.id.as_deref().map(str::to_string);
                if id.is_none() || id != self.last_message_id {
                    emit(AgentEvent::TurnEnd);
                    self.last_message_id = id;
                }
                let mut text = String::new();
                let mut calls = Vec::new();
                for b in m.content {
                    match b {
                        Block::Text { text: t } => text.push_str(&t),
                        Block::ToolUse { name, input } => calls.push((name, input)),
                        Block::Other => {}
                    }
                }
                if !text.is_empty() {
                    emit(AgentEvent::AssistantMessage(Cow::Owned(text)));
                }
                for (name, args) in calls {
                    emit(AgentEvent::ToolCall { name, args });
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
                    "content_block_delta" => {
                        if let Some(t) = se.delta.and_then(|d| d.text) {
                            emit(AgentEvent::TextDelta(t));
                        }
                    }
                    _ => {}
                }
            }
            ("result", subtype) => {
                let u = ev.usage.unwrap_or_default();
                emit(AgentEvent::UsageTotal(Usage {
                    input: u.input_tokens,
                    output: u.output_tokens,
                    cache_read: u.cache_read_input_tokens,
                    cache_write: u.cache_creation_input_tokens,
                    cost: ev.total_cost_usd.unwrap_or(0.0),
                    turns: ev.num_turns.unwrap_or(0),
                }));
                if ev.is_error || subtype.is_some_and(|s| s.starts_with("error")) {
                    let message = if !ev.errors.is_empty() {
                        ev.errors.join("; ")
                    } else if let Some(r) = ev.result.as_deref().filter(|r| !r.is_empty()) {
                        r.to_string()
                    } else {
                        format!("claude ended with {}", subtype.unwrap_or("an error"))
                    };
                    emit(AgentEvent::ProviderError(Cow::Owned(message)));
                } else if let Some(r) = ev.result {
                    emit(AgentEvent::FinalText(r));
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
                output_schema: None,
            },
        )
        .unwrap();
        let prompt = dir.path().join("system-prompt.md");
        let mut want = vec![
            "-p",
            "audit",
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
        assert_eq!(args(&inv), want);
        assert_eq!(inv.warnings.len(), 1);
    }

    #[test]
    fn writers_get_their_tools_allowed_and_max_turns() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = agent(&["read", "edit", "write", "bash"], false, "");
        a.max_turns = Some(7);
        let inv = build(
            "claude".into(),
            &InvocationInput {
                agent: &a,
                task: "fix",
                model: None,
                run_dir: dir.path(),
                resume: None,
                output_schema: None,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "fix",
                "--output-format",
                "stream-json",
                "--verbose",
                "--max-turns",
                "7",
                "--permission-mode",
                "dontAsk",
                "--tools",
                "Read,Edit,Write,Bash",
                "--allowedTools",
                "Read",
                "Edit",
                "Write",
                "Bash",
            ]
        );
        assert!(inv.warnings.is_empty());
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
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "-p",
                "repair it",
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
            ]
        );
    }
}
