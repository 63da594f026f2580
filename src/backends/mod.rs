//! Backends: one file per child CLI, each owning its command line and its JSONL dialect.
//!
//! A backend turns an agent and a task into an [`Invocation`] (program, arguments, extra
//! environment, prompt files, and warnings for restrictions the CLI cannot express), and
//! names the dialect its stdout speaks (its own backend's, or for the `command` backend
//! another's). Dialects turn lines into normalized [`AgentEvent`]s.
//!
//! [`BACKENDS`] lists them all; a backend is one file whose `BACKEND` spec holds every
//! fact about its CLI.

pub(crate) mod acp;
pub(crate) mod ask_parent;
pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod command;
pub(crate) mod cursor;
pub(crate) mod gemini;
pub(crate) mod lenient;
pub(crate) mod opencode;
pub(crate) mod permissions;
pub(crate) mod pi;
pub(crate) mod provider;
pub(crate) mod tools;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::events::{AgentEvent, TextKind, Transient};
pub(crate) use crate::platform::find_program;
use crate::result::Usage;
pub(crate) use crate::sandbox::{ChildEnv, CliHome};

/// The variables of a CLI that reaches many providers (pi, opencode, the command
/// backend): any provider's key and base URL, and the cloud logins some providers take.
pub(crate) fn any_provider_env() -> Vec<String> {
    [
        "*_API_KEY",
        "*_BASE_URL",
        "ANTHROPIC_*",
        "OPENAI_*",
        "AZURE_OPENAI_*",
        "GEMINI_*",
        "GOOGLE_API_KEY",
        "OPENROUTER_*",
        "AWS_BEARER_TOKEN_BEDROCK",
        "COPILOT_GITHUB_TOKEN",
    ]
    .map(String::from)
    .to_vec()
}
pub(crate) use crate::result::Delivery;
use crate::structured::OutputSchema;
pub(crate) use crate::supervisor::ChildInput;
use permissions::PermissionPolicy;

/// What a backend needs of the agent it runs, taken from the agent's definition
/// (`AgentDef::brief`): backends read no agent files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBrief {
    pub name: String,
    /// Where it was defined, for messages: its file's path, or `builtin`.
    pub source: String,
    /// As written; empty means the CLI's default set.
    pub tools: Vec<tools::Tool>,
    pub readonly: bool,
    pub system_prompt: String,
    /// For the `command` backend: the command template and the dialect of its output.
    pub command: Option<String>,
    pub dialect: Option<Backend>,
    /// For the `acp` backend: the ACP agent's command line (the agent's `acp_command:`,
    /// else the config's).
    pub acp_command: Option<String>,
}

/// Everything a backend needs to build the child's command line.
#[derive(Debug, Clone)]
pub struct InvocationInput<'a> {
    pub agent: &'a AgentBrief,
    pub task: &'a str,
    /// The run's resolved model (flag, agent file, environment or config); `None` leaves
    /// the choice to the CLI.
    pub model: Option<&'a str>,
    /// The run folder: prompt files the command line refers to are written here.
    pub run_dir: &'a Path,
    /// Continue the child's own session from an earlier run instead of starting anew.
    pub resume: Option<&'a ResumeFrom>,
    /// The run's cost budget (USD), for a CLI that reports its cost only when it finishes
    /// and so must be told the budget itself (claude).
    pub max_cost: Option<f64>,
    /// orchestrate's sandbox confines the child: a CLI's own sandbox would only nest
    /// badly (it cannot mount inside it) and is switched off where the CLI has one.
    pub outer_sandbox: bool,
    /// The schema the answer must match, for a CLI that takes it through its own option
    /// (see [`SchemaRoute`]); `None` otherwise, the request being in `task` then.
    pub output_schema: Option<&'a OutputSchema>,
    /// How the child's permission requests are answered, and where it works (for a CLI
    /// that asks: an ACP agent, claude with streamed input).
    pub permissions: &'a PermissionPolicy,
    /// The child's stdin can be a pipe orchestrate writes (not so through the sandbox on a
    /// cluster node): a CLI that can take messages while it runs (pi's RPC mode) is run
    /// that way.
    pub stdin_pipe: bool,
}

/// What an earlier run left that its CLI can continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeFrom {
    pub run_id: String,
    /// The CLI's session or thread id, as it reported it.
    pub session_id: Option<String>,
    pub run_dir: PathBuf,
}

impl ResumeFrom {
    pub fn session_id(&self, backend: &str) -> Result<&str, BackendError> {
        self.session_id.as_deref().ok_or_else(|| {
            BackendError::Resume(format!(
                "run {} recorded no {backend} session id to continue",
                self.run_id
            ))
        })
    }
}

