//! Progress, not bytes, keeps a child alive: a long silent tool call survives a shorter
//! idle limit (the tool limit bounds it instead), a child that only chatters on stderr
//! after its stream began is idle, and one that only retries its provider fails after the
//! connect limit with its own words. Scaled down from minutes to seconds.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::Sandbox;

#[test]
fn a_silent_tool_call_longer_than_the_idle_limit_is_not_killed() {
    let sb = Sandbox::new()
        .scenario("tool-call")
        .set("FAKE_AGENT_TOOL_MS", "2000");
    let out = sb.run("x", &["--details", "full", "--idle-timeout", "500ms"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["output"], json!("Build done."));
    assert!(out.elapsed.as_millis() >= 2000, "took {:?}", out.elapsed);
}

#[test]
fn a_tool_call_past_the_tool_limit_is_stopped() {
    let sb = Sandbox::new()
        .scenario("tool-call")
        .set("FAKE_AGENT_TOOL_MS", "30000");
    let out = sb.run(
        "x",
        &[
            "--idle-timeout",
            "300ms",
            "--tool-timeout",
            "1s",
            "--kill-grace",
            "1s",
        ],
    );
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let message =
        "Subagent timed out after 1000ms in a tool call that did not finish (tool timeout).";
    let r = out.result();
    assert_eq!(
        (
            &r["timeoutReason"],
            &r["error"],
            &r["termination"],
            &out.json()["details"]["error"]
        ),
        (
            &json!("tool"),
            &json!(message),
            &json!({"kind": "terminated", "reason": "toolTimeout"}),
            &json!({"code": "SUBAGENT_TIMEOUT", "message": message})
        )
    );
    // The text before the tool call is the partial answer.
    assert_eq!(r["output"], json!("Running the build."));
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn stderr_chatter_after_the_stream_began_does_not_keep_a_child_alive() {
    let sb = Sandbox::new().scenario("chatter-after-start");
    let out = sb.run("x", &["--idle-timeout", "500ms", "--timeout", "20s"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    assert_eq!(out.result()["timeoutReason"], json!("idle"));
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn a_child_that_only_retries_its_provider_fails_after_the_connect_limit_in_its_own_words() {
    let sb = Sandbox::new().scenario("retrying");
    let out = sb.run(
        "x",
        &[
            "--connect-timeout",
            "1s",
            "--idle-timeout",
            "30s",
            "--kill-grace",
            "1s",
        ],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let r = out.result();
    assert_eq!(json["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    let error = r["error"].as_str().unwrap();
    // pi's own words from its last retry notice, then what orchestrate did.
    assert!(
        error.starts_with("pi could not reach its provider: retry ")
            && error.contains("/99: 503 The server is overloaded or not ready yet.")
            && error.ends_with(
                ". Stopped: it only retried, without progress, for 1000ms (connect timeout)."
            ),
        "{error}"
    );
    assert_eq!(
        r["termination"],
        json!({"kind": "terminated", "reason": "providerUnreachable"})
    );
    // Not retried by orchestrate: the child already retried for the whole connect limit.
    assert_eq!(r["attempts"], json!(1));
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn many_retries_in_a_row_stop_a_child_before_the_connect_limit() {
    let sb = Sandbox::new()
        .scenario("retrying")
        .set("FAKE_AGENT_DELAY_MS", "10");
    let out = sb.run("x", &["--connect-timeout", "60s"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let error = out.result()["error"].as_str().unwrap().to_string();
    assert!(
        error.starts_with("pi could not reach its provider: retry ")
            && error.contains("times in a row without progress."),
        "{error}"
    );
    assert!(out.elapsed.as_secs_f64() < 30.0, "took {:?}", out.elapsed);
}
