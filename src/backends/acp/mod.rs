//! ACP agents (the Agent Client Protocol: JSON-RPC over the child's stdio): `backend: acp`
//! runs any agent from its command (`acp_command:`), and one backend per ACP agent that
//! installs from npm runs that agent with its own command line and home (`gemini-acp`,
//! `opencode-acp`, `claude-acp`, `codex-acp`, `pi-acp`, `qwen-acp`).
//!
//! A preset is a backend, not an option of `acp`, because it differs from the others in
//! everything a backend declares: its program and install hint, the home the sandbox keeps
//! writable, how its model is set, whether it resumes, and what a result's `backend`
//! names. One name is also one flag (`--backend claude-acp`) wherever a backend is chosen.
//!
//! - `client.rs`: orchestrate's side of the conversation (the dialect).
//! - `ask.rs`: permission requests out to the parent (`permissions: ask`).
//! - `wire.rs`: the messages it reads.
//!
//! orchestrate speaks the protocol itself rather than through the `agent-client-protocol`
//! crate: it needs a dozen messages, read from lines the supervisor frames (bounded,
//! recorded, parsed without copying long texts) for a child the supervisor owns, while the
//! crate runs a connection loop of its own over the agent's streams (spawning the agent
//! itself by default), and its major versions have changed every few weeks.

mod ask;
mod client;
mod wire;

use std::ffi::OsString;
use std::path::PathBuf;

use super::{
    Backend, BackendError, BackendSpec, DialectSpec, Invocation, InvocationInput, Reports, Talk,
};
use crate::backends::permissions::PermissionPolicy;

pub(crate) use client::AcpDialect;

/// What orchestrate's side of one ACP conversation needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The session's working directory (absolute).
    pub cwd: PathBuf,
    /// The first message: the agent's prompt and the task.
    pub prompt: String,
    pub model: Option<String>,
    /// The model is set through the session's model option (`session/set_config_option`),
    /// not on the command line.
    pub model_by_option: bool,
    /// The agent's session to load (`session/load`) instead of a new one.
    pub resume: Option<String>,
    /// The session mode to set before the prompt (`session/set_mode`).
    pub mode: Option<String>,
    pub policy: PermissionPolicy,
}

impl Conversation {
    /// A conversation that is only read (a recorded stream), never held.
    fn reading() -> Conversation {
        Conversation {
            cwd: PathBuf::from("/"),
            prompt: String::new(),
            model: None,
            model_by_option: false,
            resume: None,
            mode: None,
            policy: PermissionPolicy::default(),
        }
    }
}

impl Talk {
    pub(super) fn acp_dialect(conv: &Conversation) -> Box<dyn super::Dialect> {
        Box::new(AcpDialect::new(conv.clone()))
    }
}

/// How a preset's agent is started.
struct Preset {
    /// Arguments after the program.
    args: &'static [&'static str],
    /// The flag its model is given with (`-m`), or a `-c` override's key (codex-acp);
    /// `None`: set through the session's model option.
    model: ModelRoute,
    /// Environment the agent needs to run headless.
    env: &'static [(&'static str, &'static str)],
    /// The session mode in which it asks before it acts (`session/set_mode`), when its
    /// default mode decides by itself.
    mode: Option<&'static str>,
    /// Arguments that switch off the agent's own sandbox inside orchestrate's, where it
    /// has one that cannot work nested (codex's shell fails and reports nothing).
    outer_sandbox_args: &'static [&'static str],
}

