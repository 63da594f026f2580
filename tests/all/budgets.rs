//! Budgets on what a child spends (turns, tokens, cost), over the fake child's endless
//! turns: the child is stopped once it goes on past a budget, its partial answer is kept,
//! and the result says which budget and how much was used. And a fan-out's total cost.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{normalized, Sandbox};

/// The whole result of a run of the fake child's `turns` stopped after `turns` turns by
/// `limit`, each turn having cost `cost`.
fn stopped_after(turns: u64, cost: f64, limit: Value, message: &str) -> Value {
    let display: Vec<Value> = (1..=turns)
        .flat_map(|t| {
            [
                json!({"type": "text", "text": format!("turn {t}")}),
                json!({"type": "toolCall", "name": "read", "args": {"path": format!("f{t}.rs")}}),
            ]
        })
        .collect();
    let content = format!("{message}\n\nPartial output:\nturn {turns}");
    json!({
        "content": [{"type": "text", "text": content}],
        "details": {
            "mode": "single",
            "runId": "RUNID",
            "results": [{
                "agent": "fake", "task": "x",
                // The child died of orchestrate's SIGTERM.
                "exitCode": 143,
                "usage": {"input": 100 * turns, "output": 10 * turns, "cacheRead": 0, "cacheWrite": 0,
                          "cost": (cost * turns as f64 * 1e9).round() / 1e9, "turns": turns},
                "error": message,
                "sessionFile": "SESSION",
                // The answer so far: the last turn's text.
                "output": format!("turn {turns}"),
                "displayItems": display,
                "backend": "pi", "durationMs": 0, "attempts": 1,
                "termination": {"kind": "terminated", "reason": "budget"},
                "sandbox": {"mode": "off", "mechanism": "none"},
                "network": {"mode": "on"},
                "childSessionId": "0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c",
                "limit": limit
            }],
            "error": {"code": "SUBAGENT_FAILED", "message": message}
        }
    })
}

#[test]
fn a_turn_budget_stops_the_child_after_its_last_turn_and_keeps_the_partial_answer() {
    let sb = Sandbox::new().scenario("turns");
    let out = sb.run("x", &["--details", "full", "--max-turns", "3"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(
        normalized(out.json()),
        stopped_after(
            3,
            0.0,
            json!({"kind": "turns", "limit": 3, "used": 3}),
            "Subagent stopped: turn budget 3 reached after 3 turns."
        )
    );
}

#[test]
fn a_cost_budget_stops_the_child_at_the_turn_that_passes_it() {
    let sb = Sandbox::new()
        .scenario("turns")
        .set("FAKE_AGENT_TURN_COST", "0.2");
    let out = sb.run("x", &["--details", "full", "--max-cost", "0.50"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(
        normalized(out.json()),
        stopped_after(
            3,
            0.2,
            json!({"kind": "cost", "limit": 0.5, "used": 0.6}),
            "Subagent stopped: cost budget $0.50 reached after 3 turns ($0.60 used)."
        )
    );
}

#[test]
fn a_token_budget_counts_input_output_and_cache_writes() {
    let sb = Sandbox::new().scenario("turns");
    // 110 tokens a turn: the fourth passes 400.
    let out = sb.run("x", &["--details", "full", "--max-tokens", "400"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(
        normalized(out.json()),
        stopped_after(
            4,
            0.0,
            json!({"kind": "tokens", "limit": 400, "used": 440}),
            "Subagent stopped: token budget 400 reached after 4 turns (440 tokens used)."
        )
    );
}

#[test]
fn an_agent_files_budget_applies_and_a_flag_overrides_it() {
    let sb = Sandbox::new().scenario("turns");
    std::fs::write(
        sb.agents.join("fake.md"),
        "---\nname: fake\ndescription: d\nbackend: pi\nmax_turns: 2\n---\nP\n",
    )
    .unwrap();
    let by_agent = sb.run("x", &[]);
    assert_eq!(
        by_agent.result()["limit"],
        json!({"kind": "turns", "limit": 2, "used": 2})
    );
    let by_flag = sb.run("x", &["--max-turns", "4"]);
    assert_eq!(
        by_flag.result()["limit"],
        json!({"kind": "turns", "limit": 4, "used": 4})
    );
}

#[test]
fn a_run_whose_final_answer_comes_within_its_turns_succeeds() {
    // Two turns with tools and the answer in the third: a budget of 3 is enough.
    let sb = Sandbox::new()
        .scenario("turns")
        .set("FAKE_AGENT_TURNS", "2");
    let out = sb.run("x", &["--details", "full", "--max-turns", "3"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["output"], json!("done after 2 turns"));
    assert_eq!(r["usage"]["turns"], json!(3));
    assert_eq!(r.get("limit"), None);
}

#[test]
fn a_fanout_total_cost_stops_running_tasks_and_starts_no_new_one() {
    let sb = Sandbox::new()
        .scenario("turns")
        .set("FAKE_AGENT_TURN_COST", "0.1");
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "--agents-dir",
        &agents,
        "--task",
        "fake=one",
        "--task",
        "fake=two",
        "--task",
        "fake=three",
        "--concurrency",
        "2",
        "--max-total-cost",
        "0.50",
    ]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    // The third task never started: only the first two children ran.
    assert_eq!(sb.pids().len(), 2, "pids: {:?}", sb.pids());
    let json = out.json();
    let results = json["details"]["results"].as_array().unwrap();
    let stopped: Vec<&Value> = results
        .iter()
        .filter(|r| r["termination"] == json!({"kind": "terminated", "reason": "budget"}))
        .collect();
    assert_eq!(stopped.len(), 2, "{json:#}");
    for r in stopped {
        assert_eq!(r["limit"]["kind"], json!("cost"), "{r:#}");
        assert_eq!(r["limit"]["limit"], json!(0.5), "{r:#}");
        assert!(r["limit"]["used"].as_f64().unwrap() >= 0.5, "{r:#}");
        assert!(
            r["error"].as_str().unwrap().starts_with(
                "Subagent stopped: the total cost budget $0.50 of its fan-out was reached after "
            ),
            "{r:#}"
        );
    }
    let text = json["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Not started: the total cost budget $0.50 of this fan-out was spent"),
        "{text}"
    );
}
