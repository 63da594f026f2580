//! `orchestrate config [--json]`: the effective defaults and where each one came from.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::config::{Config, PROJECT_CONFIG_FILE};
use crate::result::exit_status;

pub fn config(json: bool) -> i32 {
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("orchestrate: the current directory is not usable: {e}");
            return exit_status::FAILURE;
        }
    };
    let config = match Config::load(&cwd) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("orchestrate: {e}");
            return exit_status::USAGE;
        }
    };
    let text = if json {
        format!("{}\n", config.to_json())
    } else {
        let user = crate::config::user_config_path(&|k| std::env::var(k).ok());
        let project = crate::config::project_config_path(&cwd);
        format!(
            "{}\n{}",
            render_text(&config),
            render_files(user.as_deref(), project.as_deref(), &cwd)
        )
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

/// Where the config files are, or were looked for: a user who has none learns where to
/// put one.
pub fn render_files(user: Option<&Path>, project: Option<&Path>, cwd: &Path) -> String {
    let user = match user {
        Some(p) if p.is_file() => p.display().to_string(),
        Some(p) => format!("{} (not found)", p.display()),
        None => "(none: neither XDG_CONFIG_HOME nor HOME is set)".to_string(),
    };
    let project = match project {
        Some(p) => p.display().to_string(),
        None => format!(
            "{PROJECT_CONFIG_FILE} in {} or a folder above it (none found)",
            cwd.display()
        ),
    };
    format!(
        "Config files (each over the one before; ORCHESTRATE_* variables and flags over both):\n  user     {user}\n  project  {project}\n"
    )
}

/// `key = value  (source)`, values written as a config file would hold them so that a
/// line can be pasted into one; the sources line up to be scanned down.
pub fn render_text(config: &Config) -> String {
    let rows: Vec<(String, String)> = config
        .entries()
        .into_iter()
        .map(|(key, value, source)| {
            let value = match value {
                Value::Null => "(not set)".to_string(),
                v => v.to_string(),
            };
            (format!("{key} = {value}"), source.to_string())
        })
        .collect();
    let width = rows
        .iter()
        .map(|(kv, _)| kv.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(kv, source)| format!("{kv:<width$}  ({source})\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Setting, Source};
    use crate::units::Usd;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn text_lists_every_key_with_its_source() {
        let config = Config {
            model: Setting::new(Some("m1".into()), Source::Env("ORCHESTRATE_MODEL")),
            timeout: Setting::new(
                Duration::from_secs(90),
                Source::Project(PathBuf::from("/p/.orchestrate/config.toml")),
            ),
            retries: Setting::new(
                3,
                Source::User(PathBuf::from("/h/.config/orchestrate/config.toml")),
            ),
            max_tasks: Setting::flag(8),
            max_cost: Setting::new(Usd::new(0.5), Source::Env("ORCHESTRATE_MAX_COST")),
            fallback_models: Setting::new(
                vec!["gpt-5.5".into()],
                Source::Project(PathBuf::from("/p/.orchestrate/config.toml")),
            ),
            ..Config::default()
        };
        assert_eq!(
            render_text(&config),
            "\
backend = \"auto\"               (default)
model = \"m1\"                   (env:ORCHESTRATE_MODEL)
timeout = \"1m30s\"              (project:/p/.orchestrate/config.toml)
idle_timeout = \"3m\"            (default)
kill_grace = \"5s\"              (default)
exit_grace = \"2s\"              (default)
max_output_bytes = 67108864    (default)
max_bytes = 51200              (default)
max_lines = 2000               (default)
max_depth = 1                  (default)
disabled = false               (default)
retries = 3                    (user:/h/.config/orchestrate/config.toml)
concurrency = 4                (default)
max_tasks = 8                  (flag)
adaptive_concurrency = true    (default)
tool_timeout = \"10m\"           (default)
connect_timeout = \"1m\"         (default)
max_turns = (not set)          (default)
max_tokens = (not set)         (default)
max_cost = 0.5                 (env:ORCHESTRATE_MAX_COST)
max_total_cost = (not set)     (default)
max_total_tokens = (not set)   (default)
fallback_models = [\"gpt-5.5\"]  (project:/p/.orchestrate/config.toml)
sandbox = \"auto\"               (default)
network = \"auto\"               (default)
allow_hosts = []               (default)
permissions = \"policy\"         (default)
acp_command = (not set)        (default)
runner = \"local\"               (default)
queue_timeout = \"10m\"          (default)
runners = {}                   (default)
"
        );
        assert_eq!(
            render_text(&Config::default()).lines().nth(1),
            Some("model = (not set)             (default)")
        );
    }
}
