//! Defaults for runs, from config files and the environment.
//!
//! This module layers the lower half of the precedence: the `ORCHESTRATE_*` environment,
//! the project's `.orchestrate/config.toml` (nearest ancestor of the working directory),
//! the user's `$XDG_CONFIG_HOME/orchestrate/config.toml`, and the built-in defaults. Flags
//! and agent files go on top of it in `run::resolve`, the one place a run's settings are
//! decided. Every value remembers where it came from, so that `orchestrate config` can
//! answer "why is my timeout 90s?".

use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::settings::kinds::Raw;
use crate::settings::{self, SETTINGS};
pub(crate) use crate::settings::{Config, Source};

/// Relative to the user's config home.
pub(crate) const USER_CONFIG_FILE: &str = "orchestrate/config.toml";
/// Relative to a project folder.
pub(crate) const PROJECT_CONFIG_FILE: &str = ".orchestrate/config.toml";

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

/// The names of every config key, in display order.
pub(crate) fn key_names() -> impl Iterator<Item = &'static str> {
    SETTINGS
        .iter()
        .filter(|s| s.surfaces().files)
        .map(|s| s.key())
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
        for setting in SETTINGS {
            let Some(var) = setting.surfaces().env else {
                continue;
            };
            // An empty variable is how a shell unsets a value for one command.
            let Some(value) = env(var).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            setting
                .apply(&mut config, Raw::Text(&value), Source::Env(var))
                .map_err(|reason| ConfigError::EnvValue {
                    var,
                    value: value.clone(),
                    reason,
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
            let Some(setting) = settings::by_key(name) else {
                // A newer orchestrate's key in a shared file must not break an older one.
                tracing::warn!(
                    "{}: unknown key `{name}` ignored (known keys: {})",
                    path.display(),
                    key_names().collect::<Vec<_>>().join(", ")
                );
                continue;
            };
            setting
                .apply(self, Raw::Toml(value), source.clone())
                .map_err(|reason| ConfigError::FileValue {
                    path: path.to_path_buf(),
                    key: name.clone(),
                    reason,
                })?;
        }
        Ok(())
    }

    /// Each key with its value as JSON and where it came from, in display order.
    pub fn entries(&self) -> Vec<(&'static str, Value, &Source)> {
        SETTINGS
            .iter()
            .filter(|s| s.surfaces().files)
            .map(|s| {
                let (value, source) = s.shown(self);
                (s.key(), value, source)
            })
            .collect()
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

#[cfg(test)]
mod tests;
