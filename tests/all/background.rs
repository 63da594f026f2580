//! Background runs: detached from the caller, `wait` for the result, `stop` the whole tree,
//! and a supervisor that died is reported as failed rather than running forever.

use crate::support;

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn start(sb: &Sandbox) -> (String, u32) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let started = Instant::now();
    let out = sb
        .command(&[
            "run",
            "fake",
            "bg task",
            "--agents-dir",
            &agents,
            "--background",
        ])
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "returns at once"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bg = &v["details"]["background"];
    assert_eq!(bg["status"], json!("running"));
    let run_id = v["details"]["runId"].as_str().unwrap().to_string();
    assert_eq!(
        bg["sessionFile"],
        json!(sb
            .state
            .join("runs")
            .join(&run_id)
            .join("session.jsonl")
            .to_str()
            .unwrap())
    );
    (run_id, bg["supervisorPid"].as_u64().unwrap() as u32)
}

fn cli(sb: &Sandbox, args: &[&str]) -> (i32, Value) {
    let out = sb.command(args).output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap_or(-1), v)
}

fn wait_for_pids(sb: &Sandbox, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while sb.pids().len() < n {
        assert!(Instant::now() < deadline, "the child never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_background_run_outlives_its_caller_and_wait_prints_the_result() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "50");
    let (run_id, supervisor) = start(&sb);
    // The caller has exited; the supervisor runs on in a session of its own (no terminal).
    assert!(support::is_alive(supervisor as i32));
    assert_eq!(
        unsafe { libc::getsid(supervisor as i32) },
        supervisor as i32
    );
    let (status, running) = cli(&sb, &["runs", "--json"]);
    assert_eq!(status, 0);
    assert_eq!(running["unfinished"][0]["runId"], json!(run_id));
    let (status, v) = cli(&sb, &["wait", &run_id]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["runId"], json!(run_id));
    // The lean result: the answer once, in content, and not the task the caller gave;
    // the full record has it.
    assert_eq!(v["content"][0]["text"], json!("Hello from pi."));
    assert_eq!(v["details"]["results"][0].get("output"), None);
    assert_eq!(v["details"]["results"][0].get("task"), None);
    let (status, shown) = cli(&sb, &["show", &run_id, "--json"]);
    assert_eq!(status, 0);
    assert_eq!(
        shown["result"]["details"]["results"][0]["task"],
        json!("bg task")
    );
    // Waiting again gives the same answer.
    assert_eq!(cli(&sb, &["wait", &run_id]).1, v);
    sb.assert_no_survivors();
}

#[test]
fn wait_with_a_timeout_reports_still_running() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, _) = start(&sb);
    let (status, v) = cli(&sb, &["wait", &run_id, "--timeout", "300ms"]);
    assert_eq!(status, 124);
    assert_eq!(v["details"]["background"]["status"], json!("running"));
    // `stop` did what it was asked: exit 0; the stopped run's own status is in its result.
    let (status, v) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    sb.assert_no_survivors();
    // Stopping a run that has ended stops nothing and says how it ended: exit 0 again.
    let (status, again) = cli(&sb, &["stop", &run_id]);
    assert_eq!((status, &again), (0, &v));
    // `wait` still exits as the run did: cancelled.
    assert_eq!(cli(&sb, &["wait", &run_id]).0, 130);
}

