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