impl InvocationInput<'_> {
    pub fn model(&self) -> Option<&str> {
        self.model
    }

    /// Writes the agent's system prompt into the run folder, if it has one.
    pub fn write_system_prompt(&self) -> Result<Option<PathBuf>, BackendError> {
        if self.agent.system_prompt.trim().is_empty() {
            return Ok(None);
        }
        let path = self.run_dir.join("system-prompt.md");
        write_prompt_file(&path, &self.agent.system_prompt)?;
        Ok(Some(path))
    }

    /// Writes the output schema into the run folder, for a CLI that reads it from a file.
    pub fn write_output_schema(&self) -> Result<Option<PathBuf>, BackendError> {
        let Some(schema) = self.output_schema else {
            return Ok(None);
        };
        let path = self.run_dir.join("output-schema.json");
        write_prompt_file(&path, &schema.compact())?;
        Ok(Some(path))
    }

    /// The task with the agent's prompt in front, for CLIs that take no system prompt.
    pub fn task_with_instructions(&self) -> String {
        if self.agent.system_prompt.trim().is_empty() {
            return self.task.to_string();
        }
        format!(
            "<instructions>\n{}\n</instructions>\n\nTask: {}",
            self.agent.system_prompt.trim(),
            self.task
        )
    }
}

/// A built command line and the files it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// How orchestrate talks to the child over its stdin, for a CLI that takes a protocol
    /// there; `None`: its stdin is /dev/null and its dialect only reads.
    pub talk: Option<Talk>,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Prompt files written into the run folder (kept with the session).
    pub prompt_files: Vec<PathBuf>,
    /// Restrictions of the agent this CLI cannot express, said out loud in the result.
    pub warnings: Vec<String>,
    /// The backend whose stream the child prints.
    pub dialect: Backend,
}

impl Invocation {
    pub fn new(program: OsString, dialect: Backend) -> Self {
        Invocation {
            program,
            args: Vec::new(),
            env: Vec::new(),
            prompt_files: Vec::new(),
            warnings: Vec::new(),
            dialect,
            talk: None,
        }
    }

    /// The dialect that reads this child's stream (and, for a child orchestrate talks to,
    /// holds up orchestrate's side of the conversation).
    pub fn dialect(&self) -> Box<dyn Dialect> {
        match &self.talk {
            Some(talk) => talk.dialect(),
            None => self.dialect.parser(),
        }
    }

    /// Whether the child's stdin is a pipe orchestrate writes.
    pub fn talks(&self) -> bool {
        self.talk.is_some()
    }

    pub fn arg(&mut self, a: impl Into<OsString>) -> &mut Self {
        self.args.push(a.into());
        self
    }

    pub fn env(&mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> &mut Self {
        self.env.push((k.into(), v.into()));
        self
    }
}

/// A conversation orchestrate holds with a child over its stdin: what the talking dialect
/// needs to hold up its side (what it sends first, how it answers the child's requests).
/// One variant per protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Talk {
    /// The Agent Client Protocol (JSON-RPC over stdio).
    Acp(Box<acp::Conversation>),
    /// pi's RPC mode: the prompt, then messages sent to the run, as commands on stdin.
    PiRpc { prompt: String },
    /// claude's streamed input (`--input-format stream-json`): the prompt, then messages
    /// sent to the run, as user messages on stdin; claude's permission requests are
    /// answered by `policy`.
    ClaudeStream {
        prompt: String,
        policy: Box<permissions::PermissionPolicy>,
    },
}

impl Talk {
    fn dialect(&self) -> Box<dyn Dialect> {
        match self {
            Talk::Acp(conv) => Talk::acp_dialect(conv),
            Talk::PiRpc { prompt } => Box::new(pi::PiRpcDialect::new(prompt.clone())),
            Talk::ClaudeStream { prompt, policy } => Box::new(claude::ClaudeStreamDialect::new(
                prompt.clone(),
                (**policy).clone(),
            )),
        }
    }

    /// Whether the child asks orchestrate's permission for its tools.
    pub(crate) fn asks_permissions(&self) -> bool {
        matches!(self, Talk::Acp(_) | Talk::ClaudeStream { .. })
    }
}

/// Parses one CLI's JSONL stream into normalized events, and, for a CLI orchestrate talks
/// to (a protocol over stdio), writes orchestrate's requests and replies: such a dialect
/// keeps the conversation's state and writes through the [`ChildInput`] it is given.
pub trait Dialect: Send {
    /// Parses one line. Returns false when the line is not a JSON object this dialect
    /// recognizes as an event (the caller counts it as skipped). Unknown event types are
    /// valid lines that emit nothing.
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool;

