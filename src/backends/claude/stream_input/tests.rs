use super::*;
use crate::live::inbox::{queue_for_test, Mailbox};
use crate::session::RunDir;
use pretty_assertions::assert_eq;
use serde_json::Value;

/// Lines as claude 2.1.332 prints them, cut to the fields read.
const INIT: &str = r#"{"type":"system","subtype":"init","session_id":"s-1","tools":[]}"#;
const TOOL_CALL: &str = r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"sleep 4"}}]},"session_id":"s-1"}"#;
const TOOL_RESULT: &str = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"slept"}]},"session_id":"s-1"}"#;
const INTERRUPTED: &str = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"","num_turns":3,"total_cost_usd":0.1,"usage":{"input_tokens":50,"output_tokens":5},"errors":["[ede_diagnostic] result_type=user"]}"#;
const FAILED: &str = r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500","num_turns":1,"total_cost_usd":0.1,"usage":{"input_tokens":50,"output_tokens":5}}"#;

fn result(text: &str, cost: f64) -> String {
    format!(
        r#"{{"type":"result","subtype":"success","is_error":false,"result":"{text}","num_turns":1,"total_cost_usd":{cost},"usage":{{"input_tokens":50,"output_tokens":5}},"session_id":"s-1"}}"#
    )
}

fn replay(text: &str) -> String {
    format!(
        r#"{{"type":"user","message":{{"role":"user","content":"{text}"}},"session_id":"s-1","parent_tool_use_id":null,"isReplay":true}}"#
    )
}

fn started() -> (
    ClaudeStreamDialect,
    ChildInput,
    Mailbox,
    RunDir,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = RunDir {
        path: dir.path().to_path_buf(),
    };
    let mut d = ClaudeStreamDialect::new("find the file".into());
    let input = ChildInput::new();
    let mailbox = Mailbox::new(&run_dir);
    d.attach(input.clone());
    assert!(d.listen(Box::new(mailbox.clone())));
    assert_eq!(written(&input), ["user find the file"]);
    let events = feed(&mut d, &[INIT, &replay("find the file")]);
    assert_eq!(events, [r#"SessionId("s-1")"#]);
    (d, input, mailbox, run_dir, dir)
}

fn feed(d: &mut ClaudeStreamDialect, lines: &[&str]) -> Vec<String> {
    let mut events = Vec::new();
    for l in lines {
        assert!(
            d.parse_line(l, &mut |e| events.push(format!("{e:?}"))),
            "{l}"
        );
    }
    events
}

/// What was written to claude's stdin: user messages by their text, control requests by
/// their subtype.
fn written(input: &ChildInput) -> Vec<String> {
    input
        .drain_lines()
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            match v["type"].as_str().unwrap() {
                "user" => {
                    assert_eq!(v["message"]["role"], "user", "{l}");
                    format!("user {}", v["message"]["content"].as_str().unwrap())
                }
                "control_request" => {
                    assert!(v["request_id"].as_str().is_some_and(|id| !id.is_empty()));
                    format!("control {}", v["request"]["subtype"].as_str().unwrap())
                }
                other => panic!("unexpected line {other}: {l}"),
            }
        })
        .collect()
}

fn deliveries(mailbox: &Mailbox) -> Vec<(String, Delivery)> {
    mailbox
        .messages()
        .into_iter()
        .map(|m| (m.text, m.delivery))
        .collect()
}

fn usage_total(input: u64, output: u64, cost: f64, turns: u64) -> String {
    format!(
        "{:?}",
        AgentEvent::UsageTotal(Usage {
            input,
            output,
            cost,
            turns,
            ..Usage::default()
        })
    )
}

fn final_text(text: &str) -> String {
    format!(
        "{:?}",
        crate::backends::text_event(
            vec![&serde_json::value::RawValue::from_string(format!("\"{text}\"")).unwrap()],
            "",
            crate::events::TextKind::Final
        )
    )
}

#[test]
fn a_message_taken_while_a_tool_runs_is_steered_and_the_run_ends_with_the_input_closed() {
    let (mut d, input, mailbox, run_dir, _dir) = started();
    feed(&mut d, &[TOOL_CALL]);
    queue_for_test(&run_dir, "look in src", false);
    d.check_mail();
    assert_eq!(written(&input), ["user look in src"]);
    feed(&mut d, &[TOOL_RESULT, &replay("look in src")]);
    assert!(input.is_open());
    let events = feed(&mut d, &[&result("in src", 0.2)]);
    assert_eq!(
        events,
        [
            usage_total(50, 5, 0.2, 1),
            final_text("in src"),
            "Terminal".to_string()
        ]
    );
    assert!(!input.is_open());
    assert_eq!(
        deliveries(&mailbox),
        [("look in src".to_string(), Delivery::Steered)]
    );
}

