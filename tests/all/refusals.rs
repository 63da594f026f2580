//! Every refusal happens before anything is spawned, with its code, message, mode and
//! process exit status.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{normalized, Sandbox};

fn assert_nothing_spawned(sb: &Sandbox) {
    assert!(sb.pids().is_empty(), "no child may start: {:?}", sb.pids());
    assert!(
        !sb.state.join("runs").exists(),
        "no run folder may be created"
    );
}

#[test]
fn empty_agent_or_task_is_invalid_input_without_run_id() {
    let sb = Sandbox::new();
    let out = sb.run("  ", &[]);
    assert_eq!(out.status, 2);
    assert_eq!(
        out.json(),
        json!({"content": [{"type": "text", "text": "Invalid input: task is required and must not be empty."}],
               "details": {"mode": "single", "results": [],
                           "error": {"code": "INVALID_INPUT", "message": "Invalid input: task is required and must not be empty."}}})
    );
    let out = sb.run_args(&["run"]);
    assert_eq!(out.status, 2);
    assert_eq!(out.error_code(), "INVALID_INPUT");
    assert_nothing_spawned(&sb);
}

#[test]
fn a_bad_flag_value_is_invalid_input_naming_the_flag() {
    let sb = Sandbox::new();
    for (flag, value) in [
        ("--timeout", "soon"),
        ("--idle-timeout", "0"),
        ("--max-output-bytes", "-5"),
        ("--max-lines", "many"),
    ] {
        let out = sb.run("x", &[flag, value]);
        assert_eq!(out.status, 2, "{flag} {value}");
        let msg = out.json()["details"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(msg.contains(flag), "{flag}: {msg}");
        assert_eq!(out.error_code(), "INVALID_INPUT");
    }
    let out = sb.run("x", &["--backend", "nope"]);
    assert_eq!(out.status, 2);
    assert!(out.json()["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unknown backend \"nope\""));
    let out = sb.run("x", &["--cwd", "/nonexistent/dir"]);
    assert_eq!(out.status, 2);
    assert_eq!(out.error_code(), "INVALID_INPUT");
    assert_nothing_spawned(&sb);
}

#[test]
fn unknown_agent_lists_the_available_ones_sorted() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.agents.join("zeta.md"),
        "---\nname: zeta\ndescription: z\n---\nZ\n",
    )
    .unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&["run", "nosuch", "x", "--agents-dir", &agents]);
    assert_eq!(out.status, 2);
    let msg = "Unknown agent: nosuch. Available agents: explorer, fake, implementer, researcher, reviewer, tester, zeta";
    assert_eq!(
        normalized(out.json()),
        json!({"content": [{"type": "text", "text": msg}],
               "details": {"mode": "single", "runId": "RUNID", "results": [],
                           "error": {"code": "UNKNOWN_AGENT", "message": msg}}})
    );
    assert_nothing_spawned(&sb);
}

#[test]
fn disabled_switch_refuses_in_management_mode() {
    let sb = Sandbox::new().set("ORCHESTRATE_DISABLED", "1");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 3);
    let json = out.json();
    assert_eq!(json["details"]["mode"], json!("management"));
    assert_eq!(
        json["details"]["error"]["code"],
        json!("SUBAGENTS_DISABLED")
    );
    assert!(json["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Subagents are disabled."));
    assert_nothing_spawned(&sb);
}

#[test]
fn an_agent_disabled_by_its_file_is_refused_naming_the_file() {
    let sb = Sandbox::new();
    let file = sb.agents.join("off.md");
    std::fs::write(
        &file,
        "---\nname: off\ndescription: d\nenabled: false\n---\nP\n",
    )
    .unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&["run", "off", "x", "--agents-dir", &agents]);
    assert_eq!(out.status, 3);
    let json = out.json();
    assert_eq!(json["details"]["mode"], json!("single"));
    assert_eq!(json["details"]["error"]["code"], json!("SUBAGENT_DISABLED"));
    let msg = json["details"]["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("off") && msg.contains(file.to_str().unwrap()),
        "{msg}"
    );
    assert_nothing_spawned(&sb);
}

#[test]
fn depth_guard_refuses_before_spawning() {
    let sb = Sandbox::new().set("ORCHESTRATE_DEPTH", "1");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 3);
    let json = out.json();
    assert_eq!(json["details"]["mode"], json!("management"));
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_DEPTH_EXCEEDED", "message": "Maximum subagent depth (1) exceeded. Subagents cannot call other subagents."})
    );
    assert_nothing_spawned(&sb);
}

