//! The real-CLI contract tests (`tests/contract_*.rs`): one table-driven harness run for
//! each agent CLI.
//!
//! - [`cli`]: what the shared scenarios need to know about one CLI ([`cli::Cli`]);
//!   [`clis`] holds the five descriptions (how each is pointed at the mock, its tool
//!   names, what it prints for a 401, a hang, a refused write).
//! - [`scenarios`]: the scenarios, each written once and run for every CLI it applies to.
//! - [`harness`]: the test binary's `main` (libtest-mimic): one trial per scenario, named
//!   `<cli>::<scenario>`, reported as ignored, with the reason, when the CLI is not
//!   installed.
//! - This module: the sandbox a run happens in, running `orchestrate` with a wall-clock
//!   bound, and finding the processes of a run's tree through `/proc`.

pub mod acp;
pub mod cli;
pub mod clis;
pub mod harness;
pub mod scenarios;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary named by `var` (`ORCHESTRATE_CONTRACT_PI`, …). When unset: prints why the
/// test is skipped and returns None, unless `ORCHESTRATE_REQUIRE_CONTRACT=1`, which turns
/// the skip into a failure.
pub fn cli_binary(var: &str, cli: &str) -> Option<PathBuf> {
    let required = std::env::var("ORCHESTRATE_REQUIRE_CONTRACT").as_deref() == Ok("1");
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "{var}={} does not exist (run scripts/install-agent-clis)",
                p.display()
            );
            Some(p)
        }
        None if required => panic!(
            "{var} is not set but ORCHESTRATE_REQUIRE_CONTRACT=1: run scripts/install-agent-clis and source <cache>/env.sh"
        ),
        None => {
            // Straight to the stderr handle: libtest captures eprintln! of passing tests.
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: the {cli} contract test needs the real {cli}: {var} is not set (run scripts/install-agent-clis, then `. <cache>/env.sh`)"
            );
            None
        }
    }
}

pub fn orchestrate_bin() -> PathBuf {
    // Set for test binaries only; the mock's program (an example) never runs orchestrate.
    match option_env!("CARGO_BIN_EXE_orchestrate") {
        Some(path) => PathBuf::from(path),
        None => panic!("orchestrate_bin is for test binaries"),
    }
}

/// `orchestrate` with a clean environment: stdin null, output piped, its own process
/// group, no inherited orchestrate variables.
pub fn orchestrate_command(args: &[&str]) -> Command {
    clean_command(&orchestrate_bin(), args)
}

/// `program ARGS…` as [`orchestrate_command`] runs orchestrate.
fn clean_command(program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("ORCHESTRATE_DEPTH")
        .env_remove("ORCHESTRATE_MAX_DEPTH")
        .env_remove("ORCHESTRATE_DISABLED")
        .env_remove("ORCHESTRATE_RUN_ID")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

#[derive(Debug)]
pub struct Finished {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
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
}

/// Waits for `child` (spawned by [`orchestrate_command`]) at most `limit`; past it, kills
/// its whole group and fails.
pub fn wait_bounded(child: Child, start: Instant, limit: Duration) -> Finished {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as i32;
    // Read both pipes on threads so a chatty child can never block on a full pipe.
    let mut child = child;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut s).ok();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut s).ok();
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > limit {
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            let err = err_t.join().unwrap_or_default();
            panic!(
                "orchestrate did not finish within {limit:?}; stderr: {}",
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = String::from_utf8(out_t.join().unwrap()).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
    Finished {
        status: status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        stdout,
        stderr,
        elapsed: start.elapsed(),
    }
}

/// Alive = exists and is not a zombie.
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some('Z' | 'X'))
        }
    }
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

