//! `orchestrate send`: a message to a run still running reaches its child as a new turn of
//! the child's own session once its turn ends, and the result lists it; a run that has
//! ended, or whose CLI cannot continue a session, refuses it and says why. An ACP agent
//! takes it in the same process: as its next prompt, or, with `--interrupt`, after its
//! turn is cancelled.

use crate::support;

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn cli(sb: &Sandbox, args: &[&str]) -> (i32, Value) {
    let out = sb.command(args).output().unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn start(sb: &Sandbox, agent: &str, task: &str) -> String {
    let agents = sb.agents.to_str().unwrap().to_string();
    let (status, v) = cli(
        sb,
        &["run", agent, task, "--agents-dir", &agents, "--background"],
    );
    assert_eq!(status, 0, "{v}");
    v["details"]["runId"].as_str().unwrap().to_string()
}

/// Until the fake child has started (it writes its pid first).
fn wait_for_child(sb: &Sandbox) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sb.pids().is_empty() {
        assert!(Instant::now() < deadline, "the child never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The prompt of each turn the fake child ran, from its session file (a line per run).
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
            serde_json::from_str::<Value>(l).unwrap()["task"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn a_message_sent_mid_turn_is_the_childs_next_turn_and_changes_the_answer() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "The red file.")
        .set("FAKE_AGENT_ANSWER_2", "The blue file, as asked.");
    let run_id = start(&sb, "fake", "find the file");
    wait_for_child(&sb);
    let (status, sent) = cli(
        &sb,
        &["send", &run_id[..6], "look for the blue file instead"],
    );
    assert_eq!(status, 0, "{sent}");
    assert_eq!(
        sent,
        json!({
            "content": [{"type": "text", "text": format!("Sent to run {run_id}: its child reads it in its current turn or as its next one, as its CLI can; the run's result lists it under `messages`, with how it was delivered.")}],
            "details": {"mode": "single", "runId": run_id, "results": []}
        })
    );
    let sent_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (status, mut v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["content"][0]["text"], json!("The blue file, as asked."));
    let single = &mut v["details"]["results"][0];
    let at = single["messages"][0]["at"].as_u64().unwrap();
    assert!(
        at <= sent_at && at + 60_000 > sent_at,
        "sent at {at}, by {sent_at}"
    );
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "look for the blue file instead", "delivery": "afterTurn"}])
    );
    assert_eq!(single["attempts"], json!(2));
    // Both turns' usage: the fake's transcript costs 100 in, 10 out a turn.
    assert_eq!(
        (&single["usage"]["input"], &single["usage"]["output"]),
        (&json!(200), &json!(20))
    );
    // The second turn continued the first's session, told the message.
    assert_eq!(
        turns(&sb, &run_id),
        vec![
            "Task: find the file",
            "Task: look for the blue file instead"
        ]
    );
    // The run's inbox is closed: a message now is refused as late.
    let (status, late) = cli(&sb, &["send", &run_id, "too late"]);
    assert_eq!(status, 2, "{late}");
    assert_eq!(
        late["details"]["error"],
        json!({"code": "INVALID_INPUT", "message": format!("Invalid input: run {run_id} has ended: a message can only reach a run that is still running")})
    );
    sb.assert_no_survivors();
}

#[test]
fn a_run_sent_nothing_has_no_messages_and_one_turn() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_ANSWER_1", "Only one.");
    let run_id = start(&sb, "fake", "find the file");
    let (status, v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["results"][0].get("messages"), None);
    assert_eq!(
        v["details"]["results"][0].get("attempts"),
        None,
        "one attempt"
    );
    assert_eq!(turns(&sb, &run_id), vec!["Task: find the file"]);
}

#[test]
fn a_cli_that_cannot_continue_a_session_refuses_and_names_its_acp_preset() {
    let sb = Sandbox::new().scenario("silent");
    std::fs::write(
        sb.agents.join("gem.md"),
        "---\nname: gem\ndescription: gemini\nbackend: gemini\n---\nYou are a test agent.\n",
    )
    .unwrap();
    let sb = sb.set(
        "ORCHESTRATE_GEMINI_BIN",
        support::fake_agent_bin().to_str().unwrap(),
    );
    let run_id = start(&sb, "gem", "find the file");
    wait_for_child(&sb);
    let (status, v) = cli(&sb, &["send", &run_id, "look elsewhere"]);
    assert_eq!(status, 2, "{v}");
    assert_eq!(
        v["details"]["error"],
        json!({"code": "INVALID_INPUT", "message": format!("Invalid input: run {run_id} runs gemini, which cannot continue a session, so no message can reach it; its ACP preset can: run the agent with `backend: gemini-acp`")})
    );
    assert!(!sb
        .state
        .join("runs")
        .join(&run_id)
        .join("inbox.jsonl")
        .exists());
    let (status, _) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0);
    sb.assert_no_survivors();
}

