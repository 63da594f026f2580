//! How the child ends: exit codes, signals, provider errors, and descendants that outlive
//! the leader. After every test no process of the run is alive.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{normalized, Sandbox};

#[test]
fn a_grandchild_holding_stdout_is_killed_and_the_answer_kept() {
    let sb = Sandbox::new()
        .scenario("grandchild")
        .transcript("short.jsonl");
    let out = sb.run("x", &["--exit-grace", "5s"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        normalized(out.json()),
        json!({
            "content": [{"type": "text", "text": "Hello from pi."}],
            "details": {
                "mode": "single",
                "runId": "RUNID",
                "results": [{
                    "exitCode": 0,
                    "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "cost": 0.00012, "turns": 1},
                    "sessionFile": "SESSION",
                    "leakedProcesses": true,
                    // The child exited on its own (a clean exit, left out of the lean
                    // result); the grandchild kept the pipes and was killed after the
                    // drain window.
                    "sandbox": {"mode": "off", "mechanism": "none"},
                    "leak": {"kind": "heldPipes"}
                }]
            }
        })
    );
    assert_eq!(sb.pids().len(), 2);
    assert!(
        out.elapsed.as_secs_f64() < 10.0,
        "bounded drain, took {:?}",
        out.elapsed
    );
}

#[test]
fn a_non_zero_exit_is_a_failure_with_the_childs_stderr() {
    let sb = Sandbox::new()
        .scenario("fail")
        .set("FAKE_AGENT_EXIT_CODE", "3")
        .set("FAKE_AGENT_STDERR", "fatal: config broken");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 1);
    let json = out.json();
    assert_eq!(json["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    assert_eq!(
        json["details"]["error"]["message"],
        json!("pi exited with code 3: fatal: config broken")
    );
    assert_eq!(out.result()["exitCode"], json!(3));
    assert_eq!(
        out.result()["termination"],
        json!({"kind": "exited", "code": 3})
    );
}

#[test]
fn death_by_signal_is_128_plus_n_and_partial_output_is_kept() {
    let sb = Sandbox::new()
        .scenario("die-by-signal")
        .set("FAKE_AGENT_SIGNAL", "11");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 1);
    let r = out.result();
    assert_eq!(r["exitCode"], json!(139));
    assert_eq!(r["error"], json!("pi was killed by signal 11 (SIGSEGV)"));
    // A signal orchestrate did not send.
    assert_eq!(r["termination"], json!({"kind": "signaled", "signal": 11}));
    assert_eq!(r["output"], json!("partial answer"));
    assert_eq!(r["usage"]["input"], json!(300));
}

#[test]
fn an_error_stop_reason_fails_the_run_even_when_pi_exits_zero() {
    let sb = Sandbox::new().scenario("error-stop");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 1);
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_FAILED", "message": "pi reported an error: 401 Incorrect API key provided"})
    );
    // exitCode is the child's own code; `error` says the run failed.
    assert_eq!(out.result()["exitCode"], json!(0));
    assert_eq!(
        out.result()["error"],
        json!("pi reported an error: 401 Incorrect API key provided")
    );
}

#[test]
fn a_missing_binary_is_127_with_an_install_hint() {
    let sb = Sandbox::new().set("ORCHESTRATE_PI_BIN", "/nonexistent/pi");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 1);
    let r = out.result();
    assert_eq!(r["exitCode"], json!(127));
    assert_eq!(r.get("termination"), None, "nothing ran: {r}");
    let err = r["error"].as_str().unwrap();
    assert!(
        err.contains("npm install -g @earendil-works/pi-coding-agent"),
        "{err}"
    );
    assert_eq!(out.error_code(), "SUBAGENT_FAILED");
}

