//! The sandbox against a hostile child: the fake agent runs a shell script (scenario
//! `hostile`) that tries each way out a prompt-injected agent would, and each test checks
//! that the way stays shut, in the result and on disk.
//!
//! The probes `sh` cannot make itself (TIOCSTI, unix sockets, xattrs, signals) are the
//! fake agent's own: `$ORCHESTRATE_PI_BIN probe NAME ARGS…`.
//!
//! Each test runs as the test's own user and, when that is root, also as an unprivileged
//! user (`support::users()`), whose sandbox needs a user namespace to own the others.

use crate::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;
use support::{Sandbox, Unprivileged};

/// An agent that may write (it has bash), so that its default mode is workspace-write.
const WRITER: &str =
    "---\nname: writer\ndescription: d\ntools: read, bash\nbackend: pi\n---\nYou write.\n";

/// `sb` whose runs get the default sandbox and whose child runs `script`.
fn hostile(sb: Sandbox, script: &str) -> Sandbox {
    std::fs::write(sb.agents.join("writer.md"), WRITER).unwrap();
    let state = sb.state.display().to_string();
    sb.scenario("hostile")
        .set("ORCHESTRATE_SANDBOX", "auto")
        .set("HOSTILE_STATE", &state)
        .set("FAKE_AGENT_SCRIPT", script)
}

/// What the script printed, line by line (the sanitizer shows the home directory as `~`).
fn said(out: &support::RunOutput) -> Vec<String> {
    assert_eq!(
        out.status, 0,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    out.result()["output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {}", out.stdout))
        .lines()
        .map(str::to_string)
        .collect()
}

/// Waits (at most 30 s) for the file a child's script makes once it has started.
fn wait_for_file(path: &Path, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `(echo x > PATH) && echo "wrote NAME" || echo "denied NAME"` for each `(NAME, PATH)`.
fn try_writes(targets: &[(&str, String)]) -> String {
    targets
        .iter()
        .map(|(name, path)| {
            format!("(echo planted >> \"{path}\") 2>/dev/null && echo 'wrote {name}' || echo 'denied {name}'\n")
        })
        .collect()
}

fn denied(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| format!("denied {n}")).collect()
}

/// Way 2: A read-only child plants code in its CLI's global configuration (which the CLI
/// runs, unsandboxed, the next time the user starts it). Each backend's own home, with
/// the fake agent standing in for each CLI.
#[test]
fn a_read_only_child_cannot_plant_code_in_any_clis_configuration() {
    let cases: [(&str, &str, &str); 5] = [
        (
            "pi",
            ".pi/agent/extensions/evil.ts",
            ".pi/agent/settings.json",
        ),
        ("claude", ".claude/settings.json", ".claude/hooks/evil.sh"),
        ("codex", ".codex/config.toml", ".codex/rules/evil.rules"),
        (
            "gemini",
            ".gemini/settings.json",
            ".gemini/extensions/evil/gemini-extension.json",
        ),
        (
            "opencode",
            ".config/opencode/opencode.json",
            ".config/opencode/plugin/evil.ts",
        ),
    ];
    for (user, (backend, existing, missing)) in support::users()
        .into_iter()
        .flat_map(|u| cases.map(|c| (u, c)))
    {
        let sb = Sandbox::for_user(user);
        let (existing, missing) = (sb.home.join(existing), sb.home.join(missing));
        write(&existing, "{}\n");
        let script = format!(
            "mkdir -p \"$(dirname '{m}')\" 2>/dev/null\n{}",
            try_writes(&[
                ("existing", existing.display().to_string()),
                ("missing", missing.display().to_string())
            ]),
            m = missing.display()
        );
        let fake = sb.fake_agent_bin();
        let sb = hostile(sb, &script).set(
            &format!("ORCHESTRATE_{}_BIN", backend.to_uppercase()),
            fake.to_str().unwrap(),
        );
        let out = sb.run_probe("fake", &["--backend", backend]);
        // The fake agent speaks pi's dialect only; what matters is what it did.
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "{}\n",
            "{backend} as {}: {existing:?} was changed\n{}",
            sb.who(),
            out.stdout
        );
        assert!(
            !missing.exists(),
            "{backend} as {}: {missing:?} was planted\n{}",
            sb.who(),
            out.stdout
        );
    }
}

/// Way 3: Keystrokes into the user's terminal: TIOCSTI on `/dev/tty`. orchestrate runs on a
/// terminal of the test's own; the child tries to push a line into its input.
#[test]
fn a_child_cannot_push_keystrokes_into_the_users_terminal() {
    for user in support::users() {
        a_child_cannot_push_keystrokes_into_the_users_terminal_as(user);
    }
}

fn a_child_cannot_push_keystrokes_into_the_users_terminal_as(user: Option<&'static Unprivileged>) {
    let sb = hostile(
        Sandbox::for_user(user),
        "\"$ORCHESTRATE_PI_BIN\" probe tiocsti 'echo pwned\n'",
    );
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills in two new descriptors.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty");
    let agents = sb.agents.to_str().unwrap().to_string();
    let base = sb.command(&[
        "run",
        "fake",
        "probe",
        "--agents-dir",
        &agents,
        "--details",
        "full",
    ]);
    // `setsid -c`: orchestrate leads a session whose controlling terminal is the pty.
    let mut cmd = std::process::Command::new("setsid");
    cmd.arg("-c")
        .arg("-w")
        .arg(base.get_program())
        .args(base.get_args())
        .current_dir(base.get_current_dir().unwrap())
        .env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    for (k, v) in std::env::vars_os() {
        if base.get_envs().all(|(bk, _)| bk != k) {
            cmd.env(k, v);
        }
    }
    // SAFETY: the slave is a valid descriptor; Stdio takes a duplicate.
    let stdin = unsafe { std::os::fd::BorrowedFd::borrow_raw(slave) }
        .try_clone_to_owned()
        .unwrap();
    cmd.stdin(std::process::Stdio::from(stdin))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    sb.assert_no_survivors();
    // What reached the terminal's input queue: nothing.
    // SAFETY: non-blocking reads from our own descriptor.
    let pending = unsafe {
        libc::fcntl(slave, libc::F_SETFL, libc::O_NONBLOCK);
        let mut buf = [0u8; 256];
        let n = libc::read(slave, buf.as_mut_ptr().cast(), buf.len());
        libc::close(master);
        libc::close(slave);
        if n > 0 {
            String::from_utf8_lossy(&buf[..n as usize]).to_string()
        } else {
            String::new()
        }
    };
    assert_eq!(pending, "", "keystrokes reached the terminal\n{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let said = v["details"]["results"][0]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        said.starts_with("tiocsti: ") && said != "tiocsti: ok",
        "{said}"
    );
}

/// Way 4: The run folder is the child's to write: it forges `result.json`, `exit-status` and
/// the session copy, blocks orchestrate's own write, and appends to the index. `show`
/// must print what orchestrate wrote.
#[test]
fn a_child_cannot_forge_or_block_orchestrates_records() {
    for user in support::users() {
        a_child_cannot_forge_or_block_orchestrates_records_as(user);
    }
}

fn a_child_cannot_forge_or_block_orchestrates_records_as(user: Option<&'static Unprivileged>) {
    let files = [
        "result.json",
        "exit-status",
        "supervisor.json",
        "session.jsonl",
        "stderr.log",
    ];
    let mut script = String::from("d=\"$HOSTILE_STATE/runs/$ORCHESTRATE_RUN_ID\"\n");
    for f in files {
        script.push_str(&format!(
            "(echo forged > \"$d/{f}\") 2>/dev/null && echo 'wrote {f}' || echo 'denied {f}'\n"
        ));
    }
    script.push_str(
        "mkdir \"$d/.result.json.tmp\" 2>/dev/null && echo 'wrote block' || echo 'denied block'\n\
         (echo forged >> \"$HOSTILE_STATE/runs.jsonl\") 2>/dev/null && echo 'wrote index' || echo 'denied index'\n\
         (echo forged > \"$HOSTILE_STATE/runs/forged\") 2>/dev/null && echo 'wrote runs' || echo 'denied runs'\n",
    );
    let sb = hostile(Sandbox::for_user(user), &script);
    let out = sb.run_probe("fake", &[]);
    let mut want = denied(&files);
    want.extend(denied(&["block", "index", "runs"]));
    assert_eq!(said(&out), want);
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let shown = sb.run_args(&["show", &id, "--json"]);
    assert_eq!(shown.status, 0, "{}", shown.stderr);
    let shown: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        shown["result"]["details"]["results"][0]["output"],
        out.result()["output"]
    );
    let index = std::fs::read_to_string(sb.state.join("runs.jsonl")).unwrap();
    assert!(!index.contains("forged"), "{index}");
}

