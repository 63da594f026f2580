//! Contract tests: the real opencode (`opencode run --format json`) run through
//! `orchestrate run --backend opencode` against the loopback mock LLM (OpenAI Chat
//! Completions, through an `@ai-sdk/openai-compatible` provider).
//!
//! opencode comes from `ORCHESTRATE_CONTRACT_OPENCODE` (set by
//! `scripts/install-agent-clis`' env.sh); without it each test prints why it skips and
//! passes, unless `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure. Offline settings
//! live here, not in the product: a temp HOME whose `~/.config/opencode/opencode.json`
//! defines the `mock` provider (orchestrate's own `OPENCODE_CONFIG`, with the agent, is
//! layered on top of it), models.dev fetches, autoupdate, default plugins and sharing off.

mod mock_llm;

use std::time::Duration;

use mock_llm::contract::{self, normalized, report, Finished, Sandbox};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const WALL_CLOCK: Duration = Duration::from_secs(120);
const MODEL: &str = "mock/mock-model";
/// The mock model's prices in the provider config, $ per million tokens.
const PRICE_INPUT: f64 = 1.0;
const PRICE_OUTPUT: f64 = 2.0;
const PRICE_CACHE_READ: f64 = 0.5;

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
const READER: &str = "---\nname: reader\ndescription: d\ntools: read, grep, bash\nreadonly: true\n---\nYou only look.\n";
const IMPLEMENTER: &str = "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";

/// A sandbox whose opencode talks only to a mock running `script` (made with the
/// sandbox's paths at hand); None when opencode is not installed.
fn setup(script: impl FnOnce(&Sandbox) -> Script) -> Option<(MockLlm, Sandbox)> {
    let mut sb = Sandbox::new("ORCHESTRATE_CONTRACT_OPENCODE", "opencode", MODEL)?;
    let mock = MockLlm::start(script(&sb));
    let config_dir = sb.home.join(".config/opencode");
    std::fs::create_dir_all(&config_dir).unwrap();
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": format!("{}/v1", mock.base_url()), "apiKey": "test-key"},
            "models": {"mock-model": {"name": "Mock model",
                "cost": {"input": PRICE_INPUT, "output": PRICE_OUTPUT, "cache_read": PRICE_CACHE_READ, "cache_write": 0}}}
        }},
        "model": MODEL,
        "autoupdate": false,
        "share": "disabled"
    });
    std::fs::write(config_dir.join("opencode.json"), config.to_string()).unwrap();
    // opencode installs `@opencode-ai/plugin` into each config dir from npm, unless the
    // dir has a node_modules and a package-lock naming it; its tools wait for that
    // install, which against an unreachable registry took 1 to 4+ s of silent startup.
    std::fs::create_dir_all(config_dir.join("node_modules")).unwrap();
    std::fs::write(
        config_dir.join("package-lock.json"),
        json!({"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}).to_string(),
    )
    .unwrap();
    sb.catch_outbound(&mock)
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_SHARE", "1");
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

/// The function names a Chat Completions request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// The `role: "tool"` messages of a Chat Completions request, as text.
fn tool_outputs(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

/// Traffic beside the conversation is only opencode's title request (answered by the
/// mock as side traffic); nothing tries another host (a `CONNECT` through the proxy).
fn assert_only_known_side_traffic(mock: &MockLlm) {
    for r in mock.requests() {
        assert!(r.api.is_some(), "unexpected traffic: {r:#?}");
    }
    let side: Vec<String> = mock
        .requests()
        .iter()
        .filter(|r| r.side)
        .map(|r| mock_llm::system_text(Api::OpenAiChat, &r.body))
        .collect();
    assert!(
        side.iter().all(|s| s.contains("You are a title generator")),
        "{side:?}"
    );
}

#[test]
fn a_tool_call_then_text_gives_the_mocks_text_tool_call_usage_and_cost() {
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
    let args = json!({"command": "echo hi-from-tool", "description": "echo"});
    let Some((mock, sb)) = setup(|_| {
        Script::tool_then_text(
            Reply::tool("bash", args.clone(), first),
            Reply::text("Hello from mock.", second),
        )
    }) else {
        return;
    };
    let out = run(&sb, "worker", "Run echo hi-from-tool, then greet.", &[]);
    show("tool then text", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    // opencode's step_finish parts, summed: input excludes the cached tokens, and the
    // cost comes from the prices in the provider config.
    let input = (first.input - first.cached) + (second.input - second.cached);
    let cache_read = first.cached + second.cached;
    let output = first.output + second.output;
    let cost = (input as f64 * PRICE_INPUT
        + output as f64 * PRICE_OUTPUT
        + cache_read as f64 * PRICE_CACHE_READ)
        / 1e6;
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
                      "cost": contract::round_cost(cost), "turns": 2},
            "sessionFile": "SESSION",
            "output": "Hello from mock.",
            "displayItems": [
                {"type": "toolCall", "name": "bash", "args": args},
                {"type": "text", "text": "Hello from mock."}
            ],
            "backend": "opencode",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );

    // What opencode sent: two Chat Completions requests in the conversation, the second
    // with the command's real output.
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 2, "{:#?}", mock.requests());
    assert_only_known_side_traffic(&mock);
    for r in &reqs {
        assert_eq!(r.api, Some(Api::OpenAiChat));
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.headers["authorization"], "Bearer test-key");
        assert_eq!(r.body["model"], json!("mock-model"));
        assert_eq!(r.body["stream"], json!(true));
    }
    let mut tools = offered_tools(&reqs[0].body);
    tools.sort();
    // The agent's read and bash; the tools it did not list that can write or run a
    // subagent are off; opencode's harmless extras stay.
    assert_eq!(tools, ["bash", "read", "skill", "todowrite", "webfetch"]);
    let system = mock_llm::system_text(Api::OpenAiChat, &reqs[0].body);
    assert!(
        system.contains("You are terse."),
        "agent prompt as instructions: {system}"
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
            body: mock_llm::error_body(Api::OpenAiChat, 401, message),
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
            "backend": "opencode",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 1}
        })
    );
    assert_eq!(mock.conversation().len(), 1, "a 401 is not retried");
}

