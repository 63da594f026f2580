//! OpenAI Codex (`@openai/codex`): `codex exec --json` and its thread/turn/item events.
//!
//! Facts the parser relies on (each seen in the real CLI's output:
//! `tests/contract_codex.rs` runs it against the mock LLM, and `tests/fixtures/codex/`
//! holds streams it printed): `turn.completed.usage` already adds up every request of the
//! turn, and its `input_tokens` *include* the cached ones, so `input` is normalized to
//! exclude `cacheRead`; there is no cost field; errors are `error` then `turn.failed`, and
//! `error` lines saying "Reconnecting..." are the CLI retrying on its own.

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::lenient::{Count, Object, Str};
use super::provider::{ProviderHost, ProviderQuery};
use super::tools::{Permissions, Tool};
use super::{
    parse_json, text_event, BackendError, BackendSpec, Dialect, Invocation, InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::result::Usage;

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "codex",
    aliases: &[],
    program: "codex",
    install_hint: "install it with `npm install -g @openai/codex`",
    auto: true,
    resumes: true,
    // `exec resume` reports the thread's token counts, the earlier runs' included.
    resumed_totals: super::SessionTotals {
        tokens: true,
        cost: false,
    },
    output_schema: super::SchemaRoute::Option,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::<CodexDialect>::default(),
        talks: false,
        reports: super::Reports {
            cost: false,
            usage_while_running: false,
        },
    }),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    provider: Some("openai"),
    // CODEX_HOME (~/.codex): config, rules, login, its sqlite state and in tmp/ the
    // arg0 aliases its shell tool needs, private; the sessions `exec resume` continues,
    // kept. The variable its config names as a provider's key (`env_key`) is its own.
    home: Some(|env| {
        let dir = env.dir_or_home("CODEX_HOME", ".codex");
        let mut vars: Vec<String> = ["OPENAI_*", "CODEX_*", "AZURE_OPENAI_*"]
            .map(String::from)
            .to_vec();
        if let Some(config) = dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("config.toml")).ok())
        {
            vars.extend(config_env_keys(&config));
        }
        crate::sandbox::CliHome {
            kept: dir.iter().map(|d| d.join("sessions")).collect(),
            login: dir.iter().map(|d| d.join("auth.json")).collect(),
            private: dir.into_iter().collect(),
            env: vars,
            ..Default::default()
        }
    }),
    provider_hosts,
};

/// The model provider `$CODEX_HOME/config.toml` selects (`model_provider`, or the active
/// profile's): a provider of its own is its `base_url`; the built-in `openai` is
/// `api.openai.com` for an API key and `chatgpt.com` for a ChatGPT login (its token
/// refreshed at `auth.openai.com`), or its `openai_base_url`; `oss`/`ollama` and `lmstudio`
/// are local servers.
fn provider_hosts(q: &ProviderQuery<'_>) -> Vec<ProviderHost> {
    let path = q
        .env
        .dir_or_home("CODEX_HOME", ".codex")
        .map(|home| home.join("config.toml"));
    let config: toml::Table = path
        .as_ref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default();
    let from = |key: &str| match &path {
        Some(p) => format!("{} {key}", p.display()),
        None => key.to_string(),
    };
    let text = |t: &toml::Table, key: &str| t.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let profile = text(&config, "profile").and_then(|name| {
        config
            .get("profiles")
            .and_then(|p| p.get(&name))
            .and_then(|p| p.as_table())
            .cloned()
    });
    let provider = profile
        .as_ref()
        .and_then(|p| text(p, "model_provider"))
        .or_else(|| text(&config, "model_provider"))
        .unwrap_or_else(|| "openai".into());
    let own = config
        .get("model_providers")
        .and_then(|p| p.get(&provider))
        .and_then(|p| p.get("base_url"))
        .and_then(|u| u.as_str());
    if let Some(url) = own {
        return vec![ProviderHost::url(
            url,
            from(&format!("model_providers.{provider}.base_url")),
        )];
    }
    match provider.as_str() {
        "oss" | "ollama" => vec![ProviderHost::url(
            "http://localhost:11434/v1",
            "codex's ollama provider",
        )],
        "lmstudio" => vec![ProviderHost::url(
            "http://localhost:1234/v1",
            "codex's lmstudio provider",
        )],
        _ => match text(&config, "openai_base_url") {
            Some(url) => vec![ProviderHost::url(url, from("openai_base_url"))],
            None => ["api.openai.com", "chatgpt.com", "auth.openai.com"]
                .into_iter()
                .map(ProviderHost::Host)
                .collect(),
        },
    }
}

