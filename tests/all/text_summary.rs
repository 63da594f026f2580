//! What `-o text` prints on stderr after the answer: a summary that says what happened, for
//! one run, a fan-out (every task), a chain (where it stopped), a run started in the
//! background and a `wait` that gave up.

use crate::support;

use pretty_assertions::assert_eq;
use support::{RunOutput, Sandbox};

/// The summary lines of stderr, with what changes from run to run (durations, run ids,
/// the sandbox's paths, pids) replaced by placeholders.
fn summary(sb: &Sandbox, out: &RunOutput) -> String {
    summary_of(sb, &out.stderr)
}

fn summary_of(sb: &Sandbox, stderr: &str) -> String {
    let state = sb.state.to_str().unwrap();
    let durations = regex::Regex::new(r" \d+(\.\d+)?(ms|s) ").unwrap();
    let ids = regex::Regex::new(r"\b[0-9a-f]{8}\b").unwrap();
    let pids = regex::Regex::new(r"pid \d+").unwrap();
    stderr
        .lines()
        .filter(|l| l.starts_with("[orchestrate]"))
        .map(|l| {
            let l = l.replace(state, "<state>");
            let l = durations.replace_all(&l, " <dur> ");
            let l = ids.replace_all(&l, "<id>");
            pids.replace_all(&l, "pid <pid>").into_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_tasks(sb: &Sandbox, tasks: &[&str], extra: &[&str]) -> RunOutput {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec!["run".to_string(), "--agents-dir".to_string(), agents];
    for t in tasks {
        args.push("--task".into());
        args.push(t.to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    sb.run_args(&refs)
}

#[test]
fn a_single_run_summary_names_the_agent_status_and_usage() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = sb.run("alpha", &["-o", "text"]);
    assert_eq!((out.status, out.stdout.as_str()), (0, "alpha\n"), "{out:?}");
    assert_eq!(
        summary(&sb, &out),
        "[orchestrate] fake ok <dur> turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.0001 session=<state>/runs/<id>/session.jsonl"
    );
}

#[test]
fn a_fan_out_summary_names_every_task_and_adds_up_their_usage() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(
        &sb,
        &["fake=alpha", "fake=beta @scenario:fail", "fake=gamma"],
        &["-o", "text"],
    );
    assert_eq!(out.status, 1, "{out:?}");
    assert_eq!(
        summary(&sb, &out),
        "\
[orchestrate] parallel SUBAGENT_FAILED 3 tasks: 2 ok, 1 failed; turns=2 tokens in=200 out=20 cache r/w=0/0 cost=$0.0002
[orchestrate]   1. fake ok <dur> turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.0001 session=<state>/runs/<id>/session.jsonl
[orchestrate]   2. fake failed <dur> turns=0 tokens in=0 out=0 cache r/w=0/0 cost=$0.0000 session=<state>/runs/<id>/session.jsonl: pi exited with code 3: fatal: something broke
[orchestrate]   3. fake ok <dur> turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.0001 session=<state>/runs/<id>/session.jsonl"
    );
    let ok = run_tasks(&sb, &["fake=alpha", "fake=beta"], &["-o", "text"]);
    assert_eq!(ok.status, 0, "{ok:?}");
    assert!(
        summary(&sb, &ok).starts_with(
            "[orchestrate] parallel ok 2 tasks: 2 ok; turns=2 tokens in=200 out=20 cache r/w=0/0 cost=$0.0002\n"
        ),
        "{}",
        summary(&sb, &ok)
    );
}

#[test]
fn a_chain_summary_says_where_it_stopped() {
    let sb = Sandbox::new().scenario("echo-task");
    let out = run_tasks(
        &sb,
        &["fake=alpha", "fake=beta @scenario:fail", "fake=gamma"],
        &["--chain", "-o", "text"],
    );
    assert_eq!(out.status, 1, "{out:?}");
    assert_eq!(
        summary(&sb, &out),
        "\
[orchestrate] chain SUBAGENT_FAILED stopped at step 2: 1 ok, 1 failed; turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.0001
[orchestrate]   1. fake ok <dur> turns=1 tokens in=100 out=10 cache r/w=0/0 cost=$0.0001 session=<state>/runs/<id>/session.jsonl
[orchestrate]   2. fake failed <dur> turns=0 tokens in=0 out=0 cache r/w=0/0 cost=$0.0000 session=<state>/runs/<id>/session.jsonl: pi exited with code 3: fatal: something broke"
    );
}

#[test]
fn background_and_wait_summaries_say_the_run_is_still_running() {
    let sb = Sandbox::new().scenario("silent");
    let agents = sb.agents.to_str().unwrap().to_string();
    // Not `run_args`: the background supervisor outlives the command, by design.
    let plain = |args: &[&str]| {
        let out = sb.command(args).output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (status, stdout, stderr) = plain(&[
        "run",
        "fake",
        "t",
        "--agents-dir",
        &agents,
        "--background",
        "-o",
        "text",
    ]);
    assert_eq!(status, 0, "{stdout}{stderr}");
    assert_eq!(
        summary_of(&sb, &stderr),
        "[orchestrate] run <id> started in the background (supervisor pid <pid>) session=<state>/runs/<id>/session.jsonl"
    );
    let run_id = stdout
        .split_whitespace()
        .find(|w| w.len() == 9 && w.ends_with('.'))
        .map(|w| w.trim_end_matches('.').to_string())
        .unwrap_or_else(|| panic!("a run id in {stdout:?}"));
    let (status, stdout, stderr) = plain(&["wait", &run_id, "--timeout", "200ms", "-o", "text"]);
    assert_eq!(status, 124, "{stdout}{stderr}");
    assert_eq!(
        summary_of(&sb, &stderr),
        "[orchestrate] run <id> still running (supervisor pid <pid>) session=<state>/runs/<id>/session.jsonl"
    );
    assert_eq!(plain(&["stop", &run_id]).0, 0);
    sb.assert_no_survivors();
}
