//! `--isolation worktree`: the child works in a fresh git worktree on a branch of its own,
//! so that parallel implementers do not trample each other and the parent's checkout is
//! never touched.
//!
//! The worktree is `<state>/worktrees/<runId>` on branch `orchestrate/<runId>`, made from
//! the HEAD of the repository the working directory is in. When the run ends, what the
//! child left uncommitted is committed on that branch (so the branch holds all of it); a
//! worktree with no change is removed with its branch, one with changes stays for the
//! parent to review or merge (`orchestrate worktree rm RUN_ID` / `prune` remove them).
//! The parent's working tree and index are never written: orchestrate writes only the
//! repository's `.git` (the new branch, the worktree's admin folder).
//!
//! The child is not trusted, and orchestrate's git runs outside its sandbox, so:
//! - that git runs no program the repository, a configuration or the environment names
//!   ([`git`]), and names the worktree's git dir itself;
//! - before it commits, the worktree's git metadata is checked to be what `git worktree
//!   add` wrote (else nothing is committed), and the repository's refs are compared with
//!   what they were when the child started;
//! - every worktree is in orchestrate's list ([`record`]) before git makes it, so one whose
//!   orchestrate was killed at any step is still listed and removable;
//! - worktrees are made and removed one at a time per repository ([`lock`]), and removed
//!   without running git in them.

mod git;
mod lock;
pub(crate) mod record;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use git::{absolute, read_plain_file, At, Git, STEP_TIMEOUT, WORK_TIMEOUT};
use lock::{RepoLock, REPO_LOCK_WAIT};
use record::{Made, Record, Step};

pub(crate) use crate::result::{DiffStat, WorktreeInfo};

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
    #[error("branch {0} already exists: orchestrate never reuses a branch it did not make")]
    BranchExists(String),
    #[error(
        "another process has held the worktree lock on {dir} for {waited_s} s (an orchestrate making or removing a worktree of this repository)"
    )]
    Locked { dir: String, waited_s: u64 },
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
#[derive(Debug)]
pub(crate) struct Worktree {
    pub repository: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    pub base_commit: String,
    /// Where the child works: the worktree, at the same place relative to its root as the
    /// working directory was in the repository.
    pub cwd: PathBuf,
    /// The worktree's own git dir (`<common>/worktrees/<name>`).
    git_dir: PathBuf,
    /// The repository's shared git dir.
    common_dir: PathBuf,
    /// What `git worktree add` wrote, checked before orchestrate's git uses it again.
    made: Made,
    /// The repository's refs (but orchestrate's branches) when the child started.
    refs_before: BTreeMap<String, String>,
    /// This worktree's entry in orchestrate's list, held while the run lives.
    record: record::Held,
}

/// How many times `git worktree add` is tried while a sibling's half-made worktree (not
/// orchestrate's: those wait for the lock) makes git's listing of worktrees fail.
const ADD_ATTEMPTS: u32 = 8;

/// The worktree folder of a run.
pub(crate) fn path_for(state_root: &Path, run_id: &str) -> PathBuf {
    state_root.join("worktrees").join(run_id)
}

/// The repository `cwd` is in: its top folder, `cwd` relative to it, its shared git dir.
fn locate(cwd: &Path) -> Result<(PathBuf, String, PathBuf), WorktreeError> {
    let out = match Git::new(At::Discover(cwd)).run(
        &[
            "rev-parse",
            "--show-toplevel",
            "--show-prefix",
            "--path-format=absolute",
            "--git-common-dir",
        ],
        STEP_TIMEOUT,
    ) {
        Ok(out) => out,
        Err(WorktreeError::Git { .. }) => {
            return Err(WorktreeError::NotARepository(cwd.display().to_string()))
        }
        Err(e) => return Err(e),
    };
    let mut lines = out.split('\n');
    let (Some(top), Some(prefix), Some(common)) = (lines.next(), lines.next(), lines.next()) else {
        return Err(WorktreeError::NotARepository(cwd.display().to_string()));
    };
    if top.is_empty() {
        // A bare repository, or inside a `.git`.
        return Err(WorktreeError::NotARepository(cwd.display().to_string()));
    }
    Ok((
        PathBuf::from(top),
        prefix.to_string(),
        PathBuf::from(common),
    ))
}

