//! `orchestrate runs` and `orchestrate show` through the real binary: a history seeded by
//! hand (with a corrupt and a half-written index line), and one made by real runs,
//! concurrent ones included.

use crate::support;

use std::path::Path;
use std::process::Output;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn entry(run_id: &str, agent: &str, started: u64, error: Option<&str>, exit: i32) -> Value {
    json!({
        "runId": run_id, "agent": agent, "backend": "pi", "model": null,
        "startedAtMs": started, "durationMs": 1500, "exitCode": exit, "error": error,
        "usage": {"input": 100, "output": 10, "cacheRead": 50, "cacheWrite": 5, "cost": 0.25, "turns": 1},
        "cwd": "/w", "sessionFile": format!("/state/runs/{run_id}/session.jsonl"),
        "task": format!("task of {agent} {run_id}"),
    })
}

/// Three runs, a corrupt line 3 and an unfinished last line 5:
/// - 11111111 explorer ok, 2025-06-01T12:00:00Z
/// - 22222222 reviewer timeout, 12:01
/// - 33333333 explorer truncated, 12:02
fn seed(sb: &Sandbox) {
    let lines = [
        entry("11111111", "explorer", 1_748_779_200_000, None, 0).to_string(),
        entry(
            "22222222",
            "reviewer",
            1_748_779_260_000,
            Some("SUBAGENT_TIMEOUT"),
            124,
        )
        .to_string(),
        "{\"runId\": \"4444".to_string(),
        entry(
            "33333333",
            "explorer",
            1_748_779_320_000,
            Some("SUBAGENT_OUTPUT_TRUNCATED"),
            0,
        )
        .to_string(),
        "{\"runId\":\"55555555\",\"agent\":\"exp".to_string(),
    ];
    // The last line has no newline: a run appending right now.
    write(&sb.state.join("runs.jsonl"), &lines.join("\n"));
    let run = sb.state.join("runs/11111111");
    write(
        &run.join("result.json"),
        &serde_json::to_string_pretty(&json!({
            "content": [{"type": "text", "text": "Auth is in src/auth.rs."}],
            "details": {"mode": "single", "runId": "11111111", "results": []}
        }))
        .unwrap(),
    );
    let stderr: String = (1..=25).map(|i| format!("stderr line {i}\n")).collect();
    write(&run.join("stderr.log"), &stderr);
    write(&run.join("session.jsonl"), "{}\n");
}

fn run(sb: &Sandbox, args: &[&str]) -> Output {
    sb.command(args)
        .env("ORCHESTRATE_LOG", "warn")
        .output()
        .expect("run orchestrate")
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON line: {text}");
    serde_json::from_str(&text).unwrap()
}

fn with_status(mut v: Value, status: &str, started_at: &str) -> Value {
    v["status"] = json!(status);
    v["startedAt"] = json!(started_at);
    v
}

fn totals(runs: u64, failures: u64, timeouts: u64) -> Value {
    json!({
        "runs": runs, "failures": failures, "timeouts": timeouts,
        "usage": {"input": 100 * runs, "output": 10 * runs, "cacheRead": 50 * runs,
                  "cacheWrite": 5 * runs, "cost": 0.25 * runs as f64, "turns": runs},
        "durationMs": 1500 * runs,
    })
}

