//! `orchestrate config` and `orchestrate completions` through the real binary: the layers
//! of config files and environment, where each value came from, and bad values refused
//! with the file, key and reason.

use crate::support;

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
    write(&project, "timeout = \"10m\"\nmax_lines = 500\n");
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
            "adaptive_concurrency": {"value": true, "source": "default"},
            "tool_timeout": {"value": "10m", "source": "default"},
            "connect_timeout": {"value": "1m", "source": "default"},
            "max_turns": {"value": null, "source": "default"},
            "max_tokens": {"value": null, "source": "default"},
            "max_cost": {"value": 0.5, "source": "env:ORCHESTRATE_MAX_COST"},
            "max_total_cost": {"value": null, "source": "default"},
            "max_total_tokens": {"value": null, "source": "default"},
            "fallback_models": {"value": ["m2", "m3"], "source": user},
            // tests/support turns the sandbox off for the fake agent's sake, and its
            // network on.
            "sandbox": {"value": "off", "source": "env:ORCHESTRATE_SANDBOX"},
            "network": {"value": "on", "source": "env:ORCHESTRATE_NETWORK"},
            "allow_hosts": {"value": [], "source": "default"},
            "permissions": {"value": "policy", "source": "default"},
            "acp_command": {"value": null, "source": "default"},
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
    assert_eq!(lines.len(), 31 + 4, "{text}");
    // Then the files it read, in the order they apply.
    assert_eq!(
        lines[31..],
        [
            "",
            "Config files (each over the one before; ORCHESTRATE_* variables and flags over both):",
            &format!("  user     {}", l.user.display()),
            &format!("  project  {}", l.project.display()),
        ]
    );
    assert_eq!(
        lines[2],
        format!(
            "timeout = \"10m\"                (project:{})",
            l.project.display()
        )
    );
    assert_eq!(lines[1], "model = (not set)              (default)");
    assert_eq!(
        lines[22],
        format!(
            "fallback_models = [\"m2\",\"m3\"]  (user:{})",
            l.user.display()
        )
    );
}

