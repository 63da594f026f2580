//! `orchestrate mcp`: the same run, served as MCP tools over stdio with `rmcp`.
//!
//! Tools: `subagent` (one run or several; `content` is the answer, `structuredContent` the
//! lean details with `output`, `isError` when it failed; with `background: true`, a
//! detached run whose id comes back at once), `list_agents`, and `send`, `wait` and `stop`
//! for runs already started ([`runs`]). Background runs still running when the server
//! stops are stopped with it. Their
//! definitions stay small and strict ([`schema`]). Progress notifications go out while
//! children run (per task for a fan-out) when the client sent a progress token;
//! `notifications/cancelled` stops that call's children; calls run concurrently. A child's
//! permission request under `permissions: ask` goes to the calling client as an
//! elicitation ([`elicit`]). When
//! stdin closes ([`input`] notices it at once) or on SIGINT/SIGTERM/SIGHUP, every running
//! child is stopped (a second signal kills at once) before the server exits. stdout
//! carries protocol only: logs go to stderr.

mod elicit;
mod input;
mod output;
mod runs;
pub(crate) mod schema;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, CustomRequest, CustomResult, ErrorCode,
    JsonObject, ProgressNotificationParam,
};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::agents::{self, DiscoveryOptions};
use crate::error::RunError;
use crate::result::{DetailLevel, RunResult};
use crate::run::progress::{FanoutObserver, FanoutStatus};
use crate::run::{Observer, Plan, RunEnv, RunRequest};
use crate::settings::{self, Values};
use crate::supervisor::Controls;

/// The `subagent` tool's own arguments: what to run and how to answer. The settings it
/// takes besides (`timeoutMs`, `maxCostUsd`, `sandbox`, …) come from the settings table
/// (`crate::settings`). Its doc comments are the schema's descriptions, loaded into every
/// parent session (every tool definition together in 2,800 bytes): an argument whose name and type
/// say it all has `//` comments only.
#[derive(Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SubagentArgs {
    #[serde(default)]
    pub agent: Option<String>,
    /// Complete: the agent cannot ask back.
    #[serde(default)]
    pub task: Option<String>,
    /// Instead of agent+task: several, run at once.
    #[serde(default)]
    pub tasks: Vec<TaskArg>,
    /// Run tasks in order; {previous} = the prior output.
    #[serde(default)]
    pub chain: bool,
    // The child's working directory (default: the server's).
    #[serde(default)]
    pub cwd: Option<String>,
    /// full adds every step (large).
    #[serde(default)]
    pub details: Option<DetailLevel>,
    /// Return the runId at once.
    #[serde(default)]
    pub background: bool,
    /// The settings given as arguments.
    #[serde(skip)]
    pub settings: Values,
}

#[derive(Debug, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskArg {
    pub agent: String,
    pub task: String,
}

/// The `subagent` tool's input schema: its own arguments and the settings it takes.
fn subagent_input() -> std::sync::Arc<JsonObject> {
    let mut schema = (*schema::input_schema::<SubagentArgs>()).clone();
    if let Some(serde_json::Value::Object(properties)) = schema.get_mut("properties") {
        properties.extend(settings::mcp_properties());
    }
    std::sync::Arc::new(schema)
}

/// `name: expected a string, got 5`.
fn expected(name: &str, what: &str, got: &serde_json::Value) -> RunError {
    RunError::invalid(format!(
        "{name}: {}",
        settings::kinds::expected(what, settings::kinds::Raw::Json(got))
    ))
}

fn string_arg(name: &str, v: &serde_json::Value) -> Result<String, RunError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| expected(name, "a string", v))
}

/// The tool's own argument names, in the schema's order.
const OWN_ARGUMENTS: [&str; 7] = [
    "agent",
    "task",
    "tasks",
    "chain",
    "cwd",
    "details",
    "background",
];