#[test]
fn runs_json_lists_newest_first_with_totals_and_skips_bad_lines() {
    let sb = Sandbox::new();
    seed(&sb);
    let out = run(&sb, &["runs", "--json"]);
    assert_eq!(
        stdout_json(&out),
        json!({
            "unfinished": [],
            "worktrees": [],
            "runs": [
                with_status(
                    entry("33333333", "explorer", 1_748_779_320_000, Some("SUBAGENT_OUTPUT_TRUNCATED"), 0),
                    "truncated", "2025-06-01T12:02:00Z"),
                with_status(
                    entry("22222222", "reviewer", 1_748_779_260_000, Some("SUBAGENT_TIMEOUT"), 124),
                    "timeout", "2025-06-01T12:01:00Z"),
                with_status(
                    entry("11111111", "explorer", 1_748_779_200_000, None, 0),
                    "ok", "2025-06-01T12:00:00Z"),
            ],
            "totals": {"explorer": totals(2, 0, 0), "reviewer": totals(1, 1, 1)},
            "skippedLines": 2,
        })
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let index = sb.state.join("runs.jsonl");
    assert!(
        stderr.contains(&format!("{}:3: skipped: not a run record", index.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{}:5: skipped: incomplete last line",
            index.display()
        )),
        "{stderr}"
    );
}

#[test]
fn runs_filters_by_agent_and_limits_the_list_but_not_the_totals() {
    let sb = Sandbox::new();
    seed(&sb);
    let v = stdout_json(&run(
        &sb,
        &["runs", "--json", "--agent", "explorer", "--limit", "1"],
    ));
    assert_eq!(
        v,
        json!({
            "unfinished": [],
            "worktrees": [],
            "runs": [with_status(
                entry("33333333", "explorer", 1_748_779_320_000, Some("SUBAGENT_OUTPUT_TRUNCATED"), 0),
                "truncated", "2025-06-01T12:02:00Z")],
            "totals": {"explorer": totals(2, 0, 0)},
            "skippedLines": 2,
        })
    );
}

#[test]
fn runs_text_is_two_aligned_tables() {
    let sb = Sandbox::new();
    seed(&sb);
    let out = run(&sb, &["runs", "--limit", "2"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "\
RUN       STARTED               AGENT     BACKEND  STATUS     DURATION   IN  OUT     COST  TASK
33333333  2025-06-01T12:02:00Z  explorer  pi       truncated      1.5s  100   10  $0.2500  task of explorer 33333333
22222222  2025-06-01T12:01:00Z  reviewer  pi       timeout        1.5s  100   10  $0.2500  task of reviewer 22222222
(2 of 3 runs shown, newest first; --limit N shows more)

Totals per agent:
AGENT     RUNS  FAILED  TIMEOUTS   IN  OUT  CACHE READ  CACHE WRITE     COST
explorer     2       0         0  200   20         100           10  $0.5000
reviewer     1       1         1  100   10          50            5  $0.2500
"
    );
}

#[test]
fn runs_on_an_empty_state_dir_says_so() {
    let sb = Sandbox::new();
    assert_eq!(
        stdout_json(&run(&sb, &["runs", "--json"])),
        json!({"unfinished": [], "worktrees": [], "runs": [], "totals": {}, "skippedLines": 0})
    );
    let out = run(&sb, &["runs"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "No runs recorded yet in {}.\n",
            sb.state.join("runs.jsonl").display()
        )
    );
}

#[test]
fn show_json_has_the_result_the_session_file_and_the_stderr_tail() {
    let sb = Sandbox::new();
    seed(&sb);
    let run_dir = sb.state.join("runs/11111111");
    let tail: String = (6..=25).map(|i| format!("stderr line {i}\n")).collect();
    assert_eq!(
        stdout_json(&run(&sb, &["show", "11111111", "--json"])),
        json!({
            "runId": "11111111",
            "runDir": run_dir.to_str().unwrap(),
            "sessionFile": run_dir.join("session.jsonl").to_str().unwrap(),
            "status": "ok",
            "result": {
                "content": [{"type": "text", "text": "Auth is in src/auth.rs."}],
                "details": {"mode": "single", "runId": "11111111", "results": []}
            },
            "stderrTail": tail,
        })
    );
}

#[test]
fn show_text_prints_the_answer_then_the_session_file_then_stderr() {
    let sb = Sandbox::new();
    seed(&sb);
    let run_dir = sb.state.join("runs/11111111");
    let out = run(&sb, &["show", "11111111"]);
    assert!(out.status.success());
    let tail: String = (6..=25).map(|i| format!("  stderr line {i}\n")).collect();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "Run 11111111: explorer on pi, ok, 1.5s, 100 in / 10 out, $0.2500, started 2025-06-01T12:00:00Z\n\
             \n\
             Auth is in src/auth.rs.\n\
             \n\
             Session file: {}\n\
             Stderr (last 20 lines of {}):\n{tail}",
            run_dir.join("session.jsonl").display(),
            run_dir.join("stderr.log").display()
        )
    );
}

