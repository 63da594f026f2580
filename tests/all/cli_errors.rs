//! What a bad command line prints: in a JSON mode stdout is one `INVALID_INPUT` result
//! (usage text stays on stderr), exit 2; in text mode nothing but the usage error. And a
//! run with no agent CLI installed at all is a recorded run with exit code 127.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{RunOutput, Sandbox};

fn run(sb: &Sandbox, args: &[&str]) -> RunOutput {
    sb.run_args(args)
}

fn assert_invalid_input(out: &RunOutput, says: &str) {
    assert_eq!(out.status, 2, "{out:?}");
    let v = out.json();
    assert_eq!(
        (
            v["details"]["error"]["code"].clone(),
            v["details"]["mode"].clone()
        ),
        (json!("INVALID_INPUT"), json!("single"))
    );
    let message = v["details"]["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Invalid input: ") && message.contains(says),
        "{message:?} should say {says:?}"
    );
    assert_eq!(v["content"][0]["text"], json!(message));
    assert!(
        out.stderr.contains("Usage:") || out.stderr.contains("error:"),
        "usage text on stderr: {}",
        out.stderr
    );
}

#[test]
fn argument_errors_in_json_modes_are_invalid_input_results_on_stdout() {
    let sb = Sandbox::new();
    let cases: [(&[&str], &str); 6] = [
        (&["run", "--bogus", "x", "y"], "'--bogus'"),
        (&["run", "x", "y", "-o", "yaml"], "'yaml'"),
        (&["run", "x", "y", "--timeout"], "--timeout"),
        (&["run", "x", "y", "--timeout", "abc"], "--timeout"),
        (
            &["run", "x", "y", "-o", "stream-json", "--max-lines", "0"],
            "--max-lines",
        ),
        (&["wait", "ab12cd34", "--timeout", "abc"], "--timeout"),
    ];
    for (args, says) in cases {
        assert_invalid_input(&run(&sb, args), says);
    }
    assert_invalid_input(&run(&sb, &["stop", "ab12cd34", "--bogus"]), "'--bogus'");
    assert_invalid_input(&run(&sb, &["runs", "--json", "--limit", "x"]), "--limit");
}

#[test]
fn argument_errors_in_text_modes_print_no_json() {
    let sb = Sandbox::new();
    for args in [
        &["run", "x", "y", "-o", "text", "--bogus"][..],
        &["runs", "--limit", "x"][..],
        &["agents", "--bogus"][..],
    ] {
        let out = run(&sb, args);
        assert_eq!((out.status, out.stdout.as_str()), (2, ""), "{args:?}");
        assert!(out.stderr.contains("error:"), "{}", out.stderr);
    }
}

#[test]
fn help_and_version_still_print_and_succeed() {
    let sb = Sandbox::new();
    let out = run(&sb, &["--version"]);
    assert_eq!(out.status, 0);
    assert!(out.stdout.starts_with("orchestrate "), "{}", out.stdout);
    let out = run(&sb, &["run", "--help"]);
    assert_eq!(out.status, 0);
    assert!(
        out.stdout.contains("Usage: orchestrate run"),
        "{}",
        out.stdout
    );
}

#[test]
fn no_cli_installed_is_a_recorded_run_with_exit_code_127_and_an_install_hint() {
    let sb = Sandbox::new();
    let empty_path = sb.root.path().join("empty-bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "fake",
        "t",
        "--agents-dir",
        &agents,
        "--backend",
        "auto",
    ]);
    cmd.env_remove("ORCHESTRATE_PI_BIN")
        .env("PATH", &empty_path);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let single = &v["details"]["results"][0];
    assert_eq!(
        (
            single["exitCode"].clone(),
            v["details"]["error"]["code"].clone()
        ),
        (json!(127), json!("SUBAGENT_FAILED"))
    );
    let message = single["error"].as_str().unwrap();
    assert!(
        message.contains(
            "no agent CLI found on PATH; tried claude, pi, codex, gemini, opencode, cursor-agent"
        ) && message.contains("npm install -g @anthropic-ai/claude-code")
            && !message.contains("e.g. install it with"),
        "{message}"
    );
    // The run is on record: `show` knows its id.
    let run_id = v["details"]["runId"].as_str().unwrap();
    let show = sb.command(&["show", run_id, "--json"]).output().unwrap();
    assert_eq!(
        show.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&show.stderr)
    );
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(
        shown["result"]["details"]["results"][0]["exitCode"],
        json!(127)
    );
}

#[test]
fn an_agents_dir_that_does_not_exist_is_invalid_input_naming_it() {
    let sb = Sandbox::new();
    let missing = sb.root.path().join("no-such-agents");
    let missing = missing.to_str().unwrap();
    for args in [
        &["run", "fake", "x", "--agents-dir", missing][..],
        &["agents", "--json", "--agents-dir", missing][..],
    ] {
        assert_invalid_input(&run(&sb, args), missing);
    }
    let out = run(&sb, &["agents", "--agents-dir", missing]);
    assert_eq!((out.status, out.stdout.as_str()), (2, ""));
    assert!(out.stderr.contains(missing), "{}", out.stderr);
}