impl SubagentArgs {
    /// The arguments as the client sent them. A wrong type, a bad value or an unknown
    /// name is `INVALID_INPUT` naming the argument and what it takes.
    fn parse(args: JsonObject) -> Result<SubagentArgs, RunError> {
        let mut out = SubagentArgs::default();
        for (name, value) in &args {
            // An optional argument sent as null is left out.
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "agent" => out.agent = Some(string_arg(name, value)?),
                "task" => out.task = Some(string_arg(name, value)?),
                "cwd" => out.cwd = Some(string_arg(name, value)?),
                "background" => {
                    out.background = value
                        .as_bool()
                        .ok_or_else(|| expected(name, "true or false", value))?
                }
                "chain" => {
                    out.chain = value
                        .as_bool()
                        .ok_or_else(|| expected(name, "true or false", value))?
                }
                "details" => {
                    out.details = Some(match value.as_str() {
                        Some("lean") => DetailLevel::Lean,
                        Some("full") => DetailLevel::Full,
                        _ => return Err(expected(name, "lean or full", value)),
                    })
                }
                "tasks" => {
                    let items = value
                        .as_array()
                        .ok_or_else(|| expected(name, "a list of {agent, task}", value))?;
                    for (i, item) in items.iter().enumerate() {
                        let field = |key: &str| {
                            let here = format!("tasks[{i}].{key}");
                            match item.get(key) {
                                Some(v) => string_arg(&here, v),
                                None => Err(RunError::invalid(format!("{here}: missing"))),
                            }
                        };
                        if let Some(other) = item
                            .as_object()
                            .ok_or_else(|| expected(&format!("tasks[{i}]"), "{agent, task}", item))?
                            .keys()
                            .find(|k| *k != "agent" && *k != "task")
                        {
                            return Err(RunError::invalid(format!(
                                "tasks[{i}].{other}: not a field of a task (it has agent and task)"
                            )));
                        }
                        out.tasks.push(TaskArg {
                            agent: field("agent")?,
                            task: field("task")?,
                        });
                    }
                }
                other => match settings::by_mcp_name(other) {
                    Some(setting) => setting
                        .read(&mut out.settings, settings::kinds::Raw::Json(value))
                        .map_err(|e| RunError::invalid(format!("{name}: {e}")))?,
                    None => return Err(RunError::invalid(unknown_argument(other))),
                },
            }
        }
        Ok(out)
    }

    /// What a background call runs, refused at once for what the run would refuse before
    /// it starts a child: a task of a fan-out without its agent or task.
    fn into_background(self, agents_dir: Option<PathBuf>) -> Result<Plan, RunError> {
        let plan = self.into_plan(agents_dir)?;
        if let Plan::Parallel(reqs) | Plan::Chain(reqs) = &plan {
            if let Some(i) = reqs
                .iter()
                .position(|r| r.agent.trim().is_empty() || r.task.trim().is_empty())
            {
                return Err(RunError::invalid(format!(
                    "tasks[{i}]: needs both an agent and a task"
                )));
            }
        }
        Ok(plan)
    }

    fn into_plan(self, agents_dir: Option<PathBuf>) -> Result<Plan, RunError> {
        let base = RunRequest {
            cwd: self.cwd.map(PathBuf::from),
            agents_dir,
            settings: self.settings,
            ..RunRequest::default()
        };
        if self.tasks.is_empty() {
            if self.chain {
                return Err(RunError::invalid("chain needs tasks: [{agent, task}, …]"));
            }
            return Ok(Plan::Single(Box::new(RunRequest {
                agent: self.agent.unwrap_or_default(),
                task: self.task.unwrap_or_default(),
                ..base
            })));
        }
        if self.agent.is_some() || self.task.is_some() {
            return Err(RunError::invalid(
                "give either agent and task, or tasks, not both",
            ));
        }
        let reqs = self
            .tasks
            .into_iter()
            .map(|t| RunRequest {
                agent: t.agent,
                task: t.task,
                ..base.clone()
            })
            .collect();
        Ok(if self.chain {
            Plan::Chain(reqs)
        } else {
            Plan::Parallel(reqs)
        })
    }
}

