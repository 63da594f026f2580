//! Failures that end a run before a child could give its own verdict: bad input, a switch
//! that refuses, an agent that cannot be found or used, a machine that cannot host the run.
//! Each carries its [`ErrorCode`], and so its exit status; its message is the contract's.

use std::path::PathBuf;

use crate::result::{ErrorCode, RunResult};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A missing or malformed argument, flag, file or setting; the text says which and why.
    #[error("Invalid input: {0}")]
    InvalidInput(String),
    /// `ORCHESTRATE_DISABLED` or the config's `disabled = true`; `how` says how to undo it.
    #[error("Subagents are disabled. {how}")]
    SubagentsDisabled { how: String },
    #[error("Unknown agent: {name}. Available agents: {}{unreadable}{}", available.join(", "),
        suggestion.as_ref().map_or(String::new(), |s| format!(". Did you mean {s}?")))]
    UnknownAgent {
        name: String,
        /// Sorted.
        available: Vec<String>,
        /// A note about agent files that could not be read, or empty.
        unreadable: String,
        /// The available agent whose name is nearest, when one is near enough.
        suggestion: Option<String>,
    },
    #[error("Subagent {name} is disabled by its definition ({file}): set `enabled: true` there to use it.")]
    SubagentDisabled { name: String, file: String },
    #[error(
        "Maximum subagent depth ({max_depth}) exceeded. Subagents cannot call other subagents."
    )]
    DepthExceeded { max_depth: u32 },
    /// Something on this machine that the run needs failed (the run folder, a file).
    #[error("orchestrate could not {action} ({}): {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    pub fn invalid(message: impl Into<String>) -> Self {
        RunError::InvalidInput(message.into())
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            RunError::InvalidInput(_) => ErrorCode::InvalidInput,
            RunError::SubagentsDisabled { .. } => ErrorCode::SubagentsDisabled,
            RunError::UnknownAgent { .. } => ErrorCode::UnknownAgent,
            RunError::SubagentDisabled { .. } => ErrorCode::SubagentDisabled,
            RunError::DepthExceeded { .. } => ErrorCode::SubagentDepthExceeded,
            RunError::Io { .. } => ErrorCode::SubagentFailed,
        }
    }

    pub fn exit_status(&self) -> i32 {
        self.code().exit_status()
    }

    /// Whether a refusal before any run folder exists still names the run id: bad input
    /// is refused before a run is assigned to the call.
    pub fn keeps_run_id(&self) -> bool {
        !matches!(self, RunError::InvalidInput(_))
    }

    /// The result of a run that ended with this refusal.
    pub fn to_result(&self, run_id: Option<&str>) -> RunResult {
        RunResult::refusal(self.code(), self.to_string(), run_id.map(str::to_string))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn every_refusal_carries_its_code_exit_status_and_contract_message() {
        let cases = [
            (
                RunError::invalid("task is required and must not be empty."),
                ErrorCode::InvalidInput,
                2,
                "Invalid input: task is required and must not be empty.",
            ),
            (
                RunError::SubagentsDisabled {
                    how: "Unset ORCHESTRATE_DISABLED (or set it to 0) to enable them.".into(),
                },
                ErrorCode::SubagentsDisabled,
                3,
                "Subagents are disabled. Unset ORCHESTRATE_DISABLED (or set it to 0) to enable them.",
            ),
            (
                RunError::UnknownAgent {
                    name: "nope".into(),
                    available: vec!["explorer".into(), "reviewer".into()],
                    unreadable: String::new(),
                    suggestion: None,
                },
                ErrorCode::UnknownAgent,
                2,
                "Unknown agent: nope. Available agents: explorer, reviewer",
            ),
            (
                RunError::UnknownAgent {
                    name: "explroer".into(),
                    available: vec!["explorer".into(), "reviewer".into()],
                    unreadable: " (1 agent file(s) could not be read; `orchestrate agents` lists why)".into(),
                    suggestion: Some("explorer".into()),
                },
                ErrorCode::UnknownAgent,
                2,
                "Unknown agent: explroer. Available agents: explorer, reviewer (1 agent file(s) could not be read; `orchestrate agents` lists why). Did you mean explorer?",
            ),
            (
                RunError::SubagentDisabled {
                    name: "x".into(),
                    file: "/a/x.md".into(),
                },
                ErrorCode::SubagentDisabled,
                3,
                "Subagent x is disabled by its definition (/a/x.md): set `enabled: true` there to use it.",
            ),
            (
                RunError::DepthExceeded { max_depth: 1 },
                ErrorCode::SubagentDepthExceeded,
                3,
                "Maximum subagent depth (1) exceeded. Subagents cannot call other subagents.",
            ),
            (
                RunError::Io {
                    action: "create the run folder",
                    path: PathBuf::from("/s/runs/ab12cd34"),
                    source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
                },
                ErrorCode::SubagentFailed,
                1,
                "orchestrate could not create the run folder (/s/runs/ab12cd34): permission denied",
            ),
        ];
        for (err, code, status, message) in cases {
            assert_eq!(
                (err.code(), err.exit_status(), err.to_string()),
                (code, status, message.to_string())
            );
        }
    }

    #[test]
    fn only_bad_input_is_refused_before_a_run_is_assigned() {
        assert!(!RunError::invalid("x").keeps_run_id());
        assert!(RunError::DepthExceeded { max_depth: 1 }.keeps_run_id());
        let r = RunError::DepthExceeded { max_depth: 1 }.to_result(Some("ab12cd34"));
        assert_eq!(r.details.run_id.as_deref(), Some("ab12cd34"));
        assert_eq!(r.exit_status(), 3);
    }
}
