//! Gemini CLI (`@google/gemini-cli`): `gemini -p … --output-format stream-json`.
//!
//! Facts the parser relies on (each seen in the real CLI's output:
//! `tests/contract_gemini.rs` runs it against the mock LLM, and `tests/fixtures/gemini/`
//! holds streams it printed): assistant text arrives only as deltas, so the dialect joins
//! them itself and closes a message at each tool call and at the `result`;
//! `result.stats.input_tokens` is the prompt total and `input` excludes the cached part;
//! there is no cost; `result.status: "error"` carries API errors, and the exit code says
//! more (41 auth, 42 input, 52 config, 53 turn limit, 55 untrusted, or the HTTP status mod
//! 256).

use std::borrow::Cow;
use std::ffi::OsString;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::lenient::{Count, Flag, Object, Str};
use super::provider::{self, ProviderHost, ProviderQuery};
use super::tools::Permissions;
use super::{
    is_empty_json_str, parse_json, text_event, BackendError, BackendSpec, Dialect, Invocation,
    InvocationInput,
};
use crate::collector::display_args;
use crate::events::{AgentEvent, TextKind, Transient};
use crate::result::Usage;

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "gemini",
    aliases: &[],
    program: "gemini",
    install_hint: "install it with `npm install -g @google/gemini-cli`",
    auto: true,
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    dialect: Some(super::DialectSpec {
        parser: || Box::<GeminiDialect>::default(),
        talks: false,
        reports: super::Reports {
            cost: false,
            usage_while_running: false,
        },
    }),
    explain_exit,
    transient_exit,
    provider: Some("google"),
    // ~/.gemini (GEMINI_CLI_HOME acts as the home): it rewrites settings.json and
    // projects.json there at every start, keeps extensions and its login beside them;
    // all private (it has no resume to keep sessions for).
    home: Some(|env| {
        let dir: Vec<_> = env
            .dir_or_home("GEMINI_CLI_HOME", "")
            .map(|home| home.join(".gemini"))
            .into_iter()
            .collect();
        crate::sandbox::CliHome {
            login: dir
                .iter()
                .flat_map(|d| {
                    [
                        "oauth_creds.json",
                        "google_accounts.json",
                        "mcp-oauth-tokens.json",
                        "gemini-credentials.json",
                    ]
                    .map(|f| d.join(f))
                })
                .collect(),
            private: dir,
            env: ["GEMINI_*", "GOOGLE_*"].map(String::from).to_vec(),
            ..Default::default()
        }
    }),
    provider_hosts,
};

