//! The seam seen from an observer: a run's pipeline, over a real child process (the
//! generic `command` backend running `sh`, which prints pi's JSONL), hands a recording
//! observer everything in order.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;

use super::*;
use crate::config::Config;
use crate::result::Mode;
use crate::run::fanout::{run_chain, run_parallel, FanoutLimits};
use crate::run::{run, RunEnv, RunRequest};
use crate::sandbox::SandboxMode;
use crate::session::StateDir;
use crate::supervisor::Controls;

/// What the recorder keeps of each run: a line per event.
#[derive(Default)]
struct Log {
    /// Per run, in order of their starts: the run's lines.
    runs: Vec<Vec<String>>,
    groups: Vec<String>,
    /// Every time an event was handed over, in order, per run.
    times: Vec<Vec<SystemTime>>,
}

#[derive(Clone, Default)]
struct Recorder {
    log: Arc<Mutex<Log>>,
    /// A variable every attempt's child gets.
    env: Option<(&'static str, &'static str)>,
}

struct RunRecorder {
    log: Arc<Mutex<Log>>,
    index: usize,
    env: Option<(&'static str, &'static str)>,
}

impl Observe for Recorder {
    fn run(&self, start: &RunStart<'_>) -> Option<Box<dyn RunObserver>> {
        let mut log = self.log.lock().unwrap();
        let group = start.group.map_or(String::new(), |g| {
            format!(" task {}/{} of {:?} {}", g.index + 1, g.count, g.mode, g.id)
        });
        log.runs.push(vec![format!(
            "start {} on {} (depth {}, parent {:?}){group}: {}",
            start.agent,
            start.backend,
            start.depth,
            start.parent_run_id,
            Path::new(start.task)
                .file_name()
                .map_or(start.task.into(), |n| n.to_string_lossy().into_owned())
        )]);
        log.times.push(Vec::new());
        Some(Box::new(RunRecorder {
            log: self.log.clone(),
            index: log.runs.len() - 1,
            env: self.env,
        }))
    }

    fn group(&self, _at: SystemTime, event: &GroupEvent<'_>) {
        let line = match event {
            GroupEvent::Started {
                id, mode, count, ..
            } => format!("group {mode:?} {id} of {count} started"),
            GroupEvent::Ended { id, mode, output } => {
                format!("group {mode:?} {id} ended, exit {}", output.exit_status)
            }
        };
        self.log.lock().unwrap().groups.push(line);
    }
}

impl RunObserver for RunRecorder {
    fn on_event(&mut self, at: SystemTime, event: &RunEvent<'_>) {
        let line = match event {
            RunEvent::Attempt { n, model, kind } => {
                format!("attempt {n} ({}) {model:?}", kind.as_str())
            }
            RunEvent::Child(e) => format!("child {}", child(e)),
            RunEvent::LimitReached(limit) => format!("limit {limit:?}"),
            RunEvent::Stopped(reason) => format!("stopped {reason:?}"),
            RunEvent::AttemptEnded { n, output } => {
                format!("attempt {n} ended, exit {}", output.exit_status)
            }
            RunEvent::Retrying {
                attempt,
                of,
                reason,
                wait,
            } => {
                // The backoff is 1 s for the first retry, give or take a quarter.
                let about = if (750..=1250).contains(&wait.as_millis()) {
                    "about 1s".to_string()
                } else {
                    format!("{wait:?}")
                };
                format!("retrying after attempt {attempt} of {of}: {reason}, in {about}")
            }
            RunEvent::FallingBack { from, to, reason } => {
                format!("falling back from {from:?} to {to:?}: {reason}")
            }
            RunEvent::Ended { output } => format!(
                "ended, exit {}: {:?}",
                output.exit_status,
                output.result.details.error.as_ref().map(|e| e.code)
            ),
        };
        let mut log = self.log.lock().unwrap();
        log.runs[self.index].push(line);
        log.times[self.index].push(at);
    }

    fn child_env(&mut self, attempt: u32, env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>) {
        if let Some((k, v)) = self.env {
            env.push((k.into(), format!("{v}-{attempt}").into()));
        }
    }
}

/// An event in a few words: its kind, and its text or name.
fn child(e: &AgentEvent<'_>) -> String {
    match e {
        AgentEvent::TextDelta(t) => format!("delta {t:?}"),
        AgentEvent::AssistantMessage(t) => format!("message {t:?}"),
        AgentEvent::ToolCall { name, args } => format!("tool {name} {args}"),
        AgentEvent::ToolStart { id } => format!("tool start {id:?}"),
        AgentEvent::ToolEnd { id } => format!("tool end {id:?}"),
        AgentEvent::Usage(u) => format!("usage {} in {} out", u.input, u.output),
        AgentEvent::ProviderError(m) => format!("provider error {m:?}"),
        other => format!("{other:?}")
            .split(['(', ' ', '{'])
            .next()
            .unwrap()
            .to_string(),
    }
}

