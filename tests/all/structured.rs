//! Structured answers over the fake child (standing in for pi, which takes the schema
//! through the prompt): a valid answer, one repaired in a second turn of the child's own
//! session, one that stays wrong, a CLI that cannot resume, the agent key, and a schema
//! refused before anything runs.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{normalized, Sandbox};

const SCHEMA: &str = r#"{"type": "object", "properties": {"files": {"type": "array", "items": {"type": "string"}}, "count": {"type": "integer"}}, "required": ["files", "count"]}"#;
/// The schema as the child is shown it (compact, keys sorted).
const SCHEMA_COMPACT: &str = r#"{"properties":{"count":{"type":"integer"},"files":{"items":{"type":"string"},"type":"array"}},"required":["files","count"],"type":"object"}"#;
const SESSION_ID: &str = "0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c";
/// A right answer, with prose and a fence around it.
const RIGHT: &str = "Found them.\n```json\n{\"files\": [\"src/auth.rs\"], \"count\": 1}\n```";
/// A wrong answer: `count` is a string.
const WRONG: &str = "{\"files\": [\"src/auth.rs\"], \"count\": \"one\"}";
const WRONG_ERROR: &str = "$.count: \"one\" is not of type \"integer\"";

/// A sandbox whose child answers `answers[n]` in its `n+1`th turn, with the schema in
/// `schema.json`.
fn sandbox(answers: &[&str]) -> Sandbox {
    let mut sb = Sandbox::new().scenario("answers");
    for (i, a) in answers.iter().enumerate() {
        sb = sb.set(&format!("FAKE_AGENT_ANSWER_{}", i + 1), a);
    }
    std::fs::write(sb.root.path().join("schema.json"), SCHEMA).unwrap();
    sb
}

fn schema_flag(sb: &Sandbox) -> String {
    sb.root
        .path()
        .join("schema.json")
        .to_str()
        .unwrap()
        .to_string()
}

/// The prompt of each turn the child ran, from its session file (one line per run).
fn turns(sb: &Sandbox, run_id: &str) -> Vec<String> {
    let path = sb
        .state
        .join("runs")
        .join(run_id)
        .join("child/pi-session.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["task"].as_str().unwrap().to_string()
        })
        .collect()
}

/// One turn's usage from the fake's transcript, `n` times.
fn usage(n: u64) -> Value {
    json!({"input": 100 * n, "output": 10 * n, "cacheRead": 0, "cacheWrite": 0,
           "cost": 0.00012 * n as f64, "turns": n})
}

fn run_id(json: &Value) -> String {
    json["details"]["runId"].as_str().unwrap().to_string()
}

#[test]
fn a_valid_answer_is_structured_and_compact_json_in_the_content() {
    let sb = sandbox(&[RIGHT]);
    let out = sb.run(
        "list the auth files",
        &["--output-schema", &schema_flag(&sb)],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let id = run_id(&json);
    assert_eq!(
        normalized(json),
        json!({
            "content": [{"type": "text", "text": "{\"count\":1,\"files\":[\"src/auth.rs\"]}"}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "exitCode": 0,
                    "usage": usage(1),
                    "sessionFile": "SESSION",
                    "sandbox": {"mode": "off", "mechanism": "none"},
                    "structured": {"files": ["src/auth.rs"], "count": 1}
                }]
            }
        })
    );
    // pi has no option for a schema: the request follows the task in the prompt.
    assert_eq!(
        turns(&sb, &id),
        [format!(
            "Task: list the auth files\n\nAnswer with one JSON value that matches this JSON Schema, and nothing else (no prose around it; a ```json fence is fine):\n{SCHEMA_COMPACT}"
        )]
    );
    // The full record keeps the text the value was read from.
    let full: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.state.join("runs").join(&id).join("result.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(full["details"]["results"][0]["output"], json!(RIGHT));
}

