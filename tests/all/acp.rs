//! The ACP backend over the fake child (`FAKE_AGENT_SCENARIO=acp`, examples/fake_agent.rs):
//! orchestrate's side of the conversation, its permission decisions, and its edge cases
//! (an agent that never answers initialize, that prints garbage, that asks permission for
//! an unknown tool, that ignores the cancel). Whole results are compared.

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{fake_agent_bin, Sandbox};

/// An agent of the `acp` backend whose command is the fake child.
fn agent(name: &str, tools: &str, readonly: bool) -> String {
    format!(
        "---\nname: {name}\ndescription: d\ntools: {tools}\nreadonly: {readonly}\nbackend: acp\nacp_command: {}\n---\nBe brief.\n",
        fake_agent_bin().display()
    )
}

fn sandbox(variant: &str) -> Sandbox {
    let sb = Sandbox::new().scenario("acp").set("FAKE_ACP", variant);
    for (name, tools, readonly) in [
        ("implementer", "read, edit, write, bash", false),
        ("reader", "read, grep, bash", true),
        ("shell", "read, bash", false),
    ] {
        std::fs::write(
            sb.agents.join(format!("{name}.md")),
            agent(name, tools, readonly),
        )
        .unwrap();
    }
    sb
}

fn run(sb: &Sandbox, agent: &str, extra: &[&str]) -> support::RunOutput {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run",
        agent,
        "Write x.",
        "--agents-dir",
        &agents,
        "--details",
        "full",
    ];
    args.extend_from_slice(extra);
    sb.run_args(&args)
}

/// The result with what varies between runs fixed: the session file (checked to exist),
/// the duration, the child's session id.
fn normalized(mut r: Value) -> Value {
    let session = r["sessionFile"].as_str().expect("sessionFile").to_string();
    assert!(std::path::Path::new(&session).is_file());
    r["sessionFile"] = json!("SESSION");
    r["durationMs"] = json!(0);
    r
}

/// What orchestrate wrote to the child's stdin, as JSON lines.
fn sent(r: &Value) -> Vec<Value> {
    let session = std::path::Path::new(r["sessionFile"].as_str().unwrap());
    std::fs::read_to_string(session.with_file_name("stdin.jsonl"))
        .expect("stdin.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn methods(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| match l["method"].as_str() {
            Some(m) => m.to_string(),
            None => format!("reply {}", l["result"]["outcome"]),
        })
        .collect()
}

const TOOLS_WARNING: &str = "an ACP agent keeps its own tool set: its permission requests are answered by the agent's tools and sandbox, and the sandbox holds the rest";

fn success(agent: &str, option: &str, permission: Value, usage: Value) -> Value {
    let tool_call = json!({"type": "toolCall", "name": "edit", "args": {"title": "write x.txt"}});
    let mut items = vec![];
    if option == "yes" {
        items.push(tool_call);
    }
    items.push(json!({"type": "text", "text": format!("Done: {option}")}));
    json!({
        "agent": agent, "task": "Write x.", "exitCode": 0,
        "usage": usage,
        "sessionFile": "SESSION", "output": format!("Done: {option}"),
        "displayItems": items,
        "backend": "acp", "durationMs": 0, "attempts": 1,
        "termination": {"kind": "exited", "code": 0},
        "childSessionId": "fake-session-1",
        "warnings": [TOOLS_WARNING],
        "sandbox": {"mode": "off", "mechanism": "none"},
        "network": {"mode": "on"},
        "permissions": [permission],
    })
}

fn usage(turns: u64) -> Value {
    json!({"input": 120, "output": 7, "cacheRead": 30, "cacheWrite": 0, "cost": 0.25, "turns": turns})
}

