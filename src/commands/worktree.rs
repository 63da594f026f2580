//! `orchestrate worktree rm RUN_ID` and `orchestrate worktree prune`: removing the git
//! worktrees that runs with `--isolation worktree` kept for review (they had changes).
//! `orchestrate runs` lists them; `orchestrate show` shows one run's.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::history;
use crate::result::exit_status;
use crate::session::{IndexEntry, IndexWorktree, RunId, StateDir};
use crate::worktree;

/// The worktrees runs kept that are still there (their folder or their branch), newest
/// last, one per run.
pub fn kept(entries: &[IndexEntry]) -> Vec<(&str, &IndexWorktree)> {
    let mut out: Vec<(&str, &IndexWorktree)> = Vec::new();
    for e in entries {
        let Some(w) = &e.worktree else { continue };
        if out.iter().any(|(id, _)| *id == e.run_id) {
            continue;
        }
        if Path::new(&w.path).exists() {
            out.push((e.run_id.as_str(), w));
        }
    }
    out
}

fn load() -> Result<(StateDir, Vec<IndexEntry>), String> {
    let state = StateDir::from_env().map_err(|e| e.to_string())?;
    let index = history::read_index(&state).map_err(|e| e.to_string())?;
    Ok((state, index.entries))
}

fn print(json: bool, value: &Value, text: &str) -> i32 {
    let out = if json {
        format!("{value}\n")
    } else {
        text.to_string()
    };
    match std::io::stdout().lock().write_all(out.as_bytes()) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

/// `worktree rm RUN_ID [--keep-branch]`: removes the run's worktree (whatever is in it)
/// and, unless asked to keep it, its branch.
pub fn rm(run_id: &RunId, keep_branch: bool, json: bool) -> i32 {
    let id = run_id.as_str();
    let (_, entries) = match load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("orchestrate: {e}");
            return exit_status::FAILURE;
        }
    };
    let Some(w) = entries
        .iter()
        .rev()
        .filter(|e| e.run_id == id)
        .find_map(|e| e.worktree.as_ref())
    else {
        eprintln!("orchestrate: run {id} kept no worktree (it had none, or no changes)");
        return exit_status::USAGE;
    };
    let repository = Path::new(&w.repository);
    let removed = if keep_branch {
        worktree::remove_worktree_only(repository, Path::new(&w.path))
    } else {
        worktree::remove(repository, Path::new(&w.path), &w.branch)
    };
    if let Err(e) = removed {
        eprintln!("orchestrate: {e}");
        return exit_status::FAILURE;
    }
    let branch_note = if keep_branch {
        format!("kept branch {}", w.branch)
    } else {
        format!("deleted branch {}", w.branch)
    };
    print(
        json,
        &json!({"runId": id, "path": w.path, "branch": w.branch, "branchDeleted": !keep_branch}),
        &format!("Removed worktree {} of run {id}; {branch_note}.\n", w.path),
    )
}

/// `worktree prune [--all]`: removes every kept worktree whose branch is already merged
/// into its repository's HEAD (with `--all`, every kept worktree), with its branch.
pub fn prune(all: bool, json: bool) -> i32 {
    let (_, entries) = match load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("orchestrate: {e}");
            return exit_status::FAILURE;
        }
    };
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    let mut failed = false;
    for (id, w) in self::kept(&entries) {
        let repository = Path::new(&w.repository);
        if !all && !worktree::is_merged(repository, &w.branch) {
            kept.push(
                json!({"runId": id, "path": w.path, "branch": w.branch, "reason": "not merged"}),
            );
            continue;
        }
        match worktree::remove(repository, Path::new(&w.path), &w.branch) {
            Ok(()) => removed.push(json!({"runId": id, "path": w.path, "branch": w.branch})),
            Err(e) => {
                failed = true;
                eprintln!("orchestrate: run {id}: {e}");
                kept.push(json!({"runId": id, "path": w.path, "branch": w.branch, "reason": e.to_string()}));
            }
        }
    }
    let mut text = String::new();
    for r in &removed {
        text.push_str(&format!(
            "Removed {} (branch {}, run {})\n",
            r["path"].as_str().unwrap_or_default(),
            r["branch"].as_str().unwrap_or_default(),
            r["runId"].as_str().unwrap_or_default()
        ));
    }
    for k in &kept {
        text.push_str(&format!(
            "Kept {} (branch {}, run {}): {}\n",
            k["path"].as_str().unwrap_or_default(),
            k["branch"].as_str().unwrap_or_default(),
            k["runId"].as_str().unwrap_or_default(),
            k["reason"].as_str().unwrap_or_default()
        ));
    }
    if removed.is_empty() && kept.is_empty() {
        text.push_str("No worktrees kept by orchestrate runs.\n");
    } else if !all && kept.iter().any(|k| k["reason"] == "not merged") {
        text.push_str("(`orchestrate worktree prune --all` removes unmerged ones too.)\n");
    }
    let status = print(json, &json!({"removed": removed, "kept": kept}), &text);
    if failed {
        exit_status::FAILURE
    } else {
        status
    }
}
