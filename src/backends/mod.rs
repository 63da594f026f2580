//! Backends: one file per child CLI, each owning its command line and its JSONL dialect.

pub mod pi;

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
}

/// A built command line and the files it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    /// Prompt files written into the run folder (kept with the session).
    pub prompt_files: Vec<PathBuf>,
}

/// Parses one CLI's JSONL stream into normalized events.
pub trait Dialect: Send {
    /// Parses one line. Returns false when the line is not a JSON object (the caller
    /// counts it as skipped). Unknown event types are valid lines that emit nothing.
    fn parse_line(&mut self, line: &str, emit: &mut dyn FnMut(AgentEvent<'_>)) -> bool;
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("unknown backend {0:?} (available: {list})", list = BACKEND_NAMES.join(", "))]
    Unknown(String),
    #[error("failed to write the prompt file {path}: {source}")]
    PromptFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub const BACKEND_NAMES: &[&str] = &["pi"];

/// The child CLIs orchestrate can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Pi,
}

impl Backend {
    pub fn from_name(name: &str) -> Result<Backend, BackendError> {
        match name {
            "pi" | "auto" => Ok(Backend::Pi),
            other => Err(BackendError::Unknown(other.to_string())),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Pi => "pi",
        }
    }

    /// The program to run: `ORCHESTRATE_<NAME>_BIN` when set (a custom install, or a
    /// test double), else the CLI's usual name looked up on PATH.
    pub fn program(self) -> OsString {
        let var = format!("ORCHESTRATE_{}_BIN", self.name().to_ascii_uppercase());
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| match self {
                Backend::Pi => OsString::from("pi"),
            })
    }

    pub fn install_hint(self) -> &'static str {
        match self {
            Backend::Pi => {
                "install it with `npm install -g @earendil-works/pi-coding-agent` (node >= 22.19; \
                 `@mariozechner/pi-coding-agent` for node 20), then log in with `pi` once"
            }
        }
    }

    pub fn build(self, input: &InvocationInput<'_>) -> Result<Invocation, BackendError> {
        match self {
            Backend::Pi => pi::build(self.program(), input),
        }
    }

    pub fn dialect(self) -> Box<dyn Dialect> {
        match self {
            Backend::Pi => Box::new(pi::PiDialect),
        }
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
