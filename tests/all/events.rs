//! A run's `events.jsonl` and `orchestrate show --events [--json] [--follow]`: the same
//! events for every CLI (each dialect's recorded fixtures replayed by the fake child in
//! that CLI's place), sanitized whole, bounded, and followed live until the run ends.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

/// `events.jsonl` of the one run in the sandbox's state, each line without its time.
fn events(sb: &Sandbox, run_id: &str) -> Vec<Value> {
    let path = sb.state.join("runs").join(run_id).join("events.jsonl");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert!(
                v["at"].as_u64().is_some_and(|t| t > 1_700_000_000_000),
                "{l}"
            );
            v.as_object_mut().unwrap().remove("at");
            v
        })
        .collect()
}

fn run_id(out: &support::RunOutput) -> String {
    out.json()["details"]["runId"].as_str().unwrap().to_string()
}

fn fixture(dialect: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dialect)
        .join(name)
}

/// What every run's events say in the same shape: the kinds of lines in order (a text's
/// words, a tool's name), with repeats of one kind in a row counted.
fn shape(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let t = e["type"].as_str().unwrap();
        let word = match t {
            "toolCall" => format!("toolCall {}", e["name"].as_str().unwrap()),
            "toolEnd" => format!("toolEnd {}", e["name"].as_str().unwrap_or("?")),
            "end" => format!("end {}", e["status"].as_str().unwrap()),
            "attempt" => format!("attempt {}", e["n"]),
            "providerError" => "providerError".into(),
            other => other.to_string(),
        };
        // Text is written a line or more at a time as the child's output is read, so how
        // many text events a message makes depends on the reads: one word for a run of them.
        if word == "text" && out.last().is_some_and(|w| w == "text") {
            continue;
        }
        out.push(word);
    }
    out
}

#[test]
fn every_dialect_records_the_same_events_from_its_fixtures() {
    // (backend, fixture): each CLI's recorded stream, replayed by the fake in its place.
    let cases: [(&str, &str, &str, &[&str]); 7] = [
        (
            "pi",
            "pi",
            "multi_turn.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "text",
                "toolCall read",
                "usage",
                "turnEnd",
                "toolEnd read",
                "toolCall grep",
                "usage",
                "turnEnd",
                "toolEnd grep",
                "text",
                "usage",
                "turnEnd",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            "claude",
            "claude",
            "tool_use.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "toolCall Bash",
                "toolEnd Bash",
                "usage",
                "turnEnd",
                "text",
                "usage",
                "turnEnd",
                "usage",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            "codex",
            "codex",
            "tool_use.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "toolCall bash",
                "toolEnd bash",
                "turnEnd",
                "text",
                "usage",
                "turnEnd",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            "gemini",
            "gemini",
            "tool_use.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "text",
                "toolCall run_shell_command",
                "toolEnd run_shell_command",
                "turnEnd",
                "text",
                "turnEnd",
                "usage",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            // opencode reports a tool's call, not its start and end.
            "opencode",
            "opencode",
            "tool_use.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "toolCall bash",
                "usage",
                "turnEnd",
                "text",
                "usage",
                "turnEnd",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            "cursor",
            "cursor",
            "seed_example.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "text",
                "toolCall read",
                "turnEnd",
                "toolEnd read",
                "text",
                "toolCall write",
                "turnEnd",
                "toolEnd write",
                "text",
                "turnEnd",
                "usage",
                "attemptEnd",
                "end ok",
            ],
        ),
        (
            // The error in its assistant message, then in its result line.
            "claude",
            "claude",
            "api_error.jsonl",
            &[
                "run",
                "attempt 1",
                "sessionId",
                "providerError",
                "usage",
                "providerError",
                "attemptEnd",
                "end failed",
            ],
        ),
    ];
    for (backend, dialect, name, want) in cases {
        let sb = Sandbox::new()
            .set(
                &format!("ORCHESTRATE_{}_BIN", backend.to_ascii_uppercase()),
                support::fake_agent_bin().to_str().unwrap(),
            )
            .set(
                "FAKE_AGENT_TRANSCRIPT",
                fixture(dialect, name).to_str().unwrap(),
            );
        let out = sb.run("replay it", &["--backend", backend, "--attempts", "1"]);
        let id = run_id(&out);
        let events = events(&sb, &id);
        let got = shape(&events);
        assert_eq!(got, want, "{backend} {name}: {events:#?}");
        // The first line names the run; the last is its result.
        let result = out.result();
        assert_eq!(events[0]["runId"], json!(id));
        assert_eq!(events[0]["backend"], json!(backend));
        assert_eq!(events[0]["agent"], json!("fake"));
        let end = events.last().unwrap();
        assert_eq!(end["exitCode"], result["exitCode"], "{backend} {name}");
        assert_eq!(end["usage"], result["usage"], "{backend} {name}");
        // The answer is in the text lines, for a run that answered.
        if end["status"] == "ok" {
            let texts: String = events
                .iter()
                .filter(|e| e["type"] == "text")
                .map(|e| e["text"].as_str().unwrap())
                .collect();
            let answer = out.json()["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                texts.contains(answer.trim()),
                "{backend} {name}: {texts:?} vs {answer:?}"
            );
        }
    }
}