    /// Reads one line of the child's stderr, for CLIs that say only there that they are
    /// retrying their provider (`AgentEvent::Retry`). Stderr is never the answer.
    fn parse_stderr_line(&mut self, _line: &str, _emit: &mut dyn FnMut(AgentEvent<'_>)) {}

    /// For a dialect that talks to its child: called once, before the child starts, with
    /// the handle on its stdin. What it queues at once (a handshake) is written as soon as
    /// the child runs; later requests and replies are written from `parse_line`.
    fn attach(&mut self, _input: ChildInput) {}

    /// A graceful stop begins (a timeout, a budget, a cancel, a signal): writes the
    /// protocol's own cancel when there is work under way to cancel, and says whether it
    /// did. The supervisor then gives the child the kill grace to end its turn (its
    /// final event) before SIGTERM; false means SIGTERM at once.
    fn cancel(&mut self) -> bool {
        false
    }

    /// For a dialect whose child can take a message while it runs (`orchestrate send`):
    /// given the run's mailbox once it is attached, and says whether it listens. One that
    /// listens takes messages from it ([`Dialect::check_mail`], and whenever its protocol
    /// gives a moment to) and records how each was delivered; one that does not leaves them
    /// to the run, which continues the child's session with them once its turn ended.
    fn listen(&mut self, _inbox: Box<dyn Inbox>) -> bool {
        false
    }

    /// Called while the child runs, every 200 ms (the supervisor's `MAIL_CHECK_INTERVAL`),
    /// for a dialect that listens: takes what was sent and hands it to the child (or holds it for
    /// the end of the turn).
    fn check_mail(&mut self) {}
}

/// The run's inbox as a dialect that listens sees it (`live::inbox::Mailbox` is the one a
/// run gives): it takes what was sent as held messages, writes them to the child, and
/// records how far each got, for the run's result.
pub trait Inbox: Send {
    /// Takes what was sent since the last look (cheap when nothing was).
    fn collect(&self) -> Collected;
    /// The held messages' texts, in order, now written to the child as `delivery` says.
    fn write_held(&self, delivery: Delivery) -> Vec<String>;
    /// The child answered the turn that carried what was written to it.
    fn answered(&self);
    /// The child gave back messages written to it and not delivered: held again.
    fn take_back(&self, texts: &[String]);
    /// Messages written to the child reached it otherwise than they were written for
    /// (claude runs a message written during a turn without tool calls as a turn of its
    /// own): their delivery, corrected.
    fn delivered_as(&self, texts: &[String], delivery: Delivery);
}

/// What one look in the inbox found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Collected {
    pub new: usize,
    pub interrupt: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("unknown backend {0:?} (available: auto, {list})", list = backend_names().join(", "))]
    Unknown(String),
    #[error("unknown dialect {0:?} (available: {list})", list = dialect_names().join(", "))]
    UnknownDialect(String),
    #[error("failed to write the prompt file {path}: {source}")]
    PromptFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the command backend needs {0}")]
    Command(String),
    #[error("cannot resume: {0}")]
    Resume(String),
}

fn backend_names() -> Vec<&'static str> {
    Backend::all().map(Backend::name).collect()
}

fn dialect_names() -> Vec<&'static str> {
    Backend::dialects().map(Backend::name).collect()
}

