//! `-o stream-json`: streaming updates while the child runs, then the result. Updates are
//! small (counters and the latest text, no growing list) and never show part of a secret
//! the sanitizer has not yet seen whole.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{normalized, Sandbox};

/// Secrets as a model might write them, each with the part a mask may keep (at most a
/// public vendor prefix, as `docs/sanitizing.md` says). None of them may show past that part in any update.
const SECRETS: [(&str, &str); 5] = [
    ("ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5b", "ghp_"),
    ("AKIAQ7WX2ZP4LMN5RT8Y", "AKIA"),
    (
        "sk-proj-Tq9XvB2mK7pL4wR8zN3cF6hJ1sD5gA0eY2uI7oQ4xW9tV3b",
        "sk-proj-",
    ),
    (
        "postgres://app:Xy9mQ2vL8wRk4TzP@db.internal:5432/prod",
        "postgres://app:",
    ),
    (PEM_BODY_LINE, ""),
];

const PEM_BODY_LINE: &str = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9OiJjRazXBZ1BjP5CE/Wm/Rr500P";

fn secret_text() -> String {
    format!(
        "Here is what I found in the repo.\n\
         The CI token is {} and the AWS key id is {}.\n\
         OPENAI key: {}\n\
         Database: {}\n\
         -----BEGIN RSA PRIVATE KEY-----\n\
         {PEM_BODY_LINE}\n\
         RRGmYXB2Yk7vH0aG1x9eVn8sQw3LtZc5Kp2Dj4Fh6Um8Nq0Wr2Ys4Tb6Vc8Xe0Za\n\
         -----END RSA PRIVATE KEY-----\n\
         That is all.",
        SECRETS[0].0, SECRETS[1].0, SECRETS[2].0, SECRETS[3].0
    )
}

/// The stream-json lines: every update, then the result.
fn lines(out: &support::RunOutput) -> Vec<Value> {
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn streaming_updates_never_show_a_secret_before_the_sanitizer_has_seen_it_whole() {
    let sb = Sandbox::new()
        .scenario("stream-text")
        .set("FAKE_AGENT_TEXT", &secret_text())
        .set("FAKE_AGENT_DELTA_CHARS", "2")
        .set("FAKE_AGENT_DELAY_MS", "8");
    let out = sb.run("report", &["-o", "stream-json"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let lines = lines(&out);
    let (result, updates) = lines.split_last().expect("at least the result");
    assert!(
        updates.len() >= 5,
        "the text streams over about 2 s, so several updates go out: {}",
        out.stdout
    );
    let texts: Vec<&str> = updates
        .iter()
        .map(|u| u["content"][0]["text"].as_str().expect("update text"))
        .collect();
    for (secret, public) in SECRETS {
        // The public part and one more character: already too much.
        let leak: String = secret.chars().take(public.chars().count() + 1).collect();
        for (i, text) in texts.iter().enumerate() {
            assert!(
                !text.contains(&leak),
                "update {i} shows {leak:?} of {secret:?}: {text:?}"
            );
        }
    }
    // The updates did show the text as it came, line by line: not a test of an empty view.
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Here is what I found in the repo.\n")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("[REDACTED]")),
        "a finished line with a secret shows masked: {texts:?}"
    );
    // And the result masks every one.
    let answer = result["content"][0]["text"].as_str().unwrap();
    for (secret, public) in SECRETS {
        let past_public: String = secret
            .chars()
            .skip(public.chars().count())
            .take(6)
            .collect();
        assert!(!answer.contains(&past_public), "{secret:?} in {answer:?}");
    }
    assert!(answer.ends_with("That is all."), "{answer}");
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