fn head_commit(top: &Path) -> Result<String, WorktreeError> {
    match Git::new(At::Discover(top)).run(
        &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        STEP_TIMEOUT,
    ) {
        Ok(c) => Ok(c.trim().to_string()),
        Err(WorktreeError::Git { .. }) => Err(WorktreeError::NoCommit(top.display().to_string())),
        Err(e) => Err(e),
    }
}

/// Whether `cwd` can have a worktree: in a repository with a commit. Checked before a run
/// is assigned, so that a request that cannot be served is refused as bad input.
pub(crate) fn check(cwd: &Path) -> Result<(), WorktreeError> {
    let (top, _, _) = locate(cwd)?;
    head_commit(&top).map(drop)
}

/// What of the checkout the worktree will not have, said in `warnings`: uncommitted
/// changes to tracked files and untracked files (ignored ones are not counted).
fn left_behind(git: &Git, top: &Path, base_commit: &str) -> Result<Option<String>, WorktreeError> {
    let status = git.run(
        &[
            "status",
            "--porcelain",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=dirty",
        ],
        STEP_TIMEOUT,
    )?;
    let (mut tracked, mut untracked) = (0usize, 0usize);
    let mut fields = status.split('\0');
    while let Some(entry) = fields.next() {
        if entry.len() < 3 {
            continue;
        }
        if entry.starts_with("??") {
            untracked += 1;
        } else {
            tracked += 1;
            // A rename or copy names its source in the next field.
            if matches!(entry.as_bytes()[0], b'R' | b'C') {
                fields.next();
            }
        }
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let what = match (tracked, untracked) {
        (0, 0) => return Ok(None),
        (t, 0) => plural(
            t,
            "uncommitted change to tracked files",
            "uncommitted changes to tracked files",
        ),
        (0, u) => plural(u, "untracked file", "untracked files"),
        (t, u) => format!(
            "{} and {}",
            plural(
                t,
                "uncommitted change to tracked files",
                "uncommitted changes to tracked files"
            ),
            plural(u, "untracked file", "untracked files")
        ),
    };
    Ok(Some(format!(
        "{} has {what}; the worktree starts from HEAD ({}) without them",
        top.display(),
        &base_commit[..base_commit.len().min(12)]
    )))
}

/// The repository's refs with the objects they name, but orchestrate's own branches
/// (which concurrent runs make and remove).
fn user_refs(common_dir: &Path) -> Result<BTreeMap<String, String>, WorktreeError> {
    let out = Git::new(At::Repository(common_dir)).run(
        &["for-each-ref", "--format=%(refname) %(objectname)"],
        STEP_TIMEOUT,
    )?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(r, _)| !r.starts_with(&format!("refs/heads/{BRANCH_PREFIX}")))
        .map(|(r, o)| (r.to_string(), o.to_string()))
        .collect())
}

fn short(oid: &str) -> &str {
    &oid[..oid.len().min(12)]
}

