//! Fallback models: a model that is out of quota, rate limited, overloaded or unknown
//! (after its retries) gives way to the next fallback model; the result says which model
//! answered and lists every attempt.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{normalized, Sandbox};

#[test]
fn an_overloaded_model_falls_back_to_the_next_one() {
    let sb = Sandbox::new()
        .scenario("model-unavailable")
        .set("FAKE_AGENT_BAD_MODEL", "m1")
        .set("FAKE_AGENT_ERROR", "529 {\"type\":\"overloaded_error\"}");
    let out = sb.run(
        "x",
        &[
            "--details",
            "full",
            "--model",
            "m1",
            "--fallback-model",
            "m2",
            "--fallback-model",
            "m3",
            "--attempts",
            "1",
        ],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = normalized(out.json())["details"]["results"][0].clone();
    assert_eq!(
        (
            &r["output"],
            &r["model"],
            &r["attempts"],
            &r["attemptsDetail"]
        ),
        (
            &json!("answered by m2"),
            &json!("m2"),
            &json!(2),
            &json!([
                {"model": "m1", "exitCode": 0,
                 "error": "pi reported an error: 529 {\"type\":\"overloaded_error\"}"},
                {"model": "m2", "exitCode": 0}
            ])
        )
    );
    // Each attempt kept its own session file.
    let run_dir = std::path::Path::new(out.result()["sessionFile"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(run_dir.join("session.jsonl").is_file());
    assert!(run_dir.join("session.attempt-2.jsonl").is_file());
}

#[test]
fn each_model_gets_its_retries_before_the_next_one() {
    let sb = Sandbox::new()
        .scenario("model-unavailable")
        .set("FAKE_AGENT_BAD_MODEL", "m1")
        .set("FAKE_AGENT_ERROR", "429 Rate limit reached");
    let out = sb.run(
        "x",
        &["--model", "m1", "--fallback-model", "m2", "--attempts", "2"],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    let models: Vec<&str> = r["attemptsDetail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["m1", "m1", "m2"]);
    assert_eq!(r["model"], json!("m2"));
}

#[test]
fn a_failure_another_model_cannot_fix_does_not_fall_back() {
    let sb = Sandbox::new()
        .scenario("model-unavailable")
        .set("FAKE_AGENT_BAD_MODEL", "m1")
        .set("FAKE_AGENT_ERROR", "401 Incorrect API key provided");
    let out = sb.run("x", &["--model", "m1", "--fallback-model", "m2"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (&r["model"], &r["attempts"], r.get("attemptsDetail")),
        (&json!("m1"), &json!(1), None)
    );
}

#[test]
fn the_last_model_failing_is_the_result() {
    let sb = Sandbox::new()
        .scenario("model-unavailable")
        .set("FAKE_AGENT_BAD_MODEL", "m1")
        .set("FAKE_AGENT_ERROR", "404 The model `m1` does not exist");
    // Only m1 fails; with m1 as the only fallback too, every model fails.
    let out = sb.run(
        "x",
        &["--model", "m1", "--fallback-model", "m1", "--attempts", "1"],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["attempts"], json!(2));
    assert_eq!(
        r["error"],
        json!("pi reported an error: 404 The model `m1` does not exist")
    );
}