/// Everything that differs between child CLIs, declared by each backend's own file as its
/// `BACKEND`. Adding a backend is its file plus its `mod` line and its entry in
/// [`BACKENDS`] (a test checks that every file is in it, and an unlisted `BACKEND` is dead
/// code).
pub struct BackendSpec {
    pub name: &'static str,
    /// Other names accepted for it (`claude-code`, `cursor-agent`).
    pub aliases: &'static [&'static str],
    /// The program looked up on PATH unless `ORCHESTRATE_<NAME>_BIN` says otherwise;
    /// empty when the agent names it (the `command` backend).
    pub program: &'static str,
    pub install_hint: &'static str,
    /// Whether `auto` may pick it (in the order of [`BACKENDS`]).
    pub auto: bool,
    /// Whether it can continue an earlier run's session (`run --resume`, and the repair
    /// turn of a structured answer).
    pub resumes: bool,
    /// Which totals it reports for a resumed session are the whole session's.
    pub resumed_totals: SessionTotals,
    /// How it is asked for an answer matching an output schema.
    pub output_schema: SchemaRoute,
    pub build: fn(OsString, &InvocationInput<'_>) -> Result<Invocation, BackendError>,
    /// How its stdout is read; `None` for the command backend, whose agent names another
    /// backend's.
    pub dialect: Option<DialectSpec>,
    /// What the CLI's own exit code means, where it documents one.
    pub explain_exit: fn(i32) -> Option<&'static str>,
    /// Exit codes that by themselves say the provider failed transiently.
    pub transient_exit: fn(i32) -> Option<Transient>,
    /// The provider its model requests go to, when the model does not name one
    /// (`provider/model`): where a fan-out's scheduler groups children that share a rate
    /// limit.
    pub provider: Option<&'static str>,
    /// Where the CLI keeps its state, and what its child may do there (see
    /// [`crate::sandbox::CliHome`]), found by running the real CLI under the sandbox.
    /// `None`: not verified, so no sandbox by default.
    pub home: Option<fn(&ChildEnv<'_>) -> CliHome>,
    /// The hosts its CLI reaches its model at, which `network: provider` lets the child
    /// through to: the provider's API hosts (found with the real CLI), and the base URLs
    /// the user configured in its environment or config files.
    pub provider_hosts: fn(&provider::ProviderQuery<'_>) -> Vec<provider::ProviderHost>,
}

/// A CLI's stream: its parser, and what it reports.
pub struct DialectSpec {
    pub parser: fn() -> Box<dyn Dialect>,
    /// orchestrate holds a conversation with the child over its stdin (ACP): not a
    /// dialect the command backend can name, whose child's stdin is /dev/null.
    pub talks: bool,
    pub reports: Reports,
}

/// What a CLI's stream reports while it runs. A CLI that reports no cost cannot be held to
/// a cost budget, and one that reports its usage only when it finishes cannot be stopped
/// early by a token budget (turns are counted from every stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reports {
    /// Its cost, or it keeps to a cost budget itself (claude's `--max-budget-usd`).
    pub cost: bool,
    /// Its token usage as it goes, not only at the end.
    pub usage_while_running: bool,
}

/// Which of the totals a CLI reports when it continues a session (`--resume`, a repair
/// turn) cover the whole session, the earlier runs' included, rather than this run alone.
/// Observed against the mock: claude 2.1.332's `total_cost_usd` (its `usage` and
/// `num_turns` are the run's own); codex 0.171.0's token counts in `turn.completed`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionTotals {
    pub tokens: bool,
    pub cost: bool,
}

impl SessionTotals {
    /// Only this run's own totals.
    pub const NONE: SessionTotals = SessionTotals {
        tokens: false,
        cost: false,
    };

    /// The usage of two runs of one session, `later` continuing `earlier`: each total
    /// the later run reported for the whole session is taken as it is, the others added.
    pub fn combine(self, earlier: &Usage, later: &Usage) -> Usage {
        let mut sum = *later;
        if !self.tokens {
            sum.input = sum.input.saturating_add(earlier.input);
            sum.output = sum.output.saturating_add(earlier.output);
            sum.cache_read = sum.cache_read.saturating_add(earlier.cache_read);
            sum.cache_write = sum.cache_write.saturating_add(earlier.cache_write);
        }
        if !self.cost {
            sum.cost = crate::result::add_usd(sum.cost, earlier.cost);
        }
        sum.turns = sum.turns.saturating_add(earlier.turns);
        sum
    }
}

/// How a CLI is asked for one JSON value matching an output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaRoute {
    /// Its own option (claude `--json-schema`, codex `--output-schema`), which its build
    /// passes from [`InvocationInput::output_schema`]. Only for an object schema (root
    /// `"type": "object"`): the providers' structured output takes no other; any other
    /// schema goes through the prompt.
    Option,
    /// A request after the task in the prompt.
    Prompt,
}

/// For CLIs whose exit codes say nothing beyond success or failure.
pub(crate) fn no_exit_meaning(_code: i32) -> Option<&'static str> {
    None
}

pub(crate) fn no_transient_exit(_code: i32) -> Option<Transient> {
    None
}

/// Every backend, in the order `auto` tries those it may pick.
pub(crate) static BACKENDS: &[&BackendSpec] = &[
    &claude::BACKEND,
    &pi::BACKEND,
    &codex::BACKEND,
    &gemini::BACKEND,
    &opencode::BACKEND,
    &cursor::BACKEND,
    &command::BACKEND,
    &acp::BACKEND,
    &acp::GEMINI,
    &acp::OPENCODE,
    &acp::CLAUDE,
    &acp::CODEX,
    &acp::PI,
    &acp::QWEN,
];