/// Way 4, for a background run: `wait` returns what orchestrate wrote, and `stop` of a
/// finished run says so, whatever the child wrote in the run folder meanwhile.
#[test]
fn wait_and_stop_of_a_background_run_read_only_orchestrates_records() {
    for user in support::users() {
        wait_and_stop_of_a_background_run_read_only_orchestrates_records_as(user);
    }
}

fn wait_and_stop_of_a_background_run_read_only_orchestrates_records_as(
    user: Option<&'static Unprivileged>,
) {
    let script = "d=\"$HOSTILE_STATE/runs/$ORCHESTRATE_RUN_ID\"\n\
         (echo '{\"pid\":1,\"startedAtMs\":0}' > \"$d/supervisor.json\") 2>/dev/null && echo 'wrote supervisor'\n\
         (echo '0' > \"$d/exit-status\") 2>/dev/null && echo 'wrote exit-status'\n\
         mkdir \"$d/.result.json.tmp\" 2>/dev/null && echo 'wrote block'\n\
         echo done";
    let sb = hostile(Sandbox::for_user(user), script);
    let agents = sb.agents.to_str().unwrap().to_string();
    let started = sb.run_args(&[
        "run",
        "fake",
        "probe",
        "--agents-dir",
        &agents,
        "--background",
    ]);
    assert_eq!(started.status, 0, "{}", started.stderr);
    let id = started.json()["details"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let waited = sb.run_args(&["wait", &id, "--timeout", "30s"]);
    assert_eq!(waited.status, 0, "{}\n{}", waited.stdout, waited.stderr);
    assert_eq!(waited.json()["content"][0]["text"], json!("done"));
    let stopped = sb.run_args(&["stop", &id]);
    assert_eq!(stopped.status, 0, "{}", stopped.stderr);
}

/// Way 5: Unix sockets outside: the agent socket the child inherited (`SSH_AUTH_SOCK`) and an
/// abstract socket, in both network modes.
#[test]
fn a_child_reaches_no_agent_socket_and_no_abstract_socket_outside() {
    for user in support::users() {
        a_child_reaches_no_agent_socket_and_no_abstract_socket_outside_as(user);
    }
}

fn a_child_reaches_no_agent_socket_and_no_abstract_socket_outside_as(
    user: Option<&'static Unprivileged>,
) {
    use std::os::unix::net::UnixListener;
    let sb = Sandbox::for_user(user);
    // The inherited agent socket (in /tmp, as ssh-agent makes it), and agents' sockets
    // in the home: 1Password's ssh agent, git's credential cache, a docker socket that
    // DOCKER_HOST names.
    let sockets = [
        sb.root.path().join("agent.sock"),
        sb.home.join(".1password/agent.sock"),
        sb.home.join(".cache/git/credential/socket"),
        sb.home.join("docker/docker.sock"),
    ];
    let _listeners: Vec<UnixListener> = sockets
        .iter()
        .map(|p| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            UnixListener::bind(p).unwrap()
        })
        .collect();
    let abstract_name = format!("orchestrate-hostile-{}", std::process::id());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    let mut script = String::from("echo \"SSH_AUTH_SOCK=${SSH_AUTH_SOCK:-unset}\"\n");
    for p in &sockets {
        script.push_str(&format!(
            "\"$ORCHESTRATE_PI_BIN\" probe connect-unix '{}'\n",
            p.display()
        ));
    }
    script.push_str("\"$ORCHESTRATE_PI_BIN\" probe connect-abstract \"$HOSTILE_ABSTRACT\"");
    let docker_host = format!("unix://{}", sockets[3].display());
    let sb = hostile(sb, &script)
        .set("SSH_AUTH_SOCK", sockets[0].to_str().unwrap())
        .set("DOCKER_HOST", &docker_host)
        .set("HOSTILE_ABSTRACT", &abstract_name);
    // Without the sandbox, each is there to connect to: the probes are real.
    let out = sb.run_probe("fake", &["--sandbox", "off"]);
    let lines = said(&out);
    assert_eq!(lines.len(), sockets.len() + 2, "{lines:?}");
    for line in &lines[1..] {
        assert!(line.ends_with(": ok"), "as {}: {lines:?}", sb.who());
    }
    for network in ["on", "off"] {
        let out = sb.run_probe("fake", &["--network", network]);
        let lines = said(&out);
        assert_eq!(lines[0], "SSH_AUTH_SOCK=unset", "network {network}");
        for line in &lines[1..] {
            assert!(
                !line.ends_with(": ok"),
                "as {}, network {network}: {lines:?}",
                sb.who()
            );
        }
    }
}

/// Way 6: Metadata writes (mode, times, xattrs) on a file the user owns, in read-only mode.
#[test]
fn a_read_only_child_changes_no_metadata_outside() {
    for user in support::users() {
        a_read_only_child_changes_no_metadata_outside_as(user);
    }
}

fn a_read_only_child_changes_no_metadata_outside_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let victim = sb.home.join("victim.txt");
    write(&victim, "v\n");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&victim).unwrap();
    let script = format!(
        "for p in chmod utimes setxattr; do \"$ORCHESTRATE_PI_BIN\" probe $p '{}'; done",
        victim.display()
    );
    let sb = hostile(sb, &script);
    let out = sb.run_probe("fake", &[]);
    for line in said(&out) {
        assert!(!line.ends_with(": ok"), "{line}");
    }
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(
        (after.mode(), after.mtime(), after.atime()),
        (before.mode(), before.mtime(), before.atime())
    );
    assert!(xattr_names(&victim).is_empty());
}

fn xattr_names(p: &Path) -> Vec<u8> {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let mut buf = [0u8; 256];
    // SAFETY: a valid path and buffer.
    let n = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    buf[..n.max(0) as usize].to_vec()
}

/// Way 7: A nested orchestrate (depth limit 2) writes the shared state: the child appends to
/// the parent's index directly, and the run it starts lands where its parent lets it
/// write, not in the parent's state.
#[test]
fn a_nested_orchestrate_keeps_its_state_out_of_the_parents() {
    for user in support::users() {
        a_nested_orchestrate_keeps_its_state_out_of_the_parents_as(user);
    }
}

fn a_nested_orchestrate_keeps_its_state_out_of_the_parents_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    // In the workspace: the child sees it (an empty /tmp of its own hides the test's).
    let agents = sb.work.join("agents");
    write(&agents.join("fake.md"), support::TEST_AGENT);
    let agents = agents.display().to_string();
    // The nested orchestrate is also pointed back at the parent's state: its run and a
    // prune of every worktree there must fail, not write.
    let script = format!(
        "(echo '{{\"runId\":\"forged\"}}' >> \"$HOSTILE_STATE/runs.jsonl\") 2>/dev/null && echo 'wrote index' || echo 'denied index'\n\
         \"$HOSTILE_ORCHESTRATE\" run fake '@scenario:replay inner' --agents-dir '{agents}' >/dev/null 2>&1; echo \"inner exit $?\"\n\
         ORCHESTRATE_STATE_DIR=\"$HOSTILE_STATE\" \"$HOSTILE_ORCHESTRATE\" run fake '@scenario:replay inner' --agents-dir '{agents}' >/dev/null 2>&1 && echo 'ran in the parent state' || echo 'refused the parent state'\n\
         ORCHESTRATE_STATE_DIR=\"$HOSTILE_STATE\" \"$HOSTILE_ORCHESTRATE\" worktree prune --all >/dev/null 2>&1; echo \"prune exit $?\"\n\
         echo \"state $ORCHESTRATE_STATE_DIR\""
    );
    let orchestrate = sb.orchestrate_bin();
    let sb = hostile(sb, &script)
        .set("ORCHESTRATE_MAX_DEPTH", "2")
        .set("HOSTILE_ORCHESTRATE", orchestrate.to_str().unwrap());
    // A worktree the user keeps, on record in the parent's state.
    let worktrees = sb.state.join("worktrees");
    write(&worktrees.join("keep/file.txt"), "the user's\n");
    let out = sb.run_probe("fake", &[]);
    let lines = said(&out);
    assert_eq!(
        lines[..3],
        ["denied index", "inner exit 0", "refused the parent state"],
        "as {}: {lines:?}",
        sb.who()
    );
    assert_eq!(
        std::fs::read_to_string(worktrees.join("keep/file.txt")).unwrap(),
        "the user's\n"
    );
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let inner_state = lines[4].strip_prefix("state ").unwrap();
    assert!(
        !Path::new(inner_state).starts_with(&sb.state)
            || Path::new(inner_state).starts_with(sb.state.join("runs").join(&id)),
        "the nested orchestrate's state is {inner_state}"
    );
    // The parent's index holds the parent's run alone.
    let index = std::fs::read_to_string(sb.state.join("runs.jsonl")).unwrap();
    let ids: Vec<String> = index
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["runId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids, [id]);
}