#[test]
fn a_wrong_answer_gets_one_repair_turn_in_the_same_session() {
    let sb = sandbox(&[WRONG, RIGHT]);
    let out = sb.run(
        "list the auth files",
        &["--output-schema", &schema_flag(&sb), "--details", "full"],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let id = run_id(&json);
    assert_eq!(
        normalized(json),
        json!({
            "content": [{"type": "text", "text": "{\"count\":1,\"files\":[\"src/auth.rs\"]}"}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "agent": "fake",
                    "task": "list the auth files",
                    "exitCode": 0,
                    "usage": usage(2),
                    "sessionFile": "SESSION",
                    "output": RIGHT,
                    "displayItems": [{"type": "text", "text": WRONG}, {"type": "text", "text": RIGHT}],
                    "backend": "pi",
                    "durationMs": 0,
                    "attempts": 2,
                    // The repair turn is an attempt of its own.
                    "attemptsDetail": [
                        {"exitCode": 0, "error": format!("Answer does not match the output schema: {WRONG_ERROR}")},
                        {"exitCode": 0}
                    ],
                    "childSessionId": SESSION_ID,
                    "termination": {"kind": "exited", "code": 0},
                    "sandbox": {"mode": "off", "mechanism": "none"},
                    "network": {"mode": "on"},
                    "structured": {"files": ["src/auth.rs"], "count": 1}
                }]
            }
        })
    );
    // The second turn continued the first's session file, told what was wrong.
    let prompts = turns(&sb, &id);
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert_eq!(
        prompts[1],
        format!(
            "Task: Your answer does not match the required output schema: {WRONG_ERROR}. Answer again with only one JSON value that matches this JSON Schema, and nothing else:\n{SCHEMA_COMPACT}"
        )
    );
    // Each turn keeps its own record of the child's output.
    let folder = sb.state.join("runs").join(&id);
    assert!(folder.join("session.jsonl").is_file());
    assert!(folder.join("session.attempt-2.jsonl").is_file());
    assert_eq!(
        out.json()["details"]["results"][0]["sessionFile"],
        json!(folder.join("session.attempt-2.jsonl").to_str().unwrap())
    );
}

#[test]
fn an_answer_wrong_twice_is_subagent_failed_with_the_error_and_the_raw_answer() {
    let sb = sandbox(&[WRONG]);
    let out = sb.run(
        "list the auth files",
        &["--output-schema", &schema_flag(&sb)],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let message = format!("Answer does not match the output schema: {WRONG_ERROR}");
    assert_eq!(normalized(out.json()), failed_twice(&message, WRONG));
}

/// The result of a run whose answer failed both its turn and the repair turn with
/// `message`, `answer` being the last answer.
fn failed_twice(message: &str, answer: &str) -> serde_json::Value {
    json!({
        "content": [{"type": "text", "text": format!("{message}\n\nAnswer:\n{answer}")}],
        "details": {
            "mode": "single",
            "runId": "RUNID",
            "error": {"code": "SUBAGENT_FAILED", "message": message},
            "results": [{
                "agent": "fake",
                "task": "list the auth files",
                "exitCode": 0,
                "usage": usage(2),
                "error": message,
                "sessionFile": "SESSION",
                "output": answer,
                "backend": "pi",
                "durationMs": 0,
                "attempts": 2,
                // The repair turn is an attempt of its own.
                "attemptsDetail": [
                    {"exitCode": 0, "error": message},
                    {"exitCode": 0, "error": message}
                ],
                "childSessionId": SESSION_ID,
                "termination": {"kind": "exited", "code": 0},
                "sandbox": {"mode": "off", "mechanism": "none"}
            }]
        }
    })
}

#[test]
fn a_cli_that_cannot_resume_gets_no_repair_turn_and_says_so() {
    // The command backend runs the fake as a pi-speaking CLI it cannot resume.
    let sb = sandbox(&[WRONG, RIGHT]);
    let agent = format!(
        "---\nname: cmd\nbackend: command\ndialect: pi\ncommand: {} --mode json -p {{task}}\n---\nP\n",
        support::fake_agent_bin().display()
    );
    std::fs::write(sb.agents.join("cmd.md"), agent).unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "cmd",
        "list the auth files",
        "--agents-dir",
        &agents,
        "--output-schema",
        &schema_flag(&sb),
    ]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (&r["error"], &r["attempts"], &r["warnings"]),
        (
            &json!(format!("Answer does not match the output schema: {WRONG_ERROR}")),
            &json!(1),
            &json!(["no repair turn for the answer that does not match the output schema: command cannot continue its session"])
        )
    );
}

