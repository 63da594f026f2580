//! `--isolation worktree` against a hostile child, a hostile environment, concurrency and
//! `kill -9`: orchestrate's own git (which runs outside any sandbox) runs no program the
//! repository or the child names, uses only the git dir it made, and every worktree it
//! starts to make is listed and can be pruned, whatever moment orchestrate died at.
//!
//! The child here is the fake agent's `shell` scenario (a shell script as its tool) with
//! the sandbox off: the worst case, where nothing but orchestrate's own care holds.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::git::{git, path_with, refs, wait_for_file, wrapper};
use support::Sandbox;

const WRITER: &str =
    "---\nname: writer\ndescription: d\ntools: read, bash\nbackend: pi\n---\nYou write.\n";

/// `sb.work` as a repository with a commit, the writer agent, and a `marks/` folder where
/// every planted program leaves a file if it ever runs.
fn repository() -> (Sandbox, PathBuf) {
    let sb = Sandbox::new().scenario("shell");
    std::fs::write(sb.agents.join("writer.md"), WRITER).unwrap();
    support::git::commit_files(
        &sb.work,
        &[("README.md", "hello\n"), ("src/lib.rs", "fn main() {}\n")],
    );
    let marks = sb.root.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    (sb, marks)
}

fn run(sb: &Sandbox, script: &str) -> Value {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "writer",
        "attack",
        "--isolation",
        "worktree",
        "--sandbox",
        "off",
        "--agents-dir",
        &agents,
    ]);
    cmd.env("FAKE_AGENT_SHELL", script);
    let out = sb.run_command(cmd);
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    out.json()
}

/// The refs that are not orchestrate's own branches.
fn user_refs(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let mut all = refs(dir);
    all.retain(|r, _| !r.starts_with("refs/heads/orchestrate/"));
    all
}

