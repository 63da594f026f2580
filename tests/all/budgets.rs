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

/// Every run's record under `state`, at any depth (a nested orchestrate keeps its runs
/// in the state directory it inherits), as `(task, result)`.
fn recorded_runs(state: &std::path::Path) -> Vec<(String, Value)> {
    let mut runs = Vec::new();
    let mut dirs = vec![state.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "result.json") {
                let json: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                let task = json["details"]["results"][0]["task"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                runs.push((task, json));
            }
        }
    }
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs
}

/// A tree of three levels: the root fans out to two children, each of which runs an
/// orchestrate fan-out of two grandchildren that spend $0.01 a turn. The root's budget
/// holds for the whole tree: once the grandchildren together spent it, every run of the
/// tree stops (the cousins too), each says the tree's budget stopped it, keeps its
/// partial answer, and the spend ends within one report per running grandchild.
#[test]
fn a_total_cost_budget_holds_across_a_tree_of_nested_orchestrate_runs() {
    const BUDGET: f64 = 0.30;
    const TURN: f64 = 0.01;
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let bin = support::orchestrate_bin();
    let nested = [
        "run",
        "--agents-dir",
        &agents,
        "--task",
        "fake=grandchild one",
        "--task",
        "fake=grandchild two",
        "--concurrency",
        "2",
    ]
    .join("\u{1f}");
    let sb = sb
        .scenario("nested")
        .set("ORCHESTRATE_MAX_DEPTH", "2")
        .set("FAKE_AGENT_NESTED_CMD", bin.to_str().unwrap())
        .set("FAKE_AGENT_NESTED_ARGS", &nested)
        .set("FAKE_AGENT_NESTED_SCENARIO", "turns")
        .set("FAKE_AGENT_NESTED_PREFACE", "delegating")
        .set("FAKE_AGENT_TURN_COST", &TURN.to_string())
        // A report every 200 ms from each grandchild: the ledger is read every 50 ms.
        .set("FAKE_AGENT_DELAY_MS", "200");
    let out = sb.run_args(&[
        "run",
        "--agents-dir",
        &agents,
        "--details",
        "full",
        "--task",
        "fake=child one",
        "--task",
        "fake=child two",
        "--concurrency",
        "2",
        "--max-total-cost",
        &BUDGET.to_string(),
    ]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let tree = json["details"]["treeUsage"]["cost"]
        .as_f64()
        .unwrap_or_else(|| panic!("no treeUsage: {json:#}"));
    // What every run of the tree recorded spending, counted apart from the root's ledger.
    let runs = recorded_runs(&sb.state);
    let spent: f64 = runs
        .iter()
        .map(|(_, r)| {
            r["details"]["results"][0]["usage"]["cost"]
                .as_f64()
                .unwrap()
        })
        .sum();
    assert!(
        (spent - tree).abs() < 1e-9,
        "the root counted {tree}, the runs recorded {spent}"
    );
    // Within one report per running child of the budget: the four grandchildren's, and
    // the two children's turn on what their nested run gave back.
    assert!(
        (BUDGET..=BUDGET + 6.0 * TURN + 1e-9).contains(&tree),
        "spent {tree} of {BUDGET}"
    );
    // The children: stopped for the tree's budget (their nested runs stop first and give
    // their partial answers back, within the grace the root gives them), their partial
    // answers kept, their nested runs' spend beside their own.
    for r in json["details"]["results"].as_array().unwrap() {
        assert_eq!(
            (&r["limit"]["kind"], &r["limit"]["limit"]),
            (&json!("treeCost"), &json!(BUDGET)),
            "{r:#}"
        );
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .starts_with("Subagent stopped: the tree's cost budget $0.30 was reached"),
            "{r:#}"
        );
        assert!(r["nestedUsage"]["cost"].as_f64().unwrap() > 0.0, "{r:#}");
        // The nested fan-out's lean result: both grandchildren stopped for the tree's
        // budget, with their partial answers.
        let output = r["output"].as_str().unwrap();
        let inner: Value = serde_json::from_str(
            output
                .strip_prefix("nested exit=1 stdout=")
                .unwrap_or_else(|| panic!("{output}")),
        )
        .unwrap();
        let text = inner["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            text.matches("Subagent stopped: the tree's cost budget $0.30 was reached")
                .count(),
            2,
            "{text}"
        );
        assert_eq!(text.matches("Partial output:\nturn ").count(), 2, "{text}");
    }
    // The grandchildren (four runs, two in each nested fan-out): stopped for the tree's
    // budget too, each with the turns it had done as its partial answer.
    let grandchildren: Vec<&Value> = runs
        .iter()
        .filter(|(task, _)| task.starts_with("grandchild"))
        .map(|(_, r)| &r["details"]["results"][0])
        .collect();
    assert_eq!(grandchildren.len(), 4, "{runs:#?}");
    for g in grandchildren {
        let turns = g["usage"]["turns"].as_u64().unwrap();
        assert_eq!(
            (&g["termination"], &g["limit"]["kind"], g["output"].as_str()),
            (
                &json!({"kind": "terminated", "reason": "budget"}),
                &json!("treeCost"),
                Some(format!("turn {turns}").as_str())
            ),
            "{g:#}"
        );
    }
}

/// A hostile child raises the budget it hands its own orchestrate run (the variable is
/// in its hands): the tree's budget holds all the same, since the parent counts what the
/// nested run reports and stops it once the budget it holds is spent.
#[test]
fn a_child_that_raises_its_nested_runs_budget_is_still_stopped_at_the_trees() {
    const BUDGET: f64 = 0.10;
    const TURN: f64 = 0.01;
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let bin = support::orchestrate_bin();
    let nested = [
        "ORCHESTRATE_TREE_MAX_COST=1000",
        bin.to_str().unwrap(),
        "run",
        "fake",
        "grandchild",
        "--agents-dir",
        &agents,
    ]
    .join("\u{1f}");
    let sb = sb
        .scenario("nested")
        .set("ORCHESTRATE_MAX_DEPTH", "2")
        .set("FAKE_AGENT_NESTED_CMD", "/usr/bin/env")
        .set("FAKE_AGENT_NESTED_ARGS", &nested)
        .set("FAKE_AGENT_NESTED_SCENARIO", "turns")
        .set("FAKE_AGENT_NESTED_PREFACE", "delegating")
        .set("FAKE_AGENT_TURN_COST", &TURN.to_string())
        .set("FAKE_AGENT_DELAY_MS", "100");
    let out = sb.run(
        "child",
        &["--details", "full", "--max-total-cost", &BUDGET.to_string()],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let tree = json["details"]["treeUsage"]["cost"].as_f64().unwrap();
    assert!(
        (BUDGET..=BUDGET + 2.0 * TURN + 1e-9).contains(&tree),
        "spent {tree} of {BUDGET}: {json:#}"
    );
    let r = &json["details"]["results"][0];
    assert_eq!(r["limit"]["kind"], json!("treeCost"), "{r:#}");
    let grandchild = recorded_runs(&sb.state)
        .into_iter()
        .find(|(task, _)| task == "grandchild")
        .expect("the grandchild's record")
        .1;
    assert_eq!(
        grandchild["details"]["results"][0]["limit"]["kind"],
        json!("treeCost"),
        "{grandchild:#}"
    );
}