#[test]
fn show_refuses_unknown_and_malformed_ids_with_status_2() {
    let sb = Sandbox::new();
    seed(&sb);
    let out = run(&sb, &["show", "deadbeef"]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(2), String::new())
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Unknown run id: deadbeef. Most recent runs: 33333333, 22222222, 11111111"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for bad in ["../../etc", "123456789", "zzzzzzzz", ""] {
        let out = run(&sb, &["show", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid run id"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn real_runs_appear_in_the_history_and_show_returns_their_result() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl")
        .set("FAKE_AGENT_STDERR", "a warning on stderr");
    // `show` gives the whole record, as `--details full` prints it.
    let first = sb.run("find auth", &["--details", "full"]);
    assert_eq!(first.status, 0, "{}", first.stderr);
    let result = first.json();
    let run_id = result["details"]["runId"].as_str().unwrap().to_string();

    let listing = stdout_json(&run(&sb, &["runs", "--json"]));
    assert_eq!(listing["runs"].as_array().unwrap().len(), 1);
    let row = &listing["runs"][0];
    assert_eq!(
        (
            row["runId"].as_str(),
            row["agent"].as_str(),
            row["status"].as_str(),
            &row["usage"]
        ),
        (
            Some(run_id.as_str()),
            Some("fake"),
            Some("ok"),
            &result["details"]["results"][0]["usage"]
        )
    );

    let shown = stdout_json(&run(&sb, &["show", &run_id, "--json"]));
    assert_eq!(
        (&shown["result"], shown["stderrTail"].as_str()),
        (&result, Some("a warning on stderr\n"))
    );
}

#[test]
fn concurrent_runs_each_leave_one_whole_index_line() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let agents = sb.agents.to_str().unwrap().to_string();
    let children: Vec<_> = (0..6)
        .map(|i| {
            let task = format!("task {i}");
            sb.command(&["run", "fake", &task, "--agents-dir", &agents])
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    sb.assert_no_survivors();
    let listing = stdout_json(&run(&sb, &["runs", "--json"]));
    assert_eq!(
        (
            listing["runs"].as_array().unwrap().len(),
            &listing["skippedLines"],
            &listing["totals"]["fake"]["runs"]
        ),
        (6, &json!(0), &json!(6))
    );
}

#[test]
fn a_unique_prefix_of_a_run_id_names_the_run_and_an_ambiguous_one_lists_the_candidates() {
    let sb = Sandbox::new();
    seed(&sb);
    for id in ["1a2b3c4d", "1a2b9999"] {
        std::fs::create_dir_all(sb.state.join("runs").join(id)).unwrap();
    }
    // Like git: the shortest unambiguous prefix will do, in any case.
    let whole = stdout_json(&run(&sb, &["show", "11111111", "--json"]));
    for prefix in ["11", "111", "1111111", "11111111"] {
        assert_eq!(
            stdout_json(&run(&sb, &["show", prefix, "--json"])),
            whole,
            "{prefix}"
        );
    }
    let out = run(&sb, &["show", "1A2B3"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("Run 1a2b3c4d"),
        "{out:?}"
    );
    // Ambiguous: an error that lists every candidate, in both output modes.
    let out = run(&sb, &["show", "1a2b"]);
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
        ),
        (Some(2), String::new())
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "orchestrate: Run id prefix 1a2b matches 2 runs: 1a2b3c4d, 1a2b9999. Give more digits.\n"
    );
    let out = run(&sb, &["show", "1a", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["details"]["error"],
        json!({"code": "INVALID_INPUT",
               "message": "Invalid input: Run id prefix 1a matches 2 runs: 1a2b3c4d, 1a2b9999. Give more digits."})
    );
    // A prefix that names nothing is an unknown run, with the recent ones listed.
    let out = run(&sb, &["show", "4444"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Unknown run id: 4444. Most recent runs: 33333333, 22222222, 11111111"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn runs_lists_each_run_with_the_start_of_its_task() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let long = format!("review src/auth.rs\nand {}", "x".repeat(200));
    for task in ["find auth", long.as_str()] {
        let out = sb.run(task, &[]);
        assert_eq!(out.status, 0, "{}", out.stderr);
    }
    let listing = stdout_json(&run(&sb, &["runs", "--json"]));
    let tasks: Vec<&str> = listing["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task"].as_str().unwrap())
        .collect();
    // The index keeps the task's start, never a whole long prompt.
    assert_eq!(tasks[1], "find auth");
    assert_eq!(tasks[0].chars().count(), 201, "{}", tasks[0]);
    assert!(tasks[0].starts_with("review src/auth.rs\nand xxx") && tasks[0].ends_with('…'));
    let text = String::from_utf8(run(&sb, &["runs"]).stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with("  TASK"), "{text}");
    // The table shows the first line, cut to fit.
    assert!(lines[1].ends_with("  review src/auth.rs"), "{text}");
    assert!(lines[2].ends_with("  find auth"), "{text}");
}
