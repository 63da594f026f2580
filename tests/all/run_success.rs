//! A successful run over the fake child replaying real pi transcripts: the whole result
//! (lean by default, full with `--details full` and in result.json), the session folder,
//! the index, and the command line pi receives.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use support::{normalized, Sandbox};

#[test]
fn multi_turn_transcript_gives_the_whole_contract_result() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let answer = "## Answer\nAuth lives in src/auth.rs (fn login at line 42).";
    assert_eq!(
        normalized(out.json()),
        json!({
            "content": [{"type": "text", "text": answer}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                // What a parent acts on; `--details full` and result.json have the rest.
                // The sandbox stays: it was off.
                "results": [{
                    "exitCode": 0,
                    "usage": {"input": 4500, "output": 260, "cacheRead": 2400, "cacheWrite": 60, "cost": 0.0071, "turns": 3},
                    "sessionFile": "SESSION",
                    "sandbox": {"mode": "off", "mechanism": "none"}
                }]
            }
        })
    );
}

#[test]
fn details_full_gives_the_whole_record_as_result_json_keeps_it() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &["--details", "full"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let answer = "## Answer\nAuth lives in src/auth.rs (fn login at line 42).";
    let json = out.json();
    let run_id = json["details"]["runId"].as_str().unwrap().to_string();
    assert_eq!(
        normalized(json.clone()),
        json!({
            "content": [{"type": "text", "text": answer}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "agent": "fake",
                    "task": "find auth",
                    "exitCode": 0,
                    "usage": {"input": 4500, "output": 260, "cacheRead": 2400, "cacheWrite": 60, "cost": 0.0071, "turns": 3},
                    "sessionFile": "SESSION",
                    "output": answer,
                    "displayItems": [
                        {"type": "text", "text": "I'll look for the auth code."},
                        {"type": "toolCall", "name": "read", "args": {"path": "src/auth.rs"}},
                        {"type": "toolCall", "name": "grep", "args": {"pattern": "fn login", "path": "src"}},
                        {"type": "text", "text": answer}
                    ],
                    "backend": "pi",
                    "durationMs": 0,
                    "attempts": 1,
                    "childSessionId": "0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c",
                    "termination": {"kind": "exited", "code": 0},
                    "sandbox": {"mode": "off", "mechanism": "none"},
                    "network": {"mode": "on"}
                }]
            }
        })
    );
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.state.join("runs").join(&run_id).join("result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved, json);
}

/// A single run's lean result does not echo the task its caller gave; a fan-out's names
/// each task, cut.
#[test]
fn a_long_task_is_cut_in_the_lean_result_and_whole_in_result_json() {
    let sb = Sandbox::new().scenario("replay");
    let task = format!("{}tail", "a".repeat(200));
    let agents = sb.agents.to_str().unwrap().to_string();
    let one = format!("fake={task}");
    let out = sb.run_args(&["run", "--task", &one, "--agents-dir", &agents]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.result()["task"], json!(format!("{}…", "a".repeat(200))));
    let run_id = out.result()["runId"].as_str().unwrap().to_string();
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.state.join("runs").join(&run_id).join("result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["details"]["results"][0]["task"], json!(task));
}

#[test]
fn the_run_folder_keeps_the_raw_stream_the_result_and_the_prompt() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("unicode.jsonl")
        .set("FAKE_AGENT_STDERR", "a warning on stderr");
    let out = sb.run("say hi", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let run_id = json["details"]["runId"].as_str().unwrap().to_string();
    let run_dir = sb.state.join("runs").join(&run_id);
    let session = run_dir.join("session.jsonl");
    assert_eq!(
        json["details"]["results"][0]["sessionFile"],
        json!(session.to_str().unwrap())
    );
    // Byte for byte, including the raw U+2028 inside strings.
    assert_eq!(
        std::fs::read(&session).unwrap(),
        std::fs::read(support::fixture("unicode.jsonl")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("stderr.log")).unwrap(),
        "a warning on stderr\n"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("result.json")).unwrap())
            .unwrap();
    // result.json is the full record; stdout, the same less the display items, the
    // output that content[0].text already holds, and what a successful single run's
    // caller does not act on.
    let mut lean = saved.clone();
    let full = lean["details"]["results"][0].as_object_mut().unwrap();
    assert_eq!(
        full.remove("output"),
        Some(json["content"][0]["text"].clone())
    );
    assert!(full.remove("displayItems").is_some_and(|d| d.is_array()));
    // The network, where nothing was refused.
    assert_eq!(
        full.remove("network"),
        Some(serde_json::json!({"mode": "on"}))
    );
    for usual in [
        "agent",
        "task",
        "backend",
        "durationMs",
        "attempts",
        "childSessionId",
        "termination",
    ] {
        assert!(full.remove(usual).is_some(), "{usual}");
    }
    assert_eq!(lean, json);
    assert_eq!(
        std::fs::read_to_string(run_dir.join("system-prompt.md")).unwrap(),
        "You are a test agent."
    );
    let text = saved["details"]["results"][0]["output"].as_str().unwrap();
    assert!(
        text.contains("漢字テスト") && text.contains('\u{2028}') && text.contains("🦀"),
        "{text}"
    );
    for (path, want) in [
        (sb.state.clone(), 0o700),
        (run_dir.clone(), 0o700),
        (session.clone(), 0o600),
        (run_dir.join("stderr.log"), 0o600),
        (run_dir.join("result.json"), 0o600),
        (sb.state.join("runs.jsonl"), 0o600),
    ] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, want, "{}", path.display());
    }
    let index = std::fs::read_to_string(sb.state.join("runs.jsonl")).unwrap();
    let entry: serde_json::Value = serde_json::from_str(index.lines().next().unwrap()).unwrap();
    assert_eq!(entry["runId"], json!(run_id));
    assert_eq!(entry["agent"], json!("fake"));
    assert_eq!(entry["exitCode"], json!(0));
    assert_eq!(entry["error"], json!(null));
    assert_eq!(entry["usage"]["input"], json!(321));
}