/// By the auth its settings select (`security.auth.selectedType` in
/// `~/.gemini/settings.json`, else what the environment has a key for): the Gemini API
/// (`GOOGLE_GEMINI_BASE_URL` moves it), Vertex AI, or for a Google login Code Assist
/// (`CODE_ASSIST_ENDPOINT` moves it) and the host that refreshes its token. (The hosts are
/// those in gemini-cli 0.61.0's bundle.)
fn provider_hosts(q: &ProviderQuery<'_>) -> Vec<ProviderHost> {
    let settings = q
        .env
        .dir_or_home("GEMINI_CLI_HOME", "")
        .map(|home| home.join(".gemini/settings.json"))
        .and_then(|p| provider::read_json(&p).ok().flatten());
    let selected = settings
        .as_ref()
        .and_then(|s| s.pointer("/security/auth/selectedType"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let set = |var: &str| q.env.get(var).is_some();
    let auth = selected.unwrap_or_else(|| {
        if set("GEMINI_API_KEY") || set("GOOGLE_GEMINI_BASE_URL") {
            "gemini-api-key".into()
        } else if q
            .env
            .get("GOOGLE_GENAI_USE_VERTEXAI")
            .is_some_and(|v| v.to_str() == Some("true"))
        {
            "vertex-ai".into()
        } else {
            "oauth-personal".into()
        }
    });
    match auth.as_str() {
        "vertex-ai" => {
            let api = q.env_url("GOOGLE_VERTEX_BASE_URL").unwrap_or_else(|| {
                match q
                    .env
                    .get("GOOGLE_CLOUD_LOCATION")
                    .map(|v| v.to_string_lossy().into_owned())
                {
                    Some(region) if region != "global" => ProviderHost::url(
                        format!("https://{region}-aiplatform.googleapis.com"),
                        "GOOGLE_CLOUD_LOCATION",
                    ),
                    _ => ProviderHost::Host("aiplatform.googleapis.com"),
                }
            });
            vec![api, ProviderHost::Host("oauth2.googleapis.com")]
        }
        "gemini-api-key" => vec![q
            .env_url("GOOGLE_GEMINI_BASE_URL")
            .unwrap_or(ProviderHost::Host("generativelanguage.googleapis.com"))],
        _ => vec![
            q.env_url("CODE_ASSIST_ENDPOINT")
                .unwrap_or(ProviderHost::Host("cloudcode-pa.googleapis.com")),
            ProviderHost::Host("oauth2.googleapis.com"),
        ],
    }
}

pub(crate) fn build(
    program: OsString,
    input: &InvocationInput<'_>,
) -> Result<Invocation, BackendError> {
    let mut inv = Invocation::new(program, super::Backend(&BACKEND));
    // Gemini has no flag to append to its system prompt, and replacing it
    // (GEMINI_SYSTEM_MD) would drop its tool instructions: the agent's prompt goes first
    // in the message instead.
    let prompt = input.task_with_instructions();
    // gemini's parser (yargs) gives `-p` no value that starts with `-`: such a task would
    // be options. `--prompt=VALUE` takes any value, but strips quotes around one (`"x"`
    // becomes `x`), which a value that starts with `-` cannot have.
    if prompt.starts_with('-') {
        inv.arg(format!("--prompt={prompt}"));
    } else {
        inv.arg("-p").arg(prompt);
    }
    inv.arg("--output-format").arg("stream-json");
    if let Some(model) = input.model() {
        inv.arg("-m").arg(model);
    }
    // Headless runs cannot answer a trust prompt (exit 55 without this).
    inv.arg("--skip-trust");
    if input.outer_sandbox {
        // Its own sandbox is a container (docker, podman), which cannot start inside
        // orchestrate's; the variable a user may have set must not ask for one.
        inv.env("GEMINI_SANDBOX", "false");
    }
    let p = Permissions::of(input.agent);
    let mode = if p.readonly {
        "plan"
    } else if p.wants_bash() {
        "yolo"
    } else {
        "auto_edit"
    };
    inv.arg("--approval-mode").arg(mode);
    let denied = denied_tools(&p);
    if !denied.is_empty() {
        // Approval modes alone do not hold headless (observed with 0.61.0): the model may
        // call `exit_plan_mode`, which a headless run approves by itself ("Switching to
        // YOLO mode"), after which write_file writes anywhere; in default and auto_edit
        // modes `enter_plan_mode` is allowed and leads to the same exit. A deny rule at the
        // admin tier (above the user's own policies) removes the tools and the way out.
        let path = input.run_dir.join("gemini-policy.toml");
        super::write_prompt_file(&path, &policy_toml(&denied))?;
        inv.arg("--admin-policy").arg(&path);
        inv.prompt_files.push(path);
        if has_system_policies() {
            inv.warnings.push(format!(
                "gemini ignores --admin-policy because {SYSTEM_POLICIES_DIR} has policies: \
                 this agent's denial of {} rests on those policies",
                denied.join(", ")
            ));
        }
    }
    if !p.tools.is_empty() {
        inv.warnings.push(format!(
            "gemini keeps its own tool set; the restriction is approval mode {mode}{}",
            if denied.is_empty() {
                String::new()
            } else {
                format!(" and a policy denying {}", denied.join(", "))
            }
        ));
    }
    Ok(inv)
}

/// Where gemini looks for system (admin) policies on Linux; when it has any, gemini
/// ignores `--admin-policy`.
const SYSTEM_POLICIES_DIR: &str = "/etc/gemini-cli/policies";

fn has_system_policies() -> bool {
    std::fs::read_dir(SYSTEM_POLICIES_DIR).is_ok_and(|d| {
        d.flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "toml"))
    })
}

/// The gemini tools an agent must not have: the plan-mode switches whenever the approval
/// mode is a restriction (anything but yolo), the writers for a read-only agent, and the
/// shell unless the agent may use it.
fn denied_tools(p: &Permissions) -> Vec<&'static str> {
    let mut denied = Vec::new();
    if p.readonly || !p.wants_bash() {
        denied.extend(["enter_plan_mode", "exit_plan_mode", "run_shell_command"]);
    }
    if p.readonly {
        denied.extend(["write_file", "replace"]);
    }
    denied
}

/// A gemini policy file (TOML) that denies `tools` in every mode.
fn policy_toml(tools: &[&str]) -> String {
    let names: Vec<String> = tools.iter().map(|t| format!("{t:?}")).collect();
    format!(
        "# Written by orchestrate for one run: tools this agent must not use.\n\
         [[rule]]\n\
         toolName = [{}]\n\
         decision = \"deny\"\n\
         priority = 999\n\
         denyMessage = \"orchestrate: this agent may not use this tool.\"\n",
        names.join(", ")
    )
}

/// Gemini exits with the HTTP status modulo 256 when the API call failed.
fn transient_exit(code: i32) -> Option<Transient> {
    match code {
        173 => Some(Transient::RateLimited),
        17 => Some(Transient::Overloaded),
        244 | 246 | 247 | 248 => Some(Transient::ServerError),
        _ => None,
    }
}