/// Way 8: Reads: a read-only child reads the user's credentials and other CLIs' tokens.
#[test]
fn a_child_reads_none_of_the_users_credentials() {
    for user in support::users() {
        a_child_reads_none_of_the_users_credentials_as(user);
    }
}

fn a_child_reads_none_of_the_users_credentials_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let secrets = [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/credentials.db",
        ".gnupg/private-keys-v1.d/key.key",
        ".kube/config",
        ".docker/config.json",
        ".netrc",
        ".git-credentials",
        ".config/gh/hosts.yml",
        ".codex/auth.json",
        ".claude/.credentials.json",
        ".gemini/oauth_creds.json",
        ".local/share/opencode/auth.json",
        ".m2/settings.xml",
        ".gradle/gradle.properties",
        ".config/pip/pip.conf",
        ".kaggle/kaggle.json",
        ".config/composer/auth.json",
        ".config/sops/age/keys.txt",
        ".bash_history",
    ];
    let mut script = String::new();
    for (i, s) in secrets.iter().enumerate() {
        write(
            &sb.home.join(s),
            &format!("orchestrate-hostile-secret-{i}\n"),
        );
        script.push_str(&format!("cat ~/{s} 2>/dev/null\n"));
    }
    script.push_str("ls -a ~/.ssh 2>&1 | tr '\\n' ' '; echo");
    let sb = hostile(sb, &script);
    let out = sb.run_probe("fake", &[]);
    let text = said(&out).join("\n");
    assert!(!text.contains("orchestrate-hostile-secret"), "{text}");
    assert!(!text.contains("id_ed25519"), "{text}");
}

/// Way 9: Hard links: a file in the workspace that shares its inode with one outside (as a
/// package manager's content store makes them).
#[test]
fn a_hard_link_in_the_workspace_lets_a_writer_change_the_file_outside() {
    for user in support::users() {
        a_hard_link_in_the_workspace_lets_a_writer_change_the_file_outside_as(user);
    }
}

fn a_hard_link_in_the_workspace_lets_a_writer_change_the_file_outside_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let store = sb.root.path().join("store/pkg.js");
    write(&store, "original\n");
    std::fs::hard_link(&store, sb.work.join("pkg.js")).unwrap();
    let sb = hostile(sb, "echo changed > pkg.js && echo wrote");
    let out = sb.run_probe("writer", &[]);
    assert_eq!(said(&out), ["wrote"]);
    // The documented limit (README, "Hard links"): the write reaches the shared inode.
    assert_eq!(std::fs::read_to_string(&store).unwrap(), "changed\n");
}

/// Way 1, the sandbox's part: the repository's `.git` is read-only to a workspace-write child,
/// all of it, and so are the protected names that do not exist yet.
#[test]
fn a_workspace_write_child_cannot_touch_git_or_plant_protected_paths() {
    for user in support::users() {
        a_workspace_write_child_cannot_touch_git_or_plant_protected_paths_as(user);
    }
}

fn a_workspace_write_child_cannot_touch_git_or_plant_protected_paths_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&sb.work)
            .env("HOME", &sb.home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    ]);
    let targets = [
        (".git/config", ".git/config".to_string()),
        (".git/HEAD", ".git/HEAD".to_string()),
        (".git/hooks", ".git/hooks/pre-commit".to_string()),
        (".git/refs", ".git/refs/tags/planted".to_string()),
        (".git/info", ".git/info/attributes".to_string()),
        (".vscode", ".vscode/tasks.json".to_string()),
        (".mcp.json", ".mcp.json".to_string()),
        (".claude", ".claude/settings.json".to_string()),
        ("ok", "ok.txt".to_string()),
    ];
    let script = format!(
        "mkdir .vscode .claude 2>/dev/null\n{}",
        try_writes(&targets)
    );
    let before = std::fs::read_to_string(sb.work.join(".git/config")).unwrap();
    let sb = hostile(sb, &script);
    let out = sb.run_probe("writer", &[]);
    let mut want = denied(&[
        ".git/config",
        ".git/HEAD",
        ".git/hooks",
        ".git/refs",
        ".git/info",
        ".vscode",
        ".mcp.json",
        ".claude",
    ]);
    want.push("wrote ok".into());
    assert_eq!(said(&out), want);
    assert_eq!(
        std::fs::read_to_string(sb.work.join(".git/config")).unwrap(),
        before
    );
    for p in [".vscode", ".mcp.json", ".claude"] {
        let p: PathBuf = sb.work.join(p);
        assert!(!p.exists(), "{} is left", p.display());
    }
}

/// The repository's configuration may name files in the workspace that git runs or reads
/// as configuration later, outside any sandbox: a hooks folder (`core.hooksPath`, which
/// husky sets), included configuration files (`include.path`, `includeIf`), and the
/// scripts of its commands (a filter driver here). Each is as protected as `.git` itself,
/// and one that does not exist yet cannot be made (a placeholder holds its first missing
/// folder, gone after the run).
#[test]
fn a_workspace_write_child_cannot_plant_what_the_repositorys_git_config_runs() {
    for user in support::users() {
        a_workspace_write_child_cannot_plant_what_the_repositorys_git_config_runs_as(user);
    }
}