/// The run an MCP `subagent` call with `background: true` asks for (its arguments as the
/// client sent them), as the background run `run_id`.
pub(crate) fn background_request(
    args: JsonObject,
    agents_dir: Option<PathBuf>,
    run_id: &crate::session::RunId,
) -> Result<Plan, RunError> {
    let id = Some(run_id.to_string());
    Ok(
        match SubagentArgs::parse(args)?.into_background(agents_dir)? {
            Plan::Single(req) => Plan::Single(Box::new(RunRequest { run_id: id, ..*req })),
            Plan::Parallel(reqs) => Plan::Parallel(with_run_id(reqs, &id)),
            Plan::Chain(reqs) => Plan::Chain(with_run_id(reqs, &id)),
        },
    )
}

/// Every request of a fan-out with the background run's id (each task gets its own as
/// the supervisor starts it).
fn with_run_id(reqs: Vec<RunRequest>, id: &Option<String>) -> Vec<RunRequest> {
    reqs.into_iter()
        .map(|r| RunRequest {
            run_id: id.clone(),
            ..r
        })
        .collect()
}

/// `name: not an argument of subagent`, with the argument it probably meant, or else the
/// ones there are.
fn unknown_argument(name: &str) -> String {
    let known: Vec<&str> = OWN_ARGUMENTS
        .into_iter()
        .chain(
            settings::SETTINGS
                .iter()
                .filter_map(|s| s.surfaces().mcp.map(|m| m.name)),
        )
        .collect();
    // `timeout` for `timeoutMs`, `max_turns` for `maxTurns`.
    let squash = |s: &str| s.replace(['_', '-'], "").to_ascii_lowercase();
    let given = squash(name);
    match known
        .iter()
        .find(|k| !given.is_empty() && squash(k).starts_with(&given))
    {
        Some(meant) => format!("{name}: not an argument of subagent (did you mean {meant}?)"),
        None => format!(
            "{name}: not an argument of subagent (it takes {})",
            known.join(", ")
        ),
    }
}