#[test]
fn depth_guard_through_a_real_nested_call() {
    // The fake child itself runs `orchestrate run fake …`; the inner run must refuse.
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let bin = support::orchestrate_bin();
    let sb = sb
        .scenario("nested")
        .set("FAKE_AGENT_NESTED_CMD", bin.to_str().unwrap())
        .set(
            "FAKE_AGENT_NESTED_ARGS",
            &["run", "fake", "inner task", "--agents-dir", &agents].join("\u{1f}"),
        )
        .set("FAKE_AGENT_NESTED_SCENARIO", "replay");
    let out = sb.run("outer task", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let text = out.json()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.starts_with("nested exit=3 stdout="), "{text}");
    let inner: serde_json::Value =
        serde_json::from_str(text.trim_start_matches("nested exit=3 stdout=")).unwrap();
    assert_eq!(
        inner["details"]["error"]["code"],
        json!("SUBAGENT_DEPTH_EXCEEDED")
    );
    // Only the outer run exists: the inner orchestrate created no run and no child.
    let runs = |sb: &Sandbox| std::fs::read_dir(sb.state.join("runs")).unwrap().count();
    assert_eq!(runs(&sb), 1);

    // With a higher max depth the inner run goes through.
    let sb = sb.set("ORCHESTRATE_MAX_DEPTH", "2");
    std::fs::remove_file(&sb.pidfile).unwrap();
    let out = sb.run("outer task", &[]);
    let text = out.json()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.starts_with("nested exit=0 stdout="), "{text}");
    assert_eq!(
        runs(&sb),
        3,
        "the earlier run, and now an outer and an inner one"
    );
}

/// `--timeout 5` was five milliseconds (coreutils' `timeout 5` is five seconds): a duration
/// without a unit is refused on every surface that takes one as text, with a hint, before
/// anything is spawned. Zero needs no unit.
#[test]
fn a_duration_without_a_unit_is_refused_with_a_hint_on_every_surface() {
    let message = |out: &support::RunOutput| {
        assert_eq!(out.status, 2, "{out:?}");
        assert_eq!(out.error_code(), "INVALID_INPUT");
        out.json()["details"]["error"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let sb = Sandbox::new();
    // Flags.
    for (flag, value, hint) in [
        ("--timeout", "5", "did you mean 5s?"),
        ("--idle-timeout", "90", "did you mean 90s?"),
        ("--kill-grace", "1.5", "did you mean 1.5s?"),
        ("--exit-grace", "2", "did you mean 2s?"),
        ("--tool-timeout", "600", "did you mean 600s?"),
        ("--connect-timeout", "60", "did you mean 60s?"),
        ("--queue-timeout", "10", "did you mean 10s?"),
    ] {
        let msg = message(&sb.run("x", &[flag, value]));
        assert!(
            msg.contains(flag) && msg.contains(hint),
            "{flag} {value}: {msg}"
        );
    }
    let msg = message(&sb.run_args(&["wait", "ab12cd34", "--timeout", "5"]));
    assert!(
        msg.contains("--timeout") && msg.contains("did you mean 5s?"),
        "{msg}"
    );
    assert_nothing_spawned(&sb);

    // The environment.
    let sb = Sandbox::new().set("ORCHESTRATE_TIMEOUT", "5");
    let msg = message(&sb.run("x", &[]));
    assert!(
        msg.contains("ORCHESTRATE_TIMEOUT") && msg.contains("did you mean 5s?"),
        "{msg}"
    );
    assert_nothing_spawned(&sb);

    // A config file, as text or as a number.
    for text in ["idle_timeout = \"5\"\n", "idle_timeout = 5\n"] {
        let sb = Sandbox::new();
        let file = sb.work.join(".orchestrate/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
        let msg = message(&sb.run("x", &[]));
        assert!(
            msg.contains(file.to_str().unwrap())
                && msg.contains("idle_timeout")
                && msg.contains("did you mean 5s?"),
            "{text}: {msg}"
        );
        assert_nothing_spawned(&sb);
    }

    // An agent's front matter; a key that names milliseconds takes them.
    let sb = Sandbox::new();
    let file = sb.agents.join("slow.md");
    std::fs::write(&file, "---\nname: slow\ntimeout: 5\n---\nP\n").unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let msg = message(&sb.run_args(&["run", "slow", "x", "--agents-dir", &agents]));
    assert!(
        msg.contains(&format!("{}:3: invalid `timeout`", file.display()))
            && msg.contains("did you mean 5s?"),
        "{msg}"
    );
    assert_nothing_spawned(&sb);
}

/// Zero is zero in any unit: `--kill-grace 0` (no grace) needs none.
#[test]
fn a_zero_grace_needs_no_unit() {
    let sb = Sandbox::new().scenario("replay");
    let out = sb.run("x", &["--kill-grace", "0", "--exit-grace", "0"]);
    assert_eq!(out.status, 0, "{out:?}");
}
