//! Defaults for runs, from config files and the environment.
//!
//! This module layers the lower half of the precedence: the `ORCHESTRATE_*` environment,
//! the project's `.orchestrate/config.toml` (nearest ancestor of the working directory),
//! the user's `$XDG_CONFIG_HOME/orchestrate/config.toml`, and the built-in defaults. Flags
//! and agent files go on top of it in `run::resolve`, the one place a run's settings are
//! decided. Every value remembers where it came from, so that `orchestrate config` can
//! answer "why is my timeout 90s?".

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::backends::BackendChoice;
use crate::duration::parse_duration;
use crate::limits;
use crate::network::{HostPattern, Network};
use crate::runner::{self, RunnerDef};
use crate::sandbox::SandboxMode;
use crate::truncate;

/// Relative to the user's config home.
pub(crate) const USER_CONFIG_FILE: &str = "orchestrate/config.toml";
/// Relative to a project folder.
pub(crate) const PROJECT_CONFIG_FILE: &str = ".orchestrate/config.toml";

pub(crate) const DEFAULT_RETRIES: u32 = 2;
pub(crate) const DEFAULT_CONCURRENCY: usize = 4;
pub(crate) const DEFAULT_MAX_TASKS: usize = 16;
pub(crate) const MAX_CONCURRENCY: u64 = 64;
pub(crate) const MAX_TASKS: u64 = 256;

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

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub backend: Setting<BackendChoice>,
    pub model: Setting<Option<String>>,
    pub timeout: Setting<Duration>,
    pub idle_timeout: Setting<Duration>,
    pub kill_grace: Setting<Duration>,
    pub exit_grace: Setting<Duration>,
    pub max_output_bytes: Setting<u64>,
    pub max_bytes: Setting<usize>,
    pub max_lines: Setting<usize>,
    pub max_depth: Setting<u32>,
    pub disabled: Setting<bool>,
    pub retries: Setting<u32>,
    pub concurrency: Setting<usize>,
    pub max_tasks: Setting<usize>,
    pub tool_timeout: Setting<Duration>,
    pub connect_timeout: Setting<Duration>,
    pub max_turns: Setting<Option<u64>>,
    pub max_tokens: Setting<Option<u64>>,
    /// USD.
    pub max_cost: Setting<Option<f64>>,
    /// USD, over every task of a fan-out.
    pub max_total_cost: Setting<Option<f64>>,
    pub fallback_models: Setting<Vec<String>>,
    /// `None` (`auto`): read-only for agents that cannot write, workspace-write otherwise.
    pub sandbox: Setting<Option<SandboxMode>>,
    /// `None` (`auto`): provider for agents that cannot write, on otherwise.
    pub network: Setting<Option<Network>>,
    /// Hosts a `network: provider` child may reach beside its provider's.
    pub allow_hosts: Setting<Vec<HostPattern>>,
    /// Where children run: `local`, `slurm`, or a name of `runners`.
    pub runner: Setting<String>,
    /// How long a job may wait in a cluster engine's queue before it starts.
    pub queue_timeout: Setting<Duration>,
    /// Named runners (`[runners.NAME]`); a project file's entry replaces the user file's
    /// of the same name.
    pub runners: Setting<BTreeMap<String, RunnerDef>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the config file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}:{line}:{column}: invalid TOML: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: key `{key}`: {reason}", path.display())]
    FileValue {
        path: PathBuf,
        key: String,
        reason: String,
    },
    #[error("environment variable {var}={value:?}: {reason}")]
    EnvValue {
        var: &'static str,
        value: String,
        reason: String,
    },
}

impl Default for Config {
    fn default() -> Self {
        Config {
            backend: Setting::default(BackendChoice::Auto),
            model: Setting::default(None),
            timeout: Setting::default(limits::DEFAULT_RUNTIME_TIMEOUT),
            idle_timeout: Setting::default(limits::DEFAULT_IDLE_TIMEOUT),
            kill_grace: Setting::default(limits::DEFAULT_KILL_GRACE),
            exit_grace: Setting::default(limits::DEFAULT_TERMINAL_EXIT_GRACE),
            max_output_bytes: Setting::default(limits::DEFAULT_MAX_OUTPUT_BYTES),
            max_bytes: Setting::default(truncate::DEFAULT_MAX_BYTES),
            max_lines: Setting::default(truncate::DEFAULT_MAX_LINES),
            max_depth: Setting::default(limits::DEFAULT_MAX_DEPTH),
            disabled: Setting::default(false),
            retries: Setting::default(DEFAULT_RETRIES),
            concurrency: Setting::default(DEFAULT_CONCURRENCY),
            max_tasks: Setting::default(DEFAULT_MAX_TASKS),
            tool_timeout: Setting::default(limits::DEFAULT_TOOL_TIMEOUT),
            connect_timeout: Setting::default(limits::DEFAULT_CONNECT_TIMEOUT),
            max_turns: Setting::default(None),
            max_tokens: Setting::default(None),
            max_cost: Setting::default(None),
            max_total_cost: Setting::default(None),
            fallback_models: Setting::default(Vec::new()),
            sandbox: Setting::default(None),
            network: Setting::default(None),
            allow_hosts: Setting::default(Vec::new()),
            runner: Setting::default(runner::LOCAL.to_string()),
            queue_timeout: Setting::default(runner::DEFAULT_QUEUE_TIMEOUT),
            runners: Setting::default(BTreeMap::new()),
        }
    }
}

