//! Contract tests: the real Gemini CLI (`gemini -p … --output-format stream-json`) run
//! through `orchestrate run --backend gemini` against the loopback mock LLM (Gemini
//! `streamGenerateContent?alt=sse`).
//!
//! gemini comes from `ORCHESTRATE_CONTRACT_GEMINI` (set by `scripts/install-agent-clis`'
//! env.sh); without it each test prints why it skips and passes, unless
//! `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure. Offline settings live here, not
//! in the product: `GOOGLE_GEMINI_BASE_URL` at the mock, a temp HOME whose
//! `.gemini/settings.json` selects API-key auth (the env var alone selects "gateway",
//! which headless mode refuses) and turns usage statistics (Clearcut), telemetry and
//! update checks off.

mod mock_llm;

use std::time::Duration;

use mock_llm::contract::{normalized, report, Finished, Sandbox};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const WALL_CLOCK: Duration = Duration::from_secs(120);
/// A concrete model: the default `auto` adds a routing call whose tokens count too.
const MODEL: &str = "gemini-2.5-flash";

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
const READER: &str = "---\nname: reader\ndescription: d\ntools: read, grep, bash\nreadonly: true\n---\nYou only look.\n";
/// Edits but no shell: approval mode auto_edit.
const EDITOR: &str = "---\nname: editor\ndescription: d\ntools: read, edit\n---\nYou edit files.\n";
const IMPLEMENTER: &str = "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";

/// A sandbox whose gemini talks only to a mock running `script` (made with the sandbox's
/// paths at hand); None when gemini is not installed.
fn setup(script: impl FnOnce(&Sandbox) -> Script) -> Option<(MockLlm, Sandbox)> {
    let mut sb = Sandbox::new("ORCHESTRATE_CONTRACT_GEMINI", "gemini", MODEL)?;
    let mock = MockLlm::start(script(&sb));
    let dot_gemini = sb.home.join(".gemini");
    std::fs::create_dir_all(&dot_gemini).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
    });
    std::fs::write(dot_gemini.join("settings.json"), settings.to_string()).unwrap();
    sb.catch_outbound(&mock)
        .env("GOOGLE_GEMINI_BASE_URL", mock.base_url())
        .env("GEMINI_API_KEY", "test-key");
    for (name, text) in [
        ("worker", WORKER),
        ("reader", READER),
        ("implementer", IMPLEMENTER),
        ("editor", EDITOR),
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

/// The function names a Gemini request offers.
fn offered_tools(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        for f in t["functionDeclarations"].as_array().into_iter().flatten() {
            if let Some(n) = f["name"].as_str() {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// The `functionResponse` parts of a Gemini request, as text.
fn tool_outputs(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            if p.get("functionResponse").is_some() {
                out.push(p["functionResponse"].to_string());
            }
        }
    }
    out
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
            Reply::tool(
                "run_shell_command",
                json!({"command": "echo hi-from-tool"}),
                first,
            ),
            Reply::text("Hello from mock.", second),
        )
    }) else {
        return;
    };
    let out = run(&sb, "worker", "Run echo hi-from-tool, then greet.", &[]);
    show("tool then text", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    // gemini's result stats sum both requests; its input_tokens are the whole prompt and
    // its `input` excludes the cached part. gemini computes no cost.
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
                {"type": "toolCall", "name": "run_shell_command", "args": {"command": "echo hi-from-tool"}},
                {"type": "text", "text": "Hello from mock."}
            ],
            "backend": "gemini",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0},
            "warnings": ["gemini keeps its own tool set; the restriction is approval mode yolo"]
        })
    );

    // What gemini sent: two streamed requests and nothing else (a concrete model: no
    // routing call), the second with the command's real output.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no other traffic: {reqs:#?}");
    for r in &reqs {
        assert_eq!(r.api, Some(Api::Gemini));
        assert_eq!(
            r.path,
            format!("/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
        );
        assert_eq!(r.headers["x-goog-api-key"], "test-key");
    }
    let tools = offered_tools(&reqs[0].body);
    assert!(
        tools.iter().any(|t| t == "run_shell_command"),
        "gemini's shell tool (yolo keeps it headless): {tools:?}"
    );
    let user = reqs[0].body["contents"][0].to_string();
    assert!(
        user.contains("You are terse."),
        "agent prompt in front of the task: {user}"
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
            body: mock_llm::error_body(Api::Gemini, 401, message),
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
    // gemini exits with the HTTP status mod 256 (401 -> 145).
    let mut whole = normalized(r.clone());
    whole["error"] = json!("ERROR");
    assert_eq!(
        whole,
        json!({
            "agent": "worker",
            "task": "Say hi.",
            "exitCode": 145,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
            "error": "ERROR",
            "sessionFile": "SESSION",
            "output": "",
            "displayItems": [],
            "backend": "gemini",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 145},
            "warnings": ["gemini keeps its own tool set; the restriction is approval mode yolo"]
        })
    );
    assert_eq!(mock.conversation().len(), 1, "a 401 is not retried");
}

#[test]
fn a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_geminis_tree() {
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
    eprintln!("=== gemini's tree before the timeout: {tree:?}");
    assert!(
        tree.len() >= 2,
        "node and the node it relaunches itself as: {tree:?}"
    );
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_TIMEOUT", "message": "Subagent timed out after 5000ms without activity."})
    );
    // gemini prints assistant text as deltas: the partial text is kept.
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "worker",
            "task": "Say hi.",
            "exitCode": 124,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
            "error": "Subagent timed out after 5000ms without activity.",
            "sessionFile": "SESSION",
            "output": "Thinking about it",
            "displayItems": [],
            "timeoutReason": "idle",
            "backend": "gemini",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "terminated", "reason": "idleTimeout"},
            "warnings": ["gemini keeps its own tool set; the restriction is approval mode yolo"]
        })
    );
    assert!(
        out.elapsed < Duration::from_secs(60),
        "took {:?}",
        out.elapsed
    );
}

