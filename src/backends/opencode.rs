//! opencode (`opencode-ai`): `opencode run --format json` and its step/part events.
//!
//! Facts the parser relies on (each seen in the real CLI's output:
//! `tests/contract_opencode.rs` runs it against the mock LLM, and
//! `tests/fixtures/opencode/` holds streams it printed): there is no terminal event (the
//! run ends when the process exits); usage is the sum of the `step_finish` parts and
//! `input` already excludes cache reads; the final text is the last `text` part; errors are
//! `error` events, and retryable ones are retried silently and forever, so the supervisor's
//! timeouts are what stop them.

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::lenient::{Amount, Count, Object, Str};
use super::provider::{self, ProviderHost, ProviderQuery};
use super::tools::{Permissions, Tool};
use super::{
    parse_json, text_event, BackendError, BackendSpec, Dialect, Invocation, InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind};
use crate::result::Usage;

/// The agent orchestrate defines in the config file it hands opencode.
const AGENT_NAME: &str = "orchestrate";
/// opencode's built-in tools that a tool list can switch off. `task` starts a subagent
/// (`general` has bash, edit and write), which does not inherit this agent's tools or
/// permissions (observed with 1.18.33), so it is off unless the agent lists it.
const KNOWN_TOOLS: &[&str] = &[
    "read", "grep", "glob", "list", "bash", "edit", "write", "patch", "task",
];

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "opencode",
    aliases: &[],
    program: "opencode",
    install_hint: "install it with `npm install -g opencode-ai`",
    auto: true,
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::<OpencodeDialect>::default(),
        talks: false,
        reports: super::Reports {
            cost: true,
            usage_while_running: true,
        },
    }),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    // Its models are named `provider/model`.
    provider: None,
    // Config (plugins, and a .gitignore it writes), data (its database, log, login and
    // the tools it downloads), state and cache (the provider packages it installs, code
    // it runs later): all private, as it has no resume to keep sessions for.
    home: Some(|env| {
        use crate::sandbox::xdg_dir;
        let data = xdg_dir(env, "XDG_DATA_HOME", ".local/share", "opencode");
        crate::sandbox::CliHome {
            private: [
                xdg_dir(env, "XDG_CONFIG_HOME", ".config", "opencode"),
                data.clone(),
                xdg_dir(env, "XDG_STATE_HOME", ".local/state", "opencode"),
                xdg_dir(env, "XDG_CACHE_HOME", ".cache", "opencode"),
            ]
            .into_iter()
            .flatten()
            .collect(),
            login: data
                .iter()
                .flat_map(|d| [d.join("auth.json"), d.join("mcp-auth.json")])
                .collect(),
            // It writes `.opencode/.gitignore` in a project's `.opencode` at every start,
            // and stops when it cannot; and installs its plugin package there from npm
            // unless it is installed already (1.18.33).
            project: vec![".opencode", "opencode.json", "opencode.jsonc"],
            project_off_env: Some(("OPENCODE_DISABLE_PROJECT_CONFIG", "1")),
            env: {
                let mut v = super::any_provider_env();
                v.push("OPENCODE_*".into());
                v
            },
            ..Default::default()
        }
    }),
    provider_hosts,
};

/// The provider of the model (`-m provider/model`, else the config's `model`): its
/// `options.baseURL` in the first config file that sets one (the inline
/// `OPENCODE_CONFIG_CONTENT`, the user's `opencode.json`, the project's), else the API
/// hosts of a provider opencode knows by name. A model whose provider cannot be told gets
/// every configured base URL and every known provider's hosts.
fn provider_hosts(q: &ProviderQuery<'_>) -> Vec<ProviderHost> {
    let mut configs: Vec<(String, Value)> = Vec::new();
    if let Some(text) = q.env.get("OPENCODE_CONFIG_CONTENT") {
        if let Ok(v) = provider::parse_jsonc(&text.to_string_lossy()) {
            configs.push(("OPENCODE_CONFIG_CONTENT".into(), v));
        }
    }
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    if let Some(dir) = crate::sandbox::xdg_dir(q.env, "XDG_CONFIG_HOME", ".config", "opencode") {
        for name in ["opencode.json", "opencode.jsonc", "config.json"] {
            files.push(dir.join(name));
        }
    }
    files.extend(provider::project_files(
        q.cwd,
        &[
            "opencode.json",
            "opencode.jsonc",
            ".opencode/opencode.json",
            ".opencode/opencode.jsonc",
        ],
    ));
    for path in files {
        if let Ok(Some(v)) = provider::read_json(&path) {
            configs.push((path.display().to_string(), v));
        }
    }
    let model = q.model.map(str::to_string).or_else(|| {
        configs
            .iter()
            .find_map(|(_, c)| c["model"].as_str().map(str::to_string))
    });
    let provider = model
        .as_deref()
        .and_then(|m| m.split_once('/'))
        .map(|(p, _)| p.to_string());
    let base_url = |id: &str| {
        configs.iter().find_map(|(from, c)| {
            c["provider"][id]["options"]["baseURL"]
                .as_str()
                .map(|url| ProviderHost::url(url, format!("{from} provider.{id}.options.baseURL")))
        })
    };
    match provider {
        Some(id) => match base_url(&id) {
            Some(url) => vec![url],
            None => provider::hosts_of(&id).collect(),
        },
        None => {
            let mut ids: Vec<String> = configs
                .iter()
                .filter_map(|(_, c)| c["provider"].as_object())
                .flat_map(|p| p.keys().cloned())
                .collect();
            ids.sort();
            ids.dedup();
            ids.iter()
                .filter_map(|id| base_url(id))
                .chain(
                    provider::KNOWN_PROVIDERS
                        .iter()
                        .flat_map(|p| provider::hosts_of(p)),
                )
                .collect()
        }
    }
}

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
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
    // opencode retries a provider it cannot reach silently (observed: 65 s of nothing on
    // stdout); only its log, on stderr, says so.
    inv.env("OPENCODE_PRINT_LOGS", "1");
    inv.arg("--agent").arg(AGENT_NAME);
    if !p.readonly {
        // Without it, a headless run rejects every permission that would ask.
        inv.arg("--auto");
    }
    // After `--`: a task that starts with `-` is the message, never an option.
    inv.arg("--");
    for word in message_words(input.task) {
        inv.arg(word);
    }
    Ok(inv)
}