/// A folder with an agent `rec` whose command prints the file its task names (or runs
/// the shell script the task is), and a state directory.
struct Bench {
    dir: tempfile::TempDir,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("rec.md"),
            "---\nname: rec\ndescription: Prints a transcript.\nbackend: command\ncommand: sh -c 'case \"$0\" in *.jsonl) cat \"$0\";; *) eval \"$0\";; esac' {task}\ndialect: pi\n---\nRecorded.\n",
        )
        .unwrap();
        Bench { dir }
    }

    fn request(&self, task: &str) -> RunRequest {
        RunRequest {
            agent: "rec".into(),
            task: task.into(),
            cwd: Some(self.dir.path().to_path_buf()),
            agents_dir: Some(self.dir.path().join("agents")),
            settings: crate::settings::Values {
                sandbox: Some(Some(SandboxMode::Off)),
                retries: Some(1),
                ..Default::default()
            },
            ..RunRequest::default()
        }
    }

    fn env(&self, recorder: &Recorder) -> RunEnv {
        let mut env = RunEnv::bare(
            Config::default(),
            StateDir {
                root: self.dir.path().join("state"),
            },
        );
        env.observe = Hub::with(vec![Arc::new(recorder.clone())]);
        env
    }
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pi")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_run_hands_its_observer_every_child_event_and_its_lifecycle_in_order() {
    let bench = Bench::new();
    let recorder = Recorder::default();
    let env = bench.env(&recorder);
    let before = SystemTime::now();
    let out = block_on(run(
        &bench.request(&fixture("multi_turn.jsonl")),
        &env,
        &Controls::default(),
        None,
    ));
    let after = SystemTime::now();
    assert_eq!(out.exit_status, 0, "{:?}", out.result);
    let log = recorder.log.lock().unwrap();
    assert_eq!(
        log.runs,
        vec![vec![
            "start rec on command (depth 0, parent None): multi_turn.jsonl",
            "attempt 1 (first) None",
            "child SessionId",
            "child MessageStart",
            "child Working",
            "child delta \"I'll look for \"",
            "child delta \"the auth code.\"",
            "child Working",
            "child Working",
            "child Working",
            "child Working",
            "child message \"I'll look for the auth code.\"",
            "child tool read {\"path\":\"src/auth.rs\"}",
            "child usage 1200 in 80 out",
            "child TurnEnd",
            "child Recovered",
            "child tool start Some(\"toolu_01A\")",
            "child tool end Some(\"toolu_01A\")",
            "child MessageStart",
            "child Working",
            "child Working",
            "child Working",
            "child message \"\"",
            "child tool grep {\"path\":\"src\",\"pattern\":\"fn login\"}",
            "child usage 1500 in 60 out",
            "child TurnEnd",
            "child Recovered",
            "child tool start Some(\"toolu_02B\")",
            "child Working",
            "child tool end Some(\"toolu_02B\")",
            "child MessageStart",
            "child Working",
            "child Working",
            "child Working",
            "child Working",
            "child delta \"## Answer\\n\"",
            "child delta \"Auth lives in src/auth.rs\"",
            "child delta \" (fn login at line 42).\"",
            "child Working",
            "child message \"## Answer\\nAuth lives in src/auth.rs (fn login at line 42).\"",
            "child usage 1800 in 120 out",
            "child TurnEnd",
            "child Recovered",
            "child Terminal",
            "child Terminal",
            "attempt 1 ended, exit 0",
            "ended, exit 0: None",
        ]]
    );
    let times = &log.times[0];
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "in order: {times:?}"
    );
    assert!(before <= times[0] && *times.last().unwrap() <= after);
}