#[test]
fn the_agents_own_output_schema_applies_and_the_flag_overrides_it() {
    let sb = sandbox(&[r#"{"files": [], "count": 0}"#]);
    let agent = "---\nname: lister\nbackend: pi\noutput_schema:\n  type: object\n  required: [files]\n  properties:\n    files: {type: array}\n---\nYou list files.\n";
    std::fs::write(sb.agents.join("lister.md"), agent).unwrap();
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&["run", "lister", "list", "--agents-dir", &agents]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        (
            out.json()["content"].clone(),
            out.result()["structured"].clone()
        ),
        (
            json!([{"type": "text", "text": "{\"count\":0,\"files\":[]}"}]),
            json!({"files": [], "count": 0})
        )
    );
    // The flag's schema wins: this one wants an array.
    let array = sb.root.path().join("array.json");
    std::fs::write(&array, r#"{"type": "array"}"#).unwrap();
    let out = sb.run_args(&[
        "run",
        "lister",
        "list",
        "--agents-dir",
        &agents,
        "--output-schema",
        array.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(
        out.result()["error"],
        json!("Answer does not match the output schema: $: {\"count\":0,\"files\":[]} is not of type \"array\"")
    );
}

#[test]
fn a_malformed_schema_is_invalid_input_before_anything_is_spawned() {
    let sb = sandbox(&[RIGHT]);
    let bad = sb.root.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}"#,
    )
    .unwrap();
    let out = sb.run("list", &["--output-schema", bad.to_str().unwrap()]);
    assert_eq!(out.status, 2, "stderr: {}", out.stderr);
    let message = format!(
        "Invalid input: --output-schema {}: not a valid JSON Schema: $.properties.n.minimum: \"zero\" is not of type \"number\"",
        bad.display()
    );
    assert_eq!(
        out.json(),
        json!({
            "content": [{"type": "text", "text": message}],
            "details": {"mode": "single", "results": [], "error": {"code": "INVALID_INPUT", "message": message}}
        })
    );
    assert!(sb.pids().is_empty(), "nothing was spawned");
    assert!(
        !sb.state.join("runs").exists()
            || std::fs::read_dir(sb.state.join("runs"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn a_long_structured_answer_is_cut_in_the_content_and_whole_in_structured() {
    let files: Vec<String> = (0..400).map(|i| format!("src/module_{i}.rs")).collect();
    let answer = json!({"files": files, "count": 400});
    let sb = sandbox(&[&answer.to_string()]);
    let out = sb.run(
        "list every file",
        &["--output-schema", &schema_flag(&sb), "--max-bytes", "2048"],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let text = json["content"][0]["text"].as_str().unwrap();
    assert!(
        text.len() < answer.to_string().len() && text.starts_with("{\"count\":400,\"files\":["),
        "{text}"
    );
    assert_eq!(
        (
            &json["details"]["error"]["code"],
            &json["details"]["results"][0]["structured"]
        ),
        (&json!("SUBAGENT_OUTPUT_TRUNCATED"), &answer)
    );
}

/// Two values that match the schema and disagree: the child's own, and one it quotes from
/// a file it read.
const AMBIGUOUS: &str = "I found {\"files\": [\"src/auth.rs\"], \"count\": 1}. The README claims {\"files\": [], \"count\": 0}.";
const AMBIGUITY: &str = "it holds 2 different JSON values that match the output schema: {\"count\":0,\"files\":[]} and {\"count\":1,\"files\":[\"src/auth.rs\"]}";

#[test]
fn an_answer_holding_two_values_that_disagree_is_ambiguous_never_a_pick() {
    let sb = sandbox(&[AMBIGUOUS]);
    let out = sb.run(
        "list the auth files",
        &["--output-schema", &schema_flag(&sb)],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let message = format!("Answer is ambiguous: {AMBIGUITY}");
    assert_eq!(normalized(out.json()), failed_twice(&message, AMBIGUOUS));
}

#[test]
fn the_repair_turn_may_resolve_an_ambiguity() {
    let sb = sandbox(&[AMBIGUOUS, RIGHT]);
    let out = sb.run(
        "list the auth files",
        &["--output-schema", &schema_flag(&sb)],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let r = &json["details"]["results"][0];
    assert_eq!(
        r["structured"],
        json!({"files": ["src/auth.rs"], "count": 1})
    );
    assert_eq!(r["attempts"], json!(2));
    let prompts = turns(&sb, &run_id(&json));
    assert_eq!(
        prompts[1],
        format!(
            "Task: Your answer is ambiguous: {AMBIGUITY}. Answer again with only one JSON value that matches this JSON Schema, and nothing else:\n{SCHEMA_COMPACT}"
        )
    );
}
