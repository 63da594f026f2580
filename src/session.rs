//! Run folders and the run index (SPEC section 8). Folders are 0700 and files 0600,
//! because a session holds whatever the child read, secrets included. Nothing here ever
//! deletes a run.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::result::{RunResult, Usage};

pub(crate) const SESSION_FILE: &str = "session.jsonl";
pub(crate) const STDERR_FILE: &str = "stderr.log";
pub(crate) const RESULT_FILE: &str = "result.json";
pub(crate) const INDEX_FILE: &str = "runs.jsonl";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    /// `$ORCHESTRATE_STATE_DIR`, else `$XDG_STATE_HOME/orchestrate`, else
    /// `~/.local/state/orchestrate`.
    pub fn from_env() -> io::Result<StateDir> {
        let non_empty = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let root = if let Some(dir) = non_empty("ORCHESTRATE_STATE_DIR") {
            dir
        } else if let Some(xdg) = non_empty("XDG_STATE_HOME") {
            xdg.join("orchestrate")
        } else if let Some(home) = non_empty("HOME") {
            home.join(".local/state/orchestrate")
        } else {
            return Err(io::Error::other(
                "cannot choose a state directory: set ORCHESTRATE_STATE_DIR, XDG_STATE_HOME or HOME",
            ));
        };
        Ok(StateDir { root })
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn run_dir(&self, run_id: &str) -> RunDir {
        RunDir {
            path: self.runs_dir().join(run_id),
        }
    }

    /// Creates `runs/<runId>/` (and its parents) with owner-only permissions.
    pub fn create_run(&self, run_id: &str) -> io::Result<RunDir> {
        create_private_dir_all(&self.runs_dir())?;
        let dir = self.run_dir(run_id);
        DirBuilder::new()
            .mode(0o700)
            .create(&dir.path)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("failed to create run folder {}: {e}", dir.path.display()),
                )
            })?;
        Ok(dir)
    }

    /// Appends one line to `runs.jsonl`. The line goes out in one `write` on an
    /// `O_APPEND` file, so lines of concurrent runs never interleave.
    pub fn append_index(&self, entry: &IndexEntry) -> io::Result<()> {
        create_private_dir_all(&self.root)?;
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(self.root.join(INDEX_FILE))?;
        f.write_all(&line)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    pub fn session_file(&self) -> PathBuf {
        self.path.join(SESSION_FILE)
    }

    pub fn stderr_file(&self) -> PathBuf {
        self.path.join(STDERR_FILE)
    }

    pub fn result_file(&self) -> PathBuf {
        self.path.join(RESULT_FILE)
    }

    pub fn create_file(&self, name: &str) -> io::Result<File> {
        create_private_file(&self.path.join(name))
    }

    /// Writes `result.json` atomically (a temporary file renamed over it), so a reader
    /// never sees half a result.
    pub fn write_result(&self, result: &RunResult) -> io::Result<()> {
        let tmp = self.path.join(".result.json.tmp");
        let mut bytes = serde_json::to_vec_pretty(result).map_err(io::Error::other)?;
        bytes.push(b'\n');
        write_private_file(&tmp, &bytes)?;
        fs::rename(&tmp, self.result_file())
    }
}

/// One line of `runs.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexEntry {
    pub run_id: String,
    pub agent: String,
    pub backend: String,
    pub model: Option<String>,
    /// Unix time in milliseconds.
    pub started_at_ms: u64,
    pub duration_ms: u64,
    pub exit_code: i32,
    /// `null` on success, else the error code.
    pub error: Option<String>,
    pub usage: Usage,
    pub cwd: String,
    pub session_file: String,
    /// The worktree the run kept for review (it had changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<IndexWorktree>,
}

/// Where a kept worktree is, for `orchestrate runs` and `orchestrate worktree`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexWorktree {
    pub path: String,
    pub branch: String,
    pub repository: String,
}

pub(crate) fn create_private_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("failed to create {}: {e}", path.display()),
            )
        })
}

pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("failed to create {}: {e}", path.display()),
            )
        })
}

pub(crate) fn write_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_private_file(path)?.write_all(bytes)
}

pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn run_folders_and_files_are_private() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().join("state"),
        };
        let run = state.create_run("abcd1234").unwrap();
        run.create_file(SESSION_FILE).unwrap();
        run.write_result(&RunResult::refusal(
            crate::result::ErrorCode::SubagentFailed,
            "x",
            None,
        ))
        .unwrap();
        assert_eq!(mode(&state.root), 0o700);
        assert_eq!(mode(&run.path), 0o700);
        assert_eq!(mode(&run.session_file()), 0o600);
        assert_eq!(mode(&run.result_file()), 0o600);
        assert!(!run.path.join(".result.json.tmp").exists());
        // The same id twice is refused rather than mixing two runs in one folder.
        assert!(state.create_run("abcd1234").is_err());
    }

    #[test]
    fn index_lines_append() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().to_path_buf(),
        };
        let entry = IndexEntry {
            run_id: "r1".into(),
            agent: "explorer".into(),
            backend: "pi".into(),
            model: None,
            started_at_ms: 1,
            duration_ms: 2,
            exit_code: 0,
            error: None,
            usage: Usage::default(),
            cwd: "/w".into(),
            session_file: "/s".into(),
            worktree: None,
        };
        state.append_index(&entry).unwrap();
        state
            .append_index(&IndexEntry {
                run_id: "r2".into(),
                ..entry.clone()
            })
            .unwrap();
        let text = fs::read_to_string(tmp.path().join(INDEX_FILE)).unwrap();
        let ids: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<IndexEntry>(l).unwrap().run_id)
            .collect();
        assert_eq!(ids, ["r1", "r2"]);
        assert_eq!(mode(&tmp.path().join(INDEX_FILE)), 0o600);
    }
}
