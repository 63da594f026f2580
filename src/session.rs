//! Run folders (`runs/<runId>/` in the state directory: the session file, stderr, the
//! result, the prompt files) and the run index (`runs.jsonl`). Folders are 0700 and files 0600,
//! because a session holds whatever the child read, secrets included. Nothing here ever
//! deletes a run.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::result::{RunResult, Usage};

pub(crate) const SESSION_FILE: &str = "session.jsonl";
pub(crate) const STDERR_FILE: &str = "stderr.log";
/// What orchestrate wrote to the stdin of a child it talks to (ACP and other protocols).
pub(crate) const STDIN_FILE: &str = "stdin.jsonl";
pub(crate) const RESULT_FILE: &str = "result.json";
pub(crate) const INDEX_FILE: &str = "runs.jsonl";

/// A run's id, as [`crate::result::new_run_id`] makes them: 8 lower-case hex digits. Every
/// id a user or a file gives (`wait`, `stop`, `show`, `--resume`, a background run's
/// `--run-id`) is checked here, so that none can name a path outside `runs/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id {0:?}: expected 8 hex digits, as `orchestrate runs` prints them")]
pub struct InvalidRunId(pub String);

impl RunId {
    /// A new, random id.
    pub fn new() -> RunId {
        RunId(crate::result::new_run_id())
    }