#[test]
fn stop_ends_the_whole_tree() {
    let sb = Sandbox::new().scenario("grandchild-hang");
    let (run_id, supervisor) = start(&sb);
    wait_for_pids(&sb, 2);
    let (status, v) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    assert!(v["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
    sb.assert_no_survivors();
    let deadline = Instant::now() + Duration::from_secs(10);
    while support::is_alive(supervisor as i32) {
        assert!(Instant::now() < deadline, "the supervisor exits too");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_supervisor_is_reported_as_failed_not_running() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, supervisor) = start(&sb);
    wait_for_pids(&sb, 1);
    unsafe { libc::kill(supervisor as i32, libc::SIGKILL) };
    // The child goes with it (parent-death signal).
    sb.assert_no_survivors();
    let deadline = Instant::now() + Duration::from_secs(10);
    while support::is_alive(supervisor as i32) {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (_, listing) = cli(&sb, &["runs", "--json"]);
    assert_eq!(
        listing["unfinished"][0],
        json!({"runId": run_id, "status": "supervisor died", "supervisorPid": supervisor})
    );
    let (status, v) = cli(&sb, &["wait", &run_id]);
    assert_eq!(status, 1);
    assert_eq!(v["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    assert!(
        v["details"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("died before the run finished"),
        "{v}"
    );
    // Recorded: no longer listed as unfinished.
    assert_eq!(cli(&sb, &["runs", "--json"]).1["unfinished"], json!([]));
}

/// A supervisor record naming `pid`, as a forged or stale `supervisor.json` would.
fn write_record(dir: &std::path::Path, record: Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("supervisor.json"), record.to_string()).unwrap();
}

/// A pid that no process has: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn wait_and_stop_take_only_run_ids_never_paths() {
    let sb = Sandbox::new();
    let outside = sb.root.path().join("outside");
    // `<state>/runs/../../outside` is the same folder.
    let relative = "../../outside";
    let record = json!({"pid": dead_pid(), "startTime": "1", "startedAtMs": 0});
    write_record(&outside, record);
    for cmd in ["wait", "stop"] {
        for id in [outside.to_str().unwrap(), relative, "abc", "abcdef0g"] {
            let (status, v) = cli(&sb, &[cmd, id]);
            assert_eq!(
                (status, &v["details"]["error"]["code"]),
                (2, &json!("INVALID_INPUT")),
                "{cmd} {id}: {v}"
            );
            let mut left: Vec<String> = std::fs::read_dir(&outside)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            left.sort();
            assert_eq!(left, ["supervisor.json"], "{cmd} {id} wrote there");
        }
    }
}

#[test]
fn stop_signals_no_process_whose_start_time_is_not_the_recorded_one() {
    let sb = Sandbox::new();
    // An unrelated process, in a group of its own so that nothing here can reach ours.
    let mut bystander = std::process::Command::new("sleep")
        .arg("60")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = bystander.id();
    // A record of an older version (`startTicks`), and one whose start time is no real
    // one: neither is proof that the pid is the supervisor.
    let records = [
        (
            "abcdef01",
            json!({"pid": pid, "startTicks": 0, "startedAtMs": 0}),
        ),
        (
            "abcdef02",
            json!({"pid": pid, "startTime": "0", "startedAtMs": 0}),
        ),
    ];
    for (id, record) in records {
        write_record(&sb.state.join("runs").join(id), record);
        let (status, v) = cli(&sb, &["stop", id]);
        std::thread::sleep(Duration::from_millis(300));
        let alive = bystander.try_wait().unwrap().is_none();
        if !alive {
            panic!("stop {id} signalled pid {pid}, which is not its supervisor: {v}");
        }
        // The run's supervisor is gone: the run had ended (failed), and stop says so.
        assert_eq!(status, 0, "{v}");
        assert!(
            v["details"]["error"]["message"]
                .as_str()
                .unwrap()
                .contains("died before the run finished"),
            "{v}"
        );
    }
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "the portable path kills the child's process group; a setsid descendant leaves it"
)]
fn a_killed_supervisor_takes_the_childs_whole_tree_with_it() {
    // A grandchild in a session of its own that ignores SIGTERM and SIGHUP.
    let sb = Sandbox::new().scenario("setsid-grandchild-hang");
    let (_, supervisor) = start(&sb);
    wait_for_pids(&sb, 2);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(sb.descendants().len(), 2, "the tree is up");
    unsafe { libc::kill(supervisor as i32, libc::SIGKILL) };
    sb.assert_no_survivors();
}

#[test]
fn wait_and_stop_take_a_unique_prefix_of_the_run_id() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, _) = start(&sb);
    let (status, v) = cli(&sb, &["wait", &run_id[..3], "--timeout", "100ms"]);
    assert_eq!(
        (status, &v["details"]["runId"]),
        (124, &json!(run_id)),
        "{v}"
    );
    let (status, v) = cli(&sb, &["stop", &run_id[..4].to_ascii_uppercase()]);
    assert_eq!((status, &v["details"]["runId"]), (0, &json!(run_id)), "{v}");
    sb.assert_no_survivors();
    // A prefix that names no run.
    let other = if run_id.starts_with('0') { "f" } else { "0" };
    let (status, v) = cli(&sb, &["wait", other]);
    assert_eq!(status, 2, "{v}");
    assert_eq!(v["details"]["error"]["code"], json!("INVALID_INPUT"));
}