/// A value before it is checked: from a TOML file, or the text of an environment variable.
#[derive(Clone, Copy)]
enum Raw<'a> {
    Toml(&'a toml::Value),
    Env(&'a str),
}

type Apply = fn(&mut Config, Raw<'_>, Source) -> Result<(), String>;

struct Key {
    name: &'static str,
    env: &'static str,
    apply: Apply,
}

/// Every key, in the order `orchestrate config` prints them. One table drives files,
/// environment and the unknown-key check, so a key cannot be added to one and not the others.
const KEYS: &[Key] = &[
    Key {
        name: "backend",
        env: "ORCHESTRATE_BACKEND",
        apply: |c, raw, src| {
            let choice = BackendChoice::parse(&string(raw)?).map_err(|e| e.to_string())?;
            c.backend = Setting::new(choice, src);
            Ok(())
        },
    },
    Key {
        name: "model",
        env: "ORCHESTRATE_MODEL",
        apply: |c, raw, src| {
            c.model = Setting::new(Some(string(raw)?), src);
            Ok(())
        },
    },
    Key {
        name: "timeout",
        env: "ORCHESTRATE_TIMEOUT",
        apply: |c, raw, src| {
            c.timeout = Setting::new(duration(raw, false)?, src);
            Ok(())
        },
    },
    Key {
        name: "idle_timeout",
        env: "ORCHESTRATE_IDLE_TIMEOUT",
        apply: |c, raw, src| {
            c.idle_timeout = Setting::new(duration(raw, false)?, src);
            Ok(())
        },
    },
    Key {
        name: "kill_grace",
        env: "ORCHESTRATE_KILL_GRACE",
        apply: |c, raw, src| {
            c.kill_grace = Setting::new(duration(raw, true)?, src);
            Ok(())
        },
    },
    Key {
        name: "exit_grace",
        env: "ORCHESTRATE_EXIT_GRACE",
        apply: |c, raw, src| {
            c.exit_grace = Setting::new(duration(raw, true)?, src);
            Ok(())
        },
    },
    Key {
        name: "max_output_bytes",
        env: "ORCHESTRATE_MAX_OUTPUT_BYTES",
        apply: |c, raw, src| {
            c.max_output_bytes = Setting::new(integer(raw, 1, u64::MAX)?, src);
            Ok(())
        },
    },
    Key {
        name: "max_bytes",
        env: "ORCHESTRATE_MAX_BYTES",
        apply: |c, raw, src| {
            c.max_bytes = Setting::new(integer(raw, 1, usize::MAX as u64)? as usize, src);
            Ok(())
        },
    },
    Key {
        name: "max_lines",
        env: "ORCHESTRATE_MAX_LINES",
        apply: |c, raw, src| {
            c.max_lines = Setting::new(integer(raw, 1, usize::MAX as u64)? as usize, src);
            Ok(())
        },
    },
    Key {
        name: "max_depth",
        env: "ORCHESTRATE_MAX_DEPTH",
        apply: |c, raw, src| {
            c.max_depth = Setting::new(integer(raw, 0, u32::MAX.into())? as u32, src);
            Ok(())
        },
    },
    Key {
        name: "disabled",
        env: "ORCHESTRATE_DISABLED",
        apply: |c, raw, src| {
            c.disabled = Setting::new(boolean(raw)?, src);
            Ok(())
        },
    },
    Key {
        name: "retries",
        env: "ORCHESTRATE_RETRIES",
        apply: |c, raw, src| {
            c.retries = Setting::new(integer(raw, 1, u32::MAX.into())? as u32, src);
            Ok(())
        },
    },
    Key {
        name: "concurrency",
        env: "ORCHESTRATE_CONCURRENCY",
        apply: |c, raw, src| {
            c.concurrency = Setting::new(integer(raw, 1, MAX_CONCURRENCY)? as usize, src);
            Ok(())
        },
    },
    Key {
        name: "max_tasks",
        env: "ORCHESTRATE_MAX_TASKS",
        apply: |c, raw, src| {
            c.max_tasks = Setting::new(integer(raw, 1, MAX_TASKS)? as usize, src);
            Ok(())
        },
    },
    Key {
        name: "tool_timeout",
        env: "ORCHESTRATE_TOOL_TIMEOUT",
        apply: |c, raw, src| {
            c.tool_timeout = Setting::new(duration(raw, false)?, src);
            Ok(())
        },
    },
    Key {
        name: "sandbox",
        env: "ORCHESTRATE_SANDBOX",
        apply: |c, raw, src| {
            let mode = match string(raw)?.as_str() {
                "auto" => None,
                other => Some(SandboxMode::parse(other).map_err(|e| format!("{e} or auto"))?),
            };
            c.sandbox = Setting::new(mode, src);
            Ok(())
        },
    },
    Key {
        name: "connect_timeout",
        env: "ORCHESTRATE_CONNECT_TIMEOUT",
        apply: |c, raw, src| {
            c.connect_timeout = Setting::new(duration(raw, false)?, src);
            Ok(())
        },
    },
    Key {
        name: "max_turns",
        env: "ORCHESTRATE_MAX_TURNS",
        apply: |c, raw, src| {
            c.max_turns = Setting::new(Some(integer(raw, 1, u64::MAX)?), src);
            Ok(())
        },
    },
    Key {
        name: "max_tokens",
        env: "ORCHESTRATE_MAX_TOKENS",
        apply: |c, raw, src| {
            c.max_tokens = Setting::new(Some(integer(raw, 1, u64::MAX)?), src);
            Ok(())
        },
    },
    Key {
        name: "max_cost",
        env: "ORCHESTRATE_MAX_COST",
        apply: |c, raw, src| {
            c.max_cost = Setting::new(Some(usd(raw)?), src);
            Ok(())
        },
    },
    Key {
        name: "max_total_cost",
        env: "ORCHESTRATE_MAX_TOTAL_COST",
        apply: |c, raw, src| {
            c.max_total_cost = Setting::new(Some(usd(raw)?), src);
            Ok(())
        },
    },
    Key {
        name: "fallback_models",
        env: "ORCHESTRATE_FALLBACK_MODELS",
        apply: |c, raw, src| {
            c.fallback_models = Setting::new(models(raw)?, src);
            Ok(())
        },
    },
    Key {
        name: "network",
        env: "ORCHESTRATE_NETWORK",
        apply: |c, raw, src| {
            let mode = match string(raw)?.as_str() {
                "auto" => None,
                other => Some(Network::parse(other).map_err(|e| format!("{e} or auto"))?),
            };
            c.network = Setting::new(mode, src);
            Ok(())
        },
    },
    Key {
        name: "allow_hosts",
        env: "ORCHESTRATE_ALLOW_HOSTS",
        apply: |c, raw, src| {
            let hosts = string_list(raw, "host names")?
                .iter()
                .map(|h| HostPattern::parse(h))
                .collect::<Result<_, _>>()?;
            c.allow_hosts = Setting::new(hosts, src);
            Ok(())
        },
    },
    Key {
        name: "runner",
        env: "ORCHESTRATE_RUNNER",
        // Checked against the named runners when a run resolves it: they may come from
        // another file.
        apply: |c, raw, src| {
            c.runner = Setting::new(string(raw)?, src);
            Ok(())
        },
    },
    Key {
        name: "queue_timeout",
        env: "ORCHESTRATE_QUEUE_TIMEOUT",
        apply: |c, raw, src| {
            c.queue_timeout = Setting::new(duration(raw, false)?, src);
            Ok(())
        },
    },
    Key {
        name: "runners",
        env: "ORCHESTRATE_RUNNERS",
        apply: |c, raw, src| {
            let Raw::Toml(value) = raw else {
                return Err(
                    "named runners are set in a config file ([runners.NAME] with kind and args), not in the environment"
                        .to_string(),
                );
            };
            let mut runners = c.runners.value.clone();
            runners.extend(runner::parse_table(value)?);
            c.runners = Setting::new(runners, src);
            Ok(())
        },
    },
];

/// The names of every config key, in display order.
pub(crate) fn key_names() -> impl Iterator<Item = &'static str> {
    KEYS.iter().map(|k| k.name)
}

fn string(raw: Raw<'_>) -> Result<String, String> {
    let s = match raw {
        Raw::Toml(toml::Value::String(s)) => s.trim(),
        Raw::Toml(v) => return Err(format!("expected a string, found {}", v.type_str())),
        Raw::Env(s) => s.trim(),
    };
    if s.is_empty() {
        return Err("must not be empty".to_string());
    }
    Ok(s.to_string())
}

fn duration(raw: Raw<'_>, zero_allowed: bool) -> Result<Duration, String> {
    let d = match raw {
        Raw::Toml(toml::Value::String(s)) => parse_duration(s).map_err(|e| e.to_string())?,
        Raw::Env(s) => parse_duration(s).map_err(|e| e.to_string())?,
        Raw::Toml(toml::Value::Integer(ms)) => match u64::try_from(*ms) {
            Ok(ms) => Duration::from_millis(ms),
            Err(_) => return Err(format!("must not be negative (found {ms})")),
        },
        Raw::Toml(v) => {
            return Err(format!(
                "expected a duration such as \"90s\", \"15m\", \"1h30m\" or an integer of milliseconds, found {}",
                v.type_str()
            ))
        }
    };
    if d.is_zero() && !zero_allowed {
        return Err("must be greater than zero".to_string());
    }
    Ok(d)
}

fn integer(raw: Raw<'_>, min: u64, max: u64) -> Result<u64, String> {
    let n: i128 = match raw {
        Raw::Toml(toml::Value::Integer(n)) => (*n).into(),
        Raw::Toml(v) => return Err(format!("expected an integer, found {}", v.type_str())),
        Raw::Env(s) => s
            .trim()
            .parse()
            .map_err(|_| format!("{:?} is not an integer", s.trim()))?,
    };
    if n < i128::from(min) || n > i128::from(max) {
        let wanted = match (min, max) {
            (0, m) if m >= u64::from(u32::MAX) => "a non-negative integer".to_string(),
            (1, m) if m >= u64::from(u32::MAX) => "a positive integer".to_string(),
            (lo, hi) => format!("an integer from {lo} to {hi}"),
        };
        return Err(format!("must be {wanted} (found {n})"));
    }
    Ok(n as u64)
}

/// US dollars greater than zero: a number, or text such as `"0.50"` or `"$0.50"`.
fn usd(raw: Raw<'_>) -> Result<f64, String> {
    let n = match raw {
        Raw::Toml(toml::Value::Float(f)) => *f,
        Raw::Toml(toml::Value::Integer(n)) => *n as f64,
        Raw::Toml(toml::Value::String(s)) => parse_usd(s)?,
        Raw::Env(s) => parse_usd(s)?,
        Raw::Toml(v) => {
            return Err(format!(
                "expected an amount of US dollars such as 0.50, found {}",
                v.type_str()
            ))
        }
    };
    if !(n.is_finite() && n > 0.0) {
        return Err(format!(
            "must be an amount of US dollars greater than 0 (found {n})"
        ));
    }
    Ok(n)
}

fn parse_usd(s: &str) -> Result<f64, String> {
    s.trim()
        .trim_start_matches('$')
        .parse()
        .map_err(|_| format!("{:?} is not an amount of US dollars such as 0.50", s.trim()))
}

/// Model names: a TOML array of strings, or a comma-separated string.
fn models(raw: Raw<'_>) -> Result<Vec<String>, String> {
    string_list(raw, "model names")
}

/// A TOML list of strings, or one comma-separated string (the environment's form).
fn string_list(raw: Raw<'_>, what: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = match raw {
        Raw::Toml(toml::Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                toml::Value::String(s) => Ok(s.trim().to_string()),
                other => Err(format!(
                    "expected {what}, found {} in the list",
                    other.type_str()
                )),
            })
            .collect::<Result<_, _>>()?,
        Raw::Toml(toml::Value::String(s)) => s.split(',').map(|m| m.trim().to_string()).collect(),
        Raw::Env(s) => s.split(',').map(|m| m.trim().to_string()).collect(),
        Raw::Toml(v) => return Err(format!("expected a list of {what}, found {}", v.type_str())),
    };
    Ok(names.into_iter().filter(|m| !m.is_empty()).collect())
}

