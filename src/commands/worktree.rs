//! `orchestrate worktree rm RUN_ID` and `orchestrate worktree prune`: removing the git
//! worktrees that runs with `--isolation worktree` kept for review (they had changes), or
//! left behind when orchestrate was killed. `orchestrate runs` lists them; `orchestrate
//! show` shows one run's.
//!
//! The list is orchestrate's own record of every worktree it started to make (written
//! before git made anything), plus the run index's for worktrees of versions that kept no
//! record. Only what orchestrate made is ever removed: the worktree must be
//! `<state>/worktrees/<runId>` on branch `orchestrate/<runId>`, whatever a record says.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::history;
use crate::result::exit_status;
use crate::session::{IndexEntry, RunId, StateDir};
use crate::worktree::{self, record, Condition};

/// Where a listed worktree's run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// Its run is still going: not to be touched.
    Running,
    /// Finished and kept for review.
    Kept,
    /// Its orchestrate stopped (killed) before finishing it.
    Interrupted,
}

impl Listing {
    fn as_str(self) -> &'static str {
        match self {
            Listing::Running => "running",
            Listing::Kept => "kept",
            Listing::Interrupted => "interrupted",
        }
    }
}

/// A worktree orchestrate made.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub record: record::Record,
    pub listing: Listing,
}

impl Listed {
    pub(crate) fn to_json(&self) -> Value {
        let r = &self.record;
        json!({"runId": r.run_id, "path": r.path, "branch": r.branch, "repository": r.repository, "state": self.listing.as_str()})
    }
}

/// Every worktree orchestrate made that is still listed: its records, then the run
/// index's kept worktrees that have no record and whose folder is still there.
pub(crate) fn kept(state: &StateDir, entries: &[IndexEntry]) -> Vec<Listed> {
    let mut out: Vec<Listed> = record::list(&state.root)
        .into_iter()
        .map(|(record, owner)| {
            let listing = match (owner, record.step) {
                (record::Owner::Running, _) => Listing::Running,
                (record::Owner::Gone, record::Step::Kept) => Listing::Kept,
                (record::Owner::Gone, _) => Listing::Interrupted,
            };
            Listed { record, listing }
        })
        .collect();
    for e in entries {
        let Some(w) = &e.worktree else { continue };
        if out.iter().any(|l| l.record.run_id == e.run_id) || !Path::new(&w.path).exists() {
            continue;
        }
        out.push(Listed {
            record: record::Record {
                run_id: e.run_id.clone(),
                path: w.path.clone(),
                branch: w.branch.clone(),
                repository: w.repository.clone(),
                // Found when needed (see `resolved`).
                common_dir: String::new(),
                base_commit: String::new(),
                step: record::Step::Kept,
                made: None,
            },
            listing: Listing::Kept,
        });
    }
    out
}

/// Whether a listed worktree is one orchestrate made in this state directory: a forged
/// or stale line naming the user's own checkout or branch is never acted on.
fn made_here(state: &StateDir, r: &record::Record) -> bool {
    RunId::parse(&r.run_id).is_ok_and(|id| id.as_str() == r.run_id)
        && Path::new(&r.path) == worktree::path_for(&state.root, &r.run_id)
        && r.branch == format!("{}{}", worktree::BRANCH_PREFIX, r.run_id)
}

/// The record with its repository's shared git dir filled in.
fn resolved(r: &record::Record) -> Result<record::Record, String> {
    if !r.common_dir.is_empty() {
        return Ok(r.clone());
    }
    let common = worktree::common_dir_of(Path::new(&r.repository)).map_err(|e| e.to_string())?;
    Ok(record::Record {
        common_dir: common.display().to_string(),
        ..r.clone()
    })
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
    let (state, entries) = match load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("orchestrate: {e}");
            return exit_status::FAILURE;
        }
    };
    let Some(listed) = kept(&state, &entries)
        .into_iter()
        .find(|l| l.record.run_id == id)
    else {
        eprintln!("orchestrate: run {id} kept no worktree (it had none, or no changes)");
        return exit_status::USAGE;
    };
    let w = &listed.record;
    if !made_here(&state, w) {
        eprintln!(
            "orchestrate: the worktree listed for run {id} ({}, branch {}) is not one orchestrate made in {}; not removed",
            w.path,
            w.branch,
            state.root.display()
        );
        return exit_status::FAILURE;
    }
    if listed.listing == Listing::Running {
        eprintln!("orchestrate: run {id} is still running in its worktree; stop it first (`orchestrate stop {id}`)");
        return exit_status::FAILURE;
    }
    let removed = resolved(w).and_then(|r| {
        worktree::remove_made(&state.root, &r, keep_branch).map_err(|e| e.to_string())
    });
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

/// Why prune leaves a worktree, if it does.
fn reason_to_keep(
    state: &StateDir,
    listed: &Listed,
    all: bool,
    force: bool,
) -> Result<Option<String>, String> {
    let w = &listed.record;
    if !made_here(state, w) {
        return Ok(Some(format!(
            "not a worktree orchestrate made in {}",
            state.root.display()
        )));
    }
    if listed.listing == Listing::Running {
        return Ok(Some("its run is still running".into()));
    }
    let r = resolved(w)?;
    if !all
        && !worktree::is_merged(
            Path::new(&r.common_dir),
            Path::new(&r.repository),
            &r.branch,
        )
    {
        return Ok(Some("not merged".into()));
    }
    if force {
        return Ok(None);
    }
    Ok(match worktree::condition(&r) {
        Condition::Clean => None,
        Condition::Uncommitted => Some("uncommitted changes (--force removes them)".into()),
        Condition::Tampered(what) => Some(format!(
            "its git metadata is not what orchestrate made ({what}); --force removes it"
        )),
        Condition::Unknown(why) => {
            Some(format!("could not be checked ({why}); --force removes it"))
        }
    })
}

/// `worktree prune [--all] [--force]`: removes every listed worktree whose branch is
/// already merged into its repository's HEAD (with `--all`, whatever its branch), with
/// its branch; one with uncommitted changes only with `--force`. A worktree whose run
/// is still going is never touched.
pub fn prune(all: bool, force: bool, json: bool) -> i32 {
    let (state, entries) = match load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("orchestrate: {e}");
            return exit_status::FAILURE;
        }
    };
    let mut removed = Vec::new();
    let mut kept = Vec::new();
    let mut failed = false;
    for listed in self::kept(&state, &entries) {
        let w = &listed.record;
        let entry = |reason: Option<&str>| {
            let mut v = json!({"runId": w.run_id, "path": w.path, "branch": w.branch});
            if let Some(reason) = reason {
                v["reason"] = json!(reason);
            }
            v
        };
        let removal = reason_to_keep(&state, &listed, all, force).and_then(|reason| match reason {
            Some(reason) => Ok(Some(reason)),
            None => resolved(w)
                .and_then(|r| {
                    worktree::remove_made(&state.root, &r, false).map_err(|e| e.to_string())
                })
                .map(|()| None),
        });
        match removal {
            Ok(None) => removed.push(entry(None)),
            Ok(Some(reason)) => kept.push(entry(Some(&reason))),
            Err(e) => {
                failed = true;
                eprintln!("orchestrate: run {}: {e}", w.run_id);
                kept.push(entry(Some(&e)));
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