#[test]
fn a_message_to_no_run_or_an_empty_one_is_refused() {
    let sb = Sandbox::new().scenario("silent");
    let (status, v) = cli(&sb, &["send", "abcd1234", "hello"]);
    assert_eq!(status, 2, "{v}");
    assert_eq!(
        v["details"]["error"]["message"],
        json!("Invalid input: no run abcd1234 (see `orchestrate runs`)")
    );
    let run_id = start(&sb, "fake", "t");
    wait_for_child(&sb);
    let (status, v) = cli(&sb, &["send", &run_id, " \n"]);
    assert_eq!(status, 2, "{v}");
    assert_eq!(
        v["details"]["error"]["message"],
        json!("Invalid input: the message is empty")
    );
    let (status, _) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0);
    sb.assert_no_survivors();
}

/// The turn with the message fails before it answers: the run keeps the answer it had,
/// exits as that answer did, and says what became of the message.
#[test]
fn a_message_turn_that_fails_keeps_the_answer_before_it() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "The red file.")
        .set("FAKE_AGENT_STDERR", "fatal: the session is gone");
    let run_id = start(&sb, "fake", "find the file");
    wait_for_child(&sb);
    // The fake picks its scenario from a `@scenario:` word of its prompt.
    let (status, v) = cli(&sb, &["send", &run_id, "@scenario:fail now"]);
    assert_eq!(status, 0, "{v}");
    let (status, mut v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["content"][0]["text"], json!("The red file."));
    let single = &mut v["details"]["results"][0];
    assert_eq!(single.get("error"), None, "{single}");
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "@scenario:fail now", "delivery": "failed"}])
    );
    let warnings = single["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.as_str().unwrap().starts_with(
            "the turn with the messages sent to the run failed, so the answer is the one before them: "
        ) && w.as_str().unwrap().contains("fatal: the session is gone")),
        "{warnings:?}"
    );
    sb.assert_no_survivors();
}

