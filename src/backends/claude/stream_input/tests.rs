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
    started_with(PermissionPolicy::default())
}

fn started_with(
    policy: PermissionPolicy,
) -> (
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
    let mut d = ClaudeStreamDialect::new("find the file".into(), policy);
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
                // An answer to claude's request: its id, and what it says.
                "control_response" => {
                    let r = &v["response"];
                    match r["subtype"].as_str().unwrap() {
                        "success" => {
                            let a = &r["response"];
                            let said = match a["behavior"].as_str().unwrap() {
                                "allow" => format!("allow {}", a["updatedInput"]),
                                "deny" => format!("deny {}", a["message"].as_str().unwrap()),
                                other => panic!("unexpected behavior {other}: {l}"),
                            };
                            format!("answer {} {said}", r["request_id"].as_str().unwrap())
                        }
                        "error" => format!(
                            "error {} {}",
                            r["request_id"].as_str().unwrap(),
                            r["error"].as_str().unwrap()
                        ),
                        other => panic!("unexpected response {other}: {l}"),
                    }
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

// claude's permission hook.

use crate::backends::ask_parent::{Answer, AnswerFuture, Asker, Parent};
use crate::backends::permissions::{DecidedBy, Decision, PermissionMode, PermissionRecord};
use crate::backends::tools::Tool;
use crate::sandbox::SandboxMode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A `can_use_tool` request as claude 2.1.332 prints it.
fn can_use(id: &str, tool: &str, input: Value) -> String {
    json!({
        "type": "control_request",
        "request_id": id,
        "request": {
            "subtype": "can_use_tool",
            "tool_name": tool,
            "display_name": tool,
            "input": input,
            "permission_suggestions": [],
            "tool_use_id": "t1",
        },
    })
    .to_string()
}

fn policy(
    mode: PermissionMode,
    tools: &[&str],
    readonly: bool,
    sandbox: SandboxMode,
) -> PermissionPolicy {
    PermissionPolicy {
        mode,
        tools: tools.iter().map(|t| Tool::parse(t)).collect(),
        readonly,
        sandbox,
        cwd: "/work/repo".into(),
        workspace: vec!["/work/repo".into()],
        parent: None,
    }
}

fn record(tool: &str, title: &str, decision: Decision, by: DecidedBy, why: Option<&str>) -> String {
    format!(
        "{:?}",
        AgentEvent::Permission(PermissionRecord {
            tool: tool.into(),
            decision,
            by,
            title: Some(title.into()),
            reason: why.map(str::to_string),
        })
    )
}

#[test]
fn each_request_is_answered_by_the_policy_and_recorded() {
    let reader = policy(
        PermissionMode::Policy,
        &["read", "grep", "bash"],
        true,
        SandboxMode::Off,
    );
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(reader);
    let echo = json!({"command": "echo x > f.txt", "description": "write f"});
    let events = feed(
        &mut d,
        &[
            &can_use("r1", "Bash", echo),
            &can_use("r2", "Read", json!({"file_path": "/etc/hostname"})),
        ],
    );
    let why = "the agent is read-only and no sandbox keeps a command from writing";
    assert_eq!(
        events,
        [
            record(
                "Bash",
                "echo x > f.txt",
                Decision::Rejected,
                DecidedBy::Policy,
                Some(why)
            ),
            record(
                "Read",
                "/etc/hostname",
                Decision::Allowed,
                DecidedBy::Policy,
                None
            ),
        ]
    );
    assert_eq!(
        written(&input),
        [
            format!("answer r1 deny Permission denied by orchestrate's permission policy: {why}."),
            r#"answer r2 allow {"file_path":"/etc/hostname"}"#.to_string(),
        ]
    );
    // claude prints each answer back: nothing to read there.
    let echoed = r#"{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"deny","message":"no"}}}"#;
    assert_eq!(feed(&mut d, &[echoed]), Vec::<String>::new());
    assert!(written(&input).is_empty());
}

#[test]
fn edits_are_judged_by_their_files_and_allow_and_deny_answer_everything() {
    let implementer = policy(
        PermissionMode::Policy,
        &["read", "edit", "write", "bash"],
        false,
        SandboxMode::WorkspaceWrite,
    );
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(implementer);
    let inside = json!({"file_path": "/work/repo/a.rs", "content": "x"});
    let outside = json!({"file_path": "/etc/passwd", "content": "x"});
    let events = feed(
        &mut d,
        &[
            &can_use("w1", "Write", inside),
            &can_use("w2", "Edit", outside),
        ],
    );
    assert_eq!(
        events,
        [
            record(
                "Write",
                "/work/repo/a.rs",
                Decision::Allowed,
                DecidedBy::Policy,
                None
            ),
            record(
                "Edit",
                "/etc/passwd",
                Decision::Rejected,
                DecidedBy::Policy,
                Some("/etc/passwd is outside the workspace")
            ),
        ]
    );
    assert_eq!(written(&input).len(), 2);

    let mut everything = policy(PermissionMode::Allow, &["read"], true, SandboxMode::Off);
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(everything.clone());
    let run = json!({"command": "rm -rf build"});
    let events = feed(&mut d, &[&can_use("a1", "Bash", run.clone())]);
    assert_eq!(
        events,
        [record(
            "Bash",
            "rm -rf build",
            Decision::Allowed,
            DecidedBy::Allow,
            None
        )]
    );
    assert_eq!(
        written(&input),
        [r#"answer a1 allow {"command":"rm -rf build"}"#]
    );
    everything.mode = PermissionMode::Deny;
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(everything);
    let events = feed(
        &mut d,
        &[&can_use("d1", "Read", json!({"file_path": "a.rs"}))],
    );
    assert_eq!(
        events,
        [record(
            "Read",
            "a.rs",
            Decision::Rejected,
            DecidedBy::Deny,
            None
        )]
    );
    assert_eq!(
        written(&input),
        ["answer d1 deny Permission denied by orchestrate (permissions: deny)."]
    );
}

#[test]
fn claudes_tools_are_read_as_what_they_do() {
    let cases = [
        (
            "Grep",
            json!({"pattern": "fn main", "path": "src"}),
            Some("read"),
            vec!["src"],
        ),
        ("Glob", json!({"pattern": "**/*.rs"}), Some("read"), vec![]),
        (
            "NotebookEdit",
            json!({"notebook_path": "n.ipynb"}),
            Some("edit"),
            vec!["n.ipynb"],
        ),
        (
            "MultiEdit",
            json!({"file_path": "a.rs"}),
            Some("edit"),
            vec!["a.rs"],
        ),
        (
            "WebFetch",
            json!({"url": "https://x"}),
            Some("fetch"),
            vec![],
        ),
        ("WebSearch", json!({"query": "q"}), Some("fetch"), vec![]),
        ("ExitPlanMode", json!({}), Some("switch_mode"), vec![]),
        ("mcp__db__query", json!({"sql": "select 1"}), None, vec![]),
    ];
    for (name, input, kind, paths) in cases {
        let ask = super::permission::tool_ask(name, input, None);
        assert_eq!(ask.request.kind.as_deref(), kind, "{name}");
        assert_eq!(
            ask.request.paths,
            paths
                .iter()
                .map(std::path::PathBuf::from)
                .collect::<Vec<_>>(),
            "{name}"
        );
        assert_eq!(ask.command, None, "{name}");
    }
    // A `command` in another tool's input is no command to show as one.
    let ask = super::permission::tool_ask("Task", json!({"command": "x"}), Some("d".into()));
    assert_eq!((ask.command, ask.record.title), (None, Some("d".into())));
}

#[test]
fn while_the_turn_is_interrupted_a_request_is_denied_and_other_requests_get_an_error() {
    let (mut d, input, _mailbox, run_dir, _dir) =
        started_with(policy(PermissionMode::Allow, &[], false, SandboxMode::Off));
    feed(&mut d, &[TOOL_CALL]);
    queue_for_test(&run_dir, "stop", true);
    d.check_mail();
    assert_eq!(written(&input), ["control interrupt"]);
    let events = feed(&mut d, &[&can_use("r1", "Bash", json!({"command": "ls"}))]);
    assert_eq!(
        events,
        [record(
            "Bash",
            "ls",
            Decision::Cancelled,
            DecidedBy::Stop,
            None
        )]
    );
    let hook =
        r#"{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback"}}"#;
    assert!(feed(&mut d, &[hook]).is_empty());
    assert_eq!(
        written(&input),
        [
            "answer r1 deny Permission denied by orchestrate: the turn is being interrupted.",
            r#"error h1 orchestrate does not answer "hook_callback" requests"#,
        ]
    );
}

/// Answers every question with `answer`, at once, or (`None`) only once withdrawn.
struct Fixed(Option<Answer>);

impl Parent for Fixed {
    fn ask(&self, _: String, _: Duration, withdraw: CancellationToken) -> AnswerFuture {
        let answer = self.0.clone();
        Box::pin(async move {
            match answer {
                Some(a) => a,
                None => {
                    withdraw.cancelled().await;
                    Answer::Withdrawn
                }
            }
        })
    }
}

fn asking(answer: Option<Answer>) -> PermissionPolicy {
    let mut p = policy(
        PermissionMode::Ask,
        &["read", "bash"],
        true,
        SandboxMode::Off,
    );
    p.parent = Some(Asker {
        parent: Arc::new(Fixed(answer)),
        agent: "reviewer".into(),
    });
    p
}

/// Waits (on the runtime) until something was written to claude.
async fn answered(input: &ChildInput) -> Vec<String> {
    for _ in 0..1000 {
        if input.pending() > 0 {
            return written(input);
        }
        tokio::task::yield_now().await;
    }
    panic!("nothing written");
}

#[tokio::test]
async fn under_ask_the_parents_answer_decides_and_is_recorded_with_the_next_line() {
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(asking(Some(Answer::Allow)));
    let run = json!({"command": "echo x > f.txt"});
    assert!(feed(&mut d, &[&can_use("r1", "Bash", run)]).is_empty());
    assert_eq!(
        answered(&input).await,
        [r#"answer r1 allow {"command":"echo x > f.txt"}"#]
    );
    let events = feed(&mut d, &[TOOL_RESULT]);
    assert_eq!(
        events[0],
        record(
            "Bash",
            "echo x > f.txt",
            Decision::Allowed,
            DecidedBy::Parent,
            None
        )
    );

    let deny = Answer::Deny("not now".into());
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(asking(Some(deny)));
    feed(&mut d, &[&can_use("r2", "Bash", json!({"command": "ls"}))]);
    assert_eq!(
        answered(&input).await,
        ["answer r2 deny Permission denied by the parent agent: not now."]
    );
}

#[tokio::test]
async fn a_stop_withdraws_an_open_question_and_claude_taking_one_back_withdraws_it() {
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(asking(None));
    feed(&mut d, &[TOOL_CALL]);
    assert!(feed(&mut d, &[&can_use("r1", "Bash", json!({"command": "ls"}))]).is_empty());
    tokio::task::yield_now().await;
    assert!(written(&input).is_empty(), "the parent has not answered");
    assert!(d.cancel());
    assert_eq!(
        written(&input),
        [
            "control interrupt",
            "answer r1 deny Permission denied by orchestrate: the turn is being interrupted.",
        ]
    );
    let events = feed(&mut d, &[INTERRUPTED]);
    assert_eq!(
        events,
        [
            record("Bash", "ls", Decision::Cancelled, DecidedBy::Stop, None),
            "TurnEnd".to_string(),
            usage_total(50, 5, 0.1, 1),
            "Terminal".to_string()
        ]
    );

    // An interrupt of claude's own making: it takes the request back, and nothing is
    // written for it.
    let (mut d, input, _mailbox, _run_dir, _dir) = started_with(asking(None));
    feed(&mut d, &[&can_use("r2", "Bash", json!({"command": "ls"}))]);
    let cancel = r#"{"type":"control_cancel_request","request_id":"r2"}"#;
    let events = feed(&mut d, &[cancel]);
    assert_eq!(
        events,
        [record(
            "Bash",
            "ls",
            Decision::Cancelled,
            DecidedBy::Stop,
            None
        )]
    );
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert!(written(&input).is_empty());
}