/// The task as `opencode run`'s message words. opencode (1.18.33) joins its words with
/// spaces, wrapping each word that has a space in double quotes and escaping the quotes
/// inside (one argument `find auth` reaches the model as `"find auth"`); and its parser
/// (yargs) turns a word that looks like a number into one, on which opencode crashes
/// (`G.includes is not a function`). Words cut at every space join back into the task
/// exactly, runs of spaces included; a word that looks like a number is kept with a
/// neighbour instead, and only that pair reaches the model in quotes.
fn message_words(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut words = task.split(' ');
    while let Some(word) = words.next() {
        if !yargs_number(word) {
            out.push(word.to_string());
        } else if let Some(next) = words.next() {
            out.push(format!("{word} {next}"));
        } else if let Some(prev) = out.last_mut() {
            prev.push(' ');
            prev.push_str(word);
        } else {
            out.push(format!("{word} "));
        }
    }
    out
}

/// Whether yargs-parser reads `word` as a number (its `looksLikeNumber`).
fn yargs_number(word: &str) -> bool {
    let hex = word
        .strip_prefix("0x")
        .or_else(|| word.strip_prefix("0X"))
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()));
    if hex {
        return true;
    }
    let b = word.as_bytes();
    if b.len() >= 2 && b[0] == b'0' && b[1] != b'.' {
        return false;
    }
    // ^-?(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?$
    let rest = word.strip_prefix('-').unwrap_or(word);
    let (mantissa, exponent) = match rest.find('e') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        None => digits(mantissa),
        Some((int, frac)) => {
            (digits(int) && (frac.is_empty() || digits(frac))) || (int.is_empty() && digits(frac))
        }
    };
    let exponent_ok = exponent.is_none_or(|e| {
        digits(
            e.strip_prefix('-')
                .or_else(|| e.strip_prefix('+'))
                .unwrap_or(e),
        )
    });
    mantissa_ok && exponent_ok
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

/// Every field but the event's type is read leniently (see [`super::lenient`]): one of
/// another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(rename = "sessionID", borrow, default)]
    session_id: Str<'a>,
    #[serde(borrow, default)]
    part: Option<Part<'a>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// `{"name": …, "data": {"message": …}}` or `{"message": …}`; the rest is skipped unbuilt.
#[derive(Deserialize, Default)]
struct ErrorBody<'a> {
    #[serde(borrow, default)]
    name: Str<'a>,
    #[serde(borrow, default)]
    message: Str<'a>,
    #[serde(borrow, default)]
    data: Object<'a, ErrorData<'a>>,
}

#[derive(Deserialize, Default)]
struct ErrorData<'a> {
    #[serde(borrow, default)]
    message: Str<'a>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool: Str<'a>,
    #[serde(borrow, default)]
    state: Object<'a, ToolState<'a>>,
    #[serde(borrow, default)]
    tokens: Object<'a, Tokens<'a>>,
    #[serde(borrow, default)]
    cost: Amount<'a>,
}

#[derive(Deserialize)]
struct ToolState<'a> {
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Tokens<'a> {
    #[serde(borrow, default)]
    input: Count<'a>,
    #[serde(borrow, default)]
    output: Count<'a>,
    #[serde(borrow, default)]
    cache: Object<'a, Cache<'a>>,
}

#[derive(Deserialize, Default)]
struct Cache<'a> {
    #[serde(borrow, default)]
    read: Count<'a>,
    #[serde(borrow, default)]
    write: Count<'a>,
}

#[derive(Debug, Default)]
pub(crate) struct OpencodeDialect {
    session_seen: bool,
}

