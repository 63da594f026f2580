//! pi's RPC mode (`pi --mode rpc`): the json mode's events on stdout, and commands on
//! stdin, one JSON object a line. orchestrate sends the task as a `prompt` command; a
//! message sent to the run while pi works becomes a `steer` command, which pi gives the
//! model after the tool calls under way, before its next request (`steered`); a message
//! that comes after pi's run ended is the next `prompt` (`nextPrompt`); `send --interrupt`
//! clears pi's queue and `abort`s the run, and the messages are the next `prompt`
//! (`interrupted`). Once a run ends with nothing held, stdin is closed, on which pi
//! shuts down, as it exits in the json mode. The RPC mode prints no `session` line: the
//! session's id comes from `get_state`, asked first.
//!
//! Facts this relies on (pi 1.6, seen against the mock LLM): a `steer` that arrives after
//! pi's last look at its queue stays queued (a `queue_update` says so) and no run starts
//! for it: it is taken back with `clear_queue` and prompted. pi replies to a `steer` once it
//! has queued it, which may be after its run ended and settled, and it handles each
//! command as it comes (a `clear_queue` can run before a steer written earlier is queued):
//! so a run is not taken as over, nor the queue cleared, until every steer has its reply.
//! pi exits on end of input even while a run is under way, so stdin is closed only at the
//! end. Replies to commands are `{"type":"response","command",success,error?,data?}`.

use std::borrow::Cow;
use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use super::PiDialect;
use crate::backends::leading_type;
use crate::backends::{ChildInput, Delivery, Dialect, Inbox};
use crate::events::AgentEvent;

/// Where the conversation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not attached to a child (a dialect that only reads).
    Detached,
    /// A `prompt` was sent; its run has not started.
    Prompted,
    Running,
    /// `abort` sent for a message sent with `--interrupt`.
    Aborting,
    /// The run ended with messages in pi's queue (or steers it has not replied to):
    /// waiting for pi to settle (it may go on with them by itself).
    Settling,
    /// pi settled before replying to every steer written: its queue is cleared once it
    /// has (a `clear_queue` sent sooner can run before the steer is queued).
    SettledBeforeSteers,
    /// `clear_queue` sent, to take back what pi queued and did not deliver.
    Clearing,
    Done,
}

/// The fields of a line this dialect reads itself; the rest goes to the json-mode parser.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    command: Option<Cow<'a, str>>,
    #[serde(default)]
    success: Option<bool>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    steering: Option<Vec<&'a RawValue>>,
    #[serde(rename = "followUp", borrow, default)]
    follow_up: Option<Vec<&'a RawValue>>,
    #[serde(rename = "willRetry", default)]
    will_retry: Option<bool>,
}

/// `get_state`'s data, as far as it is read.
#[derive(Deserialize, Default)]
struct PiState<'a> {
    #[serde(rename = "sessionId", borrow, default)]
    session_id: Option<Cow<'a, str>>,
}

/// `clear_queue`'s data: the texts pi had queued.
#[derive(Deserialize, Default)]
struct Cleared {
    #[serde(default)]
    steering: Vec<String>,
    #[serde(rename = "followUp", default)]
    follow_up: Vec<String>,
}

pub(crate) struct PiRpcDialect {
    json: PiDialect,
    prompt: String,
    input: Option<ChildInput>,
    mailbox: Option<Box<dyn Inbox>>,
    state: State,
    /// Messages in pi's own queue, as its last `queue_update` said.
    queued_in_pi: usize,
    /// The messages of the `steer` commands written that pi has not replied to, oldest
    /// first (pi replies in order): pi reads them when it gets to them, so one written just
    /// before its run ends may not be in its queue yet; and one it refuses is taken back.
    steers_unanswered: VecDeque<String>,
}

impl PiRpcDialect {
    pub(crate) fn new(prompt: String) -> PiRpcDialect {
        PiRpcDialect {
            json: PiDialect,
            prompt,
            input: None,
            mailbox: None,
            state: State::Detached,
            queued_in_pi: 0,
            steers_unanswered: VecDeque::new(),
        }
    }

