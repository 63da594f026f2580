//! Every setting of a run, declared once.
//!
//! A setting (a timeout, a budget, the backend, the sandbox) can be given on five
//! surfaces: a flag of `orchestrate run`, a key of an agent file's front matter, an
//! `ORCHESTRATE_*` environment variable, a key of a config file (the project's, then the
//! user's), and an argument of the MCP `subagent` tool. Its value wins in that order —
//! flag or MCP argument > agent file > environment > project config > user config >
//! built-in default — and `orchestrate config` says which layer each value came from.
//!
//! The table below ([`settings!`]) is the only place a setting is declared: its name (the
//! config key, and the name `orchestrate config` shows), its value type and default, the
//! [`kinds`] of value it takes (one parser per unit: durations need theirs, dollars are
//! [`Usd`], counts are whole numbers in a range), and the name it has on each surface.
//! Flags, config files, the environment, agent files and MCP arguments are all read from
//! it, and the MCP tool's schema is written from it.
//!
//! # Adding a setting
//!
//! 1. Add one entry to the table: `name: Type = default, kind: &kinds::X, Surfaces {…};`
//!    (leave out `= default` for a setting that is unset unless given, such as a budget).
//!    Fill in the surfaces it has: `files` (config files), `env`, `flag` (with its help
//!    text), `agent` (its front-matter keys, the usual one first) and `mcp` (its argument
//!    name, with a description only if the name does not say it all: every parent session
//!    loads the tool's schema).
//! 2. Read it where the run is decided: `run::resolve` gets every setting's winning value
//!    in [`Effective`].
//! 3. Document it in README.md (Using it, Agents, Config).
//!
//! A new kind of value is a [`kinds::Kind`] implementation in `kinds.rs`, with its parser
//! in [`crate::units`] if it has a unit.

pub(crate) mod flags;
pub(crate) mod kinds;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value as Json;

use crate::backends::permissions::PermissionMode;
use crate::backends::BackendChoice;
use crate::limits;
use crate::network::HostPattern;
use crate::result::{Network, SandboxMode};
use crate::runner::{self, RunnerDef};
use crate::structured::SchemaSource;
use crate::truncate;
use crate::units::Usd;
use kinds::{Kind, Raw};

pub(crate) const DEFAULT_RETRIES: u32 = 2;
pub(crate) const DEFAULT_CONCURRENCY: usize = 4;
pub(crate) const DEFAULT_MAX_TASKS: usize = 16;
/// Children at once in a fan-out: each costs orchestrate a controller process and a few
/// small buffers (BENCHMARKS.md measures it at this many).
pub(crate) const MAX_CONCURRENCY: u64 = 256;
/// Tasks in one fan-out: a cluster runner gives that many somewhere to run.
pub(crate) const MAX_TASKS: u64 = 4096;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Default,
    User(PathBuf),
    Project(PathBuf),
    Env(&'static str),
    /// The agent file's own key.
    Agent(PathBuf),
    Flag,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::User(p) => write!(f, "user:{}", p.display()),
            Source::Project(p) => write!(f, "project:{}", p.display()),
            Source::Env(var) => write!(f, "env:{var}"),
            Source::Agent(p) => write!(f, "agent:{}", p.display()),
            Source::Flag => f.write_str("flag"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    pub fn new(value: T, source: Source) -> Self {
        Setting { value, source }
    }

    pub fn default(value: T) -> Self {
        Setting::new(value, Source::Default)
    }

    /// A value given on the command line (or as an MCP tool argument).
    pub fn flag(value: T) -> Self {
        Setting::new(value, Source::Flag)
    }
}

/// The names a setting has on the surfaces that take it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Surfaces {
    /// A key of the config files (its name), listed by `orchestrate config`.
    pub files: bool,
    pub env: Option<&'static str>,
    pub flag: Option<Flag>,
    /// Its keys in an agent file's front matter, the usual one first.
    pub agent: &'static [&'static str],
    pub mcp: Option<Mcp>,
}

impl Surfaces {
    /// Only in config files.
    const FILES: Surfaces = Surfaces {
        files: true,
        env: None,
        flag: None,
        agent: &[],
        mcp: None,
    };
    /// Only where the caller names a run: flags, agent files, MCP arguments.
    const RUN: Surfaces = Surfaces {
        files: false,
        ..Surfaces::FILES
    };
}