/// Gemini CLI's documented exit codes.
fn explain_exit(code: i32) -> Option<&'static str> {
    Some(match code {
        41 => "authentication failed",
        42 => "invalid input",
        44 => "sandbox error",
        52 => "configuration error",
        53 => "turn limit reached",
        54 => "tool error",
        55 => "the workspace is not trusted",
        130 => "cancelled",
        144 => "the API answered HTTP 400",
        145 => "the API answered HTTP 401",
        147 => "the API answered HTTP 403",
        173 => "the API answered HTTP 429 (rate limited)",
        _ => return None,
    })
}

/// Every field but the event's type is read leniently (see [`super::lenient`]): one of
/// another type is lost alone, never its line.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    session_id: Str<'a>,
    #[serde(borrow, default)]
    role: Str<'a>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Flag<'a>,
    #[serde(borrow, default)]
    tool_name: Str<'a>,
    #[serde(borrow, default)]
    tool_id: Str<'a>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow, default)]
    status: Str<'a>,
    #[serde(borrow, default)]
    severity: Str<'a>,
    #[serde(borrow, default)]
    message: Str<'a>,
    #[serde(borrow, default)]
    error: Object<'a, ErrorBody<'a>>,
    #[serde(borrow, default)]
    stats: Object<'a, Stats<'a>>,
}

#[derive(Deserialize)]
struct ErrorBody<'a> {
    #[serde(borrow, default)]
    message: Str<'a>,
}

#[derive(Deserialize, Default)]
struct Stats<'a> {
    #[serde(borrow, default)]
    input_tokens: Count<'a>,
    #[serde(borrow, default)]
    output_tokens: Count<'a>,
    #[serde(borrow, default)]
    cached: Count<'a>,
    #[serde(borrow, default)]
    input: Count<'a>,
}

#[derive(Debug, Default)]
pub(crate) struct GeminiDialect {
    /// Deltas of an assistant message are being written (the collector keeps the text).
    streaming: bool,
    /// A model response is under way (text or tool calls since the last tool result).
    responding: bool,
}

impl GeminiDialect {
    fn close_message(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if std::mem::take(&mut self.streaming) {
            emit(AgentEvent::StreamedMessageEnd);
        }
    }

    fn close_turn(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if std::mem::take(&mut self.responding) {
            emit(AgentEvent::TurnEnd);
        }
    }
}

