//! orchestrate's memory stays bounded whatever the child prints: it keeps only what a
//! result can show. Measured as the peak RSS of the orchestrate process (`wait4`).

mod support;

use std::io::Read;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use support::Sandbox;

/// What a stream may add to orchestrate's peak RSS over a trivial run of the same binary.
/// (The contract's 32 MiB bound is on the release build, which `scripts/bench` measures:
/// 16 MiB at 256 MiB of stream. The debug build these tests run starts near 30 MiB, all of
/// it the binary's own pages, and grows with every dependency; what a flood must not do
/// is grow it.) A 7 MB escaped delta held twice, the regression this file guards, costs
/// 14 MB more.
const MAX_GROWTH_KIB: i64 = 12 * 1024;

/// The peak RSS of a trivial run (a short answer), plus what a stream may add.
fn max_rss_kib() -> i64 {
    let trivial = Sandbox::new().scenario("replay").transcript("short.jsonl");
    let (json, rss) = run_measured(&trivial, &[]);
    assert_eq!(json["details"]["results"][0]["exitCode"], Value::from(0));
    rss + MAX_GROWTH_KIB
}
/// Enough streamed text that keeping it whole would pass the bound twice over.
const TEXT_FLOOD_BYTES: &str = "67108864";
/// Each megabyte of tool arguments built as JSON values would take about 64 MiB.
const ARGS_FLOOD_BYTES: &str = "16777216";

/// Runs `orchestrate run fake x EXTRA…` and returns its result and peak RSS in KiB.
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its resource usage"
)]
fn run_measured(sb: &Sandbox, extra: &[&str]) -> (Value, i64) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec!["run", "fake", "x", "--agents-dir", &agents];
    args.extend_from_slice(extra);
    let mut child = sb.command(&args).spawn().expect("spawn orchestrate");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).unwrap();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = Vec::new();
        stderr.read_to_end(&mut s).unwrap();
        s
    });
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let (status, rss) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 only writes into it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: plain wait4 on our own child, with valid pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if rc == pid {
            break (status, usage.ru_maxrss);
        }
        if start.elapsed() > Duration::from_secs(120) {
            // SAFETY: the child leads its own group (`process_group(0)`).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            panic!("orchestrate did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap();
    let stderr = String::from_utf8_lossy(&err.join().unwrap()).into_owned();
    assert!(
        libc::WIFEXITED(status),
        "orchestrate died: {status}; {stderr}"
    );
    sb.assert_no_survivors();
    let json: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout:?}; stderr: {stderr}"));
    (json, rss)
}

#[test]
fn a_flood_of_text_deltas_does_not_grow_memory() {
    let sb = Sandbox::new().scenario("flood-deltas");
    let (json, rss) = run_measured(&sb, &["--max-output-bytes", TEXT_FLOOD_BYTES]);
    assert_eq!(
        json["details"]["error"]["code"],
        Value::from("SUBAGENT_OUTPUT_TRUNCATED")
    );
    // The partial answer is kept, as much of it as a result can show.
    let output = json["details"]["results"][0]["output"].as_str().unwrap();
    assert!(output.starts_with("word \"quoted\"\n word"), "{output:.80}");
    // Its first megabyte, and a marker with the whole length and where it is.
    let (head, marker) = output.rsplit_once('\n').unwrap();
    assert!(head.len() <= 1024 * 1024, "{} bytes kept", head.len());
    assert!(
        marker.starts_with("[TRUNCATED: showing first ") && marker.contains(" - full output at "),
        "{marker}"
    );
    let max = max_rss_kib();
    assert!(rss <= max, "peak RSS {rss} KiB, more than {max} KiB");
}

#[test]
fn deltas_near_the_maximum_line_are_not_unescaped_whole() {
    // 7 MB deltas full of escapes: unescaped whole, each would cost its size twice more
    // beside its line.
    let sb = Sandbox::new()
        .scenario("flood-deltas")
        .set("FAKE_AGENT_DELTA_BYTES", "7000000");
    let (json, rss) = run_measured(&sb, &["--max-output-bytes", "50000000"]);
    assert_eq!(
        json["details"]["error"]["code"],
        Value::from("SUBAGENT_OUTPUT_TRUNCATED")
    );
    let output = json["details"]["results"][0]["output"].as_str().unwrap();
    assert!(output.starts_with("word \"quoted\"\n word"), "{output:.80}");
    let max = max_rss_kib();
    assert!(rss <= max, "peak RSS {rss} KiB, more than {max} KiB");
}

#[test]
fn a_flood_of_huge_tool_arguments_does_not_grow_memory() {
    let sb = Sandbox::new().scenario("flood-tool-args");
    let (json, rss) = run_measured(&sb, &["--max-output-bytes", ARGS_FLOOD_BYTES]);
    assert_eq!(
        json["details"]["error"]["code"],
        Value::from("SUBAGENT_OUTPUT_TRUNCATED")
    );
    let max = max_rss_kib();
    assert!(rss <= max, "peak RSS {rss} KiB, more than {max} KiB");
}
