//! Test support: runs the real `orchestrate` binary over the fake child agent in a
//! sandbox of temporary folders, and checks that no process of the run survives.
//!
//! The processes of a run are found by their environment, never by the pids the fake
//! agent records: a child in a PID namespace of its own records its pid in that
//! namespace, which names another process (or none) out here. Every `orchestrate` a
//! sandbox starts carries `ORCHESTRATE_TEST_SANDBOX=<its temp root>`, and everything it
//! starts inherits that, plus the `ORCHESTRATE_RUN_ID` orchestrate gives its children.
#![allow(dead_code)]

pub mod git;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn orchestrate_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_orchestrate"))
}

/// `cargo test` builds examples next to the test binaries' `deps/` folder.
pub fn fake_agent_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = profile_dir.join("examples").join("fake_agent");
    assert!(path.exists(), "fake agent not built at {}", path.display());
    path
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pi")
        .join(name)
}

/// An agent file that uses the pi backend (the fake stands in for pi).
pub const TEST_AGENT: &str = "---\nname: fake\ndescription: Test agent over the fake child.\ntools: read, grep\nbackend: pi\n---\nYou are a test agent.\n";

pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub state: PathBuf,
    pub agents: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub pidfile: PathBuf,
    pub argv_file: PathBuf,
    pub env: BTreeMap<String, String>,
    /// Runs as this user rather than the test's own (see [`Unprivileged`]).
    pub user: Option<&'static Unprivileged>,
}

/// An unprivileged user for the tests that must also hold where orchestrate is not root
/// (where mount and network namespaces need a user namespace): created once with
/// `useradd` when the tests run as root, and the binaries it runs, where it can reach
/// them. A sandbox run as it ([`Sandbox::as_user`]) gives it the sandbox's folders and
/// starts orchestrate through `setpriv`.
#[derive(Debug)]
pub struct Unprivileged {
    pub uid: u32,
    pub gid: u32,
    pub orchestrate: PathBuf,
    pub fake_agent: PathBuf,
}

/// The name of the tests' unprivileged user.
pub const TEST_USER: &str = "orchestrate-test";

/// The users a sandbox test runs as: the test's own, and, when that is root, an
/// unprivileged one too.
pub fn users() -> Vec<Option<&'static Unprivileged>> {
    let mut users = vec![None];
    if let Some(u) = unprivileged() {
        users.push(Some(u));
    }
    users
}

/// The tests' unprivileged user, when the tests run as root (None otherwise: they run
/// unprivileged already).
pub fn unprivileged() -> Option<&'static Unprivileged> {
    static USER: std::sync::OnceLock<Option<Unprivileged>> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, TEST_USER]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        if id("-u").is_none() {
            // Another test binary may be creating it at the same moment: its "already
            // exists" is as good.
            let _ = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                ])
                .arg(TEST_USER)
                .output();
        }
        let (uid, gid) = (
            id("-u").expect("useradd orchestrate-test"),
            id("-g").expect("the test user's group"),
        );
        let reach = |bin: PathBuf| reachable_by(uid, gid, bin);
        Some(Unprivileged {
            uid,
            gid,
            orchestrate: reach(orchestrate_bin()),
            fake_agent: reach(fake_agent_bin()),
        })
    })
    .as_ref()
}

/// `bin`, or a hard link to it (a copy across filesystems) where the user can reach it,
/// when the user cannot run it where it is (a build under /root).
fn reachable_by(uid: u32, gid: u32, bin: PathBuf) -> PathBuf {
    let runs = Command::new("setpriv")
        .args(setpriv_args(uid, gid))
        .args(["--", "test", "-x"])
        .arg(&bin)
        .status()
        .is_ok_and(|s| s.success());
    if runs {
        return bin;
    }
    reachable_copy(&bin)
}