impl Dialect for GeminiDialect {
    /// Gemini says on stderr when a request failed and it will try again: `Attempt 2
    /// failed. Retrying with backoff... Error: …` or `Attempt 1 failed with status 503.
    /// Retrying with backoff... _ApiError: {…}` (then a stack trace).
    fn parse_stderr_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        let line = line.trim();
        if line.starts_with("Attempt ") && line.contains("Retrying with backoff") {
            emit(AgentEvent::Retry(Cow::Borrowed(line)));
        }
    }

    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        let Some(ev) = parse_json::<Line<'_>>(line) else {
            return false;
        };
        match ev.kind.as_ref() {
            "init" => {
                if let Some(id) = ev.session_id.read("session_id", emit) {
                    emit(AgentEvent::SessionId(id));
                }
            }
            "message" if ev.role.is("assistant") => {
                let delta = ev.delta.read("delta", emit);
                if !self.responding {
                    emit(AgentEvent::MessageStart);
                }
                self.responding = true;
                let Some(content) = ev.content else {
                    if !delta {
                        self.streaming = false;
                        emit(AgentEvent::AssistantMessage(Cow::Borrowed("")));
                    }
                    return true;
                };
                if delta {
                    self.streaming |= !is_empty_json_str(content);
                    emit(text_event(vec![content], "", TextKind::Delta));
                } else {
                    self.streaming = false;
                    emit(text_event(vec![content], "", TextKind::Message));
                }
            }
            "tool_use" => {
                self.close_message(emit);
                self.responding = true;
                let name = ev
                    .tool_name
                    .read("tool_name", emit)
                    .unwrap_or(Cow::Borrowed("tool"));
                emit(AgentEvent::ToolCall {
                    name,
                    args: display_args(ev.parameters),
                });
                let id = ev.tool_id.read("tool_id", emit);
                emit(AgentEvent::ToolStart { id });
            }
            "tool_result" => {
                let id = ev.tool_id.read("tool_id", emit);
                emit(AgentEvent::ToolEnd { id });
                self.close_turn(emit);
            }
            "error" if !ev.severity.is("warning") => {
                if let Some(m) = ev.message.read("message", emit) {
                    emit(AgentEvent::ProviderError(m));
                }
            }
            "result" => {
                self.close_message(emit);
                self.close_turn(emit);
                if let Some(s) = ev.stats.read_not_null("stats", emit) {
                    let cached = s.cached.read("stats.cached", emit).unwrap_or(0);
                    let total = s.input_tokens.read("stats.input_tokens", emit);
                    let input = s.input.read("stats.input", emit);
                    let usage = Usage {
                        input: input.unwrap_or(total.unwrap_or(0).saturating_sub(cached)),
                        output: s
                            .output_tokens
                            .read("stats.output_tokens", emit)
                            .unwrap_or(0),
                        cache_read: cached,
                        cache_write: 0,
                        cost: 0.0,
                        turns: 0,
                    };
                    emit(AgentEvent::Usage(usage));
                }
                if ev.status.is("error") {
                    let message = ev
                        .error
                        .read("error", emit)
                        .and_then(|e| e.message.read("error.message", emit))
                        .unwrap_or(Cow::Borrowed("gemini reported an error result"));
                    emit(AgentEvent::ProviderError(message));
                } else {
                    emit(AgentEvent::Recovered);
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
    fn approval_mode_follows_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let ro = agent(&["read", "grep", "bash"], true, "Only look.");
        let inv = build(
            "gemini".into(),
            &InvocationInput {
                agent: &ro,
                task: "where is X",
                model: Some("gemini-2.5-pro"),
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
        let policy = dir.path().join("gemini-policy.toml");
        assert_eq!(
            args(&inv),
            [
                "-p",
                "<instructions>\nOnly look.\n</instructions>\n\nTask: where is X",
                "--output-format",
                "stream-json",
                "-m",
                "gemini-2.5-pro",
                "--skip-trust",
                "--approval-mode",
                "plan",
                "--admin-policy",
                policy.to_str().unwrap(),
            ]
        );
        assert_eq!(inv.prompt_files, vec![policy.clone()]);
        assert_eq!(
            std::fs::read_to_string(&policy).unwrap(),
            "# Written by orchestrate for one run: tools this agent must not use.\n\
             [[rule]]\n\
             toolName = [\"enter_plan_mode\", \"exit_plan_mode\", \"run_shell_command\", \"write_file\", \"replace\"]\n\
             decision = \"deny\"\n\
             priority = 999\n\
             denyMessage = \"orchestrate: this agent may not use this tool.\"\n"
        );
        let mut warnings = vec!["gemini keeps its own tool set; the restriction is approval mode plan and a policy denying enter_plan_mode, exit_plan_mode, run_shell_command, write_file, replace".to_string()];
        if has_system_policies() {
            warnings.insert(0, inv.warnings[0].clone());
        }
        assert_eq!(inv.warnings, warnings);

        // Edits without a shell: auto_edit, and no way to the shell through plan mode.
        let w = agent(&["read", "edit"], false, "");
        let inv = build(
            "gemini".into(),
            &InvocationInput {
                agent: &w,
                task: "t",
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
            args(&inv)[5..],
            [
                "--approval-mode",
                "auto_edit",
                "--admin-policy",
                policy.to_str().unwrap()
            ]
        );
        assert!(std::fs::read_to_string(&policy).unwrap().contains(
            "toolName = [\"enter_plan_mode\", \"exit_plan_mode\", \"run_shell_command\"]"
        ));

        // Everything: yolo, no policy, nothing to warn about.
        let any = agent(&[], false, "");
        let inv = build(
            "gemini".into(),
            &InvocationInput {
                agent: &any,
                task: "t",
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
        assert_eq!(args(&inv)[5..], ["--approval-mode", "yolo"]);
        assert!(inv.prompt_files.is_empty());
        assert!(inv.warnings.is_empty());
    }

    #[test]
    fn a_task_that_starts_with_a_dash_is_never_an_option() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], false, "");
        for task in ["--version", "- find auth\n- check tests", "-"] {
            let inv = build(
                "gemini".into(),
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
            // `-p VALUE` takes no value that starts with `-`; `--prompt=VALUE` takes any.
            let prompt_arg = |t: &str| {
                if t.starts_with('-') {
                    vec![format!("--prompt={t}")]
                } else {
                    vec!["-p".to_string(), t.to_string()]
                }
            };
            assert_eq!(got[..prompt_arg(task).len()], prompt_arg(task), "{got:?}");
        }
    }

    #[test]
    fn inside_orchestrates_sandbox_gemini_is_told_not_to_start_a_container() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read", "bash"], false, "");
        let env_of = |outer_sandbox| {
            build(
                "gemini".into(),
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
            .unwrap()
            .env
        };
        assert_eq!(env_of(true), [("GEMINI_SANDBOX".into(), "false".into())]);
        assert_eq!(env_of(false), []);
    }
}