#[test]
fn budgets_stops_and_retries_are_told_as_they_happen() {
    let bench = Bench::new();
    let recorder = Recorder::default();
    let env = bench.env(&recorder);
    // A turn budget of 1: the child goes on to a second turn, and is stopped there.
    let mut req = bench.request(&format!(
        "head -n 21 {}; sleep 30",
        fixture("multi_turn.jsonl")
    ));
    req.settings.max_turns = Some(1);
    let out = block_on(run(&req, &env, &Controls::default(), None));
    assert_eq!(out.exit_status, 1);
    // A child that goes silent: the idle timeout stops it.
    let mut req = bench.request("sleep 30");
    req.settings.idle_timeout = Some(Duration::from_millis(300));
    let out = block_on(run(&req, &env, &Controls::default(), None));
    assert_eq!(out.exit_status, 124);
    // An overloaded provider, twice: one retry, then the failure.
    let overloaded = r#"{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}}"#;
    let mut req = bench.request(&format!("echo '{overloaded}'; exit 1"));
    req.settings.retries = Some(2);
    let out = block_on(run(&req, &env, &Controls::default(), None));
    assert_eq!(out.exit_status, 1);
    let log = recorder.log.lock().unwrap();
    let told = |run: usize| -> Vec<&str> {
        log.runs[run]
            .iter()
            .map(String::as_str)
            .filter(|l| !l.starts_with("child ") && !l.starts_with("start "))
            .collect()
    };
    assert_eq!(
        told(0),
        vec![
            "attempt 1 (first) None",
            "limit Turns { limit: 1, used: 1 }",
            "stopped Budget",
            "attempt 1 ended, exit 1",
            "ended, exit 1: Some(SubagentFailed)",
        ]
    );
    assert_eq!(
        told(1),
        vec![
            "attempt 1 (first) None",
            "stopped IdleTimeout",
            "attempt 1 ended, exit 124",
            "ended, exit 124: Some(SubagentTimeout)",
        ]
    );
    assert_eq!(
        told(2),
        vec![
            "attempt 1 (first) None",
            "attempt 1 ended, exit 1",
            "retrying after attempt 1 of 2: overloaded, in about 1s",
            "attempt 2 (retry) None",
            "attempt 2 ended, exit 1",
            "ended, exit 1: Some(SubagentFailed)",
        ]
    );
}

#[test]
fn a_fanout_tells_of_its_group_and_each_task_of_its_place_in_it() {
    let bench = Bench::new();
    let short = fixture("short.jsonl");
    for mode in [Mode::Parallel, Mode::Chain] {
        let recorder = Recorder::default();
        let env = bench.env(&recorder);
        let reqs = vec![bench.request(&short), bench.request(&short)];
        let limits = FanoutLimits {
            concurrency: 1,
            ..FanoutLimits::default()
        };
        let controls = Controls::default();
        let out = block_on(async {
            match mode {
                Mode::Chain => run_chain(reqs, &env, &controls, limits, None).await,
                _ => run_parallel(reqs, &env, &controls, limits, None).await,
            }
        });
        assert_eq!(out.exit_status, 0);
        let id = out.result.details.run_id.clone().unwrap();
        let log = recorder.log.lock().unwrap();
        assert_eq!(
            log.groups,
            vec![
                format!("group {mode:?} {id} of 2 started"),
                format!("group {mode:?} {id} ended, exit 0"),
            ]
        );
        let starts: Vec<&str> = log.runs.iter().map(|r| r[0].as_str()).collect();
        assert_eq!(
            starts,
            vec![
                format!("start rec on command (depth 0, parent None) task 1/2 of {mode:?} {id}: short.jsonl"),
                format!("start rec on command (depth 0, parent None) task 2/2 of {mode:?} {id}: short.jsonl"),
            ]
        );
        assert!(log
            .runs
            .iter()
            .all(|r| r.last().unwrap() == "ended, exit 0: None"));
    }
}

#[test]
fn observers_may_add_to_each_attempts_environment() {
    let bench = Bench::new();
    let recorder = Recorder {
        env: Some(("OBSERVED_MARK", "trace")),
        ..Recorder::default()
    };
    let env = bench.env(&recorder);
    let line = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"%s"}],"stopReason":"stop"}}"#;
    let req = bench.request(&format!("printf '{line}\\n' \"$OBSERVED_MARK\""));
    let out = block_on(run(&req, &env, &Controls::default(), None));
    assert_eq!(out.exit_status, 0, "{:?}", out.result);
    assert_eq!(out.result.content[0].text, "trace-1");
}

#[test]
fn a_nested_run_names_its_parent_run() {
    let bench = Bench::new();
    let recorder = Recorder::default();
    let mut env = bench.env(&recorder);
    env.depth = 1;
    env.config.max_depth.value = 3;
    env.parent_run_id = Some("ab12cd34".into());
    block_on(run(
        &bench.request(&fixture("short.jsonl")),
        &env,
        &Controls::default(),
        None,
    ));
    let log = recorder.log.lock().unwrap();
    assert_eq!(
        log.runs[0][0],
        "start rec on command (depth 1, parent Some(\"ab12cd34\")): short.jsonl"
    );
}

#[test]
fn without_observers_a_run_has_none() {
    let hub = Hub::none();
    let dir = tempfile::tempdir().unwrap();
    let observers = hub.run(&RunStart {
        run_id: "ab12cd34",
        agent: "a",
        backend: "pi",
        model: None,
        task: "t",
        cwd: dir.path(),
        run_dir: dir.path(),
        depth: 0,
        parent_run_id: None,
        group: None,
    });
    assert!(observers.is_empty());
}
