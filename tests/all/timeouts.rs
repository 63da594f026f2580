//! Runtime and idle timeouts: exit 124, the reason, the exact message, partial output
//! kept, and the whole tree gone.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{normalized, Sandbox};

#[test]
fn a_silent_child_hits_the_idle_timeout() {
    let sb = Sandbox::new().scenario("silent");
    let out = sb.run("x", &["--idle-timeout", "500ms", "--kill-grace", "1s"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let message = "Subagent timed out after 500ms without activity.";
    assert_eq!(
        normalized(out.json()),
        json!({
            "content": [{"type": "text", "text": message}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "agent": "fake", "task": "x", "exitCode": 124,
                    "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                    "error": message,
                    "sessionFile": "SESSION", "output": "",
                    "timeoutReason": "idle", "backend": "pi", "durationMs": 0, "attempts": 1,
                    // The child died of the SIGTERM, within the grace.
                    "termination": {"kind": "terminated", "reason": "idleTimeout"},
                    "sandbox": {"mode": "off", "mechanism": "none"}
                }],
                "error": {"code": "SUBAGENT_TIMEOUT", "message": message}
            }
        })
    );
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn a_chattering_child_hits_the_runtime_timeout_and_keeps_its_partial_text() {
    let sb = Sandbox::new().scenario("chatter");
    let out = sb.run("x", &["--timeout", "1s", "--idle-timeout", "300ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        r["timeoutReason"],
        json!("runtime"),
        "output every 100ms keeps the idle timer from firing"
    );
    assert_eq!(out.error_code(), "SUBAGENT_TIMEOUT");
    assert_eq!(
        r["error"],
        json!("Subagent exceeded maximum runtime after 1000ms.")
    );
    let partial = r["output"].as_str().unwrap();
    assert!(
        partial.starts_with("tick 0 tick 1 "),
        "partial text kept: {partial:?}"
    );
    let content = out.json()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        content.starts_with(
            "Subagent exceeded maximum runtime after 1000ms.\n\nPartial output:\ntick 0"
        ),
        "{content}"
    );
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_the_grace() {
    let sb = Sandbox::new().scenario("ignore-term");
    let out = sb.run("x", &["--timeout", "300ms", "--kill-grace", "700ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let message = "Subagent exceeded maximum runtime after 300ms.";
    assert_eq!(
        normalized(out.json()),
        json!({
            "content": [{"type": "text", "text": message}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "agent": "fake", "task": "x", "exitCode": 124,
                    "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                    "error": message,
                    "sessionFile": "SESSION", "output": "",
                    "timeoutReason": "runtime", "backend": "pi", "durationMs": 0, "attempts": 1,
                    "childSessionId": "0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c",
                    // SIGTERM alone did not end it: SIGKILL once the grace ran out.
                    "termination": {"kind": "killed", "reason": "runtimeTimeout", "kill": "escalated"},
                    "sandbox": {"mode": "off", "mechanism": "none"}
                }],
                "error": {"code": "SUBAGENT_TIMEOUT", "message": message}
            }
        })
    );
    assert!(out.elapsed.as_secs_f64() < 10.0, "took {:?}", out.elapsed);
}

#[test]
fn a_timeout_kills_grandchildren_that_ignore_sigterm() {
    let sb = Sandbox::new().scenario("grandchild-hang");
    let out = sb.run("x", &["--timeout", "500ms", "--kill-grace", "500ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    assert_eq!(sb.pids().len(), 2, "leader and grandchild both recorded");
    // `run` already asserted that neither survives.
    let r = out.result();
    // The leader died of the SIGTERM; the grandchild ignored it, kept the pipes and was
    // killed when the grace ran out.
    assert_eq!(
        (&r["termination"], &r["leak"], &r["leakedProcesses"]),
        (
            &json!({"kind": "terminated", "reason": "runtimeTimeout"}),
            &json!({"kind": "heldPipes"}),
            &json!(true)
        )
    );
}

#[test]
fn stderr_activity_alone_keeps_the_idle_timer_quiet() {
    let sb = Sandbox::new().scenario("chatter-stderr");
    let out = sb.run("x", &["--timeout", "1500ms", "--idle-timeout", "500ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    assert_eq!(out.result()["timeoutReason"], json!("runtime"));
}
