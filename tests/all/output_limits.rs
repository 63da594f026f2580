//! The hard cap on the child's output, and truncation of what the parent reads.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::Sandbox;

#[test]
fn a_flooding_child_is_stopped_at_the_hard_cap_and_partial_output_kept() {
    let sb = Sandbox::new().scenario("flood").transcript("short.jsonl");
    let out = sb.run("x", &["--max-output-bytes", "1000000"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(
        json["details"]["error"]["code"],
        json!("SUBAGENT_OUTPUT_TRUNCATED")
    );
    let r = out.result();
    assert!(
        r["error"].as_str().unwrap().contains("1000000 bytes"),
        "{}",
        r["error"]
    );
    assert_eq!(r["output"], json!("Hello from pi."));
    // The session copy stops at the cap.
    let session = std::fs::metadata(r["sessionFile"].as_str().unwrap())
        .unwrap()
        .len();
    assert!(session <= 1_000_000, "session has {session} bytes");
}

#[test]
fn a_flood_on_stderr_counts_against_the_same_cap() {
    let sb = Sandbox::new().scenario("flood-stderr");
    let out = sb.run("x", &["--max-output-bytes", "500000"]);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    assert_eq!(out.error_code(), "SUBAGENT_OUTPUT_TRUNCATED");
}

#[test]
fn long_answers_are_truncated_in_content_but_whole_in_output() {
    let text = (1..=50)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    let sb = Sandbox::new()
        .scenario("replay")
        .set("FAKE_AGENT_TEXT", &text);
    let out = sb.run("x", &["--max-lines", "10"]);
    assert_eq!(
        out.status, 0,
        "a truncated success is still a success; stderr: {}",
        out.stderr
    );
    let json = out.json();
    let r = out.result();
    assert_eq!(r["output"], json!(text));
    let session = r["sessionFile"].as_str().unwrap();
    let shown = (1..=10)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        json["content"][0]["text"],
        json!(format!("{shown}\n[TRUNCATED: showing first 10 of 50 lines, {} of {} bytes - full output at {session}]", shown.len() + 1, text.len()))
    );
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_OUTPUT_TRUNCATED", "message": "Output truncated: showing 10 of 50 lines"})
    );
}

#[test]
fn a_session_file_that_cannot_be_written_is_a_warning_and_the_run_goes_on() {
    use std::os::unix::process::CommandExt;
    /// Files orchestrate writes may not grow past this; the session copy of the flood does.
    const FILE_SIZE_LIMIT_BYTES: libc::rlim_t = 200_000;
    let sb = Sandbox::new().scenario("flood").transcript("short.jsonl");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "fake",
        "x",
        "--agents-dir",
        &agents,
        "--max-output-bytes",
        "1000000",
    ]);
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: FILE_SIZE_LIMIT_BYTES,
                rlim_max: FILE_SIZE_LIMIT_BYTES,
            };
            // Past the limit a write fails with EFBIG instead of raising SIGXFSZ.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = sb.run_command(cmd);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (&r["warnings"], &r["output"], &r["termination"]),
        (
            &json!(["the session file could not be written: File too large (os error 27)"]),
            &json!("Hello from pi."),
            &json!({"kind": "terminated", "reason": "outputCap"})
        ),
        "{r}"
    );
    assert_eq!(out.error_code(), "SUBAGENT_OUTPUT_TRUNCATED");
    let session = std::fs::metadata(r["sessionFile"].as_str().unwrap())
        .unwrap()
        .len();
    assert!(
        session <= FILE_SIZE_LIMIT_BYTES,
        "session has {session} bytes"
    );
}