/// A flag of `orchestrate run`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag {
    pub long: &'static str,
    pub value_name: &'static str,
    pub help: &'static str,
    /// It may be given several times; the values are taken together (`--fallback-model`).
    pub repeat: bool,
}

const fn flag(long: &'static str, value_name: &'static str, help: &'static str) -> Option<Flag> {
    Some(Flag {
        long,
        value_name,
        help,
        repeat: false,
    })
}

/// An argument of the MCP `subagent` tool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mcp {
    pub name: &'static str,
    /// Its schema's description; none where the name says it all (every parent session
    /// loads the schema).
    pub doc: Option<&'static str>,
}

const fn mcp(name: &'static str, doc: Option<&'static str>) -> Option<Mcp> {
    Some(Mcp { name, doc })
}

/// One setting of the table, whatever its type.
pub(crate) trait AnySetting: Sync {
    /// Its name: the config key, and what `orchestrate config` shows.
    fn key(&self) -> &'static str;
    fn surfaces(&self) -> &Surfaces;
    /// Reads `raw` into `values`. An agent file's empty value leaves it unset.
    fn read(&self, values: &mut Values, raw: Raw<'_>) -> Result<(), String>;
    /// Reads `raw` into a config layer from `source`, over what the layers below set.
    fn apply(&self, config: &mut Config, raw: Raw<'_>, source: Source) -> Result<(), String>;
    /// Its value in `config` as `orchestrate config` prints it, and where it came from.
    fn shown<'c>(&self, config: &'c Config) -> (Json, &'c Source);
    /// The JSON Schema of its MCP argument.
    fn schema(&self) -> Json;
    /// The names it takes, when they are few.
    fn names(&self) -> Option<Vec<String>>;
    /// Whether a flag's value may start with `-`.
    fn numeric(&self) -> bool;
}

/// A setting of type `T` whose config value is `C` (`T`, or `Option<T>` when it has no
/// default).
struct Entry<T: 'static, C: 'static> {
    key: &'static str,
    kind: &'static dyn Kind<T>,
    surfaces: Surfaces,
    slot: fn(&mut Values) -> &mut Option<T>,
    layer: fn(&mut Config) -> &mut Setting<C>,
    current: fn(&Config) -> (Option<&T>, &Source),
}

impl<T: Clone + 'static, C: From<T> + 'static> AnySetting for Entry<T, C> {
    fn key(&self) -> &'static str {
        self.key
    }

    fn surfaces(&self) -> &Surfaces {
        &self.surfaces
    }

    fn read(&self, values: &mut Values, raw: Raw<'_>) -> Result<(), String> {
        if raw.is_unset() {
            return Ok(());
        }
        *(self.slot)(values) = Some(self.kind.read(raw)?);
        Ok(())
    }

    fn apply(&self, config: &mut Config, raw: Raw<'_>, source: Source) -> Result<(), String> {
        let upper = self.kind.read(raw)?;
        let value = match (self.current)(config).0 {
            Some(lower) => self.kind.over(lower, upper),
            None => upper,
        };
        *(self.layer)(config) = Setting::new(C::from(value), source);
        Ok(())
    }

    fn shown<'c>(&self, config: &'c Config) -> (Json, &'c Source) {
        let (value, source) = (self.current)(config);
        (value.map_or(Json::Null, |v| self.kind.show(v)), source)
    }

    fn schema(&self) -> Json {
        self.kind.schema()
    }

    fn names(&self) -> Option<Vec<String>> {
        self.kind.names()
    }

    fn numeric(&self) -> bool {
        self.kind.numeric()
    }
}