/// The variables codex's config names as providers' keys (`env_key = "…"`, any table).
fn config_env_keys(config: &str) -> Vec<String> {
    fn walk(v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    match (k.as_str(), v) {
                        ("env_key", toml::Value::String(s)) => out.push(s.clone()),
                        _ => walk(v, out),
                    }
                }
            }
            toml::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = config.parse::<toml::Table>() {
        walk(&toml::Value::Table(v), &mut out);
    }
    out
}

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
    inv.arg("exec");
    if input.resume.is_some() {
        inv.arg("resume");
    }
    inv.arg("--json").arg("--skip-git-repo-check");
    if let Some(model) = input.model() {
        inv.arg("-m").arg(model);
    }
    let p = Permissions::of(input.agent);
    // The sandbox is codex's only restriction: read-only lets the shell run but not write.
    // Inside orchestrate's sandbox, that one is the guard: codex's own (bubblewrap) could
    // not mount anything there and its shell would never run, so codex is told to rely on
    // the outer one (it then starts no bubblewrap at all).
    let sandbox = if input.outer_sandbox {
        "danger-full-access"
    } else if p.readonly {
        "read-only"
    } else {
        "workspace-write"
    };
    if input.resume.is_some() {
        // `exec resume` has no -s; the same setting as a config override.
        inv.arg("-c").arg(format!("sandbox_mode=\"{sandbox}\""));
    } else {
        inv.arg("-s").arg(sandbox);
    }
    if !p.tools.is_empty() && !p.wants_bash() {
        inv.warnings.push(format!(
            "codex has no per-tool allow-list: it keeps its shell; the {} sandbox is the restriction",
            if p.readonly { "read-only" } else { "workspace-write" }
        ));
    }
    if p.tools.iter().any(|t| matches!(t, Tool::Native(_))) {
        inv.warnings
            .push("codex ignores tool names it does not know".to_string());
    }
    if !input.agent.system_prompt.trim().is_empty() {
        // `-c key=value` parses the value as TOML; a JSON string literal is a valid TOML
        // basic string, escapes included.
        let value = serde_json::to_string(&input.agent.system_prompt).expect("a string serializes");
        inv.arg("-c").arg(format!("developer_instructions={value}"));
        if let Some(path) = input.write_system_prompt()? {
            inv.prompt_files.push(path);
        }
    }
    if let Some(path) = input.write_output_schema()? {
        // codex sends it as the Responses API's strict `text.format` (json_schema), and
        // its final message is the JSON text.
        inv.arg("--output-schema").arg(&path);
        inv.prompt_files.push(path);
    }
    // The positionals after `--`, so that a task that starts with `-` is the prompt and
    // never an option (clap, checked against codex 0.171.0: after `--` not even
    // `resume` or `review` is a subcommand).
    inv.arg("--");
    if let Some(from) = input.resume {
        inv.arg(from.session_id("codex")?);
    }
    inv.arg(prompt_arg(input.task).as_ref());
    Ok(inv)
}

/// codex reads its prompt from stdin when the argument is `-`; a task that is just `-`
/// gets a newline so that it is the prompt itself.
fn prompt_arg(task: &str) -> Cow<'_, str> {
    if task == "-" {
        Cow::Owned(format!("{task}\n"))
    } else {
        Cow::Borrowed(task)
    }
}

/// Every field but the event's type is read leniently (see [`super::lenient`]): one of
/// another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    thread_id: Str<'a>,
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
    #[serde(borrow, default)]
    usage: Object<'a, CodexUsage<'a>>,
    #[serde(borrow, default)]
    message: Str<'a>,
    #[serde(borrow, default)]
    error: Object<'a, ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(borrow, default)]
    message: Str<'a>,
}

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(borrow, default)]
    id: Str<'a>,
    #[serde(rename = "type", borrow, default)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    /// A string (an array of words in some versions).
    #[serde(borrow, default)]
    command: Option<&'a RawValue>,
    #[serde(borrow, default)]
    changes: Option<&'a RawValue>,
    #[serde(borrow, default)]
    server: Str<'a>,
    #[serde(borrow, default)]
    tool: Str<'a>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    query: Str<'a>,
}

