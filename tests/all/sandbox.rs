//! The sandbox, through the fake agent: where a child (and what it starts) may write in
//! each mode, its private temporary directory, the network switch, and what the result
//! says held. The real CLIs' proofs are in the contract tests. The tests of the sandbox
//! run as the test's user and, when that is root, as an unprivileged one too.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{Sandbox, Unprivileged};

/// What a write outside the writable places fails with: the child's view is read-only.
const EROFS: &str = "read-only filesystem or storage medium";
/// Every layer, as root holds them here (a kernel with Landlock ABI 6).
const LAYERS: [&str; 6] = [
    "pid-namespace",
    "mounts",
    "landlock",
    "scopes",
    "seccomp",
    "no-tty",
];

/// An agent that may write (it has bash), so that its default mode is workspace-write.
const WRITER: &str =
    "---\nname: writer\ndescription: d\ntools: read, bash\nbackend: pi\n---\nYou write.\n";

/// `sb` with runs that get the default sandbox (tests/support turns it off for the
/// others), probing writes to `paths`.
fn probing(sb: Sandbox, paths: &[String]) -> Sandbox {
    let sb = sb
        .scenario("write-probe")
        .set("ORCHESTRATE_SANDBOX", "auto")
        .set("FAKE_AGENT_WRITE_PATHS", &paths.join(":"));
    std::fs::write(sb.agents.join("writer.md"), WRITER).unwrap();
    sb
}

/// A path in /etc no one else uses; orchestrate's tests run as root, which could
/// otherwise write there.
fn etc_path(sb: &Sandbox) -> String {
    let tag = sb.root.path().file_name().unwrap().to_string_lossy();
    format!("/etc/orchestrate-sandbox-test{tag}")
}

/// The answer, one line per probed path. (The sanitizer shows the home directory as `~`.)
fn answer_lines(out: &support::RunOutput) -> Vec<String> {
    out.result()["output"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_read_only_agent_writes_only_to_its_run_folder_and_private_tmpdir() {
    for user in support::users() {
        a_read_only_agent_writes_only_to_its_run_folder_and_private_tmpdir_as(user);
    }
}

fn a_read_only_agent_writes_only_to_its_run_folder_and_private_tmpdir_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let (work, home) = (sb.work.join("ro.txt"), sb.home.join("ro.txt"));
    let paths = [
        work.display().to_string(),
        home.display().to_string(),
        etc_path(&sb),
        "$TMPDIR/t.txt".into(),
    ];
    let sb = probing(sb, &paths);
    let out = sb.run_probe("fake", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let etc = etc_path(&sb);
    assert_eq!(
        answer_lines(&out),
        [
            format!("{}: {EROFS}", work.display()),
            format!("~/ro.txt: {EROFS}"),
            format!("{etc}: {EROFS}"),
            "$TMPDIR/t.txt: ok".to_string(),
        ]
    );
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "read-only", "mechanism": "namespaces", "layers": LAYERS})
    );
    for p in [work.display().to_string(), home.display().to_string(), etc] {
        assert!(!std::path::Path::new(&p).exists(), "{p} was written");
    }
    // The private TMPDIR is `child/tmp` in the run folder, a tmpfs while the child ran:
    // the folder under it stays, empty.
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let child = sb.state.join("runs").join(run_id).join("child");
    assert!(child.is_dir());
    let left: Vec<_> = std::fs::read_dir(child.join("tmp")).unwrap().collect();
    assert!(left.is_empty(), "the private TMPDIR holds {left:?}");
}

#[test]
fn a_workspace_write_agent_writes_its_working_directory_but_not_home_etc_or_a_sibling() {
    for user in support::users() {
        a_workspace_write_agent_writes_its_working_directory_but_not_home_etc_or_a_sibling_as(user);
    }
}

fn a_workspace_write_agent_writes_its_working_directory_but_not_home_etc_or_a_sibling_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let sibling = sb.root.path().join("sibling");
    std::fs::create_dir_all(&sibling).unwrap();
    let paths = [
        sb.work.join("ok.txt").display().to_string(),
        sb.home.join("no.txt").display().to_string(),
        etc_path(&sb),
        sibling.join("no.txt").display().to_string(),
    ];
    let sb = probing(sb, &paths);
    let out = sb.run_probe("writer", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(
        answer_lines(&out),
        [
            format!("{}: ok", paths[0]),
            format!("~/no.txt: {EROFS}"),
            format!("{}: {EROFS}", paths[2]),
            // In /tmp, which the child sees empty but for its own places.
            format!("{}: entity not found", paths[3]),
        ]
    );
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "workspace-write", "mechanism": "namespaces", "layers": LAYERS})
    );
    assert_eq!(
        std::fs::read_to_string(&paths[0]).unwrap(),
        format!(
            "probe {}\n",
            out.json()["details"]["runId"].as_str().unwrap()
        ),
        "written in the working directory"
    );
    for p in &paths[1..] {
        assert!(!std::path::Path::new(p).exists(), "{p} was written");
    }
}

#[test]
fn the_mode_can_be_asked_for_and_off_writes_wherever_the_user_can() {
    for user in support::users() {
        the_mode_can_be_asked_for_and_off_writes_wherever_the_user_can_as(user);
    }
}