/// A task of a fan-out takes a message by its own run id; its sibling is not touched.
#[test]
fn a_fan_out_task_takes_a_message_by_its_own_run_id() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "First answer.")
        .set("FAKE_AGENT_ANSWER_2", "Answer after the message.");
    let agents = sb.agents.to_str().unwrap().to_string();
    let child = sb
        .command(&[
            "run",
            "--task",
            "fake=task one",
            "--task",
            "fake=task two",
            "--agents-dir",
            &agents,
        ])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sb.pids().len() < 2 {
        assert!(Instant::now() < deadline, "the children never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The task whose child runs `task one`, by its session file (which the child writes
    // just after its pid: on a busy machine, a moment later).
    let runs = sb.state.join("runs");
    let one = loop {
        let found = std::fs::read_dir(&runs)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .find(|id| {
                std::fs::read_to_string(runs.join(id).join("child/pi-session.jsonl"))
                    .is_ok_and(|s| s.contains("task one"))
            });
        match found {
            Some(id) => break id,
            None => {
                assert!(Instant::now() < deadline, "task one's folder");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let (status, v) = cli(&sb, &["send", &one, "also check the tests"]);
    assert_eq!(status, 0, "{v}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = v["details"]["results"].as_array().unwrap();
    let by_task = |task: &str| {
        results
            .iter()
            .find(|r| r["runId"] == json!(task_id(&runs, task)))
            .unwrap()
            .clone()
    };
    let mut first = by_task("task one");
    first["messages"][0]["at"] = json!("AT");
    assert_eq!(
        first["messages"],
        json!([{"at": "AT", "text": "also check the tests", "delivery": "afterTurn"}])
    );
    assert_eq!(by_task("task two").get("messages"), None);
    assert_eq!(
        turns(&sb, &one),
        vec!["Task: task one", "Task: also check the tests"]
    );
    sb.assert_no_survivors();
}

fn task_id(runs: &std::path::Path, task: &str) -> String {
    std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|id| {
            std::fs::read_to_string(runs.join(id).join("child/pi-session.jsonl"))
                .is_ok_and(|s| s.lines().next().is_some_and(|l| l.contains(task)))
        })
        .unwrap()
}

/// The child can read the run folder, and a lock needs no more: whoever holds the inbox's
/// lock (here the test, as a hostile child would) makes `send` give up with an error
/// after a few seconds, never hang; the run still ends with its answer.
#[test]
fn a_held_inbox_lock_makes_send_fail_not_hang() {
    use std::os::fd::AsRawFd;
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1000")
        .set("FAKE_AGENT_ANSWER_1", "The red file.");
    let run_id = start(&sb, "fake", "find the file");
    wait_for_child(&sb);
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(sb.state.join("runs").join(&run_id).join("inbox.lock"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let started = Instant::now();
    let (status, v) = cli(&sb, &["send", &run_id, "too busy"]);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(status, 2, "{v}");
    let message = v["details"]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("inbox.lock is held by another process for over 5s"),
        "{message}"
    );
    drop(lock);
    let (status, v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["content"][0]["text"], json!("The red file."));
    assert_eq!(v["details"]["results"][0].get("messages"), None);
}

/// A background run of the fake ACP agent (`FAKE_ACP=turns`), whose first turn takes
/// `turn_ms` (or waits for a cancel, with `FAKE_ACP_HOLD=1`).
fn acp_sandbox(vars: &[(&str, &str)]) -> Sandbox {
    let mut sb = Sandbox::new().scenario("acp").set("FAKE_ACP", "turns");
    for (k, v) in vars {
        sb = sb.set(k, v);
    }
    std::fs::write(
        sb.agents.join("acp.md"),
        format!(
            "---\nname: acp\ndescription: d\ntools: read\nbackend: acp\nacp_command: {}\n---\nBe brief.\n",
            support::fake_agent_bin().display()
        ),
    )
    .unwrap();
    sb
}

/// What orchestrate wrote to the ACP agent's stdin: each line's method.
fn acp_methods(sb: &Sandbox, run_id: &str) -> Vec<String> {
    let path = sb.state.join("runs").join(run_id).join("stdin.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["method"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn an_acp_agent_takes_a_message_as_its_next_prompt_in_the_same_process() {
    let sb = acp_sandbox(&[("FAKE_ACP_TURN_MS", "2000")]);
    let run_id = start(&sb, "acp", "find the file");
    wait_for_child(&sb);
    let (status, sent) = cli(&sb, &["send", &run_id, "look for the blue file instead"]);
    assert_eq!(status, 0, "{sent}");
    let (status, mut v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(
        v["content"][0]["text"],
        json!("Answer 2: look for the blue file instead")
    );
    let single = &mut v["details"]["results"][0];
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "look for the blue file instead", "delivery": "nextPrompt"}])
    );
    // One process served both turns, in one session.
    assert_eq!(single.get("attempts"), None, "{single}");
    assert_eq!(sb.pids().len(), 1);
    assert_eq!(
        acp_methods(&sb, &run_id),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/prompt"
        ]
    );
    assert_eq!(
        (&single["usage"]["input"], &single["usage"]["output"]),
        (&json!(200), &json!(20))
    );
    sb.assert_no_survivors();
}

#[test]
fn send_interrupt_cancels_an_acp_agents_turn_and_its_message_is_the_next_prompt() {
    let sb = acp_sandbox(&[("FAKE_ACP_HOLD", "1")]);
    let run_id = start(&sb, "acp", "find the file");
    wait_for_child(&sb);
    let (status, sent) = cli(
        &sb,
        &["send", &run_id, "stop and list the files", "--interrupt"],
    );
    assert_eq!(status, 0, "{sent}");
    assert_eq!(
        sent["content"][0]["text"],
        json!(format!("Sent to run {run_id}: its child's current turn is cancelled for it where its CLI can (ACP, pi), else it is a new turn once that turn ends; the run's result lists it under `messages`, with how it was delivered."))
    );
    let (status, mut v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(
        v["content"][0]["text"],
        json!("Answer 2: stop and list the files")
    );
    let single = &mut v["details"]["results"][0];
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "stop and list the files", "delivery": "interrupted"}])
    );
    assert_eq!(single.get("attempts"), None, "{single}");
    assert_eq!(sb.pids().len(), 1);
    assert_eq!(
        acp_methods(&sb, &run_id),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/cancel",
            "session/prompt"
        ]
    );
    sb.assert_no_survivors();
}

/// An agent that never answers (here: not even initialize) takes no message: the run ends
/// on its idle timeout as it would have, and the message is listed as not delivered.
#[test]
fn a_message_to_an_acp_agent_that_never_answers_is_not_delivered_and_the_run_times_out() {
    let sb = acp_sandbox(&[("FAKE_ACP", "silent-init")]);
    let agents = sb.agents.to_str().unwrap().to_string();
    let (status, v) = cli(
        &sb,
        &[
            "run",
            "acp",
            "find the file",
            "--agents-dir",
            &agents,
            "--background",
            "--idle-timeout",
            "3s",
        ],
    );
    assert_eq!(status, 0, "{v}");
    let run_id = v["details"]["runId"].as_str().unwrap().to_string();
    wait_for_child(&sb);
    let (status, sent) = cli(&sb, &["send", &run_id, "hello?", "--interrupt"]);
    assert_eq!(status, 0, "{sent}");
    let (status, mut v) = cli(&sb, &["wait", &run_id, "--timeout", "60s"]);
    assert_eq!(status, 124, "{v}");
    let single = &mut v["details"]["results"][0];
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "hello?", "delivery": "notDelivered"}])
    );
    assert_eq!(acp_methods(&sb, &run_id), ["initialize"]);
    sb.assert_no_survivors();
}