#[test]
fn an_implementers_edit_in_its_workspace_is_allowed_and_the_conversation_is_recorded() {
    let sb = sandbox("ok");
    let out = run(&sb, "implementer", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        normalized(r.clone()),
        success(
            "implementer",
            "yes",
            json!({"tool": "edit", "decision": "allowed", "by": "policy", "title": "write x.txt"}),
            usage(2)
        )
    );
    let lines = sent(&r);
    assert_eq!(
        methods(&lines),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "reply {\"optionId\":\"yes\",\"outcome\":\"selected\"}"
        ]
    );
    assert_eq!(
        lines[0]["params"]["clientCapabilities"],
        json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}),
        "no client file or terminal methods"
    );
    assert_eq!(lines[1]["params"]["cwd"], json!(sb.work.to_str().unwrap()));
    let prompt = lines[2]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert_eq!(
        prompt,
        "<instructions>\nBe brief.\n</instructions>\n\nTask: Write x."
    );
}

#[test]
fn a_read_only_agents_edit_is_rejected_and_the_lean_result_counts_it() {
    let sb = sandbox("ok");
    let out = run(&sb, "reader", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        normalized(r),
        success(
            "reader",
            "no",
            json!({"tool": "edit", "decision": "rejected", "by": "policy", "title": "write x.txt",
                   "reason": "the agent is read-only"}),
            usage(1)
        )
    );
    // The lean result a parent gets: counts.
    let agents = sb.agents.to_str().unwrap().to_string();
    let lean = sb.run_args(&["run", "reader", "Write x.", "--agents-dir", &agents]);
    assert_eq!(
        lean.json()["details"]["results"][0]["permissions"],
        json!({"allowed": 0, "rejected": 1})
    );
}

#[test]
fn an_unknown_tool_outside_the_agents_list_is_rejected_and_allow_and_deny_override_the_policy() {
    let sb = sandbox("ok").set("FAKE_ACP_TOOL", "other:deploy:");
    let out = run(&sb, "shell", &[]);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        r["permissions"],
        json!([{"tool": "deploy", "decision": "rejected", "by": "policy", "title": "deploy",
                "reason": "deploy is not among the agent's tools"}])
    );
    assert_eq!(r["output"], json!("Done: no"));
    let out = run(&sb, "shell", &["--permissions", "allow"]);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        (
            r["permissions"][0]["decision"].clone(),
            r["permissions"][0]["by"].clone(),
            r["output"].clone()
        ),
        (json!("allowed"), json!("allow"), json!("Done: yes"))
    );
    let out = run(&sb, "implementer", &["--permissions", "deny"]);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        (
            r["permissions"][0]["decision"].clone(),
            r["permissions"][0]["by"].clone()
        ),
        (json!("rejected"), json!("deny"))
    );
    // ask from the command line: no parent waits to be asked; decided by policy, and the
    // warning says why.
    let out = run(&sb, "shell", &["--permissions", "ask"]);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(r["permissions"][0]["by"], json!("policy"));
    assert_eq!(
        r["warnings"],
        json!([
            TOOLS_WARNING,
            "permissions ask: no parent is waiting for this run to ask (only a foreground subagent call of orchestrate mcp, whose client supports MCP elicitation, can be asked); the child's permission requests are decided by policy"
        ]),
    );
    // An edit outside the workspace.
    let sb = sandbox("ok").set("FAKE_ACP_TOOL", "edit:write:/etc/x");
    let r = run(&sb, "implementer", &[]).json()["details"]["results"][0].clone();
    assert_eq!(
        r["permissions"][0]["reason"],
        json!("/etc/x is outside the workspace")
    );
}

/// A title is the agent's free text (often the model's own words): an `other` call titled
/// like one of orchestrate's tools, outside the workspace, is not that tool, for a reader
/// (whose list names `read` and `bash`) nor for an agent that may run commands.
#[test]
fn a_misleading_title_does_not_make_an_other_call_a_read_or_a_listed_tool() {
    for (agent, tool) in [
        ("reader", "other:Read:/etc/shadow"),
        ("reader", "other:read:/etc/shadow"),
        ("shell", "other:bash:/etc/cron.d/x"),
    ] {
        let sb = sandbox("ok").set("FAKE_ACP_TOOL", tool);
        let r = run(&sb, agent, &[]).json()["details"]["results"][0].clone();
        let title = tool.split(':').nth(1).unwrap();
        assert_eq!(
            (r["permissions"].clone(), r["output"].clone()),
            (
                json!([{"tool": title, "decision": "rejected", "by": "policy", "title": title,
                        "reason": format!("{title} is an `other` call, not one of the agent's own tools")}]),
                json!("Done: no")
            ),
            "{agent} asking for {tool}"
        );
    }
}