#[test]
fn runs_and_show_on_a_bad_state_dir_print_an_invalid_input_result_in_json_mode() {
    let sb = Sandbox::new();
    // A file where the state directory should be.
    let file = sb.root.path().join("state-file");
    std::fs::write(&file, "not a folder").unwrap();
    let path = file.to_str().unwrap();
    for args in [&["runs", "--json"][..], &["show", "abcdef01", "--json"][..]] {
        let mut cmd = sb.command(args);
        cmd.env("ORCHESTRATE_STATE_DIR", &file);
        let out = sb.run_command(cmd);
        assert_eq!(out.status, 2, "{args:?}: {out:?}");
        let v = out.json();
        assert_eq!(v["details"]["error"]["code"], json!("INVALID_INPUT"), "{v}");
        let message = v["details"]["error"]["message"].as_str().unwrap();
        assert!(message.contains(path), "{args:?}: {message}");
    }
    // Without --json: the same words on stderr, nothing on stdout.
    let mut cmd = sb.command(&["runs"]);
    cmd.env("ORCHESTRATE_STATE_DIR", &file);
    let out = sb.run_command(cmd);
    assert_eq!((out.status, out.stdout.as_str()), (2, ""));
    assert!(out.stderr.contains(path), "{}", out.stderr);
}

#[test]
fn show_json_of_an_unknown_run_is_an_invalid_input_result() {
    let sb = Sandbox::new();
    let out = run(&sb, &["show", "deadbeef", "--json"]);
    assert_eq!(out.status, 2, "{out:?}");
    let v = out.json();
    assert_eq!(v["details"]["error"]["code"], json!("INVALID_INPUT"));
    assert!(
        v["details"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Unknown run id: deadbeef"),
        "{v}"
    );
}

#[test]
fn a_decimal_duration_is_accepted() {
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = run(
        &sb,
        &[
            "run",
            "fake",
            "x",
            "--agents-dir",
            &agents,
            "--timeout",
            "1.5m",
        ],
    );
    assert_eq!(out.status, 0, "{out:?}");
}

#[test]
fn an_unknown_agent_keeps_its_message_and_then_suggests_the_nearest_name() {
    let sb = Sandbox::new();
    for name in ["explorer", "reviewer"] {
        std::fs::write(
            sb.agents.join(format!("{name}.md")),
            format!("---\nname: {name}\ndescription: d\nbackend: pi\n---\nx\n"),
        )
        .unwrap();
    }
    let agents = sb.agents.to_str().unwrap().to_string();
    let message = |agent: &str| {
        let out = run(&sb, &["run", agent, "t", "--agents-dir", &agents]);
        assert_eq!(out.status, 2, "{out:?}");
        out.json()["details"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        message("explroer"),
        "Unknown agent: explroer. Available agents: explorer, fake, implementer, researcher, reviewer, tester. Did you mean explorer?"
    );
    assert_eq!(
        message("Reviewer"),
        "Unknown agent: Reviewer. Available agents: explorer, fake, implementer, researcher, reviewer, tester. Did you mean reviewer?"
    );
    // Nothing close: the message as it always was.
    assert_eq!(
        message("zzz"),
        "Unknown agent: zzz. Available agents: explorer, fake, implementer, researcher, reviewer, tester"
    );
    // In text mode too, after the same message.
    let out = run(
        &sb,
        &[
            "run",
            "explroer",
            "t",
            "--agents-dir",
            &agents,
            "-o",
            "text",
        ],
    );
    assert_eq!(
        out.stdout,
        "Unknown agent: explroer. Available agents: explorer, fake, implementer, researcher, reviewer, tester. Did you mean explorer?\n"
    );
}

fn help(sb: &Sandbox, args: &[&str]) -> String {
    let out = run(sb, args);
    assert_eq!(out.status, 0, "{out:?}");
    out.stdout
}

#[test]
fn run_help_groups_its_options_by_concern() {
    let sb = Sandbox::new();
    let text = help(&sb, &["run", "--help"]);
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
        .collect();
    assert_eq!(
        headings,
        [
            "Arguments:",
            "Options:",
            "Several tasks:",
            "Child CLI:",
            "Time limits:",
            "Output:",
            "Budgets:",
            "Sandbox and isolation:",
            "Background and resume:",
        ],
        "{text}"
    );
    // The hidden supervisor flag stays hidden; the idle timeout says what resets it.
    assert!(!text.contains("--run-id"), "{text}");
    let idle = text
        .split("--idle-timeout")
        .nth(1)
        .and_then(|rest| rest.split("\n      --").next())
        .unwrap();
    assert!(
        idle.contains("progress") && !idle.contains("without any output"),
        "{idle}"
    );
}

#[test]
fn wait_and_stop_help_describe_the_run_id_and_the_output_format() {
    let sb = Sandbox::new();
    for sub in ["wait", "stop", "show"] {
        let text = help(&sb, &[sub, "--help"]);
        let arg = text
            .lines()
            .find(|l| l.trim_start().starts_with("<RUN_ID>"))
            .unwrap_or_else(|| panic!("{sub}: {text}"));
        assert!(arg.contains("prefix"), "{sub}: {arg}");
        if sub != "show" {
            let o = text
                .lines()
                .find(|l| l.trim_start().starts_with("-o, --output"))
                .unwrap_or_else(|| panic!("{sub}: {text}"));
            assert!(o.len() > "  -o, --output <OUTPUT>".len() + 10, "{sub}: {o}");
        }
    }
}
