//! Helpers shared by the real-CLI contract tests (`tests/contract_*.rs`): locating the
//! pinned CLI (or skipping), running `orchestrate` with a wall-clock bound, and finding
//! the processes of a run's tree through `/proc`.

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
    PathBuf::from(env!("CARGO_BIN_EXE_orchestrate"))
}

/// `orchestrate` with a clean environment: stdin null, output piped, its own process
/// group, no inherited orchestrate variables.
pub fn orchestrate_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(orchestrate_bin());
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