/// A child CLI orchestrate can drive: its [`BackendSpec`] in [`BACKENDS`]. As the name
/// of a dialect (an agent's `dialect:`, an invocation's), a backend whose CLI's stream
/// orchestrate reads.
#[derive(Clone, Copy)]
pub struct Backend(&'static BackendSpec);

impl PartialEq for Backend {
    fn eq(&self, other: &Backend) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Backend {}

impl std::hash::Hash for Backend {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend({})", self.0.name)
    }
}

/// A backend as an agent file, a flag or a config names it: one CLI, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The first installed CLI of [`Backend::auto_order`].
    Auto,
    Named(Backend),
}

impl BackendChoice {
    pub fn parse(name: &str) -> Result<BackendChoice, BackendError> {
        match name.trim() {
            "auto" => Ok(BackendChoice::Auto),
            other => Backend::parse(other).map(BackendChoice::Named),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Named(b) => b.name(),
        }
    }

    /// `auto` becomes the first installed CLI, or `None` when there is none.
    pub fn select(self) -> Selection {
        match self {
            BackendChoice::Named(backend) => Selection {
                backend,
                auto: false,
                installed: backend.is_installed(),
            },
            BackendChoice::Auto => {
                let found = Backend::auto_order().find(|b| b.is_installed());
                Selection {
                    backend: found.unwrap_or_else(|| {
                        Backend::auto_order()
                            .next()
                            .expect("auto picks some backend")
                    }),
                    auto: true,
                    installed: found.is_some(),
                }
            }
        }
    }
}

