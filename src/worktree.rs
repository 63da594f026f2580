//! `--isolation worktree`: the child works in a fresh git worktree on a branch of its own,
//! so that parallel implementers do not trample each other and the parent's checkout is
//! never touched.
//!
//! The worktree is `<state>/worktrees/<runId>` on branch `orchestrate/<runId>`, made from
//! the HEAD of the repository the working directory is in. When the run ends, what the
//! child left uncommitted is committed on that branch (so the branch holds all of it); a
//! worktree with no change is removed with its branch, one with changes stays for the
//! parent to review or merge (`orchestrate worktree rm RUN_ID` / `prune` remove them).
//! The parent's working tree and index are never written: `git worktree add` writes only
//! the repository's `.git` (the new branch, the worktree's admin folder).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Variables that would point git (ours and the child's) at another repository.
pub(crate) const GIT_LOCATION_VARS: [&str; 7] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
];

/// The branch prefix: `orchestrate/<runId>`.
pub(crate) const BRANCH_PREFIX: &str = "orchestrate/";

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

#[derive(Debug, thiserror::Error)]
pub(crate) enum WorktreeError {
    #[error("{0} is not in a git repository: --isolation worktree needs one")]
    NotARepository(String),
    #[error("the repository at {0} has no commit yet: a worktree starts from HEAD")]
    NoCommit(String),
    #[error("git is not installed (--isolation worktree needs it): {0}")]
    NoGit(std::io::Error),
    #[error("`git {args}` failed in {dir}: {message}")]
    Git {
        args: String,
        dir: String,
        message: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl WorktreeError {
    /// Whether the request itself cannot be served (rather than something failing).
    pub(crate) fn is_bad_input(&self) -> bool {
        matches!(
            self,
            WorktreeError::NotARepository(_) | WorktreeError::NoCommit(_)
        )
    }
}

/// A run's worktree while the run lasts.
#[derive(Debug, Clone)]
pub(crate) struct Worktree {
    pub repository: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    pub base_commit: String,
    /// Where the child works: the worktree, at the same place relative to its root as the
    /// working directory was in the repository.
    pub cwd: PathBuf,
    /// The worktree's own admin folder (`.git/worktrees/<name>`).
    git_dir: PathBuf,
    /// The repository's shared `.git`.
    common_dir: PathBuf,
}

/// One `git worktree add` or `remove` at a time in this process: parallel tasks of one
/// repository would otherwise race for its locks.
static GIT_WORKTREE_LOCK: Mutex<()> = Mutex::new(());

fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    git_os(dir, args.iter().map(OsStr::new))
}

fn git_os<'a>(
    dir: &Path,
    args: impl IntoIterator<Item = &'a OsStr>,
) -> Result<String, WorktreeError> {
    let args: Vec<&OsStr> = args.into_iter().collect();
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(&args);
    for var in GIT_LOCATION_VARS {
        cmd.env_remove(var);
    }
    // Never a prompt (credentials, an editor): nothing would answer it.
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .stdin(Stdio::null());
    let out = cmd.output().map_err(WorktreeError::NoGit)?;
    if !out.status.success() {
        return Err(WorktreeError::Git {
            args: args
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            dir: dir.display().to_string(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn absolute(base: &Path, p: &str) -> PathBuf {
    let p = Path::new(p.trim_end_matches('\n'));
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The worktree folder of a run.
pub(crate) fn path_for(state_root: &Path, run_id: &str) -> PathBuf {
    state_root.join("worktrees").join(run_id)
}

/// Whether `cwd` can have a worktree: in a repository with a commit. Checked before a run
/// is assigned, so that a request that cannot be served is refused as bad input.
pub(crate) fn check(cwd: &Path) -> Result<(), WorktreeError> {
    let top = match git(cwd, &["rev-parse", "--show-toplevel"]) {
        Ok(t) => PathBuf::from(t.trim_end_matches('\n')),
        Err(WorktreeError::Git { .. }) => {
            return Err(WorktreeError::NotARepository(cwd.display().to_string()))
        }
        Err(e) => return Err(e),
    };
    match git(&top, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]) {
        Ok(_) => Ok(()),
        Err(WorktreeError::Git { .. }) => Err(WorktreeError::NoCommit(top.display().to_string())),
        Err(e) => Err(e),
    }
}

impl Worktree {
    /// Makes the worktree of run `run_id` for the repository `cwd` is in. Also returns a
    /// warning when the working directory has uncommitted changes (the worktree starts
    /// from HEAD, without them).
    pub(crate) fn create(
        cwd: &Path,
        state_root: &Path,
        run_id: &str,
    ) -> Result<(Worktree, Option<String>), WorktreeError> {
        let top = match git(cwd, &["rev-parse", "--show-toplevel"]) {
            Ok(t) => PathBuf::from(t.trim_end_matches('\n')),
            Err(WorktreeError::Git { .. }) => {
                return Err(WorktreeError::NotARepository(cwd.display().to_string()))
            }
            Err(e) => return Err(e),
        };
        let prefix = git(cwd, &["rev-parse", "--show-prefix"])?;
        let base_commit = match git(&top, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]) {
            Ok(c) => c.trim().to_string(),
            Err(WorktreeError::Git { .. }) => {
                return Err(WorktreeError::NoCommit(top.display().to_string()))
            }
            Err(e) => return Err(e),
        };
        let dirty = !git(&top, &["status", "--porcelain", "--untracked-files=no"])?
            .trim()
            .is_empty();
        let path = path_for(state_root, run_id);
        if let Some(parent) = path.parent() {
            crate::session::create_private_dir_all(parent)?;
        }
        let branch = format!("{BRANCH_PREFIX}{run_id}");
        {
            let _one_at_a_time = GIT_WORKTREE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
            git_os(
                &top,
                [
                    OsStr::new("worktree"),
                    OsStr::new("add"),
                    OsStr::new("--quiet"),
                    OsStr::new("-b"),
                    OsStr::new(&branch),
                    path.as_os_str(),
                    OsStr::new(&base_commit),
                ],
            )?;
        }
        let git_dir = absolute(&path, &git(&path, &["rev-parse", "--git-dir"])?);
        let common_dir = absolute(&path, &git(&path, &["rev-parse", "--git-common-dir"])?);
        let cwd_in_tree = path.join(prefix.trim_end_matches('\n'));
        // A folder the repository does not track (nor anything in it) is not checked out.
        crate::session::create_private_dir_all(&cwd_in_tree)?;
        let warning = dirty.then(|| {
            format!(
                "{} has uncommitted changes; the worktree starts from HEAD ({}) without them",
                top.display(),
                &base_commit[..base_commit.len().min(12)]
            )
        });
        Ok((
            Worktree {
                repository: top,
                path,
                branch,
                base_commit,
                cwd: cwd_in_tree,
                git_dir,
                common_dir,
            },
            warning,
        ))
    }

    /// The repository's git folders this worktree uses (its admin folder and the shared
    /// `.git`): the sandbox keeps them read-only to the child, which only writes the
    /// worktree's files (orchestrate commits them for it when the run ends).
    pub(crate) fn git_dirs(&self) -> Vec<PathBuf> {
        vec![self.git_dir.clone(), self.common_dir.clone()]
    }

    /// Commits what the child left, measures the branch against its base, and removes the
    /// worktree and its branch when nothing changed.
    pub(crate) fn finish(&self, message: &str) -> Result<WorktreeInfo, WorktreeError> {
        let dir = &self.path;
        let status = git(dir, &["status", "--porcelain", "--untracked-files=all"])?;
        if !status.trim().is_empty() {
            git(dir, &["add", "--all"])?;
            let mut args = vec!["-c", "commit.gpgsign=false"];
            // A commit needs an identity; the user's if there is one.
            let has_identity =
                git(dir, &["config", "user.email"]).is_ok_and(|e| !e.trim().is_empty());
            if !has_identity {
                args.extend([
                    "-c",
                    "user.name=orchestrate",
                    "-c",
                    "user.email=orchestrate@localhost",
                ]);
            }
            args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
            git(dir, &args)?;
        }
        let range_base = self.base_commit.as_str();
        let names = git(dir, &["diff", "--name-only", "-z", range_base, "HEAD"])?;
        let changed_files: Vec<String> = names
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        let diff_stat = diff_stat(&git(dir, &["diff", "--numstat", range_base, "HEAD"])?);
        let head = git(dir, &["rev-parse", "HEAD"])?;
        let kept = !changed_files.is_empty() || head.trim() != self.base_commit;
        if !kept {
            remove(&self.repository, &self.path, &self.branch)?;
        }
        Ok(WorktreeInfo {
            path: self.path.display().to_string(),
            branch: self.branch.clone(),
            base_commit: self.base_commit.clone(),
            repository: self.repository.display().to_string(),
            changed_files,
            diff_stat,
            kept,
        })
    }
}

/// Sums `git diff --numstat` (binary files count as a file with no lines).
fn diff_stat(numstat: &str) -> DiffStat {
    let mut stat = DiffStat::default();
    for line in numstat.lines() {
        let mut cols = line.split('\t');
        let (Some(add), Some(del)) = (cols.next(), cols.next()) else {
            continue;
        };
        stat.files += 1;
        stat.insertions += add.parse::<u64>().unwrap_or(0);
        stat.deletions += del.parse::<u64>().unwrap_or(0);
    }
    stat
}

/// Removes a worktree (whatever is in it) and its branch. A worktree whose folder is
/// already gone is pruned from the repository's records.
pub(crate) fn remove(repository: &Path, path: &Path, branch: &str) -> Result<(), WorktreeError> {
    remove_worktree_only(repository, path)?;
    let exists = git(
        repository,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    if exists {
        git(repository, &["branch", "-D", "--quiet", branch])?;
    }
    Ok(())
}

/// Removes a worktree (whatever is in it) but keeps its branch.
pub(crate) fn remove_worktree_only(repository: &Path, path: &Path) -> Result<(), WorktreeError> {
    let _one_at_a_time = GIT_WORKTREE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if path.exists() {
        git_os(
            repository,
            [
                OsStr::new("worktree"),
                OsStr::new("remove"),
                OsStr::new("--force"),
                OsStr::new("--force"),
                path.as_os_str(),
            ],
        )?;
    } else {
        git(repository, &["worktree", "prune"])?;
    }
    Ok(())
}

/// Whether `branch` is already merged into the repository's HEAD.
pub(crate) fn is_merged(repository: &Path, branch: &str) -> bool {
    git(
        repository,
        &[
            "merge-base",
            "--is-ancestor",
            &format!("refs/heads/{branch}"),
            "HEAD",
        ],
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        git(r, &["init", "--quiet", "-b", "main"]).unwrap();
        std::fs::write(r.join("a.txt"), "one\n").unwrap();
        std::fs::create_dir_all(r.join("sub")).unwrap();
        std::fs::write(r.join("sub/b.txt"), "two\n").unwrap();
        git(r, &["add", "."]).unwrap();
        git(
            r,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "--quiet",
                "-m",
                "init",
            ],
        )
        .unwrap();
        dir
    }

    #[test]
    fn an_unchanged_worktree_is_removed_with_its_branch() {
        let r = repo();
        let state = tempfile::tempdir().unwrap();
        let (wt, warning) =
            Worktree::create(&r.path().join("sub"), state.path(), "ab12cd34").unwrap();
        assert_eq!(warning, None);
        assert_eq!(wt.cwd, wt.path.join("sub"));
        assert!(wt.cwd.join("b.txt").is_file());
        assert_eq!(wt.branch, "orchestrate/ab12cd34");
        let info = wt.finish("m").unwrap();
        assert_eq!(
            (info.kept, info.changed_files.len(), info.diff_stat),
            (false, 0, DiffStat::default())
        );
        assert!(!wt.path.exists());
        assert!(!is_merged(r.path(), &wt.branch), "the branch is gone");
    }

    #[test]
    fn changes_left_uncommitted_are_committed_on_the_branch_and_kept() {
        let r = repo();
        let state = tempfile::tempdir().unwrap();
        let (wt, _) = Worktree::create(r.path(), state.path(), "cd34ab12").unwrap();
        std::fs::write(wt.path.join("a.txt"), "one\nmore\n").unwrap();
        std::fs::write(wt.path.join("new.txt"), "x\n").unwrap();
        let info = wt.finish("orchestrate: test").unwrap();
        assert_eq!(
            (info.kept, info.changed_files, info.diff_stat),
            (
                true,
                vec!["a.txt".to_string(), "new.txt".to_string()],
                DiffStat {
                    files: 2,
                    insertions: 2,
                    deletions: 0
                }
            )
        );
        let log = git(
            r.path(),
            &["log", "--format=%s", "orchestrate/cd34ab12", "-1"],
        )
        .unwrap();
        assert_eq!(log.trim(), "orchestrate: test");
        // The parent's checkout is untouched.
        assert_eq!(
            std::fs::read_to_string(r.path().join("a.txt")).unwrap(),
            "one\n"
        );
        assert!(git(r.path(), &["status", "--porcelain"])
            .unwrap()
            .is_empty());
        remove(r.path(), &wt.path, &wt.branch).unwrap();
        assert!(!wt.path.exists());
    }

    #[test]
    fn a_folder_outside_a_repository_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let err = Worktree::create(dir.path(), state.path(), "ab12cd34").unwrap_err();
        assert!(err.is_bad_input());
        assert_eq!(
            err.to_string(),
            format!(
                "{} is not in a git repository: --isolation worktree needs one",
                dir.path().display()
            )
        );
    }

    #[test]
    fn numstat_sums_lines_and_counts_binary_files() {
        assert_eq!(
            diff_stat("3\t1\ta.txt\n-\t-\timg.png\n0\t4\tb.txt\n"),
            DiffStat {
                files: 3,
                insertions: 3,
                deletions: 5
            }
        );
    }
}
