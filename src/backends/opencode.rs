//! opencode (`opencode-ai`): `opencode run --format json` and its step/part events.
//!
//! Facts the parser relies on (see `reference/child-clis.md`): there is no terminal event
//! (the run ends when the process exits); usage is the sum of the `step_finish` parts and
//! `input` already excludes cache reads; the final text is the last `text` part; errors
//! are `error` events, and retryable ones are retried silently and forever, so the
//! supervisor's timeouts are what stop them.

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::tools::{Permissions, Tool};
use super::{
    parse_json, BackendError, BackendSpec, Dialect, DialectKind, Invocation, InvocationInput,
};
use crate::events::AgentEvent;
use crate::result::Usage;

/// The agent orchestrate defines in the config file it hands opencode.
const AGENT_NAME: &str = "orchestrate";
/// opencode's built-in tools that a tool list can switch off. `task` starts a subagent
/// (`general` has bash, edit and write), which does not inherit this agent's tools or
/// permissions (observed with 1.18.33), so it is off unless the agent lists it.
const KNOWN_TOOLS: &[&str] = &[
    "read", "grep", "glob", "list", "bash", "edit", "write", "patch", "task",
];

pub(crate) const SPEC: BackendSpec = BackendSpec {
    name: "opencode",
    aliases: &[],
    program: "opencode",
    install_hint: "install it with `npm install -g opencode-ai`",
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    new_dialect: Some(|| Box::<OpencodeDialect>::default()),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
};

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, DialectKind::Opencode);
    inv.arg("run").arg("--format").arg("json");
    if let Some(model) = input.model() {
        inv.arg("-m").arg(model);
    }
    let p = Permissions::of(input.agent);
    let mut agent = Map::new();
    agent.insert("mode".into(), json!("primary"));
    agent.insert(
        "description".into(),
        json!(format!("orchestrate agent {}", input.agent.name)),
    );
    if let Some(n) = input.agent.max_turns {
        agent.insert("steps".into(), json!(n));
    }
    let tools = opencode_tools(&p);
    if !tools.is_empty() {
        agent.insert("tools".into(), Value::Object(tools));
    }
    if p.readonly {
        agent.insert(
            "permission".into(),
            json!({"edit": "deny", "bash": "deny", "task": "deny"}),
        );
    }
    let mut config = json!({
        "$schema": "https://opencode.ai/config.json",
        "agent": {AGENT_NAME: Value::Object(agent)},
    });
    if p.readonly {
        // Every agent of this run, subagents included. A project's own opencode.json is
        // read after this file and can loosen it, so the agent's own settings above
        // (which a project's top-level settings do not override) are what hold; this
        // is the second line.
        config["permission"] = json!({"edit": "deny", "bash": "deny"});
    }
    if let Some(path) = input.write_system_prompt()? {
        // `instructions` are added to opencode's own prompt, as AGENTS.md would be.
        config["instructions"] = json!([path.to_string_lossy()]);
        inv.prompt_files.push(path);
    }
    let config_path = input.run_dir.join("opencode.json");
    super::write_prompt_file(
        &config_path,
        &serde_json::to_string_pretty(&config).expect("json"),
    )?;
    inv.prompt_files.push(config_path.clone());
    // OPENCODE_CONFIG adds a config file above the user's global one; the user's provider
    // settings and keys stay as they are.
    inv.env("OPENCODE_CONFIG", config_path.into_os_string());
    inv.arg("--agent").arg(AGENT_NAME);
    if !p.readonly {
        // Without it, a headless run rejects every permission that would ask.
        inv.arg("--auto");
    }
    inv.arg(input.task);
    Ok(inv)
}