/// Declares the settings: the [`Values`] one layer gives, the layered [`Config`] with the
/// source of each value, the [`Effective`] values of a run, and [`SETTINGS`], the table
/// every surface reads.
macro_rules! settings {
    (@config $ty:ty, $default:expr) => { $ty };
    (@config $ty:ty) => { Option<$ty> };
    (@default $default:expr) => { $default };
    (@default) => { None };
    (@current $value:expr, $default:expr) => { Some(&$value) };
    (@current $value:expr) => { $value.as_ref() };
    (@over $kind:expr, $ty:ty, $lower:expr, $upper:expr, $default:expr) => {
        Kind::<$ty>::over($kind, &$lower, $upper)
    };
    (@over $kind:expr, $ty:ty, $lower:expr, $upper:expr) => {
        Some(match $lower {
            Some(lower) => Kind::<$ty>::over($kind, &lower, $upper),
            None => $upper,
        })
    };
    ($(
        $(#[doc = $doc:expr])*
        $name:ident : $ty:ty $(= $default:expr)?, kind: $kind:expr, $surfaces:expr;
    )*) => {
        /// What one layer sets (the flags, an agent file, MCP arguments); `None`: not set
        /// there.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Values {
            $( $(#[doc = $doc])* pub $name: Option<$ty>, )*
        }

        /// The lower layers of the precedence (environment, project and user config,
        /// defaults), each value with where it came from.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Config {
            $( $(#[doc = $doc])* pub $name: Setting<settings!(@config $ty $(, $default)?)>, )*
        }

        impl Default for Config {
            fn default() -> Self {
                Config {
                    $( $name: Setting::default(settings!(@default $($default)?)), )*
                }
            }
        }

        /// Every setting's value for one run: the highest layer's that sets it.
        #[derive(Debug, Clone, PartialEq)]
        pub(crate) struct Effective {
            $( $(#[doc = $doc])* pub $name: settings!(@config $ty $(, $default)?), )*
        }

        impl Config {
            /// Each setting from the first of `over` that sets it (highest first), else
            /// from this config; a kind that adds layers up (`allow_hosts`) takes every
            /// layer's, as a config file's layers do.
            pub(crate) fn under(&self, over: &[&Values]) -> Effective {
                Effective {
                    $( $name: {
                        let mut value = self.$name.value.clone();
                        for upper in over.iter().rev().filter_map(|layer| layer.$name.clone()) {
                            value = settings!(@over $kind, $ty, value, upper $(, $default)?);
                        }
                        value
                    }, )*
                }
            }
        }

        /// Every setting, in the order `orchestrate config` lists them.
        pub(crate) static SETTINGS: &[&dyn AnySetting] = &[
            $( &Entry::<$ty, settings!(@config $ty $(, $default)?)> {
                key: stringify!($name),
                kind: $kind,
                surfaces: $surfaces,
                slot: |v| &mut v.$name,
                layer: |c| &mut c.$name,
                current: |c| (settings!(@current c.$name.value $(, $default)?), &c.$name.source),
            }, )*
        ];
    };
}

use kinds::{Count, Dollars, Dur, Hosts, Names, NetworkKind, Switch, Text};

settings! {
    /// The child CLI: one backend, or `auto` (the first installed).
    backend: BackendChoice = BackendChoice::Auto, kind: &kinds::Backend, Surfaces {
        env: Some("ORCHESTRATE_BACKEND"),
        flag: flag("backend", "BACKEND", "The child CLI; auto: the first installed of claude, pi, codex, gemini, opencode, cursor-agent."),
        agent: &["backend"],
        ..Surfaces::FILES
    };
    /// The model passed to the child CLI; none leaves the choice to the CLI.
    model: String, kind: &Text, Surfaces {
        env: Some("ORCHESTRATE_MODEL"),
        flag: flag("model", "MODEL", "Model passed to the child CLI."),
        agent: &["model"],
        mcp: mcp("model", None),
        ..Surfaces::FILES
    };
    /// The longest a child may run.
    timeout: Duration = limits::DEFAULT_RUNTIME_TIMEOUT, kind: &Dur { positive: true }, Surfaces {
        env: Some("ORCHESTRATE_TIMEOUT"),
        flag: flag("timeout", "TIMEOUT", "Maximum runtime (90s, 15m, 1h30m). Default 15m."),
        agent: &["timeout", "timeout_ms", "timeoutMs"],
        mcp: mcp("timeoutMs", Some("Default 900000.")),
        ..Surfaces::FILES
    };
    /// The longest a child may go without progress (while no tool runs).
    idle_timeout: Duration = limits::DEFAULT_IDLE_TIMEOUT, kind: &Dur { positive: true }, Surfaces {
        env: Some("ORCHESTRATE_IDLE_TIMEOUT"),
        flag: flag("idle-timeout", "IDLE_TIMEOUT", "Maximum time without progress from the child: text, a tool call or its result, usage, a new turn (retries, reconnects and stderr chatter are none). Paused while a tool runs (--tool-timeout bounds that). Default 3m."),
        agent: &["idle_timeout", "idleTimeout", "idle_timeout_ms", "idleTimeoutMs"],
        mcp: mcp("idleTimeoutMs", Some("Idle limit, default 180000.")),
        ..Surfaces::FILES
    };
    /// Between SIGTERM and SIGKILL to the child's tree.
    kill_grace: Duration = limits::DEFAULT_KILL_GRACE, kind: &Dur { positive: false }, Surfaces {
        env: Some("ORCHESTRATE_KILL_GRACE"),
        flag: flag("kill-grace", "KILL_GRACE", "Time between SIGTERM and SIGKILL when stopping the child. Default 5s."),
        ..Surfaces::FILES
    };
    /// How long a child may take to exit on its own after its final event.
    exit_grace: Duration = limits::DEFAULT_TERMINAL_EXIT_GRACE, kind: &Dur { positive: false }, Surfaces {
        env: Some("ORCHESTRATE_EXIT_GRACE"),
        flag: flag("exit-grace", "EXIT_GRACE", "Time the child may take to exit after its final event. Default 2s."),
        ..Surfaces::FILES
    };
    /// The hard cap on the child's stdout and stderr together, in bytes.
    max_output_bytes: u64 = limits::DEFAULT_MAX_OUTPUT_BYTES, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_OUTPUT_BYTES"),
        flag: flag("max-output-bytes", "MAX_OUTPUT_BYTES", "Hard cap on the child's stdout+stderr bytes; passing it stops the child. Default 64 MiB."),
        ..Surfaces::FILES
    };
    /// Bytes of `content[0].text` kept before truncation.
    max_bytes: usize = truncate::DEFAULT_MAX_BYTES, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_BYTES"),
        flag: flag("max-bytes", "MAX_BYTES", "Bytes of `content[0].text` kept before truncation. Default 51200."),
        ..Surfaces::FILES
    };
    /// Lines of `content[0].text` kept before truncation.
    max_lines: usize = truncate::DEFAULT_MAX_LINES, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_LINES"),
        flag: flag("max-lines", "MAX_LINES", "Lines of `content[0].text` kept before truncation. Default 2000."),
        ..Surfaces::FILES
    };
    /// How deep subagents may nest (1: a subagent cannot start another).
    max_depth: u32 = limits::DEFAULT_MAX_DEPTH, kind: &Count { min: 0, max: u32::MAX as u64 }, Surfaces {
        env: Some("ORCHESTRATE_MAX_DEPTH"),
        ..Surfaces::FILES
    };
    /// Refuse every run.
    disabled: bool = false, kind: &Switch, Surfaces {
        env: Some("ORCHESTRATE_DISABLED"),
        ..Surfaces::FILES
    };
    /// Attempts in all when the provider fails transiently.
    retries: u32 = DEFAULT_RETRIES, kind: &Count { min: 1, max: u32::MAX as u64 }, Surfaces {
        env: Some("ORCHESTRATE_RETRIES"),
        flag: flag("attempts", "ATTEMPTS", "Attempts in all when the provider fails transiently (rate limit, overload, 5xx, connection reset). Default 2."),
        ..Surfaces::FILES
    };
    /// Tasks of a fan-out running at once.
    concurrency: usize = DEFAULT_CONCURRENCY, kind: &Count { min: 1, max: MAX_CONCURRENCY }, Surfaces {
        env: Some("ORCHESTRATE_CONCURRENCY"),
        flag: flag("concurrency", "CONCURRENCY", "Parallel tasks running at once (1 to 256); fewer while their provider answers with rate limits. Default 4."),
        ..Surfaces::FILES
    };
    /// The most tasks one fan-out may have.
    max_tasks: usize = DEFAULT_MAX_TASKS, kind: &Count { min: 1, max: MAX_TASKS }, Surfaces {
        env: Some("ORCHESTRATE_MAX_TASKS"),
        ..Surfaces::FILES
    };
    /// Whether a fan-out runs fewer children at once while their provider answers with
    /// rate limits or overload (`concurrency` stays the ceiling).
    adaptive_concurrency: bool = true, kind: &Switch, Surfaces {
        env: Some("ORCHESTRATE_ADAPTIVE_CONCURRENCY"),
        ..Surfaces::FILES
    };
    /// The longest one tool call may run with no tool finishing.
    tool_timeout: Duration = limits::DEFAULT_TOOL_TIMEOUT, kind: &Dur { positive: true }, Surfaces {
        env: Some("ORCHESTRATE_TOOL_TIMEOUT"),
        flag: flag("tool-timeout", "TOOL_TIMEOUT", "Maximum time one tool call may run with no tool finishing (the idle timeout does not apply while a tool runs). Default 10m."),
        agent: &["tool_timeout", "toolTimeout", "tool_timeout_ms", "toolTimeoutMs"],
        ..Surfaces::FILES
    };
    /// The longest a child may only retry or reconnect to its provider.
    connect_timeout: Duration = limits::DEFAULT_CONNECT_TIMEOUT, kind: &Dur { positive: true }, Surfaces {
        env: Some("ORCHESTRATE_CONNECT_TIMEOUT"),
        flag: flag("connect-timeout", "CONNECT_TIMEOUT", "Maximum time the child may only retry or reconnect to its provider, with no progress, before it fails as unable to reach it. Default 60s."),
        agent: &["connect_timeout", "connectTimeout", "connect_timeout_ms", "connectTimeoutMs"],
        ..Surfaces::FILES
    };
    /// Turns the child may take.
    max_turns: u64, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_TURNS"),
        flag: flag("max-turns", "MAX_TURNS", "Stop the child once it goes on past this many turns (keeping its partial answer)."),
        agent: &["max_turns", "maxTurns"],
        mcp: mcp("maxTurns", None),
        ..Surfaces::FILES
    };
    /// Input + output + cache-write tokens the child may use.
    max_tokens: u64, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_TOKENS"),
        flag: flag("max-tokens", "MAX_TOKENS", "Stop the child once it has used this many input + output + cache-write tokens."),
        agent: &["max_tokens", "maxTokens"],
        mcp: mcp("maxTokens", None),
        ..Surfaces::FILES
    };
    /// What the child may cost.
    max_cost: Usd, kind: &Dollars, Surfaces {
        env: Some("ORCHESTRATE_MAX_COST"),
        flag: flag("max-cost", "USD", "Stop the child once it has cost this many US dollars (e.g. 0.50)."),
        agent: &["max_cost", "maxCost", "max_cost_usd", "maxCostUsd"],
        mcp: mcp("maxCostUsd", None),
        ..Surfaces::FILES
    };
    /// What every task of a fan-out may cost together (a single run is a fan-out of one),
    /// with the orchestrate runs they start.
    max_total_cost: Usd, kind: &Dollars, Surfaces {
        env: Some("ORCHESTRATE_MAX_TOTAL_COST"),
        flag: flag("max-total-cost", "USD", "No task starts once the tasks together, and the orchestrate runs they start, have cost this many US dollars; running ones are stopped."),
        ..Surfaces::FILES
    };
    /// Input + output + cache-write tokens every task of a fan-out may use together, with
    /// the orchestrate runs they start.
    max_total_tokens: u64, kind: &Count::POSITIVE, Surfaces {
        env: Some("ORCHESTRATE_MAX_TOTAL_TOKENS"),
        flag: flag("max-total-tokens", "TOKENS", "As --max-total-cost, for input + output + cache-write tokens."),
        ..Surfaces::FILES
    };
    /// Models to run in turn when the model is unavailable (quota, rate limit, overload,
    /// unknown).
    fallback_models: Vec<String> = Vec::new(), kind: &Names, Surfaces {
        env: Some("ORCHESTRATE_FALLBACK_MODELS"),
        flag: Some(Flag {
            long: "fallback-model",
            value_name: "MODEL",
            help: "A model to run instead when the model fails with a quota, rate-limit, overload or unknown-model error (after its retries); repeat for several, tried in order.",
            repeat: true,
        }),
        agent: &["fallback_models", "fallbackModels"],
        mcp: mcp("fallbackModels", None),
        ..Surfaces::FILES
    };
    /// The sandbox mode; `None` (`auto`): read-only for an agent that cannot write,
    /// workspace-write for the others.
    sandbox: Option<SandboxMode> = None, kind: &kinds::Sandbox, Surfaces {
        env: Some("ORCHESTRATE_SANDBOX"),
        flag: flag("sandbox", "SANDBOX", "Sandbox of the child. Default: read-only for an agent that cannot write, workspace-write for the others."),
        agent: &["sandbox"],
        mcp: mcp("sandbox", None),
        ..Surfaces::FILES
    };
    /// The child's network; `None` (`auto`): provider for an agent that cannot write, on
    /// for the others.
    network: Option<Network> = None, kind: &NetworkKind, Surfaces {
        env: Some("ORCHESTRATE_NETWORK"),
        flag: flag("network", "NETWORK", "Network of the child: on (the host's), off (none at all, only a loopback of its own) or provider (out only through orchestrate's proxy, to its provider's hosts and --allow-host). Default: provider for an agent that cannot write, on for the others."),
        agent: &["network"],
        mcp: mcp("network", None),
        ..Surfaces::FILES
    };
    /// Hosts a `network: provider` child may reach beside its provider's; each layer adds
    /// to those below.
    allow_hosts: Vec<HostPattern> = Vec::new(), kind: &Hosts, Surfaces {
        env: Some("ORCHESTRATE_ALLOW_HOSTS"),
        flag: Some(Flag {
            long: "allow-host",
            value_name: "HOST",
            help: "A host the child may reach with --network provider, beside its provider's: a name, *.domain for every name under it, or an IP address; repeat for several.",
            repeat: true,
        }),
        agent: &["allow_hosts", "allowHosts"],
        mcp: mcp("allowHosts", None),
        ..Surfaces::FILES
    };
    /// How the child's permission requests are answered (ACP agents ask).
    permissions: PermissionMode = PermissionMode::Policy, kind: &kinds::Permissions, Surfaces {
        env: Some("ORCHESTRATE_PERMISSIONS"),
        flag: flag("permissions", "MODE", "How the child's permission requests are answered (ACP agents ask): policy (by the agent's tools and sandbox; the default), allow, deny, or ask (the parent, through MCP elicitation, where it can be asked; else policy, with a warning)."),
        agent: &["permissions"],
        mcp: mcp("permissions", None),
        ..Surfaces::FILES
    };
    /// The `acp` backend's agent command line (split like a shell's words, run without
    /// one), for agents that set none.
    acp_command: String, kind: &Text, Surfaces {
        env: Some("ORCHESTRATE_ACP_COMMAND"),
        agent: &["acp_command", "acpCommand"],
        ..Surfaces::FILES
    };
    /// Where the child runs: `local`, `slurm`, or a name of `runners` (checked when a run
    /// resolves it: the named runners may come from another file).
    runner: String = runner::LOCAL.to_string(), kind: &Text, Surfaces {
        env: Some("ORCHESTRATE_RUNNER"),
        flag: flag("runner", "NAME", "Where the child runs: local (the default), slurm (through srun on a Slurm cluster), or a runner named in the config ([runners.NAME])."),
        agent: &["runner"],
        mcp: mcp("runner", None),
        ..Surfaces::FILES
    };
    /// How long a job may wait in a cluster engine's queue before it starts.
    queue_timeout: Duration = limits::DEFAULT_QUEUE_TIMEOUT, kind: &Dur { positive: true }, Surfaces {
        env: Some("ORCHESTRATE_QUEUE_TIMEOUT"),
        flag: flag("queue-timeout", "QUEUE_TIMEOUT", "How long a job may wait in the cluster's queue before it starts (it counts against no other limit meanwhile). Default 10m."),
        agent: &["queue_timeout", "queueTimeout"],
        ..Surfaces::FILES
    };
    /// Named runners (`[runners.NAME]`); a project file's entry replaces the user file's
    /// of the same name.
    runners: BTreeMap<String, RunnerDef> = BTreeMap::new(), kind: &kinds::Runners, Surfaces {
        env: Some("ORCHESTRATE_RUNNERS"),
        ..Surfaces::FILES
    };
    /// The child works in a git worktree of its own (`isolation: worktree`).
    isolation: bool = false, kind: &kinds::Isolation, Surfaces {
        flag: flag("isolation", "ISOLATION", "worktree: the child works in a new git worktree on branch orchestrate/<run id>, made from HEAD; none: in the working directory (the default)."),
        agent: &["isolation"],
        mcp: mcp("isolation", None),
        ..Surfaces::RUN
    };
    /// The JSON Schema the answer must match (a task's or an agent's, never a default).
    output_schema: SchemaSource, kind: &kinds::Schema, Surfaces {
        flag: flag("output-schema", "FILE", "A JSON Schema file the answer must match: the answer is validated JSON, in `structured` and as compact JSON in `content[0].text` (over the agent's `output_schema:`)."),
        agent: &["output_schema", "outputSchema"],
        mcp: mcp("outputSchema", Some("JSON Schema the answer must match.")),
        ..Surfaces::RUN
    };
}

