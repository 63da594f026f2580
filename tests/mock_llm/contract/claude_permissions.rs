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

/// How the test's MCP client answers `elicitation/create`: with `allow`, or (`never`)
/// not at all; it keeps each question.
#[derive(Clone, Default)]
struct Parent {
    never: bool,
    asked: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl rmcp::ClientHandler for Parent {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::{
            ClientCapabilities, ClientConfig, ElicitationCapability, FormElicitationCapability,
            Implementation,
        };
        let mut caps = ClientCapabilities::default();
        let mut e = ElicitationCapability::new();
        e.form = Some(FormElicitationCapability::default());
        caps.elicitation = Some(e);
        ClientConfig::new(caps, Implementation::new("claude-ask-test", "1.0"))
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _: rmcp::service::RequestContext<rmcp::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            panic!("a form was expected: {request:?}");
        };
        self.asked.lock().unwrap().push(message);
        if self.never {
            return std::future::pending().await;
        }
        let mut r = ElicitResult::new(ElicitationAction::Accept);
        r.content = Some(json!({"allow": true}));
        Ok(r)
    }
}

/// `permissions: ask` with a real MCP client as the parent of `orchestrate mcp`, whose
/// child is the real claude: claude's request for the read-only agent's writing command
/// (which the policy would reject) reaches the client as `elicitation/create`, the
/// client allows it, and the command runs.
pub fn the_parent_answers_claudes_request(cli: &Cli, bin: &Path) {
    let (mock, sb) = setup(cli, bin, |_| {
        Script::tool_then_text(
            (cli.shell)(COMMAND).reply,
            Reply::text("Done.", MockUsage::default()),
        )
    });
    let parent = Parent::default();
    let asked = parent.asked.clone();
    let r = call_subagent(cli, &sb, parent, json!({}));
    assert_eq!(r["exitCode"], json!(0), "{r}");
    assert_eq!(r["output"], json!("Done."), "{r}");
    // Nothing to warn of: claude asks, and its parent was asked.
    assert_eq!(r["warnings"], Value::Null, "{r}");
    assert_eq!(
        r["permissions"],
        json!([{"tool": "Bash", "decision": "allowed", "by": "parent", "title": COMMAND}]),
        "{r}"
    );
    assert_eq!(
        asked.lock().unwrap().clone(),
        [format!(
            "Subagent reader asks to run a command (Bash): {COMMAND}. Allow it?"
        )]
    );
    let pwned = sb.work.join("pwned.txt");
    assert_eq!(std::fs::read_to_string(&pwned).unwrap(), "x\n");
    assert_eq!(mock.conversation().len(), 2, "{:#?}", mock.requests());
}

/// The same request to a parent that never answers: claude waits for its answer, and
/// the run's timeout still ends the run on time (claude is interrupted, the call denied
/// and recorded as cancelled by the stop); the command never runs.
pub fn a_stop_while_the_parent_is_asked_ends_the_run(cli: &Cli, bin: &Path) {
    let (mock, sb) = setup(cli, bin, |_| {
        Script::tool_then_text(
            (cli.shell)(COMMAND).reply,
            Reply::text("Done.", MockUsage::default()),
        )
    });
    let parent = Parent {
        never: true,
        ..Parent::default()
    };
    let asked = parent.asked.clone();
    let started = std::time::Instant::now();
    let r = call_subagent(
        cli,
        &sb,
        parent,
        json!({"timeoutMs": 8000, "idleTimeoutMs": 60000}),
    );
    // The run's timeout, not the parent's 120 s bound, ended it.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r["exitCode"], json!(124), "{r}");
    assert_eq!(r["timeoutReason"], json!("runtime"), "{r}");
    assert_eq!(
        r["permissions"],
        json!([{"tool": "Bash", "decision": "cancelled", "by": "stop", "title": COMMAND}]),
        "{r}"
    );
    assert_eq!(asked.lock().unwrap().len(), 1);
    assert!(!sb.work.join("pwned.txt").exists());
    assert_eq!(mock.conversation().len(), 1, "{:#?}", mock.requests());
}

/// Calls `subagent` for `reader` under `permissions: ask` (plus `extra` arguments) on an
/// `orchestrate mcp` whose client is `parent`; the call's first result.
fn call_subagent(cli: &Cli, sb: &super::Sandbox, parent: Parent, extra: Value) -> Value {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.in_sandbox(super::super::orchestrate_command(&[
        "mcp",
        "--agents-dir",
        &agents,
    ]));
    // The server's backend: a `subagent` call does not name one.
    cmd.env("ORCHESTRATE_BACKEND", cli.name)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let r: Value = runtime.block_on(async {
        use rmcp::ServiceExt;
        let mut process = tokio::process::Command::from(cmd)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn orchestrate mcp");
        let (stdin, stdout) = (
            process.stdin.take().unwrap(),
            process.stdout.take().unwrap(),
        );
        let client = parent.serve((stdout, stdin)).await.expect("MCP handshake");
        let mut args = json!({
            "agent": "reader", "task": WRITE_TASK, "permissions": "ask", "details": "full",
            "model": cli.model, "sandbox": "off", "cwd": sb.work.to_str().unwrap(),
        });
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let call = rmcp::model::CallToolRequestParams::new("subagent")
            .with_arguments(args.as_object().unwrap().clone());
        let r = tokio::time::timeout(WALL_CLOCK, client.call_tool(call))
            .await
            .expect("the call ends")
            .expect("a tool result");
        client.cancel().await.unwrap();
        let _ = process.wait().await;
        r.structured_content.expect("structuredContent")
    });
    super::super::harness::note(&format!("subagent: {r}"));
    r["results"][0].clone()
}