#[test]
fn output_after_the_child_exited_kills_its_leftovers_at_the_cap() {
    // The child answers and exits; its grandchild then floods the inherited stdout.
    let sb = Sandbox::new().scenario("grandchild-flood");
    let out = sb.run(
        "x",
        &["--max-output-bytes", "1000000", "--exit-grace", "5s"],
    );
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (
            &r["exitCode"],
            &r["output"],
            &r["termination"],
            &r["leak"],
            &r["leakedProcesses"]
        ),
        (
            &json!(0),
            &json!("Hello from pi."),
            &json!({"kind": "killed", "reason": "outputCap", "kill": "leftovers"}),
            &json!({"kind": "heldPipes"}),
            &json!(true)
        ),
        "{r}"
    );
    assert_eq!(out.error_code(), "SUBAGENT_OUTPUT_TRUNCATED");
    assert_eq!(sb.pids().len(), 2, "leader and grandchild both recorded");
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "the portable path kills the child's process group; a setsid descendant leaves it"
)]
fn a_setsid_grandchild_that_ignores_sigterm_dies_with_a_timed_out_run() {
    // The grandchild left the child's session and process group and its pipes, and
    // ignores SIGTERM and SIGHUP: only the kernel can take it down with the run.
    let sb = Sandbox::new().scenario("setsid-grandchild-hang");
    let out = sb.run("x", &["--timeout", "1s", "--kill-grace", "500ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    assert_eq!(sb.pids().len(), 2, "leader and grandchild both recorded");
    // `run` already asserted that neither survives.
    let r = out.result();
    assert_eq!(
        (&r["termination"], &r["leak"], &r["leakedProcesses"]),
        (
            &json!({"kind": "terminated", "reason": "runtimeTimeout"}),
            &json!({"kind": "outlived"}),
            &json!(true)
        ),
        "{r}"
    );
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "the portable path kills the child's process group; a setsid descendant leaves it"
)]
fn a_setsid_grandchild_holding_the_pipes_dies_with_a_timed_out_run() {
    let sb = Sandbox::new().scenario("setsid-grandchild-pipes-hang");
    let out = sb.run("x", &["--timeout", "1s", "--kill-grace", "500ms"]);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let r = out.result();
    // The leader died of the SIGTERM; the grandchild kept the pipes until the grace ran
    // out and the whole tree was killed, so nothing was abandoned.
    assert_eq!(
        (&r["termination"], &r["leak"], &r["leakedProcesses"]),
        (
            &json!({"kind": "terminated", "reason": "runtimeTimeout"}),
            &json!({"kind": "heldPipes"}),
            &json!(true)
        ),
        "{r}"
    );
    assert!(
        out.elapsed.as_secs_f64() < 20.0,
        "bounded, took {:?}",
        out.elapsed
    );
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "the portable path kills the child's process group; a setsid descendant leaves it"
)]
fn a_detached_daemon_left_by_a_child_that_answered_is_killed_and_reported() {
    // Double fork, setsid, stdio on /dev/null: nothing ties the daemon to the child but
    // ancestry, which the kernel forgets when its parent exits.
    let sb = Sandbox::new().scenario("daemon");
    let out = sb.run("x", &["--details", "full"]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        sb.pids().len(),
        3,
        "leader, intermediate and daemon recorded"
    );
    let r = out.result();
    assert_eq!(
        (
            &r["output"],
            &r["termination"],
            &r["leak"],
            &r["leakedProcesses"]
        ),
        (
            &json!("Hello from pi."),
            &json!({"kind": "exited", "code": 0}),
            &json!({"kind": "outlived"}),
            &json!(true)
        ),
        "{r}"
    );
}

/// A leader that exits without reaping its children (node does) leaves zombies, which
/// the tree's holder inherits: dead already, they are no leak, whichever holds the tree.
#[test]
fn zombies_the_child_did_not_reap_are_no_leak() {
    for (containment, sandbox) in [
        ("pidns", "off"),
        ("pidns", "workspace-write"),
        ("subreaper", "off"),
    ] {
        for _ in 0..3 {
            let sb = Sandbox::new()
                .scenario("zombie")
                .set("ORCHESTRATE_CONTAINMENT", containment)
                .set("ORCHESTRATE_SANDBOX", sandbox);
            let out = sb.run("x", &["--details", "full"]);
            assert_eq!(out.status, 0, "{}\nstderr: {}", out.stdout, out.stderr);
            let r = out.result();
            assert_eq!(
                (&r["output"], &r["termination"], r.get("leak")),
                (
                    &json!("Hello from pi."),
                    &json!({"kind": "exited", "code": 0}),
                    None
                ),
                "{containment}, sandbox {sandbox}: {r}"
            );
        }
    }
}