/// Live processes whose environment holds every one of `entries` (`NAME=value`), read
/// from `/proc/<pid>/environ` (readable for every process as root, for one's own
/// processes otherwise). Pass at least one entry unique to the test (a temp path) so
/// that only processes attributable to it match.
pub fn pids_with_env(entries: &[&str]) -> Vec<i32> {
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
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        if entries.iter().all(|want| vars.contains(&want.as_bytes())) && is_alive(pid) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// The run ids under `<state>/runs/` (the state dir is the test's own).
pub fn run_ids(state: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(state.join("runs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    ids.sort();
    ids
}

/// Waits until every pid is gone (dead or a zombie), at most `limit`; SIGKILLs and
/// returns the survivors otherwise.
pub fn wait_all_gone(pids: &[i32], limit: Duration) -> Vec<(i32, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let alive: Vec<i32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if alive.is_empty() {
            return Vec::new();
        }
        if Instant::now() > deadline {
            let described = alive.iter().map(|p| (*p, cmdline(*p))).collect();
            for p in &alive {
                unsafe { libc::kill(*p, libc::SIGKILL) };
            }
            return described;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rounds a cost for comparison (float sums differ in the last bits).
pub fn round_cost(v: f64) -> f64 {
    (v * 1e9).round() / 1e9
}

/// The lines of a JSONL file whose `type` is one of `types`, for reports.
pub fn session_lines(path: &Path, types: &[&str]) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"].as_str().is_some_and(|t| types.contains(&t)))
        .collect()
}

/// One contract test's private world for a CLI run through `orchestrate run`: a temp HOME
/// (XDG dirs, TMPDIR and the orchestrate state dir under it), an agents dir, and a working
/// directory. Every process the test starts carries `ORCHESTRATE_CONTRACT_SANDBOX=<root>`,
/// an environment entry no other process has, so that the run's tree can be found in
/// `/proc` and nothing of it is left behind when the sandbox drops. The temp dir goes
/// with it, unless `ORCHESTRATE_CONTRACT_KEEP=1`.
pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub agents: PathBuf,
    pub state: PathBuf,
    pub work: PathBuf,
    /// `--backend` for every run.
    pub backend: &'static str,
    /// `--model` for every run.
    pub model: String,
    pub bin: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    /// Runs orchestrate as this unprivileged user rather than the test's own.
    user: Option<&'static Unprivileged>,
    /// Held for the sandbox's life: see [`serial`].
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// How long [`Sandbox::run_until_timeout`] lets a CLI start its helper processes after
/// the request, before recording the tree.
pub const SETTLE: Duration = Duration::from_millis(500);
/// How long [`Sandbox::run_until_timeout`] waits for a tool's process to show up.
pub const TOOL_START_LIMIT: Duration = Duration::from_secs(10);

/// One CLI run at a time within a test binary. These CLIs take seconds to start (node,
/// a relaunch, config loading) and print nothing meanwhile; several at once on a loaded
/// machine can pass a 5 s idle timeout before the first request, which would make the
/// hung-stream tests measure startup instead of the hang.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Sandbox {
    /// None (after printing why) when the CLI named by `contract_var` is not installed.
    /// `ORCHESTRATE_<BACKEND>_BIN` points orchestrate at it.
    pub fn new(contract_var: &str, backend: &'static str, model: &str) -> Option<Sandbox> {
        let bin = cli_binary(contract_var, backend)?;
        Some(Sandbox::with_bin(bin, backend, model))
    }

    /// A sandbox whose runs use the CLI at `bin` (`ORCHESTRATE_<BACKEND>_BIN`).
    pub fn with_bin(bin: PathBuf, backend: &'static str, model: &str) -> Sandbox {
        let guard = serial();
        let root = tempfile::tempdir().expect("tempdir");
        let p = root.path();
        let sb = Sandbox {
            home: p.join("home"),
            agents: p.join("agents"),
            state: p.join("state"),
            work: p.join("work"),
            backend,
            model: model.to_string(),
            bin,
            env: Vec::new(),
            user: None,
            _serial: guard,
            root,
        };
        for d in [&sb.home, &sb.agents, &sb.work, &sb.tmp()] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut sb = sb;
        let bin_var = format!(
            "ORCHESTRATE_{}_BIN",
            backend.to_ascii_uppercase().replace('-', "_")
        );
        let (home, state, tmp, bin) = (sb.home.clone(), sb.state.clone(), sb.tmp(), sb.bin.clone());
        let marker = sb.root.path().to_path_buf();
        sb.env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("TMPDIR", &tmp)
            .env("ORCHESTRATE_STATE_DIR", &state)
            .env("ORCHESTRATE_CONTRACT_SANDBOX", &marker)
            .env(&bin_var, &bin)
            .env("NO_COLOR", "1");
        sb
    }

    /// The sandbox's TMPDIR (CLIs drop error reports and caches there).
    pub fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }

    /// Adds to the environment of every run.
    pub fn env(&mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> &mut Self {
        self.env.push((k.to_string(), v.as_ref().to_os_string()));
        self
    }

    /// Points the proxy variables at the mock, so that any traffic to another host shows
    /// up as a recorded `CONNECT` (answered 404) instead of leaving the machine; the mock
    /// itself is reached directly.
    pub fn catch_outbound(&mut self, mock: &super::MockLlm) -> &mut Self {
        let url = mock.base_url();
        for k in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
            self.env(k, &url);
        }
        for k in ["NO_PROXY", "no_proxy"] {
            self.env(k, "127.0.0.1,localhost");
        }
        self.env("ALL_PROXY", "").env("all_proxy", "")
    }

    /// Writes `agents/<name>.md`.
    pub fn agent(&self, name: &str, text: &str) {
        std::fs::write(self.agents.join(format!("{name}.md")), text).unwrap();
    }

    /// `orchestrate run AGENT TASK --backend B --agents-dir D --model M EXTRA…` in the
    /// working directory, with the sandbox's environment.
    pub fn command(&self, agent: &str, task: &str, extra: &[&str]) -> Command {
        let mut args = vec!["run", agent, task, "--backend", self.backend];
        args.extend_from_slice(extra);
        self.command_args(&args)
    }

    /// `orchestrate ARGS… --agents-dir D --model M` in the working directory, with the
    /// sandbox's environment. A `run` prints its full result (`--details full`): the
    /// scenarios check what the CLI's stream became, display items and output included
    /// (the lean default is tested over the fake child, in tests/all/run_success.rs).
    pub fn command_args(&self, args: &[&str]) -> Command {
        let agents = self.agents.to_str().unwrap();
        let mut args = args.to_vec();
        if args.first() == Some(&"run") {
            args.extend_from_slice(&["--details", "full"]);
        }
        args.extend_from_slice(&["--agents-dir", agents, "--model", &self.model]);
        self.in_sandbox(orchestrate_command(&args))
    }

    /// `program ARGS…` with the sandbox's environment, in the working directory: stdin
    /// null, output piped, its own process group, no inherited orchestrate variables (as
    /// [`orchestrate_command`]). For running an agent CLI itself, e.g. as the parent
    /// that calls `orchestrate mcp`.
    pub fn program(&self, program: &Path, args: &[&str]) -> Command {
        self.in_sandbox(clean_command(program, args))
    }

    /// `cmd` with the sandbox's environment, in the working directory.
    /// Runs orchestrate (and so the CLI) as `user`: the sandbox's folders become its own,
    /// and orchestrate is started through `setpriv`. The CLI binary must be one it can
    /// run ([`Unprivileged::reach`]).
    pub fn as_user(&mut self, user: &'static Unprivileged) -> &mut Self {
        self.user = Some(user);
        self
    }

    pub fn in_sandbox(&self, cmd: Command) -> Command {
        let mut cmd = match self.user {
            None => cmd,
            Some(u) => {
                let st = Command::new("chown")
                    .arg("-R")
                    .arg(format!("{}:{}", u.uid, u.gid))
                    .arg(self.root.path())
                    .status()
                    .expect("chown");
                assert!(st.success(), "chown of the sandbox to {}", u.uid);
                u.wrap(&cmd)
            }
        };
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // As a shell would: opencode takes its project directory from $PWD, not from
        // the working directory it was started in.
        cmd.current_dir(&self.work).env("PWD", &self.work);
        cmd
    }

    /// Runs to completion, at most `limit`.
    pub fn run(&self, agent: &str, task: &str, extra: &[&str], limit: Duration) -> Finished {
        let start = Instant::now();
        let child = self
            .command(agent, task, extra)
            .spawn()
            .expect("spawn orchestrate");
        wait_bounded(child, start, limit)
    }

    /// `orchestrate ARGS…` (see [`Sandbox::command_args`]) to completion, at most `limit`.
    pub fn run_args(&self, args: &[&str], limit: Duration) -> Finished {
        let start = Instant::now();
        let child = self.command_args(args).spawn().expect("spawn orchestrate");
        wait_bounded(child, start, limit)
    }

    /// As [`Sandbox::run`], with the agent and task after `--` (every flag before it):
    /// for a task that starts with `-`.
    pub fn run_after_dashes(&self, agent: &str, task: &str, limit: Duration) -> Finished {
        let agents = self.agents.to_str().unwrap();
        let args = [
            "run",
            "--backend",
            self.backend,
            "--agents-dir",
            agents,
            "--model",
            &self.model,
            "--details",
            "full",
            "--",
            agent,
            task,
        ];
        let start = Instant::now();
        let child = self
            .in_sandbox(orchestrate_command(&args))
            .spawn()
            .expect("spawn orchestrate");
        wait_bounded(child, start, limit)
    }

    /// `ORCHESTRATE_CONTRACT_SANDBOX=<root>`.
    pub fn marker(&self) -> String {
        format!(
            "ORCHESTRATE_CONTRACT_SANDBOX={}",
            self.root.path().display()
        )
    }

    /// Runs a task that never finishes; once the mock has seen `requests` conversation
    /// requests in all (earlier runs' included), and the tree has settled, records the
    /// processes of the run's tree (those carrying both this run's `ORCHESTRATE_RUN_ID`
    /// and the sandbox marker), waits for the result, and checks that every one of them
    /// is gone and no process of the run is left. Settled: [`SETTLE`] has passed, and,
    /// with `wait_for`, a process whose command line contains it is in the tree (within
    /// [`TOOL_START_LIMIT`]). Returns the result and the recorded tree.
    pub fn run_until_timeout(
        &self,
        mock: &super::MockLlm,
        agent: &str,
        extra: &[&str],
        requests: usize,
        wait_for: Option<&str>,
        limit: Duration,
    ) -> (Finished, Vec<(i32, String)>) {
        let start = Instant::now();
        let earlier_runs = run_ids(&self.state);
        let mut child = self
            .command(agent, "Say hi.", extra)
            .spawn()
            .expect("spawn orchestrate");
        let orchestrate_pid = child.id() as i32;
        // Stops the run (if it still runs) and fails with what it and the mock saw.
        let give_up = |child: Child, why: String| -> ! {
            unsafe { libc::kill(-orchestrate_pid, libc::SIGKILL) };
            let out = wait_bounded(child, start, limit);
            let seen: Vec<String> = mock
                .requests()
                .iter()
                .map(|r| format!("{} {} -> {}", r.method, r.path, r.served))
                .collect();
            panic!("{why} (mock saw {seen:#?}): {out:#?}")
        };
        while mock.conversation().len() < requests {
            if child.try_wait().expect("try_wait").is_some() {
                give_up(
                    child,
                    format!(
                        "orchestrate ended before {} got to request {requests}",
                        self.backend
                    ),
                );
            }
            if start.elapsed() > limit / 2 {
                give_up(
                    child,
                    format!("{} never got to request {requests}", self.backend),
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(SETTLE);
        let ids: Vec<String> = run_ids(&self.state)
            .into_iter()
            .filter(|id| !earlier_runs.contains(id))
            .collect();
        assert_eq!(ids.len(), 1, "one new run folder: {ids:?}");
        let run_marker = format!("ORCHESTRATE_RUN_ID={}", ids[0]);
        let marker = self.marker();
        let waited = Instant::now();
        let (tree, described) = loop {
            let tree = pids_with_env(&[&run_marker, &marker]);
            let described: Vec<(i32, String)> = tree.iter().map(|p| (*p, cmdline(*p))).collect();
            if wait_for.is_none_or(|w| described.iter().any(|(_, c)| c.contains(w))) {
                break (tree, described);
            }
            if child.try_wait().expect("try_wait").is_some() || waited.elapsed() > TOOL_START_LIMIT
            {
                give_up(
                    child,
                    format!("no process running {wait_for:?} in the run's tree: {described:?}"),
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            !tree.is_empty(),
            "{}'s processes are visible in /proc",
            self.backend
        );
        assert!(!tree.contains(&orchestrate_pid));

        let out = wait_bounded(child, start, limit);
        let survivors = wait_all_gone(&tree, Duration::from_secs(5));
        assert_eq!(
            survivors,
            [],
            "processes of {}'s tree survived the run (tree was {described:?})",
            self.backend
        );
        let late: Vec<(i32, String)> = pids_with_env(&[&run_marker])
            .into_iter()
            .map(|p| (p, cmdline(p)))
            .collect();
        assert_eq!(late, [], "no process of the run is left");
        (out, described)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Never leave a process of ours behind, whatever failed.
        let marker = self.marker();
        for pid in pids_with_env(&[&marker]) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        // `ORCHESTRATE_CONTRACT_KEEP=1` keeps the sandbox (session files, the CLI's
        // config and logs) for investigation.
        if std::env::var("ORCHESTRATE_CONTRACT_KEEP").as_deref() == Ok("1") {
            let placeholder = tempfile::tempdir().expect("tempdir");
            let kept = std::mem::replace(&mut self.root, placeholder).keep();
            harness::note(&format!(
                "kept the {} sandbox: {}",
                self.backend,
                kept.display()
            ));
        }
    }
}

/// The result with the fields that vary between runs fixed, for whole-object comparison:
/// `sessionFile` (checked to exist) → "SESSION", `durationMs` → 0, cost rounded.
pub fn normalized(mut r: Value) -> Value {
    let session = r["sessionFile"].as_str().expect("sessionFile").to_string();
    assert!(Path::new(&session).is_file(), "sessionFile exists");
    r["sessionFile"] = Value::from("SESSION");
    assert!(r["durationMs"].is_u64());
    r["durationMs"] = Value::from(0);
    // The CLI's own session id differs per run; it must be there to resume, so check
    // it is, then leave it out of the comparison.
    if let Some(id) = r.as_object_mut().and_then(|o| o.remove("childSessionId")) {
        assert!(
            id.as_str().is_some_and(|s| !s.is_empty()),
            "childSessionId: {id}"
        );
    }
    if let Some(c) = r["usage"]["cost"].as_f64() {
        r["usage"]["cost"] = Value::from(round_cost(c));
    }
    // The mock's address, bridged into a `provider` child's namespace, differs per run.
    if let Some(allowed) = r
        .pointer_mut("/network/allowed")
        .and_then(Value::as_array_mut)
    {
        for a in allowed.iter_mut() {
            let port = a.as_str().and_then(|s| s.strip_prefix("127.0.0.1:"));
            if port.is_some_and(|p| p.parse::<u16>().is_ok()) {
                *a = Value::from("MOCK");
            }
        }
    }
    r
}

/// Notes (see [`harness::note`]: shown on failure, or with `--nocapture`/`--show-output`)
/// what the mock was asked and answered, the child's session lines (all of them, each cut
/// to `max_line` chars), its stderr tail, and orchestrate's result.
pub fn report(case: &str, mock: &super::MockLlm, out: &Finished, max_line: usize) {
    use std::fmt::Write;
    let cut = |l: &str| -> String {
        let c: String = l.chars().take(max_line).collect();
        let more = if c.len() < l.len() { " …" } else { "" };
        format!("{c}{more}")
    };
    let mut s = String::new();
    let _ = writeln!(s, "=== {case}: mock requests");
    for r in mock.requests() {
        let _ = writeln!(
            s,
            "  {} {} side={} -> {}",
            r.method, r.path, r.side, r.served
        );
    }
    let json: Value = out
        .stdout
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    if let Some(session) = json["details"]["results"][0]["sessionFile"].as_str() {
        let _ = writeln!(s, "=== {case}: session.jsonl");
        for l in std::fs::read_to_string(session).unwrap_or_default().lines() {
            let _ = writeln!(s, "  {}", cut(l));
        }
        let stderr_log = Path::new(session).with_file_name("stderr.log");
        let text = std::fs::read_to_string(stderr_log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(15)..];
        if !tail.is_empty() {
            let _ = writeln!(s, "=== {case}: stderr.log (tail)");
            for l in tail {
                let _ = writeln!(s, "  {}", cut(l));
            }
        }
    }
    let _ = write!(
        s,
        "=== {case}: orchestrate exit {} in {:?}\n  {}",
        out.status, out.elapsed, out.stdout
    );
    harness::note(&s);
}

/// An unprivileged user the contract tests create when they run as root (`useradd`), to
/// run a real CLI through orchestrate as a user would, where the sandbox needs a user
/// namespace. (tests/support has the same for the fake child's tests.)
#[derive(Debug)]
pub struct Unprivileged {
    pub uid: u32,
    pub gid: u32,
    /// orchestrate, where the user can run it.
    orchestrate: PathBuf,
}

/// The tests' unprivileged user (None unless the tests run as root).
pub fn unprivileged() -> Option<&'static Unprivileged> {
    const NAME: &str = "orchestrate-test";
    static USER: std::sync::OnceLock<Option<Unprivileged>> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        // SAFETY: no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return None;
        }
        let id = |flag: &str| -> Option<u32> {
            let out = Command::new("id").args([flag, NAME]).output().ok()?;
            String::from_utf8_lossy(&out.stdout).trim().parse().ok()
        };
        if id("-u").is_none() {
            let _ = Command::new("useradd")
                .args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    NAME,
                ])
                .output();
        }
        let (uid, gid) = (id("-u").expect("useradd"), id("-g").expect("its group"));
        let mut u = Unprivileged {
            uid,
            gid,
            orchestrate: PathBuf::new(),
        };
        u.orchestrate = u.reach(&orchestrate_bin());
        Some(u)
    })
    .as_ref()
}

impl Unprivileged {
    fn setpriv(&self) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--clear-groups");
        cmd
    }

    /// `bin` (symbolic links resolved), or a hard link to it (a copy across filesystems)
    /// where the user can reach it, when the user cannot run it where it is (the pinned
    /// CLIs live under /root).
    pub fn reach(&self, bin: &Path) -> PathBuf {
        let bin = std::fs::canonicalize(bin).expect("the binary");
        let runs = self
            .setpriv()
            .args(["--", "test", "-x"])
            .arg(&bin)
            .status()
            .is_ok_and(|s| s.success());
        if runs {
            return bin;
        }
        reachable_copy(&bin)
    }

    /// `cmd` (from [`clean_command`]) run as this user; orchestrate's from where the
    /// user can run it.
    fn wrap(&self, cmd: &Command) -> Command {
        let mut w = self.setpriv();
        let program = if Path::new(cmd.get_program()) == orchestrate_bin() {
            self.orchestrate.as_os_str()
        } else {
            cmd.get_program()
        };
        w.arg("--").arg(program).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        w.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        w
    }
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