    fn send(&self, command: &serde_json::Value) {
        if let Some(input) = &self.input {
            if let Err(e) = input.send_json(command) {
                tracing::debug!("not written to pi: {e}");
            }
        }
    }

    fn prompt_with(&mut self, text: &str) {
        self.send(&json!({"type": "prompt", "message": text}));
        self.state = State::Prompted;
    }

    /// pi's run ended: what was sent meanwhile is the next prompt; with nothing, the
    /// conversation is over.
    fn run_ended(&mut self, delivery: Delivery, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        if let Some(mailbox) = &self.mailbox {
            mailbox.answered();
            mailbox.collect();
            let held = mailbox.write_held(delivery);
            if !held.is_empty() {
                self.prompt_with(&held.join("\n\n"));
                return;
            }
        }
        self.finish(emit);
    }

    fn finish(&mut self, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        self.state = State::Done;
        emit(AgentEvent::Terminal);
        if let Some(input) = &self.input {
            input.close();
        }
    }

    /// `agent_end` (not to be retried) or `agent_settled`.
    fn on_end(&mut self, settled: bool, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        match self.state {
            State::Aborting => self.run_ended(Delivery::Interrupted, emit),
            State::Running if self.queued_in_pi == 0 && self.steers_unanswered.is_empty() => {
                self.run_ended(Delivery::NextPrompt, emit)
            }
            // A steer came too late for this run (or pi has not read it yet): pi may still
            // go on with it by itself; else it is taken back once pi settles.
            State::Running => self.state = State::Settling,
            State::Settling if settled && !self.steers_unanswered.is_empty() => {
                self.state = State::SettledBeforeSteers;
            }
            State::Settling if settled => self.clear_queue(),
            _ => {}
        }
    }

    /// Takes back what pi queued and did not deliver; the run ends with its reply.
    fn clear_queue(&mut self) {
        self.send(&json!({"type": "clear_queue"}));
        self.state = State::Clearing;
    }

    fn on_response(&mut self, line: &Line<'_>, emit: &mut dyn FnMut(AgentEvent<'_>)) {
        let command = line.command.as_deref().unwrap_or_default();
        let refused = line.success == Some(false);
        let error = line.error.map(RawValue::get).unwrap_or("no reason given");
        if command == "steer" {
            let steered = self.steers_unanswered.pop_front();
            let taken_back = match (refused, steered, &self.mailbox) {
                // It never reached the model: held again, it is the next prompt.
                (true, Some(text), Some(mailbox)) => {
                    mailbox.take_back(std::slice::from_ref(&text));
                    emit(AgentEvent::Warning(Cow::Owned(format!(
                        "pi refused the command steer: {error}; the message is sent again once its run ends"
                    ))));
                    true
                }
                _ => false,
            };
            if self.state == State::SettledBeforeSteers && self.steers_unanswered.is_empty() {
                self.clear_queue();
            }
            if taken_back {
                return;
            }
        }
        if refused {
            match command {
                "prompt" => {
                    emit(AgentEvent::ProviderError(Cow::Owned(format!(
                        "pi refused the prompt: {error}"
                    ))));
                    self.finish(emit);
                }
                _ => emit(AgentEvent::Warning(Cow::Owned(format!(
                    "pi refused the command {command}: {error}"
                )))),
            }
            return;
        }
        if command == "get_state" {
            let state: PiState<'_> = line
                .data
                .and_then(|d| serde_json::from_str(d.get()).ok())
                .unwrap_or_default();
            if let Some(id) = state.session_id {
                emit(AgentEvent::SessionId(Cow::Owned(id.into_owned())));
            }
            return;
        }
        if command != "clear_queue" {
            return;
        }
        let cleared: Cleared = line
            .data
            .and_then(|d| serde_json::from_str(d.get()).ok())
            .unwrap_or_default();
        if let Some(mailbox) = &self.mailbox {
            let texts: Vec<String> = cleared
                .steering
                .into_iter()
                .chain(cleared.follow_up)
                .collect();
            mailbox.take_back(&texts);
        }
        self.queued_in_pi = 0;
        if self.state == State::Clearing {
            self.run_ended(Delivery::NextPrompt, emit);
        }
    }
}

