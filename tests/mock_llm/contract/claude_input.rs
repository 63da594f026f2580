//! claude's streamed input (`--input-format stream-json`): where claude takes a message
//! sent while its model answers without tools (a turn of its own, after the one under
//! way), and `send --interrupt`. A message taken while its shell tool runs is
//! `message_steered`'s case, shared with pi.

use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{report, setup, Finished, Sandbox, REPORT_LINE_CHARS, WALL_CLOCK};
use crate::mock_llm::contract::cli::Cli;
use crate::mock_llm::{MockLlm, MockUsage, Reply, Script};

const MESSAGE: &str = "Look for the blue file instead.";
const USAGE: MockUsage = MockUsage {
    input: 50,
    output: 5,
    cached: 0,
};

/// The model holds its first answer (no tool call) until the message is on claude's
/// stdin; claude ends that turn, then runs the message as its next turn in the same
/// process, whose answer is the run's.
pub fn message_while_the_model_answers(cli: &Cli, bin: &Path) {
    let (mock, sb) = setup(cli, bin, |sb| {
        Script::sequence(vec![
            Reply::after_file(
                &sb.home.join("release"),
                Reply::text("The red file.", USAGE),
            ),
            Reply::text("The blue file, as asked.", USAGE),
        ])
    });
    let out = send_and_release(&mock, &sb, &[], "message while the model answers");
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(r["output"], json!("The blue file, as asked."));
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": MESSAGE, "delivery": "nextPrompt"}])
    );
    assert_eq!(stdin_lines(&sb, &r), ["user", "user"]);
    // Both turns' tokens, added up: each of claude's results gives its turn's own.
    assert_eq!(r["usage"]["input"], json!(100), "{r}");
    assert_eq!(r["usage"]["output"], json!(10), "{r}");
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 2, "{:#?}", mock.requests());
    let asked = reqs[1].body.to_string();
    assert!(
        asked.contains(MESSAGE)
            && asked.contains("The red file.")
            && asked.contains("Find the file."),
        "{asked}"
    );
    assert!(!reqs[0].body.to_string().contains(MESSAGE));
}

/// The model holds its first answer; `send --interrupt` interrupts claude's turn (a
/// control request), and the message, the next user message to the same process, is
/// answered; the interrupted turn's own failure is not the run's.
pub fn interrupt_mid_run(cli: &Cli, bin: &Path) {
    let (mock, sb) = setup(cli, bin, |_| {
        Script::sequence(vec![
            Reply::hang("Thinking about it"),
            Reply::text("The blue file.", USAGE),
        ])
    });
    let out = send_and_release(&mock, &sb, &["--interrupt"], "interrupt mid-run");
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(r["output"], json!("The blue file."));
    assert_eq!(r["error"], Value::Null, "{r}");
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": MESSAGE, "delivery": "interrupted"}])
    );
    assert_eq!(stdin_lines(&sb, &r), ["user", "control_request", "user"]);
    let asked = mock
        .conversation()
        .last()
        .expect("a request")
        .body
        .to_string();
    assert!(asked.contains(MESSAGE), "{asked}");
}

/// Starts the run of "Find the file.", sends it the message (with `flags`) once the model
/// was asked, waits until orchestrate wrote it to claude's stdin, releases an answer held
/// on the file `release`, and returns the run's end, which must be a success.
fn send_and_release(mock: &MockLlm, sb: &Sandbox, flags: &[&str], what: &str) -> Finished {
    let start = Instant::now();
    let child = sb
        .command("worker", "Find the file.", &[])
        .spawn()
        .expect("spawn orchestrate");
    assert!(
        mock.wait_for_conversation(1, WALL_CLOCK),
        "claude never asked the model"
    );
    let run = only_run(sb);
    let mut args = vec!["send", run.as_str(), MESSAGE];
    args.extend_from_slice(flags);
    let sent = sb
        .in_sandbox(super::super::orchestrate_command(&args))
        .output()
        .unwrap();
    assert_eq!(sent.status.code(), Some(0), "{sent:?}");
    let stdin = sb.state.join("runs").join(&run).join("stdin.jsonl");
    let deadline = Instant::now() + WALL_CLOCK;
    while std::fs::read_to_string(&stdin).map_or(0, |s| s.lines().count()) < 2 {
        assert!(
            Instant::now() < deadline,
            "the message never reached claude's stdin"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // claude reads its stdin as it comes: a moment for it to take the line in.
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(sb.home.join("release"), "").unwrap();
    let out = super::super::wait_bounded(child, start, WALL_CLOCK);
    report(what, mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out
}

fn only_run(sb: &Sandbox) -> String {
    let runs: Vec<_> = std::fs::read_dir(sb.state.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The types of the lines orchestrate wrote to claude's stdin, once it is shown that one
/// process served the whole run.
fn stdin_lines(sb: &Sandbox, r: &Value) -> Vec<String> {
    assert_eq!(r["attempts"], json!(1), "{r}");
    let run = sb.state.join("runs").join(only_run(sb));
    assert!(!run.join("stdin.attempt-2.jsonl").exists());
    std::fs::read_to_string(run.join("stdin.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}
