//! What leaves the process is sanitized; the session file keeps the raw stream.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::Sandbox;

#[test]
fn secrets_and_home_paths_never_reach_the_parent_but_stay_in_the_session() {
    // A made-up token of the right shape, split so no scanner mistakes this file for a leak.
    let token = concat!("ghp_", "Zq3xT9vLm2Kp8RwYc4Nd7Hf1Jb6Gs0Ae5UiO");
    let text = format!("Found it in /home/alice/project/.env: GITHUB_TOKEN={token}\nAuthorization: Bearer abcdefghijklmnop1234");
    let sb = Sandbox::new()
        .scenario("replay")
        .set("FAKE_AGENT_TEXT", &text);
    // The full shape: every field that leaves the process.
    let out = sb.run("x", &["--details", "full"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    let expected =
        "Found it in ~/project/.env: GITHUB_TOKEN=ghp_[REDACTED]\nAuthorization: Bearer [REDACTED]";
    assert_eq!(r["output"], json!(expected));
    assert_eq!(out.json()["content"][0]["text"], json!(expected));
    assert_eq!(r["displayItems"][0]["text"], json!(expected));
    assert!(
        !out.stdout.contains(token),
        "the token never reaches stdout"
    );
    let session = std::fs::read_to_string(r["sessionFile"].as_str().unwrap()).unwrap();
    assert!(
        session.contains(token),
        "the session file is the raw record"
    );
}