fn a_workspace_write_child_cannot_plant_what_the_repositorys_git_config_runs_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    git_in(&sb.work, &["init", "-q", "-b", "main"]);
    write(&sb.work.join(".husky/pre-commit"), "#!/bin/sh\nexit 0\n");
    write(
        &sb.work.join(".husky/_/pre-commit"),
        "#!/bin/sh\n. .husky/_/h\n",
    );
    write(
        &sb.work.join("repo.gitconfig"),
        "[includeIf \"onbranch:main\"]\n\tpath = cfg/more.gitconfig\n",
    );
    write(&sb.work.join("scripts/clean.sh"), "#!/bin/sh\ncat\n");
    // An installed hook of a hook framework, which reads its configuration from the
    // working tree when the user pushes.
    write(
        &sb.work.join(".git/hooks/pre-push"),
        "#!/bin/sh\nexec pre-commit hook-impl --hook-type=pre-push\n",
    );
    write(
        &sb.work.join(".git/hooks/post-checkout"),
        "#!/bin/sh\nexec lefthook run post-checkout \"$@\"\n",
    );
    let config = sb.work.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(
        "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../repo.gitconfig\n\
         [filter \"fmt\"]\n\tclean = \"./scripts/clean.sh\" %f\n",
    );
    std::fs::write(&config, text).unwrap();
    let targets = [
        ("hook", ".husky/_/pre-commit".to_string()),
        ("user hook", ".husky/pre-commit".to_string()),
        ("new hook", ".husky/_/post-checkout".to_string()),
        ("include", "repo.gitconfig".to_string()),
        ("filter", "scripts/clean.sh".to_string()),
        ("nested include", "cfg/more.gitconfig".to_string()),
        ("ok", "ok.txt".to_string()),
        ("beside the filter", "scripts/other.sh".to_string()),
        ("pre-commit config", ".pre-commit-config.yaml".to_string()),
        ("lefthook config", "lefthook.yml".to_string()),
    ];
    // Moving a protected path's folder away, to make another in its place.
    let swaps = "(mv .husky .h2 && mkdir -p .husky/_ && echo x > .husky/_/pre-commit) 2>/dev/null \
                 && echo 'swapped .husky' || echo 'kept .husky'\n\
                 (mv scripts s2 && mkdir scripts && echo x > scripts/clean.sh) 2>/dev/null \
                 && echo 'swapped scripts' || echo 'kept scripts'\n";
    let script = format!("mkdir -p cfg 2>/dev/null\n{}{swaps}", try_writes(&targets));
    let sb = hostile(sb, &script);
    let out = sb.run_probe("writer", &[]);
    let mut want = denied(&[
        "hook",
        "user hook",
        "new hook",
        "include",
        "filter",
        "nested include",
    ]);
    want.extend(
        [
            "wrote ok",
            "wrote beside the filter",
            "denied pre-commit config",
            "denied lefthook config",
            "kept .husky",
            "kept scripts",
        ]
        .map(String::from),
    );
    assert_eq!(said(&out), want);
    assert_eq!(
        std::fs::read_to_string(sb.work.join(".husky/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert!(!sb.work.join(".husky/_/post-checkout").exists());
    assert!(!sb.work.join(".h2").exists() && !sb.work.join("s2").exists());
    assert!(std::fs::read_to_string(sb.work.join("repo.gitconfig"))
        .unwrap()
        .starts_with("[includeIf"));
    assert_eq!(
        std::fs::read_to_string(sb.work.join("scripts/clean.sh")).unwrap(),
        "#!/bin/sh\ncat\n"
    );
    assert!(
        !sb.work.join("cfg").exists(),
        "the placeholder went with the run"
    );
    assert!(!sb.work.join(".pre-commit-config.yaml").exists());
}

/// A set-user-ID or set-group-ID file the child makes in its workspace would outlive the
/// run: the workspace is mounted nosuid inside the sandbox, but not outside it, where any
/// user who can reach the folder would run it as the child's user (root, where
/// orchestrate runs as root). Ordinary modes (an executable script) stay the child's.
#[test]
fn a_workspace_write_child_cannot_make_a_set_id_file() {
    for user in support::users() {
        a_workspace_write_child_cannot_make_a_set_id_file_as(user);
    }
}

fn a_workspace_write_child_cannot_make_a_set_id_file_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let script = "cp /bin/true ./t && chmod 755 ./t && echo 'made t'\n\
                  chmod 4755 ./t 2>/dev/null && echo 'set-uid t' || echo 'denied set-uid'\n\
                  chmod u+s,g+s ./t 2>/dev/null && echo 'set-uid,gid t' || echo 'denied set-uid,gid'\n\
                  chmod 2755 ./t 2>/dev/null && echo 'set-gid t' || echo 'denied set-gid'\n\
                  mkdir d && chmod 2775 d 2>/dev/null && echo 'set-gid d' || echo 'denied set-gid d'\n\
                  \"$ORCHESTRATE_PI_BIN\" probe fchmod-setuid ./t";
    let sb = hostile(sb, script);
    let out = sb.run_probe("writer", &[]);
    assert_eq!(
        said(&out),
        [
            "made t",
            "denied set-uid",
            "denied set-uid,gid",
            "denied set-gid",
            "denied set-gid d",
            "fchmod-setuid: denied",
        ]
    );
    for p in ["t", "d"] {
        let mode = std::fs::metadata(sb.work.join(p)).unwrap().mode();
        assert_eq!(mode & 0o6000, 0, "{p} has mode {mode:o}");
    }
    assert_eq!(
        std::fs::metadata(sb.work.join("t")).unwrap().mode() & 0o777,
        0o755
    );
}

fn git_in(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A protected name that is a symbolic link (`.git` to a repository's git folder
/// elsewhere, `.vscode` to the user's editor settings): what it points to stays
/// read-only, and the link cannot be removed, renamed or replaced (the child sees an
/// empty file there).
#[test]
fn a_symlinked_protected_path_stays_read_only_and_keeps_its_link() {
    for user in support::users() {
        a_symlinked_protected_path_stays_read_only_and_keeps_its_link_as(user);
    }
}

fn a_symlinked_protected_path_stays_read_only_and_keeps_its_link_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let repo = sb.root.path().join("elsewhere");
    std::fs::create_dir_all(&repo).unwrap();
    git_in(&repo, &["init", "-q", "-b", "main"]);
    git_in(&repo, &["commit", "-q", "--allow-empty", "-m", "first"]);
    std::os::unix::fs::symlink(repo.join(".git"), sb.work.join(".git")).unwrap();
    let settings = sb.home.join(".config/Code/User");
    write(&settings.join("tasks.json"), "{}\n");
    std::os::unix::fs::symlink(&settings, sb.work.join(".vscode")).unwrap();
    let config_before = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let script = format!(
        "{}\
         rm -rf .vscode 2>/dev/null && echo 'removed .vscode' || echo 'kept .vscode'\n\
         mv .git moved 2>/dev/null && echo 'moved .git' || echo 'kept .git'\n\
         ln -sfn /tmp .vscode 2>/dev/null && echo 'relinked .vscode' || echo 'kept the link'",
        try_writes(&[
            (".git/config", ".git/config".into()),
            (".git/hooks", ".git/hooks/pre-commit".into()),
            (".vscode", ".vscode/tasks.json".into()),
            (".vscode (new)", ".vscode/launch.json".into()),
        ])
    );
    let sb = hostile(sb, &script);
    let out = sb.run_probe("writer", &[]);
    let mut want = denied(&[".git/config", ".git/hooks", ".vscode", ".vscode (new)"]);
    want.extend(["kept .vscode", "kept .git", "kept the link"].map(String::from));
    assert_eq!(said(&out), want, "as {}", sb.who());
    assert_eq!(
        std::fs::read_link(sb.work.join(".vscode")).unwrap(),
        settings
    );
    assert_eq!(
        std::fs::read_link(sb.work.join(".git")).unwrap(),
        repo.join(".git")
    );
    assert_eq!(
        std::fs::read_to_string(settings.join("tasks.json")).unwrap(),
        "{}\n"
    );
    assert!(!settings.join("launch.json").exists());
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config_before
    );
}

/// A hard link made during the run, from a writable place to a file outside it (the
/// user's file, a system file, the repository's git config): the link fails (the
/// writable places are mounts of their own, and a link does not cross mounts), so no
/// write through it can reach the file outside.
#[test]
fn a_hard_link_made_during_the_run_to_a_file_outside_fails() {
    for user in support::users() {
        a_hard_link_made_during_the_run_to_a_file_outside_fails_as(user);
    }
}

fn a_hard_link_made_during_the_run_to_a_file_outside_fails_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let victim = sb.home.join("victim.txt");
    write(&victim, "v\n");
    git_in(&sb.work, &["init", "-q", "-b", "main"]);
    let script = format!(
        "for f in '{}' /etc/hostname .git/config; do\n\
           ln \"$f\" linked 2>/dev/null && echo \"linked $f\" || echo \"not linked $f\"\n\
           ln \"$f\" \"$TMPDIR/linked\" 2>/dev/null && echo \"linked $f in TMPDIR\" || echo \"not linked $f in TMPDIR\"\n\
         done",
        victim.display()
    );
    let sb = hostile(sb, &script);
    let out = sb.run_probe("writer", &[]);
    let mut want = Vec::new();
    for f in ["~/victim.txt", "/etc/hostname", ".git/config"] {
        want.push(format!("not linked {f}"));
        want.push(format!("not linked {f} in TMPDIR"));
    }
    assert_eq!(said(&out), want, "as {}", sb.who());
    assert_eq!(std::fs::metadata(&victim).unwrap().nlink(), 1);
    assert_eq!(
        std::fs::metadata(sb.work.join(".git/config"))
            .unwrap()
            .nlink(),
        1
    );
    assert!(!sb.work.join("linked").exists());
}

/// Ways through /proc and signals: the controller (PID 1 of the child's namespace) is
/// neither readable (environment, root, descriptors) nor traceable nor killable from
/// inside, no process outside the namespace is visible, and one outside cannot be
/// signalled.
#[test]
fn proc_and_signals_reach_nothing_outside_the_childs_tree() {
    for user in support::users() {
        proc_and_signals_reach_nothing_outside_the_childs_tree_as(user);
    }
}

