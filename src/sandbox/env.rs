//! The child's environment: orchestrate's own less what would reach the user's
//! credentials or sessions.
//!
//! Removed: the variables that name an agent's socket or the user's session (ssh-agent,
//! gpg-agent, D-Bus, Docker, the runtime directory, X11 and Wayland, tmux and screen,
//! Kerberos, kubeconfig); every variable whose name looks like a secret (it contains
//! `KEY`, `TOKEN`, `SECRET`, `PASS`, `CREDENTIAL`, `AUTH`, `COOKIE`, `PRIVATE`, `HEADERS`,
//! `DSN` or `WEBHOOK`, or ends in `_PWD` or `_PAT`), every URL with a user or password in
//! it, and every value the sanitizer would redact (a key's known shape, a webhook's
//! address), unless the child's own CLI reaches its provider with it (each backend
//! declares its variables) or the user keeps it (`ORCHESTRATE_SANDBOX_KEEP_ENV=NAME,PREFIX_*`).
//! git's configuration in the environment goes whole where it sets an `http.extraHeader`.
//! orchestrate's own variables stay (not one whose name says it holds a secret).

use std::ffi::OsString;

use super::{ChildEnv, CliHome};

/// Variables that point into the user's session, removed whatever their name.
const SESSION_VARS: [&str; 16] = [
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "DOCKER_HOST",
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "TMUX",
    "TMUX_PANE",
    "STY",
    "KRB5CCNAME",
    "KUBECONFIG",
    "VAULT_ADDR",
];

/// Parts of a name that say it holds a secret. `HEADERS`: request headers carry API keys
/// (`OTEL_EXPORTER_OTLP_HEADERS=x-honeycomb-team=…`, `Authorization=Basic …`).
/// `DSN`: Sentry's carry its key.
const SECRET_WORDS: [&str; 12] = [
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "HEADERS",
    "DSN",
    "WEBHOOK",
];

/// The user's own list of variables a confined child keeps.
pub(crate) const KEEP_VAR: &str = "ORCHESTRATE_SANDBOX_KEEP_ENV";

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
        || upper.ends_with("_PWD")
        // `DB_PASS`, `PASSPHRASE`, a `PAT` (personal access token); not `COMPASS`.
        || upper
            .split('_')
            .any(|part| part.starts_with("PASS") || part == "PAT")
}

/// One of orchestrate's own variables (its settings, its state directory, the depth of
/// nesting), which a nested orchestrate reads: kept. One that only looks like them but
/// whose name says it holds a secret is judged like any other; the token budgets
/// (`ORCHESTRATE_MAX_TOKENS`) are counts.
fn own_setting(name: &str) -> bool {
    name.starts_with("ORCHESTRATE_") && (!looks_secret(name) || name.ends_with("_TOKENS"))
}

/// `scheme://user:password@host…`, or `scheme://key@host…` (a Sentry DSN's key is its
/// user).
fn url_with_userinfo(value: &str) -> bool {
    value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority.contains('@')
    })
}

/// A value that holds a secret by its shape: one the sanitizer would mask.
fn value_looks_secret(value: &str) -> bool {
    url_with_userinfo(value) || crate::sanitize::Sanitizer::global().holds_secret(value)
}

/// git's configuration in the environment: `GIT_CONFIG_PARAMETERS` (what `git -c` passes
/// on) and `GIT_CONFIG_COUNT` with its `GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>` pairs.
fn is_git_config_var(name: &str) -> bool {
    name == "GIT_CONFIG_PARAMETERS"
        || name == "GIT_CONFIG_COUNT"
        || name.starts_with("GIT_CONFIG_KEY_")
        || name.starts_with("GIT_CONFIG_VALUE_")
}

/// Whether git's configuration in `vars` sets a header git sends with every request
/// (`http.extraHeader`, an authorization as often as not). Later values win, as in
/// the child's environment.
fn git_config_holds_secret(vars: &[(OsString, OsString)]) -> bool {
    let value = |name: &str| {
        vars.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_string_lossy().to_ascii_lowercase())
    };
    value("GIT_CONFIG_PARAMETERS").is_some_and(|p| p.contains("extraheader"))
        || vars.iter().any(|(k, v)| {
            k.to_str().is_some_and(|k| k.starts_with("GIT_CONFIG_KEY_"))
                && v.to_string_lossy()
                    .to_ascii_lowercase()
                    .ends_with("extraheader")
        })
}

/// `NAME`, `PREFIX*` or `*SUFFIX`.
fn matches(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| {
        if let Some(prefix) = p.strip_suffix('*') {
            name.starts_with(prefix)
        } else if let Some(suffix) = p.strip_prefix('*') {
            name.ends_with(suffix)
        } else {
            p == name
        }
    })
}