#[test]
fn inherited_descriptors_beyond_stdio_do_not_reach_the_child() {
    use std::os::unix::process::CommandExt;
    let sb = Sandbox::new();
    let fd_file = sb.root.path().join("fds.json");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&["run", "fake", "x", "--agents-dir", &agents]);
    cmd.env("FAKE_AGENT_FD_FILE", &fd_file);
    // The wrapper (whoever starts orchestrate) leaks a descriptor without close-on-exec.
    unsafe {
        cmd.pre_exec(|| {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if fd < 0 || libc::dup2(fd, 42) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = sb.run_command(cmd);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let fds: Vec<i32> = serde_json::from_str(&std::fs::read_to_string(&fd_file).unwrap()).unwrap();
    assert_eq!(
        fds,
        [0, 1, 2],
        "the child inherited only stdin, stdout and stderr"
    );
}

/// Where PID namespaces are denied, a child subreaper holds the tree instead
/// (`ORCHESTRATE_CONTAINMENT=subreaper` forces it, as a machine without namespaces would).
#[cfg(not(feature = "portable"))]
mod subreaper {
    use super::{json, Sandbox};
    use pretty_assertions::assert_eq;

    const FORCED: &str = "no PID namespace for the child (ORCHESTRATE_CONTAINMENT=subreaper): descendants that outlive it are killed when the run ends, but would survive orchestrate itself being killed";

    #[test]
    fn a_setsid_grandchild_that_ignores_sigterm_dies_with_a_timed_out_run() {
        let sb = Sandbox::new()
            .scenario("setsid-grandchild-hang")
            .set("ORCHESTRATE_CONTAINMENT", "subreaper");
        let out = sb.run("x", &["--timeout", "1s", "--kill-grace", "500ms"]);
        assert_eq!(out.status, 124, "stderr: {}", out.stderr);
        let r = out.result();
        assert_eq!(
            (
                &r["termination"],
                &r["leak"],
                &r["leakedProcesses"],
                &r["warnings"]
            ),
            (
                &json!({"kind": "terminated", "reason": "runtimeTimeout"}),
                &json!({"kind": "outlived"}),
                &json!(true),
                &json!([FORCED])
            ),
            "{r}"
        );
    }

    #[test]
    fn a_detached_daemon_is_killed_when_the_run_ends() {
        let sb = Sandbox::new()
            .scenario("daemon")
            .set("ORCHESTRATE_CONTAINMENT", "subreaper");
        let out = sb.run("x", &["--details", "full"]);
        assert_eq!(out.status, 0, "stderr: {}", out.stderr);
        let r = out.result();
        assert_eq!(
            (&r["output"], &r["leak"]),
            (&json!("Hello from pi."), &json!({"kind": "outlived"})),
            "{r}"
        );
    }

    #[test]
    fn a_grandchild_holding_the_pipes_is_killed_after_the_grace() {
        let sb = Sandbox::new()
            .scenario("setsid-grandchild-pipes-hang")
            .set("ORCHESTRATE_CONTAINMENT", "subreaper");
        let out = sb.run("x", &["--timeout", "1s", "--kill-grace", "500ms"]);
        assert_eq!(out.status, 124, "stderr: {}", out.stderr);
        assert_eq!(out.result()["leak"], json!({"kind": "heldPipes"}));
    }
}

/// The runner watchdog (`orchestrate runner-watchdog KIND JOB`, which orchestrate starts
/// before it submits a job to a cluster engine) on its own, with the local engine, whose
/// cancel step does nothing: it says `ready` from a session of its own, and exits as soon
/// as it is told the job settled, or as soon as orchestrate's end of its pipe closes. (What
/// it does then for Slurm is in tests/slurm.rs.)
#[test]
fn the_runner_watchdog_is_in_a_session_of_its_own_and_exits_when_told_or_orphaned() {
    use std::io::{BufRead, BufReader, Write};
    use std::time::{Duration, Instant};
    let sb = Sandbox::new();
    for settled in [true, false] {
        // As orchestrate starts it: in orchestrate's process group (`Sandbox::command`
        // would make it a group leader, which cannot start a session).
        let mut watchdog = std::process::Command::new(support::orchestrate_bin())
            .args(["runner-watchdog", "local", "job-1"])
            .env("ORCHESTRATE_TEST_SANDBOX", sb.root.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the watchdog");
        let mut ready = String::new();
        BufReader::new(watchdog.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        let pid = watchdog.id() as i32;
        // SAFETY: getsid of our own child's pid.
        let session = unsafe { libc::getsid(pid) };
        let mut stdin = watchdog.stdin.take().unwrap();
        if settled {
            writeln!(stdin, "settled").unwrap();
        }
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = watchdog.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the watchdog did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            (ready.as_str(), session, status.code()),
            ("ready\n", pid, Some(0)),
            "settled: {settled}"
        );
    }
    // An engine it does not know is a usage error.
    let out = sb
        .command(&["runner-watchdog", "k8s", "job-1"])
        .output()
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim().to_string()
        ),
        (
            Some(2),
            "orchestrate runner-watchdog: unknown runner kind \"k8s\" (use local or slurm)"
                .to_string()
        )
    );
}
