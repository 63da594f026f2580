//! `orchestrate mcp` driven by a real MCP client (rmcp): handshake, tools, a run with
//! progress notifications, isError, cancellation, concurrent calls and stdin EOF.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};
use support::Sandbox;

#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

struct Server {
    client: RunningService<RoleClient, Client>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    process: tokio::process::Child,
}

async fn start(sb: &Sandbox) -> Server {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = tokio::process::Command::from(sb.command(&["mcp", "--agents-dir", &agents]));
    cmd.stdin(std::process::Stdio::piped()).kill_on_drop(true);
    let mut process = cmd.spawn().expect("spawn orchestrate mcp");
    let stdin = process.stdin.take().unwrap();
    let stdout = process.stdout.take().unwrap();
    let handler = Client::default();
    let progress = handler.progress.clone();
    let client = handler.serve((stdout, stdin)).await.expect("MCP handshake");
    Server {
        client,
        progress,
        process,
    }
}

fn call(agent: &str, task: &str) -> CallToolRequestParams {
    let args = json!({"agent": agent, "task": task});
    CallToolRequestParams::new("subagent").with_arguments(args.as_object().unwrap().clone())
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().expect("structuredContent")
}

fn text(r: &CallToolResult) -> String {
    serde_json::to_value(&r.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn lists_tools_and_runs_a_subagent_with_progress() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "30")
        .transcript("multi_turn.jsonl");
    let server = start(&sb).await;
    let info = server.client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().unwrap().name, "orchestrate");

    let tools = server.client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["list_agents", "send", "stop", "subagent", "wait"]);
    let subagent = tools.iter().find(|t| t.name == "subagent").unwrap();
    let schema = serde_json::to_value(&*subagent.input_schema).unwrap();
    // agent+task or tasks: neither is required on its own.
    assert_eq!(schema.get("required"), None);
    for key in [
        "agent",
        "task",
        "cwd",
        "model",
        "timeoutMs",
        "idleTimeoutMs",
        "sandbox",
        "network",
        "allowHosts",
        "isolation",
    ] {
        assert!(schema["properties"].get(key).is_some(), "{key} in {schema}");
    }
    assert!(
        subagent.output_schema.is_some(),
        "subagent declares its output schema"
    );

    let handle = server
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(call("fake", "find auth"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let response = handle.await_response().await.unwrap();
    let rmcp::model::ServerResult::CallToolResult(r) = response else {
        panic!("{response:?}")
    };
    assert_eq!(r.is_error, Some(false));
    let answer = "## Answer\nAuth lives in src/auth.rs (fn login at line 42).";
    assert_eq!(text(&r), answer);
    // The lean details, with the output: some clients show the model only these. What
    // the parent does not act on after a success is left out (the sandbox stays: off).
    assert_eq!(
        support::normalized(json!({"details": structured(&r)}))["details"],
        json!({
            "mode": "single",
            "runId": "RUNID",
            "results": [{
                "exitCode": 0,
                "usage": {"input": 4500, "output": 260, "cacheRead": 2400, "cacheWrite": 60, "cost": 0.0071, "turns": 3},
                "sessionFile": "SESSION",
                "output": answer,
                "sandbox": {"mode": "off", "mechanism": "none"}
            }]
        })
    );
    let progress = server.progress.lock().unwrap().clone();
    assert!(
        !progress.is_empty(),
        "progress notifications arrive while the child runs"
    );
    assert!(
        progress.windows(2).all(|w| w[1].progress > w[0].progress),
        "progress increases"
    );
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().unwrap_or("").contains("running read")),
        "{progress:?}"
    );

    let agents = server
        .client
        .call_tool(CallToolRequestParams::new("list_agents"))
        .await
        .unwrap();
    let listed: Vec<String> = structured(&agents)["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        listed.contains(&"fake".to_string()) && listed.contains(&"explorer".to_string()),
        "{listed:?}"
    );
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_failed_run_is_an_error_result_not_a_protocol_error() {
    let sb = Sandbox::new();
    let server = start(&sb).await;
    let r = server.client.call_tool(call("nosuch", "x")).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(structured(&r)["error"]["code"], json!("UNKNOWN_AGENT"));
    assert!(text(&r).starts_with("Unknown agent: nosuch. Available agents: "));
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_sandbox_and_isolation_arguments_reach_the_run() {
    // The default sandbox (tests/support turns it off for the fake agent's files).
    let sb = Sandbox::new().set("ORCHESTRATE_SANDBOX", "auto");
    let server = start(&sb).await;
    let args = |extra: serde_json::Value| {
        // The full record: a lean one leaves out a sandbox that held.
        let mut a = json!({"agent": "fake", "task": "x", "details": "full"});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        CallToolRequestParams::new("subagent").with_arguments(a.as_object().unwrap().clone())
    };
    let r = server.client.call_tool(args(json!({}))).await.unwrap();
    assert_eq!(
        structured(&r)["results"][0]["sandbox"],
        json!({"mode": "read-only", "mechanism": "namespaces",
               "layers": ["pid-namespace", "mounts", "landlock", "scopes", "seccomp", "no-tty"]})
    );
    let r = server
        .client
        .call_tool(args(
            json!({"sandbox": "off", "network": "off", "details": "full"}),
        ))
        .await
        .unwrap();
    assert_eq!(
        structured(&r)["results"][0]["sandbox"],
        json!({"mode": "off", "mechanism": "none"})
    );
    assert_eq!(
        structured(&r)["results"][0]["network"],
        json!({"mode": "off"})
    );
    let r = server
        .client
        .call_tool(args(json!({
            "sandbox": "off", "network": "provider", "allowHosts": ["docs.rs", "*.pypi.org"],
            "model": "nowhere/m", "details": "full"
        })))
        .await
        .unwrap();
    assert_eq!(
        structured(&r)["results"][0]["network"],
        json!({"mode": "provider", "allowed": ["docs.rs", "*.pypi.org"]})
    );
    let r = server
        .client
        .call_tool(args(
            json!({"network": "provider", "allowHosts": ["docs.rs:443"]}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        structured(&r)["error"]["message"],
        json!("Invalid input: allowHosts: invalid host \"docs.rs:443\": a port is not part of a host (every port of an allowed host is allowed) (use a host name such as api.example.com, *.example.com for every name under a domain, or an IP address)")
    );
    // The work folder is no repository.
    let r = server
        .client
        .call_tool(args(json!({"isolation": "worktree"})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(structured(&r)["error"]["code"], json!("INVALID_INPUT"));
    // A value that is no mode is refused by the tool's schema.
    let refused = server
        .client
        .call_tool(args(json!({"sandbox": "rw"})))
        .await;
    assert!(
        refused.is_err() || refused.as_ref().unwrap().is_error == Some(true),
        "{refused:?}"
    );
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_call_stops_the_childs_process_group() {
    let sb = Sandbox::new().scenario("grandchild-hang");
    let server = start(&sb).await;
    let handle = server
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(Request::new(call("fake", "hang"))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while sb.pids().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the child and its grandchild never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.cancel(Some("test cancels".into())).await.unwrap();
    // The grandchild ignores SIGTERM: only the group SIGKILL after the grace ends it.
    // Found by environment: the pids the child records may be those of its own PID
    // namespace.
    let marker = sb.marker();
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let alive = support::processes_with_env(&marker, "ORCHESTRATE_RUN_ID=");
            if alive.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "child tree still alive after cancel: {alive:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .unwrap();
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn concurrent_calls_run_at_the_same_time() {
    // Each run takes about 1.2 s (6 lines, 200 ms apart).
    let sb = Sandbox::new()
        .scenario("slow")
        .transcript("short.jsonl")
        .set("FAKE_AGENT_DELAY_MS", "100");
    let server = start(&sb).await;
    let started = Instant::now();
    let full = |task: &str| json!({"agent": "fake", "task": task, "details": "full"});
    let (a, b) = tokio::join!(
        call_with(&server, full("one")),
        call_with(&server, full("two"))
    );
    let both = started.elapsed();
    assert_eq!((a.is_error, b.is_error), (Some(false), Some(false)));
    assert_eq!(structured(&a)["results"][0]["task"], json!("one"));
    assert_eq!(structured(&b)["results"][0]["task"], json!("two"));
    let one = Duration::from_millis(structured(&a)["results"][0]["durationMs"].as_u64().unwrap());
    assert!(
        both < one * 2,
        "two calls took {both:?}, one alone {one:?}: they did not overlap"
    );
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn stdin_eof_stops_running_children_and_exits() {
    let sb = Sandbox::new().scenario("silent");
    let mut server = start(&sb).await;
    let peer = server.client.peer().clone();
    let call_task = tokio::spawn(async move { peer.call_tool(call("fake", "wait")).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    while sb.pids().is_empty() {
        assert!(Instant::now() < deadline, "the child never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Closing the client closes the server's stdin.
    server.client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), server.process.wait())
        .await
        .expect("server exits")
        .unwrap();
    assert!(status.success(), "{status:?}");
    call_task.abort();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn tasks_fan_out_through_the_tool() {
    let sb = Sandbox::new().scenario("echo-task");
    let server = start(&sb).await;
    let args =
        json!({"tasks": [{"agent": "fake", "task": "one"}, {"agent": "fake", "task": "two"}]});
    let r = server
        .client
        .call_tool(
            CallToolRequestParams::new("subagent")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    let details = structured(&r);
    assert_eq!(details["mode"], json!("parallel"));
    let outputs: Vec<&str> = details["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["one", "two"]);
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn details_full_adds_the_display_items() {
    let sb = Sandbox::new()
        .scenario("replay")
        .transcript("multi_turn.jsonl");
    let server = start(&sb).await;
    let args = json!({"agent": "fake", "task": "find auth", "details": "full"});
    let r = server
        .client
        .call_tool(
            CallToolRequestParams::new("subagent")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    let details = structured(&r);
    assert_eq!(
        details["results"][0]["displayItems"][1],
        json!({"type": "toolCall", "name": "read", "args": {"path": "src/auth.rs"}})
    );
    server.client.cancel().await.unwrap();
}

#[tokio::test]
async fn output_schema_gives_a_structured_answer_and_a_bad_one_is_invalid_input() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_ANSWER_1", "Sure: {\"n\": \"seven\"}")
        .set("FAKE_AGENT_ANSWER_2", "```json\n{\"n\": 7}\n```");
    let server = start(&sb).await;
    let schema =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let r = call_with(
        &server,
        json!({"agent": "fake", "task": "count", "outputSchema": schema}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(text(&r), "{\"n\":7}");
    let mut details = structured(&r);
    let single = &mut details["results"][0];
    single["sessionFile"] = json!("SESSION");
    // The repaired answer: no raw text beside `structured`, two attempts, two turns.
    assert_eq!(
        details,
        json!({"mode": "single", "runId": details["runId"], "results": [{
            "exitCode": 0,
            "usage": {"input": 200, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": 0.00024, "turns": 2},
            "sessionFile": "SESSION", "attempts": 2,
            "attemptsDetail": [
                {"exitCode": 0, "error": "Answer does not match the output schema: $.n: \"seven\" is not of type \"integer\""},
                {"exitCode": 0}
            ],
            "sandbox": {"mode": "off", "mechanism": "none"},
            "structured": {"n": 7}
        }]})
    );
    let r = call_with(
        &server,
        json!({"agent": "fake", "task": "count", "outputSchema": {"type": "integer", "minimum": "0"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        structured(&r)["error"],
        json!({"code": "INVALID_INPUT", "message": "Invalid input: outputSchema: not a valid JSON Schema: $.minimum: \"0\" is not of type \"number\""})
    );
    server.client.cancel().await.unwrap();
}

/// Calls `subagent` with `args` and returns the result.
async fn call_with(server: &Server, args: Value) -> CallToolResult {
    server
        .client
        .call_tool(
            CallToolRequestParams::new("subagent")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn bad_arguments_are_invalid_input_results() {
    let sb = Sandbox::new().scenario("replay");
    let server = start(&sb).await;
    // Each names the argument and what it takes.
    let cases = [
        (
            json!({"agent": 5, "task": "x"}),
            "agent: expected a string, got 5",
        ),
        (
            json!({"agent": "fake", "task": "x", "timeout": 5}),
            "timeout: not an argument of subagent (did you mean timeoutMs?)",
        ),
        (
            json!({"agent": "fake", "task": "x", "bogus": true}),
            "bogus: not an argument of subagent (it takes agent, task, tasks, chain, cwd, details, background, model, timeoutMs, idleTimeoutMs, maxTurns, maxTokens, maxCostUsd, fallbackModels, sandbox, network, allowHosts, permissions, runner, isolation, outputSchema)",
        ),
        (
            json!({"agent": "fake", "task": "x", "timeoutMs": "soon"}),
            "timeoutMs: expected a whole number of milliseconds, got \"soon\"",
        ),
        (
            json!({"agent": "fake", "task": "x", "timeoutMs": 0}),
            "timeoutMs: must be greater than zero (leave it out for the default)",
        ),
        (
            json!({"agent": "fake", "task": "x", "idleTimeoutMs": 0}),
            "idleTimeoutMs: must be greater than zero (leave it out for the default)",
        ),
        (
            json!({"agent": "fake", "task": "x", "tasks": [{"agent": "fake", "task": "y"}]}),
            "give either agent and task, or tasks, not both",
        ),
        (
            json!({"tasks": [{"agent": 3, "task": "y"}]}),
            "tasks[0].agent: expected a string, got 3",
        ),
        (
            json!({"agent": "fake", "task": "x", "details": "everything"}),
            "details: expected lean or full, got \"everything\"",
        ),
        (
            json!({"agent": "fake", "task": "x", "maxTurns": 0}),
            "maxTurns: expected a whole number of at least 1, got 0",
        ),
        (
            json!({"agent": "fake", "task": "x", "maxCostUsd": -1}),
            "maxCostUsd: expected an amount of US dollars greater than 0, such as 0.50, got -1",
        ),
        (
            json!({"agent": "fake", "task": "x", "sandbox": "rw"}),
            "sandbox: unknown sandbox mode \"rw\" (use read-only, workspace-write, off)",
        ),
        (
            json!({"agent": "fake", "task": "x", "outputSchema": "{\"type\": \"object\"}"}),
            "outputSchema: expected a JSON Schema (an object), got a string",
        ),
    ];
    for (args, why) in cases {
        let r = call_with(&server, args.clone()).await;
        let message = format!("Invalid input: {why}");
        assert_eq!(r.is_error, Some(true), "{args}");
        assert_eq!(text(&r), message, "{args}");
        assert_eq!(
            r.structured_content,
            Some(json!({
                "mode": "single",
                "results": [],
                "error": {"code": "INVALID_INPUT", "message": message}
            })),
            "{args}"
        );
    }
    assert!(sb.pids().is_empty(), "no child was started");
    server.client.cancel().await.unwrap();
}

/// `orchestrate mcp` spoken to line by line, for what a typed client cannot send.
struct RawServer {
    process: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl RawServer {
    fn start(sb: &Sandbox, env: &[(&str, &str)]) -> RawServer {
        let agents = sb.agents.to_str().unwrap().to_string();
        let mut cmd = sb.command(&["mcp", "--agents-dir", &agents]);
        cmd.stdin(std::process::Stdio::piped())
            .envs(env.iter().copied());
        let mut process = cmd.spawn().expect("spawn orchestrate mcp");
        let stdin = process.stdin.take();
        let stdout = process.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = RawServer {
            process,
            stdin,
            lines,
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(
            server.response(0)["result"]["serverInfo"]["name"],
            json!("orchestrate")
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send_raw(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// The response to request `id` (notifications and other responses are skipped),
    /// within a generous bound.
    fn response(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no response to request {id}: {e}"));
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// The next message the server writes, within a generous bound.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no message from the server: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Closes stdin and waits (bounded) for the server to exit; returns its stderr.
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.process.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the server did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut err = String::new();
        std::io::Read::read_to_string(self.process.stderr.as_mut().unwrap(), &mut err).unwrap();
        err
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// JSON Schema 2020-12's format vocabulary.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// What strict validators reject or warn about in a schema: non-standard formats, boolean
/// schemas (`additionalProperties: false` is a keyword, not a schema), `$ref`s.
fn strictness_problems(schema: &Value, path: &str, problems: &mut Vec<String>) {
    let Value::Object(o) = schema else {
        problems.push(format!("{path}: {schema} is not a schema object"));
        return;
    };
    for (key, sub) in o {
        let here = format!("{path}/{key}");
        match (key.as_str(), sub) {
            ("format", Value::String(f)) if !STANDARD_FORMATS.contains(&f.as_str()) => {
                problems.push(format!("{here}: {f}"))
            }
            ("$ref", _) => problems.push(format!("{here}: a reference")),
            ("properties" | "$defs", Value::Object(props)) => {
                for (name, s) in props {
                    strictness_problems(s, &format!("{here}/{name}"), problems);
                }
            }
            ("additionalProperties", Value::Bool(false)) => {}
            ("items" | "additionalProperties" | "not", s) => {
                strictness_problems(s, &here, problems)
            }
            ("anyOf" | "oneOf" | "allOf", Value::Array(subs)) => {
                for (i, s) in subs.iter().enumerate() {
                    strictness_problems(s, &format!("{here}/{i}"), problems);
                }
            }
            _ => {}
        }
    }
}

/// Every tool definition together: every parent session that registers the server loads
/// them. (With `allowHosts`, the argument of `network: provider`, `permissions`,
/// `background`, and the `send`, `wait` and `stop` tools.)
const MAX_TOOL_DEFINITIONS_BYTES: usize = 2_800;

#[test]
fn the_tool_definitions_are_small_and_strict() {
    let sb = Sandbox::new();
    let mut server = RawServer::start(&sb, &[]);
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let listed = server.response(1);
    let tools = &listed["result"]["tools"];
    let bytes = serde_json::to_string(tools).unwrap().len();
    eprintln!("tools/list: {bytes} bytes of tool definitions");
    assert!(
        bytes <= MAX_TOOL_DEFINITIONS_BYTES,
        "{bytes} bytes: {}",
        serde_json::to_string_pretty(tools).unwrap()
    );
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_agents", "send", "stop", "subagent", "wait"]);
    let mut problems = Vec::new();
    for t in tools.as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        strictness_problems(
            &t["inputSchema"],
            &format!("{name}.inputSchema"),
            &mut problems,
        );
        if let Some(out) = t.get("outputSchema") {
            strictness_problems(out, &format!("{name}.outputSchema"), &mut problems);
        }
    }
    assert_eq!(problems, Vec::<String>::new());
    // The tools that reach a run take its id, and nothing they do not know.
    let by_name = |name: &str| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()
            .clone()
    };
    let run_id = json!({"type": "string"});
    assert_eq!(
        by_name("send")["inputSchema"],
        json!({"type": "object", "additionalProperties": false,
               "properties": {"runId": run_id, "message": {"type": "string"},
                              "interrupt": {"type": "boolean"}},
               "required": ["runId", "message"]})
    );
    assert_eq!(
        by_name("wait")["inputSchema"],
        json!({"type": "object", "additionalProperties": false,
               "properties": {"runId": run_id, "timeoutMs": {"type": "integer", "minimum": 0}},
               "required": ["runId"]})
    );
    assert_eq!(
        by_name("stop")["inputSchema"],
        json!({"type": "object", "additionalProperties": false,
               "properties": {"runId": run_id}, "required": ["runId"]})
    );
    let tools = json!([by_name("list_agents"), by_name("subagent")]);
    // Still says when to delegate and which agent fits what.
    let description = tools[1]["description"].as_str().unwrap();
    for word in [
        "Delegate",
        "explorer",
        "researcher",
        "reviewer",
        "implementer",
        "tester",
        "list_agents",
    ] {
        assert!(description.contains(word), "{word} in {description:?}");
    }
    let props = tools[1]["inputSchema"]["properties"].as_object().unwrap();
    for key in [
        "agent",
        "task",
        "tasks",
        "chain",
        "cwd",
        "model",
        "timeoutMs",
        "idleTimeoutMs",
        "details",
        "outputSchema",
        "background",
    ] {
        assert!(props.contains_key(key), "{key}");
    }
    assert_eq!(
        props["outputSchema"],
        json!({"type": "object", "description": "JSON Schema the answer must match."})
    );
    server.close();
}

#[test]
fn a_malformed_call_is_invalid_params_and_logs_carry_no_colour() {
    let sb = Sandbox::new();
    // Not a terminal: stderr is a pipe here.
    let mut server = RawServer::start(&sb, &[("ORCHESTRATE_LOG", "warn")]);
    server.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}}),
    );
    let r = server.response(1);
    assert_eq!(
        r["error"],
        json!({"code": -32602, "message": "invalid tools/call params: missing field `name`"})
    );
    let stderr = server.close();
    assert!(
        stderr.contains("invalid tools/call params"),
        "the error is logged: {stderr:?}"
    );
    assert!(!stderr.contains('\u{1b}'), "no ANSI escapes: {stderr:?}");
}

#[test]
fn a_message_over_the_size_limit_gets_an_error_answer() {
    let sb = Sandbox::new().scenario("replay");
    let mut server = RawServer::start(&sb, &[]);
    // 30 MB, the id last as the TypeScript SDK writes it.
    let task = "x".repeat(30 * 1024 * 1024);
    let line = format!(
        r#"{{"method":"tools/call","params":{{"name":"subagent","arguments":{{"agent":"fake","task":"{task}"}}}},"jsonrpc":"2.0","id":7}}"#
    );
    server.send_raw(&line);
    let r = server.response(7);
    let result = &r["result"];
    assert_eq!(result["isError"], json!(true), "{r}");
    assert_eq!(
        result["structuredContent"]["error"]["code"],
        json!("INVALID_INPUT")
    );
    let message = result["content"][0]["text"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "Invalid input: The request is {} bytes, over orchestrate's limit of ",
            line.len()
        )),
        "{message}"
    );
    // The connection is still good.
    server.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
    assert!(server.response(8)["result"]["tools"].is_array());
    // Anything else that big gets a protocol error.
    let padding = "y".repeat(10 * 1024 * 1024);
    server.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{{"pad":"{padding}"}}}}"#
    ));
    assert_eq!(server.response(9)["error"]["code"], json!(-32600));
    assert!(sb.pids().is_empty(), "no child was started");
    server.close();
}

/// What the TypeScript SDK's `close()` does to a stdio server: close its stdin, wait 2 s,
/// SIGTERM, wait 2 s, SIGKILL. Returns whether the server was still there to SIGKILL.
fn close_like_the_typescript_sdk(
    process: &mut std::process::Child,
    stdin: std::process::ChildStdin,
) -> bool {
    let exited_within = |process: &mut std::process::Child, limit: Duration| {
        let deadline = Instant::now() + limit;
        loop {
            if process.try_wait().unwrap().is_some() {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    drop(stdin);
    if exited_within(process, Duration::from_secs(2)) {
        return false;
    }
    unsafe { libc::kill(process.id() as i32, libc::SIGTERM) };
    if exited_within(process, Duration::from_secs(2)) {
        return false;
    }
    unsafe { libc::kill(process.id() as i32, libc::SIGKILL) };
    let _ = process.wait();
    true
}

#[test]
fn a_client_closing_mid_call_leaves_nothing_running() {
    // The child sleeps; its grandchild ignores SIGTERM and only a SIGKILL ends it.
    let sb = Sandbox::new().scenario("grandchild-hang");
    let mut server = RawServer::start(&sb, &[]);
    server.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "subagent", "arguments": {"agent": "fake", "task": "hang"}}}),
    );
    // The run's processes, found by the sandbox's marker in their environment: the pids
    // the fake child records are those of its own PID namespace.
    let deadline = Instant::now() + Duration::from_secs(20);
    while sb.descendants().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the child and its grandchild never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = sb.descendants();
    let stdin = server.stdin.take().unwrap();
    let killed = close_like_the_typescript_sdk(&mut server.process, stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    let alive = loop {
        let alive = sb.descendants();
        if alive.is_empty() || Instant::now() > deadline {
            break alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        alive,
        Vec::<i32>::new(),
        "the run's tree outlived the server (of {started:?})"
    );
    assert!(
        !killed,
        "the server ended on its own, before the client's SIGKILL"
    );
}

#[tokio::test]
async fn a_fan_out_reports_progress_for_every_task() {
    for (chain, what) in [(false, "tasks"), (true, "steps")] {
        let sb = Sandbox::new()
            .scenario("slow")
            .set("FAKE_AGENT_DELAY_MS", "20")
            .transcript("multi_turn.jsonl");
        let server = start(&sb).await;
        let args = json!({"tasks": [{"agent": "fake", "task": "one"}, {"agent": "fake", "task": "two"}], "chain": chain});
        let handle = server
            .client
            .send_cancellable_request(
                ClientRequest::CallToolRequest(Request::new(
                    CallToolRequestParams::new("subagent")
                        .with_arguments(args.as_object().unwrap().clone()),
                )),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap();
        let response = handle.await_response().await.unwrap();
        let rmcp::model::ServerResult::CallToolResult(r) = response else {
            panic!("{response:?}")
        };
        assert_eq!(r.is_error, Some(false), "{r:?}");
        let progress = server.progress.lock().unwrap().clone();
        let messages: Vec<String> = progress
            .iter()
            .map(|p| p.message.clone().unwrap_or_default())
            .collect();
        assert!(
            progress.windows(2).all(|w| w[1].progress > w[0].progress),
            "progress increases: {messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with(&format!("0/2 {what} done; 1. fake turn"))
                    && m.contains(", running ")),
            "the running task is named with its tool: {messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with(&format!("1/2 {what} done"))),
            "{messages:?}"
        );
        assert_eq!(
            messages.last().map(String::as_str),
            Some(format!("2/2 {what} done; 14440 tokens").as_str()),
            "{messages:?}"
        );
        server.client.cancel().await.unwrap();
    }
}

/// A JSON-RPC error answer.
fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error_and_the_server_goes_on() {
    let sb = Sandbox::new();
    let mut server = RawServer::start(&sb, &[]);
    // A request cut short, as a client that died mid-write leaves it, and plain garbage.
    server.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","par"#);
    assert_eq!(
        server.next(),
        rpc_error(
            Value::Null,
            -32700,
            "Parse error: EOF while parsing a string at line 1 column 50"
        )
    );
    server.send_raw("hello ]]");
    assert_eq!(
        server.next(),
        rpc_error(
            Value::Null,
            -32700,
            "Parse error: expected value at line 1 column 1"
        )
    );
    // Valid JSON that is no JSON-RPC message: its id, when it has one that can be read.
    server.send_raw("[1, 2]");
    assert_eq!(
        server.next(),
        rpc_error(
            Value::Null,
            -32600,
            "Invalid Request: an array, not a JSON-RPC 2.0 message (batches are not supported)"
        )
    );
    server.send_raw(r#"{"foo": "bar"}"#);
    assert_eq!(
        server.next(),
        rpc_error(
            Value::Null,
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\")"
        )
    );
    server.send_raw(r#"{"id": 5, "method": "tools/list"}"#);
    assert_eq!(
        server.next(),
        rpc_error(
            json!(5),
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\")"
        )
    );
    // Still serving.
    server.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}));
    assert!(server.response(6)["result"]["tools"].is_array());
    server.close();
}

/// The client's side of the stdio pipes with a tap on each: raw lines can be written
/// between the client's messages, and the server's lines are kept as they pass.
struct Tapped {
    inject: tokio::sync::mpsc::UnboundedSender<String>,
    seen: Arc<Mutex<Vec<String>>>,
}

fn tap(
    process: &mut tokio::process::Child,
) -> (Tapped, tokio::io::DuplexStream, tokio::io::DuplexStream) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut stdin = process.stdin.take().unwrap();
    let stdout = process.stdout.take().unwrap();
    let (client_out, ours_in) = tokio::io::duplex(1 << 16);
    let (client_in, mut ours_out) = tokio::io::duplex(1 << 16);
    let (inject, mut injected) = tokio::sync::mpsc::unbounded_channel::<String>();
    // Client → server, whole lines, with the injected ones between them.
    tokio::spawn(async move {
        let mut from_client = BufReader::new(ours_in);
        let mut line = Vec::new();
        loop {
            tokio::select! {
                n = from_client.read_until(b'\n', &mut line) => {
                    if !matches!(n, Ok(n) if n > 0) { break; }
                    if stdin.write_all(&line).await.is_err() { break; }
                    line.clear();
                }
                Some(raw) = injected.recv(), if line.is_empty() => {
                    if stdin.write_all(format!("{raw}\n").as_bytes()).await.is_err() { break; }
                }
            }
            let _ = stdin.flush().await;
        }
    });
    // Server → client, kept.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            kept.lock().unwrap().push(line.clone());
            if ours_out
                .write_all(format!("{line}\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    (Tapped { inject, seen }, client_out, client_in)
}

#[tokio::test]
async fn garbage_between_a_real_clients_messages_is_answered_and_the_session_goes_on() {
    let sb = Sandbox::new().scenario("replay");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = tokio::process::Command::from(sb.command(&["mcp", "--agents-dir", &agents]));
    cmd.stdin(std::process::Stdio::piped()).kill_on_drop(true);
    let mut process = cmd.spawn().expect("spawn orchestrate mcp");
    let (tapped, to_server, from_server) = tap(&mut process);
    let client = Client::default()
        .serve((from_server, to_server))
        .await
        .expect("MCP handshake");
    assert_eq!(client.list_tools(None).await.unwrap().tools.len(), 5);

    let errors_before = |seen: &[String]| {
        seen.iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["id"].is_null() && v["error"].is_object())
            .map(|v| v["error"]["code"].clone())
            .collect::<Vec<_>>()
    };
    tapped
        .inject
        .send(r#"{"jsonrpc":"2.0","id":41,"method":"tools/ca"#.to_string())
        .unwrap();
    tapped.inject.send(r#"{"not":"rpc"}"#.to_string()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let codes = errors_before(&tapped.seen.lock().unwrap());
        if codes.len() >= 2 {
            assert_eq!(codes, [json!(-32700), json!(-32600)]);
            break;
        }
        assert!(Instant::now() < deadline, "no error answers: {codes:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The session goes on: tools, and a run.
    assert_eq!(client.list_tools(None).await.unwrap().tools.len(), 5);
    let r = client
        .call_tool(call("fake", "say hello"))
        .await
        .expect("a tool result");
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(text(&r), "Hello from pi.");
    client.cancel().await.unwrap();
    let _ = process.wait().await;
}

fn tool(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone())
}

async fn until_child_started(sb: &Sandbox) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sb.pids().is_empty() {
        assert!(Instant::now() < deadline, "the child never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// As Codex's subagent tools do it: start in the background, send a message while the
/// child works, wait for the answer that the message changed.
#[tokio::test]
async fn a_background_subagent_takes_a_message_and_wait_returns_its_answer() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "The red file.")
        .set("FAKE_AGENT_ANSWER_2", "The blue file, as asked.");
    let server = start(&sb).await;
    let started = Instant::now();
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"agent": "fake", "task": "find the file", "background": true}),
        ))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answers at once"
    );
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let details = structured(&r);
    let run_id = details["runId"].as_str().unwrap().to_string();
    assert_eq!(
        text(&r),
        format!("Started fake in the background as run {run_id}: wait returns its result, send messages it, stop stops it.")
    );
    assert_eq!(details["background"]["status"], json!("running"));
    until_child_started(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "send",
            json!({"runId": run_id, "message": "look for the blue file instead"}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let r = server
        .client
        .call_tool(tool("wait", json!({"runId": run_id, "timeoutMs": 60000})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(text(&r), "The blue file, as asked.");
    let mut single = structured(&r)["results"][0].clone();
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        single["messages"],
        json!([{"at": "AT", "text": "look for the blue file instead", "delivery": "afterTurn"}])
    );
    assert_eq!(single["attempts"], json!(2));
    // Once it has ended, a message is refused and says why.
    let r = server
        .client
        .call_tool(tool("send", json!({"runId": run_id, "message": "more"})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        text(&r),
        format!("Invalid input: run {run_id} has ended: a message can only reach a run that is still running")
    );
    drop(server);
    sb.assert_no_survivors();
}

#[tokio::test]
async fn wait_says_a_background_subagent_still_runs_and_stop_ends_it() {
    let sb = Sandbox::new().scenario("silent");
    let server = start(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"agent": "fake", "task": "hang", "background": true}),
        ))
        .await
        .unwrap();
    let run_id = structured(&r)["runId"].as_str().unwrap().to_string();
    until_child_started(&sb).await;
    let r = server
        .client
        .call_tool(tool("wait", json!({"runId": run_id, "timeoutMs": 300})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(text(&r), format!("Run {run_id} is still running."));
    assert_eq!(structured(&r)["background"]["status"], json!("running"));
    let r = server
        .client
        .call_tool(tool("stop", json!({"runId": run_id})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let stopped = structured(&r);
    assert_eq!(stopped["runId"], json!(run_id));
    assert_eq!(stopped["error"]["code"], json!("SUBAGENT_FAILED"));
    sb.assert_no_survivors();
    // Unknown runs and wrong arguments are refused, naming what is wrong.
    let r = server
        .client
        .call_tool(tool("wait", json!({"runId": "abcd1234"})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        text(&r),
        "Invalid input: no background run abcd1234 (see `orchestrate runs`)"
    );
    let r = server
        .client
        .call_tool(tool("stop", json!({"runId": run_id, "now": true})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(text(&r).contains("unknown field `now`"), "{}", text(&r));
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"tasks": [{"agent": "fake", "task": "a"}, {"agent": "fake", "task": " "}], "background": true}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        text(&r),
        "Invalid input: tasks[1]: needs both an agent and a task"
    );
}

/// A fan-out in the background: one run id for the whole, one per task (for `send`);
/// `wait` returns the fan-out's result, `stop` stops every task.
#[tokio::test]
async fn a_background_fan_out_takes_messages_per_task_and_wait_returns_every_result() {
    let sb = Sandbox::new()
        .scenario("answers")
        .set("FAKE_AGENT_START_DELAY_MS", "1500")
        .set("FAKE_AGENT_ANSWER_1", "First answer.")
        .set("FAKE_AGENT_ANSWER_2", "Answer after the message.");
    let server = start(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"tasks": [{"agent": "fake", "task": "task one"}, {"agent": "fake", "task": "task two"}], "background": true}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let started = structured(&r);
    let run_id = started["runId"].as_str().unwrap().to_string();
    let tasks: Vec<String> = started["background"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["runId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        started,
        json!({
            "mode": "parallel",
            "runId": run_id,
            "results": [],
            "background": {
                "status": "running",
                "sessionFile": "",
                "supervisorPid": started["background"]["supervisorPid"],
                "tasks": [
                    {"agent": "fake", "runId": tasks[0]},
                    {"agent": "fake", "runId": tasks[1]},
                ],
            },
        })
    );
    assert_eq!(
        text(&r),
        format!("Started 2 tasks in parallel in the background as run {run_id}: wait returns the results, stop stops every task, send messages a task by its runId (background.tasks).")
    );
    until_child_started(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "send",
            json!({"runId": tasks[1], "message": "also check the tests"}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let r = server
        .client
        .call_tool(tool("wait", json!({"runId": run_id, "timeoutMs": 60000})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(
        text(&r),
        "## 1. fake: task one\n\nFirst answer.\n\n## 2. fake: task two\n\nAnswer after the message."
    );
    let done = structured(&r);
    assert_eq!(
        (&done["mode"], &done["runId"]),
        (&json!("parallel"), &json!(run_id))
    );
    let results = done["results"].as_array().unwrap();
    let mut second = results[1].clone();
    second["messages"][0]["at"] = json!("AT");
    assert_eq!(
        (
            &results[0]["runId"],
            results[0].get("messages"),
            &second["runId"],
            &second["messages"]
        ),
        (
            &json!(tasks[0]),
            None,
            &json!(tasks[1]),
            &json!([{"at": "AT", "text": "also check the tests", "delivery": "afterTurn"}])
        )
    );
    drop(server);
    sb.assert_no_survivors();
}

#[tokio::test]
async fn stop_stops_every_task_of_a_background_fan_out() {
    let sb = Sandbox::new().scenario("silent");
    let server = start(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"tasks": [{"agent": "fake", "task": "a"}, {"agent": "fake", "task": "b"}], "background": true}),
        ))
        .await
        .unwrap();
    let run_id = structured(&r)["runId"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    while sb.pids().len() < 2 {
        assert!(Instant::now() < deadline, "the children never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = server
        .client
        .call_tool(tool("stop", json!({"runId": run_id})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let stopped = structured(&r);
    let ended: Vec<(&Value, &Value)> = stopped["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (&t["exitCode"], &t["termination"]))
        .collect();
    let cancelled = json!({"kind": "terminated", "reason": "cancelled"});
    assert_eq!(
        (&stopped["runId"], ended),
        (
            &json!(run_id),
            vec![(&json!(143), &cancelled), (&json!(143), &cancelled)]
        ),
        "{stopped}"
    );
    sb.assert_no_survivors();
}

/// A background run is the server's: when its client goes away, the run stops too.
#[tokio::test]
async fn a_background_subagent_stops_with_the_server() {
    let sb = Sandbox::new().scenario("silent");
    let mut server = start(&sb).await;
    let r = server
        .client
        .call_tool(tool(
            "subagent",
            json!({"agent": "fake", "task": "hang", "background": true}),
        ))
        .await
        .unwrap();
    let run_id = structured(&r)["runId"].as_str().unwrap().to_string();
    until_child_started(&sb).await;
    server.client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), server.process.wait())
        .await
        .expect("server exits")
        .unwrap();
    assert!(status.success(), "{status:?}");
    let result = sb.state.join("runs").join(&run_id).join("result.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !result.exists() {
        assert!(Instant::now() < deadline, "the run never recorded its end");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    assert_eq!(v["details"]["error"]["code"], json!("SUBAGENT_FAILED"));
    sb.assert_no_survivors();
}
