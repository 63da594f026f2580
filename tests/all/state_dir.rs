//! The state directory under attack or damage: symlinks planted in it, permissions opened
//! to others, a torn index line, a full disk, a relative path.

use crate::support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

fn private_dir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn runs_json(sb: &Sandbox) -> Value {
    let out = sb.run_args(&["runs", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.json()
}

#[test]
fn a_runs_jsonl_symlink_is_not_followed_and_said_so() {
    let sb = Sandbox::new();
    private_dir(&sb.state);
    let target = sb.root.path().join("elsewhere.txt");
    std::fs::write(&target, "precious\n").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    symlink(&target, sb.state.join("runs.jsonl")).unwrap();

    let out = sb.run("hello", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    assert_eq!(mode(&target), 0o644);
    assert!(
        out.stderr.contains("runs.jsonl") && out.stderr.contains("symbolic link"),
        "said so: {}",
        out.stderr
    );
}

#[test]
fn a_runs_folder_symlink_is_refused_and_nothing_is_written_through_it() {
    let sb = Sandbox::new();
    private_dir(&sb.state);
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, sb.state.join("runs")).unwrap();

    let out = sb.run("hello", &[]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let message = out.json()["details"]["error"]["message"].clone();
    assert!(
        message.as_str().unwrap().contains("symbolic link"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn a_file_planted_as_a_symlink_in_a_run_folder_is_not_followed() {
    // A background run's folder exists before its run starts: plant a symlink where the
    // run will write its session, and start the run in that folder.
    let sb = Sandbox::new();
    let run_dir = sb.state.join("runs").join("abcdef01");
    private_dir(&sb.state);
    private_dir(&sb.state.join("runs"));
    private_dir(&run_dir);
    let target = sb.root.path().join("elsewhere.txt");
    std::fs::write(&target, "precious\n").unwrap();
    symlink(&target, run_dir.join("session.jsonl")).unwrap();
    symlink(&target, run_dir.join(".result.json.tmp")).unwrap();

    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "fake",
        "hello",
        "--agents-dir",
        &agents,
        "--run-id",
        "abcdef01",
    ]);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    assert_eq!(
        out.json()["details"]["runId"],
        json!("abcdef01"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_state_dir_open_to_others_is_made_private_and_said_so() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(&sb.state).unwrap();
    std::fs::set_permissions(&sb.state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = sb.run("hello", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(mode(&sb.state), 0o700);
    assert!(
        out.stderr.contains("0777") && out.stderr.contains("0700"),
        "said so: {}",
        out.stderr
    );
}

#[test]
fn a_torn_last_index_line_does_not_swallow_the_next_run() {
    let sb = Sandbox::new();
    private_dir(&sb.state);
    // A crash or a full disk cut the last line short.
    let index = sb.state.join("runs.jsonl");
    std::fs::write(&index, "{\"runId\":\"0000aaaa\",\"agent\":\"fa").unwrap();
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o600)).unwrap();

    let out = sb.run("hello", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let run_id = out.json()["details"]["runId"].clone();
    let listing = runs_json(&sb);
    let ids: Vec<&Value> = listing["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["runId"])
        .collect();
    assert_eq!(
        (ids, &listing["skippedLines"]),
        (vec![&run_id], &json!(1)),
        "{listing}"
    );
}

#[test]
fn a_full_disk_leaves_no_temporary_result_behind() {
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    // result.json carries the task; every other file of the run is smaller than the limit.
    let task = "x".repeat(7000);
    let mut cmd = sb.command(&["run", "fake", &task, "--agents-dir", &agents]);
    // SAFETY: setrlimit and signal are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // Writes past 4 KiB fail with EFBIG, as on a full disk (ENOSPC).
            let limit = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = sb.run_command(cmd);
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let run_dir = sb.state.join("runs").join(&run_id);
    let mut names: Vec<String> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        !names.iter().any(|n| n.ends_with(".tmp")),
        "left in {}: {names:?}",
        run_dir.display()
    );
}

#[test]
fn a_relative_state_dir_gives_absolute_session_files() {
    let sb = Sandbox::new();
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = sb.command(&["run", "fake", "hello", "--agents-dir", &agents]);
    cmd.env("ORCHESTRATE_STATE_DIR", "relative-state");
    let out = sb.run_command(cmd);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let session = out.result()["sessionFile"].as_str().unwrap().to_string();
    assert!(Path::new(&session).is_absolute(), "{session}");
    assert!(
        session.starts_with(sb.work.join("relative-state").to_str().unwrap()),
        "{session}"
    );
    assert!(Path::new(&session).is_file());
}

/// A mount made for a test, undone (lazily, so that nothing still open there can stop it)
/// when dropped. Needs root, as CI has.
struct Mount(std::path::PathBuf);

impl Mount {
    fn run(args: &[&str]) {
        let out = std::process::Command::new("mount")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount {args:?} (these tests need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `path` made read-only for whatever opens it from now on: files already open for
    /// writing stay writable, as when a disk is remounted under a running program.
    fn read_only(path: &Path) -> Mount {
        let p = path.to_str().unwrap();
        Mount::run(&["--bind", p, p]);
        let mount = Mount(path.to_path_buf());
        Mount::run(&["-o", "remount,bind,ro", p]);
        mount
    }

    /// A new tmpfs of `size` at `path`.
    fn tmpfs(path: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(path).unwrap();
        Mount::run(&[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size},mode=0700"),
            "tmpfs",
            path.to_str().unwrap(),
        ]);
        Mount(path.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Writes to `dir` until its disk is full.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    let block = vec![0u8; 64 * 1024];
    loop {
        match f.write_all(&block) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
}

fn wait_for_child(sb: &Sandbox) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while sb.pids().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `run fake TASK --background`: the run's id and its supervisor's pid.
fn start_background(sb: &Sandbox, task: &str) -> (String, u32) {
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb
        .command(&["run", "fake", task, "--agents-dir", &agents, "--background"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["details"]["runId"].as_str().unwrap().to_string(),
        v["details"]["background"]["supervisorPid"]
            .as_u64()
            .unwrap() as u32,
    )
}

#[test]
fn a_background_runs_answer_survives_a_state_dir_turned_read_only() {
    let sb = Sandbox::new()
        .scenario("tool-call")
        .set("FAKE_AGENT_TOOL_MS", "1500");
    // Where the answer goes when the state directory cannot take it.
    let tmp = sb.root.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let sb = sb.set("TMPDIR", tmp.to_str().unwrap());
    let (run_id, _) = start_background(&sb, "build");
    wait_for_child(&sb);
    let read_only = Mount::read_only(&sb.state);
    let out = sb.run_args(&["wait", &run_id]);
    assert_eq!(out.status, 0, "{}", out.stdout);
    let run_dir = sb.state.join("runs").join(&run_id);
    let kept = tmp.join("orchestrate-0").join(format!("{run_id}.json"));
    let r = out.result();
    assert_eq!(out.json()["content"][0]["text"], json!("Build done."));
    assert_eq!(
        r["warnings"],
        json!([
            format!(
                "the result could not be recorded in {}: Read-only file system (os error 30)",
                run_dir.display()
            ),
            format!(
                "the run could not be added to the run index: failed to open {}: Read-only file system (os error 30)",
                sb.state.join("runs.jsonl").display()
            ),
            format!(
                "the result was kept in {} instead (`orchestrate wait {run_id}` reads it there)",
                kept.display()
            ),
        ]),
        "{}",
        out.stdout
    );
    // It stays there for every later look, until the run folder can take it.
    let again = sb.run_args(&["wait", &run_id]);
    assert_eq!(again.json(), out.json());
    drop(read_only);
    let adopted = sb.run_args(&["wait", &run_id]);
    assert_eq!(adopted.json(), out.json());
    assert!(run_dir.join("result.json").is_file());
    assert!(!kept.exists(), "moved into the run folder");
}

#[test]
fn a_supervisor_that_died_over_a_read_only_state_dir_is_still_reported() {
    let sb = Sandbox::new().scenario("silent");
    let (run_id, supervisor) = start_background(&sb, "hang");
    wait_for_child(&sb);
    // Our own process: it carries the sandbox's marker.
    assert!(support::carries(supervisor as i32, &sb.marker()));
    unsafe { libc::kill(supervisor as i32, libc::SIGKILL) };
    sb.assert_no_survivors();
    let _read_only = Mount::read_only(&sb.state);
    let out = sb.run_args(&["wait", &run_id]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let v = out.json();
    let message = v["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with(&format!(
            "The background supervisor of run {run_id} (pid {supervisor}) died before the run finished"
        )),
        "{v}"
    );
    assert!(
        message.ends_with(&format!(
            "(this could not be recorded in {}: Read-only file system (os error 30))",
            sb.state.join("runs").join(&run_id).display()
        )),
        "{message}"
    );
}

#[test]
fn a_full_disk_still_gives_the_result_on_stdout_and_says_what_was_not_recorded() {
    let sb = Sandbox::new()
        .scenario("tool-call")
        .set("FAKE_AGENT_TOOL_MS", "1000");
    let _disk = Mount::tmpfs(&sb.state, "1m");
    let agents = sb.agents.to_str().unwrap().to_string();
    let child = sb
        .command(&["run", "fake", "build", "--agents-dir", &agents])
        .spawn()
        .unwrap();
    wait_for_child(&sb);
    // The disk fills while the child works.
    fill(&sb.state);
    let out = child.wait_with_output().unwrap();
    sb.assert_no_survivors();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["content"][0]["text"], json!("Build done."));
    let run_id = v["details"]["runId"].as_str().unwrap();
    let full = "No space left on device (os error 28)";
    // (The session file's last page had room for the child's last lines.)
    assert_eq!(
        v["details"]["results"][0]["warnings"],
        json!([
            format!(
                "the result could not be recorded in {}: {full}",
                sb.state.join("runs").join(run_id).display()
            ),
            format!(
                "the run could not be added to the run index {}: {full}",
                sb.state.join("runs.jsonl").display()
            ),
        ])
    );
}

#[test]
fn a_result_that_can_be_kept_nowhere_is_not_written_through_a_planted_link_and_wait_says_why() {
    let sb = Sandbox::new()
        .scenario("tool-call")
        .set("FAKE_AGENT_TOOL_MS", "1500");
    let tmp = sb.root.path().join("tmp");
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    // Someone planted the folder the result would be kept in.
    symlink(&elsewhere, tmp.join("orchestrate-0")).unwrap();
    let sb = sb.set("TMPDIR", tmp.to_str().unwrap());
    let (run_id, _) = start_background(&sb, "build");
    wait_for_child(&sb);
    let _read_only = Mount::read_only(&sb.state);
    let out = sb.run_args(&["wait", &run_id]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let message = out.json()["details"]["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    let run_dir = sb.state.join("runs").join(&run_id);
    assert!(
        message.contains(&format!(
            "Its log ends with: ERROR the result could not be recorded in {}: Read-only file system (os error 30); nor could it be kept in {}: refusing to use {}: it is a symbolic link",
            run_dir.display(),
            tmp.join("orchestrate-0").join(format!("{run_id}.json")).display(),
            tmp.join("orchestrate-0").display(),
        )),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}
