//! Where the child ran and what held it, as the result reports them: its sandbox, its git
//! worktree and its runner. The policies that decide them are `crate::sandbox`,
//! `crate::worktree` and `crate::runner`; these are only what they report.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    WorkspaceWrite,
    Off,
}

impl SandboxMode {
    pub const NAMES: &'static str = "read-only, workspace-write, off";

    pub fn parse(s: &str) -> Result<SandboxMode, String> {
        match s.trim() {
            "read-only" | "readonly" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "off" | "none" => Ok(SandboxMode::Off),
            other => Err(format!(
                "unknown sandbox mode {other:?} (use {})",
                SandboxMode::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What held, as the result reports it: `sandbox: {mode, mechanism, layers}` (the
/// child's network is the result's own `network`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    pub mode: SandboxMode,
    /// `namespaces` (the read-only view of the filesystem held), `landlock` (only
    /// Landlock's write rules did), or `none`.
    pub mechanism: String,
    /// The layers that held (`mounts`, `landlock`, `scopes`, `seccomp`, `no-tty`,
    /// `pid-namespace`, `network-namespace`); left out of a lean result, whose warnings
    /// name what is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<String>,
}

/// What the result says of the worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeInfo {
    pub path: String,
    pub branch: String,
    /// The commit the branch was made from (the working directory's HEAD).
    pub base_commit: String,
    /// The checkout the worktree belongs to (where to merge the branch).
    pub repository: String,
    /// Files the branch changes against `baseCommit`.
    pub changed_files: Vec<String>,
    pub diff_stat: DiffStat,
    /// Whether the worktree and its branch were kept (they had changes); else both were
    /// removed.
    pub kept: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffStat {
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

/// The id an engine gave the child's job: a number (Slurm's job id) or a name (a pod's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum JobId {
    Number(u64),
    Name(String),
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobId::Number(n) => write!(f, "{n}"),
            JobId::Name(s) => f.write_str(s),
        }
    }
}

/// Where a run's child ran, in its result (absent for a local run): `{"kind": "slurm",
/// "jobId": 42, "node": "n3", "queueWaitMs": 120}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerInfo {
    /// The engine (`slurm`).
    pub kind: String,
    /// The runner's name when it is a named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// None when the engine refused the job before it had an id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// From the submission until the job started (or until it was given up on).
    pub queue_wait_ms: u64,
    /// The engine's final word on the job (`COMPLETED`, `CANCELLED`, `NODE_FAIL`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}
