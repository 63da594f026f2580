//! Contract tests: the real Codex CLI (`codex exec --json`) run through
//! `orchestrate run --backend codex` against the loopback mock LLM (OpenAI Responses,
//! `/v1/responses`, through a custom model provider).
//!
//! codex comes from `ORCHESTRATE_CONTRACT_CODEX` (set by `scripts/install-agent-clis`'
//! env.sh); without it each test prints why it skips and passes, unless
//! `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure. Offline settings live here, not
//! in the product: `CODEX_HOME` in a temp dir whose config.toml names a `mock` provider at
//! the mock (HTTP SSE; the built-in provider would try WebSockets first), retries off,
//! plugins and analytics off (without them codex connects to github.com and chatgpt.com).

mod mock_llm;

use std::time::Duration;

use mock_llm::contract::{normalized, report, Finished, Sandbox};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const WALL_CLOCK: Duration = Duration::from_secs(120);
/// A slug codex knows (an unknown one adds a "Model metadata … not found" error item).
const MODEL: &str = "gpt-5.5";

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
const READER: &str = "---\nname: reader\ndescription: d\ntools: read, grep, bash\nreadonly: true\n---\nYou only look.\n";
const IMPLEMENTER: &str = "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";

/// A sandbox whose codex talks only to a mock running `script` (made with the sandbox's
/// paths at hand); None when codex is not installed.
fn setup(script: impl FnOnce(&Sandbox) -> Script) -> Option<(MockLlm, Sandbox)> {
    let mut sb = Sandbox::new("ORCHESTRATE_CONTRACT_CODEX", "codex", MODEL)?;
    let mock = MockLlm::start(script(&sb));
    let codex_home = sb.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "{MODEL}"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
"#,
        mock.base_url()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    sb.catch_outbound(&mock)
        .env("CODEX_HOME", &codex_home)
        .env("MOCK_API_KEY", "test-key");
    for (name, text) in [
        ("worker", WORKER),
        ("reader", READER),
        ("implementer", IMPLEMENTER),
    ] {
        sb.agent(name, text);
    }
    Some((mock, sb))
}

fn run(sb: &Sandbox, agent: &str, task: &str, extra: &[&str]) -> Finished {
    sb.run(agent, task, extra, WALL_CLOCK)
}

fn show(case: &str, mock: &MockLlm, out: &Finished) {
    report(case, mock, out, 600);
}

/// The tool names a Responses request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            t["name"]
                .as_str()
                .or(t["type"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// The `function_call_output` items of a Responses request, as text.
fn tool_outputs(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .map(|i| i["output"].to_string())
        .collect()
}

#[test]
fn a_tool_call_then_text_gives_the_mocks_text_tool_call_and_usage() {
    let first = MockUsage {
        input: 200,
        output: 14,
        cached: 40,
    };
    let second = MockUsage {
        input: 300,
        output: 9,
        cached: 100,
    };
    let Some((mock, sb)) = setup(|_| {
        Script::tool_then_text(
            Reply::tool("exec_command", json!({"cmd": "echo hi-from-tool"}), first),
            Reply::text("Hello from mock.", second),
        )
    }) else {
        return;
    };
    let out = run(&sb, "worker", "Run echo hi-from-tool, then greet.", &[]);
    show("tool then text", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    // codex's turn.completed sums both requests, and its input_tokens include the cached
    // ones: input = prompt - cached, cacheRead = cached. codex computes no cost.
    let input = (first.input - first.cached) + (second.input - second.cached);
    let cache_read = first.cached + second.cached;
    let output = first.output + second.output;
    let json = out.json();
    assert_eq!(
        json["content"],
        json!([{"type": "text", "text": "Hello from mock."}])
    );
    assert_eq!(json["details"]["mode"], json!("single"));
    assert_eq!(json["details"].get("error"), None);
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "worker",
            "task": "Run echo hi-from-tool, then greet.",
            "exitCode": 0,
            "usage": {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
                      "cost": 0.0, "turns": 2},
            "sessionFile": "SESSION",
            "output": "Hello from mock.",
            "displayItems": [
                // codex reports the command it ran, wrapped in its login shell.
                {"type": "toolCall", "name": "bash", "args": {"command": "/bin/bash -lc 'echo hi-from-tool'"}},
                {"type": "text", "text": "Hello from mock."}
            ],
            "backend": "codex",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );

    // What codex sent: two Responses requests and nothing else, the second with the
    // command's real output.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no other traffic: {reqs:#?}");
    for r in &reqs {
        assert_eq!(r.api, Some(Api::OpenAiResponses));
        assert_eq!(r.path, "/v1/responses");
        assert_eq!(r.headers["authorization"], "Bearer test-key");
        assert_eq!(r.body["model"], json!(MODEL));
        assert_eq!(r.body["stream"], json!(true));
    }
    let tools = offered_tools(&reqs[0].body);
    assert!(
        tools.iter().any(|t| t == "exec_command"),
        "codex's shell tool: {tools:?}"
    );
    let system = mock_llm::system_text(Api::OpenAiResponses, &reqs[0].body);
    assert!(
        system.contains("You are terse."),
        "agent prompt as developer instructions: {system}"
    );
    let outputs = tool_outputs(&reqs[1].body);
    assert_eq!(outputs.len(), 1, "{outputs:?}");
    assert!(
        outputs[0].contains("hi-from-tool"),
        "the command really ran: {outputs:?}"
    );
}

#[test]
fn a_401_is_subagent_failed_with_the_providers_message() {
    let message = "Mock provider says: the API key test-key was rejected";
    let Some((mock, sb)) = setup(|_| {
        Script::always(Reply::HttpError {
            status: 401,
            body: mock_llm::error_body(Api::OpenAiResponses, 401, message),
        })
    }) else {
        return;
    };
    let out = run(&sb, "worker", "Say hi.", &[]);
    show("401", &mock, &out);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let error = &json["details"]["error"];
    assert_eq!(error["code"], json!("SUBAGENT_FAILED"), "{json}");
    let msg = error["message"].as_str().unwrap();
    assert!(msg.contains(message), "provider message kept: {msg}");
    let r = out.result();
    assert!(
        r["error"].as_str().unwrap().contains(message),
        "result error: {r}"
    );
    let mut whole = normalized(r.clone());
    whole["error"] = json!("ERROR");
    assert_eq!(
        whole,
        json!({
            "agent": "worker",
            "task": "Say hi.",
            "exitCode": 1,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
            "error": "ERROR",
            "sessionFile": "SESSION",
            "output": "",
            "displayItems": [],
            "backend": "codex",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 1}
        })
    );
    assert_eq!(mock.requests().len(), 1, "retries are off");
}

#[test]
fn a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_codexs_tree() {
    let Some((mock, sb)) = setup(|_| Script::always(Reply::hang("Thinking about it"))) else {
        return;
    };
    let (out, tree) = sb.run_until_timeout(
        &mock,
        "worker",
        &["--idle-timeout", "5s", "--kill-grace", "2s"],
        1,
        Duration::from_millis(500),
        WALL_CLOCK,
    );
    show("hang", &mock, &out);
    eprintln!("=== codex's tree before the timeout: {tree:?}");
    assert!(
        tree.len() >= 2,
        "the node launcher and the native binary: {tree:?}"
    );
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_TIMEOUT", "message": "Subagent timed out after 5000ms without activity."})
    );
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "worker",
            "task": "Say hi.",
            "exitCode": 124,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
            "error": "Subagent timed out after 5000ms without activity.",
            "sessionFile": "SESSION",
            "output": "",
            "displayItems": [],
            "timeoutReason": "idle",
            "backend": "codex",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "terminated", "reason": "idleTimeout"}
        })
    );
    assert!(
        out.elapsed < Duration::from_secs(60),
        "took {:?}",
        out.elapsed
    );
}

