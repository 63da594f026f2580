//! Backends: one file per child CLI, each owning its command line and its JSONL dialect.
//!
//! A backend turns an agent and a task into an [`Invocation`] (program, arguments, extra
//! environment, prompt files, and warnings for restrictions the CLI cannot express), and
//! names the [`DialectKind`] its stdout speaks. Dialects turn lines into normalized
//! [`AgentEvent`]s.

pub mod claude;
pub mod codex;
pub mod command;
pub mod cursor;
pub mod gemini;
pub mod opencode;
pub mod pi;
pub mod tools;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::agents::AgentDef;
use crate::events::AgentEvent;

/// Everything a backend needs to build the child's command line.
#[derive(Debug, Clone)]
pub struct InvocationInput<'a> {
    pub agent: &'a AgentDef,
    pub task: &'a str,
    pub model: Option<&'a str>,
    /// The run folder: prompt files the command line refers to are written here.
    pub run_dir: &'a Path,
    /// Continue the child's own session from an earlier run instead of starting anew.
    pub resume: Option<&'a ResumeFrom>,
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
        self.model.or(self.agent.model.as_deref())
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
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Prompt files written into the run folder (kept with the session).
    pub prompt_files: Vec<PathBuf>,
    /// Restrictions of the agent this CLI cannot express, said out loud in the result.
    pub warnings: Vec<String>,
    pub dialect: DialectKind,
}

impl Invocation {
    pub fn new(program: OsString, dialect: DialectKind) -> Self {
        Invocation {
            program,
            args: Vec::new(),
            env: Vec::new(),
            prompt_files: Vec::new(),
            warnings: Vec::new(),
            dialect,
        }
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

/// Parses one CLI's JSONL stream into normalized events.
pub trait Dialect: Send {
    /// Parses one line. Returns false when the line is not a JSON object this dialect
    /// recognizes as an event (the caller counts it as skipped). Unknown event types are
    /// valid lines that emit nothing.
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool;
}

/// The JSONL dialects orchestrate reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialectKind {
    Pi,
    Claude,
    Codex,
    Gemini,
    Opencode,
    Cursor,
}

impl DialectKind {
    pub const NAMES: &'static [&'static str] =
        &["pi", "claude", "codex", "gemini", "opencode", "cursor"];

    pub fn from_name(name: &str) -> Option<DialectKind> {
        Some(match name {
            "pi" => DialectKind::Pi,
            "claude" => DialectKind::Claude,
            "codex" => DialectKind::Codex,
            "gemini" => DialectKind::Gemini,
            "opencode" => DialectKind::Opencode,
            "cursor" => DialectKind::Cursor,
            _ => return None,
        })
    }

    pub fn parser(self) -> Box<dyn Dialect> {
        match self {
            DialectKind::Pi => Box::new(pi::PiDialect),
            DialectKind::Claude => Box::<claude::ClaudeDialect>::default(),
            DialectKind::Codex => Box::<codex::CodexDialect>::default(),
            DialectKind::Gemini => Box::<gemini::GeminiDialect>::default(),
            DialectKind::Opencode => Box::<opencode::OpencodeDialect>::default(),
            DialectKind::Cursor => Box::<cursor::CursorDialect>::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("unknown backend {0:?} (available: auto, {list})", list = BACKEND_NAMES.join(", "))]
    Unknown(String),
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

pub const BACKEND_NAMES: &[&str] = &[
    "claude", "pi", "codex", "gemini", "opencode", "cursor", "command",
];

/// The child CLIs orchestrate can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Claude,
    Pi,
    Codex,
    Gemini,
    Opencode,
    Cursor,
    /// Any other CLI, from a command template and one of the dialects above.
    Command,
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
    /// The order `auto` tries.
    pub const AUTO_ORDER: [Backend; 6] = [
        Backend::Claude,
        Backend::Pi,
        Backend::Codex,
        Backend::Gemini,
        Backend::Opencode,
        Backend::Cursor,
    ];

    pub fn from_name(name: &str) -> Result<Backend, BackendError> {
        Ok(match name {
            "claude" | "claude-code" => Backend::Claude,
            "pi" => Backend::Pi,
            "codex" => Backend::Codex,
            "gemini" => Backend::Gemini,
            "opencode" => Backend::Opencode,
            "cursor" | "cursor-agent" => Backend::Cursor,
            "command" => Backend::Command,
            other => return Err(BackendError::Unknown(other.to_string())),
        })
    }

    /// `auto` is the first installed CLI in [`Backend::AUTO_ORDER`].
    pub fn select(name: &str) -> Result<Selection, BackendError> {
        if name != "auto" {
            let backend = Backend::from_name(name)?;
            return Ok(Selection {
                backend,
                auto: false,
                installed: backend.is_installed(),
            });
        }
        let found = Backend::AUTO_ORDER.into_iter().find(|b| b.is_installed());
        Ok(Selection {
            backend: found.unwrap_or(Backend::AUTO_ORDER[0]),
            auto: true,
            installed: found.is_some(),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Claude => "claude",
            Backend::Pi => "pi",
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Opencode => "opencode",
            Backend::Cursor => "cursor",
            Backend::Command => "command",
        }
    }

    fn default_program(self) -> &'static str {
        match self {
            Backend::Claude => "claude",
            Backend::Pi => "pi",
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Opencode => "opencode",
            Backend::Cursor => "cursor-agent",
            Backend::Command => "",
        }
    }

    /// The program to run: `ORCHESTRATE_<NAME>_BIN` when set (a custom install, or a
    /// test double), else the CLI's usual name looked up on PATH.
    pub fn program(self) -> OsString {
        let var = format!("ORCHESTRATE_{}_BIN", self.name().to_ascii_uppercase());
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| OsString::from(self.default_program()))
    }

