//! `orchestrate watch` in a real terminal (tmux: keys sent, the screen read back) during
//! a fan-out of three: the tree under its fan-out, the counts, and a stop of one task
//! from the keyboard that leaves the others running.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::Sandbox;

/// How long the screen may take to show what a test waits for.
const SCREEN_WAIT: Duration = Duration::from_secs(30);

/// tmux, or `None` when it is missing and the contract tests are not required (CI
/// installs it: `.ci/run`).
fn tmux() -> Option<&'static str> {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("tmux");
    }
    assert!(
        std::env::var("ORCHESTRATE_REQUIRE_CONTRACT").as_deref() != Ok("1"),
        "tmux is required (ORCHESTRATE_REQUIRE_CONTRACT=1): `apt-get install tmux`"
    );
    eprintln!("skipped: tmux is not installed");
    None
}

/// A tmux server of its own (its own socket) and one session in it, killed on drop.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    fn start(socket: std::path::PathBuf, program: &Command) -> Tmux {
        let t = Tmux { socket };
        let mut line = String::new();
        for (k, v) in program.get_envs() {
            if let (k, Some(v)) = (k.to_str().unwrap(), v) {
                line.push_str(&format!("{k}={} ", shell_quote(v.to_str().unwrap())));
            }
        }
        line.push_str(&shell_quote(program.get_program().to_str().unwrap()));
        for a in program.get_args() {
            line.push(' ');
            line.push_str(&shell_quote(a.to_str().unwrap()));
        }
        // The status after the view ends, for the test to read.
        let line = format!(
            "cd {} && env {line}; echo \"watch exited $?\"; sleep 60",
            shell_quote(program.get_current_dir().unwrap().to_str().unwrap())
        );
        let st = t
            .cmd()
            .args([
                "new-session",
                "-d",
                "-x",
                "100",
                "-y",
                "30",
                "sh",
                "-c",
                &line,
            ])
            .status()
            .expect("tmux new-session");
        assert!(st.success());
        t
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let st = self.cmd().arg("send-keys").args(keys).status().unwrap();
        assert!(st.success());
    }

    /// Waits until the screen satisfies `ok`, and returns it.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(t0.elapsed() < SCREEN_WAIT, "no {what} on the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn line_of<'s>(screen: &'s str, word: &str) -> &'s str {
    screen
        .lines()
        .find(|l| l.contains(word))
        .unwrap_or_else(|| panic!("no line with {word}:\n{screen}"))
}

#[test]
fn watch_shows_a_fanout_as_a_tree_with_its_counts_and_stops_a_task_from_the_keyboard() {
    let Some(_) = tmux() else { return };
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "1500")
        .transcript("multi_turn.jsonl");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut fanout = sb.command(&[
        "run",
        "--agents-dir",
        &agents,
        "--task",
        "fake=alpha",
        "--task",
        "fake=beta",
        "--task",
        "fake=gamma",
    ]);
    let fanout = fanout.spawn().expect("the fan-out");
    let mut watch = sb.command(&["watch"]);
    watch.env("TERM", "xterm-256color");
    let tmux = Tmux::start(sb.home.join("tmux.sock"), &watch);

    // The tree: the fan-out's line, its three tasks under it, in order, running.
    let screen = tmux.wait_for("three running tasks", |s| s.contains("3 running · 0 ended"));
    let lines: Vec<&str> = screen.lines().collect();
    let group = lines
        .iter()
        .position(|l| l.contains("fan-out of 3"))
        .expect(&screen);
    for (k, task) in ["1. fake", "2. fake", "3. fake"].iter().enumerate() {
        let l = lines[group + 1 + k];
        assert!(
            l.contains(task) && l.contains("running") && l.contains(" pi "),
            "{l}\n{screen}"
        );
    }
    // The events pane shows the selected (first) task's run line.
    assert!(screen.contains("events of"), "{screen}");
    // Turns, tools and tokens come as the tasks work.
    let screen = tmux.wait_for("tokens counted", |s| !s.contains("· 0 tokens"));
    assert!(!screen.contains("· 0 tokens"), "{screen}");

    // Select the second task and stop it from the keyboard.
    tmux.keys(&["Down"]);
    tmux.keys(&["s"]);
    let screen = tmux.wait_for("the stopped task", |s| s.contains("2 running · 1 ended"));
    assert!(
        line_of(&screen, "2. fake").contains("cancelled"),
        "{screen}"
    );
    assert!(line_of(&screen, "1. fake").contains("running"), "{screen}");
    assert!(line_of(&screen, "3. fake").contains("running"), "{screen}");

    // q leaves the view with status 0.
    tmux.keys(&["q"]);
    tmux.wait_for("the view's end", |s| s.contains("watch exited 0"));

    // The fan-out: stopped now, the stopped task's result says cancelled.
    let pid = fanout.id() as i32;
    assert!(support::carries(pid, &sb.marker()));
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let out = sb.finish(fanout);
    let results = out.json()["details"]["results"].clone();
    let took = |i: usize| results[i]["durationMs"].as_u64().unwrap();
    // The second task ended at the keyboard's stop, before the others.
    assert!(took(1) < took(0).min(took(2)), "{results}");
    assert_eq!(
        results[1]["termination"],
        serde_json::json!({"kind": "terminated", "reason": "cancelled"}),
        "{results}"
    );
}

#[test]
fn watch_without_a_terminal_says_so_and_fails() {
    let sb = Sandbox::new();
    let out = sb.run_args(&["watch"]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stderr.contains("needs a terminal"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}