#[test]
fn a_message_claude_takes_after_the_turn_is_its_next_turn_and_the_usage_adds_up() {
    let (mut d, input, mailbox, run_dir, _dir) = started();
    queue_for_test(&run_dir, "and the tests", false);
    d.check_mail();
    assert_eq!(written(&input), ["user and the tests"]);
    // The turn ends without it: claude goes on with it, so the run does not end here.
    let events = feed(&mut d, &[&result("first", 0.1)]);
    assert_eq!(
        events,
        [usage_total(50, 5, 0.1, 1), final_text("first")],
        "no end yet"
    );
    assert!(input.is_open());
    feed(&mut d, &[INIT, &replay("and the tests")]);
    let events = feed(&mut d, &[&result("second", 0.2)]);
    assert_eq!(
        events,
        [
            usage_total(100, 10, 0.2, 2),
            final_text("second"),
            "Terminal".to_string()
        ]
    );
    assert!(!input.is_open());
    assert_eq!(written(&input), Vec::<String>::new());
    assert_eq!(
        deliveries(&mailbox),
        [("and the tests".to_string(), Delivery::NextPrompt)]
    );
}

#[test]
fn messages_that_came_as_the_turn_ended_are_the_next_user_message_together() {
    let (mut d, input, mailbox, run_dir, _dir) = started();
    queue_for_test(&run_dir, "one", false);
    queue_for_test(&run_dir, "two", false);
    let events = feed(&mut d, &[&result("first", 0.1)]);
    assert!(!events.contains(&"Terminal".to_string()), "{events:?}");
    assert_eq!(written(&input), ["user one\n\ntwo"]);
    feed(&mut d, &[INIT, &replay("one\\n\\ntwo")]);
    let events = feed(&mut d, &[&result("second", 0.2)]);
    assert_eq!(events.last().map(String::as_str), Some("Terminal"));
    assert_eq!(
        deliveries(&mailbox),
        [
            ("one".to_string(), Delivery::NextPrompt),
            ("two".to_string(), Delivery::NextPrompt)
        ]
    );
}

#[test]
fn an_interrupting_message_interrupts_the_turn_and_is_the_next_user_message() {
    let (mut d, input, mailbox, run_dir, _dir) = started();
    feed(&mut d, &[TOOL_CALL]);
    queue_for_test(&run_dir, "stop, look in src", true);
    d.check_mail();
    assert_eq!(written(&input), ["control interrupt"]);
    // The interrupted turn's failure is not the run's.
    let events = feed(&mut d, &[INTERRUPTED]);
    assert_eq!(events, ["TurnEnd".to_string(), usage_total(50, 5, 0.1, 1)]);
    assert_eq!(written(&input), ["user stop, look in src"]);
    feed(&mut d, &[INIT, &replay("stop, look in src")]);
    let events = feed(&mut d, &[&result("in src", 0.2)]);
    assert_eq!(
        events,
        [
            usage_total(100, 10, 0.2, 2),
            final_text("in src"),
            "Terminal".to_string()
        ]
    );
    assert_eq!(
        deliveries(&mailbox),
        [("stop, look in src".to_string(), Delivery::Interrupted)]
    );
}

#[test]
fn a_stop_interrupts_the_turn_whose_end_ends_the_run() {
    let (mut d, input, _mailbox, _run_dir, _dir) = started();
    feed(&mut d, &[TOOL_CALL]);
    assert!(d.cancel());
    assert_eq!(written(&input), ["control interrupt"]);
    let events = feed(&mut d, &[INTERRUPTED]);
    assert_eq!(
        events,
        [
            "TurnEnd".to_string(),
            usage_total(50, 5, 0.1, 1),
            "Terminal".to_string()
        ]
    );
    assert!(!input.is_open());
    assert!(!d.cancel(), "nothing left to interrupt");
}

#[test]
fn a_failed_turn_ends_the_run_with_its_error_and_the_message_it_carried_failed() {
    let (mut d, input, mailbox, run_dir, _dir) = started();
    feed(&mut d, &[TOOL_CALL]);
    queue_for_test(&run_dir, "look in src", false);
    d.check_mail();
    feed(&mut d, &[TOOL_RESULT, &replay("look in src")]);
    let events = feed(&mut d, &[FAILED]);
    assert_eq!(
        events,
        [
            usage_total(50, 5, 0.1, 1),
            format!("{:?}", AgentEvent::ProviderError("API Error: 500".into())),
            "Terminal".to_string()
        ]
    );
    assert!(!input.is_open());
    assert_eq!(
        deliveries(&mailbox),
        [("look in src".to_string(), Delivery::Failed)]
    );
}

#[test]
fn a_tool_result_that_quotes_the_replay_mark_is_not_a_message_taken() {
    let (mut d, input, _mailbox, run_dir, _dir) = started();
    feed(&mut d, &[TOOL_CALL]);
    queue_for_test(&run_dir, "look in src", false);
    d.check_mail();
    assert_eq!(written(&input), ["user look in src"]);
    // A tool's output can hold the mark only escaped, and a line read whole says what
    // it is.
    let quoting = r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"{\"type\":\"user\",\"isReplay\":true}"}]}}"#;
    assert!(!quoting.contains(REPLAY_MARK));
    let spaced = r#"{"type":"assistant","isReplay" :true,"message":{"id":"m2","content":[{"type":"text","text":"\"isReplay\":true"}]}}"#;
    let events = feed(&mut d, &[quoting, spaced, &result("first", 0.1)]);
    assert!(!events.contains(&"Terminal".to_string()), "{events:?}");
    assert!(input.is_open(), "the message is still untaken");
    feed(&mut d, &[&replay("look in src")]);
    let events = feed(&mut d, &[&result("second", 0.2)]);
    assert_eq!(events.last().map(String::as_str), Some("Terminal"));
}
