//! Git repositories for the worktree tests (tests/all/worktrees.rs over the fake child, and the
//! contract scenarios over the real CLIs): a repository with one commit, `git` run in it, and
//! what of a checkout must not change.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

/// `git -C dir ARGS…`; its stdout. Panics with git's stderr when it fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `dir` as a repository on branch `main` whose one commit holds `files` (path, text).
pub fn commit_files(dir: &Path, files: &[(&str, &str)]) {
    git(dir, &["init", "--quiet", "-b", "main"]);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "."]);
    let who = ["-c", "user.name=t", "-c", "user.email=t@t"];
    git(
        dir,
        &[&who[..], &["commit", "--quiet", "-m", "init"]].concat(),
    );
}

/// Every file of the checkout (outside `.git`) with its bytes, the index and HEAD: what
/// must not change.
pub type CheckoutState = (BTreeMap<String, Vec<u8>>, Vec<u8>, String);

pub fn checkout_state(dir: &Path) -> CheckoutState {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    let index = std::fs::read(dir.join(".git/index")).unwrap();
    (files, index, git(dir, &["rev-parse", "HEAD"]))
}

/// The real git, as found on PATH before a test puts a wrapper in front of it.
pub fn real_git() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|p| p.is_file())
        .expect("git on PATH")
}

/// A folder holding a `git` that runs `before` (sh), with `$sub` and `$sub2` set to git's
/// subcommand and the word after it (options and their values skipped), then the real git
/// with the same arguments, then `after` (with `$rc` its exit status). Put first on PATH,
/// it lets a test stall orchestrate's own git at a chosen step.
pub fn wrapper(dir: &Path, before: &str, after: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let script = format!(
        r#"#!/bin/sh
sub=""; sub2=""; skip=0; found=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  if [ "$found" = 1 ]; then sub2="$a"; break; fi
  case "$a" in
    -c|-C) skip=1 ;;
    -*) ;;
    *) sub="$a"; found=1 ;;
  esac
done
{before}
"{git}" "$@"
rc=$?
{after}
exit $rc
"#,
        git = real_git().display()
    );
    let path = dir.join("git");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.to_path_buf()
}

/// `PATH` with `dir` first.
pub fn path_with(dir: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", dir.display())
}

/// Every ref of the repository with the object it names: what a run must not move.
pub fn refs(dir: &Path) -> BTreeMap<String, String> {
    git(dir, &["for-each-ref", "--format=%(refname) %(objectname)"])
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(r, o)| (r.to_string(), o.to_string()))
        .collect()
}

/// Waits until `path` exists (a test's rendezvous with a process it started), at most
/// `limit`.
pub fn wait_for_file(path: &Path, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
