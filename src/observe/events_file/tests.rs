use std::borrow::Cow;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::*;
use crate::observe::AttemptKind;
use crate::result::{Details, Mode, RunResult, SingleResult, TextContent};

/// A writer on a file of a temporary folder.
struct Fixture {
    dir: tempfile::TempDir,
    writer: Writer,
    clock: SystemTime,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join(EVENTS_FILE)).unwrap();
        Fixture {
            dir,
            writer: Writer::new(file),
            clock: UNIX_EPOCH + Duration::from_secs(1_760_000_000),
        }
    }

    /// The next moment: 10 ms later.
    fn tick(&mut self) -> SystemTime {
        self.clock += Duration::from_millis(10);
        self.clock
    }

    fn child(&mut self, e: AgentEvent<'_>) {
        let at = self.tick();
        self.writer.on_event(at, &RunEvent::Child(&e));
    }

    fn delta(&mut self, t: &str) {
        self.child(AgentEvent::TextDelta(Cow::Borrowed(t)));
    }

    fn lifecycle(&mut self, e: RunEvent<'_>) {
        let at = self.tick();
        self.writer.on_event(at, &e);
    }

    fn end(&mut self) {
        let output = RunOutput::from_result(RunResult {
            content: vec![TextContent::text("done")],
            details: Details {
                mode: Mode::Single,
                run_id: Some("ab12cd34".into()),
                results: vec![SingleResult {
                    agent: "a".into(),
                    exit_code: 0,
                    duration_ms: 70,
                    ..SingleResult::default()
                }],
                error: None,
                streaming: None,
                background: None,
                scheduler: Default::default(),
                tree_usage: None,
            },
        });
        self.lifecycle(RunEvent::Ended { output: &output });
    }

    fn bytes(&mut self) -> Vec<u8> {
        self.writer.flush_file();
        std::fs::read(self.dir.path().join(EVENTS_FILE)).unwrap()
    }

    /// Every line as JSON, without its time.
    fn lines(&mut self) -> Vec<Value> {
        String::from_utf8(self.bytes())
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v.as_object_mut().unwrap().remove("at");
                v
            })
            .collect()
    }
}

#[test]
fn text_goes_out_in_whole_lines_as_reads_end_and_the_rest_with_its_message() {
    let mut f = Fixture::new();
    f.child(AgentEvent::MessageStart);
    f.delta("Hel");
    f.writer.flush();
    f.delta("lo\nWor");
    f.delta("ld\nand ");
    f.writer.flush();
    f.delta("more");
    f.writer.flush();
    // The whole message again, as pi sends it: not written twice.
    f.child(AgentEvent::AssistantMessage(Cow::Borrowed(
        "Hello\nWorld\nand more",
    )));
    // A CLI that sends whole messages only.
    f.child(AgentEvent::MessageStart);
    f.child(AgentEvent::AssistantMessage(Cow::Borrowed("Second.")));
    f.end();
    assert_eq!(
        f.lines(),
        vec![
            json!({"type": "text", "text": "Hello\nWorld\n"}),
            json!({"type": "text", "text": "and more"}),
            json!({"type": "text", "text": "Second."}),
            json!({"type": "end", "status": "ok", "exitCode": 0,
                   "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
                   "durationMs": 70}),
        ]
    );
}

#[test]
fn a_secret_streamed_two_characters_at_a_time_is_never_written_in_part() {
    let token = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5b";
    let url = "postgres://app:Xy9mQ2vL8wRk4TzP@db.internal:5432/prod";
    let text = format!("The token is {token} and\nthe database {url}, done.");
    let mut f = Fixture::new();
    f.child(AgentEvent::MessageStart);
    let chars: Vec<char> = text.chars().collect();
    for pair in chars.chunks(2) {
        f.delta(&pair.iter().collect::<String>());
        // Every read ends here: the file is as a reader sees it meanwhile.
        f.writer.flush();
        let seen = String::from_utf8(f.bytes()).unwrap();
        for (secret, public) in [(token, "ghp_"), (url, "postgres://app:")] {
            let leak: String = secret.chars().take(public.len() + 1).collect();
            assert!(!seen.contains(&leak), "{leak:?} in {seen:?}");
        }
    }
    f.child(AgentEvent::StreamedMessageEnd);
    f.end();
    let all = String::from_utf8(f.bytes()).unwrap();
    assert!(!all.contains("aB3dE5") && !all.contains("Xy9mQ2"), "{all}");
    assert!(all.contains("done."), "{all}");
}

#[test]
fn tools_are_named_timed_and_their_arguments_sanitized_and_cut() {
    let mut f = Fixture::new();
    f.delta("Let me look.");
    f.child(AgentEvent::ToolCall {
        name: Cow::Borrowed("bash"),
        args: json!({"command": "curl -H 'Authorization: Bearer sk-proj-Tq9XvB2mK7pL4wR8zN3cF6hJ1sD5gA0eY2uI7oQ4xW9tV3b' x", "big": "y".repeat(5000)}),
    });
    f.child(AgentEvent::ToolStart {
        id: Some(Cow::Borrowed("t1")),
    });
    f.child(AgentEvent::ToolEnd {
        id: Some(Cow::Borrowed("t1")),
    });
    // An end without a start is still told.
    f.child(AgentEvent::ToolEnd { id: None });
    let lines = f.lines();
    assert_eq!(lines[0], json!({"type": "text", "text": "Let me look."}));
    let command = lines[1]["args"]["command"].as_str().unwrap();
    assert!(!command.contains("Tq9XvB2"), "{command}");
    let big = lines[1]["args"]["big"].as_str().unwrap();
    assert_eq!(big, format!("{}…", "y".repeat(1024)));
    assert_eq!(
        lines[2..],
        [
            json!({"type": "toolEnd", "id": "t1", "name": "bash", "durationMs": 10}),
            json!({"type": "toolEnd"}),
        ]
    );
}