/// Secrets as a model might write them, with the part a mask may keep.
const SECRETS: [(&str, &str); 3] = [
    ("ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5b", "ghp_"),
    ("AKIAQ7WX2ZP4LMN5RT8Y", "AKIA"),
    (
        "postgres://app:Xy9mQ2vL8wRk4TzP@db.internal:5432/prod",
        "postgres://app:",
    ),
];

#[test]
fn a_secret_streamed_over_many_deltas_never_reaches_the_events_file_even_in_part() {
    let text = format!(
        "Found these.\nThe CI token is {} and the AWS key id is {}.\nDatabase: {}\nThat is all.",
        SECRETS[0].0, SECRETS[1].0, SECRETS[2].0
    );
    let sb = Sandbox::new()
        .scenario("stream-text")
        .set("FAKE_AGENT_TEXT", &text)
        .set("FAKE_AGENT_DELTA_CHARS", "2")
        .set("FAKE_AGENT_DELAY_MS", "20");
    // The run in the background, its events.jsonl read while it streams, as --follow
    // and watch read it.
    let started = sb.start_background("report", &[]);
    let id = run_id(&started);
    let path = sb.state.join("runs").join(&id).join("events.jsonl");
    let mut looks = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = std::fs::read_to_string(&path).unwrap_or_default();
        let done = seen.contains("\"type\":\"end\"");
        looks.push(seen);
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(looks.len() > 10, "looked {} times", looks.len());
    for (secret, public) in SECRETS {
        let leak: String = secret.chars().take(public.chars().count() + 1).collect();
        for seen in &looks {
            assert!(!seen.contains(&leak), "{leak:?} of {secret:?} in {seen}");
        }
    }
    let all = looks.last().unwrap();
    assert!(all.contains("That is all."), "{all}");
    let texts: Vec<Value> = events(&sb, &id)
        .into_iter()
        .filter(|e| e["type"] == "text")
        .collect();
    // Whole lines, not two characters at a time.
    assert!(texts.len() <= 4, "{texts:?}");
    sb.assert_no_survivors();
}

