//! `run --resume RUN_ID "follow-up"`: the earlier run's agent and child session continue.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::Sandbox;

#[test]
fn a_pi_run_resumes_from_a_copy_of_its_session() {
    let sb = Sandbox::new().scenario("replay").transcript("short.jsonl");
    // The full record: the child's session id and the agent are not in a lean success.
    let first = sb.run("first task", &["--details", "full"]);
    assert_eq!(first.status, 0, "{}", first.stderr);
    let first_id = first.json()["details"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        first.result()["childSessionId"],
        json!("0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c")
    );

    // A unique prefix of the id will do, as for `show`, `wait` and `stop`.
    let second = sb.run_args(&[
        "run",
        "--resume",
        &first_id[..4],
        "follow-up question",
        "--agents-dir",
        sb.agents.to_str().unwrap(),
        "--details",
        "full",
    ]);
    assert_eq!(second.status, 0, "{}", second.stderr);
    let r = second.result();
    assert_eq!(
        r["agent"],
        json!("fake"),
        "the agent comes from the earlier run"
    );
    assert_eq!(r["task"], json!("follow-up question"));
    let second_id = second.json()["details"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(second_id, first_id);
    let session = sb
        .state
        .join("runs")
        .join(&second_id)
        .join("child/pi-session.jsonl");
    let argv = sb.argv_json();
    let args: Vec<&str> = argv["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let at = args
        .iter()
        .position(|a| *a == "--session")
        .expect("--session passed");
    assert_eq!(args[at + 1], session.to_str().unwrap());
    // The earlier session, continued: its line, then this run's.
    assert_eq!(
        std::fs::read_to_string(&session).unwrap(),
        "{\"type\":\"session\",\"task\":\"Task: first task\"}\n{\"type\":\"session\",\"task\":\"Task: follow-up question\"}\n"
    );
    let earlier = sb
        .state
        .join("runs")
        .join(&first_id)
        .join("child/pi-session.jsonl");
    assert_eq!(
        std::fs::read_to_string(earlier).unwrap().lines().count(),
        1,
        "the earlier run's record is untouched"
    );
}

#[test]
fn resume_errors_say_what_is_missing() {
    let sb = Sandbox::new().scenario("replay");
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "--resume",
        "deadbeef",
        "more",
        "--agents-dir",
        &agents,
    ]);
    assert_eq!(out.status, 2);
    assert!(out.json()["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("run deadbeef has no result to continue"));
    let out = sb.run_args(&[
        "run",
        "--resume",
        "not-an-id",
        "more",
        "--agents-dir",
        &agents,
    ]);
    assert_eq!(out.status, 2);
    assert!(out.json()["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--resume: invalid run id \"not-an-id\": expected a run id as `orchestrate runs` prints it (8 hex digits), or its first digits"));

    let first = sb.run("first", &[]);
    let id = first.json()["details"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let out = sb.run_args(&[
        "run",
        "--resume",
        &id,
        "more",
        "--backend",
        "gemini",
        "--agents-dir",
        &agents,
    ]);
    assert_eq!(out.status, 2);
    assert_eq!(
        out.json()["details"]["error"]["message"],
        json!("Invalid input: agent fake: cannot resume: the gemini backend cannot continue an earlier session (claude, pi, codex, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp and qwen-acp can)")
    );
}