    /// Upper-case digits and surrounding blanks are accepted, as a user may copy them.
    pub fn parse(id: &str) -> Result<RunId, InvalidRunId> {
        let trimmed = id.trim();
        if trimmed.len() == RUN_ID_DIGITS && trimmed.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(RunId(trimmed.to_ascii_lowercase()))
        } else {
            Err(InvalidRunId(id.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a user typed to name a run: a whole run id, or its first digits (1 to 8 hex
/// digits), as git takes a commit's. [`StateDir::find_run`] turns it into a [`RunId`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunIdPrefix(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id {0:?}: expected a run id as `orchestrate runs` prints it (8 hex digits), or its first digits")]
pub struct InvalidRunIdPrefix(pub String);

impl RunIdPrefix {
    /// Upper-case digits and surrounding blanks are accepted, as for [`RunId::parse`].
    pub fn parse(prefix: &str) -> Result<RunIdPrefix, InvalidRunIdPrefix> {
        let trimmed = prefix.trim();
        if (1..=RUN_ID_DIGITS).contains(&trimmed.len())
            && trimmed.bytes().all(|b| b.is_ascii_hexdigit())
        {
            Ok(RunIdPrefix(trimmed.to_ascii_lowercase()))
        } else {
            Err(InvalidRunIdPrefix(prefix.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RunIdPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Digits of a run id.
const RUN_ID_DIGITS: usize = 8;
/// How many candidates an ambiguous prefix's error lists.
const AMBIGUOUS_CANDIDATES_SHOWN: usize = 10;

/// Why a run id prefix names no single run.
#[derive(Debug, thiserror::Error)]
pub enum FindRunError {
    /// No run folder's name starts with it; each command says so in its own words.
    #[error("no run id starts with {0}")]
    NoMatch(RunIdPrefix),
    #[error("Run id prefix {prefix} matches {} runs: {}{}. Give more digits.",
        candidates.len(),
        candidates.iter().take(AMBIGUOUS_CANDIDATES_SHOWN).map(RunId::as_str).collect::<Vec<_>>().join(", "),
        if candidates.len() > AMBIGUOUS_CANDIDATES_SHOWN { ", …" } else { "" })]
    Ambiguous {
        prefix: RunIdPrefix,
        /// Sorted.
        candidates: Vec<RunId>,
    },
    #[error("cannot read the run folders in {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The state directory in a home directory when neither `ORCHESTRATE_STATE_DIR` nor
/// `XDG_STATE_HOME` names one.
const DEFAULT_STATE_IN_HOME: &str = ".local/state/orchestrate";

/// The variable `key` as a path, unless unset or empty.
fn env_dir(key: &str) -> Option<PathBuf> {
    std::env::var_os(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The state directories where `ORCHESTRATE_STATE_DIR` names none, first the one used.
fn default_dirs() -> impl Iterator<Item = PathBuf> {
    env_dir("XDG_STATE_HOME")
        .map(|x| x.join("orchestrate"))
        .into_iter()
        .chain(env_dir("HOME").map(|h| h.join(DEFAULT_STATE_IN_HOME)))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    /// `$ORCHESTRATE_STATE_DIR`, else `$XDG_STATE_HOME/orchestrate`, else
    /// `~/.local/state/orchestrate`.
    pub fn from_env() -> io::Result<StateDir> {
        let root = env_dir("ORCHESTRATE_STATE_DIR")
            .or_else(|| default_dirs().next())
            .ok_or_else(|| {
                io::Error::other(
                    "cannot choose a state directory: set ORCHESTRATE_STATE_DIR, XDG_STATE_HOME or HOME",
                )
            })?;
        // Relative to where orchestrate started, once: every path a result names (the
        // session file) must hold wherever its reader is.
        let root = std::path::absolute(&root).map_err(|e| {
            io::Error::new(e.kind(), format!("state directory {}: {e}", root.display()))
        })?;
        Ok(StateDir { root })
    }

    /// The state directories orchestrate uses when `ORCHESTRATE_STATE_DIR` names none
    /// (`$XDG_STATE_HOME/orchestrate`, `~/.local/state/orchestrate`), made absolute as
    /// [`StateDir::from_env`] makes them, whether they exist or not: a sandboxed child
    /// reads none of them that is not its run's.
    pub fn defaults() -> Vec<PathBuf> {
        default_dirs()
            .filter_map(|d| std::path::absolute(d).ok())
            .collect()
    }

    /// Makes sure the state directory and its `runs/` are orchestrate's own before
    /// anything is written there: created 0700 when missing; a folder of another user, or
    /// a `runs/` that is a symbolic link, is refused; one that others may read or write is
    /// made 0700, with a warning that says so. The root itself may be a symbolic link (a
    /// user's choice of disk); nothing inside it is followed.
    pub fn prepare(&self) -> io::Result<()> {
        create_private_dir_all(&self.root)?;
        secure_dir(&self.root, fs::metadata(&self.root)?)?;
        let runs = self.runs_dir();
        match DirBuilder::new().mode(0o700).create(&runs) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                secure_dir(&runs, fs::symlink_metadata(&runs)?)
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("failed to create {}: {e}", runs.display()),
            )),
        }
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn run_dir(&self, run_id: &RunId) -> RunDir {
        RunDir {
            path: self.runs_dir().join(run_id.as_str()),
        }
    }

    /// The run `prefix` names: a whole id as it is (whether or not its folder exists, so
    /// that each command says in its own words that it does not), else the one run folder
    /// whose name starts with it.
    pub fn find_run(&self, prefix: &RunIdPrefix) -> Result<RunId, FindRunError> {
        if prefix.0.len() == RUN_ID_DIGITS {
            return Ok(RunId(prefix.0.clone()));
        }
        let runs = self.runs_dir();
        let entries = match fs::read_dir(&runs) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(FindRunError::NoMatch(prefix.clone()))
            }
            Err(source) => return Err(FindRunError::Unreadable { path: runs, source }),
        };
        // Only folders named as runs are: anything else there is not ours to read.
        let mut candidates: Vec<RunId> = entries
            .flatten()
            .filter_map(|e| RunId::parse(e.file_name().to_str()?).ok())
            .filter(|id| id.0.starts_with(&prefix.0))
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0));
        match candidates.len() {
            0 => Err(FindRunError::NoMatch(prefix.clone())),
            1 => Ok(candidates.remove(0)),
            _ => Err(FindRunError::Ambiguous {
                prefix: prefix.clone(),
                candidates,
            }),
        }
    }

    /// Creates `runs/<runId>/` (and its parents) with owner-only permissions.
    pub fn create_run(&self, run_id: &RunId) -> io::Result<RunDir> {
        self.prepare()?;
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
        // The child's own place (see `sandbox::CHILD_DIR`).
        create_private_dir_all(&dir.child_dir())?;
        Ok(dir)
    }

    /// Appends one line to `runs.jsonl`. The line goes out in one `write` on an
    /// `O_APPEND` file, so lines of concurrent runs never interleave; when the file does
    /// not end with a newline (a crash or a full disk cut its last line short), the line
    /// starts with one, so that only the torn line is lost.
    pub fn append_index(&self, entry: &IndexEntry) -> io::Result<()> {
        self.prepare()?;
        let path = self.root.join(INDEX_FILE);
        let mut line = serde_json::to_vec(entry).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = open_private(
            &path,
            OpenOptions::new().read(true).create(true).append(true),
        )?;
        let len = f.metadata()?.len();
        if len > 0 {
            let mut last = [0u8];
            f.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                line.insert(0, b'\n');
            }
        }
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

    /// Where the child writes what it writes for the run (its data, never a record).
    pub fn child_dir(&self) -> PathBuf {
        self.path.join(crate::sandbox::CHILD_DIR)
    }

    pub fn create_file(&self, name: &str) -> io::Result<File> {
        create_private_file(&self.path.join(name))
    }

    /// Writes `result.json` atomically (a temporary file renamed over it), so a reader
    /// never sees half a result.
    pub fn write_result(&self, result: &RunResult) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(result).map_err(io::Error::other)?;
        bytes.push(b'\n');
        self.write_atomic(RESULT_FILE, &bytes)
    }

    /// Writes `name` in the run folder atomically: a new temporary file, renamed over it.
    /// The temporary file never outlives a failure (a full disk left an empty one).
    pub(crate) fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(format!(".{name}.tmp"));
        // Whatever is there (a leftover, or a link planted to redirect the write) goes;
        // the new file must not exist yet, so no link is followed.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let written = open_private(&tmp, OpenOptions::new().write(true).create_new(true))
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| fs::rename(&tmp, self.path.join(name)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
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
    /// The start of the task, sanitized, so that `orchestrate runs` can tell runs apart
    /// (at most [`INDEX_TASK_CHARS`] characters; absent in lines of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// How much of a task the run index keeps: enough to recognise a run, never a whole long
/// prompt in every line of a file that is read whole.
pub(crate) const INDEX_TASK_CHARS: usize = 200;

/// `task`'s first [`INDEX_TASK_CHARS`] characters (`…` when there was more), secrets
/// redacted, for the run index.
pub(crate) fn index_task(task: &str) -> String {
    let cut = match task.char_indices().nth(INDEX_TASK_CHARS) {
        Some((at, _)) => format!("{}…", &task[..at]),
        None => task.to_string(),
    };
    crate::sanitize::Sanitizer::global()
        .sanitize(&cut)
        .into_owned()
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

/// A folder of orchestrate's own at `path` (its parent must exist): created 0700, or, when
/// it is there, checked as the state directory's folders are (a symbolic link, or a folder
/// of another user, is refused).
pub(crate) fn private_dir(path: &Path) -> io::Result<()> {
    match DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            secure_dir(path, fs::symlink_metadata(path)?)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("failed to create {}: {e}", path.display()),
        )),
    }
}

pub(crate) fn create_private_file(path: &Path) -> io::Result<File> {
    open_private(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
    )
}

/// Opens `path` with `options`, never through a symbolic link, and only if it is a
/// regular file (a FIFO would block its reader); with its metadata.
fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<(File, fs::Metadata)> {
    let f = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok((f, meta))
}

/// Opens a run's record at `path` to read it ([`open_regular`]). A nested run's records
/// live in its parent's child's place, where that child could have put a link or a FIFO.
pub(crate) fn open_record(path: &Path) -> io::Result<File> {
    open_regular(path, OpenOptions::new().read(true))
        .map(|(f, _)| f)
        // (A system call's error keeps its number, which callers read: ELOOP for a link.)
        .map_err(|e| match e.raw_os_error() {
            Some(_) => e,
            None => io::Error::new(e.kind(), format!("{} is {e}", path.display())),
        })
}

/// Opens `path` with `options` as a private file of the state directory: created 0600; a
/// symbolic link is never followed, and anything but a regular file (a FIFO that would
/// block) is refused; an existing file that others may read is made 0600.
pub(crate) fn open_private(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let failed = |e: io::Error| {
        let why = if e.raw_os_error() == Some(libc::ELOOP) {
            "it is a symbolic link, and orchestrate follows none in its state directory".to_string()
        } else {
            e.to_string()
        };
        io::Error::new(
            e.kind(),
            format!("failed to open {}: {why}", path.display()),
        )
    };
    let (f, meta) = open_regular(path, options.mode(0o600)).map_err(failed)?;
    if meta.mode() & 0o077 != 0 {
        f.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(failed)?;
    }
    Ok(f)
}

/// What to do with a folder of the state directory, from its mode, its owner and who we
/// are.
#[derive(Debug, PartialEq, Eq)]
enum DirVerdict {
    Fine,
    /// Others may read or write it: make it 0700.
    Repair {
        mode: u32,
    },
    Refuse(String),
}

fn judge_dir(meta: &fs::Metadata, me: u32) -> DirVerdict {
    if meta.file_type().is_symlink() {
        return DirVerdict::Refuse(
            "it is a symbolic link, and orchestrate follows none in its state directory".into(),
        );
    }
    if !meta.is_dir() {
        return DirVerdict::Refuse("it is not a directory".into());
    }
    judge_mode(meta.mode() & 0o7777, meta.uid(), me)
}

fn judge_mode(mode: u32, owner: u32, me: u32) -> DirVerdict {
    if owner != me {
        return DirVerdict::Refuse(format!(
            "it belongs to user {owner}, not to this user ({me}): another user could read \
             or replace the sessions kept there"
        ));
    }
    if mode & 0o077 != 0 {
        return DirVerdict::Repair { mode };
    }
    DirVerdict::Fine
}

fn secure_dir(path: &Path, meta: fs::Metadata) -> io::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    match judge_dir(&meta, me) {
        DirVerdict::Fine => Ok(()),
        DirVerdict::Repair { mode } => {
            fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{} is mode {mode:04o}, open to other users, and could not be made 0700: {e}",
                        path.display()
                    ),
                )
            })?;
            tracing::warn!(
                "{} was mode {mode:04o}, open to other users; it is now 0700",
                path.display()
            );
            Ok(())
        }
        DirVerdict::Refuse(why) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("refusing to use {}: {why}", path.display()),
        )),
    }
}