#[test]
fn config_text_says_where_it_looked_when_there_is_no_config_file() {
    let sb = Sandbox::new();
    let cwd = sb.work.join("repo/src");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = command(&sb, &["config"], &cwd).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let tail: Vec<&str> = text.lines().skip_while(|l| !l.is_empty()).collect();
    assert_eq!(
        tail,
        [
            "",
            "Config files (each over the one before; ORCHESTRATE_* variables and flags over both):",
            &format!(
                "  user     {} (not found)",
                sb.home.join(".config/orchestrate/config.toml").display()
            ),
            &format!(
                "  project  .orchestrate/config.toml in {} or a folder above it (none found)",
                cwd.display()
            ),
        ]
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
                "orchestrate: {}: key `timeout`: invalid duration \"soon\": each unit needs a number before it (e.g. 90s, 15m, 1h30m or 500ms)\n",
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
            "orchestrate: environment variable ORCHESTRATE_CONCURRENCY=\"0\": expected a whole number from 1 to 256, got \"0\"\n".to_string()
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
    write(&l.project, "timeout = \"10m\"\ntimout = \"5m\"\n");
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
    for (shell, dynamic, standalone) in [
        ("bash", "complete -o nospace -o bashdefault -o nosort -F _clap_complete_orchestrate orchestrate", "orchestrate,runs)"),
        ("zsh", "compdef _clap_dynamic_completer_orchestrate orchestrate", "#compdef orchestrate"),
        ("fish", "complete --keep-order --exclusive --command orchestrate", "complete -c orchestrate"),
    ] {
        for (args, marker) in [
            (&["completions", shell][..], dynamic),
            (&["completions", shell, "--static"][..], standalone),
        ] {
            let out = command(&sb, args, &sb.work).output().unwrap();
            let script = String::from_utf8(out.stdout).unwrap();
            assert!(out.status.success(), "{args:?}");
            assert!(script.contains(marker), "{args:?}: {script}");
        }
    }
    let out = command(&sb, &["completions", "tcsh"], &sb.work)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Runs recorded in the sandbox's state directory, oldest first.
fn seed_runs(sb: &Sandbox, runs: &[(&str, &str, &str)]) {
    let lines: String = runs
        .iter()
        .enumerate()
        .map(|(i, (id, agent, task))| {
            format!(
                "{}\n",
                json!({"runId": id, "agent": agent, "backend": "pi", "model": null,
                       "startedAtMs": 1_748_779_200_000u64 + i as u64 * 1000,
                       "durationMs": 1, "exitCode": 0, "error": null,
                       "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                 "cost": 0.0, "turns": 1},
                       "cwd": "/w", "sessionFile": "/s", "task": task})
            )
        })
        .collect();
    write(&sb.state.join("runs.jsonl"), &lines);
}

/// What bash offers for `words` (the last one being completed), through the script
/// `orchestrate completions bash` printed, sourced by a real bash.
fn bash_completes(sb: &Sandbox, script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_TYPE=9\n_clap_complete_orchestrate orchestrate '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    // The sandbox's environment (its HOME and state directory), for the orchestrate the
    // script calls back.
    let env = command(sb, &[], &sb.work);
    let out = Command::new("bash")
        .arg("-c")
        .arg(program)
        .env_clear()
        .envs(env.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(&sb.work)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_flag_values_agent_names_and_run_ids_by_asking_orchestrate() {
    let sb = Sandbox::new();
    seed_runs(
        &sb,
        &[
            ("2a000001", "explorer", "find auth"),
            ("2b000002", "reviewer", "review it"),
            ("3c000003", "explorer", "x"),
        ],
    );
    write(
        &sb.work.join(".orchestrate/agents/explainer.md"),
        "---\nname: explainer\ndescription: Explains code.\n---\nExplain.\n",
    );
    let script = sb.root.path().join("orchestrate.bash");
    let out = command(&sb, &["completions", "bash"], &sb.work)
        .output()
        .unwrap();
    std::fs::write(&script, out.stdout).unwrap();
    let cases: [(&[&str], &[&str]); 10] = [
        (
            &["orchestrate", "run", "--sandbox", ""],
            &["read-only", "workspace-write", "off"],
        ),
        (
            &["orchestrate", "run", "--network", ""],
            &["on", "off", "provider"],
        ),
        (
            &["orchestrate", "run", "--isolation", ""],
            &["worktree", "none"],
        ),
        (
            &["orchestrate", "run", "--backend", "c"],
            &[
                "claude",
                "codex",
                "cursor",
                "command",
                "claude-acp",
                "codex-acp",
            ],
        ),
        (
            &["orchestrate", "run", "x", "y", "-o", ""],
            &["json", "text", "stream-json"],
        ),
        // The hidden flag is not offered; a duration completes as nothing.
        (&["orchestrate", "run", "--run"], &["--runner"]),
        (&["orchestrate", "run", "--timeout", ""], &[]),
        // Agent names: the project's own and the built-in ones.
        (&["orchestrate", "run", "expl"], &["explainer", "explorer"]),
        // Run ids, newest first.
        (&["orchestrate", "show", "2"], &["2b000002", "2a000001"]),
        (&["orchestrate", "wait", "3"], &["3c000003"]),
    ];
    for (words, want) in cases {
        assert_eq!(bash_completes(&sb, &script, words), want, "{words:?}");
    }
    assert_eq!(
        bash_completes(&sb, &script, &["orchestrate", "run", "--resume", "2a"]),
        ["2a000001"]
    );
}

#[test]
fn a_complete_variable_meant_for_something_else_does_not_stop_a_run() {
    let sb = Sandbox::new();
    let out = command(&sb, &["runs", "--json"], &sb.work)
        .env("COMPLETE", "1")
        .output()
        .unwrap();
    assert_eq!(stdout_json(&out)["runs"], json!([]));
}

#[test]
fn zsh_and_fish_get_agents_and_runs_with_their_descriptions() {
    let sb = Sandbox::new();
    seed_runs(
        &sb,
        &[("4d000004", "reviewer", "review src/auth.rs\nsecond line")],
    );
    let complete = |shell: &str, words: &[&str]| {
        let mut cmd = command(&sb, &["--"], &sb.work);
        cmd.args(words)
            .env("ORCHESTRATE_COMPLETE", shell)
            .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
            .env("_CLAP_IFS", "\n");
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        complete("zsh", &["orchestrate", "show", "4"]),
        "4d000004:reviewer ok review src/auth.rs"
    );
    assert_eq!(
        complete("fish", &["orchestrate", "show", "4"]),
        "4d000004\treviewer ok review src/auth.rs\n"
    );
    assert!(
        complete("zsh", &["orchestrate", "runs", "--agent", "rev"]).starts_with("reviewer:"),
        "agent names complete after runs --agent"
    );
}