fn setpriv_args(uid: u32, gid: u32) -> Vec<String> {
    vec![
        format!("--reuid={uid}"),
        format!("--regid={gid}"),
        "--clear-groups".into(),
    ]
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("tempdir");
        let p = root.path();
        let sb = Sandbox {
            state: p.join("state"),
            agents: p.join("agents"),
            home: p.join("home"),
            work: p.join("work"),
            pidfile: p.join("pids"),
            argv_file: p.join("argv.json"),
            env: BTreeMap::new(),
            user: None,
            root,
        };
        for d in [&sb.agents, &sb.home, &sb.work] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(sb.agents.join("fake.md"), TEST_AGENT).unwrap();
        sb
    }

    /// A sandbox whose runs are `user`'s (None: the test's own).
    pub fn for_user(user: Option<&'static Unprivileged>) -> Sandbox {
        let mut sb = Sandbox::new();
        sb.user = user;
        sb
    }

    /// Who runs orchestrate, for messages.
    pub fn who(&self) -> String {
        match self.user {
            Some(u) => format!("uid {}", u.uid),
            None => "the test's user".into(),
        }
    }

    /// The orchestrate binary its runs use (the user's reachable copy).
    pub fn orchestrate_bin(&self) -> PathBuf {
        self.user
            .map_or_else(orchestrate_bin, |u| u.orchestrate.clone())
    }

    /// The fake agent its runs use.
    pub fn fake_agent_bin(&self) -> PathBuf {
        self.user
            .map_or_else(fake_agent_bin, |u| u.fake_agent.clone())
    }

    pub fn scenario(mut self, name: &str) -> Self {
        self.env.insert("FAKE_AGENT_SCENARIO".into(), name.into());
        self
    }

    pub fn transcript(self, fixture_name: &str) -> Self {
        let path = fixture(fixture_name);
        self.set("FAKE_AGENT_TRANSCRIPT", path.to_str().unwrap())
    }

    pub fn set(mut self, k: &str, v: &str) -> Self {
        self.env.insert(k.into(), v.into());
        self
    }

    /// The command, with a clean environment pointing everything into the sandbox.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = match self.user {
            None => Command::new(orchestrate_bin()),
            Some(u) => {
                // Everything the test put in the sandbox is the user's, as a user's own
                // files would be (else a write would fail for want of permission, not
                // because of the sandbox).
                let st = Command::new("chown")
                    .arg("-R")
                    .arg(format!("{}:{}", u.uid, u.gid))
                    .arg(self.root.path())
                    .status()
                    .expect("chown");
                assert!(st.success(), "chown of the sandbox to {TEST_USER}");
                let mut cmd = Command::new("setpriv");
                cmd.args(setpriv_args(u.uid, u.gid))
                    .arg("--")
                    .arg(&u.orchestrate);
                cmd
            }
        };
        cmd.args(args)
            .env_remove("ORCHESTRATE_DEPTH")
            .env_remove("ORCHESTRATE_MAX_DEPTH")
            .env_remove("ORCHESTRATE_DISABLED")
            .env_remove("ORCHESTRATE_RUN_ID")
            .env_remove("RUST_LOG")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("ORCHESTRATE_STATE_DIR", &self.state)
            .env("ORCHESTRATE_PI_BIN", self.fake_agent_bin())
            .env("FAKE_AGENT_PIDFILE", &self.pidfile)
            .env("FAKE_AGENT_ARGV_FILE", &self.argv_file)
            .env("FAKE_AGENT_FOREVER_MS", "60000")
            .env("ORCHESTRATE_TEST_SANDBOX", self.root.path())
            // The fake agent writes its pid and argv files into the test's temp root,
            // which no sandbox mode allows; the sandbox has tests of its own. So has the
            // network (tests/all/network.rs), whose default for the fake's read-only agent
            // would be a namespace of its own.
            .env("ORCHESTRATE_SANDBOX", "off")
            .env("ORCHESTRATE_NETWORK", "on")
            .envs(&self.env)
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that a test can never signal anything else.
            .process_group(0);
        cmd
    }

    /// `orchestrate run fake TASK --agents-dir … EXTRA…`, bounded by `limit`.
    pub fn run(&self, task: &str, extra: &[&str]) -> RunOutput {
        let agents = self.agents.to_str().unwrap().to_string();
        let mut args = vec!["run", "fake", task, "--agents-dir", &agents];
        args.extend_from_slice(extra);
        self.run_args(&args)
    }

    /// `orchestrate run fake TASK --agents-dir … --background EXTRA…`, once it has
    /// answered. The run's child runs on after it (the test checks at its end that nothing
    /// outlived the run): unlike [`Sandbox::run`], no survivors are looked for here, which
    /// would find the child whenever the background supervisor started it first.
    pub fn start_background(&self, task: &str, extra: &[&str]) -> RunOutput {
        let agents = self.agents.to_str().unwrap().to_string();
        let mut args = vec!["run", "fake", task, "--agents-dir", &agents, "--background"];
        args.extend_from_slice(extra);
        let child = self.command(&args).spawn().expect("spawn orchestrate");
        let (start, pid) = (Instant::now(), child.id());
        let output = wait_with_limit(child, Duration::from_secs(60));
        RunOutput::new(output, start.elapsed(), pid)
    }

    /// `orchestrate run AGENT probe --agents-dir … --details full EXTRA…`: the sandbox
    /// tests' run, whose answer is what the child's probes printed.
    pub fn run_probe(&self, agent: &str, extra: &[&str]) -> RunOutput {
        let agents = self.agents.to_str().unwrap().to_string();
        let mut args = vec![
            "run",
            agent,
            "probe",
            "--agents-dir",
            &agents,
            "--details",
            "full",
        ];
        args.extend_from_slice(extra);
        self.run_args(&args)
    }

    pub fn run_args(&self, args: &[&str]) -> RunOutput {
        self.run_command(self.command(args))
    }

    /// Runs `cmd` (from `command`, perhaps adjusted) like `run_args`.
    pub fn run_command(&self, mut cmd: Command) -> RunOutput {
        self.finish(cmd.spawn().expect("spawn orchestrate"))
    }

    /// Waits for an `orchestrate` started from `command` like `run_args` does.
    pub fn finish(&self, child: std::process::Child) -> RunOutput {
        let start = Instant::now();
        let pid = child.id();
        let output = wait_with_limit(child, Duration::from_secs(60));
        let elapsed = start.elapsed();
        let out = RunOutput::new(output, elapsed, pid);
        self.assert_no_survivors();
        out
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(&self.pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// `ORCHESTRATE_TEST_SANDBOX=<root>`: the entry every process of this sandbox carries.
    pub fn marker(&self) -> String {
        format!("ORCHESTRATE_TEST_SANDBOX={}", self.root.path().display())
    }

    /// Live processes started by an `orchestrate` of this sandbox, at any depth: they
    /// carry its marker and a run id (orchestrate itself has none).
    pub fn descendants(&self) -> Vec<i32> {
        processes_with_env(&self.marker(), "ORCHESTRATE_RUN_ID=")
    }

    /// No process started by an `orchestrate` of this sandbox is alive (at most a zombie
    /// that is not ours to reap), within a generous bound.
    pub fn assert_no_survivors(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive = self.descendants();
            if alive.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                let described: Vec<(i32, String)> =
                    alive.iter().map(|p| (*p, cmdline(*p))).collect();
                // Clean up what we started before failing.
                self.kill_descendants();
                panic!("processes of the run still alive: {described:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs every live process this sandbox's runs started (found by environment,
    /// so that only our own are ever signalled).
    pub fn kill_descendants(&self) {
        for p in self.descendants() {
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }

    pub fn argv_json(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.argv_file).expect("argv file")).unwrap()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill_descendants();
    }
}

/// Live processes whose environment (`/proc/<pid>/environ`, readable for one's own
/// processes) holds the entry `exact` and an entry starting with `prefix`.
pub fn processes_with_env(exact: &str, prefix: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let mut vars = env.split(|b| *b == 0);
        let has_exact = vars.clone().any(|v| v == exact.as_bytes());
        if has_exact && vars.any(|v| v.starts_with(prefix.as_bytes())) && is_alive(pid) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// Whether `pid` is a process of this sandbox: its environment carries `marker`. Check
/// before signalling a pid read from a file.
pub fn carries(pid: i32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
}

/// The command line of a process, for messages.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Alive = exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | Some(Some('X')))
        }
    }
}

