//! `orchestrate mcp`: the same run, served as MCP tools over stdio with `rmcp`.
//!
//! Tools: `subagent` (one run; `content` is the result's content, `structuredContent` its
//! details, `isError` when it failed) and `list_agents`. Progress notifications go out
//! while a child runs when the client sent a progress token; `notifications/cancelled`
//! stops that child's group; calls run concurrently. On stdin EOF every running child is
//! stopped before the server exits. stdout carries protocol only: logs go to stderr.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::agents::{self, DiscoveryOptions};
use crate::result::RunResult;
use crate::run::fanout::{run_chain, run_parallel, FanoutLimits};
use crate::run::{run, Observer, RunEnv, RunRequest};
use crate::sandbox::{Network, SandboxMode};
use crate::supervisor::Controls;

/// Arguments of the `subagent` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SubagentArgs {
    /// Agent name (see list_agents).
    #[serde(default)]
    pub agent: Option<String>,
    /// What the agent should do; it cannot ask back, so be complete.
    #[serde(default)]
    pub task: Option<String>,
    /// Several tasks instead of agent+task: run concurrently, or in order with chain.
    #[serde(default)]
    pub tasks: Vec<TaskArg>,
    /// Run `tasks` in order; `{previous}` in a task is the previous step's output.
    #[serde(default)]
    pub chain: bool,
    /// Working directory for the child (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Model passed to the child CLI.
    #[serde(default)]
    pub model: Option<String>,
    /// Maximum runtime in milliseconds (default 900000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Maximum time without child output in milliseconds (default 180000).
    #[serde(default)]
    pub idle_timeout_ms: Option<u64>,
    /// The child's sandbox: read-only, workspace-write or off (default: read-only for an
    /// agent that cannot write, workspace-write otherwise).
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// off: no network at all for the child (default on).
    #[serde(default)]
    pub network: Option<Network>,
    /// worktree: the child works in a new git worktree on branch orchestrate/<runId>.
    #[serde(default)]
    pub isolation: Option<IsolationArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum IsolationArg {
    Worktree,
    None,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskArg {
    pub agent: String,
    pub task: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct NoArgs {}

/// Runs in flight, so that shutdown can wait for their children to be stopped.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

#[derive(Clone)]
pub(crate) struct OrchestrateServer {
    #[allow(dead_code, reason = "read by the code #[tool_handler] generates")]
    tool_router: ToolRouter<Self>,
    /// Cancelled when the client goes away: every run stops its child.
    shutdown: CancellationToken,
    in_flight: Arc<InFlight>,
    agents_dir: Option<PathBuf>,
}

#[tool_router]
impl OrchestrateServer {
    pub(crate) fn new(agents_dir: Option<PathBuf>) -> Self {
        OrchestrateServer {
            tool_router: Self::tool_router(),
            shutdown: CancellationToken::new(),
            in_flight: Arc::new(InFlight::default()),
            agents_dir,
        }
    }

    /// Delegates a task to a named subagent (a supervised agent CLI) and returns its
    /// final answer; details carry usage, cost, errors and the session file.
    #[tool(
        output_schema = rmcp::handler::server::common::schema_for_output::<crate::result::Details>(),
        description = "Delegate a task to a named subagent (a separate agent CLI run, supervised with timeouts): give agent and task, or tasks [{agent, task}] to fan out (chain: true runs them in order with {previous}). Returns the final answer; structured details carry usage, cost, exit code, errors and the session file. Use list_agents for names."
    )]
    async fn subagent(
        &self,
        Parameters(mut args): Parameters<SubagentArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.in_flight.count.fetch_add(1, Ordering::SeqCst);
        let _guard = InFlightGuard(self.in_flight.clone());
        let tasks = std::mem::take(&mut args.tasks);
        let chain = args.chain;
        let req = RunRequest {
            agent: args.agent.unwrap_or_default(),
            task: args.task.unwrap_or_default(),
            model: args.model,
            cwd: args.cwd.map(PathBuf::from),
            agents_dir: self.agents_dir.clone(),
            runtime_timeout: args
                .timeout_ms
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            idle_timeout: args
                .idle_timeout_ms
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            sandbox: args.sandbox,
            network: args.network,
            worktree: args.isolation.map(|i| i == IsolationArg::Worktree),
            ..RunRequest::default()
        };
        let env = match RunEnv::load(&RunEnv::cwd_of(req.cwd.as_deref())) {
            Ok(env) => env,
            Err(e) => return Ok(to_call_result(&e.to_result(None), true)),
        };
        // A cancel from the client, or the client going away, stops this run's child.
        let controls = Controls::default();
        let cancel = controls.cancel.clone();
        let (client_cancel, shutdown) = (ctx.ct.clone(), self.shutdown.clone());
        let link = tokio::spawn(async move {
            tokio::select! {
                _ = client_cancel.cancelled() => {}
                _ = shutdown.cancelled() => {}
            }
            cancel.cancel();
        });

        let mut forwarder = None;
        let observer = ctx.meta.get_progress_token().map(|token| {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let peer = ctx.peer.clone();
            forwarder = Some(tokio::spawn(async move {
                let mut step = 0.0;
                let mut last = String::new();
                while let Some(message) = rx.recv().await {
                    if message == last {
                        continue;
                    }
                    last.clone_from(&message);
                    step += 1.0;
                    let param =
                        ProgressNotificationParam::new(token.clone(), step).with_message(message);
                    if peer.notify_progress(param).await.is_err() {
                        break;
                    }
                }
            }));
            let observer: Observer<'static> = Box::new(move |update: &RunResult| {
                let _ = tx.send(progress_message(update));
            });
            observer
        });

        let output = if tasks.is_empty() {
            run(&req, &env, &controls, observer).await
        } else {
            drop(observer);
            let reqs: Vec<RunRequest> = tasks
                .into_iter()
                .map(|t| RunRequest {
                    agent: t.agent,
                    task: t.task,
                    ..req.clone()
                })
                .collect();
            let limits = FanoutLimits::from_config(&env.config, None);
            if chain {
                run_chain(reqs, &env, &controls, limits).await
            } else {
                run_parallel(reqs, &env, &controls, limits).await
            }
        };
        link.abort();
        // The observer, and with it the channel's sender, is gone now: let the forwarder send
        // what is queued, so that no progress notification follows the response.
        if let Some(f) = forwarder {
            let _ = f.await;
        }
        let failed = output.exit_status != 0;
        Ok(to_call_result(&output.result, failed))
    }

    /// Lists the agents `subagent` can run.
    #[tool(
        description = "List the subagents available to the subagent tool: name, description, backend, tools, and where each is defined."
    )]
    async fn list_agents(
        &self,
        Parameters(_): Parameters<NoArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let cwd =
            std::env::current_dir().map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let catalog = agents::discover(&DiscoveryOptions::from_env(cwd, self.agents_dir.clone()));
        let list: Vec<serde_json::Value> = catalog.agents().map(|a| a.to_json()).collect();
        let text = catalog
            .agents()
            .map(|a| format!("{}: {}", a.name, a.description))
            .collect::<Vec<_>>()
            .join("\n");
        let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
        r.structured_content = Some(serde_json::json!({
            "agents": list,
            "problems": catalog.problems().iter().map(agents::problem_json).collect::<Vec<_>>(),
        }));
        Ok(r)
    }
}