/// The event types this dialect reads itself; every other line is the json mode's.
const RPC_EVENTS: &[&str] = &[
    "response",
    "queue_update",
    "agent_start",
    "agent_end",
    "agent_settled",
];

impl Dialect for PiRpcDialect {
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool {
        // Most lines are the json mode's events, streamed text above all: those go to its
        // dialect without a first reading of the whole line here.
        if leading_type(line).is_some_and(|kind| !RPC_EVENTS.contains(&kind)) {
            return self.json.parse_line(line, emit);
        }
        let Ok(ev) = serde_json::from_str::<Line<'_>>(line) else {
            return false;
        };
        match ev.kind.as_ref() {
            "response" => self.on_response(&ev, emit),
            "queue_update" => {
                self.queued_in_pi = ev.steering.as_ref().map_or(0, Vec::len)
                    + ev.follow_up.as_ref().map_or(0, Vec::len);
            }
            "agent_start" => {
                if matches!(
                    self.state,
                    State::Prompted | State::Settling | State::SettledBeforeSteers
                ) {
                    self.state = State::Running;
                }
            }
            // A run whose start was not seen still ends (a `settled` then is an earlier
            // run's, whose end was already taken).
            "agent_end" if self.state == State::Prompted && ev.will_retry != Some(true) => {
                self.state = State::Running;
                self.on_end(false, emit);
            }
            "agent_end" if ev.will_retry != Some(true) => self.on_end(false, emit),
            "agent_settled" => self.on_end(true, emit),
            _ => return self.json.parse_line(line, emit),
        }
        true
    }

    fn attach(&mut self, input: ChildInput) {
        self.input = Some(input);
        self.send(&json!({"type": "get_state"}));
        let prompt = std::mem::take(&mut self.prompt);
        self.prompt_with(&prompt);
    }

    fn listen(&mut self, inbox: Box<dyn Inbox>) -> bool {
        self.mailbox = Some(inbox);
        true
    }

    /// While pi's run is under way: a message is steered into it, or, sent with
    /// `--interrupt`, held while pi's queue is cleared and its run aborted.
    fn check_mail(&mut self) {
        if self.state != State::Running {
            return;
        }
        let Some(mailbox) = &self.mailbox else {
            return;
        };
        if mailbox.collect().interrupt {
            // What pi queued is taken back (the clear's reply), so that the abort does not
            // go on with it; the run then ends, and the messages are the next prompt.
            self.send(&json!({"type": "clear_queue"}));
            self.send(&json!({"type": "abort"}));
            self.state = State::Aborting;
            return;
        }
        for text in mailbox.write_held(Delivery::Steered) {
            self.send(&json!({"type": "steer", "message": text}));
            self.steers_unanswered.push_back(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::test_support::agent;
    use crate::backends::{InvocationInput, Talk};
    use crate::live::inbox::{queue_for_test, Mailbox};
    use crate::session::RunDir;
    use pretty_assertions::assert_eq;
    use serde_json::Value;

    #[test]
    fn a_lines_leading_type_is_read_only_where_pi_writes_it_first_and_plain() {
        let lines = [
            r#"{"type":"message_update","assistantMessageEvent":{}}"#,
            r#"{"type":"agent_end","messages":[]}"#,
            r#"{"type":"mes\u0073age_update"}"#,
            r#"{ "type":"message_update"}"#,
            r#"{"id":"1","type":"response"}"#,
            r#"{"type":"#,
        ];
        assert_eq!(
            lines.map(leading_type),
            [
                Some("message_update"),
                Some("agent_end"),
                None,
                None,
                None,
                None
            ]
        );
    }

    #[test]
    fn the_json_modes_events_read_the_same_whether_their_type_leads_or_not() {
        let (mut d, ..) = running();
        let delta = |lead: bool| {
            let event = r#""assistantMessageEvent":{"type":"text_delta","delta":"hi \"there\""}"#;
            match lead {
                true => format!(r#"{{"type":"message_update",{event}}}"#),
                false => format!(r#"{{{event},"type":"message_update"}}"#),
            }
        };
        let mut seen = Vec::new();
        for lead in [true, false] {
            let line = delta(lead);
            assert!(
                d.parse_line(&line, &mut |e| seen.push(format!("{e:?}"))),
                "{line}"
            );
        }
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0], seen[1]);
        assert_eq!(
            seen[0],
            format!("{:?}", AgentEvent::TextDelta("hi \"there\"".into()))
        );
    }

    fn running() -> (PiRpcDialect, ChildInput, Mailbox, RunDir, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = RunDir {
            path: dir.path().to_path_buf(),
        };
        let mut d = PiRpcDialect::new("Task: t".into());
        let input = ChildInput::new();
        let mailbox = Mailbox::new(&run_dir);
        d.attach(input.clone());
        assert!(d.listen(Box::new(mailbox.clone())));
        feed(
            &mut d,
            &[
                r#"{"type":"response","command":"prompt","success":true}"#,
                r#"{"type":"agent_start"}"#,
            ],
        );
        assert_eq!(commands(&input), ["get_state", "prompt Task: t"]);
        (d, input, mailbox, run_dir, dir)
    }

    fn feed(d: &mut PiRpcDialect, lines: &[&str]) -> Vec<String> {
        let mut events = Vec::new();
        for l in lines {
            assert!(
                d.parse_line(l, &mut |e| events.push(format!("{e:?}"))),
                "{l}"
            );
        }
        events
    }

    fn commands(input: &ChildInput) -> Vec<String> {
        input
            .drain_lines()
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                let kind = v["type"].as_str().unwrap();
                match v["message"].as_str() {
                    Some(m) => format!("{kind} {m}"),
                    None => kind.to_string(),
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

    const END: &str = r#"{"type":"agent_end","messages":[]}"#;
    const SETTLED: &str = r#"{"type":"agent_settled","aborted":false}"#;
    const STEER_QUEUED: &str =
        r#"{"type":"response","command":"steer","success":true,"data":{"disposition":"queued"}}"#;

    /// A running pi with `text` sent to it: steered at once.
    fn steered(text: &str) -> (PiRpcDialect, ChildInput, Mailbox, RunDir, tempfile::TempDir) {
        let (mut d, input, mailbox, run_dir, dir) = running();
        queue_for_test(&run_dir, text, false);
        d.check_mail();
        assert_eq!(commands(&input), [format!("steer {text}")]);
        (d, input, mailbox, run_dir, dir)
    }

    /// pi's queue is cleared and gives back `late`, which is then the next prompt: the
    /// run ends with it, delivered as that.
    fn late_is_taken_back_and_prompted(
        d: &mut PiRpcDialect,
        input: &ChildInput,
        mailbox: &Mailbox,
    ) {
        assert_eq!(commands(input), ["clear_queue"]);
        feed(
            d,
            &[
                r#"{"type":"response","command":"clear_queue","success":true,"data":{"steering":["late"],"followUp":[]}}"#,
            ],
        );
        prompted_and_ended(d, input, mailbox, "late");
    }

    /// `text` is the next prompt; its run ends the conversation (the input closed), and it
    /// is delivered as that.
    fn prompted_and_ended(d: &mut PiRpcDialect, input: &ChildInput, mailbox: &Mailbox, text: &str) {
        assert_eq!(commands(input), [format!("prompt {text}")]);
        let events = feed(d, &[r#"{"type":"agent_start"}"#, END]);
        assert_eq!(events, ["Terminal"]);
        assert!(!input.is_open());
        assert_eq!(
            deliveries(mailbox),
            [(text.to_string(), Delivery::NextPrompt)]
        );
    }

    #[test]
    fn a_message_mid_run_is_steered_and_the_run_ends_with_the_input_closed() {
        let (mut d, input, mailbox, _run_dir, _dir) = steered("look in src");
        // pi queues it, then takes it into the run before its next request.
        feed(
            &mut d,
            &[
                STEER_QUEUED,
                r#"{"type":"queue_update","steering":["look in src"],"followUp":[]}"#,
                r#"{"type":"queue_update","steering":[],"followUp":[]}"#,
            ],
        );
        let events = feed(&mut d, &[END]);
        assert_eq!(events, ["Terminal"]);
        assert!(!input.is_open());
        assert_eq!(feed(&mut d, &[SETTLED]), Vec::<String>::new(), "one end");
        assert_eq!(
            deliveries(&mailbox),
            [("look in src".to_string(), Delivery::Steered)]
        );
    }

    /// A steer written just before pi's run ended, which pi had not read yet (no reply to
    /// it, no `queue_update`) when it said so: the run is not taken as over with the
    /// message steered. Once pi settles, its queue is cleared and what it held is the next
    /// prompt. (Seen with the real pi: the message was recorded `steered` and never reached
    /// its model, and stdin was closed on it.)
    #[test]
    fn a_steer_pi_had_not_answered_when_its_run_ended_is_taken_back_and_prompted() {
        let (mut d, input, mailbox, _run_dir, _dir) = steered("late");
        assert_eq!(feed(&mut d, &[END]), Vec::<String>::new());
        assert!(input.is_open());
        let events = feed(
            &mut d,
            &[
                STEER_QUEUED,
                r#"{"type":"queue_update","steering":["late"],"followUp":[]}"#,
                SETTLED,
            ],
        );
        assert_eq!(events, Vec::<String>::new());
        late_is_taken_back_and_prompted(&mut d, &input, &mailbox);
    }

    /// The order pi 1.6 wrote in CI: its run ends and settles before it has read the
    /// steer; a `clear_queue` sent then runs before the steer is queued (pi handles each
    /// command as it comes, the steer asynchronously) and gives nothing back. So the
    /// queue is cleared only once pi has replied to every steer written.
    #[test]
    fn pi_is_cleared_only_once_it_has_replied_to_every_steer() {
        let (mut d, input, mailbox, _run_dir, _dir) = steered("late");
        assert_eq!(feed(&mut d, &[END, SETTLED]), Vec::<String>::new());
        assert_eq!(commands(&input), Vec::<String>::new(), "not cleared yet");
        assert!(input.is_open());
        feed(
            &mut d,
            &[
                r#"{"type":"queue_update","steering":["late"],"followUp":[]}"#,
                STEER_QUEUED,
            ],
        );
        late_is_taken_back_and_prompted(&mut d, &input, &mailbox);
    }

    /// A steer that pi queued after its last look stays in its queue when the run ends:
    /// taken back with `clear_queue` and sent as the next prompt, in the same process.
    #[test]
    fn a_steer_too_late_for_the_run_is_taken_back_and_prompted() {
        let (mut d, input, mailbox, _run_dir, _dir) = steered("late");
        let events = feed(
            &mut d,
            &[
                r#"{"type":"queue_update","steering":["late"],"followUp":[]}"#,
                STEER_QUEUED,
                END,
                SETTLED,
            ],
        );
        assert_eq!(events, Vec::<String>::new());
        late_is_taken_back_and_prompted(&mut d, &input, &mailbox);
    }

    #[test]
    fn an_interrupt_clears_pis_queue_aborts_and_prompts_the_message() {
        let (mut d, input, mailbox, run_dir, _dir) = running();
        queue_for_test(&run_dir, "stop", true);
        d.check_mail();
        assert_eq!(commands(&input), ["clear_queue", "abort"]);
        feed(
            &mut d,
            &[
                r#"{"type":"response","command":"clear_queue","success":true,"data":{"steering":[],"followUp":[]}}"#,
            ],
        );
        let events = feed(&mut d, &[END]);
        assert_eq!(events, Vec::<String>::new());
        assert_eq!(commands(&input), ["prompt stop"]);
        // The first run's late `agent_settled` is not the new run's end.
        assert_eq!(feed(&mut d, &[SETTLED]), Vec::<String>::new());
        let events = feed(&mut d, &[r#"{"type":"agent_start"}"#, END]);
        assert_eq!(events, ["Terminal"]);
        assert_eq!(
            deliveries(&mailbox),
            [("stop".to_string(), Delivery::Interrupted)]
        );
    }

    #[test]
    fn the_session_id_comes_from_get_state() {
        let (mut d, _input, _mailbox, _run_dir, _dir) = running();
        let events = feed(
            &mut d,
            &[
                r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"abc","isStreaming":true}}"#,
            ],
        );
        assert_eq!(events, [r#"SessionId("abc")"#]);
    }

    /// A steer pi refuses never reached the model: the message is not reported as steered
    /// and is not lost, but taken back and given as the next prompt once the run ends.
    #[test]
    fn a_refused_steer_is_taken_back_and_prompted_when_the_run_ends() {
        let (mut d, input, mailbox, _run_dir, _dir) = steered("look in src");
        let events = feed(
            &mut d,
            &[r#"{"type":"response","command":"steer","success":false,"error":"busy"}"#],
        );
        assert_eq!(
            events,
            [
                r#"Warning("pi refused the command steer: \"busy\"; the message is sent again once its run ends")"#
            ]
        );
        assert_eq!(
            deliveries(&mailbox),
            [("look in src".to_string(), Delivery::NotDelivered)]
        );
        let events = feed(&mut d, &[END]);
        assert_eq!(events, Vec::<String>::new());
        prompted_and_ended(&mut d, &input, &mailbox, "look in src");
    }

    /// Of two steers, pi refuses the second: only that one is taken back.
    #[test]
    fn only_the_refused_steer_of_several_is_taken_back() {
        let (mut d, input, mailbox, run_dir, _dir) = steered("first");
        queue_for_test(&run_dir, "second", false);
        d.check_mail();
        assert_eq!(commands(&input), ["steer second"]);
        feed(
            &mut d,
            &[
                STEER_QUEUED,
                r#"{"type":"response","command":"steer","success":false,"error":"busy"}"#,
                r#"{"type":"queue_update","steering":[],"followUp":[]}"#,
                END,
            ],
        );
        assert_eq!(commands(&input), ["prompt second"]);
        let events = feed(&mut d, &[r#"{"type":"agent_start"}"#, END]);
        assert_eq!(events, ["Terminal"]);
        assert_eq!(
            deliveries(&mailbox),
            [
                ("first".to_string(), Delivery::Steered),
                ("second".to_string(), Delivery::NextPrompt)
            ]
        );
    }

    #[test]
    fn a_refused_prompt_fails_the_run_and_a_refusal_of_no_steer_sent_is_a_warning() {
        let (mut d, _input, _mailbox, _run_dir, _dir) = running();
        let events = feed(
            &mut d,
            &[r#"{"type":"response","command":"steer","success":false,"error":"busy"}"#],
        );
        assert_eq!(
            events,
            [r#"Warning("pi refused the command steer: \"busy\"")"#]
        );
        let events = feed(
            &mut d,
            &[r#"{"type":"response","command":"prompt","success":false,"error":"no model"}"#],
        );
        assert_eq!(
            events,
            [
                r#"ProviderError("pi refused the prompt: \"no model\"")"#,
                "Terminal"
            ]
        );
    }

    #[test]
    fn with_a_pipe_for_stdin_pi_runs_in_rpc_mode_and_its_task_is_the_first_command() {
        let dir = tempfile::tempdir().unwrap();
        let a = agent(&["Read"], true, "");
        let inv = super::super::build(
            "pi".into(),
            &InvocationInput {
                agent: &a,
                task: "find auth",
                model: None,
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: true,
                output_schema: None,
            },
        )
        .unwrap();
        let session = dir.path().join("child/pi-session.jsonl");
        assert_eq!(
            inv.args,
            [
                "--mode".into(),
                "rpc".into(),
                "--session".into(),
                session.into_os_string(),
                "--tools".into(),
                "read".into()
            ]
        );
        assert_eq!(
            inv.talk,
            Some(Talk::PiRpc {
                prompt: "Task: find auth".into()
            })
        );
    }
}