impl std::fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a backend was chosen, for the result and for `orchestrate agents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub backend: Backend,
    /// `auto` picked it (or found nothing installed and fell back to the first choice).
    pub auto: bool,
    pub installed: bool,
}

impl Backend {
    /// Every backend, in the registry's order.
    pub fn all() -> impl Iterator<Item = Backend> {
        BACKENDS.iter().map(|spec| Backend(spec))
    }

    /// The backends `auto` tries, in order.
    pub fn auto_order() -> impl Iterator<Item = Backend> {
        Backend::all().filter(|b| b.0.auto)
    }

    /// The backends whose stream orchestrate reads (and only reads): the dialects.
    pub fn dialects() -> impl Iterator<Item = Backend> {
        Backend::all().filter(|b| b.0.dialect.as_ref().is_some_and(|d| !d.talks))
    }

    pub fn spec(self) -> &'static BackendSpec {
        self.0
    }

    pub fn parse(name: &str) -> Result<Backend, BackendError> {
        let name = name.trim();
        Backend::all()
            .find(|b| b.spec().name == name || b.spec().aliases.contains(&name))
            .ok_or_else(|| BackendError::Unknown(name.to_string()))
    }

    /// The dialect named `name`: a backend's name whose stream orchestrate reads.
    pub fn parse_dialect(name: &str) -> Result<Backend, BackendError> {
        let name = name.trim();
        Backend::dialects()
            .find(|b| b.name() == name)
            .ok_or_else(|| BackendError::UnknownDialect(name.to_string()))
    }

    /// This dialect's stream. Every invocation names a backend that has one (its own, or
    /// for the command backend one that [`Backend::parse_dialect`] found).
    fn stream(self) -> &'static DialectSpec {
        self.0
            .dialect
            .as_ref()
            .expect("an invocation's dialect is a backend with a stream")
    }

    /// A parser of this dialect's stream.
    pub fn parser(self) -> Box<dyn Dialect> {
        (self.stream().parser)()
    }

    /// What this dialect's stream reports while the child runs.
    pub(crate) fn reports(self) -> Reports {
        self.stream().reports
    }

    /// Budgets this dialect's stream cannot enforce, said out loud in the result.
    pub(crate) fn budget_warnings(self, budgets: &crate::limits::Budgets) -> Vec<String> {
        let reports = self.stream().reports;
        let mut out = Vec::new();
        if budgets.max_cost.is_some() && !reports.cost {
            out.push(format!(
                "{self} reports no cost: the cost budget cannot be enforced"
            ));
        }
        if budgets.max_tokens.is_some() && !reports.usage_while_running {
            out.push(format!(
                "{self} reports its token usage only when it finishes: the token budget cannot stop it early"
            ));
        }
        out
    }

    /// The backend called `name`, for tests.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> Backend {
        Backend::parse(name).expect("a backend's name")
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The program to run: `ORCHESTRATE_<NAME>_BIN` when set (a custom install, or a
    /// test double), else the CLI's usual name looked up on PATH.
    pub fn program(self) -> OsString {
        let var = format!(
            "ORCHESTRATE_{}_BIN",
            self.name().to_ascii_uppercase().replace('-', "_")
        );
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| OsString::from(self.spec().program))
    }

    pub fn is_installed(self) -> bool {
        !self.0.program.is_empty() && find_program(&self.program()).is_some()
    }

    pub fn install_hint(self) -> &'static str {
        self.spec().install_hint
    }

    pub fn build(self, input: &InvocationInput<'_>) -> Result<Invocation, BackendError> {
        let spec = self.spec();
        if input.resume.is_some() && !spec.resumes {
            let able: Vec<&str> = Backend::all()
                .filter(|b| b.spec().resumes)
                .map(|b| b.name())
                .collect();
            let (last, rest) = able.split_last().expect("some backends resume");
            return Err(BackendError::Resume(format!(
                "the {} backend cannot continue an earlier session ({} and {last} can)",
                spec.name,
                rest.join(", ")
            )));
        }
        (spec.build)(self.program(), input)
    }

    /// What the sandbox must know of this CLI, and of the others (whose logins its child
    /// must not read).
    pub(crate) fn sandbox_needs(self) -> crate::sandbox::CliNeeds {
        crate::sandbox::CliNeeds {
            name: self.name(),
            home: self.spec().home,
            others: Backend::all()
                .filter(|b| *b != self)
                .filter_map(|b| b.spec().home)
                .collect(),
        }
    }

    pub fn explain_exit(self, code: i32) -> Option<&'static str> {
        (self.spec().explain_exit)(code)
    }

    /// Whether this CLI takes `schema` through its own option rather than the prompt.
    pub fn takes_output_schema(self, schema: &OutputSchema) -> bool {
        self.spec().output_schema == SchemaRoute::Option && schema.is_object_schema()
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Writes a prompt file with owner-only permissions.
pub(crate) fn write_prompt_file(path: &Path, text: &str) -> Result<(), BackendError> {
    crate::session::write_private_file(path, text.as_bytes()).map_err(|source| {
        BackendError::PromptFile {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Text the child printed as JSON strings (`parts`, joined by `separator`), as the event
/// of `kind`: unescaped whole when short, handed over raw as a `LongText` when any part
/// is long (a megabyte string unescaped whole would cost its size twice more).
pub(crate) fn text_event<'a>(
    parts: Vec<&'a RawValue>,
    separator: &'static str,
    kind: TextKind,
) -> AgentEvent<'a> {
    if parts.iter().any(|p| crate::collector::is_long_text(p)) {
        return AgentEvent::LongText {
            parts,
            separator,
            kind,
        };
    }
    let text: Cow<'a, str> = match parts.as_slice() {
        [one] => json_str(one),
        many => Cow::Owned(
            many.iter()
                .map(|p| json_str(p))
                .collect::<Vec<_>>()
                .join(separator),
        ),
    };
    match kind {
        TextKind::Delta => AgentEvent::TextDelta(text),
        TextKind::Message => AgentEvent::AssistantMessage(text),
        TextKind::Final => AgentEvent::FinalText(text),
    }
}

/// The event's type, when the line starts with it as pi and claude write their events
/// (`{"type":"…",`); None when it does not (the line is then read whole).
pub(crate) fn leading_type(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("{\"type\":\"")?;
    let kind = &rest[..rest.find('"')?];
    (!kind.contains('\\')).then_some(kind)
}

/// A JSON string's text ("" when it is not a string).
pub(crate) fn json_str(raw: &RawValue) -> Cow<'_, str> {
    serde_json::from_str(raw.get()).unwrap_or_default()
}

/// A JSON string's text for a message (an error, a reason): at most its first 64 KiB
/// when it is long, never unescaped whole.
pub(crate) fn short_text(raw: &RawValue) -> Cow<'_, str> {
    if !crate::collector::is_long_text(raw) {
        return json_str(raw);
    }
    let mut out = String::new();
    crate::collector::unescape_in_pieces(raw.get(), &mut |piece| {
        if out.len() < 64 * 1024 {
            out.push_str(piece);
        }
    });
    Cow::Owned(out)
}

/// Whether a JSON string is empty.
pub(crate) fn is_empty_json_str(raw: &RawValue) -> bool {
    raw.get() == "\"\""
}

/// Parses a JSON line into `T`, or None when it is not one (counted as skipped).
pub(crate) fn parse_json<'a, T: serde::Deserialize<'a>>(line: &'a str) -> Option<T> {
    serde_json::from_str(line).ok()
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::collector::Collector;

    pub(crate) fn agent(tools: &[&str], readonly: bool, prompt: &str) -> AgentBrief {
        AgentBrief {
            name: "t".into(),
            source: "/x/t.md".into(),
            tools: tools.iter().map(|t| tools::Tool::parse(t)).collect(),
            readonly,
            system_prompt: prompt.into(),
            command: None,
            dialect: None,
            acp_command: None,
        }
    }

    /// Runs `lines` through `dialect` and returns the collector and the skipped count.
    pub(crate) fn collect(kind: Backend, lines: &[&str]) -> (Collector, u64) {
        let mut d = kind.parser();
        let mut c = Collector::new();
        let mut skipped = 0;
        for l in lines {
            if !d.parse_line(l, &mut |e| {
                c.apply(e);
            }) {
                skipped += 1;
            }
        }
        (c, skipped)
    }

    /// Everything a result reads from a collector, as JSON, for whole-object comparison
    /// with a fixture's `.expected.json`.
    fn snapshot(c: &Collector, skipped: u64) -> serde_json::Value {
        let mut v = serde_json::json!({
            "usage": c.usage(),
            "finalText": c.final_text(),
            "partialText": c.partial_text(),
            "sessionId": c.session_id(),
            "terminal": c.terminal_seen(),
            "providerError": c.provider_error(),
            "displayItems": c.display_items(),
            "skippedLines": skipped,
            // How the supervisor reads the stream: progress keeps the child alive, tools in
            // flight suspend the idle limit, retries are noise.
            "progress": c.progress(),
            "toolsInFlight": c.tools_in_flight(),
            "toolsEnded": c.tools_ended(),
            "retries": c.retries(),
            "lastRetry": c.last_retry(),
        });
        // Fields that could not be used, as the result's warnings say them (only where
        // there are some).
        let odd: Vec<String> = c
            .odd_fields()
            .iter()
            .map(|o| {
                format!(
                    "{}: {} ({}); {}",
                    o.field,
                    o.problem,
                    o.times,
                    o.problem.consequence()
                )
            })
            .collect();
        if !odd.is_empty() {
            v["oddFields"] = serde_json::json!(odd);
        }
        v
    }

    /// Every `tests/fixtures/<dialect>/*.jsonl` through its dialect gives what its
    /// `.expected.json` says; `ORCHESTRATE_BLESS=1` rewrites those files instead.
    #[test]
    fn every_fixture_gives_its_expected_result() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let bless = std::env::var_os("ORCHESTRATE_BLESS").is_some();
        let mut checked = 0;
        for kind in Backend::dialects() {
            let dir = root.join(kind.name());
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            files.sort();
            for file in files {
                let text = std::fs::read_to_string(&file).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                let (c, skipped) = collect(kind, &lines);
                let got = snapshot(&c, skipped);
                let expected_file = file.with_extension("expected.json");
                if bless {
                    let pretty = serde_json::to_string_pretty(&got).unwrap() + "\n";
                    std::fs::write(&expected_file, pretty).unwrap();
                }
                let want: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(&expected_file)
                        .unwrap_or_else(|e| panic!("{}: {e}", expected_file.display())),
                )
                .unwrap();
                pretty_assertions::assert_eq!(got, want, "{}", file.display());
                checked += 1;
            }
        }
        assert!(checked >= 18, "only {checked} fixtures found");
    }

    /// In every dialect a turn budget is reached where the child goes on past it, never by
    /// its final answer: each fixture of a successful run of several turns stays within a
    /// budget of its turns, and passes one of a turn fewer.
    #[test]
    fn every_dialect_reaches_a_turn_budget_only_when_the_child_goes_on() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut checked = Vec::new();
        for kind in Backend::dialects() {
            let Ok(entries) = std::fs::read_dir(root.join(kind.name())) else {
                continue;
            };
            for file in entries.map(|e| e.unwrap().path()) {
                if file.extension().is_none_or(|e| e != "jsonl") {
                    continue;
                }
                let text = std::fs::read_to_string(&file).unwrap();
                let lines: Vec<&str> = text.lines().collect();
                let (whole, _) = collect(kind, &lines);
                let turns = whole.usage().turns;
                if whole.provider_error().is_some() || !whole.terminal_seen() || turns < 2 {
                    continue;
                }
                let run = |max_turns: u64| {
                    let mut d = kind.parser();
                    let mut c = Collector::new().with_budgets(crate::limits::Budgets {
                        max_turns: Some(max_turns),
                        ..Default::default()
                    });
                    for l in &lines {
                        d.parse_line(l, &mut |e| {
                            c.apply(e);
                        });
                    }
                    c.limit()
                };
                let name = file.display().to_string();
                assert_eq!(
                    run(turns),
                    None,
                    "{name}: the final answer is not cut short"
                );
                assert_eq!(
                    run(turns - 1),
                    Some(crate::result::Limit::Turns {
                        limit: turns - 1,
                        used: turns - 1
                    }),
                    "{name}: going on past the budget reaches it"
                );
                checked.push(name);
            }
        }
        assert!(checked.len() >= 7, "{checked:#?}");
    }

    /// A backend is one file: each file of this folder that declares a `BACKEND` is in the
    /// registry under its own name (a file whose `mod` line or registry entry is missing
    /// would be silently unused), and every name and alias is one backend's alone.
    #[test]
    fn every_backend_file_is_in_the_registry_under_its_name() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backends");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().is_some_and(|n| n != "mod.rs"))
            // A backend with a folder of its own declares it in the folder's mod.rs.
            .filter(|p| {
                let file = if p.is_dir() {
                    p.join("mod.rs")
                } else {
                    p.clone()
                };
                std::fs::read_to_string(file)
                    .unwrap()
                    .contains("static BACKEND: BackendSpec")
            })
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        files.sort();
        // The ACP presets are declared beside the `acp` backend, each in the registry.
        let preset = |b: &Backend| acp::PRESETS.iter().any(|p| p.name == b.name());
        assert_eq!(Backend::all().filter(preset).count(), acp::PRESETS.len());
        let mut registered: Vec<String> = Backend::all()
            .filter(|b| !preset(b))
            .map(|b| b.name().to_string())
            .collect();
        registered.sort();
        assert_eq!(files, registered);
        let mut names: Vec<&str> = BACKENDS
            .iter()
            .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
            .collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a name or alias used twice: {names:?}");
        assert!(Backend::auto_order().count() >= 1);
        assert!(Backend::auto_order().all(|b| !b.spec().program.is_empty()));
    }

    /// The retry notices a dialect reads in `stderr` lines, as the collector keeps them.
    pub(crate) fn stderr_retries(kind: Backend, stderr: &[&str]) -> (u64, Option<String>) {
        let mut d = kind.parser();
        let mut c = Collector::new();
        for l in stderr {
            d.parse_stderr_line(l, &mut |e| {
                c.apply(e);
            });
        }
        (c.retries(), c.last_retry().map(str::to_string))
    }

    #[test]
    fn gemini_and_opencode_say_on_stderr_that_they_retry() {
        let gemini = [
            "YOLO mode is enabled. All tool calls will be automatically approved.",
            "Attempt 1 failed. Retrying with backoff... Error: exception TypeError: fetch failed sending request",
            "    at file:///x/bundle/chunk.js:267671:13",
            "Attempt 2 failed with status 503. Retrying with backoff... _ApiError: {\"error\":{\"code\":503}}",
            "  status: 503",
        ];
        assert_eq!(
            stderr_retries(Backend::named("gemini"), &gemini),
            (
                2,
                Some("Attempt 2 failed with status 503. Retrying with backoff... _ApiError: {\"error\":{\"code\":503}}".into())
            )
        );
        let opencode = [
            r#"timestamp=2026-11-30T12:57:38.175Z level=INFO run=4 message=stream providerID=mock modelID=mock-model"#,
            r#"timestamp=2026-11-30T12:57:38.218Z level=ERROR run=4 message="stream error" providerID=mock small=false error.error="AI_APICallError: Cannot connect to API: Unable to connect.""#,
        ];
        assert_eq!(
            stderr_retries(Backend::named("opencode"), &opencode),
            (
                1,
                Some("AI_APICallError: Cannot connect to API: Unable to connect.".into())
            )
        );
        // The others read nothing there.
        assert_eq!(stderr_retries(Backend::named("pi"), &gemini), (0, None));
    }

    #[test]
    fn a_continued_sessions_totals_are_taken_or_added_as_the_cli_reports_them() {
        let earlier = Usage {
            input: 100,
            output: 10,
            cache_read: 1,
            cache_write: 2,
            cost: 0.5,
            turns: 2,
        };
        // What each CLI reports for the later run: its own numbers, or the session's.
        let own = Usage {
            input: 500,
            output: 50,
            cache_read: 5,
            cache_write: 6,
            cost: 1.0,
            turns: 1,
        };
        let session = Usage {
            input: 600,
            output: 60,
            cache_read: 6,
            cache_write: 8,
            cost: 1.5,
            turns: 1,
        };
        let whole = Usage {
            turns: 3,
            ..session
        };
        assert_eq!(SessionTotals::NONE.combine(&earlier, &own), whole);
        let claude = Backend::named("claude").spec().resumed_totals;
        assert_eq!(claude.combine(&earlier, &Usage { cost: 1.5, ..own }), whole);
        let codex = Backend::named("codex").spec().resumed_totals;
        assert_eq!(
            codex.combine(
                &earlier,
                &Usage {
                    cost: 1.0,
                    ..session
                }
            ),
            whole
        );
    }

    pub(crate) fn args(inv: &Invocation) -> Vec<String> {
        inv.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
}