fn proc_and_signals_reach_nothing_outside_the_childs_tree_as(user: Option<&'static Unprivileged>) {
    use std::os::unix::process::CommandExt;
    let sb = Sandbox::for_user(user);
    // A process outside, of the same user as the child.
    let mut outside = std::process::Command::new("sleep");
    outside.arg("60").process_group(0);
    if let Some(u) = user {
        outside.uid(u.uid).gid(u.gid);
    }
    let mut outside = outside.spawn().unwrap();
    let pid = outside.id().to_string();
    let script = "cat /proc/1/environ >/dev/null 2>&1 && echo 'read its environment' || echo 'no environment'\n\
         ls /proc/1/root/ >/dev/null 2>&1 && echo 'read its root' || echo 'no root'\n\
         for f in /proc/1/fd/*; do readlink \"$f\"; done 2>/dev/null | grep -q . && echo 'read its descriptors' || echo 'no descriptors'\n\
         \"$ORCHESTRATE_PI_BIN\" probe ptrace 1 | sed 's/: .*/: refused/;s/ptrace: refused/ptrace refused/'\n\
         kill -KILL 1 2>/dev/null; kill -STOP 1 2>/dev/null; sleep 0.2\n\
         test -e \"/proc/$HOSTILE_OUTSIDE\" && echo 'sees outside' || echo 'sees nothing outside'\n\
         kill -TERM \"$HOSTILE_OUTSIDE\" 2>/dev/null && echo 'signalled outside' || echo 'signals nothing outside'\n\
         \"$ORCHESTRATE_PI_BIN\" probe signal \"$HOSTILE_OUTSIDE\" | sed 's/: ok$/: sent/'\n\
         echo still here";
    let sb = hostile(sb, script).set("HOSTILE_OUTSIDE", &pid);
    let out = sb.run_probe("fake", &[]);
    let lines = said(&out);
    let alive = support::is_alive(outside.id() as i32);
    let _ = outside.kill();
    let _ = outside.wait();
    assert_eq!(
        lines[..6],
        [
            "no environment",
            "no root",
            "no descriptors",
            "ptrace refused",
            "sees nothing outside",
            "signals nothing outside",
        ],
        "as {}: {lines:?}",
        sb.who()
    );
    assert!(!lines[6].ends_with("sent"), "{lines:?}");
    assert_eq!(lines[7], "still here");
    assert!(alive, "the process outside was killed");
    assert_eq!(
        out.result()["termination"],
        json!({"kind": "exited", "code": 0})
    );
}

/// The placeholders that hold missing protected names: the child can neither remove,
/// rename nor replace one; they go with the run; and a file the user makes in one
/// meanwhile (outside the sandbox) is the user's and stays.
#[test]
fn placeholders_cannot_be_moved_by_the_child_and_keep_what_the_user_put_there() {
    for user in support::users() {
        placeholders_cannot_be_moved_by_the_child_and_keep_what_the_user_put_there_as(user);
    }
}

fn placeholders_cannot_be_moved_by_the_child_and_keep_what_the_user_put_there_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let script = "rm -rf .vscode 2>/dev/null && echo 'removed .vscode' || echo 'kept .vscode'\n\
         mv .mcp.json elsewhere.json 2>/dev/null && echo 'moved .mcp.json' || echo 'kept .mcp.json'\n\
         (echo '{}' > .mcp.json) 2>/dev/null && echo 'wrote .mcp.json' || echo 'denied .mcp.json'\n\
         rmdir .claude 2>/dev/null && mkdir .claude 2>/dev/null && echo 'replaced .claude' || echo 'kept .claude'\n\
         echo > started\n\
         while [ ! -e go ]; do sleep 0.02; done\n\
         echo done";
    let sb = hostile(sb, script);
    let agents = sb.agents.to_str().unwrap().to_string();
    let child = sb
        .command(&[
            "run",
            "writer",
            "probe",
            "--agents-dir",
            &agents,
            "--details",
            "full",
        ])
        .spawn()
        .unwrap();
    wait_for_file(&sb.work.join("started"), "the child never started");
    // The user, outside, while the run goes on: a setting in the placeholder folder, and
    // the placeholder file filled in.
    write(
        &sb.work.join(".vscode/settings.json"),
        "{\"the\": \"user's\"}\n",
    );
    write(&sb.work.join(".mcp.json"), "{\"mcpServers\": {}}\n");
    std::fs::write(sb.work.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let lines: Vec<&str> = v["details"]["results"][0]["output"]
        .as_str()
        .unwrap()
        .lines()
        .collect();
    assert_eq!(
        lines,
        [
            "kept .vscode",
            "kept .mcp.json",
            "denied .mcp.json",
            "kept .claude",
            "done"
        ],
        "as {}",
        sb.who()
    );
    sb.assert_no_survivors();
    assert_eq!(
        std::fs::read_to_string(sb.work.join(".vscode/settings.json")).unwrap(),
        "{\"the\": \"user's\"}\n"
    );
    assert_eq!(
        std::fs::read_to_string(sb.work.join(".mcp.json")).unwrap(),
        "{\"mcpServers\": {}}\n"
    );
    // What the user wrote never went into the pool of kept placeholders.
    assert_eq!(pool(&sb).iter().filter(|(_, empty)| !empty).count(), 0);
    for gone in [
        ".claude",
        ".git",
        ".idea",
        "opencode.json",
        "elsewhere.json",
    ] {
        assert!(!sb.work.join(gone).exists(), "{gone} is left");
    }
}