#[test]
fn pi_gets_its_headless_command_line_and_the_depth_variables() {
    let sb = Sandbox::new().scenario("replay");
    let out = sb.run("list files", &["--model", "mock-1"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let argv = sb.argv_json();
    let prompt = sb.state.join("runs").join(&run_id).join("system-prompt.md");
    assert_eq!(
        argv["argv"],
        json!([
            "--mode",
            "rpc",
            "--session",
            sb.state
                .join("runs")
                .join(&run_id)
                .join("child/pi-session.jsonl")
                .to_str()
                .unwrap(),
            "--model",
            "mock-1",
            "--tools",
            "read,grep",
            "--append-system-prompt",
            prompt.to_str().unwrap()
        ])
    );
    assert_eq!(argv["depth"], json!("1"));
    assert_eq!(argv["runId"], json!(run_id));
    // pi's RPC mode: its task and any message sent to the run come on stdin.
    assert!(
        argv["stdin"]
            .as_str()
            .is_some_and(|s| s.starts_with("pipe:")),
        "{}",
        argv["stdin"]
    );
    assert_eq!(argv["cwd"], json!(sb.work.to_str().unwrap()));
    assert_eq!(argv["appendSystemPrompt"], json!("You are a test agent."));
    assert_eq!(out.result()["model"], json!("mock-1"));
}

#[test]
fn cwd_flag_sets_the_child_working_directory() {
    let sb = Sandbox::new().scenario("replay");
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out = sb.run("x", &["--cwd", elsewhere.to_str().unwrap()]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(sb.argv_json()["cwd"], json!(elsewhere.to_str().unwrap()));
}

/// pi's RPC mode takes the task as its first command on stdin: a long one is never in argv
/// (where it would meet ARG_MAX and show in `ps`), and reaches pi whole.
#[test]
fn long_tasks_reach_pi_whole_on_stdin_not_in_argv() {
    let sb = Sandbox::new().scenario("replay");
    let task = "word ".repeat(2000);
    let out = sb.run(&task, &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let argv = sb.argv_json();
    assert!(
        !argv["argv"].to_string().contains("word word"),
        "{}",
        argv["argv"]
    );
    // The fake records the task it read in its session file.
    let session = sb
        .state
        .join("runs")
        .join(&run_id)
        .join("child/pi-session.jsonl");
    let line: Value =
        serde_json::from_str(std::fs::read_to_string(session).unwrap().trim()).unwrap();
    assert_eq!(line["task"], json!(format!("Task: {task}")));
}

#[test]
fn text_output_prints_the_answer_and_a_summary_line() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &["-o", "text"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        out.stdout,
        "## Answer\nAuth lives in src/auth.rs (fn login at line 42).\n"
    );
    let summary = out.stderr.lines().last().unwrap();
    assert!(summary.starts_with("[orchestrate] fake ok "), "{summary}");
    assert!(
        summary.contains("turns=3") && summary.contains("in=4500") && summary.contains("out=260"),
        "{summary}"
    );
}

#[test]
fn a_child_that_never_exits_after_its_final_event_still_succeeds_promptly() {
    let sb = Sandbox::new()
        .scenario("end-no-exit")
        .transcript("short.jsonl");
    let out = sb.run("x", &["--exit-grace", "300ms", "--kill-grace", "500ms"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["exitCode"], json!(0));
    assert_eq!(out.json()["content"][0]["text"], json!("Hello from pi."));
    assert!(out.json()["details"].get("error").is_none());
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn garbage_between_events_is_counted_and_skipped() {
    let sb = Sandbox::new().scenario("garbage");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(out.json()["content"][0]["text"], json!("survived garbage"));
    // The 20 MiB line, the non-UTF-8 line (not JSON once decoded either), `hello world`,
    // `[1,2]`.
    assert_eq!(r["skippedLines"], json!(4));
    assert_eq!(r["usage"]["input"], json!(300));
    assert_eq!(r["usage"]["turns"], json!(2));
}