#[tool_handler(
    name = "orchestrate",
    instructions = "Delegate tasks to subagents with the subagent tool; list_agents shows which exist."
)]
impl ServerHandler for OrchestrateServer {}

/// `content` = the result's content, `structuredContent` = its details.
fn to_call_result(result: &RunResult, failed: bool) -> CallToolResult {
    let content = result
        .content
        .iter()
        .map(|c| ContentBlock::text(c.text.clone()))
        .collect();
    let mut r = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    r.structured_content = serde_json::to_value(&result.details).ok();
    r
}

/// A short progress line: turns, the current tool, tokens.
fn progress_message(update: &RunResult) -> String {
    let Some(s) = update.details.streaming.as_ref() else {
        return String::new();
    };
    let tool = match s.display_items.last() {
        Some(crate::result::DisplayItem::ToolCall { name, .. }) => format!(", running {name}"),
        _ => String::new(),
    };
    let tokens = s.usage.input + s.usage.output + s.usage.cache_read + s.usage.cache_write;
    format!("turn {}{tool}, {tokens} tokens", s.turn_count)
}

/// Serves MCP on stdin/stdout until the client closes stdin, then stops running children.
pub(crate) async fn serve(agents_dir: Option<PathBuf>) -> std::io::Result<()> {
    let server = OrchestrateServer::new(agents_dir);
    let shutdown = server.shutdown.clone();
    let in_flight = server.in_flight.clone();
    let service = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("failed to start the MCP server: {e}")))?;
    let quit = service.waiting().await;
    tracing::debug!(?quit, "MCP client went away; stopping running subagents");
    shutdown.cancel();
    // Each run stops its child's group (SIGTERM, then SIGKILL after the grace) and
    // returns; wait for that, bounded, so nothing is left behind.
    let drained = async {
        while in_flight.count.load(Ordering::SeqCst) > 0 {
            let notified = in_flight.idle.notified();
            if in_flight.count.load(Ordering::SeqCst) == 0 {
                break;
            }
            notified.await;
        }
    };
    let _ = tokio::time::timeout(
        crate::limits::DEFAULT_KILL_GRACE + Duration::from_secs(5),
        drained,
    )
    .await;
    Ok(())
}
