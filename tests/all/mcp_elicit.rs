//! `permissions: ask` through `orchestrate mcp`: a real MCP client (rmcp) calls `subagent`
//! for an ACP agent (the fake child, `FAKE_AGENT_SCENARIO=acp`) that asks permission to
//! write `x.txt`; the question reaches the client as `elicitation/create`, and its answer
//! decides whether the file is written. A client that cannot be asked gets the policy's
//! decision and a warning saying why; a client that never answers does not hold up the
//! run's timeout.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability,
    FormElicitationCapability, Implementation, ProtocolVersion,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RunningService,
};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{json, Value};
use support::{fake_agent_bin, Sandbox};

/// How the test's client answers a question.
#[derive(Clone, Copy, PartialEq)]
enum Reply {
    Allow,
    Decline,
    Never,
}

#[derive(Clone)]
struct Client {
    /// None: the client does not declare elicitation.
    reply: Option<Reply>,
    version: ProtocolVersion,
    /// `(message, requestedSchema)` of each question.
    asked: Arc<Mutex<Vec<(String, Value)>>>,
    cancelled: Arc<Mutex<Vec<CancelledNotificationParam>>>,
}

impl Client {
    fn new(reply: Option<Reply>) -> Client {
        Client {
            reply,
            version: ProtocolVersion::V_2025_06_18,
            asked: Arc::default(),
            cancelled: Arc::default(),
        }
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut caps = ClientCapabilities::default();
        if self.reply.is_some() {
            let mut e = ElicitationCapability::new();
            e.form = Some(FormElicitationCapability::default());
            caps.elicitation = Some(e);
        }
        let mut info = ClientConfig::new(caps, Implementation::new("elicit-test", "1.0"));
        info.protocol_version = self.version.clone();
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            panic!("a form was expected: {request:?}");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        self.asked.lock().unwrap().push((message, schema));
        match self.reply {
            Some(Reply::Allow) => {
                let mut r = ElicitResult::new(ElicitationAction::Accept);
                r.content = Some(json!({"allow": true}));
                Ok(r)
            }
            Some(Reply::Decline) => Ok(ElicitResult::new(ElicitationAction::Decline)),
            Some(Reply::Never) | None => std::future::pending().await,
        }
    }

    async fn on_cancelled(
        &self,
        params: CancelledNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.cancelled.lock().unwrap().push(params);
    }
}

fn sandbox() -> Sandbox {
    let sb = Sandbox::new()
        .scenario("acp")
        .set("FAKE_ACP", "ok")
        .set("FAKE_ACP_WRITES", "1");
    for (name, tools, readonly) in [
        ("implementer", "read, edit, write, bash", false),
        ("reader", "read, grep", true),
    ] {
        let agent = format!(
            "---\nname: {name}\ndescription: d\ntools: {tools}\nreadonly: {readonly}\nbackend: acp\nacp_command: {}\n---\nBe brief.\n",
            fake_agent_bin().display()
        );
        std::fs::write(sb.agents.join(format!("{name}.md")), agent).unwrap();
    }
    sb
}

struct Server {
    client: RunningService<RoleClient, Client>,
    _process: tokio::process::Child,
}

async fn start(sb: &Sandbox, handler: Client, lifecycle: ClientLifecycleMode) -> Server {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = tokio::process::Command::from(sb.command(&["mcp", "--agents-dir", &agents]));
    cmd.stdin(std::process::Stdio::piped()).kill_on_drop(true);
    let mut process = cmd.spawn().expect("spawn orchestrate mcp");
    let stdin = process.stdin.take().unwrap();
    let stdout = process.stdout.take().unwrap();
    let client = match lifecycle {
        ClientLifecycleMode::Initialize => handler.serve((stdout, stdin)).await,
        other => handler.serve_with_lifecycle((stdout, stdin), other).await,
    }
    .expect("MCP handshake");
    Server {
        client,
        _process: process,
    }
}

/// Runs `agent` under `permissions: ask` (plus `extra` arguments); the result's first run.
async fn ask(server: &Server, sb: &Sandbox, agent: &str, extra: Value) -> Value {
    let mut args = json!({
        "agent": agent, "task": "Write x.", "permissions": "ask", "details": "full",
        "cwd": sb.work.to_str().unwrap(),
    });
    args.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let call =
        CallToolRequestParams::new("subagent").with_arguments(args.as_object().unwrap().clone());
    let r = tokio::time::timeout(Duration::from_secs(60), server.client.call_tool(call))
        .await
        .expect("the call ends")
        .expect("a tool result");
    let details = r.structured_content.expect("structuredContent");
    details["results"][0].clone()
}

const TOOLS_WARNING: &str = "an ACP agent keeps its own tool set: its permission requests are answered by the agent's tools and sandbox, and the sandbox holds the rest";

const QUESTION: &str = "Subagent {agent} asks to edit files (edit): x.txt. Allow it?";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {"allow": {"type": "boolean", "title": "Allow", "description": "Let the subagent make this call"}},
        "required": ["allow"],
    })
}

fn written(sb: &Sandbox) -> bool {
    sb.work.join("x.txt").is_file()
}

