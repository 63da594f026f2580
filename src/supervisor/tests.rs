//! The supervisor with a channel into its child, over real processes (`/bin/sh` scripts
//! that read their stdin): what a talking sink writes reaches the child and the record,
//! and a stop starts with the sink's own cancel.

use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;
use crate::limits::SupervisionLimits;
use crate::platform::Confinement;
use crate::result::{KillKind, Termination};
use crate::runner::{JobSpec, RunnerChoice};

/// A sink that talks: it writes `hello` as soon as it is made, answers each `ask N` line
/// with `answer N`, ends the input when told `bye`, and cancels with a `cancel` line. The
/// child's `done` line is its final event.
struct Talker {
    input: ChildInput,
    lines: Vec<String>,
    terminal: bool,
    cancels: u32,
}

impl Talker {
    fn new(input: ChildInput) -> Talker {
        input.send_line(b"hello").unwrap();
        Talker {
            input,
            lines: Vec::new(),
            terminal: false,
            cancels: 0,
        }
    }
}

impl LineSink for Talker {
    fn on_line(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line).into_owned();
        if let Some(n) = line.strip_prefix("ask ") {
            self.input
                .send_line(format!("answer {n}").as_bytes())
                .unwrap();
        }
        if line == "bye" {
            self.input.close();
        }
        self.terminal |= line == "done";
        self.lines.push(line);
    }

    fn on_too_long(&mut self, _bytes: u64) {}

    fn facts(&self) -> StreamFacts {
        StreamFacts {
            recognized: true,
            progress: self.lines.len() as u64,
            terminal: self.terminal,
            ..StreamFacts::default()
        }
    }

    fn cancel(&mut self) -> bool {
        self.cancels += 1;
        self.input.send_line(b"cancel").is_ok()
    }
}

fn spec(script: &str, input: Option<ChildInput>) -> ChildSpec {
    let cwd = std::env::temp_dir();
    let runner = RunnerChoice::default().start(&JobSpec {
        run_id: "test",
        attempt: 1,
        cwd: &cwd,
        time_limit: Duration::from_secs(60),
        queue_timeout: Duration::from_secs(60),
        args: &[],
    });
    ChildSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd,
        env: Vec::new(),
        env_remove: Vec::new(),
        confinement: Confinement::default(),
        runner,
        stdin: input,
        network: None,
        layers_reported: false,
    }
}

struct Ran {
    outcome: Outcome,
    lines: Vec<String>,
    cancels: u32,
    record: String,
}

async fn run(script: &str, limits: SupervisionLimits) -> Ran {
    let input = ChildInput::new();
    let mut sink = Talker::new(input.clone());
    let mut spec = spec(script, Some(input));
    let (mut stdout, mut stderr, mut record) = (Vec::new(), Vec::new(), Vec::new());
    let outcome = supervise(
        &mut spec,
        limits,
        &mut sink,
        OutputSinks {
            stdout_copy: &mut stdout,
            stderr_copy: &mut stderr,
            stdin_copy: Some(&mut record),
        },
        &Controls::default(),
    )
    .await
    .expect("supervised");
    Ran {
        outcome,
        lines: sink.lines,
        cancels: sink.cancels,
        record: String::from_utf8(record).unwrap(),
    }
}

fn limits(runtime: Duration, kill_grace: Duration) -> SupervisionLimits {
    SupervisionLimits {
        runtime_timeout: runtime,
        kill_grace,
        ..SupervisionLimits::default()
    }
}

/// Reads lines until end of input, asking twice on the first and saying bye on the
/// second answer.
const CONVERSATION: &str = r#"
read -r first; echo "got $first"; echo "ask 1"
read -r a; echo "got $a"; echo "ask 2"
read -r b; echo "got $b"; echo bye
if read -r more; then echo "unexpected $more"; else echo eof; fi
"#;

#[tokio::test]
async fn a_sink_talks_with_its_child_and_closing_the_input_is_its_end_of_file() {
    let r = run(CONVERSATION, SupervisionLimits::default()).await;
    assert_eq!(
        r.lines,
        [
            "got hello",
            "ask 1",
            "got answer 1",
            "ask 2",
            "got answer 2",
            "bye",
            "eof"
        ]
    );
    assert_eq!(r.record, "hello\nanswer 1\nanswer 2\n");
    assert_eq!(r.outcome.termination, Termination::Exited { code: 0 });
    assert_eq!(r.cancels, 0);
}