#[test]
fn the_events_file_stops_at_its_limit_and_still_ends_with_the_result() {
    let sb = Sandbox::new()
        .scenario("flood-deltas")
        .set("FAKE_AGENT_DELTA_BYTES", "1000");
    // Its result carries a megabyte of partial answer: read while it is written.
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb
        .command(&[
            "run",
            "fake",
            "flood",
            "--agents-dir",
            &agents,
            "--max-output-bytes",
            "8000000",
        ])
        .output()
        .unwrap();
    sb.assert_no_survivors();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["details"]["error"]["code"],
        "SUBAGENT_OUTPUT_TRUNCATED"
    );
    let id = json["details"]["runId"].as_str().unwrap().to_string();
    let path = sb.state.join("runs").join(&id).join("events.jsonl");
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size <= 4 * 1024 * 1024, "{size}");
    assert!(size > 3 * 1024 * 1024, "{size}");
    let events = events(&sb, &id);
    let tail: Vec<&str> = events[events.len() - 4..]
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(tail, ["cut", "stop", "attemptEnd", "end"]);
    let end = events.last().unwrap();
    assert_eq!(end["status"], "capped");
    assert!(end["droppedEvents"].as_u64().unwrap() > 1000, "{end}");
    assert_eq!(events[events.len() - 3]["reason"], "outputCap");
}

#[test]
fn show_events_prints_a_line_per_event_or_the_lines_as_written() {
    let sb = Sandbox::new().transcript("multi_turn.jsonl");
    let out = sb.run("find auth", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let id = run_id(&out);
    let human = sb.run_args(&["show", &id[..4], "--events"]);
    assert_eq!(human.status, 0, "{}", human.stderr);
    // A text event holds the lines of one read of the child's output (the second line
    // under the first without its kind) or one line each: the lines are the same.
    let lines: Vec<String> = human
        .stdout
        .lines()
        .map(|l| l.get(14..).unwrap_or_default().trim_end().to_string())
        .map(|l| match l.strip_prefix("         ") {
            Some(rest) => format!("text     {rest}"),
            None => l,
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            format!("run      {id} fake on pi: find auth"),
            "attempt  1 (first)".into(),
            "session  0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c".into(),
            "text     I'll look for the auth code.".into(),
            "tool     read {\"path\":\"src/auth.rs\"}".into(),
            "usage    1,200 in / 80 out; 1,430 tokens, $0.0021 so far".into(),
            "turn     1 done".into(),
            lines[7].clone(),
            "tool     grep {\"path\":\"src\",\"pattern\":\"fn login\"}".into(),
            "usage    1,500 in / 60 out; 3,890 tokens, $0.0039 so far".into(),
            "turn     2 done".into(),
            lines[11].clone(),
            "text     ## Answer".into(),
            "text     Auth lives in src/auth.rs (fn login at line 42).".into(),
            "usage    1,800 in / 120 out; 7,220 tokens, $0.0071 so far".into(),
            "turn     3 done".into(),
            "attempt  1 ended, exit 0".into(),
            lines[17].clone(),
        ]
    );
    assert!(lines[7].starts_with("done     read ("), "{}", lines[7]);
    assert!(
        lines[17].starts_with("end      ok, exit 0, "),
        "{}",
        lines[17]
    );
    let json = sb.run_args(&["show", &id, "--events", "--json"]);
    let raw = std::fs::read_to_string(sb.state.join("runs").join(&id).join("events.jsonl"));
    assert_eq!(json.stdout, raw.unwrap());
    // A run with no events (an older orchestrate's) says so.
    let old = "0000aaaa";
    std::fs::create_dir_all(sb.state.join("runs").join(old)).unwrap();
    let none = sb.run_args(&["show", old, "--events"]);
    assert_eq!(none.status, 2);
    assert!(
        none.stderr.contains("no events.jsonl in"),
        "{}",
        none.stderr
    );
}

/// `orchestrate show ID --follow` started now, its stdout read line by line.
fn follow(sb: &Sandbox, id: &str) -> std::process::Child {
    let mut cmd = sb.command(&["show", id, "--follow"]);
    cmd.stdout(Stdio::piped());
    cmd.spawn().expect("show --follow")
}

#[test]
fn follow_prints_a_live_runs_events_as_they_come_and_ends_with_it() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "150")
        .transcript("multi_turn.jsonl");
    let started = sb.start_background("find auth", &[]);
    let id = run_id(&started);
    let t0 = Instant::now();
    let mut child = follow(&sb, &id);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut arrivals: Vec<(Duration, String)> = Vec::new();
    for line in stdout.lines() {
        arrivals.push((t0.elapsed(), line.unwrap()));
    }
    let status = child.wait().unwrap();
    let ended_at = t0.elapsed();
    assert!(status.success());
    // The lines came over the run's life (about 50 lines at 150 ms each), not at once.
    let (first, _) = &arrivals[0];
    let (last, last_line) = arrivals.last().unwrap();
    assert!(
        *last - *first > Duration::from_secs(2),
        "{first:?} .. {last:?}"
    );
    assert!(last_line.contains("end      ok"), "{last_line}");
    // And it ended with the run: the result is there.
    let waited = sb.run_args(&["wait", &id]);
    assert_eq!(waited.status, 0);
    assert!(ended_at < Duration::from_secs(30));
    sb.assert_no_survivors();
}