impl Dialect for OpencodeDialect {
    /// opencode's log (`OPENCODE_PRINT_LOGS`, logfmt) says when a request to the provider
    /// failed: `level=ERROR … message="stream error" … error.error="AI_APICallError: …"`;
    /// it retries after it, saying nothing on stdout.
    fn parse_stderr_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if !line.contains("message=\"stream error\"") {
            return;
        }
        let words = line
            .split_once("error.error=\"")
            .map(|(_, rest)| rest.strip_suffix('"').unwrap_or(rest))
            .unwrap_or("stream error");
        emit(AgentEvent::Retry(Cow::Owned(words.to_string())));
    }

    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        if !self.session_seen {
            if let Some(id) = ev.session_id.read("sessionID", emit) {
                self.session_seen = true;
                emit(AgentEvent::SessionId(id));
            }
        }
        match (ev.kind.as_ref(), ev.part) {
            ("step_start", _) => emit(AgentEvent::MessageStart),
            // Thinking (with --thinking): work that shows no answer yet.
            ("reasoning", _) => emit(AgentEvent::Working),
            ("text", Some(part)) => {
                if let Some(text) = part.text {
                    emit(text_event(vec![text], "", TextKind::Message));
                }
            }
            ("tool_use", Some(part)) => {
                let name = part
                    .tool
                    .read("part.tool", emit)
                    .unwrap_or(Cow::Borrowed("tool"));
                let input = part.state.read("part.state", emit).and_then(|s| s.input);
                emit(AgentEvent::ToolCall {
                    name,
                    args: display_args(input),
                })
            }
            ("step_finish", Some(part)) => {
                let t = part
                    .tokens
                    .read_not_null("part.tokens", emit)
                    .unwrap_or_default();
                let cache = t
                    .cache
                    .read_not_null("part.tokens.cache", emit)
                    .unwrap_or_default();
                let usage = Usage {
                    input: t.input.read("part.tokens.input", emit).unwrap_or(0),
                    output: t.output.read("part.tokens.output", emit).unwrap_or(0),
                    cache_read: cache.read.read("part.tokens.cache.read", emit).unwrap_or(0),
                    cache_write: cache
                        .write
                        .read("part.tokens.cache.write", emit)
                        .unwrap_or(0),
                    cost: part.cost.read("part.cost", emit).unwrap_or(0.0),
                    turns: 0,
                };
                emit(AgentEvent::Usage(usage));
                emit(AgentEvent::TurnEnd);
                emit(AgentEvent::Recovered);
            }
            ("error", _) => {
                let e: ErrorBody<'_> = ev
                    .error
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or_default();
                let data = e.data.read("error.data", emit);
                let message = data
                    .and_then(|d| d.message.read("error.data.message", emit))
                    .or_else(|| e.message.read("error.message", emit))
                    .or_else(|| e.name.read("error.name", emit))
                    .unwrap_or(Cow::Borrowed("opencode reported an error"));
                emit(AgentEvent::ProviderError(message));
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
                "run",
                "--format",
                "json",
                "-m",
                "mock/m",
                "--agent",
                "orchestrate",
                "--",
                "look"
            ]
        );
        let config_path = dir.path().join("opencode.json");
        assert_eq!(
            inv.env,
            vec![
                (
                    "OPENCODE_CONFIG".into(),
                    config_path.clone().into_os_string()
                ),
                ("OPENCODE_PRINT_LOGS".into(), "1".into())
            ]
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
                "run",
                "--format",
                "json",
                "--agent",
                "orchestrate",
                "--auto",
                "--",
                "fix"
            ]
        );
    }

    #[test]
    fn a_task_that_starts_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        for task in [
            "--version",
            "- find auth\n- check tests",
            "-",
            " two  spaces ",
        ] {
            let inv = build(
                "opencode".into(),
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
            let dashes = got.iter().position(|a| a == "--").expect("--");
            assert_eq!(got[dashes + 1..].join(" "), task, "{got:?}");
            assert!(
                !got[dashes + 1..].iter().any(|w| w.contains(' ')),
                "{got:?}"
            );
        }
    }

    #[test]
    fn words_that_look_like_numbers_keep_a_neighbour() {
        let words = |t: &str| message_words(t);
        assert_eq!(words("fix issue 42 now"), ["fix", "issue", "42 now"]);
        assert_eq!(words("bump to 1.5"), ["bump", "to 1.5"]);
        assert_eq!(words("0x10  \"q\""), ["0x10 ", "\"q\""]);
        assert_eq!(words("42"), ["42 "]);
        assert_eq!(words("v1.5 007 1e3x"), ["v1.5", "007", "1e3x"]);
        for n in [
            "42", "-5", "3.", ".5", "1e3", "2e-4", "0X1F", "0.5", "1.5e+2",
        ] {
            assert!(yargs_number(n), "{n}");
        }
        for n in [
            "", "-", ".", "e3", "1e", "0x", "007", "1.2.3", "1,000", "--5", "0xg", "2E-4",
        ] {
            assert!(!yargs_number(n), "{n}");
        }
    }
}
