//! `-o stream-json`: streaming updates while the child runs, then the result. Updates are
//! small: counters and the latest text, no growing list.

mod support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{normalized, Sandbox};

/// The stream-json lines: every update, then the result.
fn lines(out: &support::RunOutput) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn lean_updates_carry_counters_and_the_latest_text_not_the_display_items() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "30")
        .transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &["-o", "stream-json"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let lines = lines(&out);
    let (result, updates) = lines.split_last().unwrap();
    assert!(updates.len() >= 3, "{}", out.stdout);
    for u in updates {
        let details = u["details"].as_object().unwrap();
        let keys: Vec<&str> = details.keys().map(String::as_str).collect();
        assert_eq!(keys, ["mode", "results", "runId", "streaming"], "{u}");
        let streaming = &u["details"]["streaming"];
        assert_eq!(streaming.get("displayItems"), None, "{u}");
        assert!(streaming["toolCalls"].is_u64(), "{u}");
        assert!(streaming["turnCount"].is_u64(), "{u}");
    }
    // While grep runs (the second tool call), the update names it.
    assert!(
        updates
            .iter()
            .any(|u| u["details"]["streaming"]["currentTool"] == "grep"
                && u["details"]["streaming"]["toolCalls"] == 2),
        "{}",
        out.stdout
    );
    // The last update before the result has all three turns.
    assert_eq!(
        updates.last().unwrap()["details"]["streaming"]["turnCount"],
        json!(3)
    );
    // The result line is the lean result.
    assert_eq!(
        normalized(result.clone())["details"]["results"][0].get("displayItems"),
        None
    );
}

#[test]
fn full_updates_carry_the_display_items() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "30")
        .transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &["-o", "stream-json", "--details", "full"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let lines = lines(&out);
    let (result, updates) = lines.split_last().unwrap();
    let last = &updates.last().unwrap()["details"]["streaming"];
    assert_eq!(
        last["displayItems"],
        json!([
            {"type": "text", "text": "I'll look for the auth code."},
            {"type": "toolCall", "name": "read", "args": {"path": "src/auth.rs"}},
            {"type": "toolCall", "name": "grep", "args": {"pattern": "fn login", "path": "src"}},
            {"type": "text", "text": "## Answer\nAuth lives in src/auth.rs (fn login at line 42)."}
        ])
    );
    assert_eq!(
        result["details"]["results"][0]["displayItems"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}