#[test]
fn follow_ends_when_the_runs_orchestrate_dies() {
    let sb = Sandbox::new()
        .scenario("silent")
        .set("FAKE_AGENT_FOREVER_MS", "20000");
    let started = sb.start_background("hang", &[]);
    let id = run_id(&started);
    let mut child = follow(&sb, &id);
    std::thread::sleep(Duration::from_millis(500));
    // The background supervisor, proven ours by the sandbox's marker in its environment.
    let pid = started.json()["details"]["background"]["supervisorPid"]
        .as_i64()
        .unwrap() as i32;
    assert!(support::carries(pid, &sb.marker()), "pid {pid} is not ours");
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t0 = Instant::now();
    let out = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "still following");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(out.code(), Some(1));
    let mut stderr = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("is gone"), "{stderr}");
    sb.kill_descendants();
}

/// Waits until the state holds `n` runs whose `events.jsonl` has its first line, and
/// returns their ids in task order.
fn task_ids(sb: &Sandbox, n: usize) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let mut found: Vec<(u64, String)> = Vec::new();
        for e in std::fs::read_dir(sb.state.join("runs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = std::fs::read_to_string(e.path().join("events.jsonl")).unwrap_or_default();
            if let Some(first) = text
                .lines()
                .next()
                .and_then(|l| serde_json::from_str::<Value>(l).ok())
            {
                let index = first["group"]["index"].as_u64().unwrap_or(0);
                found.push((index, first["runId"].as_str().unwrap().to_string()));
            }
        }
        if found.len() == n {
            found.sort();
            return found.into_iter().map(|(_, id)| id).collect();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{found:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stop_ends_one_task_of_a_fanout_in_the_foreground_and_leaves_the_other_running() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let fanout = sb
        .command(&[
            "run",
            "--agents-dir",
            &agents,
            "--task",
            "fake=one",
            "--task",
            "fake=two",
        ])
        .spawn()
        .expect("the fan-out");
    let ids = task_ids(&sb, 2);
    // Not `run_args`: it checks that no process of the sandbox is left, and the other
    // task's is, as it should be.
    let stop = |id: &str| {
        let out = sb
            .command(&["stop", id])
            .output()
            .expect("orchestrate stop");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
        json
    };
    let r = stop(&ids[0]);
    assert_eq!(
        (
            &r["details"]["runId"],
            &r["details"]["results"][0]["termination"]
        ),
        (
            &json!(ids[0]),
            &json!({"kind": "terminated", "reason": "cancelled"})
        )
    );
    // The other task still runs: its events have no end.
    std::thread::sleep(Duration::from_millis(500));
    let other = events(&sb, &ids[1]);
    assert!(other.iter().all(|e| e["type"] != "end"), "{other:?}");
    // A run that ended cannot be stopped again, and says so with its result.
    assert_eq!(stop(&ids[0])["details"]["runId"], json!(ids[0]));
    let pid = fanout.id() as i32;
    assert!(support::carries(pid, &sb.marker()));
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = sb.finish(fanout);
    let results = &out.json()["details"]["results"];
    assert_eq!(results[0]["runId"], json!(ids[0]));
    assert_eq!(results[1]["runId"], json!(ids[1]));
}