/// The kept placeholders in orchestrate's state: `(inode, empty)` of each.
fn pool(sb: &Sandbox) -> Vec<(u64, bool)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(sb.state.join("placeholder-pool"))
        .map(|d| {
            d.flatten()
                .map(|e| {
                    let m = std::fs::symlink_metadata(e.path()).unwrap();
                    let empty = if m.is_dir() {
                        std::fs::read_dir(e.path()).unwrap().next().is_none()
                    } else {
                        m.len() == 0
                    };
                    (m.ino(), empty)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A run's placeholders are kept, empty, in orchestrate's state when it ends, and the
/// next run in the workspace puts those same ones in place rather than making new ones;
/// the workspace is clean between and after.
#[test]
fn the_next_run_reuses_the_placeholders_the_last_one_let_go() {
    use std::os::unix::fs::MetadataExt;
    let sb = Sandbox::new();
    let sb = hostile(sb, "stat -c %i .bashrc .vscode\necho done");
    let agents = sb.agents.to_str().unwrap().to_string();
    let run = || {
        let out = sb.run_command(sb.command(&[
            "run",
            "writer",
            "probe",
            "--agents-dir",
            &agents,
            "--details",
            "full",
        ]));
        let lines = said(&out);
        assert_eq!(lines.len(), 3, "{lines:?}");
        let inodes: Vec<u64> = lines[..2].iter().map(|l| l.parse().unwrap()).collect();
        for gone in [".bashrc", ".vscode", ".mcp.json", ".git"] {
            assert!(!sb.work.join(gone).exists(), "{gone} is left");
        }
        inodes
    };
    let first = run();
    let kept = pool(&sb);
    assert!(kept.iter().all(|(_, empty)| *empty), "{kept:?}");
    for ino in &first {
        assert!(
            kept.iter().any(|(i, _)| i == ino),
            "{ino} not kept: {kept:?}"
        );
    }
    let second = run();
    for ino in &second {
        assert!(
            kept.iter().any(|(i, _)| i == ino),
            "the second run made a new placeholder ({ino}; kept: {kept:?})"
        );
    }
    // (The workspace's own inode says the bind mount showed the placeholder itself.)
    assert_ne!(std::fs::metadata(&sb.work).unwrap().ino(), first[1]);
}

/// orchestrate killed with SIGKILL just after it moved a placeholder into the pool and
/// before it looked at it: what someone wrote there stays in the pool, and is never put in
/// place as another run's placeholder (where it would become that workspace's file).
#[test]
fn a_written_file_left_in_the_pool_by_a_kill_9_is_never_handed_out() {
    use std::os::unix::fs::MetadataExt;
    let sb = Sandbox::new();
    let pool = sb.state.join("placeholder-pool");
    std::fs::create_dir_all(pool.join("d-0-0-1")).unwrap();
    write(
        &pool.join("d-0-0-1/settings.json"),
        "{\"the\": \"user's\"}\n",
    );
    write(&pool.join("f-0-0-1"), "alias ls='the user'\n");
    let (dir_ino, file_ino) = (
        std::fs::metadata(pool.join("d-0-0-1")).unwrap().ino(),
        std::fs::metadata(pool.join("f-0-0-1")).unwrap().ino(),
    );
    let sb = hostile(
        sb,
        "find .vscode .claude .idea -mindepth 1 | wc -l\nwc -c < .bashrc\nwc -c < .mcp.json\necho done",
    );
    let out = sb.run_probe("writer", &[]);
    let text = said(&out);
    assert_eq!(text, ["0", "0", "0", "done"], "{text:?}");
    for left in [".bashrc", ".vscode", ".mcp.json"] {
        assert!(!sb.work.join(left).exists(), "{left} is left");
    }
    // Still where they were, whole.
    assert_eq!(
        std::fs::metadata(pool.join("d-0-0-1"))
            .map(|m| m.ino())
            .ok(),
        Some(dir_ino)
    );
    assert_eq!(
        std::fs::metadata(pool.join("f-0-0-1"))
            .map(|m| m.ino())
            .ok(),
        Some(file_ino)
    );
    assert_eq!(
        std::fs::read_to_string(pool.join("f-0-0-1")).unwrap(),
        "alias ls='the user'\n"
    );
}

/// A fan-out of writers in one workspace holds each placeholder once, not once per task
/// (a wide fan-out would run out of descriptors), keeps it while any task runs, and
/// leaves none.
#[test]
fn a_fan_out_of_writers_in_one_workspace_holds_each_placeholder_once() {
    // (A lane of the fan-out scheduler starts at four.)
    const TASKS: usize = 4;
    let sb = Sandbox::new();
    let sb = hostile(
        sb,
        "mktemp started.XXXXXX >/dev/null\n\
         while [ ! -e go ]; do sleep 0.02; done\n\
         (echo evil > .bashrc) 2>/dev/null && echo 'wrote .bashrc' || echo 'denied .bashrc'",
    );
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec!["run", "--agents-dir", &agents, "--concurrency", "4"];
    for _ in 0..TASKS {
        args.extend(["--task", "writer=probe"]);
    }
    let mut child = sb
        .command(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let started = || {
        std::fs::read_dir(&sb.work)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("started."))
            .count()
    };
    while started() < TASKS {
        if child.try_wait().unwrap().is_some() || std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{} of the tasks started: {}",
                started(),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let bashrc = sb.work.canonicalize().unwrap().join(".bashrc");
    let held = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t == bashrc))
        .count();
    std::fs::write(sb.work.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(held, 1, "descriptors of orchestrate's on .bashrc");
    assert_eq!(stdout.matches("denied .bashrc").count(), TASKS, "{stdout}");
    sb.assert_no_survivors();
    assert!(!sb.work.join(".bashrc").exists(), ".bashrc is left");
}

/// A child that links a placeholder into its workspace under another name (possible
/// where no mount namespace covers it) keeps its own file, and that inode is never kept
/// for another workspace's placeholder, where the child could write through its link.
#[test]
fn a_placeholder_the_child_linked_elsewhere_is_not_kept_for_another_run() {
    use std::os::unix::fs::MetadataExt;
    for containment in ["auto", "subreaper"] {
        let sb = Sandbox::new();
        let sb = hostile(
            sb,
            "ln .bashrc linked 2>/dev/null && echo linked || echo 'not linked'\n\
             ln .mcp.json linked2 2>/dev/null && echo linked || echo 'not linked'",
        )
        .set("ORCHESTRATE_CONTAINMENT", containment);
        let out = sb.run_probe("writer", &[]);
        let text = said(&out);
        let linked: Vec<u64> = ["linked", "linked2"]
            .iter()
            .filter_map(|n| std::fs::symlink_metadata(sb.work.join(n)).ok())
            .map(|m| m.ino())
            .collect();
        if containment == "subreaper" {
            assert_eq!(text, ["linked", "linked"], "{containment}");
            assert_eq!(linked.len(), 2);
        }
        let kept = pool(&sb);
        assert!(!kept.is_empty(), "{containment}: nothing kept");
        for ino in &linked {
            assert!(
                kept.iter().all(|(i, _)| i != ino),
                "{containment}: a linked placeholder was kept ({ino}; {kept:?})"
            );
        }
        assert!(!sb.work.join(".bashrc").exists(), "{containment}");
    }
}

/// Two runs in one workspace: the first makes the placeholders, the second finds them
/// there. When the first ends while the second's child still runs, the second's child
/// still cannot create a protected name, and none is left after both.
#[test]
fn a_run_that_ends_first_does_not_lift_the_placeholders_of_a_run_still_going() {
    for user in support::users() {
        a_run_that_ends_first_does_not_lift_the_placeholders_of_a_run_still_going_as(user);
    }
}

fn a_run_that_ends_first_does_not_lift_the_placeholders_of_a_run_still_going_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let script = "echo > \"started-$HOSTILE_NAME\"\n\
         while [ ! -e \"go-$HOSTILE_NAME\" ]; do sleep 0.02; done\n\
         (echo evil > .bashrc) 2>/dev/null && echo 'wrote .bashrc' || echo 'denied .bashrc'\n\
         (mkdir -p .vscode && echo '{}' > .vscode/tasks.json) 2>/dev/null && echo 'wrote .vscode' || echo 'denied .vscode'\n\
         (echo evil > .mcp.json) 2>/dev/null && echo 'wrote .mcp.json' || echo 'denied .mcp.json'\n\
         echo done";
    let sb = hostile(sb, script);
    let agents = sb.agents.to_str().unwrap().to_string();
    let start = |name: &str| {
        let child = sb
            .command(&["run", "writer", "probe", "--agents-dir", &agents])
            .env("HOSTILE_NAME", name)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_file(
            &sb.work.join(format!("started-{name}")),
            &format!("run {name} never started"),
        );
        child
    };
    let finish = |name: &str, child: std::process::Child| {
        std::fs::write(sb.work.join(format!("go-{name}")), "").unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{name}: {stdout}");
        let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        v["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {v:#}"))
            .to_string()
    };
    let first = start("first");
    let second = start("second");
    let denied = "denied .bashrc\ndenied .vscode\ndenied .mcp.json\ndone";
    assert_eq!(finish("first", first), denied, "first, as {}", sb.who());
    assert_eq!(finish("second", second), denied, "second, as {}", sb.who());
    sb.assert_no_survivors();
    for gone in [".bashrc", ".vscode", ".mcp.json", ".claude"] {
        assert!(
            !sb.work.join(gone).exists(),
            "as {}: {gone} is left",
            sb.who()
        );
    }
}

/// orchestrate itself killed with SIGKILL mid-run: nothing of the child's tree is left,
/// and the placeholders it could not remove are removed by the next sandboxed run.
#[test]
fn after_a_kill_9_of_orchestrate_nothing_runs_and_the_next_run_removes_its_placeholders() {
    for user in support::users() {
        after_a_kill_9_of_orchestrate_nothing_runs_and_the_next_run_removes_its_placeholders_as(
            user,
        );
    }
}

fn after_a_kill_9_of_orchestrate_nothing_runs_and_the_next_run_removes_its_placeholders_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let sb = hostile(
        sb,
        "if [ \"$HOSTILE_WAIT\" = 1 ]; then echo > started; sleep 60; fi\necho done",
    );
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut child = sb
        .command(&["run", "writer", "probe", "--agents-dir", &agents])
        .env("HOSTILE_WAIT", "1")
        .spawn()
        .unwrap();
    wait_for_file(&sb.work.join("started"), "the child never started");
    // SAFETY: our own child (orchestrate, or setpriv that became it).
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    sb.assert_no_survivors();
    // Left behind: the placeholders (empty), as the next run finds them.
    let left: Vec<&str> = [".vscode", ".git", ".mcp.json", ".bashrc"]
        .into_iter()
        .filter(|p| sb.work.join(p).exists())
        .collect();
    assert_eq!(
        left,
        [".vscode", ".git", ".mcp.json", ".bashrc"],
        "as {}",
        sb.who()
    );
    // The next sandboxed run, read-only and elsewhere, removes them.
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let mut cmd = sb.command(&["run", "fake", "probe", "--agents-dir", &agents]);
    cmd.current_dir(&elsewhere);
    let out = sb.run_command(cmd);
    assert_eq!(out.status, 0, "{}", out.stderr);
    for p in [".vscode", ".git", ".mcp.json", ".bashrc", ".claude"] {
        assert!(!sb.work.join(p).exists(), "as {}: {p} is left", sb.who());
    }
    assert_eq!(
        std::fs::read_dir(sb.state.join("placeholders"))
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "no record left"
    );
}

/// Its CLI's login, refreshed by the child during the run (in the private layer over its
/// CLI's home): a token refresh is written back to the user's file, anything else (another
/// account, a provider entry added) is not.
#[test]
fn a_refreshed_login_is_written_back_and_a_forged_one_is_not() {
    for user in support::users() {
        a_refreshed_login_is_written_back_and_a_forged_one_is_not_as(user);
    }
}

fn a_refreshed_login_is_written_back_and_a_forged_one_is_not_as(
    user: Option<&'static Unprivileged>,
) {
    let before = r#"{"OPENAI_API_KEY":null,"tokens":{"access_token":"a1","refresh_token":"r1","account_id":"acc"},"last_refresh":"t1"}"#;
    let refreshed = r#"{"OPENAI_API_KEY":null,"tokens":{"access_token":"a2","refresh_token":"r2","account_id":"acc"},"last_refresh":"t2"}"#;
    let forged = r#"{"OPENAI_API_KEY":null,"tokens":{"access_token":"a2","refresh_token":"r2","account_id":"attacker"},"last_refresh":"t2"}"#;
    for (written, kept) in [(refreshed, refreshed), (forged, before)] {
        let sb = Sandbox::for_user(user);
        let auth = sb.home.join(".codex/auth.json");
        write(&auth, before);
        // (The fake agent speaks pi's dialect, not codex's: what it did is on disk.)
        let script =
            format!("printf '%s' '{written}' > \"$HOME/.codex/auth.json\" && echo > wrote");
        let fake = sb.fake_agent_bin();
        let sb = hostile(sb, &script).set("ORCHESTRATE_CODEX_BIN", fake.to_str().unwrap());
        let out = sb.run_probe("writer", &["--backend", "codex"]);
        // Written, to the private layer.
        assert!(
            sb.work.join("wrote").exists(),
            "as {}: {}",
            sb.who(),
            out.stdout
        );
        assert_eq!(
            std::fs::read_to_string(&auth).unwrap(),
            kept,
            "as {}: {}",
            sb.who(),
            out.stdout
        );
    }
}

/// orchestrate empties the child's private TMPDIR once the run ends: a child that put a
/// link to a folder of the user's in its place (possible where no mount namespace made
/// TMPDIR a tmpfs) loses only the link, never the user's folder.
#[test]
fn a_tmpdir_swapped_for_a_link_to_the_users_folder_is_removed_as_a_link() {
    for user in support::users() {
        for containment in ["auto", "subreaper"] {
            a_tmpdir_swapped_for_a_link_is_removed_as_a_link_as(user, containment);
        }
    }
}

fn a_tmpdir_swapped_for_a_link_is_removed_as_a_link_as(
    user: Option<&'static Unprivileged>,
    containment: &str,
) {
    let sb = Sandbox::for_user(user);
    let keep = sb.home.join("keep");
    write(&keep.join("notes.txt"), "mine\n");
    let script = format!(
        "t=\"$TMPDIR\"; cd /\n\
         (rm -rf \"$t\" && ln -s '{keep}' \"$t\") 2>/dev/null && echo 'swapped' || echo 'kept'\n",
        keep = keep.display()
    );
    let sb = hostile(sb, &script).set("ORCHESTRATE_CONTAINMENT", containment);
    let out = sb.run_probe("fake", &[]);
    let text = said(&out);
    // A tmpfs mount point cannot be removed; a plain folder can.
    let swapped = if containment == "subreaper" {
        "swapped"
    } else {
        "kept"
    };
    assert_eq!(text, [swapped], "{containment} as {}", sb.who());
    assert_eq!(
        std::fs::read_to_string(keep.join("notes.txt")).unwrap(),
        "mine\n",
        "{containment} as {}: {text:?}",
        sb.who()
    );
    let run_id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    let tmp = sb.state.join("runs").join(run_id).join("child/tmp");
    // The link is gone; the folder under a tmpfs stays, empty.
    let left = match tmp.symlink_metadata() {
        Err(_) => None,
        Ok(m) => Some((m.is_dir(), std::fs::read_dir(&tmp).unwrap().count())),
    };
    let want = if containment == "subreaper" {
        None
    } else {
        Some((true, 0))
    };
    assert_eq!(
        left,
        want,
        "{containment} as {}: {tmp:?} ({text:?})",
        sb.who()
    );
}

/// A read-only child plants nothing the user's tools run later: shell and editor start-up
/// files, direnv's, git's global hooks and the repository's own, whether they exist or not.
#[test]
fn a_read_only_child_plants_nothing_the_users_tools_run_later() {
    for user in support::users() {
        a_read_only_child_plants_nothing_the_users_tools_run_later_as(user);
    }
}

fn a_read_only_child_plants_nothing_the_users_tools_run_later_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let (home, work) = (sb.home.clone(), sb.work.clone());
    let existing = [
        ("bashrc", home.join(".bashrc")),
        ("envrc", work.join(".envrc")),
        ("direnvrc", home.join(".config/direnv/direnvrc")),
    ];
    for (_, path) in &existing {
        write(path, "# the user's\n");
    }
    let missing = [
        ("zshenv", home.join(".zshenv")),
        ("vimrc", home.join(".vimrc")),
        ("nvim init", home.join(".config/nvim/init.lua")),
        ("git hooks", home.join(".config/git/hooks/pre-commit")),
        ("exrc", work.join(".exrc")),
        ("nvim.lua", work.join(".nvim.lua")),
        ("mise", work.join(".mise.toml")),
        ("repo hook", work.join(".git/hooks/post-checkout")),
    ];
    let targets: Vec<(&str, String)> = existing
        .iter()
        .chain(&missing)
        .map(|(n, p)| (*n, p.display().to_string()))
        .collect();
    let script = format!(
        "mkdir -p '{h}/.config/nvim' '{h}/.config/git/hooks' '{w}/.git/hooks' 2>/dev/null\n{}",
        try_writes(&targets),
        h = home.display(),
        w = work.display()
    );
    let sb = hostile(sb, &script);
    let out = sb.run_probe("fake", &["--sandbox", "read-only"]);
    let names: Vec<&str> = targets.iter().map(|(n, _)| *n).collect();
    assert_eq!(said(&out), denied(&names), "as {}", sb.who());
    for (name, path) in &existing {
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            "# the user's\n",
            "{name}"
        );
    }
    for (name, path) in &missing {
        assert!(!path.exists(), "{name}: {path:?} as {}", sb.who());
    }
}