/// Runs in flight, so that shutdown can wait for their children to be stopped.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    /// Returns once no call is running.
    async fn drained(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Requests to stop every running child: stdin closing and each signal count as one. The
/// first stops them gracefully (SIGTERM, then SIGKILL after the grace), the second at once,
/// as `orchestrate run` does with signals.
#[derive(Clone, Default)]
struct Stop {
    graceful: CancellationToken,
    kill: CancellationToken,
    requests: Arc<AtomicUsize>,
}

impl Stop {
    fn request(&self, why: &str) {
        if self.requests.fetch_add(1, Ordering::SeqCst) == 0 {
            tracing::info!("{why}: stopping every running subagent");
            self.graceful.cancel();
        } else {
            tracing::info!("{why} again: killing every running subagent");
            self.kill.cancel();
        }
    }
}

#[derive(Clone)]
pub(crate) struct OrchestrateServer {
    #[allow(dead_code, reason = "read by the code #[tool_handler] generates")]
    tool_router: ToolRouter<Self>,
    stop: Stop,
    in_flight: Arc<InFlight>,
    agents_dir: Option<PathBuf>,
    /// The background runs this server started, stopped with it.
    background: Arc<std::sync::Mutex<Vec<crate::session::RunDir>>>,
    /// The newest protocol version offered (see [`elicit::newest_protocol`]).
    newest_protocol: rmcp::model::ProtocolVersion,
}

/// `subagent`'s description: when to delegate, and which built-in agent fits what.
const SUBAGENT_DESCRIPTION: &str = "Delegate a self-contained task to a subagent, a supervised agent CLI run: its steps stay out of your context, you get its final answer. explorer: find code (read-only); researcher: history, dependencies; reviewer: review a change; implementer: make a specified change; tester: run or write tests; list_agents: all.";

#[tool_router]
impl OrchestrateServer {
    pub(crate) fn new(agents_dir: Option<PathBuf>) -> Self {
        OrchestrateServer {
            tool_router: Self::tool_router(),
            stop: Stop::default(),
            in_flight: Arc::new(InFlight::default()),
            agents_dir,
            background: Arc::default(),
            newest_protocol: rmcp::model::ProtocolVersion::LATEST,
        }
    }

    #[tool(
        description = SUBAGENT_DESCRIPTION,
        input_schema = subagent_input(),
        output_schema = schema::subagent_output()
    )]
    async fn subagent(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.in_flight.count.fetch_add(1, Ordering::SeqCst);
        let _guard = InFlightGuard(self.in_flight.clone());
        let refused = |e: RunError| Ok(to_call_result(&e.to_result(None), true, DetailLevel::Lean));
        let request = args.clone();
        let args = match SubagentArgs::parse(args) {
            Ok(args) => args,
            Err(e) => return refused(e),
        };
        if args.background {
            return Ok(match self.start_background(request, args) {
                Ok(result) => to_call_result(&result, false, DetailLevel::Lean),
                Err(e) => to_call_result(&e.to_result(None), true, DetailLevel::Lean),
            });
        }
        let detail = args.details.unwrap_or_default();
        let plan = match args.into_plan(self.agents_dir.clone()) {
            Ok(plan) => plan,
            Err(e) => return refused(e),
        };
        let mut env = match RunEnv::load(&RunEnv::cwd_of(plan.cwd())) {
            Ok(env) => env,
            Err(e) => return refused(e),
        };
        // The client's trace (`_meta.traceparent`), continued by this call's runs.
        if let Some(given) = ctx
            .meta
            .get_traceparent()
            .and_then(|tp| crate::observe::trace::SpanContext::parse(tp, ctx.meta.get_tracestate()))
        {
            env.observe = crate::observe::Hub::standard_within(Some(given));
        }
        // `permissions: ask` asks this call's client, where it can be asked.
        env.parent = elicit::parent_of(&ctx);
        // A cancel from the client, the client going away or a signal stops this call's
        // children; a second stop request kills them at once.
        let controls = Controls::default();
        let (cancel, kill) = (controls.cancel.clone(), controls.kill.clone());
        let (client_cancel, stop) = (ctx.ct.clone(), self.stop.clone());
        let link = tokio::spawn(async move {
            tokio::select! {
                _ = client_cancel.cancelled() => {}
                _ = stop.graceful.cancelled() => {}
            }
            cancel.cancel();
            stop.kill.cancelled().await;
            kill.cancel();
        });

        let progress = ctx
            .meta
            .get_progress_token()
            .map(|token| Progress::start(ctx.peer.clone(), token));
        let output = plan
            .run(
                &env,
                &controls,
                progress.as_ref().map(Progress::single),
                progress.as_ref().map(Progress::fanout),
            )
            .await;
        link.abort();
        // The observers, and with them the channel's senders, are gone now: let the
        // forwarder send what is queued, so that no progress notification follows the
        // response.
        if let Some(p) = progress {
            p.finish().await;
        }
        let failed = output.exit_status != 0;
        Ok(to_call_result(&output.result, failed, detail))
    }

    #[tool(
        description = "Message a run.",
        input_schema = schema::input_schema::<runs::SendArgs>()
    )]
    async fn send(&self, args: JsonObject) -> Result<CallToolResult, ErrorData> {
        // Off the runtime's threads: the inbox's lock may take seconds.
        let sent = tokio::task::spawn_blocking(move || runs::parse(args).and_then(runs::send))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(match sent {
            Ok(result) => to_call_result(&result, false, DetailLevel::Lean),
            Err(e) => to_call_result(&e.to_result(None), true, DetailLevel::Lean),
        })
    }

    #[tool(
        description = "Wait for a run.",
        input_schema = schema::input_schema::<runs::WaitArgs>()
    )]
    async fn wait(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = match runs::parse(args) {
            Ok(args) => args,
            Err(e) => return Ok(to_call_result(&e.to_result(None), true, DetailLevel::Lean)),
        };
        let (cancel, link) = self.call_cancel(&ctx);
        let waited = runs::wait(args, &cancel).await;
        link.abort();
        Ok(waited_result(waited, false))
    }

    #[tool(
        description = "Stop a run.",
        input_schema = schema::input_schema::<runs::StopArgs>()
    )]
    async fn stop(
        &self,
        args: JsonObject,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = match runs::parse(args) {
            Ok(args) => args,
            Err(e) => return Ok(to_call_result(&e.to_result(None), true, DetailLevel::Lean)),
        };
        let (cancel, link) = self.call_cancel(&ctx);
        let stopped = runs::stop(args, &cancel).await;
        link.abort();
        Ok(waited_result(stopped, true))
    }

    #[tool(
        description = "The agents subagent can run and what each is for.",
        input_schema = schema::no_input()
    )]
    async fn list_agents(&self) -> Result<CallToolResult, ErrorData> {
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

impl OrchestrateServer {
    /// Starts the run or fan-out `args` ask for as a background run (`orchestrate
    /// mcp-run`, which reads `request`, the call's arguments, from the run folder) and says
    /// so at once, with each task's run id for a fan-out.
    fn start_background(
        &self,
        mut request: JsonObject,
        args: SubagentArgs,
    ) -> Result<RunResult, RunError> {
        let (what, fanout) = match args.into_background(self.agents_dir.clone())? {
            Plan::Single(req) => (req.agent, None),
            Plan::Parallel(reqs) => (
                format!("{} tasks in parallel", reqs.len()),
                Some((crate::result::Mode::Parallel, reqs)),
            ),
            Plan::Chain(reqs) => (
                format!("a chain of {} steps", reqs.len()),
                Some((crate::result::Mode::Chain, reqs)),
            ),
        };
        let fanout = fanout.map(|(mode, reqs)| (mode, reqs.into_iter().map(|r| r.agent).collect()));
        let state =
            crate::session::StateDir::from_env().map_err(|e| RunError::invalid(e.to_string()))?;
        request.remove("background");
        let bytes = serde_json::to_vec(&request).map_err(|e| RunError::invalid(e.to_string()))?;
        let mut run_args: Vec<std::ffi::OsString> = vec!["mcp-run".into()];
        if let Some(dir) = &self.agents_dir {
            run_args.push("--agents-dir".into());
            run_args.push(dir.into());
        }
        let started =
            crate::background::start(&run_args, &state, Some(&bytes), fanout).map_err(|e| {
                RunError::Io {
                    action: "start the background run",
                    path: state.runs_dir(),
                    source: e,
                }
            })?;
        let run_id = &started.run_id;
        let text = match &started.fanout {
            None => format!(
                "Started {what} in the background as run {run_id}: wait returns its result, send messages it, stop stops it."
            ),
            Some(_) => format!(
                "Started {what} in the background as run {run_id}: wait returns the results, stop stops every task, send messages a task by its runId (background.tasks)."
            ),
        };
        let result = started.result(text);
        self.background
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(started.run_dir);
        Ok(result)
    }

    /// A token cancelled when the client cancels the call or the server stops; the task
    /// that links them, to abort once the call is answered.
    fn call_cancel(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let cancel = CancellationToken::new();
        let (client, stop, linked) = (ctx.ct.clone(), self.stop.graceful.clone(), cancel.clone());
        let link = tokio::spawn(async move {
            tokio::select! {
                _ = client.cancelled() => {}
                _ = stop.cancelled() => {}
            }
            linked.cancel();
        });
        (cancel, link)
    }
}

/// A `wait` or `stop` answer: the run's result, or that it still runs. A `wait` whose run
/// failed is an error; a `stop` that ended its run did what it was asked, as the command
/// does (the result says how the run ended).
fn waited_result(waited: Result<runs::Waited, RunError>, stopping: bool) -> CallToolResult {
    match waited {
        Ok(runs::Waited::Ended(result, status)) => {
            to_call_result(&result, status != 0 && !stopping, DetailLevel::Lean)
        }
        Ok(runs::Waited::StillRunning(result)) => to_call_result(&result, false, DetailLevel::Lean),
        Err(e) => to_call_result(&e.to_result(None), true, DetailLevel::Lean),
    }
}

/// Stops the background runs a server started that still run: SIGTERM to each one's
/// supervisor, which stops its child's whole tree and records the result.
fn stop_background(runs: &std::sync::Mutex<Vec<crate::session::RunDir>>) {
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|p| p.into_inner()));
    for dir in runs {
        if let Ok(crate::background::RunState::Running(record)) = crate::background::state(&dir) {
            tracing::info!("stopping the background run in {}", dir.path.display());
            if let Err(e) =
                crate::background::signal_supervisor(&record, nix::sys::signal::Signal::SIGTERM)
            {
                tracing::warn!(
                    "cannot stop the background run in {}: {e}",
                    dir.path.display()
                );
            }
        }
    }
}