fn marks(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Shell that makes `$E`, a git repository of the child's own whose config names a
/// program for every hook, the fsmonitor, a clean and smudge filter, an external diff and
/// a textconv, each leaving `marks/<name>` when run.
fn evil_repo(root: &Path, marks: &Path) -> String {
    let e = root.join("evil");
    format!(
        r#"E="{e}"; M="{m}"
git init -q "$E"
mkdir -p "$E/hooks"
prog() {{ printf '#!/bin/sh\ntouch "%s/%s"\ncat\n' "$M" "$1" > "$E/$1"; chmod +x "$E/$1"; }}
for h in pre-commit prepare-commit-msg commit-msg post-commit post-index-change reference-transaction post-checkout pre-auto-gc post-rewrite; do
  printf '#!/bin/sh\ntouch "%s/hook-%s"\ncat >/dev/null\nexit 0\n' "$M" "$h" > "$E/hooks/$h"; chmod +x "$E/hooks/$h"
done
prog fsmonitor; prog clean; prog smudge; prog extdiff; prog textconv
evil_config() {{
  git config $1 core.hooksPath "$E/hooks"
  git config $1 core.fsmonitor "$E/fsmonitor"
  git config $1 filter.evil.clean "$E/clean"
  git config $1 filter.evil.smudge "$E/smudge"
  git config $1 filter.evil.required true
  git config $1 diff.external "$E/extdiff"
  git config $1 diff.evil.textconv "$E/textconv"
}}
evil_config "-f $E/.git/config"
printf '* filter=evil diff=evil\n' > .gitattributes
echo change > changed.txt
"#,
        e = e.display(),
        m = marks.display()
    )
}

/// The result's worktree and warnings.
fn worktree_and_warnings(v: &Value) -> (Value, Vec<String>) {
    let r = &v["details"]["results"][0];
    let warnings = r["warnings"]
        .as_array()
        .map(|w| w.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (r["worktree"].clone(), warnings)
}

#[test]
fn a_child_that_repoints_its_worktree_at_a_git_dir_of_its_own_runs_nothing_outside() {
    // Each way to make orchestrate's git read another git dir, or another config.
    let variants = [
        ("git file", r#"printf 'gitdir: %s\n' "$E/.git" > .git"#),
        ("symlinked .git", r#"rm .git && ln -s "$E/.git" .git"#),
        (
            "commondir",
            r#"printf '%s\n' "$E/.git" > "$(git rev-parse --git-dir)/commondir""#,
        ),
        (
            "commondir with ..",
            r#"printf '../../../../../../../%s\n' "$E/.git" > "$(git rev-parse --git-dir)/commondir""#,
        ),
        (
            "gitdir file",
            r#"printf '%s\n' "$E/.git" > "$(git rev-parse --git-dir)/gitdir""#,
        ),
        (
            "config.worktree",
            r#"git config extensions.worktreeConfig true && evil_config --worktree"#,
        ),
        (
            "gitdir: a FIFO",
            r#"mkfifo "$E/fifo" && printf 'gitdir: %s\n' "$E/fifo" > .git"#,
        ),
        (
            "gitdir: /proc",
            r#"printf 'gitdir: /proc/self/cwd\n' > .git"#,
        ),
        (
            "a new git dir in place of the old",
            r#"d="$(git rev-parse --git-dir)" && mv "$d" "$d.old" && cp -r "$d.old" "$d""#,
        ),
        (
            "HEAD on the user's branch",
            r#"printf 'ref: refs/heads/main\n' > "$(git rev-parse --git-dir)/HEAD""#,
        ),
    ];
    for (name, tamper) in variants {
        let (sb, marks_dir) = repository();
        let before = user_refs(&sb.work);
        let main_before = git(&sb.work, &["rev-parse", "main"]);
        let script = format!(
            "{}\n{tamper}\necho tampered",
            evil_repo(sb.root.path(), &marks_dir)
        );
        let v = run(&sb, &script);
        let (wt, warnings) = worktree_and_warnings(&v);
        assert_eq!(marks(&marks_dir), Vec::<String>::new(), "{name}: {v}");
        let id = v["details"]["runId"].as_str().unwrap();
        let path = sb.state.join("worktrees").join(id);
        assert_eq!(
            wt,
            json!({
                "path": path.display().to_string(),
                "branch": format!("orchestrate/{id}"),
                "baseCommit": main_before.trim(),
                "repository": sb.work.display().to_string(),
                "changedFiles": [],
                "diffStat": {"files": 0, "insertions": 0, "deletions": 0},
                "kept": true
            }),
            "{name}: {v}"
        );
        assert!(
            warnings.iter().any(|w| w
                .starts_with("the worktree was not committed: the child changed its git metadata")),
            "{name}: {warnings:?}"
        );
        assert_eq!(user_refs(&sb.work), before, "{name}: no ref moved");
        // Kept for the user to look at, and listed.
        assert!(path.is_dir(), "{name}");
    }
}

#[test]
fn a_child_that_plants_programs_in_the_repository_config_runs_nothing_outside() {
    // With the sandbox off the child can write the repository's own config: orchestrate's
    // git still runs none of what it names, and commits the change.
    let (sb, marks_dir) = repository();
    let script = format!(
        "{}\nevil_config --local\necho planted",
        evil_repo(sb.root.path(), &marks_dir)
    );
    let v = run(&sb, &script);
    let (wt, _) = worktree_and_warnings(&v);
    assert_eq!(marks(&marks_dir), Vec::<String>::new(), "{v}");
    assert_eq!(
        (&wt["changedFiles"], &wt["kept"]),
        (&json!([".gitattributes", "changed.txt"]), &json!(true)),
        "{v}"
    );
    let branch = wt["branch"].as_str().unwrap();
    // Committed as written: no filter ran.
    assert_eq!(
        git(&sb.work, &["show", &format!("{branch}:changed.txt")]),
        "change\n"
    );
}

#[test]
fn a_filter_of_the_users_global_config_is_not_run_on_the_childs_files() {
    let (sb, marks_dir) = repository();
    let clean = sb.root.path().join("global-clean");
    std::fs::write(
        &clean,
        format!(
            "#!/bin/sh\ntouch {}/global-clean\ncat\n",
            marks_dir.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .args(["+x", clean.to_str().unwrap()])
        .status()
        .unwrap();
    std::fs::write(
        sb.home.join(".gitconfig"),
        format!("[filter \"glob\"]\n\tclean = {}\n", clean.display()),
    )
    .unwrap();
    let v = run(
        &sb,
        "printf '* filter=glob\\n' > .gitattributes && echo x > f.txt",
    );
    let (wt, _) = worktree_and_warnings(&v);
    assert_eq!(marks(&marks_dir), Vec::<String>::new(), "{v}");
    assert_eq!(
        wt["changedFiles"],
        json!([".gitattributes", "f.txt"]),
        "{v}"
    );
}

#[test]
fn a_child_that_moves_the_users_refs_is_reported() {
    let evil_commit = "git -c user.name=x -c user.email=x@x commit -q --allow-empty -m evil";
    let cases = [
        (
            format!(
                "{evil_commit} && git update-ref refs/heads/main HEAD && git tag planted HEAD \
                 && git branch side HEAD && echo moved"
            ),
            vec!["refs/heads/main", "refs/tags/planted", "refs/heads/side"],
        ),
        // Straight into packed-refs, with no loose ref and no reflog entry.
        (
            format!(
                r#"{evil_commit} && git pack-refs --all && new=$(git rev-parse HEAD) \
                 && p="$(git rev-parse --git-common-dir)/packed-refs" \
                 && sed "s/^[0-9a-f]* refs\/heads\/main$/$new refs\/heads\/main/" "$p" > "$p.new" \
                 && mv "$p.new" "$p" && echo packed"#
            ),
            vec!["refs/heads/main"],
        ),
    ];
    for (script, names) in cases {
        let (sb, _) = repository();
        let v = run(&sb, &script);
        let (_, warnings) = worktree_and_warnings(&v);
        let moved: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("changed during the run"))
            .collect();
        assert_eq!(moved.len(), 1, "{script}: {v}");
        let w = moved[0];
        for r in names {
            assert!(w.contains(r), "{r} in {w}");
        }
    }
}

#[test]
fn gits_variables_in_orchestrates_environment_are_not_followed() {
    let (sb, marks_dir) = repository();
    // Another repository that GIT_DIR names, and config through the environment.
    let other = sb.root.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    support::git::commit_files(&other, &[("other.txt", "other\n")]);
    let hooks = sb.root.path().join("envhooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for h in ["post-commit", "post-checkout", "reference-transaction"] {
        std::fs::write(
            hooks.join(h),
            format!(
                "#!/bin/sh\ntouch {}/env-{h}\ncat >/dev/null\n",
                marks_dir.display()
            ),
        )
        .unwrap();
        std::process::Command::new("chmod")
            .args(["+x", hooks.join(h).to_str().unwrap()])
            .status()
            .unwrap();
    }
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "writer",
        "x",
        "--isolation",
        "worktree",
        "--sandbox",
        "off",
        "--agents-dir",
        &agents,
    ]);
    cmd.env("FAKE_AGENT_SHELL", "echo x > new.txt")
        .env("GIT_DIR", other.join(".git"))
        .env("GIT_WORK_TREE", &other)
        .env(
            "GIT_CONFIG_PARAMETERS",
            format!("'core.hooksPath'='{}'", hooks.display()),
        )
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.hooksPath")
        .env("GIT_CONFIG_VALUE_0", &hooks);
    let out = sb.run_command(cmd);
    let v = out.json();
    let (wt, _) = worktree_and_warnings(&v);
    assert_eq!(marks(&marks_dir), Vec::<String>::new(), "{v}");
    assert_eq!(
        (&wt["repository"], &wt["changedFiles"]),
        (&json!(sb.work.display().to_string()), &json!(["new.txt"])),
        "{v}"
    );
}

/// `orchestrate runs --json`'s worktrees.
fn listed(sb: &Sandbox) -> Vec<Value> {
    let out = sb.command(&["runs", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["worktrees"].as_array().unwrap().clone()
}

fn prune(sb: &Sandbox, extra: &[&str]) -> Value {
    let mut args = vec!["worktree", "prune", "--json"];
    args.extend_from_slice(extra);
    let out = sb.command(&args).output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

/// Starts `orchestrate run writer … --isolation worktree` with `env`, waits for `ready`,
/// SIGKILLs it, then touches `release` so that whatever it had started goes on alone,
/// and waits for `done` (when given).
fn kill_at(
    sb: &Sandbox,
    env: &[(&str, String)],
    ready: &Path,
    release: &Path,
    done: Option<&Path>,
) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&[
        "run",
        "writer",
        "x",
        "--isolation",
        "worktree",
        "--sandbox",
        "off",
        "--agents-dir",
        &agents,
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    wait_for_file(ready, Duration::from_secs(30));
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::write(release, "").unwrap();
    if let Some(done) = done {
        wait_for_file(done, Duration::from_secs(30));
    }
    sb.kill_descendants();
}

/// orchestrate's branches, one short name a line.
fn orchestrate_branches(dir: &Path) -> String {
    git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/orchestrate/",
        ],
    )
}

/// After a kill: the one worktree is listed as interrupted; prune keeps it while it has
/// uncommitted changes (`with_changes`) and removes it with --force, branch and all.
fn assert_listed_and_prunable(sb: &Sandbox, with_changes: bool) {
    let list = listed(sb);
    assert_eq!(list.len(), 1, "{list:?}");
    let w = &list[0];
    let id = w["runId"].as_str().unwrap().to_string();
    let path = sb.state.join("worktrees").join(&id);
    assert_eq!(
        w,
        &json!({
            "runId": id,
            "path": path.display().to_string(),
            "branch": format!("orchestrate/{id}"),
            "repository": sb.work.display().to_string(),
            "state": "interrupted"
        })
    );
    let v = prune(sb, &["--all"]);
    if with_changes {
        assert_eq!(
            v,
            json!({"removed": [], "kept": [{
                "runId": id, "path": path.display().to_string(), "branch": format!("orchestrate/{id}"),
                "reason": "uncommitted changes (--force removes them)"
            }]})
        );
        assert!(path.is_dir());
        let v = prune(sb, &["--all", "--force"]);
        assert_eq!(v["removed"].as_array().unwrap().len(), 1, "{v}");
    } else {
        assert_eq!(v["removed"].as_array().unwrap().len(), 1, "{v}");
    }
    assert!(!path.exists());
    assert_eq!(orchestrate_branches(&sb.work), "");
    assert_eq!(
        git(&sb.work, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "only the main worktree is left"
    );
    assert_eq!(listed(sb), Vec::<Value>::new());
}

#[test]
fn kill_9_during_git_worktree_add_leaves_a_listed_prunable_worktree() {
    let (sb, _) = repository();
    let t = sb.root.path();
    let (ready, release, done) = (t.join("ready"), t.join("release"), t.join("done"));
    let bin = wrapper(
        &t.join("bin"),
        &format!(
            r#"if [ "$sub $sub2" = "worktree add" ]; then touch "{r}"; while [ ! -e "{l}" ]; do sleep 0.02; done; fi"#,
            r = ready.display(),
            l = release.display()
        ),
        &format!(
            r#"if [ "$sub $sub2" = "worktree add" ]; then touch "{d}"; fi"#,
            d = done.display()
        ),
    );
    kill_at(
        &sb,
        &[
            ("PATH", path_with(&bin)),
            ("FAKE_AGENT_SHELL", "true".into()),
        ],
        &ready,
        &release,
        Some(&done),
    );
    // git made the worktree and its branch on its own, after orchestrate died.
    assert_eq!(orchestrate_branches(&sb.work).lines().count(), 1);
    assert_listed_and_prunable(&sb, false);
}

#[test]
fn kill_9_while_the_child_runs_leaves_a_listed_prunable_worktree() {
    let (sb, _) = repository();
    let t = sb.root.path();
    let (ready, release) = (t.join("ready"), t.join("release"));
    let script = format!("echo work > new.txt; touch {}; sleep 30", ready.display());
    kill_at(&sb, &[("FAKE_AGENT_SHELL", script)], &ready, &release, None);
    assert_listed_and_prunable(&sb, true);
}

#[test]
fn kill_9_during_git_add_leaves_a_listed_prunable_worktree() {
    kill_9_during("add", true);
}

#[test]
fn kill_9_during_git_commit_leaves_a_listed_prunable_worktree() {
    // git commits on its own: nothing is left uncommitted, and `--all` removes it.
    kill_9_during("commit", false);
}

fn kill_9_during(step: &str, with_changes: bool) {
    let (sb, _) = repository();
    let t = sb.root.path();
    let (ready, release, done) = (t.join("ready"), t.join("release"), t.join("done"));
    let bin = wrapper(
        &t.join("bin"),
        &format!(
            r#"if [ "$sub" = "{step}" ]; then touch "{r}"; while [ ! -e "{l}" ]; do sleep 0.02; done; fi"#,
            r = ready.display(),
            l = release.display()
        ),
        &format!(
            r#"if [ "$sub" = "{step}" ]; then touch "{d}"; fi"#,
            d = done.display()
        ),
    );
    // A large change: a thousand files.
    let script = "mkdir big && for i in $(seq 1000); do echo $i > big/$i.txt; done";
    kill_at(
        &sb,
        &[
            ("PATH", path_with(&bin)),
            ("FAKE_AGENT_SHELL", script.into()),
        ],
        &ready,
        &release,
        Some(&done),
    );
    assert_listed_and_prunable(&sb, with_changes);
}

/// Eight runs at once on one repository, each as its own orchestrate process: all
/// succeed, each on its own branch, and orchestrate's `git worktree add`s never overlap
/// (git's own bookkeeping is not safe against a sibling `worktree add` half-way through).
#[test]
fn eight_concurrent_processes_on_one_repository_all_succeed() {
    let (sb, _) = repository();
    let t = sb.root.path();
    let log = t.join("add.log");
    // Each `worktree add` logs when it starts and ends, and lasts long enough (200 ms)
    // that two unserialized ones overlap.
    let bin = wrapper(
        &t.join("bin"),
        &format!(
            r#"if [ "$sub $sub2" = "worktree add" ]; then echo "start $$ $(date +%s%N)" >> "{log}"; sleep 0.2; fi"#,
            log = log.display()
        ),
        &format!(
            r#"if [ "$sub $sub2" = "worktree add" ]; then echo "end $$ $(date +%s%N)" >> "{log}"; fi"#,
            log = log.display()
        ),
    );
    let agents = sb.agents.to_str().unwrap().to_string();
    let children: Vec<_> = (0..8)
        .map(|i| {
            let mut cmd = sb.command(&[
                "run",
                "writer",
                "x",
                "--isolation",
                "worktree",
                "--sandbox",
                "off",
                "--agents-dir",
                &agents,
            ]);
            cmd.env("PATH", path_with(&bin))
                .env("FAKE_AGENT_SHELL", format!("echo {i} > mine.txt"));
            cmd.spawn().unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(0), "{v}");
        let wt = &v["details"]["results"][0]["worktree"];
        assert_eq!(
            (&wt["kept"], &wt["changedFiles"]),
            (&json!(true), &json!(["mine.txt"])),
            "{v}"
        );
        ids.push(v["details"]["runId"].as_str().unwrap().to_string());
    }
    ids.sort();
    let mut branches: Vec<String> = orchestrate_branches(&sb.work)
        .lines()
        .map(|l| l.trim_start_matches("orchestrate/").to_string())
        .collect();
    branches.sort();
    assert_eq!(branches, ids, "one branch per run, no orphan");
    // The `worktree add`s did not overlap.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut events: Vec<(u128, &str)> = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[2].parse().unwrap(), f[0])
        })
        .collect();
    events.sort();
    let mut open = 0;
    for (_, kind) in &events {
        open += if *kind == "start" { 1 } else { -1 };
        assert!(open <= 1, "two `git worktree add` at once: {text}");
    }
    assert_eq!(events.len(), 16, "{text}");
}

/// A `git worktree add` of someone else's half-way through (its `commondir` still
/// empty) makes git's own enumeration of the worktrees fail; orchestrate waits for it to
/// finish rather than failing, and leaves no orphan branch.
#[test]
fn a_half_made_sibling_worktree_is_waited_for() {
    let (sb, _) = repository();
    let admin = sb.work.join(".git/worktrees/half");
    std::fs::create_dir_all(&admin).unwrap();
    std::fs::write(admin.join("locked"), "initializing").unwrap();
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::write(
        admin.join("gitdir"),
        format!("{}/.git\n", elsewhere.display()),
    )
    .unwrap();
    std::fs::write(admin.join("commondir"), "").unwrap();
    // The sibling finishes (here: goes away) after a second.
    let admin_c = admin.clone();
    let sibling = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        std::fs::remove_dir_all(admin_c).unwrap();
    });
    let v = run(&sb, "echo x > mine.txt");
    sibling.join().unwrap();
    let (wt, _) = worktree_and_warnings(&v);
    assert_eq!(
        (&wt["kept"], &wt["changedFiles"]),
        (&json!(true), &json!(["mine.txt"])),
        "{v}"
    );
    assert_eq!(orchestrate_branches(&sb.work).lines().count(), 1);
}

/// A child that replaces its worktree folder by a symbolic link to the user's files:
/// nothing is committed, and removing the worktree removes the link, not what it names.
#[test]
fn a_worktree_replaced_by_a_link_to_the_users_files_is_not_followed() {
    let (sb, marks_dir) = repository();
    let victim = sb.root.path().join("victim");
    std::fs::create_dir_all(victim.join(".git")).unwrap();
    std::fs::write(victim.join("precious.txt"), "mine\n").unwrap();
    let script = format!(
        r#"W="${{PWD%/}}"; cd / && mv "$W" "$W.moved" && ln -s "{v}" "$W" && echo swapped"#,
        v = victim.display()
    );
    let v = run(&sb, &script);
    let (wt, warnings) = worktree_and_warnings(&v);
    assert_eq!(marks(&marks_dir), Vec::<String>::new());
    assert_eq!(
        (&wt["kept"], &wt["changedFiles"]),
        (&json!(true), &json!([])),
        "{v}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w
                .starts_with("the worktree was not committed: the child changed its git metadata")),
        "{warnings:?}"
    );
    let id = v["details"]["runId"].as_str().unwrap();
    let out = sb.command(&["worktree", "rm", id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "mine\n"
    );
    assert!(!sb.state.join("worktrees").join(id).exists());
    assert_eq!(orchestrate_branches(&sb.work), "");
}

/// The repository has a submodule, which a worktree does not check out: the child makes a
/// repository of its own in the submodule's folder, with a tracked file it then changes,
/// and names programs in that repository's config (which orchestrate's neutralizing never
/// reads: it is not the worktree's) and a hostile url in `.gitmodules`. git would run them
/// to see whether the submodule is dirty, or to fetch it. orchestrate's git runs none.
#[test]
fn a_repository_the_child_makes_in_a_submodules_folder_runs_nothing_outside() {
    let (sb, marks_dir) = repository();
    let lib = sb.root.path().join("lib-src");
    std::fs::create_dir_all(&lib).unwrap();
    support::git::commit_files(&lib, &[("lib.txt", "lib\n")]);
    let as_user = |args: &[&str]| {
        let mut all = vec![
            "-c",
            "protocol.file.allow=always",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
        ];
        all.extend_from_slice(args);
        git(&sb.work, &all);
    };
    as_user(&["submodule", "add", "--quiet", lib.to_str().unwrap(), "sub"]);
    as_user(&["commit", "--quiet", "-m", "sub"]);
    let m = marks_dir.display();
    let script = format!(
        r#"cd sub && git init -q && echo one > f.txt && git add f.txt &&
git -c user.name=x -c user.email=x@x -c core.hooksPath=/dev/null commit -q -m one &&
printf '#!/bin/sh\ntouch "%s/$1"\ncat\n' "{m}" > prog.sh && chmod +x prog.sh &&
for h in pre-commit post-commit post-index-change reference-transaction post-checkout; do
  mkdir -p hooks; printf '#!/bin/sh\ntouch "%s/sub-hook-%s"\n' "{m}" "$h" > hooks/$h; chmod +x hooks/$h
done &&
git config core.hooksPath "$PWD/hooks" &&
git config core.fsmonitor "$PWD/prog.sh sub-fsmonitor" &&
git config filter.sub.clean "$PWD/prog.sh sub-clean" &&
git config filter.sub.required true &&
git config diff.sub.textconv "$PWD/prog.sh sub-textconv" &&
printf '* filter=sub diff=sub\n' > .gitattributes &&
echo two > f.txt && cd .. &&
printf '[submodule "sub"]\n\tpath = sub\n\turl = ext::sh -c touch%% {m}/ext-url\n' > .gitmodules &&
echo planted"#
    );
    let before = user_refs(&sb.work);
    let v = run(&sb, &script);
    let (wt, warnings) = worktree_and_warnings(&v);
    assert_eq!(marks(&marks_dir), Vec::<String>::new(), "{v}");
    assert_eq!(user_refs(&sb.work), before);
    assert_eq!(
        (&v["content"][0]["text"], &wt["kept"], &wt["changedFiles"], &warnings),
        (
            &json!("planted\nexit 0"),
            &json!(true),
            &json!([".gitmodules", "sub"]),
            &vec!["submodule sub was checked out in the worktree during the run; orchestrate commits the superproject only, so changes inside it are not on the branch".to_string()]
        ),
        "{v}"
    );
}
