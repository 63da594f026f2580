//! The list of worktrees orchestrate made: `<state>/worktrees/<runId>.json`, written
//! before `git worktree add` runs, so that a worktree whose orchestrate was killed at any
//! step (git goes on alone and finishes it) is still listed and can be pruned.
//!
//! The run that owns a worktree holds an `flock` on `<runId>.lock` for as long as it
//! lives; the kernel releases it however the process ends. So a reader tells a running
//! run's worktree (locked) from one whose orchestrate is gone (free) without trusting a
//! pid. The record itself is replaced whole (written aside, renamed), the lock file never.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::session::RunId;

/// What orchestrate knows of a worktree it made or started to make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    pub run_id: String,
    pub path: String,
    pub branch: String,
    /// The checkout the worktree belongs to.
    pub repository: String,
    /// The repository's shared git dir.
    pub common_dir: String,
    pub base_commit: String,
    pub step: Step,
    /// What `git worktree add` made, once it has: checked before every later use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made: Option<Made>,
}

/// How far the run got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Step {
    /// Before and during `git worktree add`.
    Creating,
    /// Made; the child works in it, or orchestrate is committing what it left.
    Working,
    /// Finished with changes (or changes orchestrate would not commit), kept for review.
    Kept,
}

/// The worktree's git metadata as `git worktree add` wrote it. Anything the child can
/// reach that decides which git dir, configuration or branch orchestrate's git would use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Made {
    /// The worktree's own git dir (`<common>/worktrees/<name>`).
    pub git_dir: String,
    /// Its device and inode: the same directory, whatever its path resolves through.
    pub git_dir_id: (u64, u64),
    /// The worktree's `.git` file.
    pub pointer: String,
    /// `commondir`, `gitdir`, `HEAD` and `config.worktree` (absent: `None`) in the git dir.
    pub commondir: String,
    pub gitdir: String,
    pub head: String,
    pub config_worktree: Option<String>,
}

/// Whether a record's run still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Running,
    Gone,
}

fn dir(state_root: &Path) -> PathBuf {
    state_root.join("worktrees")
}

fn json_path(state_root: &Path, run_id: &str) -> PathBuf {
    dir(state_root).join(format!("{run_id}.json"))
}

fn lock_path(state_root: &Path, run_id: &str) -> PathBuf {
    dir(state_root).join(format!("{run_id}.lock"))
}

fn open_nofollow(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn write_json(state_root: &Path, record: &Record) -> io::Result<()> {
    let path = json_path(state_root, &record.run_id);
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec(record).map_err(io::Error::other)?;
    let written = open_nofollow(
        &tmp,
        OpenOptions::new().write(true).create(true).truncate(true),
    )
    .and_then(|mut f| f.write_all(&bytes))
    .and_then(|()| std::fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// The owning run's hold on its record: the lock, and the way to update or drop it.
#[derive(Debug)]
pub(crate) struct Held {
    state_root: PathBuf,
    record: Record,
    _lock: File,
}

impl Held {
    /// Writes `record` (a new one: its run id must not have one yet) and takes its lock.
    pub(crate) fn create(state_root: &Path, record: Record) -> io::Result<Held> {
        crate::session::create_private_dir_all(&dir(state_root))?;
        let lock = open_nofollow(
            &lock_path(state_root, &record.run_id),
            OpenOptions::new().write(true).create_new(true),
        )?;
        // SAFETY: flock on a descriptor we own; nobody else knows the file yet.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io::Error::last_os_error());
        }
        write_json(state_root, &record)?;
        Ok(Held {
            state_root: state_root.to_path_buf(),
            record,
            _lock: lock,
        })
    }

    pub(crate) fn state_root(&self) -> &Path {
        &self.state_root
    }

    pub(crate) fn record(&self) -> &Record {
        &self.record
    }

    pub(crate) fn update(&mut self, change: impl FnOnce(&mut Record)) -> io::Result<()> {
        change(&mut self.record);
        write_json(&self.state_root, &self.record)
    }

    /// The worktree is gone: so is its record.
    pub(crate) fn remove(self) {
        remove(&self.state_root, &self.record.run_id);
    }
}

/// Deletes a record (its worktree and branch are gone).
pub(crate) fn remove(state_root: &Path, run_id: &str) {
    let _ = std::fs::remove_file(json_path(state_root, run_id));
    let _ = std::fs::remove_file(lock_path(state_root, run_id));
}

/// Whether `run_id`'s run still holds its record.
pub(crate) fn owner(state_root: &Path, run_id: &str) -> Owner {
    let Ok(lock) = open_nofollow(
        &lock_path(state_root, run_id),
        OpenOptions::new().read(true),
    ) else {
        return Owner::Gone;
    };
    // SAFETY: flock on a descriptor we own; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0 {
        Owner::Gone
    } else {
        Owner::Running
    }
}

/// Every record, oldest run first (by the record's time), with whether its run still
/// runs. A record that does not parse is skipped with a warning.
pub(crate) fn list(state_root: &Path) -> Vec<(Record, Owner)> {
    let Ok(entries) = std::fs::read_dir(dir(state_root)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if RunId::parse(id).map(|r| r.as_str() == id) != Ok(true) {
            continue;
        }
        let path = entry.path();
        let parsed = super::git::read_plain_file(&path, 1 << 16)
            .and_then(|b| b.ok_or_else(|| io::Error::other("gone")))
            .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(io::Error::other));
        match parsed {
            Ok(r) if r.run_id == id => {
                let modified = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                out.push((modified, r, owner(state_root, id)));
            }
            Ok(_) => tracing::warn!("{}: names another run; skipped", path.display()),
            Err(e) => tracing::warn!("{}: not a worktree record: {e}", path.display()),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.run_id.cmp(&b.1.run_id)));
    out.into_iter().map(|(_, r, o)| (r, o)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn record(id: &str) -> Record {
        Record {
            run_id: id.into(),
            path: format!("/s/worktrees/{id}"),
            branch: format!("orchestrate/{id}"),
            repository: "/r".into(),
            common_dir: "/r/.git".into(),
            base_commit: "abc".into(),
            step: Step::Creating,
            made: None,
        }
    }

    #[test]
    fn a_held_record_is_running_and_a_dropped_one_is_gone() {
        let state = tempfile::tempdir().unwrap();
        let mut held = Held::create(state.path(), record("aaaaaaaa")).unwrap();
        held.update(|r| r.step = Step::Working).unwrap();
        let want = Record {
            step: Step::Working,
            ..record("aaaaaaaa")
        };
        assert_eq!(list(state.path()), vec![(want.clone(), Owner::Running)]);
        // The same run id twice is refused.
        assert!(Held::create(state.path(), record("aaaaaaaa")).is_err());
        drop(held);
        assert_eq!(list(state.path()), vec![(want, Owner::Gone)]);
        remove(state.path(), "aaaaaaaa");
        assert_eq!(list(state.path()), vec![]);
    }

    #[test]
    fn files_that_are_not_records_are_skipped() {
        let state = tempfile::tempdir().unwrap();
        let d = state.path().join("worktrees");
        std::fs::create_dir_all(d.join("bbbbbbbb")).unwrap();
        std::fs::write(d.join("cccccccc.json"), "{not json").unwrap();
        std::fs::write(d.join("../x.json"), "{}").unwrap();
        let other = serde_json::to_vec(&record("dddddddd")).unwrap();
        std::fs::write(d.join("eeeeeeee.json"), other).unwrap();
        assert_eq!(list(state.path()), vec![]);
    }
}