fn wait_with_limit(mut child: std::process::Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let out = child.wait_with_output().expect("output");
            panic!(
                "orchestrate did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[derive(Debug)]
pub struct RunOutput {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub pid: u32,
}

impl RunOutput {
    fn new(o: Output, elapsed: Duration, pid: u32) -> Self {
        use std::os::unix::process::ExitStatusExt;
        let status = o
            .status
            .code()
            .unwrap_or_else(|| 128 + o.status.signal().unwrap_or(0));
        RunOutput {
            status,
            stdout: String::from_utf8(o.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            elapsed,
            pid,
        }
    }

    /// The one JSON line on stdout.
    pub fn json(&self) -> Value {
        let lines: Vec<&str> = self.stdout.lines().collect();
        assert_eq!(
            lines.len(),
            1,
            "stdout must be exactly one line: {:?}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        serde_json::from_str(lines[0])
            .unwrap_or_else(|e| panic!("invalid JSON ({e}): {}", lines[0]))
    }

    pub fn result(&self) -> Value {
        self.json()["details"]["results"][0].clone()
    }

    pub fn error_code(&self) -> String {
        self.json()["details"]["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

/// The result with the fields that vary between runs replaced by fixed values, for
/// whole-object comparison.
pub fn normalized(mut v: Value) -> Value {
    if let Some(id) = v["details"].get_mut("runId") {
        assert!(id.as_str().is_some_and(|s| s.len() == 8), "runId: {id}");
        *id = Value::from("RUNID");
    }
    if let Some(results) = v["details"]["results"].as_array_mut() {
        for r in results {
            if let Some(d) = r.get_mut("durationMs") {
                assert!(d.is_u64());
                *d = Value::from(0);
            }
            if let Some(s) = r.get_mut("sessionFile") {
                assert!(
                    Path::new(s.as_str().unwrap()).is_file(),
                    "sessionFile exists"
                );
                *s = Value::from("SESSION");
            }
            if let Some(c) = r["usage"].get_mut("cost") {
                let rounded = (c.as_f64().unwrap() * 1e9).round() / 1e9;
                *c = Value::from(rounded);
            }
        }
    }
    v
}

/// A hard link to `bin` (a copy across filesystems) in a world-readable folder of the
/// temporary directory, named for the file and its version, so that each is made once and
/// reused by every test process.
fn reachable_copy(bin: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = std::fs::metadata(bin).expect("the binary");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (bin, meta.ino(), meta.size(), meta.mtime()).hash(&mut h);
    let dir = std::env::temp_dir().join("orchestrate-test-bin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let name = bin.file_name().unwrap().to_string_lossy();
    let to = dir.join(format!("{:016x}-{name}", h.finish()));
    if !to.exists() {
        // Made under a name of its own, then renamed: another test process may be at it.
        let tmp = dir.join(format!(".{}-{name}", std::process::id()));
        if std::fs::hard_link(bin, &tmp).is_err() {
            std::fs::copy(bin, &tmp).unwrap();
        }
        std::fs::rename(&tmp, &to).unwrap();
    }
    to
}