/// The run's inbox is orchestrate's record: a child that writes a message into it (to have
/// its own words steered back to it, and listed in the result as sent by the parent) is
/// refused, with a mount namespace or without one, and the result lists no message.
#[test]
fn a_child_cannot_send_itself_a_message_through_the_runs_inbox() {
    for user in support::users() {
        for containment in ["auto", "subreaper"] {
            a_child_cannot_send_itself_a_message_as(user, containment);
        }
    }
}

fn a_child_cannot_send_itself_a_message_as(user: Option<&'static Unprivileged>, containment: &str) {
    let sb = Sandbox::for_user(user);
    let script = "q=\"$TMPDIR/../../inbox.jsonl\"\n\
         (printf '%s\\n' '{\"at\":1,\"text\":\"forged by the child\"}' >> \"$q\") 2>/dev/null \
         && echo 'forged' || echo 'refused'\n\
         sleep 1\n";
    let sb = hostile(sb, script).set("ORCHESTRATE_CONTAINMENT", containment);
    let out = sb.run_probe("writer", &[]);
    let text = said(&out);
    assert_eq!(text, ["refused"], "{containment} as {}", sb.who());
    assert_eq!(
        out.result().get("messages"),
        None,
        "{containment} as {}: {}",
        sb.who(),
        out.stdout
    );
}

/// Way 14: Other runs' records: a child lists orchestrate's state directory and reads an
/// earlier run's raw session (not sanitized: whatever keys that child printed), its result,
/// the index of every run's task, a worktree of another run, and the runs in the state
/// directory orchestrate uses by default (another project's). It sees its own run folder
/// alone.
#[test]
fn a_child_reads_no_other_runs_records() {
    for user in support::users() {
        a_child_reads_no_other_runs_records_as(user);
    }
}

