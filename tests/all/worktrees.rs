//! `--isolation worktree`, through the fake agent: each child in a git worktree of its
//! own on branch `orchestrate/<runId>`, the parent's checkout untouched, unchanged
//! worktrees removed, changed ones kept, listed, and removed by `orchestrate worktree`.

use crate::support;

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::git::{checkout_state, git};
use support::Sandbox;

const WRITER: &str =
    "---\nname: writer\ndescription: d\ntools: read, bash\nbackend: pi\n---\nYou write.\n";

/// `sb.work` as a repository with a commit, and the writer agent.
fn repository() -> Sandbox {
    let sb = Sandbox::new()
        .scenario("write-probe")
        .set("ORCHESTRATE_SANDBOX", "auto");
    std::fs::write(sb.agents.join("writer.md"), WRITER).unwrap();
    support::git::commit_files(
        &sb.work,
        &[("README.md", "hello\n"), ("src/lib.rs", "fn main() {}\n")],
    );
    sb
}

fn run_json(sb: &Sandbox, args: &[&str]) -> (i32, Value) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut all = args.to_vec();
    // The whole record: these tests read the child's answer beside the worktree.
    all.extend_from_slice(&["--agents-dir", &agents, "--details", "full"]);
    let out = sb.run_args(&all);
    let v = out.json();
    (out.status, v)
}

