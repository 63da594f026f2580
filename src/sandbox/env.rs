//! The child's environment: orchestrate's own less what would reach the user's
//! credentials or sessions.
//!
//! Removed: the variables that name an agent's socket or the user's session (ssh-agent,
//! gpg-agent, D-Bus, Docker, the runtime directory, X11 and Wayland, tmux and screen,
//! Kerberos, kubeconfig); every variable whose name looks like a secret (it contains
//! `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `CREDENTIAL`, `AUTH`, `COOKIE`,
//! `PRIVATE` or `HEADERS`, or ends in `_PWD`) and every URL with a password in it, unless the child's
//! own CLI reaches its provider with it (each backend declares its variables) or the user
//! keeps it (`ORCHESTRATE_SANDBOX_KEEP_ENV=NAME,PREFIX_*`). orchestrate's own variables
//! stay.

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
const SECRET_WORDS: [&str; 10] = [
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
];

/// The user's own list of variables a confined child keeps.
pub(crate) const KEEP_VAR: &str = "ORCHESTRATE_SANDBOX_KEEP_ENV";

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w)) || upper.ends_with("_PWD")
}

/// `scheme://user:password@host…`
fn url_with_password(value: &str) -> bool {
    value.split_once("://").is_some_and(|(_, rest)| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.contains(':'))
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
    let names = std::env::vars_os().chain(env.overrides.iter().cloned());
    let mut out: Vec<OsString> = Vec::new();
    for (key, value) in names {
        let Some(name) = key.to_str() else {
            continue;
        };
        if name.starts_with("ORCHESTRATE_") || matches(&keep, name) {
            continue;
        }
        let secret = looks_secret(name) || url_with_password(&value.to_string_lossy());
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
        assert!(url_with_password("postgres://me:hunter2@db:5432/x"));
        assert!(!url_with_password("https://me@example.com/x:y"));
        assert!(!url_with_password("http://127.0.0.1:8080/v1"));
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
            (OsString::from("ORCHESTRATE_RUN_TOKEN"), OsString::from("x")),
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
                "SSH_AUTH_SOCK"
            ]
        );
    }
}