fn the_mode_can_be_asked_for_and_off_writes_wherever_the_user_can_as(
    user: Option<&'static Unprivileged>,
) {
    // A writer asked to stay read-only cannot write its working directory.
    let sb = Sandbox::for_user(user);
    let in_work = sb.work.join("x.txt").display().to_string();
    let sb = probing(sb, std::slice::from_ref(&in_work));
    let out = sb.run_probe("writer", &["--sandbox", "read-only"]);
    assert_eq!(out.result()["sandbox"]["mode"], json!("read-only"));
    assert_eq!(answer_lines(&out), [format!("{in_work}: {EROFS}")]);

    let sb = Sandbox::for_user(user);
    let in_home = sb.home.join("h.txt").display().to_string();
    let sb = probing(sb, std::slice::from_ref(&in_home));
    let out = sb.run_probe("fake", &["--sandbox", "off"]);
    assert_eq!(answer_lines(&out), ["~/h.txt: ok"]);
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "off", "mechanism": "none"})
    );
}

#[test]
fn an_agent_key_sets_the_mode_and_a_flag_overrides_it() {
    let sb = probing(Sandbox::new(), &[]);
    std::fs::write(
        sb.agents.join("boxed.md"),
        "---\nname: boxed\ndescription: d\ntools: read, bash\nbackend: pi\nsandbox: read-only\n---\nP\n",
    )
    .unwrap();
    let out = sb.run_probe("boxed", &[]);
    assert_eq!(out.result()["sandbox"]["mode"], json!("read-only"));
    let out = sb.run_probe("boxed", &["--sandbox", "workspace-write"]);
    assert_eq!(out.result()["sandbox"]["mode"], json!("workspace-write"));
}

#[test]
fn a_bad_mode_is_invalid_input() {
    let sb = probing(Sandbox::new(), &[]);
    let out = sb.run_probe("fake", &["--sandbox", "rw"]);
    assert_eq!(out.status, 2);
    assert_eq!(out.error_code(), "INVALID_INPUT");
}

/// Where PID namespaces (and so mount namespaces) are denied, Landlock still holds; the
/// private TMPDIR is then an ordinary directory, removed after the run with what the child
/// left in it.
#[test]
#[cfg(not(feature = "portable"))]
fn without_namespaces_the_sandbox_still_holds() {
    for user in support::users() {
        without_namespaces_the_sandbox_still_holds_as(user);
    }
}

#[cfg(not(feature = "portable"))]
fn without_namespaces_the_sandbox_still_holds_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let home = sb.home.join("ro.txt");
    let sb = probing(sb, &[home.display().to_string(), "$TMPDIR/t.txt".into()])
        .set("ORCHESTRATE_CONTAINMENT", "subreaper");
    let out = sb.run_probe("fake", &[]);
    assert_eq!(
        answer_lines(&out),
        ["~/ro.txt: permission denied", "$TMPDIR/t.txt: ok"]
    );
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let child = sb.state.join("runs").join(run_id).join("child");
    assert!(child.is_dir());
    assert!(!child.join("tmp").exists(), "the private TMPDIR is removed");
}

#[test]
#[cfg_attr(
    feature = "portable",
    ignore = "network off needs a network namespace, which the portable path does not use"
)]
fn network_off_cuts_the_child_off_even_from_the_hosts_loopback() {
    for user in support::users() {
        network_off_cuts_the_child_off_even_from_the_hosts_loopback_as(user);
    }
}

fn network_off_cuts_the_child_off_even_from_the_hosts_loopback_as(
    user: Option<&'static Unprivileged>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let sb = Sandbox::for_user(user)
        .scenario("connect-probe")
        .set("FAKE_AGENT_CONNECT_PORT", &port);
    let out = sb.run("x", &["--details", "full"]);
    assert_eq!(out.result()["output"], json!("connected"), "{}", out.stdout);
    let out = sb.run("x", &["--details", "full", "--network", "off"]);
    assert_eq!(
        out.result()["output"],
        json!("not connected: connection refused"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.result()["sandbox"],
        json!({"mode": "off", "mechanism": "none"})
    );
    assert_eq!(out.result()["network"], json!({"mode": "off"}));
}

/// A working directory in a directory the child's view empties (`/dev/shm`, like `/tmp`)
/// is still there, in both modes, and written only in workspace-write.
#[test]
fn a_working_directory_in_dev_shm_is_still_the_childs() {
    for user in support::users() {
        a_working_directory_in_dev_shm_is_still_the_childs_as(user);
    }
}

fn a_working_directory_in_dev_shm_is_still_the_childs_as(user: Option<&'static Unprivileged>) {
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let work = shm.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    if let Some(u) = user {
        std::os::unix::fs::chown(shm.path(), Some(u.uid), Some(u.gid)).unwrap();
        std::os::unix::fs::chown(&work, Some(u.uid), Some(u.gid)).unwrap();
    }
    let file = work.join("w.txt").display().to_string();
    let sb = probing(Sandbox::for_user(user), std::slice::from_ref(&file));
    let agents = sb.agents.to_str().unwrap().to_string();
    for (agent, want) in [("fake", EROFS), ("writer", "ok")] {
        let mut cmd = sb.command(&[
            "run",
            agent,
            "probe",
            "--agents-dir",
            &agents,
            "--details",
            "full",
        ]);
        cmd.current_dir(&work).env("PWD", &work);
        let out = sb.run_command(cmd);
        assert_eq!(out.status, 0, "{}: {}", sb.who(), out.stdout);
        assert_eq!(
            answer_lines(&out),
            [format!("{file}: {want}")],
            "{agent} as {}",
            sb.who()
        );
        let r = out.result();
        assert_eq!(r["sandbox"]["mechanism"], json!("namespaces"), "{r}");
        assert_eq!(r.get("warnings"), None, "{r}");
    }
}