fn boolean(raw: Raw<'_>) -> Result<bool, String> {
    match raw {
        Raw::Toml(toml::Value::Boolean(b)) => Ok(*b),
        Raw::Toml(v) => Err(format!("expected true or false, found {}", v.type_str())),
        Raw::Env(s) => match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(true),
            "0" | "false" | "no" | "off" => Ok(false),
            _ => Err("not a boolean (use 1/0, true/false, yes/no or on/off)".to_string()),
        },
    }
}

/// `$XDG_CONFIG_HOME/orchestrate/config.toml`, else `~/.config/orchestrate/config.toml`.
pub(crate) fn user_config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let non_empty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    // The XDG spec says a relative value is invalid and must be ignored.
    let base = non_empty("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| non_empty("HOME").map(|h| h.join(".config")))?;
    Some(base.join(USER_CONFIG_FILE))
}

/// `.orchestrate/config.toml` in the nearest ancestor of `cwd` (itself included) that has one.
pub(crate) fn project_config_path(cwd: &Path) -> Option<PathBuf> {
    let cwd = std::path::absolute(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    cwd.ancestors()
        .map(|dir| dir.join(PROJECT_CONFIG_FILE))
        .find(|p| p.is_file())
}

impl Config {
    /// Reads `HOME`, `XDG_CONFIG_HOME` and `ORCHESTRATE_*` from the process environment.
    pub fn load(cwd: &Path) -> Result<Config, ConfigError> {
        Config::load_with(cwd, &|k| std::env::var(k).ok())
    }

    pub fn load_with(
        cwd: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        let user = user_config_path(env);
        if let Some(path) = &user {
            config.apply_file(path, Source::User(path.clone()))?;
        }
        if let Some(path) = project_config_path(cwd) {
            // A project whose config folder is the user's own (XDG_CONFIG_HOME pointing
            // into it) must not count twice under two names.
            let is_user = user.as_deref().is_some_and(|u| same_file(u, &path));
            if !is_user {
                config.apply_file(&path, Source::Project(path.clone()))?;
            }
        }
        for key in KEYS {
            // An empty variable is how a shell unsets a value for one command.
            let Some(value) = env(key.env).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            (key.apply)(&mut config, Raw::Env(&value), Source::Env(key.env)).map_err(|reason| {
                ConfigError::EnvValue {
                    var: key.env,
                    value: value.clone(),
                    reason,
                }
            })?;
        }
        Ok(config)
    }

    /// Applies one file's keys over `self`. A missing file is no error: both files are
    /// optional.
    fn apply_file(&mut self, path: &Path, source: Source) -> Result<(), ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source: e,
                })
            }
        };
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let (line, column) = e
                .span()
                .map_or((1, 1), |span| line_column(&text, span.start));
            ConfigError::Syntax {
                path: path.to_path_buf(),
                line,
                column,
                message: e.message().trim().to_string(),
            }
        })?;
        for (name, value) in &table {
            let Some(key) = KEYS.iter().find(|k| k.name == name) else {
                // A newer orchestrate's key in a shared file must not break an older one.
                tracing::warn!(
                    "{}: unknown key `{name}` ignored (known keys: {})",
                    path.display(),
                    key_names().collect::<Vec<_>>().join(", ")
                );
                continue;
            };
            (key.apply)(self, Raw::Toml(value), source.clone()).map_err(|reason| {
                ConfigError::FileValue {
                    path: path.to_path_buf(),
                    key: name.clone(),
                    reason,
                }
            })?;
        }
        Ok(())
    }

    /// Each key with its value as JSON and where it came from, in display order.
    pub fn entries(&self) -> Vec<(&'static str, Value, &Source)> {
        let dur = |s: &Setting<Duration>| json!(format_duration(s.value));
        vec![
            (
                "backend",
                json!(self.backend.value.name()),
                &self.backend.source,
            ),
            ("model", json!(self.model.value), &self.model.source),
            ("timeout", dur(&self.timeout), &self.timeout.source),
            (
                "idle_timeout",
                dur(&self.idle_timeout),
                &self.idle_timeout.source,
            ),
            ("kill_grace", dur(&self.kill_grace), &self.kill_grace.source),
            ("exit_grace", dur(&self.exit_grace), &self.exit_grace.source),
            (
                "max_output_bytes",
                json!(self.max_output_bytes.value),
                &self.max_output_bytes.source,
            ),
            (
                "max_bytes",
                json!(self.max_bytes.value),
                &self.max_bytes.source,
            ),
            (
                "max_lines",
                json!(self.max_lines.value),
                &self.max_lines.source,
            ),
            (
                "max_depth",
                json!(self.max_depth.value),
                &self.max_depth.source,
            ),
            (
                "disabled",
                json!(self.disabled.value),
                &self.disabled.source,
            ),
            ("retries", json!(self.retries.value), &self.retries.source),
            (
                "concurrency",
                json!(self.concurrency.value),
                &self.concurrency.source,
            ),
            (
                "max_tasks",
                json!(self.max_tasks.value),
                &self.max_tasks.source,
            ),
            (
                "tool_timeout",
                dur(&self.tool_timeout),
                &self.tool_timeout.source,
            ),
            (
                "connect_timeout",
                dur(&self.connect_timeout),
                &self.connect_timeout.source,
            ),
            (
                "max_turns",
                json!(self.max_turns.value),
                &self.max_turns.source,
            ),
            (
                "max_tokens",
                json!(self.max_tokens.value),
                &self.max_tokens.source,
            ),
            (
                "max_cost",
                json!(self.max_cost.value),
                &self.max_cost.source,
            ),
            (
                "max_total_cost",
                json!(self.max_total_cost.value),
                &self.max_total_cost.source,
            ),
            (
                "fallback_models",
                json!(self.fallback_models.value),
                &self.fallback_models.source,
            ),
            (
                "sandbox",
                json!(self.sandbox.value.map_or("auto", SandboxMode::name)),
                &self.sandbox.source,
            ),
            (
                "network",
                json!(self.network.value.map_or("auto", Network::name)),
                &self.network.source,
            ),
            (
                "allow_hosts",
                json!(self
                    .allow_hosts
                    .value
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()),
                &self.allow_hosts.source,
            ),
            ("runner", json!(self.runner.value), &self.runner.source),
            (
                "queue_timeout",
                dur(&self.queue_timeout),
                &self.queue_timeout.source,
            ),
            (
                "runners",
                self.runners
                    .value
                    .iter()
                    .map(|(name, def)| {
                        (
                            name.clone(),
                            json!({"kind": def.kind.name(), "args": def.args}),
                        )
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
                &self.runners.source,
            ),
        ]
    }

    /// `{"timeout": {"value": "15m", "source": "default"}, …}`. Durations are written the
    /// way a config file accepts them, so a value can be pasted back.
    pub fn to_json(&self) -> Value {
        let map = self
            .entries()
            .into_iter()
            .map(|(key, value, source)| {
                (
                    key.to_string(),
                    json!({"value": value, "source": source.to_string()}),
                )
            })
            .collect::<serde_json::Map<_, _>>();
        Value::Object(map)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// 1-based line and column (in characters) of byte offset `at`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The shortest form `parse_duration` reads back: `15m`, `1h30m`, `1s500ms`, `0s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let total_ms = d.as_millis();
    if total_ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let parts = [(3_600_000, "h"), (60_000, "m"), (1_000, "s"), (1, "ms")];
    let mut rest = total_ms;
    for (unit_ms, unit) in parts {
        let n = rest / unit_ms;
        rest %= unit_ms;
        if n > 0 {
            out.push_str(&format!("{n}{unit}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::Backend;
    use pretty_assertions::assert_eq;
    use std::collections::HashMap;

    struct Fixture {
        _tmp: tempfile::TempDir,
        home: PathBuf,
        project: PathBuf,
        cwd: PathBuf,
        env: HashMap<String, String>,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap();
            let home = tmp.path().join("home");
            let project = tmp.path().join("repo");
            let cwd = project.join("src/deep");
            std::fs::create_dir_all(&home).unwrap();
            std::fs::create_dir_all(&cwd).unwrap();
            let mut env = HashMap::new();
            env.insert("HOME".to_string(), home.to_string_lossy().into_owned());
            Fixture {
                _tmp: tmp,
                home,
                project,
                cwd,
                env,
            }
        }

        fn user_file(&self) -> PathBuf {
            self.home.join(".config/orchestrate/config.toml")
        }

        fn project_file(&self) -> PathBuf {
            self.project.join(".orchestrate/config.toml")
        }

        fn write(&self, path: &Path, text: &str) {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn set(&mut self, k: &str, v: &str) {
            self.env.insert(k.to_string(), v.to_string());
        }

        fn load(&self) -> Result<Config, ConfigError> {
            Config::load_with(&self.cwd, &|k| self.env.get(k).cloned())
        }

        fn error(&self) -> String {
            self.load().unwrap_err().to_string()
        }
    }

    #[test]
    fn built_in_defaults_when_nothing_is_set() {
        let f = Fixture::new();
        let c = f.load().unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(
            c.to_json(),
            json!({
                "backend": {"value": "auto", "source": "default"},
                "model": {"value": null, "source": "default"},
                "timeout": {"value": "15m", "source": "default"},
                "idle_timeout": {"value": "3m", "source": "default"},
                "kill_grace": {"value": "5s", "source": "default"},
                "exit_grace": {"value": "2s", "source": "default"},
                "max_output_bytes": {"value": 67108864, "source": "default"},
                "max_bytes": {"value": 51200, "source": "default"},
                "max_lines": {"value": 2000, "source": "default"},
                "max_depth": {"value": 1, "source": "default"},
                "disabled": {"value": false, "source": "default"},
                "retries": {"value": 2, "source": "default"},
                "concurrency": {"value": 4, "source": "default"},
                "max_tasks": {"value": 16, "source": "default"},
                "tool_timeout": {"value": "10m", "source": "default"},
                "connect_timeout": {"value": "1m", "source": "default"},
                "max_turns": {"value": null, "source": "default"},
                "max_tokens": {"value": null, "source": "default"},
                "max_cost": {"value": null, "source": "default"},
                "max_total_cost": {"value": null, "source": "default"},
                "fallback_models": {"value": [], "source": "default"},
                "sandbox": {"value": "auto", "source": "default"},
                "network": {"value": "auto", "source": "default"},
                "allow_hosts": {"value": [], "source": "default"},
                "runner": {"value": "local", "source": "default"},
                "queue_timeout": {"value": "10m", "source": "default"},
                "runners": {"value": {}, "source": "default"},
            })
        );
    }

    #[test]
    fn every_layer_overrides_the_one_below() {
        let mut f = Fixture::new();
        let user = f.user_file();
        let project = f.project_file();
        // Each layer sets timeout; each lower layer also sets one key no higher layer sets,
        // so that a layer is seen to apply even where it is not the winner.
        f.write(
            &user,
            "timeout = \"1m\"\nbackend = \"claude\"\nmax_lines = 10\nretries = 5\n",
        );
        let c = f.load().unwrap();
        assert_eq!(
            c.timeout,
            Setting::new(Duration::from_secs(60), Source::User(user.clone()))
        );

        f.write(
            &project,
            "timeout = 120000\nbackend = \"codex\"\nmax_lines = 20\n",
        );
        let c = f.load().unwrap();
        assert_eq!(
            c.timeout,
            Setting::new(Duration::from_secs(120), Source::Project(project.clone()))
        );

        f.set("ORCHESTRATE_TIMEOUT", "3m");
        f.set("ORCHESTRATE_BACKEND", "gemini");
        let mut c = f.load().unwrap();
        assert_eq!(
            c.timeout,
            Setting::new(Duration::from_secs(180), Source::Env("ORCHESTRATE_TIMEOUT"))
        );

        c.timeout = Setting::flag(Duration::from_secs(240));
        let expected = Config {
            backend: Setting::new(
                BackendChoice::Named(Backend::Gemini),
                Source::Env("ORCHESTRATE_BACKEND"),
            ),
            timeout: Setting::flag(Duration::from_secs(240)),
            max_lines: Setting::new(20, Source::Project(project.clone())),
            retries: Setting::new(5, Source::User(user.clone())),
            ..Config::default()
        };
        assert_eq!(c, expected);
        assert_eq!(
            c.to_json()["timeout"],
            json!({"value": "4m", "source": "flag"})
        );
        assert_eq!(
            c.to_json()["max_lines"],
            json!({"value": 20, "source": format!("project:{}", project.display())})
        );
    }

    #[test]
    fn nearest_project_file_wins_and_xdg_config_home_replaces_dot_config() {
        let mut f = Fixture::new();
        let outer = f.project_file();
        f.write(&outer, "model = \"outer\"\n");
        let inner = f.project.join("src/.orchestrate/config.toml");
        f.write(&inner, "model = \"inner\"\n");
        let xdg = f.home.join("xdg");
        let user = xdg.join("orchestrate/config.toml");
        f.write(&user, "model = \"user\"\nmax_depth = 0\n");
        // Ignored while XDG_CONFIG_HOME is set.
        f.write(&f.user_file(), "max_depth = 7\n");
        f.set("XDG_CONFIG_HOME", xdg.to_str().unwrap());
        let c = f.load().unwrap();
        assert_eq!(
            (c.model, c.max_depth),
            (
                Setting::new(Some("inner".to_string()), Source::Project(inner)),
                Setting::new(0, Source::User(user))
            )
        );
    }

    #[test]
    fn every_key_reads_from_a_file_and_from_the_environment() {
        let mut f = Fixture::new();
        let p = f.project_file();
        f.write(
            &p,
            r#"
backend = "pi"
model = "claude-haiku-4-5"
timeout = "1h30m"
idle_timeout = "90s"
kill_grace = 0
exit_grace = "500ms"
max_output_bytes = 1000
max_bytes = 2000
max_lines = 30
max_depth = 2
disabled = true
retries = 3
concurrency = 64
max_tasks = 256
tool_timeout = "5m"
connect_timeout = 30000
max_turns = 12
max_tokens = 200000
max_cost = 0.5
max_total_cost = "$2"
fallback_models = ["claude-sonnet-4-5", "gpt-5.5"]
sandbox = "read-only"
network = "off"
allow_hosts = ["pypi.org", "*.github.com"]
runner = "gpu"
queue_timeout = "2m"
[runners.gpu]
kind = "slurm"
args = ["--partition=gpu", "--time=30"]
"#,
        );
        let src = || Source::Project(p.clone());
        assert_eq!(
            f.load().unwrap(),
            Config {
                backend: Setting::new(BackendChoice::Named(Backend::Pi), src()),
                model: Setting::new(Some("claude-haiku-4-5".into()), src()),
                timeout: Setting::new(Duration::from_secs(5400), src()),
                idle_timeout: Setting::new(Duration::from_secs(90), src()),
                kill_grace: Setting::new(Duration::ZERO, src()),
                exit_grace: Setting::new(Duration::from_millis(500), src()),
                max_output_bytes: Setting::new(1000, src()),
                max_bytes: Setting::new(2000, src()),
                max_lines: Setting::new(30, src()),
                max_depth: Setting::new(2, src()),
                disabled: Setting::new(true, src()),
                retries: Setting::new(3, src()),
                concurrency: Setting::new(64, src()),
                max_tasks: Setting::new(256, src()),
                tool_timeout: Setting::new(Duration::from_secs(300), src()),
                connect_timeout: Setting::new(Duration::from_secs(30), src()),
                max_turns: Setting::new(Some(12), src()),
                max_tokens: Setting::new(Some(200_000), src()),
                max_cost: Setting::new(Some(0.5), src()),
                max_total_cost: Setting::new(Some(2.0), src()),
                fallback_models: Setting::new(
                    vec!["claude-sonnet-4-5".into(), "gpt-5.5".into()],
                    src()
                ),
                sandbox: Setting::new(Some(SandboxMode::ReadOnly), src()),
                network: Setting::new(Some(Network::Off), src()),
                allow_hosts: Setting::new(
                    vec![
                        HostPattern::parse("pypi.org").unwrap(),
                        HostPattern::parse("*.github.com").unwrap(),
                    ],
                    src(),
                ),
                runner: Setting::new("gpu".into(), src()),
                queue_timeout: Setting::new(Duration::from_secs(120), src()),
                runners: Setting::new(gpu_runner(), src()),
            }
        );

        let vars = [
            ("ORCHESTRATE_BACKEND", "claude"),
            ("ORCHESTRATE_MODEL", "gpt-5"),
            ("ORCHESTRATE_TIMEOUT", "2500"),
            ("ORCHESTRATE_IDLE_TIMEOUT", "1m5s"),
            ("ORCHESTRATE_KILL_GRACE", "1s"),
            ("ORCHESTRATE_EXIT_GRACE", "0"),
            ("ORCHESTRATE_MAX_OUTPUT_BYTES", "4096"),
            ("ORCHESTRATE_MAX_BYTES", " 100 "),
            ("ORCHESTRATE_MAX_LINES", "5"),
            ("ORCHESTRATE_MAX_DEPTH", "0"),
            ("ORCHESTRATE_DISABLED", "off"),
            ("ORCHESTRATE_RETRIES", "1"),
            ("ORCHESTRATE_CONCURRENCY", "1"),
            ("ORCHESTRATE_MAX_TASKS", "1"),
            ("ORCHESTRATE_TOOL_TIMEOUT", "90s"),
            ("ORCHESTRATE_CONNECT_TIMEOUT", "10s"),
            ("ORCHESTRATE_MAX_TURNS", "3"),
            ("ORCHESTRATE_MAX_TOKENS", "5000"),
            ("ORCHESTRATE_MAX_COST", "$0.25"),
            ("ORCHESTRATE_MAX_TOTAL_COST", "1"),
            ("ORCHESTRATE_FALLBACK_MODELS", "a, b,"),
            ("ORCHESTRATE_SANDBOX", "auto"),
            ("ORCHESTRATE_NETWORK", "provider"),
            ("ORCHESTRATE_ALLOW_HOSTS", "docs.rs, *.crates.io"),
            ("ORCHESTRATE_RUNNER", "slurm"),
            ("ORCHESTRATE_QUEUE_TIMEOUT", "30s"),
        ];
        for (k, v) in vars {
            f.set(k, v);
        }
        assert_eq!(
            f.load().unwrap(),
            Config {
                backend: Setting::new(
                    BackendChoice::Named(Backend::Claude),
                    Source::Env("ORCHESTRATE_BACKEND")
                ),
                model: Setting::new(Some("gpt-5".into()), Source::Env("ORCHESTRATE_MODEL")),
                timeout: Setting::new(
                    Duration::from_millis(2500),
                    Source::Env("ORCHESTRATE_TIMEOUT")
                ),
                idle_timeout: Setting::new(
                    Duration::from_secs(65),
                    Source::Env("ORCHESTRATE_IDLE_TIMEOUT")
                ),
                kill_grace: Setting::new(
                    Duration::from_secs(1),
                    Source::Env("ORCHESTRATE_KILL_GRACE")
                ),
                exit_grace: Setting::new(Duration::ZERO, Source::Env("ORCHESTRATE_EXIT_GRACE")),
                max_output_bytes: Setting::new(4096, Source::Env("ORCHESTRATE_MAX_OUTPUT_BYTES")),
                max_bytes: Setting::new(100, Source::Env("ORCHESTRATE_MAX_BYTES")),
                max_lines: Setting::new(5, Source::Env("ORCHESTRATE_MAX_LINES")),
                max_depth: Setting::new(0, Source::Env("ORCHESTRATE_MAX_DEPTH")),
                disabled: Setting::new(false, Source::Env("ORCHESTRATE_DISABLED")),
                retries: Setting::new(1, Source::Env("ORCHESTRATE_RETRIES")),
                concurrency: Setting::new(1, Source::Env("ORCHESTRATE_CONCURRENCY")),
                max_tasks: Setting::new(1, Source::Env("ORCHESTRATE_MAX_TASKS")),
                tool_timeout: Setting::new(
                    Duration::from_secs(90),
                    Source::Env("ORCHESTRATE_TOOL_TIMEOUT")
                ),
                connect_timeout: Setting::new(
                    Duration::from_secs(10),
                    Source::Env("ORCHESTRATE_CONNECT_TIMEOUT")
                ),
                max_turns: Setting::new(Some(3), Source::Env("ORCHESTRATE_MAX_TURNS")),
                max_tokens: Setting::new(Some(5000), Source::Env("ORCHESTRATE_MAX_TOKENS")),
                max_cost: Setting::new(Some(0.25), Source::Env("ORCHESTRATE_MAX_COST")),
                max_total_cost: Setting::new(Some(1.0), Source::Env("ORCHESTRATE_MAX_TOTAL_COST")),
                fallback_models: Setting::new(
                    vec!["a".into(), "b".into()],
                    Source::Env("ORCHESTRATE_FALLBACK_MODELS")
                ),
                sandbox: Setting::new(None, Source::Env("ORCHESTRATE_SANDBOX")),
                network: Setting::new(Some(Network::Provider), Source::Env("ORCHESTRATE_NETWORK")),
                allow_hosts: Setting::new(
                    vec![
                        HostPattern::parse("docs.rs").unwrap(),
                        HostPattern::parse("*.crates.io").unwrap(),
                    ],
                    Source::Env("ORCHESTRATE_ALLOW_HOSTS")
                ),
                runner: Setting::new("slurm".into(), Source::Env("ORCHESTRATE_RUNNER")),
                queue_timeout: Setting::new(
                    Duration::from_secs(30),
                    Source::Env("ORCHESTRATE_QUEUE_TIMEOUT")
                ),
                // Named runners come from files only.
                runners: Setting::new(gpu_runner(), src()),
            }
        );
    }

    fn gpu_runner() -> BTreeMap<String, RunnerDef> {
        BTreeMap::from([(
            "gpu".to_string(),
            RunnerDef {
                kind: crate::runner::Kind::parse("slurm").unwrap(),
                args: vec!["--partition=gpu".into(), "--time=30".into()],
            },
        )])
    }

    #[test]
    fn an_empty_environment_variable_counts_as_unset() {
        let mut f = Fixture::new();
        f.write(&f.user_file(), "retries = 4\n");
        f.set("ORCHESTRATE_RETRIES", "  ");
        assert_eq!(
            f.load().unwrap().retries,
            Setting::new(4, Source::User(f.user_file()))
        );
    }

    #[test]
    fn bad_file_values_name_the_file_the_key_and_the_reason() {
        let cases = [
            (
                "timeout = \"soon\"",
                "key `timeout`: invalid duration \"soon\": each unit needs a number before it (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)",
            ),
            ("timeout = 0", "key `timeout`: must be greater than zero"),
            ("idle_timeout = \"0s\"", "key `idle_timeout`: must be greater than zero"),
            ("kill_grace = -5", "key `kill_grace`: must not be negative (found -5)"),
            (
                "exit_grace = 1.5",
                "key `exit_grace`: expected a duration such as \"90s\", \"15m\", \"1h30m\" or an integer of milliseconds, found float",
            ),
            ("backend = 3", "key `backend`: expected a string, found integer"),
            (
                "backend = \"nope\"",
                "key `backend`: unknown backend \"nope\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command)",
            ),
            ("model = \"  \"", "key `model`: must not be empty"),
            ("max_output_bytes = 0", "key `max_output_bytes`: must be a positive integer (found 0)"),
            ("max_bytes = \"50k\"", "key `max_bytes`: expected an integer, found string"),
            ("max_lines = -1", "key `max_lines`: must be a positive integer (found -1)"),
            ("max_depth = -1", "key `max_depth`: must be a non-negative integer (found -1)"),
            ("max_depth = 4294967296", "key `max_depth`: must be a non-negative integer (found 4294967296)"),
            ("disabled = \"yes\"", "key `disabled`: expected true or false, found string"),
            ("retries = 0", "key `retries`: must be a positive integer (found 0)"),
            ("concurrency = 65", "key `concurrency`: must be an integer from 1 to 64 (found 65)"),
            ("concurrency = 0", "key `concurrency`: must be an integer from 1 to 64 (found 0)"),
            ("max_tasks = 257", "key `max_tasks`: must be an integer from 1 to 256 (found 257)"),
            ("max_tasks = [1]", "key `max_tasks`: expected an integer, found array"),
        ];
        for (toml_text, reason) in cases {
            let f = Fixture::new();
            let p = f.project_file();
            f.write(&p, &format!("{toml_text}\n"));
            assert_eq!(
                f.error(),
                format!("{}: {reason}", p.display()),
                "for {toml_text}"
            );
        }
    }

    #[test]
    fn bad_environment_values_name_the_variable_and_the_reason() {
        let cases = [
            (
                "ORCHESTRATE_TIMEOUT",
                "x",
                "invalid duration \"x\": each unit needs a number before it (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)",
            ),
            ("ORCHESTRATE_IDLE_TIMEOUT", "0", "must be greater than zero"),
            ("ORCHESTRATE_KILL_GRACE", "-1s", "invalid duration \"-1s\": each unit needs a number before it (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)"),
            ("ORCHESTRATE_MAX_OUTPUT_BYTES", "64MiB", "\"64MiB\" is not an integer"),
            ("ORCHESTRATE_MAX_BYTES", "0", "must be a positive integer (found 0)"),
            ("ORCHESTRATE_MAX_LINES", "-3", "must be a positive integer (found -3)"),
            ("ORCHESTRATE_MAX_DEPTH", "-1", "must be a non-negative integer (found -1)"),
            ("ORCHESTRATE_DISABLED", "maybe", "not a boolean (use 1/0, true/false, yes/no or on/off)"),
            ("ORCHESTRATE_RETRIES", "0", "must be a positive integer (found 0)"),
            ("ORCHESTRATE_CONCURRENCY", "100", "must be an integer from 1 to 64 (found 100)"),
            ("ORCHESTRATE_MAX_TASKS", "1.5", "\"1.5\" is not an integer"),
            ("ORCHESTRATE_TOOL_TIMEOUT", "0", "must be greater than zero"),
            ("ORCHESTRATE_MAX_TURNS", "0", "must be a positive integer (found 0)"),
            ("ORCHESTRATE_MAX_COST", "free", "\"free\" is not an amount of US dollars such as 0.50"),
            ("ORCHESTRATE_MAX_TOTAL_COST", "-1", "must be an amount of US dollars greater than 0 (found -1)"),
        ];
        for (var, value, reason) in cases {
            let mut f = Fixture::new();
            f.set(var, value);
            assert_eq!(
                f.error(),
                format!("environment variable {var}={value:?}: {reason}")
            );
        }
    }

    #[test]
    fn a_toml_syntax_error_gives_line_and_column() {
        let f = Fixture::new();
        let p = f.user_file();
        f.write(&p, "backend = \"pi\"\n\ntimeout = 15m\n");
        match f.load().unwrap_err() {
            ConfigError::Syntax {
                path,
                line,
                column,
                message,
            } => {
                assert_eq!((path, line, column), (p.clone(), 3, 11));
                assert!(!message.is_empty());
                assert_eq!(
                    f.error(),
                    format!("{}:3:11: invalid TOML: {message}", p.display())
                );
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn a_duplicate_key_is_a_syntax_error() {
        let f = Fixture::new();
        let p = f.project_file();
        f.write(&p, "retries = 1\nretries = 2\n");
        let e = f.error();
        assert!(e.starts_with(&format!("{}:2:", p.display())), "{e}");
    }

    #[test]
    fn unknown_keys_and_tables_are_tolerated() {
        let f = Fixture::new();
        let p = f.project_file();
        f.write(&p, "retries = 3\ntimeout_ms = 5\n[mcp]\nport = 1\n");
        assert_eq!(
            f.load().unwrap(),
            Config {
                retries: Setting::new(3, Source::Project(p.clone())),
                ..Config::default()
            }
        );
    }

    #[test]
    fn an_unreadable_config_path_is_an_error_naming_it() {
        let f = Fixture::new();
        // A folder where the file should be cannot be read as one.
        std::fs::create_dir_all(f.user_file()).unwrap();
        let e = f.error();
        assert!(
            e.starts_with(&format!(
                "{}: cannot read the config file: ",
                f.user_file().display()
            )),
            "{e}"
        );
    }

    #[test]
    fn durations_format_as_they_parse() {
        for (ms, text) in [
            (0, "0s"),
            (500, "500ms"),
            (1_500, "1s500ms"),
            (90_000, "1m30s"),
            (900_000, "15m"),
            (5_400_000, "1h30m"),
            (90_000_000, "25h"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("a\nbé = x", 6), (2, 4));
        assert_eq!(line_column("abc", 0), (1, 1));
        assert_eq!(line_column("abc", 99), (1, 4));
    }
}
