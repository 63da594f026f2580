//! Several tasks in one call: parallel (input order, bounded concurrency, one failure does
//! not stop the others) and chain (`{previous}`, stops at the first failure).

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn run_tasks(sb: &Sandbox, tasks: &[&str], extra: &[&str]) -> support::RunOutput {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec!["run".to_string(), "--agents-dir".to_string(), agents];
    for t in tasks {
        args.push("--task".into());
        args.push(t.to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    sb.run_args(&refs)
}

#[test]
fn parallel_results_keep_input_order_and_a_failure_does_not_stop_the_others() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(
        &sb,
        &["fake=alpha", "fake=beta @scenario:fail", "fake=gamma"],
        &[],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(json["details"]["mode"], json!("parallel"));
    let results = json["details"]["results"].as_array().unwrap();
    let tasks: Vec<&str> = results
        .iter()
        .map(|r| r["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["alpha", "beta @scenario:fail", "gamma"]);
    // Each answer is under its own heading in the content; the lean results do not repeat
    // the successful ones.
    let text = json["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("## 1. fake: alpha\n\nalpha\n\n## 2. "),
        "{text}"
    );
    assert!(text.ends_with("## 3. fake: gamma\n\ngamma"), "{text}");
    assert_eq!(
        (results[0].get("output"), results[2].get("output")),
        (None, None)
    );
    assert_eq!(results[1]["exitCode"], json!(3));
    for r in results {
        assert_eq!(
            r["runId"].as_str().map(str::len),
            Some(8),
            "each task has its own run: {r}"
        );
    }
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": "1 of 3 tasks failed: task 2 (SUBAGENT_FAILED)"})
    );
    let text = json["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("## 1. fake: alpha\n\nalpha\n\n## 2. fake: beta @scenario:fail\n\npi exited with code 3"), "{text}");
    assert!(text.ends_with("## 3. fake: gamma\n\ngamma"), "{text}");
}

/// The most runs alive at one instant, from the run index's start times and durations.
fn max_overlap(index: &[Value]) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for e in index {
        let start = e["startedAtMs"].as_u64().unwrap();
        edges.push((start, 1));
        edges.push((start + e["durationMs"].as_u64().unwrap(), -1));
    }
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        max = max.max(now);
    }
    max as usize
}

#[test]
fn concurrency_is_bounded() {
    // Each task streams 14 lines 60 ms apart: about 0.8 s.
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "60");
    let tasks: Vec<String> = (0..6).map(|i| format!("fake=task {i}")).collect();
    let refs: Vec<&str> = tasks.iter().map(String::as_str).collect();
    let out = run_tasks(&sb, &refs, &["--concurrency", "2"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let index: Vec<Value> = std::fs::read_to_string(sb.state.join("runs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(index.len(), 6);
    let overlap = max_overlap(&index);
    assert!(overlap <= 2, "at most 2 at once, saw {overlap}");
    assert_eq!(overlap, 2, "two did run at once");
}

#[test]
fn too_many_or_malformed_tasks_are_invalid_input() {
    let sb = Sandbox::new();
    let tasks: Vec<String> = (0..17).map(|i| format!("fake=t{i}")).collect();
    let refs: Vec<&str> = tasks.iter().map(String::as_str).collect();
    let out = run_tasks(&sb, &refs, &[]);
    assert_eq!(out.status, 2);
    assert!(out.json()["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("17 tasks given, at most 16"));
    let out = run_tasks(&sb, &["no-equals-sign"], &[]);
    assert_eq!(out.status, 2);
    assert_eq!(out.error_code(), "INVALID_INPUT");
    assert!(sb.pids().is_empty());
}

#[test]
fn a_chain_passes_output_forward() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(
        &sb,
        &[
            "fake=first",
            "fake=second saw [{previous}]",
            "fake=third saw [{previous}]",
        ],
        &["--chain"],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(json["details"]["mode"], json!("chain"));
    // The earlier steps keep their outputs; the last one's is the content.
    let outputs: Vec<Option<&str>> = json["details"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.get("output").and_then(Value::as_str))
        .collect();
    assert_eq!(outputs, [Some("first"), Some("second saw [first]"), None]);
    assert_eq!(
        json["content"][0]["text"],
        json!("third saw [second saw [first]]")
    );
}

#[test]
fn a_chain_stops_at_a_failed_step_and_keeps_the_earlier_results() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(
        &sb,
        &[
            "fake=first",
            "fake=@scenario:fail {previous}",
            "fake=never runs",
        ],
        &["--chain"],
    );
    assert_eq!(out.status, 1);
    let json = out.json();
    let results = json["details"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "the third step never ran");
    assert_eq!(results[0]["output"], json!("first"));
    assert_eq!(results[1]["task"], json!("@scenario:fail first"));
    let message = json["details"]["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("Chain stopped at step 2 of the chain: pi exited with code 3"),
        "{message}"
    );
    assert_eq!(sb.pids().len(), 2);
}

#[test]
fn a_task_refused_before_it_ran_has_its_result_in_place_and_the_status_says_why() {
    let sb = Sandbox::new().scenario("echo-task");
    // The whole record of each task, its output included.
    let out = run_tasks(
        &sb,
        &["fake=alpha", "nope=beta", "fake=gamma"],
        &["--details", "full"],
    );
    // An unknown agent is the caller's mistake, as for a single run: 2.
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    let json = out.json();
    let results = json["details"]["results"].as_array().unwrap();
    let who: Vec<(&Value, &Value)> = results.iter().map(|r| (&r["agent"], &r["task"])).collect();
    assert_eq!(
        who,
        [
            (&json!("fake"), &json!("alpha")),
            (&json!("nope"), &json!("beta")),
            (&json!("fake"), &json!("gamma"))
        ],
        "one result per task, in order: {json}"
    );
    let refused = &results[1];
    let message = "Unknown agent: nope. Available agents: explorer, fake, implementer, researcher, reviewer, tester";
    assert_eq!(
        refused,
        &json!({
            "agent": "nope", "task": "beta", "exitCode": 2,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
            "error": message, "sessionFile": "", "output": "", "displayItems": [],
            "backend": "", "durationMs": 0, "attempts": 0
        })
    );
    assert_eq!(
        json["details"]["error"],
        json!({"code": "UNKNOWN_AGENT", "message": "1 of 3 tasks failed: task 2 (UNKNOWN_AGENT)"})
    );
    assert_eq!(results[2]["output"], json!("gamma"));
}

#[test]
fn tasks_failing_differently_exit_1_and_a_chain_exits_as_its_stopped_step() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(&sb, &["fake=@scenario:fail", "nope=beta"], &[]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(
        out.json()["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": "2 of 2 tasks failed: task 1 (SUBAGENT_FAILED), task 2 (UNKNOWN_AGENT)"})
    );

    let out = run_tasks(
        &sb,
        &["fake=first", "nope={previous}", "fake=third"],
        &["--chain"],
    );
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    let json = out.json();
    let tasks: Vec<&Value> = json["details"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["task"])
        .collect();
    assert_eq!(tasks, [&json!("first"), &json!("first")], "{json}");
    assert_eq!(json["details"]["error"]["code"], json!("UNKNOWN_AGENT"));
}

#[test]
fn after_sigterm_queued_tasks_do_not_start() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let child = sb
        .command(&[
            "run",
            "--agents-dir",
            &agents,
            "--concurrency",
            "1",
            "--task",
            "fake=one",
            "--task",
            "fake=two",
            "--task",
            "fake=three",
        ])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sb.pids().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first task never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    // Let a task that was wrongly started record its pid.
    std::thread::sleep(std::time::Duration::from_millis(300));
    sb.assert_no_survivors();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(sb.pids().len(), 1, "only the first task started");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = json["details"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{json}");
    assert_eq!(
        results[0]["termination"],
        json!({"kind": "terminated", "reason": "cancelled"})
    );
    for r in &results[1..] {
        assert_eq!(
            (&r["error"], &r["attempts"], r.get("termination")),
            (
                &json!("Not started: orchestrate was cancelled before this task's turn."),
                &json!(0),
                None
            ),
            "{r}"
        );
    }
}
