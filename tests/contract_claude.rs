//! Contract tests: the real Claude Code (`claude -p --output-format stream-json`) run
//! through `orchestrate run --backend claude` against the loopback mock LLM (Anthropic
//! Messages, `/v1/messages?beta=true`).
//!
//! claude comes from `ORCHESTRATE_CONTRACT_CLAUDE` (set by `scripts/install-agent-clis`'
//! env.sh); without it each test prints why it skips and passes, unless
//! `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure. Offline settings live here, not
//! in the product: `ANTHROPIC_BASE_URL` at the mock, nonessential traffic (telemetry,
//! update checks, error reports) off, retries off, `IS_SANDBOX=1` (claude refuses some
//! permission modes as root without it), HOME and `CLAUDE_CONFIG_DIR` in a temp dir.

mod mock_llm;

use std::time::Duration;

use mock_llm::contract::{self, normalized, report, Finished, Sandbox};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const WALL_CLOCK: Duration = Duration::from_secs(120);
/// A model id in claude's price table, so that it computes a cost.
const MODEL: &str = "claude-sonnet-4-5";
/// claude-sonnet-4-5 prices, $ per million tokens (claude's own table).
const PRICE_INPUT: f64 = 3.0;
const PRICE_OUTPUT: f64 = 15.0;
const PRICE_CACHE_READ: f64 = 0.3;

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
const READER: &str = "---\nname: reader\ndescription: d\ntools: read, grep, bash\nreadonly: true\n---\nYou only look.\n";
const IMPLEMENTER: &str = "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";

/// A sandbox whose claude talks only to a mock running `script` (made with the
/// sandbox's paths at hand); None when claude is not installed.
fn setup(script: impl FnOnce(&Sandbox) -> Script) -> Option<(MockLlm, Sandbox)> {
    let mut sb = Sandbox::new("ORCHESTRATE_CONTRACT_CLAUDE", "claude", MODEL)?;
    let mock = MockLlm::start(script(&sb));
    let config = sb.home.join(".claude");
    std::fs::create_dir_all(&config).unwrap();
    sb.catch_outbound(&mock)
        .env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("CLAUDE_CONFIG_DIR", &config)
        // No telemetry, update checks, error reports or other side traffic (without it:
        // CONNECT api.anthropic.com at startup).
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        // Failures come straight back instead of after ten retries with backoff.
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // claude refuses to run some permission modes as root unless it is told it is
        // in a sandbox; the tests may run as root.
        .env("IS_SANDBOX", "1");
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

/// The tool names a Messages request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect()
}

/// The `tool_result` blocks of a Messages request, as text.
fn tool_results(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                out.push(b["content"].to_string());
            }
        }
    }
    out
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
            Reply::tool("Bash", args.clone(), first),
            Reply::text("Hello from mock.", second),
        )
    }) else {
        return;
    };
    let out = run(&sb, "worker", "Run echo hi-from-tool, then greet.", &[]);
    show("tool then text", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    // The mock sends Anthropic usage (input_tokens excludes cache reads); claude's result
    // line sums both requests and prices them from its own table.
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
                {"type": "toolCall", "name": "Bash", "args": args},
                {"type": "text", "text": "Hello from mock."}
            ],
            "backend": "claude",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );

    // What claude sent: two Messages requests and nothing else, the second with the
    // tool's real output.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no other traffic: {reqs:#?}");
    for r in &reqs {
        assert_eq!(r.api, Some(Api::Anthropic));
        assert_eq!(r.path, "/v1/messages?beta=true");
        assert_eq!(r.headers["x-api-key"], "test-key");
        assert_eq!(r.body["model"], json!(MODEL));
        assert_eq!(r.body["stream"], json!(true));
    }
    let mut tools = offered_tools(&reqs[0].body);
    tools.sort();
    assert_eq!(tools, ["Bash", "Read"], "the agent's tools only");
    let system = mock_llm::system_text(Api::Anthropic, &reqs[0].body);
    assert!(
        system.contains("You are terse."),
        "agent prompt appended: {system}"
    );
    let results = tool_results(&reqs[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("hi-from-tool"),
        "the Bash tool really ran: {results:?}"
    );
}