#[test]
fn parallel_implementers_get_a_branch_each_and_the_checkout_is_byte_for_byte_unchanged() {
    let sb = repository();
    let before = checkout_state(&sb.work);
    // Each child writes in its own working directory (the worktree), and tries the
    // parent's checkout by its absolute path: workspace-write means the worktree.
    let outside = sb.work.join("src/escaped.txt").display().to_string();
    let sb = sb.set(
        "FAKE_AGENT_WRITE_PATHS",
        &format!("changed.txt:src/new.rs:{outside}"),
    );
    let (status, v) = run_json(
        &sb,
        &[
            "run",
            "--task",
            "writer=one",
            "--task",
            "writer=two",
            "--task",
            "writer=three",
            "--isolation",
            "worktree",
        ],
    );
    assert_eq!(status, 0, "{v}");
    let results = v["details"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let base = git(&sb.work, &["rev-parse", "HEAD"]).trim().to_string();
    let mut branches = Vec::new();
    for r in results {
        let id = r["runId"].as_str().unwrap();
        let wt = &r["worktree"];
        let path = sb.state.join("worktrees").join(id);
        assert_eq!(
            wt,
            &json!({
                "path": path.display().to_string(),
                "branch": format!("orchestrate/{id}"),
                "baseCommit": base,
                "repository": sb.work.display().to_string(),
                "changedFiles": ["changed.txt", "src/new.rs"],
                "diffStat": {"files": 2, "insertions": 2, "deletions": 0},
                "kept": true
            }),
            "{r}"
        );
        assert_eq!(
            r["output"],
            json!(format!(
                "changed.txt: ok\nsrc/new.rs: ok\n{outside}: entity not found"
            )),
            "the parent's checkout is out of reach: {r}"
        );
        assert_eq!(
            r["sandbox"],
            json!({"mode": "workspace-write", "mechanism": "namespaces", "layers": ["pid-namespace", "mounts", "landlock", "scopes", "seccomp", "no-tty"]})
        );
        // The branch holds the child's change, committed for it.
        let branch = format!("orchestrate/{id}");
        assert_eq!(
            git(&sb.work, &["show", &format!("{branch}:changed.txt")]),
            format!("probe {id}\n")
        );
        branches.push(branch);
    }
    branches.sort();
    branches.dedup();
    assert_eq!(branches.len(), 3, "three branches");
    assert_eq!(
        checkout_state(&sb.work),
        before,
        "the parent's checkout, index and HEAD are unchanged"
    );
    assert!(!Path::new(&outside).exists());

    // Listed by `runs`, removed by `worktree rm` and `worktree prune`.
    let listed = |sb: &Sandbox| {
        let out = sb.command(&["runs", "--json"]).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["worktrees"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["branch"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let mut got = listed(&sb);
    got.sort();
    assert_eq!(got, branches);
    let first = results[0]["runId"].as_str().unwrap();
    let out = sb
        .command(&["worktree", "rm", first, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!sb.state.join("worktrees").join(first).exists());
    assert_eq!(
        git(
            &sb.work,
            &["branch", "--list", &format!("orchestrate/{first}")]
        ),
        ""
    );
    // Not merged: prune keeps them; --all removes them.
    let out = sb
        .command(&["worktree", "prune", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["removed"].as_array().unwrap().len(),
            v["kept"].as_array().unwrap().len()
        ),
        (0, 2),
        "{v}"
    );
    let out = sb
        .command(&["worktree", "prune", "--all", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(listed(&sb), Vec::<String>::new());
    assert_eq!(git(&sb.work, &["branch", "--list", "orchestrate/*"]), "");
    assert_eq!(checkout_state(&sb.work), before);
}

#[test]
fn a_worktree_without_changes_is_removed_with_its_branch() {
    // The read-only agent writes nothing in its worktree.
    let sb = repository().set("FAKE_AGENT_WRITE_PATHS", "changed.txt");
    let (status, v) = run_json(&sb, &["run", "fake", "look", "--isolation", "worktree"]);
    assert_eq!(status, 0, "{v}");
    let r = &v["details"]["results"][0];
    let id = v["details"]["runId"].as_str().unwrap();
    assert_eq!(
        r["output"],
        json!("changed.txt: read-only filesystem or storage medium")
    );
    assert_eq!(
        (&r["worktree"]["kept"], &r["worktree"]["changedFiles"]),
        (&json!(false), &json!([]))
    );
    assert!(!sb.state.join("worktrees").join(id).exists());
    assert_eq!(git(&sb.work, &["branch", "--list", "orchestrate/*"]), "");
}

#[test]
fn the_child_works_where_the_working_directory_is_inside_the_repository() {
    let sb = repository().set("FAKE_AGENT_WRITE_PATHS", "here.txt");
    let cwd = sb.work.join("src");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "writer",
        "x",
        "--isolation",
        "worktree",
        "--agents-dir",
        &agents,
    ]);
    cmd.current_dir(&cwd);
    let out = sb.run_command(cmd);
    let r = out.result();
    assert_eq!(
        r["worktree"]["changedFiles"],
        json!(["src/here.txt"]),
        "{r}"
    );
}

#[test]
fn a_folder_outside_a_repository_is_invalid_input() {
    let sb = Sandbox::new();
    let (status, v) = run_json(&sb, &["run", "fake", "x", "--isolation", "worktree"]);
    assert_eq!(status, 2);
    assert_eq!(
        v["details"]["error"],
        json!({
            "code": "INVALID_INPUT",
            "message": format!(
                "Invalid input: {} is not in a git repository: --isolation worktree needs one",
                sb.work.display()
            )
        })
    );
    assert!(sb.pids().is_empty(), "nothing ran");
}

/// A merged worktree in which the user (or a killed run) left edits not yet committed:
/// plain `prune` keeps it, saying why; `--force` removes it.
#[test]
fn prune_keeps_a_merged_worktree_with_uncommitted_changes_unless_forced() {
    let sb = repository().set("FAKE_AGENT_WRITE_PATHS", "changed.txt");
    let (status, v) = run_json(&sb, &["run", "writer", "x", "--isolation", "worktree"]);
    assert_eq!(status, 0, "{v}");
    let id = v["details"]["runId"].as_str().unwrap().to_string();
    let branch = format!("orchestrate/{id}");
    let path = sb.state.join("worktrees").join(&id);
    git(&sb.work, &["merge", "--quiet", "--ff-only", &branch]);
    std::fs::write(path.join("changed.txt"), "edited after the run\n").unwrap();
    std::fs::write(path.join("untracked.txt"), "new\n").unwrap();
    let prune = |extra: &[&str]| {
        let mut args = vec!["worktree", "prune", "--json"];
        args.extend_from_slice(extra);
        let out = sb.command(&args).output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let expect_kept = json!({"removed": [], "kept": [{
        "runId": id, "path": path.display().to_string(), "branch": branch,
        "reason": "uncommitted changes (--force removes them)"
    }]});
    assert_eq!(prune(&[]), expect_kept);
    assert_eq!(prune(&["--all"]), expect_kept);
    assert_eq!(
        std::fs::read_to_string(path.join("changed.txt")).unwrap(),
        "edited after the run\n"
    );
    assert_eq!(
        prune(&["--force"]),
        json!({"removed": [{"runId": id, "path": path.display().to_string(), "branch": branch}], "kept": []})
    );
    assert!(!path.exists());
    assert_eq!(git(&sb.work, &["branch", "--list", "orchestrate/*"]), "");
}

/// A file the child writes inside a submodule (not checked out in a worktree) is not
/// committed on the branch: the result says so.
#[test]
fn a_file_written_inside_a_submodule_is_reported() {
    let sb = repository();
    let lib = sb.root.path().join("lib-src");
    std::fs::create_dir_all(&lib).unwrap();
    support::git::commit_files(&lib, &[("lib.txt", "lib\n")]);
    git(
        &sb.work,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "--quiet",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    git(
        &sb.work,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "sub",
        ],
    );
    let sb = sb.set("FAKE_AGENT_WRITE_PATHS", "vendor/lib/patch.txt:top.txt");
    let (status, v) = run_json(&sb, &["run", "writer", "x", "--isolation", "worktree"]);
    assert_eq!(status, 0, "{v}");
    let r = &v["details"]["results"][0];
    assert_eq!(r["worktree"]["changedFiles"], json!(["top.txt"]), "{r}");
    assert_eq!(
        r["warnings"],
        json!([
            "files written inside submodule vendor/lib are not committed (orchestrate commits the superproject only; a worktree's submodules are not checked out): vendor/lib/patch.txt"
        ]),
        "{r}"
    );
}

/// A checkout whose only changes are untracked files: the worktree (from HEAD) has none
/// of them, and the result says so, as it does for uncommitted tracked changes.
#[test]
fn uncommitted_and_untracked_files_of_the_checkout_are_warned_about() {
    let sb = repository()
        .scenario("shell")
        .set("FAKE_AGENT_SHELL", "true");
    std::fs::write(sb.work.join("notes.txt"), "mine\n").unwrap();
    std::fs::create_dir_all(sb.work.join("drafts")).unwrap();
    std::fs::write(sb.work.join("drafts/a.md"), "a\n").unwrap();
    let (status, v) = run_json(&sb, &["run", "writer", "x", "--isolation", "worktree"]);
    assert_eq!(status, 0, "{v}");
    let head = git(&sb.work, &["rev-parse", "HEAD"]);
    let short = &head.trim()[..12];
    assert_eq!(
        v["details"]["results"][0]["warnings"],
        json!([format!(
            "{} has 2 untracked files; the worktree starts from HEAD ({short}) without them",
            sb.work.display()
        )])
    );
    std::fs::write(sb.work.join("README.md"), "changed\n").unwrap();
    let (_, v) = run_json(&sb, &["run", "writer", "x", "--isolation", "worktree"]);
    assert_eq!(
        v["details"]["results"][0]["warnings"],
        json!([format!(
            "{} has 1 uncommitted change to tracked files and 2 untracked files; the worktree starts from HEAD ({short}) without them",
            sb.work.display()
        )])
    );
}

/// A run index line naming the user's own checkout and branch (a forged or corrupt one)
/// is listed but never acted on: prune removes only what orchestrate made.
#[test]
fn prune_never_removes_what_orchestrate_did_not_make() {
    let sb = repository();
    std::fs::create_dir_all(&sb.state).unwrap();
    let forged = json!({
        "runId": "abcdef12", "agent": "writer", "backend": "pi", "model": null,
        "startedAtMs": 1, "durationMs": 1, "exitCode": 0, "error": null,
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 0},
        "cwd": sb.work.display().to_string(), "sessionFile": "/x",
        "worktree": {"path": sb.work.display().to_string(), "branch": "main",
                     "repository": sb.work.display().to_string()}
    });
    std::fs::write(sb.state.join("runs.jsonl"), format!("{forged}\n")).unwrap();
    let before = checkout_state(&sb.work);
    let out = sb
        .command(&["worktree", "prune", "--all", "--force", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v,
        json!({"removed": [], "kept": [{
            "runId": "abcdef12", "path": sb.work.display().to_string(), "branch": "main",
            "reason": format!("not a worktree orchestrate made in {}", sb.state.display())
        }]})
    );
    let out = sb
        .command(&["worktree", "rm", "abcdef12"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(checkout_state(&sb.work), before);
    assert_eq!(git(&sb.work, &["branch", "--list", "main"]), "* main\n");
}