/// Copies a file a child wrote (its CLI's session, in its place of an earlier run) to a
/// new private file: the child could have made it a symbolic link to the user's keys, or
/// a FIFO, so no link is followed at either end and only a regular file is copied.
pub(crate) fn copy_child_file(from: &Path, to: &Path) -> io::Result<()> {
    let mut src = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(from)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => io::Error::other("it is a symbolic link"),
            _ => e,
        })?;
    if !src.metadata()?.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    if let Some(parent) = to.parent() {
        create_private_dir_all(parent)?;
    }
    let mut dst = open_private(
        to,
        OpenOptions::new().write(true).create(true).truncate(true),
    )?;
    io::copy(&mut src, &mut dst).map(|_| ())
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
        let id = RunId::parse("abcd1234").unwrap();
        let run = state.create_run(&id).unwrap();
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
        assert!(state.create_run(&id).is_err());
    }

    #[test]
    fn a_folder_of_another_user_is_refused_and_an_open_one_repaired() {
        assert_eq!(judge_mode(0o700, 1000, 1000), DirVerdict::Fine);
        assert_eq!(
            judge_mode(0o777, 1000, 1000),
            DirVerdict::Repair { mode: 0o777 }
        );
        assert_eq!(
            judge_mode(0o750, 1000, 1000),
            DirVerdict::Repair { mode: 0o750 }
        );
        assert!(matches!(
            judge_mode(0o700, 0, 1000),
            DirVerdict::Refuse(why) if why.contains("belongs to user 0, not to this user (1000)")
        ));
    }

    #[test]
    fn run_ids_are_eight_hex_digits() {
        assert_eq!(RunId::parse(" ABCDef01\n").unwrap().as_str(), "abcdef01");
        for bad in [
            "",
            "abc",
            "abcdef012",
            "../../x",
            "abcdefgh",
            "abcd/f01",
            "/tmp/run",
            "..",
            "abcd ef0",
        ] {
            assert_eq!(
                RunId::parse(bad),
                Err(InvalidRunId(bad.to_string())),
                "{bad}"
            );
        }
        let new = RunId::new();
        assert_eq!(RunId::parse(new.as_str()), Ok(new));
    }

    #[test]
    fn a_prefix_finds_the_one_run_it_starts() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir {
            root: tmp.path().to_path_buf(),
        };
        let prefix = |p: &str| RunIdPrefix::parse(p).unwrap();
        // No runs folder yet: nothing matches, and a whole id is taken as it is.
        assert!(
            matches!(state.find_run(&prefix("ab")), Err(FindRunError::NoMatch(p)) if p.as_str() == "ab")
        );
        assert_eq!(
            state.find_run(&prefix("ABCDEF01")).unwrap().as_str(),
            "abcdef01"
        );
        for id in ["ab12cd34", "ab99ff00", "0000aaaa"] {
            state.create_run(&RunId::parse(id).unwrap()).unwrap();
        }
        fs::create_dir(state.runs_dir().join("abzzzzzz")).unwrap();
        fs::write(state.runs_dir().join("ab12cd3"), "").unwrap();
        assert_eq!(state.find_run(&prefix("ab1")).unwrap().as_str(), "ab12cd34");
        assert_eq!(state.find_run(&prefix(" 0 ")).unwrap().as_str(), "0000aaaa");
        let e = state.find_run(&prefix("ab")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Run id prefix ab matches 2 runs: ab12cd34, ab99ff00. Give more digits."
        );
        assert!(matches!(
            state.find_run(&prefix("c")),
            Err(FindRunError::NoMatch(_))
        ));
        for bad in ["", "abcdef012", "../x", "g", "ab cd"] {
            assert_eq!(
                RunIdPrefix::parse(bad),
                Err(InvalidRunIdPrefix(bad.to_string())),
                "{bad}"
            );
        }
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
            task: None,
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
