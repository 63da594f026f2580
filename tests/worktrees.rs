//! `--isolation worktree`, through the fake agent: each child in a git worktree of its
//! own on branch `orchestrate/<runId>`, the parent's checkout untouched, unchanged
//! worktrees removed, changed ones kept, listed, and removed by `orchestrate worktree`.

mod support;

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