fn a_child_reads_no_other_runs_records_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    let earlier = sb.run(
        "@scenario:echo-task orchestrate-hostile-earlier-answer",
        &[],
    );
    assert_eq!(earlier.status, 0, "{}", earlier.stderr);
    let earlier = earlier.json()["details"]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    write(
        &sb.state.join("worktrees/keep/file.txt"),
        "orchestrate-hostile-worktree\n",
    );
    // The state directory orchestrate uses when not told otherwise, with a run of another
    // project in it.
    write(
        &sb.home
            .join(".local/state/orchestrate/runs/0ther000/session.jsonl"),
        "orchestrate-hostile-default-state\n",
    );
    let script = "d=\"$HOSTILE_STATE\"\n\
         ls -A \"$d\" 2>&1 | tr '\\n' ' '; echo\n\
         ls -A \"$d/runs\" 2>&1 | tr '\\n' ' '; echo\n\
         for f in session.jsonl result.json stderr.log; do\n\
           cat \"$d/runs/$EARLIER_RUN/$f\" >/dev/null 2>&1 && echo \"read $f\" || echo \"no $f\"\n\
         done\n\
         cat \"$d/runs.jsonl\" >/dev/null 2>&1 && echo 'read index' || echo 'no index'\n\
         cat \"$d/worktrees/keep/file.txt\" >/dev/null 2>&1 && echo 'read worktree' || echo 'no worktree'\n\
         cat ~/.local/state/orchestrate/runs/0ther000/session.jsonl >/dev/null 2>&1 && echo 'read default state' || echo 'no default state'\n\
         test -d \"$d/runs/$ORCHESTRATE_RUN_ID/child\" && echo 'own run'\n\
         (echo x > \"$TMPDIR/f\") && echo 'wrote tmp'\n";
    let sb = hostile(sb, script).set("EARLIER_RUN", &earlier);
    let out = sb.run_probe("fake", &[]);
    let id = out.json()["details"]["runId"].as_str().unwrap().to_string();
    assert_eq!(
        said(&out),
        [
            "runs ".to_string(),
            format!("{id} "),
            "no session.jsonl".into(),
            "no result.json".into(),
            "no stderr.log".into(),
            "no index".into(),
            "no worktree".into(),
            "no default state".into(),
            "own run".into(),
            "wrote tmp".into(),
        ],
        "as {}",
        sb.who()
    );
}

/// Way 11: the controller above a sandboxed child is PID 1 of its namespace, a copy of
/// orchestrate: its command line (every task of a fan-out, the sibling's included) and
/// its environment (orchestrate's, keys and all) must not be readable from the child.
#[test]
fn a_child_reads_neither_the_command_line_nor_the_environment_above_it() {
    for user in support::users() {
        a_child_reads_neither_the_command_line_nor_the_environment_above_it_as(user);
    }
}

fn a_child_reads_neither_the_command_line_nor_the_environment_above_it_as(
    user: Option<&'static Unprivileged>,
) {
    let sb = Sandbox::for_user(user);
    let script = "for p in /proc/[0-9]*; do\n\
                    echo \"pid ${p#/proc/}: $(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\"\n\
                    tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -c 'orchestrate-parent-secre[t]' | sed 's/^/keys seen: /'\n\
                  done\n";
    let sb = hostile(sb, script).set("HOSTILE_PARENT_KEY", "orchestrate-parent-secret-0");
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&[
        "run",
        "--agents-dir",
        &agents,
        "--task",
        "writer=first orchestrate-sibling-task-A",
        "--task",
        "writer=second orchestrate-sibling-task-B",
        "--details",
        "full",
    ]);
    assert_eq!(out.status, 0, "as {}: {}", sb.who(), out.stderr);
    let json = out.json();
    for (i, other) in [(0, "task-B"), (1, "task-A")] {
        let said = json["details"]["results"][i]["output"]
            .as_str()
            .unwrap_or_else(|| panic!("no output: {json}"))
            .to_string();
        // The child sees its own processes and its controller, none of them with
        // orchestrate's arguments or its environment.
        assert!(said.contains("pid 1:"), "as {}: {said}", sb.who());
        for leak in [
            other,
            "--agents-dir",
            "orchestrate-parent-secret",
            "keys seen: 1",
        ] {
            assert!(!said.contains(leak), "as {}: {leak} in {said}", sb.who());
        }
    }
}

/// Way 12: git's configuration holds credentials in plain text: a token in a remote's URL
/// (`https://oauth2:TOKEN@…`, as CI clones write it), in a `url.*.insteadOf` rewrite,
/// an `http.extraheader`. The child reads each file git reads (it needs git), with the
/// credentials left out, and what it names stays.
#[test]
fn a_child_reads_git_configuration_without_its_credentials() {
    for user in support::users() {
        a_child_reads_git_configuration_without_its_credentials_as(user);
    }
}

fn a_child_reads_git_configuration_without_its_credentials_as(user: Option<&'static Unprivileged>) {
    let sb = Sandbox::for_user(user);
    write(
        &sb.home.join(".gitconfig"),
        "[user]\n\tname = Hostile Test\n\
         [url \"https://x-access-token:orchestrate-git-secret-url@github.com/\"]\n\
         \tinsteadOf = https://github.com/\n\
         [include]\n\tpath = ~/.gitconfig-secrets\n",
    );
    // Included, and read through a link, as a dotfiles manager keeps it.
    write(
        &sb.home.join("dotfiles/git-secrets"),
        "[http]\n\textraheader = AUTHORIZATION: basic orchestrate-git-secret-header\n",
    );
    std::os::unix::fs::symlink(
        sb.home.join("dotfiles/git-secrets"),
        sb.home.join(".gitconfig-secrets"),
    )
    .unwrap();
    git_in(&sb.work, &["init", "-q", "-b", "main"]);
    git_in(
        &sb.work,
        &[
            "remote",
            "add",
            "origin",
            "https://oauth2:orchestrate-git-secret-remote@gitlab.example/x.git",
        ],
    );
    // Copied to a file of the workspace, which the output's sanitizing does not touch.
    let script = "cat ~/.gitconfig ~/.gitconfig-secrets ~/dotfiles/git-secrets .git/config > seen.txt 2>&1\n\
                  git config --global user.name >> seen.txt 2>&1\n\
                  git remote get-url origin >> seen.txt 2>&1\n\
                  echo done\n";
    let sb = hostile(sb, script);
    let out = sb.run_probe("writer", &[]);
    assert_eq!(said(&out), ["done"], "as {}", sb.who());
    let seen = std::fs::read_to_string(sb.work.join("seen.txt")).unwrap();
    assert!(
        !seen.contains("orchestrate-git-secret"),
        "as {}: {seen}",
        sb.who()
    );
    for kept in [
        "Hostile Test\n",
        "insteadOf = https://github.com/",
        "https://REDACTED@gitlab.example/x.git\n",
        "extraheader = REDACTED\n",
    ] {
        assert!(
            seen.contains(kept),
            "as {}: {kept:?} not in {seen}",
            sb.who()
        );
    }
    // The user's own files are as they were.
    assert!(std::fs::read_to_string(sb.home.join(".gitconfig"))
        .unwrap()
        .contains("orchestrate-git-secret-url"));
}

/// The empty placeholders that hold protected names in a writer's workspace are not news
/// to its git: `git status` lists what the child made, and the user's own ignore rules
/// still apply.
#[test]
fn a_writers_git_status_shows_what_it_made_and_none_of_the_placeholders() {
    let sb = Sandbox::new();
    git_in(&sb.work, &["init", "-q", "-b", "main"]);
    write(&sb.home.join(".config/git/ignore"), "*.log\n");
    write(&sb.work.join("build.log"), "x\n");
    let script = "echo x > made.txt\ngit status --porcelain --untracked-files=all\necho end\n";
    let sb = hostile(sb, script);
    let out = sb.run_probe("writer", &[]);
    assert_eq!(said(&out), ["?? made.txt", "end"]);
}

/// A retried attempt makes the child's files again (the copy of git's configuration
/// without its credentials, the excludes of the placeholders) in the folder the first
/// attempt's child could write: it replaces them, links included, and writes nowhere else.
#[test]
fn a_retried_attempt_remakes_the_childs_git_files_in_place() {
    let sb = Sandbox::new();
    git_in(&sb.work, &["init", "-q", "-b", "main"]);
    git_in(
        &sb.work,
        &[
            "remote",
            "add",
            "origin",
            "https://oauth2:orchestrate-git-secret@h.example/x.git",
        ],
    );
    std::fs::write(sb.agents.join("writer.md"), WRITER).unwrap();
    let victim = sb.root.path().join("victim.txt");
    std::fs::write(&victim, "untouched\n").unwrap();
    // The first attempt's child leaves links where the next attempt's files go, then
    // fails like a provider that is overloaded.
    let script = format!(
        "for f in git-config-0 git-excludes; do ln -sf {} \"$TMPDIR/../$f\"; done",
        victim.display()
    );
    // In the workspace, which the sandboxed child may write.
    let marker = sb.work.join("failed-once");
    let sb = sb
        .scenario("flaky")
        .set("ORCHESTRATE_SANDBOX", "auto")
        .set("FAKE_AGENT_MARKER", marker.to_str().unwrap())
        .set("FAKE_AGENT_ERROR", "503 overloaded")
        .set("FAKE_AGENT_BEFORE", &script);
    let agents = sb.agents.to_str().unwrap().to_string();
    let out = sb.run_args(&["run", "writer", "x", "--agents-dir", &agents]);
    assert_eq!(
        (out.status, &out.result()["attempts"]),
        (0, &json!(2)),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
}