/// codex's own write tool: `apply_patch` is a freeform tool (a `custom_tool_call` whose
/// input is the patch text; as a JSON function call codex rejects it).
fn patch_call() -> Reply {
    Reply::custom_tool(
        "apply_patch",
        "*** Begin Patch\n*** Add File: pwned.txt\n+x\n*** End Patch\n",
        MockUsage::default(),
    )
}

fn shell_call(cmd: &str) -> Reply {
    Reply::tool("exec_command", json!({ "cmd": cmd }), MockUsage::default())
}

#[test]
fn a_read_only_agent_cannot_write_with_apply_patch_or_the_shell() {
    let Some((mock, sb)) = setup(|_| {
        Script::sequence(vec![
            patch_call(),
            shell_call("echo x > pwned.txt"),
            Reply::text("I could not write.", MockUsage::default()),
        ])
    }) else {
        return;
    };
    let pwned = sb.work.join("pwned.txt");
    let out = run(
        &sb,
        "reader",
        "Create pwned.txt containing x.",
        &["--idle-timeout", "30s"],
    );
    show("read-only write", &mock, &out);
    assert!(!pwned.exists(), "a read-only agent wrote {pwned:?}");
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    // codex prints no item for a patch it rejected or a command the sandbox stopped, so
    // the attempts are not display items; the mock saw them (below).
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "reader",
            "task": "Create pwned.txt containing x.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1},
            "sessionFile": "SESSION",
            "output": "I could not write.",
            "displayItems": [{"type": "text", "text": "I could not write."}],
            "backend": "codex",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
    // How codex refused: `-s read-only` rejects the patch outright (exec never asks for
    // approval), and runs the command in a read-only sandbox.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 3, "{reqs:#?}");
    let outputs = tool_outputs(&reqs[2].body);
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(
        outputs[0].contains("writing is blocked by read-only sandbox"),
        "{outputs:?}"
    );
    assert!(outputs[1].contains("Read-only file system"), "{outputs:?}");
}

#[test]
fn an_implementer_writes_with_apply_patch_and_the_shell_without_a_prompt() {
    let Some((mock, sb)) = setup(|_| {
        Script::sequence(vec![
            patch_call(),
            shell_call("echo y >> pwned.txt"),
            Reply::text("Wrote it.", MockUsage::default()),
        ])
    }) else {
        return;
    };
    let pwned = sb.work.join("pwned.txt");
    // A permission prompt would hang a headless run: the idle timeout would say so.
    let out = run(
        &sb,
        "implementer",
        "Create pwned.txt containing x.",
        &["--idle-timeout", "30s"],
    );
    show("implementer write", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&pwned).ok().as_deref(),
        Some("x\ny\n"),
        "the implementer wrote the file with both tools"
    );
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "implementer",
            "task": "Create pwned.txt containing x.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 3},
            "sessionFile": "SESSION",
            "output": "Wrote it.",
            "displayItems": [
                {"type": "toolCall", "name": "edit", "args": {"changes": [{"kind": "add", "path": pwned.to_str().unwrap()}]}},
                {"type": "toolCall", "name": "bash", "args": {"command": "/bin/bash -lc 'echo y >> pwned.txt'"}},
                {"type": "text", "text": "Wrote it."}
            ],
            "backend": "codex",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
}