/// Progress notifications of one call: messages go through a channel to a task that sends
/// each new one, numbered, to the client.
struct Progress {
    tx: tokio::sync::mpsc::UnboundedSender<String>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Progress {
    fn start(peer: rmcp::Peer<RoleServer>, token: rmcp::model::ProgressToken) -> Progress {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let forwarder = tokio::spawn(async move {
            let mut step = 0.0;
            let mut last = String::new();
            while let Some(message) = rx.recv().await {
                if message == last || message.is_empty() {
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
        });
        Progress { tx, forwarder }
    }

    /// The observer of a single run.
    fn single(&self) -> Observer<'static> {
        let tx = self.tx.clone();
        Observer::new(DetailLevel::Lean, move |update: &RunResult| {
            let _ = tx.send(progress_message(update));
        })
    }

    /// The observer of a fan-out: every task's state in one message.
    fn fanout(&self) -> FanoutObserver {
        let tx = self.tx.clone();
        Arc::new(move |status: &FanoutStatus| {
            let _ = tx.send(status.message());
        })
    }

    /// Waits until every queued message is sent (the observers are gone by now).
    async fn finish(self) {
        drop(self.tx);
        let _ = self.forwarder.await;
    }
}

#[tool_handler(
    name = "orchestrate",
    instructions = "Delegate tasks to subagents with the subagent tool; list_agents shows which exist."
)]
impl ServerHandler for OrchestrateServer {
    fn supported_protocol_versions(
        &self,
    ) -> std::borrow::Cow<'static, [rmcp::model::ProtocolVersion]> {
        std::borrow::Cow::Borrowed(rmcp::model::ProtocolVersion::known_up_to(
            &self.newest_protocol,
        ))
    }

    /// A request whose params do not fit its method reaches here (rmcp could not read it as
    /// that method): an invalid-params error, not "method not found". The stand-in for an
    /// oversized message ([`input`]) gets its answer here too.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let CustomRequest { method, params, .. } = request;
        match method.as_str() {
            input::OVERSIZED_METHOD => oversized_answer(params.unwrap_or_default()),
            "tools/call" => {
                let why = match serde_json::from_value::<CallToolRequestParams>(
                    params.unwrap_or_default(),
                ) {
                    Err(e) => e.to_string(),
                    Ok(_) => "unreadable params".to_string(),
                };
                Err(ErrorData::invalid_params(
                    format!("invalid tools/call params: {why}"),
                    None,
                ))
            }
            m if KNOWN_METHODS.contains(&m) => Err(ErrorData::invalid_params(
                format!("invalid {m} params"),
                None,
            )),
            _ => Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, method, None)),
        }
    }
}

