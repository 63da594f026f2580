//! Retries of transient provider failures: another attempt after a 503, none after a
//! permanent error or a timeout, each attempt with its own session file.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn flaky(sb: Sandbox, error: &str) -> Sandbox {
    let marker = sb.root.path().join("failed-once");
    sb.scenario("flaky")
        .set("FAKE_AGENT_MARKER", marker.to_str().unwrap())
        .set("FAKE_AGENT_ERROR", error)
}

#[test]
fn an_overloaded_provider_is_retried_and_the_last_attempt_is_the_result() {
    let sb = flaky(
        Sandbox::new(),
        "503: {\"error\":{\"message\":\"server is overloaded\"}}",
    );
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["attempts"], json!(2));
    assert_eq!(out.json()["content"][0]["text"], json!("Hello from pi."));
    assert!(out.json()["details"].get("error").is_none());
    let session = std::path::PathBuf::from(r["sessionFile"].as_str().unwrap());
    assert_eq!(session.file_name().unwrap(), "session.attempt-2.jsonl");
    let first = session.with_file_name("session.jsonl");
    let first_text = std::fs::read_to_string(&first).unwrap();
    assert!(
        first_text.contains("server is overloaded"),
        "attempt 1 keeps its own record"
    );
    assert!(
        out.stderr.contains("attempt 1 of 2 failed (Overloaded)"),
        "{}",
        out.stderr
    );
    assert_eq!(sb.pids().len(), 2, "two children ran");
}

#[test]
fn a_rate_limit_is_retried_until_the_attempts_run_out() {
    // `--attempts 1` turns retries off: the transient failure is the result.
    let sb = flaky(Sandbox::new(), "429 Rate limit reached for requests");
    let out = sb.run("x", &["--attempts", "1"]);
    assert_eq!(out.status, 1);
    assert_eq!(out.result()["attempts"], json!(1));
    assert_eq!(
        out.result()["error"],
        json!("pi reported an error: 429 Rate limit reached for requests")
    );
}

#[test]
fn a_permanent_error_is_not_retried() {
    let sb = flaky(Sandbox::new(), "401 Incorrect API key provided");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 1);
    assert_eq!(out.result()["attempts"], json!(1));
    assert_eq!(sb.pids().len(), 1);
}

#[test]
fn a_timeout_is_never_retried() {
    let sb = Sandbox::new().scenario("silent");
    let out = sb.run(
        "x",
        &[
            "--idle-timeout",
            "300ms",
            "--kill-grace",
            "200ms",
            "--attempts",
            "3",
        ],
    );
    assert_eq!(out.status, 124);
    assert_eq!(out.result()["attempts"], json!(1));
    assert_eq!(sb.pids().len(), 1);
}

/// `fake=b` fails with a rate limit `times` times (and then answers) beside `fake=a`, in
/// one fan-out: the answers' order, attempts, and the lane's record of its throttles.
fn throttled_in_a_fan_out(times: u32, extra: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let mut sb = flaky(Sandbox::new(), "429 Rate limit reached for requests")
        .scenario("echo-task")
        .set("FAKE_AGENT_FAIL_TIMES", &times.to_string());
    for (k, v) in env {
        sb = sb.set(k, v);
    }
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        "--agents-dir",
        &agents,
        "--task",
        "fake=a",
        "--task",
        "fake=b @scenario:flaky",
        "--details",
        "full",
    ];
    args.extend_from_slice(extra);
    let out = sb.run_args(&args);
    let json = out.json();
    let b = &json["details"]["results"][1];
    let summary = json!({
        "b": {"attempts": b["attempts"], "error": b.get("error"),
              "output": b["output"]},
        "a": json["details"]["results"][0]["output"],
        "scheduler": json["details"]["scheduler"],
    });
    (out.status, summary)
}

#[test]
fn a_fan_outs_task_refused_for_load_is_tried_again_without_using_up_its_attempts() {
    // Two refusals with the default 2 attempts: both forgiven, the third attempt answers.
    let (status, got) = throttled_in_a_fan_out(2, &[], &[]);
    assert_eq!(
        (status, got),
        (
            0,
            json!({
                "b": {"attempts": 3, "error": null, "output": "Hello from pi."},
                "a": "a",
                "scheduler": {"pi": {"peak": 2, "floor": 1, "throttled": 2}},
            })
        )
    );
}

#[test]
fn a_fan_outs_task_refused_for_load_is_not_retried_with_retries_off() {
    let (status, got) = throttled_in_a_fan_out(1, &["--attempts", "1"], &[]);
    assert_eq!(
        (status, &got["b"]["attempts"], &got["b"]["error"]),
        (
            1,
            &json!(1),
            &json!("pi reported an error: 429 Rate limit reached for requests")
        )
    );
}

#[test]
fn a_fan_outs_task_refused_for_load_uses_up_its_attempts_at_fixed_concurrency() {
    // No lane narrows for it: the refusals count, and the second is the result.
    let (status, got) =
        throttled_in_a_fan_out(2, &[], &[("ORCHESTRATE_ADAPTIVE_CONCURRENCY", "false")]);
    assert_eq!(
        (status, &got["b"]["attempts"], &got["b"]["error"]),
        (
            1,
            &json!(2),
            &json!("pi reported an error: 429 Rate limit reached for requests")
        )
    );
}