    pub fn is_installed(self) -> bool {
        self != Backend::Command && find_program(&self.program()).is_some()
    }

    pub fn install_hint(self) -> &'static str {
        match self {
            Backend::Claude => "install it with `npm install -g @anthropic-ai/claude-code`",
            Backend::Pi => {
                "install it with `npm install -g @earendil-works/pi-coding-agent` (node >= 22.19; \
                 `@mariozechner/pi-coding-agent` for node 20), then log in with `pi` once"
            }
            Backend::Codex => "install it with `npm install -g @openai/codex`",
            Backend::Gemini => "install it with `npm install -g @google/gemini-cli`",
            Backend::Opencode => "install it with `npm install -g opencode-ai`",
            Backend::Cursor => "install it with `curl https://cursor.com/install -fsS | bash`",
            Backend::Command => "check the agent's `command:` template",
        }
    }

    pub fn build(self, input: &InvocationInput<'_>) -> Result<Invocation, BackendError> {
        let program = self.program();
        if input.resume.is_some() && !matches!(self, Backend::Pi | Backend::Claude | Backend::Codex)
        {
            return Err(BackendError::Resume(format!(
                "the {} backend cannot continue an earlier session (pi, claude and codex can)",
                self.name()
            )));
        }
        match self {
            Backend::Claude => claude::build(program, input),
            Backend::Pi => pi::build(program, input),
            Backend::Codex => codex::build(program, input),
            Backend::Gemini => gemini::build(program, input),
            Backend::Opencode => opencode::build(program, input),
            Backend::Cursor => cursor::build(program, input),
            Backend::Command => command::build(input),
        }
    }

    /// What a CLI's own exit code means, where it documents one.
    pub fn explain_exit(self, code: i32) -> Option<&'static str> {
        match self {
            Backend::Gemini => gemini::explain_exit(code),
            _ => None,
        }
    }
}

/// Looks a program up like `execvp` would: a path with a slash as is, else on PATH.
pub fn find_program(program: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let as_path = Path::new(program);
    if program.is_empty() {
        return None;
    }
    if as_path.components().count() > 1 {
        return executable(as_path).then(|| as_path.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
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

/// Parses a JSON line into `T`, or None when it is not one (counted as skipped).
pub(crate) fn parse_json<'a, T: serde::Deserialize<'a>>(line: &'a str) -> Option<T> {
    serde_json::from_str(line).ok()
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::collector::Collector;

    pub fn agent(tools: &[&str], readonly: bool, prompt: &str) -> AgentDef {
        let text = format!(
            "---\nname: t\ndescription: d\ntools: [{}]\nreadonly: {readonly}\n---\n{prompt}\n",
            tools.join(", ")
        );
        crate::agents::parse_agent_file(&text, Path::new("/x/t.md"), crate::agents::Scope::User)
            .expect("valid agent")
    }

    /// Runs `lines` through `dialect` and returns the collector and the skipped count.
    pub fn collect(kind: DialectKind, lines: &[&str]) -> (Collector, u64) {
        let mut d = kind.parser();
        let mut c = Collector::new();
        let mut skipped = 0;
        for l in lines {
            if !d.parse_line(l, &mut |e| c.apply(e)) {
                skipped += 1;
            }
        }
        (c, skipped)
    }

    /// Reads a fixture transcript from `tests/fixtures/<dialect>/<name>`.
    pub fn fixture(dialect: &str, name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(dialect)
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Runs the fixture `tests/fixtures/<dialect>/<name>` through that dialect, asserting
    /// that every line was a usable event.
    pub fn run_fixture(kind: DialectKind, dialect: &str, name: &str) -> Collector {
        let text = fixture(dialect, name);
        let lines: Vec<&str> = text.lines().collect();
        let (c, skipped) = collect(kind, &lines);
        assert_eq!(skipped, 0, "{dialect}/{name}: every line is an event");
        c
    }

    pub fn args(inv: &Invocation) -> Vec<String> {
        inv.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }
}