#[test]
fn a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_opencodes_tree() {
    let Some((mock, mut sb)) = setup(|_| Script::always(Reply::hang("Thinking about it"))) else {
        return;
    };
    // opencode prints nothing until its first model request is under way, 3 to 6 s after
    // it starts on a busy machine: with its logs on stderr (a line every second or so
    // while it starts, none once the stream hangs) the 5 s measure the hang, not startup.
    sb.env("OPENCODE_PRINT_LOGS", "1");
    let (out, tree) = sb.run_until_timeout(
        &mock,
        "worker",
        &["--idle-timeout", "5s", "--kill-grace", "2s"],
        1,
        Duration::from_millis(500),
        WALL_CLOCK,
    );
    show("hang", &mock, &out);
    eprintln!("=== opencode's tree before the timeout: {tree:?}");
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
            "backend": "opencode",
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

fn tool(name: &str, args: Value) -> Reply {
    Reply::tool(name, args, MockUsage::default())
}

/// opencode's own write tool on an absolute path in the working directory.
fn write_call(path: &str) -> Reply {
    tool("write", json!({"filePath": path, "content": "x\n"}))
}

/// What opencode reports for a tool the session does not have: the call goes to its
/// `invalid` tool, with the name the model used.
fn unavailable(name: &str, available: &str) -> Value {
    json!({"type": "toolCall", "name": "invalid", "args": {
        "tool": name,
        "error": format!("Model tried to call unavailable tool '{name}'. Available tools: {available}."),
    }})
}

#[test]
fn a_read_only_agent_cannot_write_nor_hand_the_write_to_a_subagent() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        // A `general` subagent first (it has write and bash, and without the agent's
        // own `task: false` it would get the two writes that follow as its own turns),
        // then the write tool, then the shell.
        Script::sequence(vec![
            tool(
                "task",
                json!({"description": "write", "prompt": "Create pwned.txt containing x.", "subagent_type": "general"}),
            ),
            write_call(path.to_str().unwrap()),
            tool(
                "bash",
                json!({"command": "echo x > pwned.txt", "description": "write"}),
            ),
            Reply::text("I could not write.", MockUsage::default()),
        ])
    }) else {
        return;
    };
    // A project config that allows everything: opencode reads it after orchestrate's
    // file, so only the agent's own settings can hold against it.
    std::fs::write(
        sb.work.join("opencode.json"),
        json!({"permission": {"edit": "allow", "bash": "allow", "task": "allow"},
               "tools": {"write": true, "edit": true, "bash": true, "task": true}})
        .to_string(),
    )
    .unwrap();
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
    let available = "grep, invalid, read, skill, todowrite, webfetch";
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "reader",
            "task": "Create pwned.txt containing x.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 4},
            "sessionFile": "SESSION",
            "output": "I could not write.",
            "displayItems": [
                unavailable("task", available),
                unavailable("write", available),
                unavailable("bash", available),
                {"type": "text", "text": "I could not write."}
            ],
            "backend": "opencode",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
    // The session never had them: not offered to the model at all.
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 4, "{:#?}", mock.requests());
    let mut tools = offered_tools(&reqs[0].body);
    tools.sort();
    assert_eq!(tools, ["grep", "read", "skill", "todowrite", "webfetch"]);
}

#[test]
fn an_implementer_writes_with_write_and_the_shell_without_a_prompt() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        Script::sequence(vec![
            write_call(path.to_str().unwrap()),
            tool(
                "bash",
                json!({"command": "echo y >> pwned.txt", "description": "append"}),
            ),
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
                {"type": "toolCall", "name": "write", "args": {"filePath": pwned.to_str().unwrap(), "content": "x\n"}},
                {"type": "toolCall", "name": "bash", "args": {"command": "echo y >> pwned.txt", "description": "append"}},
                {"type": "text", "text": "Wrote it."}
            ],
            "backend": "opencode",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
}