/// Methods of the protocol that rmcp reads into typed requests; one that arrives as a
/// custom request had params that did not fit.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
];

/// The answer to a message over the size limit: for a tool call, an `INVALID_INPUT` tool
/// error the model can act on; for anything else, an invalid-request error.
fn oversized_answer(params: serde_json::Value) -> Result<CustomResult, ErrorData> {
    let bytes = params["bytes"].as_u64().unwrap_or(0);
    let limit = params["limit"]
        .as_u64()
        .unwrap_or(input::MAX_MESSAGE_BYTES as u64);
    let message = format!(
        "The request is {bytes} bytes, over orchestrate's limit of {limit} bytes per message: shorten the task (put long material in a file and name the file in the task)."
    );
    if params["method"] != "tools/call" {
        return Err(ErrorData::invalid_request(message, None));
    }
    let result = to_call_result(
        &RunError::invalid(message).to_result(None),
        true,
        DetailLevel::Lean,
    );
    serde_json::to_value(result)
        .map(CustomResult)
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// `content` = the result's content (the answer), `structuredContent` = its details at
/// `detail`, lean ones with `output` (some clients give their model only
/// `structuredContent`).
fn to_call_result(result: &RunResult, failed: bool, detail: DetailLevel) -> CallToolResult {
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
    r.structured_content = Some(result.details_value(detail));
    r
}

/// A short progress line: turns, the current tool, tokens.
fn progress_message(update: &RunResult) -> String {
    let Some(s) = update.details.streaming.as_ref() else {
        return String::new();
    };
    let tool = s
        .current_tool
        .as_ref()
        .map_or(String::new(), |name| format!(", running {name}"));
    format!("turn {}{tool}, {} tokens", s.turn_count, s.usage.tokens())
}

/// First INT/TERM/HUP: stop every running child gracefully; another: kill them at once.
fn watch_signals(stop: Stop) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
            };
            stop.request(name);
        }
    }))
}