/// `run --background` with `--task`s: the start names the fan-out's id and each task's.
fn start_fanout(sb: &Sandbox, extra: &[&str]) -> (String, Vec<String>, Value) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        "--task",
        "fake=task one",
        "--task",
        "fake=task two",
        "--agents-dir",
        &agents,
        "--background",
    ];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let (status, v) = cli(sb, &args);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "returns at once"
    );
    assert_eq!(status, 0, "{v}");
    let run_id = v["details"]["runId"].as_str().unwrap().to_string();
    let tasks: Vec<String> = v["details"]["background"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["runId"].as_str().unwrap().to_string())
        .collect();
    (run_id, tasks, v)
}

#[test]
fn a_background_fan_out_returns_its_id_and_its_tasks_and_wait_prints_its_result() {
    let sb = Sandbox::new();
    let (run_id, tasks, started) = start_fanout(&sb, &[]);
    let pid = started["details"]["background"]["supervisorPid"].clone();
    assert_eq!(tasks.len(), 2);
    assert!(tasks.iter().all(|t| *t != run_id), "{started}");
    assert_ne!(tasks[0], tasks[1]);
    assert_eq!(
        started,
        json!({
            "content": [{"type": "text", "text": format!(
                "Started 2 tasks in parallel in the background as run {run_id}. `orchestrate wait {run_id}` prints its result; `orchestrate stop {run_id}` stops it. Its tasks' runs (`orchestrate send` takes these): fake {}, fake {}.",
                tasks[0], tasks[1]
            )}],
            "details": {
                "mode": "parallel",
                "runId": run_id,
                "results": [],
                "background": {
                    "status": "running",
                    "sessionFile": "",
                    "supervisorPid": pid,
                    "tasks": [
                        {"agent": "fake", "runId": tasks[0]},
                        {"agent": "fake", "runId": tasks[1]},
                    ],
                },
            },
        })
    );
    let (status, v) = cli(&sb, &["wait", &run_id]);
    assert_eq!(status, 0, "{v}");
    // The fan-out's result, as a foreground fan-out's: its id, each task's under the id
    // the start named, in order.
    assert_eq!(v["details"]["mode"], json!("parallel"), "{v}");
    assert_eq!(v["details"]["runId"], json!(run_id));
    let ids: Vec<&Value> = v["details"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["runId"])
        .collect();
    assert_eq!(ids, [&json!(tasks[0]), &json!(tasks[1])], "{v}");
    assert_eq!(
        v["content"][0]["text"],
        json!("## 1. fake: task one\n\nHello from pi.\n\n## 2. fake: task two\n\nHello from pi.")
    );
    let agents = sb.agents.to_str().unwrap().to_string();
    let (status, foreground) = cli(
        &sb,
        &[
            "run",
            "--task",
            "fake=task one",
            "--task",
            "fake=task two",
            "--agents-dir",
            &agents,
        ],
    );
    assert_eq!(status, 0, "{foreground}");
    let shape = |v: &Value| {
        let mut v = v.clone();
        v["details"]["runId"] = json!("ID");
        for r in v["details"]["results"].as_array_mut().unwrap() {
            for key in ["runId", "durationMs", "sessionFile"] {
                r[key] = json!(key);
            }
        }
        v
    };
    assert_eq!(shape(&v), shape(&foreground));
    // Each task ran in its own folder, the fan-out's holds its result.
    for id in &tasks {
        assert!(sb.state.join("runs").join(id).join("result.json").is_file());
    }
    let (status, shown) = cli(&sb, &["show", &run_id, "--json"]);
    assert_eq!(status, 0, "{shown}");
    assert_eq!(shown["result"]["details"]["mode"], json!("parallel"));
    sb.assert_no_survivors();
}

#[test]
fn stop_stops_every_task_of_a_background_fan_out() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, tasks, _) = start_fanout(&sb, &["--chain"]);
    wait_for_pids(&sb, 1);
    // While it runs, `wait` says so, naming the tasks.
    let (status, v) = cli(&sb, &["wait", &run_id, "--timeout", "300ms"]);
    assert_eq!(status, 124, "{v}");
    assert_eq!(v["details"]["mode"], json!("chain"), "{v}");
    let listed: Vec<&Value> = v["details"]["background"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["runId"])
        .collect();
    assert_eq!(listed, [&json!(tasks[0]), &json!(tasks[1])]);
    let (status, v) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["mode"], json!("chain"), "{v}");
    assert_eq!(v["details"]["runId"], json!(run_id));
    // The chain stopped at its first step, which was cancelled; the second never ran.
    let results = v["details"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{v}");
    assert_eq!(results[0]["runId"], json!(tasks[0]));
    assert_eq!(results[0]["exitCode"], json!(143), "{v}");
    assert_eq!(
        results[0]["termination"],
        json!({"kind": "terminated", "reason": "cancelled"})
    );
    // The folder made at the start for the step that never ran is gone.
    let runs = sb.state.join("runs");
    assert!(runs.join(&tasks[0]).join("result.json").is_file());
    assert!(!runs.join(&tasks[1]).exists());
    sb.assert_no_survivors();
    assert_eq!(cli(&sb, &["wait", &run_id]).0, 130);
}

