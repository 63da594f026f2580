//! A child's usage of odd shapes, through the real binary over the fake child replaying
//! pi lines: a field of an unexpected type (null, a string, a number past 2^64) loses
//! neither the answer nor the turn, negative and non-finite amounts are refused, sums
//! saturate instead of overflowing, and a budget the stream cannot hold is named. Each is
//! said once per field in `warnings`.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{normalized, Sandbox};

const SESSION: &str = r#"{"type":"session","version":3,"id":"0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c","timestamp":"2026-03-15T10:00:00.000Z","cwd":"/repo"}"#;

/// One assistant message with `text`, an optional `read` tool call, and `usage` as printed.
fn message_end(text: &str, tool: Option<&str>, usage: &str) -> String {
    let call = tool.map_or(String::new(), |id| {
        format!(r#",{{"type":"toolCall","id":"{id}","name":"read","arguments":{{"path":"a.rs"}}}}"#)
    });
    let stop = if tool.is_some() { "toolUse" } else { "stop" };
    format!(
        r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":{}}}{call}],"usage":{usage},"stopReason":"{stop}"}}}}"#,
        serde_json::to_string(text).unwrap()
    )
}

/// A sandbox whose fake pi replays `lines`.
fn replaying(lines: &[String]) -> Sandbox {
    let sb = Sandbox::new().scenario("replay");
    let path = sb.root.path().join("transcript.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let path = path.to_str().unwrap().to_string();
    sb.set("FAKE_AGENT_TRANSCRIPT", &path)
}

fn answer_with_usage(usage: &str) -> Sandbox {
    replaying(&[
        SESSION.to_string(),
        message_end("Hello from pi.", None, usage),
        r#"{"type":"agent_end","messages":[]}"#.to_string(),
    ])
}

/// The whole lean result of a one-turn answer "Hello from pi." with `usage` and `warnings`.
fn answered(usage: Value, warnings: &[&str]) -> Value {
    // A lean success leaves out what says nothing happened (the agent and task of a
    // single run, one attempt, an exit 0, the child's session id, the backend).
    let mut result = json!({
        "exitCode": 0,
        "usage": usage,
        "sessionFile": "SESSION",
        "sandbox": {"mode": "off", "mechanism": "none"}
    });
    if !warnings.is_empty() {
        result["warnings"] = json!(warnings);
    }
    json!({
        "content": [{"type": "text", "text": "Hello from pi."}],
        "details": {"mode": "single", "runId": "RUNID", "results": [result]}
    })
}

#[test]
fn an_odd_usage_field_loses_neither_the_answer_nor_the_turn() {
    // (usage as printed, usage read, the warning)
    let cases: &[(&str, Value, &str)] = &[
        (
            // What `JSON.stringify` makes of a NaN cost.
            r#"{"input":100,"output":10,"cacheRead":0,"cacheWrite":0,"cost":{"total":null}}"#,
            json!({"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            r#"pi's "usage.cost.total": null, not a number (1 time); ignored"#,
        ),
        (
            r#"{"input":100,"output":10,"cost":null}"#,
            json!({"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            r#"pi's "usage.cost": null, not an object (1 time); ignored"#,
        ),
        (
            r#"{"input":"1000","output":10,"cost":{"total":0.5}}"#,
            json!({"input": 0, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.5, "turns": 1}),
            r#"pi's "usage.input": a string, not a number (1 time); ignored"#,
        ),
        (
            r#"{"input":18446744073709551616,"output":10}"#,
            json!({"input": u64::MAX, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            r#"pi's "usage.input": 18446744073709552000, past the largest count (1 time); counted as 18446744073709551615"#,
        ),
        (
            r#""lots""#,
            json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            r#"pi's "usage": a string, not an object (1 time); ignored"#,
        ),
    ];
    for (usage, read, warning) in cases {
        let sb = answer_with_usage(usage);
        let out = sb.run("hi", &[]);
        assert_eq!(out.status, 0, "{usage}: {}", out.stdout);
        assert_eq!(
            normalized(out.json()),
            answered(read.clone(), &[warning]),
            "{usage}"
        );
    }
}

#[test]
fn integral_numbers_in_any_notation_are_counts() {
    let sb = answer_with_usage(r#"{"input":1000.0,"output":1e3,"cacheRead":0,"cacheWrite":0}"#);
    let out = sb.run("hi", &[]);
    assert_eq!(
        normalized(out.json()),
        answered(
            json!({"input": 1000, "output": 1000, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            &[]
        )
    );
}

#[test]
fn a_turn_budget_holds_when_every_turn_has_an_odd_usage_field() {
    let sb = Sandbox::new().scenario("turns").set(
        "FAKE_AGENT_TURN_USAGE",
        r#"{"input":"100","output":10,"cacheRead":0,"cacheWrite":0,"cost":{"total":null}}"#,
    );
    let out = sb.run("x", &["--max-turns", "3"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let r = out.result();
    assert_eq!(r["limit"], json!({"kind": "turns", "limit": 3, "used": 3}));
    assert_eq!(
        r["usage"],
        json!({"input": 0, "output": 30, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 3})
    );
    // Once per field, however many lines had it.
    assert_eq!(
        r["warnings"],
        json!([
            r#"pi's "usage.input": a string, not a number (3 times); ignored"#,
            r#"pi's "usage.cost.total": null, not a number (3 times); ignored"#,
        ])
    );
}

#[test]
fn a_negative_cost_is_refused_and_the_cost_budget_still_holds() {
    let usage = |cost: f64| format!(r#"{{"input":100,"output":10,"cost":{{"total":{cost}}}}}"#);
    let mut lines = vec![
        SESSION.to_string(),
        message_end("turn 1", Some("c1"), &usage(-100.0)),
    ];
    for t in 2..=10 {
        lines.push(message_end(
            &format!("turn {t}"),
            Some(&format!("c{t}")),
            &usage(0.02),
        ));
    }
    lines.push(message_end("done", None, &usage(0.02)));
    lines.push(r#"{"type":"agent_end","messages":[]}"#.to_string());
    let sb = replaying(&lines);
    let out = sb.run("x", &["--max-cost", "0.05"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let v = out.json();
    let r = &v["details"]["results"][0];
    // Turns 2, 3 and 4 cost 0.06: turn 4 went on past the budget.
    assert_eq!(
        r["limit"],
        json!({"kind": "cost", "limit": 0.05, "used": 0.06})
    );
    assert_eq!(
        v["details"]["error"]["message"],
        json!("Subagent stopped: cost budget $0.05 reached after 4 turns ($0.06 used).")
    );
    assert_eq!(
        r["warnings"],
        json!([r#"pi's "usage.cost.total": -100, a negative amount (1 time); ignored"#])
    );
}

#[test]
fn absurd_costs_saturate_and_never_print_null() {
    let usage = r#"{"input":18446744073709551615,"output":10,"cost":{"total":1e308}}"#;
    let lines = vec![
        SESSION.to_string(),
        message_end("turn 1", Some("c1"), usage),
        message_end("Hello from pi.", None, usage),
        r#"{"type":"agent_end","messages":[]}"#.to_string(),
    ];
    let sb = replaying(&lines);
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "{}", out.stdout);
    let r = out.result();
    assert_eq!(
        r["usage"],
        json!({"input": u64::MAX, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": f64::MAX, "turns": 2})
    );
    assert_eq!(
        r["warnings"],
        json!(["the usage sums passed the largest value they can hold and were kept at it"])
    );

    // A budget's message says how much, in digits a person reads.
    let sb = replaying(&lines);
    let out = sb.run("x", &["--max-cost", "1"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert_eq!(
        out.json()["details"]["error"]["message"],
        json!("Subagent stopped: cost budget $1.00 reached after 1 turn ($1.0e308 used).")
    );
}

#[test]
fn a_budget_the_stream_cannot_hold_is_named() {
    let sb = replaying(&[
        SESSION.to_string(),
        r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Hello from pi."}],"stopReason":"stop"}}"#.to_string(),
        r#"{"type":"agent_end","messages":[]}"#.to_string(),
    ]);
    let out = sb.run("hi", &["--max-cost", "0.05", "--max-tokens", "1000"]);
    assert_eq!(out.status, 0, "{}", out.stdout);
    assert_eq!(
        normalized(out.json()),
        answered(
            json!({"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1}),
            &[
                "the token budget 1000 could not be held: pi reported no token usage",
                "the cost budget $0.05 could not be held: pi reported no cost",
            ]
        )
    );
}