/// gemini's own write tool on an absolute path in the working directory.
fn write_call(path: &str) -> Reply {
    Reply::tool(
        "write_file",
        json!({"file_path": path, "content": "x\n"}),
        MockUsage::default(),
    )
}

fn tool(name: &str, args: Value) -> Reply {
    Reply::tool(name, args, MockUsage::default())
}

#[test]
fn a_read_only_agent_cannot_write_nor_leave_plan_mode() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        let path = path.to_str().unwrap();
        // The writer, then the ways around plan mode seen to work without the policy:
        // leaving it (headless approves that by itself and switches to YOLO), a
        // general-purpose subagent, the shell.
        Script::sequence(vec![
            write_call(path),
            tool("exit_plan_mode", json!({"plan_filename": "plan.md"})),
            write_call(path),
            tool(
                "invoke_agent",
                json!({"agent_name": "generalist", "prompt": "Create pwned.txt containing x."}),
            ),
            tool(
                "run_shell_command",
                json!({"command": "echo x > pwned.txt"}),
            ),
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
    let path = pwned.to_str().unwrap();
    let write = json!({"type": "toolCall", "name": "write_file", "args": {"file_path": path, "content": "x\n"}});
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "reader",
            "task": "Create pwned.txt containing x.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 6},
            "sessionFile": "SESSION",
            "output": "I could not write.",
            "displayItems": [
                write,
                {"type": "toolCall", "name": "exit_plan_mode", "args": {"plan_filename": "plan.md"}},
                write,
                {"type": "toolCall", "name": "invoke_agent", "args": {"agent_name": "generalist", "prompt": "Create pwned.txt containing x."}},
                {"type": "toolCall", "name": "run_shell_command", "args": {"command": "echo x > pwned.txt"}},
                {"type": "text", "text": "I could not write."}
            ],
            "backend": "gemini",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0},
            "warnings": ["gemini keeps its own tool set; the restriction is approval mode plan and a policy denying enter_plan_mode, exit_plan_mode, run_shell_command, write_file, replace"]
        })
    );
    // How gemini refused: the policy removes the writers, the shell and the plan-mode
    // exit from the session (the model is told they do not exist), and plan mode itself
    // only lets its two read-only subagents run.
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 6, "{reqs:#?}");
    let tools = offered_tools(&reqs[0].body);
    for denied in [
        "write_file",
        "replace",
        "run_shell_command",
        "exit_plan_mode",
        "enter_plan_mode",
    ] {
        assert!(!tools.iter().any(|t| t == denied), "{denied} in {tools:?}");
    }
    let outputs = tool_outputs(&reqs[5].body);
    assert_eq!(outputs.len(), 5, "{outputs:?}");
    for (i, name) in [
        (0, "write_file"),
        (1, "exit_plan_mode"),
        (2, "write_file"),
        (4, "run_shell_command"),
    ] {
        assert!(
            outputs[i].contains(&format!("Tool \\\"{name}\\\" not found")),
            "{outputs:?}"
        );
    }
    assert!(outputs[3].contains("denied by policy"), "{outputs:?}");
}

/// Without the policy, an auto_edit run reached the shell this way (observed): plan mode
/// is allowed headless, leaving it is approved headless, and leaving it means YOLO.
#[test]
fn an_agent_without_bash_cannot_reach_the_shell_through_plan_mode() {
    let Some((mock, sb)) = setup(|_| {
        Script::sequence(vec![
            tool("enter_plan_mode", json!({"reason": "plan first"})),
            tool("exit_plan_mode", json!({"plan_filename": "plan.md"})),
            tool(
                "run_shell_command",
                json!({"command": "echo x > pwned.txt"}),
            ),
            Reply::text("No shell here.", MockUsage::default()),
        ])
    }) else {
        return;
    };
    let pwned = sb.work.join("pwned.txt");
    let out = run(
        &sb,
        "editor",
        "Create pwned.txt containing x.",
        &["--idle-timeout", "30s"],
    );
    show("edit-only shell", &mock, &out);
    assert!(!pwned.exists(), "an agent without bash ran a shell command");
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["output"], json!("No shell here."));
    assert_eq!(
        r["warnings"],
        json!(["gemini keeps its own tool set; the restriction is approval mode auto_edit and a policy denying enter_plan_mode, exit_plan_mode, run_shell_command"])
    );
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 4, "{reqs:#?}");
    let outputs = tool_outputs(&reqs[3].body);
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    for (i, name) in ["enter_plan_mode", "exit_plan_mode", "run_shell_command"]
        .iter()
        .enumerate()
    {
        assert!(
            outputs[i].contains(&format!("Tool \\\"{name}\\\" not found")),
            "{outputs:?}"
        );
    }
}

#[test]
fn an_implementer_writes_with_write_file_and_the_shell_without_a_prompt() {
    let Some((mock, sb)) = setup(|sb| {
        let path = sb.work.join("pwned.txt");
        Script::sequence(vec![
            write_call(path.to_str().unwrap()),
            tool(
                "run_shell_command",
                json!({"command": "echo y >> pwned.txt"}),
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
                {"type": "toolCall", "name": "write_file", "args": {"file_path": pwned.to_str().unwrap(), "content": "x\n"}},
                {"type": "toolCall", "name": "run_shell_command", "args": {"command": "echo y >> pwned.txt"}},
                {"type": "text", "text": "Wrote it."}
            ],
            "backend": "gemini",
            "model": MODEL,
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0},
            "warnings": ["gemini keeps its own tool set; the restriction is approval mode yolo"]
        })
    );
}
