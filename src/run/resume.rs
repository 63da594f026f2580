//! `run --resume RUN_ID`: what an earlier run left that its CLI can continue.

use std::path::PathBuf;

use super::{RunEnv, RunRequest};
use crate::backends::{BackendChoice, ResumeFrom};
use crate::history;
use crate::result::RunResult;
use crate::session::{FindRunError, RunIdPrefix};

/// The request with the earlier run's agent, backend and working directory filled in where
/// the caller gave none, and what the backend needs to continue the child's session.
pub(super) fn load(
    env: &RunEnv,
    run_id: &str,
    req: &RunRequest,
) -> Result<(RunRequest, ResumeFrom), String> {
    let prefix = RunIdPrefix::parse(run_id).map_err(|e| format!("--resume: {e}"))?;
    let run_id = env.state.find_run(&prefix).map_err(|e| match e {
        FindRunError::NoMatch(p) => format!("--resume: no run id starts with {p}"),
        other => format!("--resume: {other}"),
    })?;
    let run_dir = env.state.run_dir(&run_id);
    let id = run_id.as_str();
    let bytes = std::fs::read(run_dir.result_file()).map_err(|e| {
        format!(
            "run {id} has no result to continue ({}: {e})",
            run_dir.result_file().display()
        )
    })?;
    let earlier: RunResult = serde_json::from_slice(&bytes)
        .map_err(|e| format!("run {id}: unreadable result.json: {e}"))?;
    let single =
        earlier.details.results.first().ok_or_else(|| {
            format!("run {id} never ran a child, so there is nothing to continue")
        })?;
    let mut filled = req.clone();
    if filled.agent.trim().is_empty() {
        filled.agent = single.agent.clone();
    }
    if filled.settings.backend.is_none() {
        let backend = BackendChoice::parse(&single.backend)
            .map_err(|e| format!("run {id}: its result names {e}"))?;
        filled.settings.backend = Some(backend);
    }
    if filled.cwd.is_none() {
        // Claude and codex keep sessions per working directory.
        filled.cwd = history::read_index(&env.state)
            .ok()
            .and_then(|index| index.entries.into_iter().rev().find(|e| e.run_id == id))
            .map(|e| PathBuf::from(e.cwd));
    }
    let from = ResumeFrom {
        run_id: run_id.to_string(),
        session_id: single.child_session_id.clone(),
        run_dir: run_dir.path,
    };
    Ok((filled, from))
}