#[test]
fn a_401_is_subagent_failed_with_the_providers_message() {
    // Not Anthropic's own "invalid x-api-key", which claude replaces with its own advice
    // ("Invalid API key · Fix external API key").
    let message = "Mock provider says: the API key test-key was rejected";
    let Some((mock, sb)) = setup(|_| {
        Script::always(Reply::HttpError {
            status: 401,
            body: mock_llm::error_body(Api::Anthropic, 401, message),
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
    // claude exits 1 with `is_error: true`; its synthetic "API Error" message is the
    // error, not the answer, so `output` stays empty.
    let mut whole = normalized(r.clone());
    whole["error"] = json!("ERROR");
    assert_eq!(
        whole,
        json!({
            "agent": "worker",
            "task": "Say hi.",
            "exitCode": 1,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1},
            "error": "ERROR",
            "sessionFile": "SESSION",
            "output": "",
            "displayItems": [],
            "backend": "claude",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 1}
        })
    );
    assert_eq!(mock.requests().len(), 1, "a 401 is not retried");
}

#[test]
fn a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_claudes_tree() {
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
    eprintln!("=== claude's tree before the timeout: {tree:?}");
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_TIMEOUT", "message": "Subagent timed out after 5000ms without activity."})
    );
    // claude prints an assistant line only once a message is complete (no
    // --include-partial-messages), so there is no partial text to keep.
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
            "backend": "claude",
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

/// claude's own Write tool on an absolute path in the working directory.
fn write_call(path: &str) -> Reply {
    Reply::tool(
        "Write",
        json!({"file_path": path, "content": "x\n"}),
        MockUsage::default(),
    )
}

/// Shell commands that write: a plain redirect, and two through `git`, whose read-only
/// subcommands are what a read-only agent's Bash may run (`git diff --output` writes a
/// file, even outside a repository).
const SHELL_WRITES: [&str; 3] = [
    "echo x > pwned.txt",
    "git diff --no-index --output=pwned.txt /dev/null /etc/hostname",
    "git log > pwned.txt",
];

#[test]
fn a_read_only_agent_cannot_write_with_write_or_bash() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        let mut replies = vec![write_call(path.to_str().unwrap())];
        for command in SHELL_WRITES {
            replies.push(Reply::tool(
                "Bash",
                json!({"command": command, "description": "write"}),
                MockUsage::default(),
            ));
        }
        replies.push(Reply::text("I could not write.", MockUsage::default()));
        Script::sequence(replies)
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
    let mut items = vec![
        json!({"type": "toolCall", "name": "Write", "args": {"file_path": pwned.to_str().unwrap(), "content": "x\n"}}),
    ];
    for command in SHELL_WRITES {
        items.push(json!({"type": "toolCall", "name": "Bash", "args": {"command": command, "description": "write"}}));
    }
    items.push(json!({"type": "text", "text": "I could not write."}));
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "reader",
            "task": "Create pwned.txt containing x.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 5},
            "sessionFile": "SESSION",
            "output": "I could not write.",
            "displayItems": items,
            "backend": "claude",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0},
            "warnings": ["claude: bash is limited to read-only git commands (log, show, diff, status, blame, ls-files, rev-parse) for this read-only agent"]
        })
    );
    // How claude refused: Write is not in the session's tool set at all (`--tools`), and
    // every Bash command that writes is denied by `--permission-mode dontAsk` (claude's
    // rule matcher does not let `Bash(git diff:*)` cover `--output` or a redirect).
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5, "{reqs:#?}");
    let mut tools = offered_tools(&reqs[0].body);
    tools.sort();
    assert_eq!(tools, ["Bash", "Grep", "Read"]);
    let results = tool_results(&reqs[4].body);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(
        results[0].contains("No such tool available: Write"),
        "{results:?}"
    );
    for r in &results[1..] {
        assert!(
            r.contains("Permission to use Bash has been denied"),
            "{results:?}"
        );
    }
}

#[test]
fn an_implementer_writes_with_write_and_bash_without_a_prompt() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        Script::sequence(vec![
            write_call(path.to_str().unwrap()),
            Reply::tool(
                "Bash",
                json!({"command": "echo y >> pwned.txt", "description": "append"}),
                MockUsage::default(),
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
                {"type": "toolCall", "name": "Write", "args": {"file_path": pwned.to_str().unwrap(), "content": "x\n"}},
                {"type": "toolCall", "name": "Bash", "args": {"command": "echo y >> pwned.txt", "description": "append"}},
                {"type": "text", "text": "Wrote it."}
            ],
            "backend": "claude",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
}
