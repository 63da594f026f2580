//! `orchestrate mcp` driven by a real MCP client (rmcp): handshake, tools, a run with
//! progress notifications, isError, cancellation, concurrent calls and stdin EOF.

mod support;

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
    assert_eq!(names, ["list_agents", "subagent"]);
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
    assert_eq!(
        text(&r),
        "## Answer\nAuth lives in src/auth.rs (fn login at line 42)."
    );
    let details = structured(&r);
    assert_eq!(details["mode"], json!("single"));
    assert_eq!(details["results"][0]["usage"]["input"], json!(4500));
    assert_eq!(details["results"][0]["usage"]["turns"], json!(3));
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
        let mut a = json!({"agent": "fake", "task": "x"});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        CallToolRequestParams::new("subagent").with_arguments(a.as_object().unwrap().clone())
    };
    let r = server.client.call_tool(args(json!({}))).await.unwrap();
    assert_eq!(
        structured(&r)["results"][0]["sandbox"],
        json!({"mode": "read-only", "mechanism": "landlock"})
    );
    let r = server
        .client
        .call_tool(args(json!({"sandbox": "off", "network": "off"})))
        .await
        .unwrap();
    assert_eq!(
        structured(&r)["results"][0]["sandbox"],
        json!({"mode": "off", "mechanism": "none", "network": "off"})
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
    let (a, b) = tokio::join!(
        server.client.call_tool(call("fake", "one")),
        server.client.call_tool(call("fake", "two"))
    );
    let both = started.elapsed();
    let (a, b) = (a.unwrap(), b.unwrap());
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