#[tokio::test]
async fn the_parent_allows_what_the_policy_would_reject_and_the_tool_runs() {
    let sb = sandbox();
    let handler = Client::new(Some(Reply::Allow));
    let asked = handler.asked.clone();
    let server = start(&sb, handler, ClientLifecycleMode::Initialize).await;
    // A read-only agent: the policy would reject its edit.
    let r = ask(&server, &sb, "reader", json!({})).await;
    assert_eq!(r["exitCode"], json!(0), "{r}");
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "allowed", "by": "parent", "title": "write x.txt"}])
    );
    assert_eq!(r["output"], json!("Done: yes"));
    assert_eq!(r["warnings"], json!([TOOLS_WARNING]));
    assert!(written(&sb), "the allowed edit ran");
    assert_eq!(
        asked.lock().unwrap().clone(),
        [(QUESTION.replace("{agent}", "reader"), schema())]
    );
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn the_parent_declines_what_the_policy_would_allow_and_the_tool_does_not_run() {
    let sb = sandbox();
    let handler = Client::new(Some(Reply::Decline));
    let asked = handler.asked.clone();
    let server = start(&sb, handler, ClientLifecycleMode::Initialize).await;
    let r = ask(&server, &sb, "implementer", json!({})).await;
    assert_eq!(r["exitCode"], json!(0), "{r}");
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "rejected", "by": "parent", "title": "write x.txt",
                "reason": "the parent declined"}])
    );
    assert_eq!(r["output"], json!("Done: no"));
    assert!(!written(&sb), "the declined edit did not run");
    assert_eq!(asked.lock().unwrap().len(), 1);
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn a_client_without_elicitation_gets_the_policy_and_a_warning_that_says_why() {
    let sb = sandbox();
    let handler = Client::new(None);
    let asked = handler.asked.clone();
    let server = start(&sb, handler, ClientLifecycleMode::Initialize).await;
    let r = ask(&server, &sb, "implementer", json!({})).await;
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "allowed", "by": "policy", "title": "write x.txt"}])
    );
    assert_eq!(
        r["warnings"],
        json!([
            TOOLS_WARNING,
            "permissions ask: the MCP client did not declare the elicitation capability; the child's permission requests are decided by policy"
        ])
    );
    assert!(written(&sb));
    assert!(asked.lock().unwrap().is_empty(), "nothing was asked");
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn a_client_on_protocol_2026_07_28_is_not_asked_and_the_warning_says_why() {
    let sb = sandbox();
    let mut handler = Client::new(Some(Reply::Allow));
    handler.version = ProtocolVersion::V_2026_07_28;
    let asked = handler.asked.clone();
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let server = start(&sb, handler, lifecycle).await;
    // A read-only agent: the policy rejects, the parent is not asked.
    let r = ask(&server, &sb, "reader", json!({})).await;
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "rejected", "by": "policy", "title": "write x.txt",
                "reason": "the agent is read-only"}])
    );
    assert_eq!(
        r["warnings"],
        json!([
            TOOLS_WARNING,
            "permissions ask: the MCP client speaks protocol 2026-07-28 or later, where a server cannot ask its client while a call runs (a server started with permissions: ask in its config or ORCHESTRATE_PERMISSIONS offers 2025-11-25 at most, in which it can); the child's permission requests are decided by policy"
        ])
    );
    assert!(!written(&sb));
    assert!(asked.lock().unwrap().is_empty(), "nothing was asked");
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn a_server_started_with_ask_offers_2025_11_25_and_a_client_that_prefers_2026_is_asked() {
    let sb = sandbox().set("ORCHESTRATE_PERMISSIONS", "ask");
    let mut handler = Client::new(Some(Reply::Allow));
    handler.version = ProtocolVersion::V_2025_11_25;
    let asked = handler.asked.clone();
    // server/discover, preferring 2026-07-28: the server offers 2025-11-25 at most.
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2025_11_25],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let server = start(&sb, handler, lifecycle).await;
    assert_eq!(
        server
            .client
            .peer_info()
            .map(|i| i.protocol_version.clone()),
        Some(ProtocolVersion::V_2025_11_25)
    );
    // `permissions: ask` comes from the server's settings: the call does not name it.
    let call = CallToolRequestParams::new("subagent").with_arguments(
        json!({"agent": "reader", "task": "Write x.", "details": "full", "cwd": sb.work.to_str().unwrap()})
            .as_object()
            .unwrap()
            .clone(),
    );
    let r = server.client.call_tool(call).await.unwrap();
    let r = r.structured_content.unwrap()["results"][0].clone();
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "allowed", "by": "parent", "title": "write x.txt"}])
    );
    assert!(written(&sb));
    assert_eq!(asked.lock().unwrap().len(), 1);
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}

#[tokio::test]
async fn a_parent_that_never_answers_does_not_hold_up_the_runs_timeout() {
    let sb = sandbox();
    let handler = Client::new(Some(Reply::Never));
    let (asked, cancelled) = (handler.asked.clone(), handler.cancelled.clone());
    let server = start(&sb, handler, ClientLifecycleMode::Initialize).await;
    let started = std::time::Instant::now();
    let r = ask(&server, &sb, "implementer", json!({"timeoutMs": 3000})).await;
    // The run's timeout, not the parent's bound, ended it.
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r["exitCode"], json!(124), "{r}");
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "cancelled", "by": "stop", "title": "write x.txt"}])
    );
    assert!(!written(&sb));
    assert_eq!(asked.lock().unwrap().len(), 1);
    // The question was withdrawn at the client.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while cancelled.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no notifications/cancelled came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        cancelled.lock().unwrap()[0].reason.as_deref(),
        Some("the run is stopping")
    );
    server.client.cancel().await.unwrap();
    sb.assert_no_survivors();
}