/// An item with its fields read (odd ones said and left out).
struct ReadItem<'a> {
    id: Option<Cow<'a, str>>,
    kind: Cow<'a, str>,
    text: Option<&'a RawValue>,
    command: Option<Cow<'a, str>>,
    changes: Option<&'a RawValue>,
    server: Option<Cow<'a, str>>,
    tool: Option<Cow<'a, str>>,
    arguments: Option<&'a RawValue>,
    query: Option<Cow<'a, str>>,
}

impl<'a> Item<'a> {
    fn read(self, emit: &mut dyn FnMut(AgentEvent<'_>)) -> ReadItem<'a> {
        ReadItem {
            id: self.id.read("item.id", emit),
            kind: self.kind.read("item.type", emit).unwrap_or_default(),
            text: self.text,
            command: command_line(self.command, emit),
            changes: self.changes,
            server: self.server.read("item.server", emit),
            tool: self.tool.read("item.tool", emit),
            arguments: self.arguments,
            query: self.query.read("item.query", emit),
        }
    }
}

/// A command as one line: a string as it is, an array of words joined by spaces.
fn command_line<'a>(
    raw: Option<&'a RawValue>,
    emit: &mut dyn FnMut(AgentEvent<'_>),
) -> Option<Cow<'a, str>> {
    let raw = raw.filter(|r| r.get() != "null")?;
    if let Ok(words) = serde_json::from_str::<Vec<Cow<'_, str>>>(raw.get()) {
        return Some(Cow::Owned(words.join(" ")));
    }
    let text: Str<'a> = serde_json::from_str(raw.get()).ok()?;
    text.read("item.command", emit)
}

#[derive(Deserialize, Default)]
struct CodexUsage<'a> {
    #[serde(borrow, default)]
    input_tokens: Count<'a>,
    #[serde(borrow, default)]
    cached_input_tokens: Count<'a>,
    #[serde(borrow, default)]
    cache_write_input_tokens: Count<'a>,
    #[serde(borrow, default)]
    output_tokens: Count<'a>,
}

/// Item ids remembered to show each item once; an item's events come close together, so
/// the most recent ones suffice, and a flood of items cannot grow the set.
const MAX_SEEN_ITEMS: usize = 1024;

/// The ids of the most recent items, at most [`MAX_SEEN_ITEMS`].
#[derive(Debug, Default)]
struct RecentIds {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl RecentIds {
    /// Whether `id` is new (and now remembered).
    fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == MAX_SEEN_ITEMS {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
        self.set.insert(id.to_string());
        self.order.push_back(id.to_string());
        true
    }
}

#[derive(Debug, Default)]
pub(crate) struct CodexDialect {
    /// Items already shown: a command appears as started, updated and completed.
    seen_items: RecentIds,
    /// An item of a model response arrived since the last tool finished. codex reports
    /// one `turn.completed` for the whole exec, not one per model request; a response
    /// ends where its tools finish (the next request carries their output), so that is
    /// where a turn is counted, as pi and claude count turns.
    responding: bool,
    /// Turns counted since `turn.started`.
    turns: u64,
}

/// Item kinds that are tools a model response called (the rest are the response's own
/// output: messages, reasoning, plans).
const TOOL_ITEMS: &[&str] = &[
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "web_search",
    "collab_tool_call",
];

impl CodexDialect {
    fn end_response(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if std::mem::take(&mut self.responding) {
            self.turns += 1;
            emit(AgentEvent::TurnEnd);
        }
    }

    fn on_item(&mut self, phase: &str, item: ReadItem<'_>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        // `error` items are codex's own warnings, not part of a response.
        if item.kind == "error" {
            return;
        }
        let tool = TOOL_ITEMS.contains(&item.kind.as_ref());
        let tool_done = phase == "item.completed" && tool;
        if !tool_done {
            self.responding = true;
        }
        let id = item.id.clone();
        self.show_item(phase, item, emit);
        match (phase, tool) {
            ("item.started", true) => emit(AgentEvent::ToolStart { id }),
            ("item.completed", true) => emit(AgentEvent::ToolEnd { id }),
            // A tool's output so far, reasoning, a plan: work that shows no answer yet.
            ("item.started" | "item.updated", _) => emit(AgentEvent::Working),
            _ => {}
        }
        // When one response called several tools, the first to finish ends it; the
        // others find no response under way.
        if tool_done {
            self.end_response(emit);
        }
    }