#[test]
fn usage_lines_carry_the_total_so_far_and_the_clis_own_total_replaces_the_sum() {
    let mut f = Fixture::new();
    let u = |input, cost| Usage {
        input,
        output: 1,
        cost,
        ..Usage::default()
    };
    f.child(AgentEvent::Usage(u(10, 0.5)));
    f.child(AgentEvent::TurnEnd);
    f.child(AgentEvent::Usage(u(20, 0.25)));
    f.child(AgentEvent::UsageTotal(u(100, 2.0)));
    let totals: Vec<Value> = f
        .lines()
        .iter()
        .filter(|l| l["type"] == "usage")
        .map(|l| json!([l["total"]["input"], l["total"]["cost"], l["total"]["turns"]]))
        .collect();
    assert_eq!(
        totals,
        vec![
            json!([10, 0.5, 0]),
            json!([30, 0.75, 1]),
            json!([100, 2.0, 1])
        ]
    );
}

#[test]
fn a_line_without_an_end_keeps_its_head_and_counts_the_rest() {
    let mut f = Fixture::new();
    f.delta(&"x".repeat(MAX_LINE_TEXT_BYTES + 100));
    f.writer.flush();
    f.delta(&"x".repeat(50));
    f.delta("\nnext");
    f.child(AgentEvent::StreamedMessageEnd);
    let lines = f.lines();
    assert_eq!(
        lines[0]["text"],
        format!(
            "{} [… 150 bytes left out]\n",
            "x".repeat(MAX_LINE_TEXT_BYTES)
        )
    );
    assert_eq!(lines[1], json!({"type": "text", "text": "next"}));
}

#[test]
fn the_file_stops_at_its_limit_and_still_tells_how_the_run_ended() {
    let mut f = Fixture::new();
    f.lifecycle(RunEvent::Attempt {
        n: 1,
        model: None,
        kind: AttemptKind::First,
    });
    let line = format!("{}\n", "word ".repeat(200));
    let lines_needed = (MAX_EVENTS_FILE_BYTES as usize / line.len()) + 100;
    for _ in 0..lines_needed {
        f.delta(&line);
        f.writer.flush();
    }
    f.child(AgentEvent::Usage(Usage::default()));
    f.lifecycle(RunEvent::Stopped(crate::supervisor::StopReason::OutputCap));
    f.lifecycle(RunEvent::Retrying {
        attempt: 1,
        of: 2,
        reason: "overloaded",
        wait: Duration::from_secs(1),
    });
    f.lifecycle(RunEvent::Attempt {
        n: 2,
        model: None,
        kind: AttemptKind::Retry,
    });
    f.delta(&line);
    f.end();
    let bytes = f.bytes();
    assert!(
        bytes.len() as u64 <= MAX_EVENTS_FILE_BYTES,
        "{}",
        bytes.len()
    );
    assert!(bytes.len() as u64 > MAX_EVENTS_FILE_BYTES - END_RESERVE_BYTES - 2048);
    let lines = f.lines();
    let texts = lines.iter().filter(|l| l["type"] == "text").count();
    let tail: Vec<Value> = lines[lines.len() - 5..]
        .iter()
        .map(|l| {
            let mut l = l.clone();
            l.as_object_mut().unwrap().remove("usage");
            l
        })
        .collect();
    let dropped = (lines_needed - texts) + 2;
    assert_eq!(
        tail,
        vec![
            json!({"type": "cut", "limitBytes": MAX_EVENTS_FILE_BYTES}),
            json!({"type": "stop", "reason": "outputCap"}),
            json!({"type": "retry", "attempt": 1, "of": 2, "reason": "overloaded", "waitMs": 1000}),
            json!({"type": "attempt", "n": 2, "kind": "retry"}),
            json!({"type": "end", "status": "ok", "exitCode": 0, "durationMs": 70,
                   "droppedEvents": dropped}),
        ]
    );
}

#[test]
fn a_provider_error_then_a_success_is_told_once_and_a_turn_alone_is_no_recovery() {
    let mut f = Fixture::new();
    f.child(AgentEvent::Recovered);
    f.child(AgentEvent::ProviderError(Cow::Borrowed(
        "overloaded; key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfGhIjKlMn",
    )));
    f.child(AgentEvent::Recovered);
    f.child(AgentEvent::Recovered);
    f.child(AgentEvent::SessionId(Cow::Borrowed("s-1")));
    f.child(AgentEvent::SessionId(Cow::Borrowed("s-1")));
    let lines = f.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0]["message"]
        .as_str()
        .is_some_and(|m| m.starts_with("overloaded") && !m.contains("AbCdEfGh")));
    assert_eq!(
        lines[1..],
        [
            json!({"type": "recovered"}),
            json!({"type": "sessionId", "id": "s-1"})
        ]
    );
}