#[test]
fn garbage_lines_are_counted_and_skipped_and_the_run_still_answers() {
    let sb = sandbox("garbage");
    let out = run(&sb, "implementer", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    let mut want = success(
        "implementer",
        "yes",
        json!({"tool": "edit", "decision": "allowed", "by": "policy", "title": "write x.txt"}),
        usage(2),
    );
    want["skippedLines"] = json!(3);
    assert_eq!(normalized(r), want);
}

#[test]
fn an_agent_that_never_answers_initialize_hits_the_idle_timeout_and_leaves_nothing() {
    let sb = sandbox("silent-init");
    let out = run(&sb, "implementer", &["--idle-timeout", "2s"]);
    assert_eq!(out.status, 124, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(r["timeoutReason"], json!("idle"));
    // Nothing was under way to cancel: SIGTERM at once, which ended it.
    assert_eq!(
        r["termination"],
        json!({"kind": "terminated", "reason": "idleTimeout"})
    );
    assert_eq!(methods(&sent(&r)), ["initialize"]);
    assert!(out.elapsed < Duration::from_secs(30), "{:?}", out.elapsed);
}

#[test]
fn a_runtime_timeout_sends_session_cancel_first_and_the_agents_end_of_turn_brings_sigterm() {
    let sb = sandbox("hang");
    let out = run(
        &sb,
        "implementer",
        &["--timeout", "2s", "--kill-grace", "20s"],
    );
    assert_eq!(out.status, 124, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        r["termination"],
        json!({"kind": "terminated", "reason": "runtimeTimeout"})
    );
    assert_eq!(
        r["output"],
        json!("Working on it"),
        "the partial answer is kept"
    );
    let lines = sent(&r);
    assert_eq!(
        methods(&lines),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/cancel"
        ]
    );
    assert_eq!(lines[3]["params"], json!({"sessionId": "fake-session-1"}));
    // The agent said its turn was cancelled, and SIGTERM followed at once, not after the
    // 20 s grace.
    let session = std::fs::read_to_string(r["sessionFile"].as_str().unwrap()).unwrap();
    assert!(session.contains(r#""stopReason":"cancelled""#), "{session}");
    assert!(out.elapsed < Duration::from_secs(15), "{:?}", out.elapsed);
}

#[test]
fn an_agent_that_ignores_the_cancel_and_sigterm_is_killed_after_both_graces() {
    let sb = sandbox("ignore-cancel");
    let out = run(
        &sb,
        "implementer",
        &["--timeout", "1s", "--kill-grace", "1s"],
    );
    assert_eq!(out.status, 124, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        r["termination"],
        json!({"kind": "killed", "reason": "runtimeTimeout", "kill": "escalated"})
    );
    assert_eq!(
        methods(&sent(&r)),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/cancel"
        ]
    );
    assert!(out.elapsed >= Duration::from_secs(3), "{:?}", out.elapsed);
}

#[test]
fn a_budget_stop_starts_with_session_cancel_too() {
    // The cost the agent reports (0.25) passes a budget of 0.1, and it goes on thinking.
    let sb = sandbox("hang");
    let out = run(
        &sb,
        "implementer",
        &["--max-cost", "0.1", "--kill-grace", "20s"],
    );
    assert_eq!(out.status, 1, "{}", out.stderr);
    let r = out.json()["details"]["results"][0].clone();
    assert_eq!(
        r["limit"],
        json!({"kind": "cost", "limit": 0.1, "used": 0.25})
    );
    assert_eq!(
        r["termination"],
        json!({"kind": "terminated", "reason": "budget"})
    );
    assert_eq!(
        methods(&sent(&r)),
        [
            "initialize",
            "session/new",
            "session/prompt",
            "session/cancel"
        ]
    );
    assert!(out.elapsed < Duration::from_secs(15), "{:?}", out.elapsed);
}