/// `{"bash": false, …}` for the known tools the agent did not list.
fn opencode_tools(p: &Permissions) -> Map<String, Value> {
    let mut off = Map::new();
    let granted = p.granted();
    let listed = !granted.is_empty();
    for name in KNOWN_TOOLS {
        let tool = Tool::parse(name);
        // A subagent could write for a read-only agent.
        let writer = matches!(tool, Tool::Edit | Tool::Write | Tool::Bash) || *name == "task";
        let keep = if listed {
            granted.contains(&tool)
        } else {
            true
        };
        if !keep || (p.readonly && writer) {
            off.insert(name.to_string(), Value::Bool(false));
        }
    }
    off
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(rename = "sessionID", borrow, default)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    part: Option<Part<'a>>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool: Option<Cow<'a, str>>,
    #[serde(default)]
    state: Option<ToolState>,
    #[serde(default)]
    tokens: Option<Tokens>,
    #[serde(default)]
    cost: f64,
}

#[derive(Deserialize)]
struct ToolState {
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Tokens {
    input: u64,
    output: u64,
    cache: Cache,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Cache {
    read: u64,
    write: u64,
}

#[derive(Debug, Default)]
pub(crate) struct OpencodeDialect {
    session_seen: bool,
}

impl Dialect for OpencodeDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        if !self.session_seen {
            if let Some(id) = ev.session_id {
                self.session_seen = true;
                emit(AgentEvent::SessionId(id));
            }
        }
        match (ev.kind.as_ref(), ev.part) {
            ("step_start", _) => emit(AgentEvent::MessageStart),
            ("text", Some(part)) => {
                if let Some(text) = part.text {
                    emit(AgentEvent::AssistantMessage(text));
                }
            }
            ("tool_use", Some(part)) => emit(AgentEvent::ToolCall {
                name: part.tool.unwrap_or(Cow::Borrowed("tool")),
                args: part.state.map(|s| s.input).unwrap_or_default(),
            }),
            ("step_finish", Some(part)) => {
                let t = part.tokens.unwrap_or_default();
                emit(AgentEvent::Usage(Usage {
                    input: t.input,
                    output: t.output,
                    cache_read: t.cache.read,
                    cache_write: t.cache.write,
                    cost: part.cost,
                    turns: 0,
                }));
                emit(AgentEvent::TurnEnd);
                emit(AgentEvent::Recovered);
            }
            ("error", _) => {
                let e = ev.error.unwrap_or_default();
                let message = e["data"]["message"]
                    .as_str()
                    .or_else(|| e["message"].as_str())
                    .or_else(|| e["name"].as_str())
                    .unwrap_or("opencode reported an error")
                    .to_string();
                emit(AgentEvent::ProviderError(Cow::Owned(message)));
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
    fn read_only_agents_get_a_config_that_denies_writes() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "grep", "bash"], true, "Look.");
        let inv = build(
            "opencode".into(),
            &InvocationInput {
                agent: &a,
                task: "look",
                model: Some("mock/m"),
                run_dir: dir.path(),
                resume: None,
                output_schema: None,
            },
        )
        .unwrap();
        assert_eq!(
            args(&inv),
            [
                "run",
                "--format",
                "json",
                "-m",
                "mock/m",
                "--agent",
                "orchestrate",
                "look"
            ]
        );
        let config_path = dir.path().join("opencode.json");
        assert_eq!(
            inv.env,
            vec![(
                "OPENCODE_CONFIG".into(),
                config_path.clone().into_os_string()
            )]
        );
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
        assert_eq!(
            config["agent"]["orchestrate"]["tools"],
            json!({"glob": false, "list": false, "bash": false, "edit": false, "write": false, "patch": false, "task": false})
        );
        assert_eq!(
            config["agent"]["orchestrate"]["permission"],
            json!({"edit": "deny", "bash": "deny", "task": "deny"})
        );
        assert_eq!(
            config["permission"],
            json!({"edit": "deny", "bash": "deny"})
        );
        assert_eq!(
            config["instructions"],
            json!([dir.path().join("system-prompt.md").to_str().unwrap()])
        );
    }

    #[test]
    fn writers_auto_approve() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&[], false, "");
        let inv = build(
            "opencode".into(),
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
                "run",
                "--format",
                "json",
                "--agent",
                "orchestrate",
                "--auto",
                "fix"
            ]
        );
    }
}
