//! claude's own permission hook, answered by orchestrate: with streamed input claude asks
//! (`can_use_tool` on stdout) before each tool call its allow rules do not cover, and the
//! run's permission policy answers on its stdin. The read-only agent's Bash is limited to
//! git's read-only commands by those rules, so a command that writes is asked about.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::{report, setup, REPORT_LINE_CHARS, WALL_CLOCK, WRITE_TASK};
use crate::mock_llm;
use crate::mock_llm::contract::cli::Cli;
use crate::mock_llm::{MockUsage, Reply, Script};

const COMMAND: &str = "echo x > pwned.txt";

/// The read-only `reader` (`tools: read, grep, bash`) runs `echo x > pwned.txt` with no
/// sandbox to keep it read-only: under `--permissions policy` the policy rejects it
/// (nothing is written, and the model reads why), under `--permissions allow` it runs.
pub fn policy_decides_claudes_requests(cli: &Cli, bin: &Path) {
    let denied = "the agent is read-only and no sandbox keeps a command from writing";
    let cases = [
        (
            "policy",
            json!({"tool": "Bash", "decision": "rejected", "by": "policy",
                   "title": COMMAND, "reason": denied}),
        ),
        (
            "allow",
            json!({"tool": "Bash", "decision": "allowed", "by": "allow", "title": COMMAND}),
        ),
    ];
    for (mode, record) in cases {
        let (mock, sb) = setup(cli, bin, |_| {
            Script::tool_then_text(
                (cli.shell)(COMMAND).reply,
                Reply::text("Done.", MockUsage::default()),
            )
        });
        let out = sb.run(
            "reader",
            WRITE_TASK,
            &[
                "--permissions",
                mode,
                "--sandbox",
                "off",
                "--idle-timeout",
                "60s",
            ],
            WALL_CLOCK,
        );
        report(
            &format!("permissions {mode}"),
            &mock,
            &out,
            REPORT_LINE_CHARS,
        );
        assert_eq!(out.status, 0, "stderr: {}", out.stderr);
        let r = out.result();
        assert_eq!(r["output"], json!("Done."), "{r}");
        assert_eq!(r["permissions"], json!([record]), "{r}");
        // Only the tool's own restriction is said: no "asks orchestrate for no
        // permissions".
        let warnings = r["warnings"].as_array().cloned().unwrap_or_default();
        assert!(
            warnings
                .iter()
                .all(|w| !w.as_str().unwrap_or_default().contains("no permissions")),
            "{r}"
        );
        let pwned = sb.work.join("pwned.txt");
        let reqs = mock.conversation();
        assert_eq!(reqs.len(), 2, "{:#?}", mock.requests());
        let seen = mock_llm::tool_result_texts(&reqs[1].body);
        assert_eq!(seen.len(), 1, "{seen:?}");
        if mode == "policy" {
            assert!(!pwned.exists(), "{} written", pwned.display());
            let said = format!("Permission denied by orchestrate's permission policy: {denied}.");
            assert!(seen[0].contains(&said), "the model read {seen:?}");
        } else {
            assert_eq!(std::fs::read_to_string(&pwned).unwrap(), "x\n");
            assert!(!seen[0].contains("denied"), "the model read {seen:?}");
        }
        // One answer on claude's stdin, after the task.
        assert_eq!(stdin_types(&sb.state), ["user", "control_response"], "{r}");
    }
}

/// The types of the lines orchestrate wrote to claude's stdin in the only run.
fn stdin_types(state: &Path) -> Vec<String> {
    let runs: Vec<_> = std::fs::read_dir(state.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    std::fs::read_to_string(runs[0].join("stdin.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}
