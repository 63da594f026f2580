//! Signals to orchestrate: a graceful stop of the child's group, a result on stdout, 130.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};
use support::Sandbox;

fn wait_for_pids(sb: &Sandbox, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while sb.pids().len() < n {
        assert!(Instant::now() < deadline, "the child never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_and_signal(
    sb: &Sandbox,
    signals: &[libc::c_int],
    extra: &[&str],
) -> (i32, serde_json::Value, Duration) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec!["run", "fake", "x", "--agents-dir", &agents];
    args.extend_from_slice(extra);
    let child = sb.command(&args).spawn().unwrap();
    wait_for_pids(sb, 1);
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    for s in signals {
        unsafe { libc::kill(child.id() as i32, *s) };
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let elapsed = start.elapsed();
    sb.assert_no_survivors();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    (out.status.code().unwrap_or(-1), json, elapsed)
}

#[test]
fn sigint_stops_the_child_and_prints_a_cancelled_result() {
    let sb = Sandbox::new()
        .scenario("slow")
        .transcript("multi_turn.jsonl");
    let (status, json, elapsed) = run_and_signal(&sb, &[libc::SIGINT], &[]);
    assert_eq!(status, 130);
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": "Subagent was cancelled; its process group was stopped."})
    );
    // The child died of the SIGTERM to its group.
    assert_eq!(
        json["details"]["results"][0]["termination"],
        json!({"kind": "terminated", "reason": "cancelled"})
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
}

#[test]
fn sigterm_and_sighup_do_the_same() {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        let sb = Sandbox::new().scenario("silent");
        let (status, json, _) = run_and_signal(&sb, &[sig], &[]);
        assert_eq!(status, 130, "signal {sig}");
        assert_eq!(json["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
        assert_eq!(
            json["details"]["results"][0]["termination"],
            json!({"kind": "terminated", "reason": "cancelled"}),
            "signal {sig}"
        );
    }
}

#[test]
fn a_second_signal_kills_at_once() {
    // The child ignores SIGTERM and the grace is long: only the second signal ends it.
    let sb = Sandbox::new().scenario("ignore-term");
    let (status, json, elapsed) =
        run_and_signal(&sb, &[libc::SIGINT, libc::SIGINT], &["--kill-grace", "30s"]);
    assert_eq!(status, 130);
    assert_eq!(
        json["details"]["results"][0]["termination"],
        json!({"kind": "killed", "reason": "cancelled", "kill": "immediate"})
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

#[test]
fn the_child_dies_with_orchestrate_even_on_sigkill() {
    // SIGKILL cannot be handled: only the parent-death signal can take the child down.
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut child = sb
        .command(&["run", "fake", "x", "--agents-dir", &agents])
        .spawn()
        .unwrap();
    wait_for_pids(&sb, 1);
    // Let the runtime's threads come and go; the signal must be tied to orchestrate's life.
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    sb.assert_no_survivors();
}

/// orchestrate SIGKILLed at every moment of its child's start, a hundred times: the
/// controller may not yet have armed its parent-death signal when orchestrate dies (it
/// arms it as its first act, but a new process waits for a core), and must then see
/// orchestrate gone by itself rather than start the child and live on as an orphan.
#[test]
fn orchestrate_killed_at_any_moment_of_the_start_leaves_nothing() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    // Busy cores: the new controller waits for one while orchestrate goes on and dies.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let spinners: Vec<_> = (0..3)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || {
                while busy.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    for i in 0..100u64 {
        let mut child = sb
            .command(&["run", "fake", "x", "--agents-dir", &agents])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(400 * i));
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
    }
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    sb.assert_no_survivors();
}

/// SIGKILLs orchestrate once the child's tree is up (`n` processes recorded), then checks
/// that nothing of the tree is left.
fn sigkill_orchestrate_with_tree(scenario: &str, n: usize) {
    let sb = Sandbox::new().scenario(scenario);
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut child = sb
        .command(&["run", "fake", "x", "--agents-dir", &agents])
        .spawn()
        .unwrap();
    wait_for_pids(&sb, n);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(sb.descendants().len(), n, "the tree is up");
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    sb.assert_no_survivors();
}

#[test]
fn a_grandchild_in_the_childs_group_dies_when_orchestrate_is_sigkilled() {
    // It ignores SIGTERM and keeps the pipes; the child's parent-death signal alone
    // would not reach it.
    sigkill_orchestrate_with_tree("grandchild-hang", 2);
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "the portable path kills the child's process group; a setsid descendant leaves it"
)]
fn a_setsid_grandchild_dies_when_orchestrate_is_sigkilled() {
    sigkill_orchestrate_with_tree("setsid-grandchild-hang", 2);
}
