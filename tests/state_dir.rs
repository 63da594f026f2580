//! The state directory under attack or damage: symlinks planted in it, permissions opened
//! to others, a torn index line, a full disk, a relative path.

mod support;

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
