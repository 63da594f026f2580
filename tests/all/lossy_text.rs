//! Damaged text in the child's stream costs the damaged characters, never the answer: a
//! lone UTF-16 surrogate escape (valid JSON that node prints for a broken string) and a raw
//! byte that is not UTF-8 both become U+FFFD, and the line's text and usage still count.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{normalized, Sandbox};

const SESSION_HEADER: &str = r#"{"type":"session","version":3,"id":"s-lossy","timestamp":"2026-03-15T10:00:00.000Z","cwd":"/repo"}"#;

/// A pi `message_end` of an assistant message with `text` (already JSON-escaped) and usage.
fn message_end(text: &str, input: u64, output: u64, cost: f64, stop: &str) -> String {
    format!(
        r#"{{"type":"message_end","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"usage":{{"input":{input},"output":{output},"cacheRead":0,"cacheWrite":0,"cost":{{"total":{cost}}}}},"stopReason":"{stop}"}}}}"#
    )
}

#[test]
fn a_lone_surrogate_and_an_invalid_byte_become_replacement_characters() {
    let sb = Sandbox::new().scenario("replay");
    let mut transcript: Vec<u8> = Vec::new();
    transcript.extend_from_slice(SESSION_HEADER.as_bytes());
    transcript.push(b'\n');
    // Turn 1: a raw Latin-1 byte (0xE9, "é") in place of the `#`: not UTF-8.
    let mut first = message_end("caf#", 100, 10, 0.001, "toolUse").into_bytes();
    let at = first.iter().position(|b| *b == b'#').unwrap();
    first[at] = 0xE9;
    transcript.extend_from_slice(&first);
    transcript.push(b'\n');
    // Turn 2, the final answer: a lone high surrogate, as node's JSON.stringify writes it.
    transcript
        .extend_from_slice(message_end(r"Answer: \ud800 kept", 200, 20, 0.002, "stop").as_bytes());
    transcript.push(b'\n');
    transcript.extend_from_slice(br#"{"type":"agent_end","messages":[]}"#);
    transcript.push(b'\n');
    let path = sb.root.path().join("damaged.jsonl");
    std::fs::write(&path, &transcript).unwrap();
    let sb = sb.set("FAKE_AGENT_TRANSCRIPT", path.to_str().unwrap());

    let out = sb.run("x", &["--details", "full"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let answer = "Answer: \u{FFFD} kept";
    assert_eq!(
        normalized(out.json()),
        json!({
            "content": [{"type": "text", "text": answer}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "agent": "fake", "task": "x", "exitCode": 0,
                    "usage": {"input": 300, "output": 30, "cacheRead": 0, "cacheWrite": 0, "cost": 0.003, "turns": 2},
                    "sessionFile": "SESSION", "output": answer,
                    "displayItems": [
                        {"type": "text", "text": "caf\u{FFFD}"},
                        {"type": "text", "text": answer}
                    ],
                    "backend": "pi", "durationMs": 0, "attempts": 1,
                    "childSessionId": "s-lossy",
                    "termination": {"kind": "exited", "code": 0},
                    "sandbox": {"mode": "off", "mechanism": "none"},
                    "network": {"mode": "on"}
                }]
            }
        })
    );
}