/// How long shutdown waits for running calls to stop their children: the grace between
/// SIGTERM and SIGKILL, and time to reap.
const SHUTDOWN_WAIT: Duration =
    Duration::from_secs(crate::limits::DEFAULT_KILL_GRACE.as_secs() + 5);

/// Serves MCP on stdin/stdout until the client closes stdin or a signal comes, then stops
/// the running children and returns once they are gone.
pub(crate) async fn serve(agents_dir: Option<PathBuf>) -> std::io::Result<()> {
    let server = OrchestrateServer {
        newest_protocol: elicit::newest_protocol(),
        ..OrchestrateServer::new(agents_dir)
    };
    let stop = server.stop.clone();
    let in_flight = server.in_flight.clone();
    let background = server.background.clone();
    let signals = watch_signals(stop.clone())?;
    // `orchestrate stop` and `watch` stop one call's run without the others.
    if let Err(e) = crate::live::stop::listen() {
        tracing::warn!("stop requests are not taken: {e}");
    }
    let eof = stop.clone();
    let (stdout, answers, output) = output::split(tokio::io::stdout());
    let stdin = input::ClientInput::new(tokio::io::stdin(), move || {
        eof.request("the MCP client closed stdin")
    })
    .answering(answers);
    let service = server
        .serve((stdin, stdout))
        .await
        .map_err(|e| std::io::Error::other(format!("failed to start the MCP server: {e}")))?;
    let session = service.cancellation_token();
    let mut waiting = tokio::spawn(service.waiting());
    let ended_first = tokio::select! {
        quit = &mut waiting => {
            tracing::debug!(?quit, "the MCP session ended");
            true
        }
        _ = stop.graceful.cancelled() => false,
    };
    // However it ended, nothing is left running.
    stop.graceful.cancel();
    stop_background(&background);
    if tokio::time::timeout(SHUTDOWN_WAIT, in_flight.drained())
        .await
        .is_err()
    {
        tracing::warn!("running subagents did not stop within {SHUTDOWN_WAIT:?}");
    }
    // After a signal the client may still be there: the responses of the stopped calls
    // went out through the session, which ends now.
    session.cancel();
    if !ended_first {
        let _ = tokio::time::timeout(Duration::from_secs(2), waiting).await;
    }
    output.finish().await;
    signals.abort();
    Ok(())
}