    fn show_item(&mut self, phase: &str, item: ReadItem<'_>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if item.kind == "agent_message" {
            if phase == "item.completed" {
                if let Some(text) = item.text {
                    emit(text_event(vec![text], "", TextKind::Message));
                }
            }
            return;
        }
        let call = match item.kind.as_ref() {
            "command_execution" => Some((
                "bash".into(),
                json!({"command": item.command.as_deref().unwrap_or_default()}),
            )),
            "file_change" if phase == "item.completed" => Some((
                "edit".into(),
                json!({"changes": display_args(item.changes)}),
            )),
            "mcp_tool_call" => Some((
                format!(
                    "{}.{}",
                    item.server.as_deref().unwrap_or("mcp"),
                    item.tool.as_deref().unwrap_or("tool")
                ),
                display_args(item.arguments),
            )),
            "web_search" => Some((
                "web_search".into(),
                json!({"query": item.query.as_deref().unwrap_or_default()}),
            )),
            _ => None,
        };
        let Some((name, args)) = call else { return };
        if let Some(id) = item.id {
            if !self.seen_items.insert(&id) {
                return;
            }
        }
        emit(AgentEvent::ToolCall {
            name: Cow::Owned(name),
            args,
        });
    }
}

impl Dialect for CodexDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        match ev.kind.as_ref() {
            "thread.started" => {
                if let Some(id) = ev.thread_id.read("thread_id", emit) {
                    emit(AgentEvent::SessionId(id));
                }
            }
            "turn.started" => {
                self.turns = 0;
                emit(AgentEvent::MessageStart);
            }
            phase @ ("item.started" | "item.updated" | "item.completed") => {
                if let Some(item) = ev.item {
                    let item = item.read(emit);
                    self.on_item(phase, item, emit);
                }
            }
            "turn.completed" => {
                let u = ev.usage.read_not_null("usage", emit).unwrap_or_default();
                let input = u.input_tokens.read("usage.input_tokens", emit).unwrap_or(0);
                let cached = u
                    .cached_input_tokens
                    .read("usage.cached_input_tokens", emit)
                    .unwrap_or(0);
                let usage = Usage {
                    input: input.saturating_sub(cached),
                    output: u
                        .output_tokens
                        .read("usage.output_tokens", emit)
                        .unwrap_or(0),
                    cache_read: cached,
                    cache_write: u
                        .cache_write_input_tokens
                        .read("usage.cache_write_input_tokens", emit)
                        .unwrap_or(0),
                    cost: 0.0,
                    turns: 0,
                };
                emit(AgentEvent::Usage(usage));
                // A completed turn had at least one model response.
                if self.responding || self.turns == 0 {
                    self.responding = true;
                    self.end_response(emit);
                }
                emit(AgentEvent::Recovered);
                emit(AgentEvent::Terminal);
            }
            "turn.failed" => {
                let message = ev
                    .error
                    .read("error", emit)
                    .and_then(|e| e.message.read("error.message", emit))
                    .unwrap_or(Cow::Borrowed(
                        "codex reported turn.failed without a message",
                    ));
                emit(AgentEvent::ProviderError(message));
                emit(AgentEvent::Terminal);
            }
            "error" => {
                if let Some(m) = ev.message.read("message", emit) {
                    if m.starts_with("Reconnecting") {
                        emit(AgentEvent::Retry(m));
                    } else {
                        emit(AgentEvent::ProviderError(m));
                    }
                }
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
    use crate::backends::ResumeFrom;

    use pretty_assertions::assert_eq;

    #[test]
    fn read_only_agents_run_in_the_read_only_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "grep"], false, "Say \"hi\"\nthen stop.");
        let inv = build(
            "codex".into(),
            &InvocationInput {
                agent: &a,
                task: "look",
                model: Some("gpt-5.5"),
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
        assert_eq!(
            args(&inv),
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-m",
                "gpt-5.5",
                "-s",
                "read-only",
                "-c",
                "developer_instructions=\"Say \\\"hi\\\"\\nthen stop.\"",
                "--",
                "look",
            ]
        );
        assert_eq!(inv.warnings, ["codex has no per-tool allow-list: it keeps its shell; the read-only sandbox is the restriction"]);
        let b = agent(&["read", "edit", "bash"], false, "");
        let inv = build(
            "codex".into(),
            &InvocationInput {
                agent: &b,
                task: "fix",
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
        assert_eq!(
            args(&inv),
            [
                "exec",
                "--json",
                "--skip-git-repo-check",
                "-s",
                "workspace-write",
                "--",
                "fix"
            ]
        );
        assert!(inv.warnings.is_empty());
    }

    #[test]
    fn a_task_that_starts_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        for (task, sent) in [
            ("--version", "--version"),
            (
                "--dangerously-bypass-approvals-and-sandbox",
                "--dangerously-bypass-approvals-and-sandbox",
            ),
            ("- find auth\n- check tests", "- find auth\n- check tests"),
            // codex reads its prompt from stdin when it is `-`.
            ("-", "-\n"),
        ] {
            let inv = build(
                "codex".into(),
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
            assert_eq!(got[got.len() - 2..], ["--", sent], "{got:?}");
        }
        let from = ResumeFrom {
            run_id: "r1".into(),
            session_id: Some("0199-thread".into()),
            run_dir: dir.path().to_path_buf(),
        };
        let inv = build(
            "codex".into(),
            &InvocationInput {
                agent: &a,
                task: "--version",
                model: None,
                run_dir: dir.path(),
                resume: Some(&from),
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        let got = args(&inv);
        assert_eq!(
            got[got.len() - 3..],
            ["--", "0199-thread", "--version"],
            "{got:?}"
        );
    }

    #[test]
    fn inside_orchestrates_sandbox_codex_starts_no_sandbox_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "grep"], true, "");
        let from = crate::backends::ResumeFrom {
            run_id: "ab12cd34".into(),
            session_id: Some("thread-1".into()),
            run_dir: dir.path().to_path_buf(),
        };
        for (resume, want) in [
            (
                None,
                vec![
                    "exec",
                    "--json",
                    "--skip-git-repo-check",
                    "-s",
                    "danger-full-access",
                    "--",
                    "look",
                ],
            ),
            (
                Some(&from),
                vec![
                    "exec",
                    "resume",
                    "--json",
                    "--skip-git-repo-check",
                    "-c",
                    "sandbox_mode=\"danger-full-access\"",
                    "--",
                    "thread-1",
                    "look",
                ],
            ),
        ] {
            let inv = build(
                "codex".into(),
                &InvocationInput {
                    agent: &a,
                    task: "look",
                    model: None,
                    run_dir: dir.path(),
                    resume,
                    outer_sandbox: true,
                    permissions: &crate::backends::permissions::PermissionPolicy::default(),
                    stdin_pipe: false,
                    max_cost: None,
                    output_schema: None,
                },
            )
            .unwrap();
            assert_eq!(args(&inv), want);
        }
    }

    #[test]
    fn an_output_schema_is_a_file_in_the_run_folder_given_to_output_schema() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "edit", "bash"], false, "");
        let schema = crate::structured::OutputSchema::compile(
            serde_json::json!({"type": "object", "required": ["n"]}),
        )
        .unwrap();
        let from = crate::backends::ResumeFrom {
            run_id: "ab12cd34".into(),
            session_id: Some("thread-1".into()),
            run_dir: dir.path().to_path_buf(),
        };
        let file = dir.path().join("output-schema.json");
        for resume in [None, Some(&from)] {
            let inv = build(
                "codex".into(),
                &InvocationInput {
                    agent: &a,
                    task: "name it",
                    model: None,
                    run_dir: dir.path(),
                    resume,
                    output_schema: Some(&schema),
                    max_cost: None,
                    outer_sandbox: false,
                    permissions: &crate::backends::permissions::PermissionPolicy::default(),
                    stdin_pipe: false,
                },
            )
            .unwrap();
            let mut want = vec!["exec"];
            if resume.is_some() {
                want.extend(["resume", "--json", "--skip-git-repo-check", "-c"]);
                want.push("sandbox_mode=\"workspace-write\"");
            } else {
                want.extend(["--json", "--skip-git-repo-check", "-s", "workspace-write"]);
            }
            want.extend(["--output-schema", file.to_str().unwrap(), "--"]);
            if resume.is_some() {
                want.push("thread-1");
            }
            want.push("name it");
            assert_eq!(args(&inv), want);
            assert_eq!(inv.prompt_files, std::slice::from_ref(&file));
            assert_eq!(
                std::fs::read_to_string(&file).unwrap(),
                r#"{"required":["n"],"type":"object"}"#
            );
        }
    }
}
