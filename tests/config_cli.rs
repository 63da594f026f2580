//! `orchestrate config` and `orchestrate completions` through the real binary: the layers
//! of config files and environment, where each value came from, and bad values refused
//! with the file, key and reason.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The sandbox's command without any config variable the developer's shell may have set.
fn command(sb: &Sandbox, args: &[&str], cwd: &Path) -> Command {
    let mut cmd = sb.command(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ORCHESTRATE_")
            && k != "ORCHESTRATE_STATE_DIR"
            && k != "ORCHESTRATE_PI_BIN"
        {
            cmd.env_remove(k);
        }
    }
    cmd.env("ORCHESTRATE_LOG", "warn").current_dir(cwd);
    cmd
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

struct Layers {
    sb: Sandbox,
    user: std::path::PathBuf,
    project: std::path::PathBuf,
    cwd: std::path::PathBuf,
}

fn layers() -> Layers {
    let sb = Sandbox::new();
    let user = sb.home.join(".config/orchestrate/config.toml");
    let project = sb.work.join("repo/.orchestrate/config.toml");
    let cwd = sb.work.join("repo/src");
    std::fs::create_dir_all(&cwd).unwrap();
    write(
        &user,
        "backend = \"claude\"\ntimeout = \"20m\"\nretries = 3\nmax_depth = 2\nfallback_models = [\"m2\", \"m3\"]\n",
    );
    write(&project, "timeout = 600000\nmax_lines = 500\n");
    Layers {
        sb,
        user,
        project,
        cwd,
    }
}

#[test]
fn config_json_shows_each_value_and_the_layer_it_came_from() {
    let l = layers();
    let out = command(&l.sb, &["config", "--json"], &l.cwd)
        .env("ORCHESTRATE_MAX_DEPTH", "0")
        .env("ORCHESTRATE_MODEL", "haiku")
        .env("ORCHESTRATE_MAX_COST", "0.50")
        .output()
        .unwrap();
    let user = format!("user:{}", l.user.display());
    let project = format!("project:{}", l.project.display());
    assert_eq!(
        stdout_json(&out),
        json!({
            "backend": {"value": "claude", "source": user},
            "model": {"value": "haiku", "source": "env:ORCHESTRATE_MODEL"},
            "timeout": {"value": "10m", "source": project},
            "idle_timeout": {"value": "3m", "source": "default"},
            "kill_grace": {"value": "5s", "source": "default"},
            "exit_grace": {"value": "2s", "source": "default"},
            "max_output_bytes": {"value": 67108864, "source": "default"},
            "max_bytes": {"value": 51200, "source": "default"},
            "max_lines": {"value": 500, "source": project},
            "max_depth": {"value": 0, "source": "env:ORCHESTRATE_MAX_DEPTH"},
            "disabled": {"value": false, "source": "default"},
            "retries": {"value": 3, "source": user},
            "concurrency": {"value": 4, "source": "default"},
            "max_tasks": {"value": 16, "source": "default"},
            "tool_timeout": {"value": "10m", "source": "default"},
            "connect_timeout": {"value": "1m", "source": "default"},
            "max_turns": {"value": null, "source": "default"},
            "max_tokens": {"value": null, "source": "default"},
            "max_cost": {"value": 0.5, "source": "env:ORCHESTRATE_MAX_COST"},
            "max_total_cost": {"value": null, "source": "default"},
            "fallback_models": {"value": ["m2", "m3"], "source": user},
            // tests/support turns the sandbox off for the fake agent's sake, and its
            // network on.
            "sandbox": {"value": "off", "source": "env:ORCHESTRATE_SANDBOX"},
            "network": {"value": "on", "source": "env:ORCHESTRATE_NETWORK"},
            "allow_hosts": {"value": [], "source": "default"},
            "runner": {"value": "local", "source": "default"},
            "queue_timeout": {"value": "10m", "source": "default"},
            "runners": {"value": {}, "source": "default"},
        })
    );
}

#[test]
fn config_text_is_one_line_per_key_with_its_source() {
    let l = layers();
    let out = command(&l.sb, &["config"], &l.cwd).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 27, "{text}");
    assert_eq!(
        lines[2],
        format!(
            "timeout = \"10m\"                (project:{})",
            l.project.display()
        )
    );
    assert_eq!(lines[1], "model = (not set)              (default)");
    assert_eq!(
        lines[20],
        format!(
            "fallback_models = [\"m2\",\"m3\"]  (user:{})",
            l.user.display()
        )
    );
}

#[test]
fn a_bad_value_exits_2_naming_the_file_the_key_and_the_reason() {
    let l = layers();
    write(&l.project, "timeout = \"soon\"\n");
    let out = command(&l.sb, &["config"], &l.cwd).output().unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(2),
            String::new(),
            format!(
                "orchestrate: {}: key `timeout`: invalid duration \"soon\": each unit needs a number before it (expected e.g. 90s, 15m, 1h30m, 500ms or plain milliseconds)\n",
                l.project.display()
            )
        )
    );

    let out = command(&l.sb, &["config", "--json"], &l.cwd)
        .env("ORCHESTRATE_CONCURRENCY", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The file's error comes first: files are read before the environment.
    assert!(String::from_utf8_lossy(&out.stderr).contains("key `timeout`"));

    write(&l.project, "max_lines = 5\n");
    let out = command(&l.sb, &["config", "--json"], &l.cwd)
        .env("ORCHESTRATE_CONCURRENCY", "0")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned()),
        (
            Some(2),
            "orchestrate: environment variable ORCHESTRATE_CONCURRENCY=\"0\": must be an integer from 1 to 64 (found 0)\n".to_string()
        )
    );
}

#[test]
fn a_toml_syntax_error_names_the_line() {
    let l = layers();
    write(&l.user, "retries = 3\nbackend = pi\n");
    let out = command(&l.sb, &["config"], &l.cwd).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "orchestrate: {}:2:11: invalid TOML: ",
            l.user.display()
        )),
        "{stderr}"
    );
}

#[test]
fn an_unknown_key_is_a_warning_not_an_error() {
    let l = layers();
    write(&l.project, "timeout = 600000\ntimout = \"5m\"\n");
    let out = command(&l.sb, &["config", "--json"], &l.cwd)
        .output()
        .unwrap();
    let v = stdout_json(&out);
    assert_eq!(v["timeout"]["value"], json!("10m"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: unknown key `timout` ignored",
            l.project.display()
        )),
        "{stderr}"
    );
}

#[test]
fn completions_print_a_script_for_each_shell() {
    let sb = Sandbox::new();
    for (shell, marker) in [
        ("bash", "orchestrate,runs)"),
        ("zsh", "#compdef orchestrate"),
        ("fish", "complete -c orchestrate"),
    ] {
        let out = command(&sb, &["completions", shell], &sb.work)
            .output()
            .unwrap();
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{shell}");
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("show"), "{shell}");
    }
    let out = command(&sb, &["completions", "tcsh"], &sb.work)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
