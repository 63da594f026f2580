//! Git repositories for the worktree tests (tests/worktrees.rs over the fake child, and the
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