/// The variables to remove from the child's environment (orchestrate's own, with the
/// invocation's on top).
pub(super) fn scrubbed(home: &CliHome, env: &ChildEnv<'_>) -> Vec<OsString> {
    let mut keep: Vec<String> = home.env.clone();
    keep.extend(
        env.get(KEEP_VAR)
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
    );
    let names: Vec<(OsString, OsString)> = std::env::vars_os()
        .chain(env.overrides.iter().cloned())
        .collect();
    // git's configuration given in the environment: one header there (an authorization)
    // takes all of it, since git refuses a count whose pairs are incomplete.
    let git_config_secret = git_config_holds_secret(&names);
    let mut out: Vec<OsString> = Vec::new();
    for (key, value) in names {
        let Some(name) = key.to_str() else {
            continue;
        };
        if own_setting(name) || matches(&keep, name) {
            continue;
        }
        let secret = looks_secret(name)
            || value_looks_secret(&value.to_string_lossy())
            || (git_config_secret && is_git_config_var(name));
        if (SESSION_VARS.contains(&name) || secret) && !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn names_and_values_that_hold_secrets_are_recognised() {
        for n in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "gh_token",
            "PGPASSWORD",
            "MYSQL_PWD",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "NPM_AUTH",
            "SSH_PRIVATE",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "HOME", "PWD", "LANG", "TERM", "EDITOR"] {
            assert!(!looks_secret(n), "{n}");
        }
        for n in [
            "DB_PASS",
            "GITHUB_PAT",
            "SENTRY_DSN",
            "SLACK_WEBHOOK_URL",
            "GPG_PASSPHRASE",
        ] {
            assert!(looks_secret(n), "{n}");
        }
        for n in ["PATH", "PATCH_LEVEL", "COMPASS", "BYPASS_PROXY"] {
            assert!(!looks_secret(n), "{n}");
        }
        assert!(value_looks_secret("postgres://me:hunter2@db:5432/x"));
        assert!(value_looks_secret("https://abc123@o1.ingest.sentry.io/1"));
        assert!(value_looks_secret(
            "ghp_R8kZ2mQ9pL4wX7nB3vH6cJ1dF5sG0aYtE2uK"
        ));
        assert!(value_looks_secret(
            "https://hooks.slack.com/services/T0AAAAAAA/B0BBBBBBB/cccccccccccccccccccccccc"
        ));
        assert!(!value_looks_secret("https://example.com/x:y"));
        assert!(!value_looks_secret("http://127.0.0.1:8080/v1"));
        assert!(!value_looks_secret("/usr/local/bin:/usr/bin"));
    }

    #[test]
    fn gits_configuration_in_the_environment_goes_whole_where_it_sets_a_header() {
        let pairs = |list: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            list.iter().map(|(k, v)| (k.into(), v.into())).collect()
        };
        let header = pairs(&[
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "Alice"),
            ("GIT_CONFIG_KEY_1", "http.https://github.com/.extraheader"),
            ("GIT_CONFIG_VALUE_1", "AUTHORIZATION: basic eDp5"),
        ]);
        let env = ChildEnv { overrides: &header };
        let pi = crate::backends::Backend::named("pi").sandbox_needs();
        let mut removed: Vec<String> = scrubbed(&pi.home(&env), &env)
            .into_iter()
            .map(|k| k.into_string().unwrap())
            .filter(|k| k.starts_with("GIT_CONFIG"))
            .collect();
        removed.sort();
        assert_eq!(
            removed,
            [
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_KEY_1",
                "GIT_CONFIG_VALUE_0",
                "GIT_CONFIG_VALUE_1"
            ]
        );
        assert!(git_config_holds_secret(&pairs(&[(
            "GIT_CONFIG_PARAMETERS",
            "'http.extraHeader'='Authorization: Bearer x'"
        )])));
        assert!(!git_config_holds_secret(&pairs(&[
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "core.pager"),
            ("GIT_CONFIG_VALUE_0", "less"),
        ])));
    }

    #[test]
    fn a_backends_provider_variables_and_the_users_list_are_kept() {
        let overrides = vec![
            (OsString::from("ANTHROPIC_API_KEY"), OsString::from("k")),
            (OsString::from("OPENAI_API_KEY"), OsString::from("k")),
            (OsString::from("GITHUB_TOKEN"), OsString::from("t")),
            (OsString::from("MY_TOKEN"), OsString::from("t")),
            (OsString::from("SSH_AUTH_SOCK"), OsString::from("/s")),
            (
                OsString::from("DATABASE_URL"),
                OsString::from("pg://a:b@h/d"),
            ),
            // Not one of orchestrate's own: judged like any other.
            (OsString::from("ORCHESTRATE_RUN_TOKEN"), OsString::from("x")),
            (
                OsString::from("ORCHESTRATE_MAX_TOKENS"),
                OsString::from("9"),
            ),
            (
                OsString::from("ORCHESTRATE_STATE_DIR"),
                OsString::from("/s"),
            ),
            (OsString::from(KEEP_VAR), OsString::from("MY_*")),
        ];
        let env = ChildEnv {
            overrides: &overrides,
        };
        let claude = crate::backends::Backend::named("claude").sandbox_needs();
        let mut removed: Vec<String> = scrubbed(&claude.home(&env), &env)
            .into_iter()
            .map(|k| k.into_string().unwrap())
            .filter(|k| overrides.iter().any(|(o, _)| o == k.as_str()))
            .collect();
        removed.sort();
        assert_eq!(
            removed,
            [
                "DATABASE_URL",
                "GITHUB_TOKEN",
                "OPENAI_API_KEY",
                "ORCHESTRATE_RUN_TOKEN",
                "SSH_AUTH_SOCK"
            ]
        );
    }
}