#[derive(Clone, Copy)]
enum ModelRoute {
    Flag(&'static str),
    /// `-c model="…"`.
    CodexConfig,
    /// An environment variable.
    Env(&'static str),
    Option,
}

const GEMINI_PRESET: Preset = Preset {
    args: &["--acp"],
    model: ModelRoute::Flag("-m"),
    env: &[],
    mode: None,
    outer_sandbox_args: &[],
};
const OPENCODE_PRESET: Preset = Preset {
    args: &["acp"],
    model: ModelRoute::Option,
    env: &[],
    mode: None,
    outer_sandbox_args: &[],
};
const CLAUDE_PRESET: Preset = Preset {
    args: &[],
    model: ModelRoute::Env("ANTHROPIC_MODEL"),
    env: &[],
    // Its default mode is `auto` (a classifier approves or not): in `default` it asks.
    mode: Some("default"),
    outer_sandbox_args: &[],
};
const CODEX_PRESET: Preset = Preset {
    args: &[],
    model: ModelRoute::CodexConfig,
    env: &[],
    mode: None,
    outer_sandbox_args: &["-c", "sandbox_mode=\"danger-full-access\""],
};
const PI_PRESET: Preset = Preset {
    args: &[],
    model: ModelRoute::Option,
    env: &[],
    mode: None,
    outer_sandbox_args: &[],
};
const QWEN_PRESET: Preset = Preset {
    args: &["--acp", "--approval-mode", "default"],
    model: ModelRoute::Flag("--model"),
    env: &[],
    mode: None,
    outer_sandbox_args: &[],
};

/// A preset's backend. `like NATIVE` takes the home and provider hosts of the CLI's own
/// backend (the same CLI, the same files and keys); otherwise they are given.
macro_rules! preset_spec {
    ($name:literal, $program:literal, $hint:literal, $preset:ident, like $native:path) => {
        preset_spec!(
            $name,
            $program,
            $hint,
            $preset,
            $native.home,
            $native.provider_hosts,
            $native.provider
        )
    };
    ($name:literal, $program:literal, $hint:literal, $preset:ident, $dirs:expr, $hosts:expr, $provider:expr) => {
        BackendSpec {
            name: $name,
            aliases: &[],
            program: $program,
            install_hint: $hint,
            // `auto` picks a CLI's own headless mode, never its ACP preset.
            auto: false,
            resumes: true,
            // `usage_update` carries the session's cost so far; tokens are per turn.
            resumed_totals: super::SessionTotals {
                tokens: false,
                cost: true,
            },
            output_schema: super::SchemaRoute::Prompt,
            build: |program, input| build(program, input, Some(&$preset)),
            dialect: Some(STREAM),
            explain_exit: super::no_exit_meaning,
            transient_exit: super::no_transient_exit,
            home: $dirs,
            provider_hosts: $hosts,
            provider: $provider,
        }
    };
}

/// The ACP stream: whether an agent reports its cost while it works depends on the agent
/// (claude-agent-acp does, in `usage_update`), so budgets are checked as the run goes.
const STREAM: DialectSpec = DialectSpec {
    // Reads only: it talks once a run attaches it to a child (`Talk::Acp`).
    parser: || Box::new(AcpDialect::new(Conversation::reading())),
    talks: true,
    reports: Reports {
        cost: true,
        usage_while_running: true,
    },
};

/// Any ACP agent, from `acp_command:` (or `ORCHESTRATE_ACP_COMMAND`).
pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "acp",
    aliases: &[],
    program: "",
    install_hint: "check the agent's `acp_command:`",
    auto: false,
    resumes: true,
    resumed_totals: super::SessionTotals {
        tokens: false,
        cost: true,
    },
    output_schema: super::SchemaRoute::Prompt,
    build: |program, input| build(program, input, None),
    dialect: Some(STREAM),
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    // Whatever the agent's command is: no folder of its own, and any provider's key.
    home: Some(|_| crate::sandbox::CliHome {
        env: super::any_provider_env(),
        ..Default::default()
    }),
    // Its provider is whatever the agent's command uses: `allow_hosts` names it.
    provider_hosts: |_| Vec::new(),
    provider: None,
};

/// The presets: each one CLI's ACP mode, registered beside `acp` in `BACKENDS`.
#[cfg(test)]
pub(crate) static PRESETS: [&BackendSpec; 6] = [&GEMINI, &OPENCODE, &CLAUDE, &CODEX, &PI, &QWEN];

pub(crate) static GEMINI: BackendSpec = preset_spec!(
    "gemini-acp",
    "gemini",
    "install it with `npm install -g @google/gemini-cli` (ACP since 0.34)",
    GEMINI_PRESET,
    like super::gemini::BACKEND
);
pub(crate) static OPENCODE: BackendSpec = preset_spec!(
    "opencode-acp",
    "opencode",
    "install it with `npm install -g opencode-ai`",
    OPENCODE_PRESET,
    like super::opencode::BACKEND
);
pub(crate) static CLAUDE: BackendSpec = preset_spec!(
    "claude-acp",
    "claude-agent-acp",
    "install it with `npm install -g @agentclientprotocol/claude-agent-acp` (it bundles Claude Code; node 22 or newer)",
    CLAUDE_PRESET,
    like super::claude::BACKEND
);
pub(crate) static CODEX: BackendSpec = preset_spec!(
    "codex-acp",
    "codex-acp",
    "install it with `npm install -g @zed-industries/codex-acp`",
    CODEX_PRESET,
    like super::codex::BACKEND
);
pub(crate) static PI: BackendSpec = preset_spec!(
    "pi-acp",
    "pi-acp",
    "install it with `npm install -g pi-acp` (it runs the `pi` on PATH: `npm install -g @earendil-works/pi-coding-agent`, node 22.19 or newer)",
    PI_PRESET,
    Some(pi_acp_home),
    super::pi::BACKEND.provider_hosts,
    super::pi::BACKEND.provider
);
pub(crate) static QWEN: BackendSpec = preset_spec!(
    "qwen-acp",
    "qwen",
    "install it with `npm install -g @qwen-code/qwen-code` (node 22 or newer)",
    QWEN_PRESET,
    // Not verified under the sandbox: none by default.
    None,
    |_| Vec::new(),
    None
);

/// pi's home, and pi-acp's map of its sessions to pi's (`~/.pi/pi-acp`), which `--resume`
/// reads in a later run.
fn pi_acp_home(env: &super::ChildEnv<'_>) -> crate::sandbox::CliHome {
    let mut home = super::pi::BACKEND
        .home
        .map(|pi| pi(env))
        .unwrap_or_default();
    home.kept.extend(env.home().map(|h| h.join(".pi/pi-acp")));
    home
}

fn build(
    program: OsString,
    input: &InvocationInput<'_>,
    preset: Option<&Preset>,
) -> Result<Invocation, BackendError> {
    let mut inv;
    let mut model_by_option = false;
    match preset {
        Some(p) => {
            inv = Invocation::new(program, Backend(&BACKEND));
            for a in p.args {
                inv.arg(*a);
            }
            for (k, v) in p.env {
                inv.env(*k, *v);
            }
            if input.outer_sandbox {
                for a in p.outer_sandbox_args {
                    inv.arg(*a);
                }
            }
            if let Some(model) = input.model() {
                match p.model {
                    ModelRoute::Flag(flag) => {
                        inv.arg(flag).arg(model);
                    }
                    ModelRoute::CodexConfig => {
                        inv.arg("-c").arg(format!(
                            "model={}",
                            serde_json::to_string(model).expect("a string")
                        ));
                    }
                    ModelRoute::Env(var) => {
                        inv.env(var, model);
                    }
                    ModelRoute::Option => model_by_option = true,
                }
            }
        }
        None => {
            let template = input
                .agent
                .acp_command
                .clone()
                .ok_or_else(|| {
                    BackendError::Command(format!(
                        "an ACP agent's command: set `acp_command:` in {}, `acp_command` in the config, or ORCHESTRATE_ACP_COMMAND",
                        input.agent.source
                    ))
                })?;
            let mut words = shlex::split(&template)
                .filter(|w| !w.is_empty())
                .ok_or_else(|| {
                    BackendError::Command(format!("an ACP command that parses, not {template:?}"))
                })?
                .into_iter();
            let program = words.next().expect("non-empty command");
            inv = Invocation::new(program.into(), Backend(&BACKEND));
            inv.args = words.map(OsString::from).collect();
            model_by_option = input.model().is_some();
        }
    }
    let resume = match input.resume {
        Some(from) => Some(from.session_id("ACP")?.to_string()),
        None => None,
    };
    inv.warnings.push(
        "an ACP agent keeps its own tool set: its permission requests are answered by the agent's tools and sandbox, and the sandbox holds the rest"
            .to_string(),
    );
    inv.talk = Some(Talk::Acp(Box::new(Conversation {
        cwd: input.permissions.cwd.clone(),
        prompt: input.task_with_instructions(),
        model: input.model().map(str::to_string),
        model_by_option,
        resume,
        mode: preset.and_then(|p| p.mode).map(str::to_string),
        policy: input.permissions.clone(),
    })));
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::test_support::{agent, args};
    use pretty_assertions::assert_eq;

    fn input<'a>(
        a: &'a crate::backends::AgentBrief,
        dir: &'a std::path::Path,
        model: Option<&'a str>,
        policy: &'a PermissionPolicy,
    ) -> InvocationInput<'a> {
        InvocationInput {
            agent: a,
            task: "-- find auth",
            model,
            run_dir: dir,
            resume: None,
            max_cost: None,
            outer_sandbox: true,
            output_schema: None,
            permissions: policy,
            stdin_pipe: false,
        }
    }

    #[test]
    fn presets_set_the_model_their_way_and_the_task_goes_over_acp_not_argv() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["read"], true, "Be terse.");
        let policy = PermissionPolicy {
            cwd: "/w".into(),
            ..PermissionPolicy::default()
        };
        let gemini =
            (GEMINI.build)("gemini".into(), &input(&a, dir.path(), Some("m1"), &policy)).unwrap();
        assert_eq!(args(&gemini), ["--acp", "-m", "m1"]);
        let codex = (CODEX.build)(
            "codex-acp".into(),
            &input(&a, dir.path(), Some("o3"), &policy),
        )
        .unwrap();
        // Inside orchestrate's sandbox, without its own.
        assert_eq!(
            args(&codex),
            [
                "-c",
                "sandbox_mode=\"danger-full-access\"",
                "-c",
                "model=\"o3\""
            ]
        );
        let claude = (CLAUDE.build)(
            "claude-agent-acp".into(),
            &input(&a, dir.path(), Some("sonnet"), &policy),
        )
        .unwrap();
        assert_eq!(args(&claude), Vec::<String>::new());
        assert!(claude
            .env
            .contains(&("ANTHROPIC_MODEL".into(), "sonnet".into())));
        let opencode = (OPENCODE.build)(
            "opencode".into(),
            &input(&a, dir.path(), Some("mock/m"), &policy),
        )
        .unwrap();
        assert_eq!(args(&opencode), ["acp"]);
        match &opencode.talk {
            Some(Talk::Acp(c)) => {
                assert_eq!(
                    **c,
                    Conversation {
                        cwd: "/w".into(),
                        prompt: "<instructions>\nBe terse.\n</instructions>\n\nTask: -- find auth"
                            .into(),
                        model: Some("mock/m".into()),
                        model_by_option: true,
                        resume: None,
                        mode: None,
                        policy: policy.clone(),
                    }
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(opencode.talks());
    }

    #[test]
    fn the_generic_backend_splits_its_command_without_a_shell_and_says_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let policy = PermissionPolicy::default();
        let mut a = agent(&[], false, "");
        let err = build("".into(), &input(&a, dir.path(), None, &policy), None).unwrap_err();
        assert!(err.to_string().contains("acp_command"), "{err}");
        a.acp_command = Some("my-agent --acp 'a b' $(rm -rf /)".into());
        let inv = build("".into(), &input(&a, dir.path(), None, &policy), None).unwrap();
        assert_eq!(inv.program, OsString::from("my-agent"));
        assert_eq!(args(&inv), ["--acp", "a b", "$(rm", "-rf", "/)"]);
        a.acp_command = Some("x 'open".into());
        let err = build("".into(), &input(&a, dir.path(), None, &policy), None).unwrap_err();
        assert!(err.to_string().contains("parses"), "{err}");
    }
}