#[tokio::test]
async fn a_stop_of_a_talking_child_starts_with_its_cancel_and_sigterm_follows_its_end_of_turn() {
    // Acknowledges the cancel with its final event, then would linger: SIGTERM ends it.
    let script = r#"
read -r hello; echo "ask 1"; read -r a
read -r cancel; echo "got $cancel"; echo done
trap 'echo term >&2; exit 143' TERM
while :; do sleep 0.1; done
"#;
    let r = run(
        script,
        limits(Duration::from_millis(500), Duration::from_secs(10)),
    )
    .await;
    assert_eq!(r.lines, ["ask 1", "got cancel", "done"]);
    assert_eq!(r.record, "hello\nanswer 1\ncancel\n");
    assert_eq!(r.cancels, 1);
    assert_eq!(
        r.outcome.termination,
        Termination::Terminated {
            reason: StopReason::RuntimeTimeout
        }
    );
    assert!(r.outcome.stderr_tail.contains("term"), "SIGTERM was sent");
    // Far from the two graces of 10 s each: the end of turn brought SIGTERM at once.
    assert!(
        r.outcome.elapsed < Duration::from_secs(8),
        "{:?}",
        r.outcome.elapsed
    );
}

#[tokio::test]
async fn a_child_that_ignores_the_cancel_and_sigterm_is_killed_after_both_graces() {
    let script = r#"
trap '' TERM
while read -r line; do echo "got $line"; done
while :; do sleep 0.1; done
"#;
    let grace = Duration::from_millis(700);
    let r = run(script, limits(Duration::from_millis(300), grace)).await;
    assert_eq!(r.lines, ["got hello", "got cancel"]);
    assert_eq!(r.record, "hello\ncancel\n");
    assert_eq!(
        r.outcome.termination,
        Termination::Killed {
            reason: StopReason::RuntimeTimeout,
            kill: KillKind::Escalated
        }
    );
    assert!(
        r.outcome.elapsed >= Duration::from_millis(300) + grace * 2,
        "the cancel's grace, then SIGTERM's: {:?}",
        r.outcome.elapsed
    );
}

#[tokio::test]
async fn a_child_that_never_reads_its_input_cannot_stall_the_supervisor() {
    // Nothing reads stdin: the pipe fills (64 KiB), the queue holds the rest, and the
    // runtime limit still stops the child on time.
    let input = ChildInput::new();
    let mut sink = Talker::new(input.clone());
    let line = vec![b'x'; 1024 * 1024];
    for _ in 0..4 {
        input.send_line(&line).unwrap();
    }
    let mut spec = spec(
        "trap 'exit 143' TERM; while :; do sleep 0.1; done",
        Some(input.clone()),
    );
    let (mut stdout, mut stderr, mut record) = (Vec::new(), Vec::new(), Vec::new());
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        supervise(
            &mut spec,
            limits(Duration::from_millis(500), Duration::from_millis(500)),
            &mut sink,
            OutputSinks {
                stdout_copy: &mut stdout,
                stderr_copy: &mut stderr,
                stdin_copy: Some(&mut record),
            },
            &Controls::default(),
        ),
    )
    .await
    .expect("the supervisor returned")
    .expect("supervised");
    assert_eq!(
        outcome.termination,
        Termination::Terminated {
            reason: StopReason::RuntimeTimeout
        }
    );
    assert!(record.len() < 4 * line.len(), "only what the pipe took");
    // Once the run is over, writers are told.
    assert!(matches!(
        input.send_line(b"late"),
        Err(InputError::Closed(_))
    ));
}

#[tokio::test]
async fn a_child_without_a_channel_reads_end_of_file_and_is_not_cancelled() {
    let mut sink = Talker::new(ChildInput::new());
    let mut spec = spec(
        "if read -r line; then echo \"got $line\"; else echo eof; fi; trap 'exit 143' TERM; while :; do sleep 0.1; done",
        None,
    );
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let outcome = supervise(
        &mut spec,
        limits(Duration::from_millis(500), Duration::from_secs(10)),
        &mut sink,
        OutputSinks {
            stdout_copy: &mut stdout,
            stderr_copy: &mut stderr,
            stdin_copy: None,
        },
        &Controls::default(),
    )
    .await
    .expect("supervised");
    assert_eq!(sink.lines, ["eof"]);
    assert_eq!(sink.cancels, 0);
    assert_eq!(
        outcome.termination,
        Termination::Terminated {
            reason: StopReason::RuntimeTimeout
        }
    );
}