/// The setting whose MCP argument is `name`.
pub(crate) fn by_mcp_name(name: &str) -> Option<&'static dyn AnySetting> {
    SETTINGS
        .iter()
        .copied()
        .find(|s| s.surfaces().mcp.is_some_and(|m| m.name == name))
}

/// The setting whose config key is `key`.
pub(crate) fn by_key(key: &str) -> Option<&'static dyn AnySetting> {
    SETTINGS
        .iter()
        .copied()
        .find(|s| s.surfaces().files && s.key() == key)
}

/// The MCP arguments' schemas, by name, with their descriptions.
pub(crate) fn mcp_properties() -> serde_json::Map<String, Json> {
    SETTINGS
        .iter()
        .filter_map(|s| {
            let m = s.surfaces().mcp?;
            let mut schema = s.schema();
            if let (Some(doc), Json::Object(o)) = (m.doc, &mut schema) {
                o.insert("description".into(), Json::from(doc));
            }
            Some((m.name.to_string(), schema))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    #[test]
    fn every_name_on_every_surface_is_one_settings_alone() {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for s in SETTINGS {
            let sf = s.surfaces();
            let mut names: Vec<String> = vec![format!("key {}", s.key())];
            names.extend(sf.env.map(|e| format!("env {e}")));
            names.extend(sf.flag.map(|f| format!("flag --{}", f.long)));
            names.extend(sf.agent.iter().map(|k| format!("agent {k}")));
            names.extend(sf.mcp.map(|m| format!("mcp {}", m.name)));
            for name in names {
                if let Some(other) = seen.insert(name.clone(), s.key()) {
                    panic!("{name} is both {other}'s and {}'s", s.key());
                }
            }
        }
    }

    #[test]
    fn environment_variables_are_their_keys_in_capitals() {
        for s in SETTINGS {
            if let Some(env) = s.surfaces().env {
                assert_eq!(
                    env,
                    format!("ORCHESTRATE_{}", s.key().to_ascii_uppercase()),
                    "{}",
                    s.key()
                );
            }
        }
    }

    #[test]
    fn the_highest_layer_that_sets_a_value_wins() {
        let cfg = Config {
            timeout: Setting::new(Duration::from_secs(60), Source::Env("ORCHESTRATE_TIMEOUT")),
            ..Config::default()
        };
        let flags = Values {
            max_turns: Some(3),
            ..Values::default()
        };
        let agent = Values {
            max_turns: Some(9),
            model: Some("m".into()),
            ..Values::default()
        };
        let e = cfg.under(&[&flags, &agent]);
        assert_eq!(
            (e.timeout, e.max_turns, e.model, e.max_cost, e.backend),
            (
                Duration::from_secs(60),
                Some(3),
                Some("m".to_string()),
                None,
                BackendChoice::Auto
            )
        );
    }

    #[test]
    fn mcp_arguments_are_camel_case_and_durations_there_are_milliseconds() {
        let names: BTreeSet<&str> = SETTINGS
            .iter()
            .filter_map(|s| s.surfaces().mcp.map(|m| m.name))
            .collect();
        for name in &names {
            assert!(!name.contains('_'), "{name}");
        }
        for (name, schema) in mcp_properties() {
            if schema["type"] == "integer" && name.contains("imeout") {
                assert!(name.ends_with("Ms"), "{name}");
            }
        }
    }
}