/// The refs that differ, as one warning.
fn refs_warning(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Option<String> {
    let mut changes = Vec::new();
    for (name, old) in before {
        match after.get(name) {
            Some(new) if new == old => {}
            Some(new) => changes.push(format!("{name} {} → {}", short(old), short(new))),
            None => changes.push(format!("{name} deleted (was {})", short(old))),
        }
    }
    for (name, new) in after {
        if !before.contains_key(name) {
            changes.push(format!("{name} created at {}", short(new)));
        }
    }
    (!changes.is_empty()).then(|| {
        format!(
            "the repository's refs changed during the run, not by orchestrate (if you did not change them, the child did): {}",
            changes.join(", ")
        )
    })
}

/// Reads what `git worktree add` wrote for the worktree at `path`.
fn capture(path: &Path, common_dir: &Path) -> Result<Made, WorktreeError> {
    let text = |p: &Path| -> Result<Option<String>, WorktreeError> {
        Ok(read_plain_file(p, METADATA_MAX_BYTES)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    };
    let missing = |p: &Path| std::io::Error::other(format!("{} is missing", p.display()));
    let pointer = text(&path.join(".git"))?.ok_or_else(|| missing(&path.join(".git")))?;
    let git_dir = pointer
        .strip_prefix("gitdir:")
        .map(|g| absolute(path, g.trim()))
        .ok_or_else(|| {
            std::io::Error::other(format!("{}/.git is not a git file", path.display()))
        })?;
    // git makes it in `<common>/worktrees/`: anything else is not what orchestrate made.
    if git_dir.parent() != Some(common_dir.join("worktrees").as_path()) {
        return Err(std::io::Error::other(format!(
            "{}/.git points outside {}/worktrees",
            path.display(),
            common_dir.display()
        ))
        .into());
    }
    let file = |name: &str| text(&git_dir.join(name));
    Ok(Made {
        git_dir_id: dir_id(&git_dir)?,
        commondir: file("commondir")?.ok_or_else(|| missing(&git_dir.join("commondir")))?,
        gitdir: file("gitdir")?.ok_or_else(|| missing(&git_dir.join("gitdir")))?,
        head: file("HEAD")?.ok_or_else(|| missing(&git_dir.join("HEAD")))?,
        config_worktree: file("config.worktree")?,
        git_dir: git_dir.display().to_string(),
        pointer,
    })
}

/// The most a metadata file of git's may hold (they are one line).
const METADATA_MAX_BYTES: u64 = 64 * 1024;

/// Device and inode of a real directory (not a symbolic link to one).
fn dir_id(dir: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    Ok((meta.dev(), meta.ino()))
}

/// What differs between the worktree's git metadata now and as it was made, by name;
/// empty when nothing does.
fn changed_metadata(path: &Path, made: &Made) -> Vec<&'static str> {
    let git_dir = Path::new(&made.git_dir);
    let now = |p: &Path| {
        read_plain_file(p, METADATA_MAX_BYTES)
            .map(|b| b.map(|b| String::from_utf8_lossy(&b).into_owned()))
            .map_err(drop)
    };
    let mut changed = Vec::new();
    if dir_id(git_dir).ok() != Some(made.git_dir_id) {
        changed.push("its git dir");
    }
    let files: [(&'static str, PathBuf, Option<&String>); 5] = [
        (".git", path.join(".git"), Some(&made.pointer)),
        (
            "commondir",
            git_dir.join("commondir"),
            Some(&made.commondir),
        ),
        ("gitdir", git_dir.join("gitdir"), Some(&made.gitdir)),
        ("HEAD", git_dir.join("HEAD"), Some(&made.head)),
        (
            "config.worktree",
            git_dir.join("config.worktree"),
            made.config_worktree.as_ref(),
        ),
    ];
    for (name, file, want) in files {
        if now(&file) != Ok(want.cloned()) {
            changed.push(name);
        }
    }
    changed
}

impl Worktree {
    /// Makes the worktree of run `run_id` for the repository `cwd` is in. Also returns a
    /// warning when the checkout has changes the worktree will not have (it starts from
    /// HEAD).
    pub(crate) fn create(
        cwd: &Path,
        state_root: &Path,
        run_id: &str,
    ) -> Result<(Worktree, Option<String>), WorktreeError> {
        let (top, prefix, common_dir) = locate(cwd)?;
        let base_commit = head_commit(&top)?;
        let at_top = Git::new(At::Discover(&top)).neutralized()?;
        let warning = left_behind(&at_top, &top, &base_commit)?;
        let path = path_for(state_root, run_id);
        let branch = format!("{BRANCH_PREFIX}{run_id}");
        // Listed before anything exists, so that a kill at any later step leaves a
        // worktree that `runs` shows and `worktree prune` removes.
        let mut held = record::Held::create(
            state_root,
            Record {
                run_id: run_id.to_string(),
                path: path.display().to_string(),
                branch: branch.clone(),
                repository: top.display().to_string(),
                common_dir: common_dir.display().to_string(),
                base_commit: base_commit.clone(),
                step: Step::Creating,
                made: None,
            },
        )?;
        let made = match add(&common_dir, &path, &branch, &base_commit) {
            Ok(made) => made,
            Err(e) => {
                // Whatever the failed step left goes, but a branch of the same name that
                // was there before (which `add` never touches).
                if !matches!(e, WorktreeError::BranchExists(_)) {
                    let _ = remove_made(state_root, held.record(), false);
                }
                held.remove();
                return Err(e);
            }
        };
        let refs_before = user_refs(&common_dir)?;
        held.update(|r| {
            r.step = Step::Working;
            r.made = Some(made.clone());
        })?;
        let cwd_in_tree = path.join(prefix);
        // A folder the repository does not track (nor anything in it) is not checked out.
        crate::session::create_private_dir_all(&cwd_in_tree)?;
        Ok((
            Worktree {
                repository: top,
                git_dir: PathBuf::from(&made.git_dir),
                path,
                branch,
                base_commit,
                cwd: cwd_in_tree,
                common_dir,
                made,
                refs_before,
                record: held,
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
    /// worktree and its branch when nothing changed. The warnings say what the result
    /// should know: metadata the child changed (then nothing is committed), refs that
    /// moved, files inside submodules.
    pub(crate) fn finish(
        mut self,
        message: &str,
    ) -> Result<(WorktreeInfo, Vec<String>), WorktreeError> {
        let settled = self.settle(message);
        if settled.as_ref().is_ok_and(|(info, _)| !info.kept) {
            let record = self.record.record().clone();
            remove_made(self.record.state_root(), &record, false)?;
            self.record.remove();
        } else {
            let _ = self.record.update(|r| r.step = Step::Kept);
        }
        settled
    }

    fn settle(&self, message: &str) -> Result<(WorktreeInfo, Vec<String>), WorktreeError> {
        let mut warnings = Vec::new();
        let after = user_refs(&self.common_dir)?;
        warnings.extend(refs_warning(&self.refs_before, &after));
        let mut info = WorktreeInfo {
            path: self.path.display().to_string(),
            branch: self.branch.clone(),
            base_commit: self.base_commit.clone(),
            repository: self.repository.display().to_string(),
            changed_files: Vec::new(),
            diff_stat: DiffStat::default(),
            kept: true,
        };
        let changed = changed_metadata(&self.path, &self.made);
        if !changed.is_empty() {
            warnings.insert(
                0,
                format!(
                    "the worktree was not committed: the child changed its git metadata ({}), so orchestrate ran no git in it; it is kept at {} for you to inspect (`orchestrate worktree rm {}` removes it)",
                    changed.join(", "),
                    self.path.display(),
                    self.record.record().run_id
                ),
            );
            return Ok((info, warnings));
        }
        let git = Git::new(At::Worktree {
            git_dir: &self.git_dir,
            work_tree: &self.path,
        })
        .neutralized()?;
        let status = git.run(
            &[
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=dirty",
            ],
            STEP_TIMEOUT,
        )?;
        if !status.is_empty() {
            git.run(&["add", "--all"], WORK_TIMEOUT)?;
            let mut args = vec!["-c", "commit.gpgsign=false"];
            // A commit needs an identity; the user's if there is one.
            let has_identity = std::env::var_os("GIT_COMMITTER_EMAIL").is_some()
                || git
                    .run(&["config", "user.email"], STEP_TIMEOUT)
                    .is_ok_and(|e| !e.trim().is_empty());
            if !has_identity {
                args.extend([
                    "-c",
                    "user.name=orchestrate",
                    "-c",
                    "user.email=orchestrate@localhost",
                ]);
            }
            args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
            git.run(&args, WORK_TIMEOUT)?;
        }
        let tip = format!("refs/heads/{}", self.branch);
        let base = self.base_commit.as_str();
        let names = git.run(
            &[
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--name-only",
                "-z",
                base,
                &tip,
            ],
            STEP_TIMEOUT,
        )?;
        info.changed_files = names
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        info.diff_stat = diff_stat(&git.run(
            &[
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "--numstat",
                base,
                &tip,
            ],
            STEP_TIMEOUT,
        )?);
        let head = git.run(&["rev-parse", "--verify", &tip], STEP_TIMEOUT)?;
        info.kept = !info.changed_files.is_empty() || head.trim() != self.base_commit;
        warnings.extend(submodule_warnings(&git, &self.path)?);
        Ok((info, warnings))
    }
}

/// The most file names one submodule's warning lists.
const SUBMODULE_FILES_LISTED: usize = 20;

/// Files in the worktree inside a submodule's folder: a worktree's submodules are not
/// checked out, and orchestrate commits the superproject only, so they are on no branch.
fn submodule_warnings(git: &Git, root: &Path) -> Result<Vec<String>, WorktreeError> {
    if !root.join(".gitmodules").exists() {
        return Ok(Vec::new());
    }
    let staged = git.run(&["ls-files", "--stage", "-z"], STEP_TIMEOUT)?;
    let mut warnings = Vec::new();
    for entry in staged.split('\0') {
        let Some((meta, sub)) = entry.split_once('\t') else {
            continue;
        };
        if !meta.starts_with("160000 ") {
            continue;
        }
        let dir = root.join(sub);
        if std::fs::symlink_metadata(dir.join(".git")).is_ok() {
            warnings.push(format!(
                "submodule {sub} was checked out in the worktree during the run; orchestrate commits the superproject only, so changes inside it are not on the branch"
            ));
            continue;
        }
        let mut files = Vec::new();
        let total = walk_files(&dir, root, &mut files, SUBMODULE_FILES_LISTED);
        if total == 0 {
            continue;
        }
        let mut list = files.join(", ");
        if total > files.len() {
            list.push_str(&format!(" and {} more", total - files.len()));
        }
        warnings.push(format!(
            "files written inside submodule {sub} are not committed (orchestrate commits the superproject only; a worktree's submodules are not checked out): {list}"
        ));
    }
    Ok(warnings)
}

/// Counts the files under `dir` (symbolic links not followed), keeping the first `keep`
/// names relative to `root`, sorted.
fn walk_files(dir: &Path, root: &Path, names: &mut Vec<String>, keep: usize) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut total = 0;
    for e in entries {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => total += walk_files(&p, root, names, keep),
            Ok(_) => {
                total += 1;
                if names.len() < keep {
                    let rel = p.strip_prefix(root).unwrap_or(&p);
                    names.push(rel.display().to_string());
                }
            }
            Err(_) => {}
        }
    }
    total
}

/// Makes branch `branch` at `base` and the worktree at `path` on it, one orchestrate at a
/// time per repository, and returns what git wrote.
fn add(common_dir: &Path, path: &Path, branch: &str, base: &str) -> Result<Made, WorktreeError> {
    if let Some(parent) = path.parent() {
        crate::session::create_private_dir_all(parent)?;
    }
    let repo = Git::new(At::Repository(common_dir)).neutralized()?;
    let _lock = RepoLock::acquire(common_dir, REPO_LOCK_WAIT)?;
    // The branch first, on its own: `update-ref` with an empty old value makes it only
    // if no ref of that name exists, so a branch orchestrate did not make is never moved.
    let ref_name = format!("refs/heads/{branch}");
    repo.run(
        &[
            "update-ref",
            "-m",
            "orchestrate: worktree branch",
            &ref_name,
            base,
            "",
        ],
        STEP_TIMEOUT,
    )
    .map_err(|e| match e {
        WorktreeError::Git { ref message, .. } if message.contains("already exists") => {
            WorktreeError::BranchExists(branch.to_string())
        }
        e => e,
    })?;
    let mut pause = Duration::from_millis(50);
    for attempt in 1.. {
        let added = repo.run_os(
            &[
                OsStr::new("worktree"),
                OsStr::new("add"),
                OsStr::new("--quiet"),
                path.as_os_str(),
                OsStr::new(branch),
            ],
            WORK_TIMEOUT,
        );
        match added {
            Ok(_) => break,
            // Someone else's `worktree add` half-way through: it will be done soon.
            Err(WorktreeError::Git { ref message, .. })
                if attempt < ADD_ATTEMPTS && message.contains("failed to read") =>
            {
                std::thread::sleep(pause);
                pause *= 2;
            }
            Err(e) => return Err(e),
        }
    }
    capture(path, common_dir)
}

/// Removes what orchestrate made for `record` (its worktree folder, the worktree's git
/// dir, and unless `keep_branch` its branch), whatever step it got to, and the record.
/// Nothing of git's runs in the worktree: a child may have rewritten its metadata.
pub(crate) fn remove_made(
    state_root: &Path,
    record: &Record,
    keep_branch: bool,
) -> Result<(), WorktreeError> {
    let common_dir = Path::new(&record.common_dir);
    let path = Path::new(&record.path);
    let _lock = RepoLock::acquire(common_dir, REPO_LOCK_WAIT)?;
    let git_dirs = own_git_dirs(common_dir, path, &record.run_id, record.made.as_ref());
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    for dir in git_dirs {
        std::fs::remove_dir_all(&dir)?;
    }
    if !keep_branch {
        let repo = Git::new(At::Repository(common_dir));
        let ref_name = format!("refs/heads/{}", record.branch);
        if repo
            .run(
                &["rev-parse", "--verify", "--quiet", &ref_name],
                STEP_TIMEOUT,
            )
            .is_ok()
        {
            repo.run(&["update-ref", "-d", &ref_name], STEP_TIMEOUT)?;
        }
    }
    record::remove(state_root, &record.run_id);
    Ok(())
}

/// The git dirs in `<common>/worktrees/` that belong to the worktree at `path`: the one
/// recorded, and any git named after the run (`<runId>`, `<runId>1`, … when a stale one
/// was in the way) whose `gitdir` names `path` or is not written yet (a killed add).
fn own_git_dirs(common_dir: &Path, path: &Path, run_id: &str, made: Option<&Made>) -> Vec<PathBuf> {
    let admin = common_dir.join("worktrees");
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(m) = made {
        let dir = PathBuf::from(&m.git_dir);
        if dir_id(&dir).ok() == Some(m.git_dir_id) {
            out.push(dir);
        }
    }
    let Ok(entries) = std::fs::read_dir(&admin) else {
        return out;
    };
    let pointer = path.join(".git");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(run_id) else {
            continue;
        };
        if !rest.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = e.path();
        if out.contains(&dir) || dir_id(&dir).is_err() {
            continue;
        }
        let gitdir = read_plain_file(&dir.join("gitdir"), METADATA_MAX_BYTES)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string());
        let ours = match gitdir.as_deref() {
            None | Some("") => true,
            Some(g) => absolute(&dir, g) == pointer,
        };
        if ours {
            out.push(dir);
        }
    }
    out
}

/// What a listed worktree holds, for `worktree prune`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Condition {
    /// Nothing that is not on its branch.
    Clean,
    Uncommitted,
    /// Its git metadata is not what orchestrate made (names what changed).
    Tampered(String),
    /// Could not be told (a half-made worktree, a git that failed).
    Unknown(String),
}

/// Whether the worktree of `record` holds anything not on its branch.
pub(crate) fn condition(record: &Record) -> Condition {
    let path = Path::new(&record.path);
    if std::fs::symlink_metadata(path).is_err() {
        return Condition::Clean;
    }
    let common_dir = Path::new(&record.common_dir);
    let git_dir = match &record.made {
        Some(made) => {
            let changed = changed_metadata(path, made);
            if !changed.is_empty() {
                return Condition::Tampered(changed.join(", "));
            }
            PathBuf::from(&made.git_dir)
        }
        None => match own_git_dirs(common_dir, path, &record.run_id, None).pop() {
            Some(dir) => dir,
            None => return Condition::Unknown("it has no git metadata".into()),
        },
    };
    let status = Git::new(At::Worktree {
        git_dir: &git_dir,
        work_tree: path,
    })
    .neutralized()
    .and_then(|git| {
        git.run(
            &[
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
                "--ignore-submodules=dirty",
            ],
            STEP_TIMEOUT,
        )
    });
    match status {
        Ok(s) if s.is_empty() => Condition::Clean,
        Ok(_) => Condition::Uncommitted,
        Err(e) => Condition::Unknown(e.to_string()),
    }
}

/// The shared git dir of the repository at `repository` (for worktrees listed only in the
/// run index, by versions that kept no record).
pub(crate) fn common_dir_of(repository: &Path) -> Result<PathBuf, WorktreeError> {
    locate(repository).map(|(_, _, common)| common)
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

/// Whether `branch` is merged into the repository's HEAD; a branch that does not exist
/// (a run killed before it was made) has nothing unmerged.
pub(crate) fn is_merged(common_dir: &Path, repository: &Path, branch: &str) -> bool {
    let ref_name = format!("refs/heads/{branch}");
    let repo = Git::new(At::Repository(common_dir));
    if repo
        .run(
            &["rev-parse", "--verify", "--quiet", &ref_name],
            STEP_TIMEOUT,
        )
        .is_err()
    {
        return true;
    }
    Git::new(At::Discover(repository))
        .run(
            &["merge-base", "--is-ancestor", &ref_name, "HEAD"],
            STEP_TIMEOUT,
        )
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn git(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
        Git::new(At::Discover(dir)).run(args, STEP_TIMEOUT)
    }

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
        let (path, common) = (wt.path.clone(), wt.common_dir.clone());
        let (info, warnings) = wt.finish("m").unwrap();
        assert_eq!(
            (
                info.kept,
                info.changed_files.len(),
                info.diff_stat,
                warnings
            ),
            (false, 0, DiffStat::default(), vec![])
        );
        assert!(!path.exists());
        assert_eq!(
            git(r.path(), &["branch", "--list", "orchestrate/*"]).unwrap(),
            ""
        );
        assert!(!common.join("worktrees/ab12cd34").exists());
        assert_eq!(record::list(state.path()), vec![]);
    }

    #[test]
    fn changes_left_uncommitted_are_committed_on_the_branch_and_kept() {
        let r = repo();
        let state = tempfile::tempdir().unwrap();
        let (wt, _) = Worktree::create(r.path(), state.path(), "cd34ab12").unwrap();
        std::fs::write(wt.path.join("a.txt"), "one\nmore\n").unwrap();
        std::fs::write(wt.path.join("new.txt"), "x\n").unwrap();
        let path = wt.path.clone();
        let (info, _) = wt.finish("orchestrate: test").unwrap();
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
        let listed = record::list(state.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].0.step, listed[0].1, condition(&listed[0].0)),
            (Step::Kept, record::Owner::Gone, Condition::Clean)
        );
        std::fs::write(path.join("later.txt"), "x\n").unwrap();
        assert_eq!(condition(&listed[0].0), Condition::Uncommitted);
        remove_made(state.path(), &listed[0].0, false).unwrap();
        assert!(!path.exists());
        assert_eq!(
            git(r.path(), &["branch", "--list", "orchestrate/*"]).unwrap(),
            ""
        );
        assert_eq!(record::list(state.path()), vec![]);
    }

    #[test]
    fn a_branch_that_exists_is_never_reused_nor_moved() {
        let r = repo();
        let state = tempfile::tempdir().unwrap();
        git(r.path(), &["branch", "orchestrate/ee12cd34"]).unwrap();
        let tip = git(r.path(), &["rev-parse", "orchestrate/ee12cd34"]).unwrap();
        let err = Worktree::create(r.path(), state.path(), "ee12cd34").unwrap_err();
        assert_eq!(
            err.to_string(),
            "branch orchestrate/ee12cd34 already exists: orchestrate never reuses a branch it did not make"
        );
        assert_eq!(
            git(r.path(), &["rev-parse", "orchestrate/ee12cd34"]).unwrap(),
            tip
        );
        assert!(!path_for(state.path(), "ee12cd34").exists());
        assert_eq!(record::list(state.path()), vec![]);
        // A branch named like orchestrate's prefix blocks every one under it: said, not hidden.
        git(r.path(), &["branch", "-D", "orchestrate/ee12cd34"]).unwrap();
        git(r.path(), &["branch", "orchestrate"]).unwrap();
        let err = Worktree::create(r.path(), state.path(), "ff12cd34").unwrap_err();
        assert!(err.to_string().contains("refs/heads/orchestrate"), "{err}");
        assert_eq!(record::list(state.path()), vec![]);
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