#[test]
fn a_task_still_waiting_for_its_place_refuses_a_message_saying_so() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, tasks, _) = start_fanout(&sb, &["--chain"]);
    wait_for_pids(&sb, 1);
    let (status, v) = cli(&sb, &["send", &tasks[1], "also check the tests"]);
    assert_eq!(status, 2, "{v}");
    assert_eq!(
        v["details"]["error"],
        json!({"code": "INVALID_INPUT", "message": format!("Invalid input: run {} has not started yet: it waits for its place in its fan-out (an earlier step of its chain, or --concurrency); send the message once it runs", tasks[1])})
    );
    assert_eq!(cli(&sb, &["stop", &run_id]).0, 0);
    sb.assert_no_survivors();
}

#[test]
fn stop_stops_both_running_tasks_of_a_background_parallel_fan_out() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, tasks, _) = start_fanout(&sb, &[]);
    wait_for_pids(&sb, 2);
    let (status, v) = cli(&sb, &["stop", &run_id]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["details"]["runId"], json!(run_id));
    let ended: Vec<(&Value, &Value)> = v["details"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (&r["runId"], &r["exitCode"]))
        .collect();
    assert_eq!(
        ended,
        [
            (&json!(tasks[0]), &json!(143)),
            (&json!(tasks[1]), &json!(143))
        ],
        "{v}"
    );
    sb.assert_no_survivors();
    assert_eq!(cli(&sb, &["wait", &run_id]).0, 130);
}

#[test]
fn a_task_of_a_background_fan_out_takes_a_message_by_the_id_the_start_named() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "First answer.")
        .set("FAKE_AGENT_ANSWER_2", "Answer after the message.");
    let (run_id, tasks, _) = start_fanout(&sb, &[]);
    wait_for_pids(&sb, 2);
    let (status, sent) = cli(&sb, &["send", &tasks[0], "also check the tests"]);
    assert_eq!(status, 0, "{sent}");
    let (status, v) = cli(&sb, &["wait", &run_id]);
    assert_eq!(status, 0, "{v}");
    let (_, shown) = cli(&sb, &["show", &run_id, "--json"]);
    let results = shown["result"]["details"]["results"].as_array().unwrap();
    let mut first = results[0].clone();
    first["messages"][0]["at"] = json!("AT");
    assert_eq!(
        (&first["runId"], &first["output"], &first["messages"]),
        (
            &json!(tasks[0]),
            &json!("Answer after the message."),
            &json!([{"at": "AT", "text": "also check the tests", "delivery": "afterTurn"}])
        )
    );
    assert_eq!(
        (&results[1]["output"], results[1].get("messages")),
        (&json!("First answer."), None)
    );
    sb.assert_no_survivors();
}

#[test]
fn a_background_run_with_bad_arguments_is_refused_at_once() {
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    for (args, message) in [
        (
            vec!["run", "--task", "fake", "--background"],
            "Invalid input: --task \"fake\": expected AGENT=TASK",
        ),
        (
            vec!["run", "--background"],
            "Invalid input: --background runs AGENT TASK, or --task AGENT=TASK (repeated)",
        ),
        (
            vec!["run", "--chain", "fake", "x", "--background"],
            "Invalid input: --chain needs --task AGENT=TASK steps",
        ),
        (
            vec!["run", "fake", "x", "--task", "fake=y", "--background"],
            "Invalid input: give either AGENT TASK or --task AGENT=TASK, not both",
        ),
    ] {
        let mut args = args.clone();
        args.extend(["--agents-dir", &agents]);
        let (status, v) = cli(&sb, &args);
        assert_eq!(
            (status, &v["content"][0]["text"]),
            (2, &json!(message)),
            "{args:?}: {v}"
        );
    }
    // Nothing started: no run folder.
    assert_eq!(
        std::fs::read_dir(sb.state.join("runs")).map_or(0, |d| d.count()),
        0
    );
}
