//! Fake `pi --mode json` (and `--mode rpc`) child agent for the integration tests of
//! `orchestrate`.
//!
//! Tests point orchestrate at this program (`ORCHESTRATE_PI_BIN=<path>`) and pick a
//! behaviour with environment variables. Only `std`, `libc` and (to read pi's RPC commands)
//! `serde_json` are used. Linux only. Given `--mode rpc`, it reads its task from the first
//! `prompt` command on stdin, as pi does, and otherwise behaves as in `--mode json`.
//!
//! Common variables (read by every scenario, in this order):
//! - `FAKE_AGENT_PIDFILE`: this process (and every process it forks) appends its pid,
//!   one per line, before doing anything else.
//! - `FAKE_AGENT_ARGV_FILE`: receives one JSON object
//!   `{"argv":[..argv[1..]],"cwd":..,"depth":..,"runId":..,"maxDepth":..,"pid":..,"pgid":..,
//!   "stdin":..,"appendSystemPrompt":..}` (unset env vars and unreadable things are `null`).
//! - `FAKE_AGENT_STDERR`: written to stderr at start (a newline is added if missing);
//!   in `fail` it is written after the session header instead.
//! - `FAKE_AGENT_FD_FILE`: receives, before anything else is opened, the open file
//!   descriptors this process inherited, as a JSON array of numbers (`[0,1,2]`).
//! - `FAKE_AGENT_FOREVER_MS` (default 600000): "forever" sleeps end after this long with
//!   exit code 99, so a broken supervisor cannot leak processes for ever.
//! - `FAKE_AGENT_TERM_STAMP`: on SIGTERM, append `term <CLOCK_MONOTONIC ns>` to this file
//!   and exit 143 (for measuring how late a stop came; see `FAKE_AGENT_STAMP_TURN`).
//! - `FAKE_AGENT_HOLD_FILE`: before answering, wait until this file exists (at most
//!   `FAKE_AGENT_FOREVER_MS`, then exit 99): a child whose turn lasts until a test says.
//! - `FAKE_AGENT_SCENARIO` (default `replay`): see `main`.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::process::{self, Command, Stdio};
use std::thread;
use std::time::Duration;

const SESSION_ID: &str = "0b5c6a4e-3f2d-4e1a-9c7b-2d8e5f1a3b4c";
const SESSION_TS: &str = "2026-03-15T10:00:00.000Z";
const BASE_TS: u64 = 1_760_000_000_000;
const DEFAULT_TEXT: &str = "Hello from pi.";
const BLOCK: usize = 64 * 1024;

fn main() {
    // A probe a hostile shell script runs (`$ORCHESTRATE_PI_BIN probe NAME ARGS…`), for
    // what `sh` alone cannot do: prints one line saying what happened, exits 0.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("probe") {
        println!("{}", probe(&argv[2..]));
        process::exit(0);
    }
    // 0. The inherited descriptors, before this process opens any of its own.
    if let Some(path) = env_os("FAKE_AGENT_FD_FILE") {
        let fds = open_fds();
        let _ = fs::write(path, format!("{fds:?}").replace(' ', ""));
    }
    // 1. pidfile, before anything else.
    append_pid(process::id());
    if let Some(path) = env_os("FAKE_AGENT_TERM_STAMP") {
        stamp_sigterm_into(&path);
    }
    // 2. argv capture.
    if let Some(path) = env_os("FAKE_AGENT_ARGV_FILE") {
        write_argv_file(&path);
    }
    // Like pi with `--session FILE`: the session file gets a line per run, appended, so a
    // resumed run shows the earlier run's line before its own.
    if let Some(path) = session_file() {
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{{\"type\":\"session\",\"task\":{:?}}}", prompt_text());
        }
    }
    // A child that thinks before it answers (fan-out benchmarks).
    let think = env_num("FAKE_AGENT_START_DELAY_MS", 0);
    if think > 0 {
        sleep_ms(think);
    }
    // A child whose turn lasts until the test releases it.
    if let Some(hold) = env_str("FAKE_AGENT_HOLD_FILE") {
        let forever = env_num("FAKE_AGENT_FOREVER_MS", 600_000);
        let mut waited = 0;
        while !std::path::Path::new(&hold).exists() {
            if waited >= forever {
                process::exit(99);
            }
            sleep_ms(20);
            waited += 20;
        }
    }

    // A task may pick its own scenario with a `@scenario:NAME` word, so that the tasks of
    // one parallel or chain call can behave differently.
    let scenario = prompt_text()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("@scenario:").map(str::to_string))
        .or_else(|| env_str("FAKE_AGENT_SCENARIO"))
        .unwrap_or_else(|| "replay".to_string());
    if scenario != "fail" {
        if let Some(msg) = env_str("FAKE_AGENT_STDERR") {
            write_stderr_line(&msg);
        }
    }

    match scenario.as_str() {
        "replay" => {
            print_transcript(delay_ms(0));
            process::exit(exit_code(0));
        }
        "slow" => {
            print_transcript(delay_ms(200));
            process::exit(exit_code(0));
        }
        "silent" => sleep_forever(),
        "acp" => acp_agent(),
        "chatter" => chatter(),
        "chatter-stderr" => chatter_stderr(),
        "ignore-term" => {
            ignore_signal(libc::SIGTERM);
            out_line(&session_header());
            sleep_forever();
        }
        "grandchild" => {
            spawn_grandchild();
            print_transcript(delay_ms(0));
            process::exit(0);
        }
        "grandchild-hang" => {
            spawn_grandchild();
            sleep_forever();
        }
        // A grandchild in a session of its own (`setsid`), ignoring SIGTERM and SIGHUP,
        // its stdio on /dev/null: out of the child's process group and off its pipes.
        "setsid-grandchild-hang" => {
            start_detached(Detach::Setsid, Stdio3::DevNull);
            sleep_forever();
        }
        // The same, but it keeps the pipes it inherited.
        "setsid-grandchild-pipes-hang" => {
            start_detached(Detach::Setsid, Stdio3::Inherited);
            sleep_forever();
        }
        // The child starts a fully detached daemon (double fork, setsid, stdio on
        // /dev/null, ignoring SIGTERM and SIGHUP), then answers and exits 0.
        // The leader forks children that exit at once and, as node does at its exit,
        // never reaps them: zombies the tree's holder inherits when the leader exits.
        "zombie" => {
            for _ in 0..8 {
                // SAFETY: the child only exits.
                if unsafe { libc::fork() } == 0 {
                    unsafe { libc::_exit(0) };
                }
            }
            sleep_ms(50);
            print_transcript(delay_ms(0));
            process::exit(0);
        }
        "daemon" => {
            start_detached(Detach::DoubleFork, Stdio3::DevNull);
            print_transcript(delay_ms(0));
            process::exit(0);
        }
        // The leader answers and exits; then its grandchild floods the inherited stdout
        // until it is killed.
        "grandchild-flood" => {
            spawn_grandchild_then(flood_stdout_once_orphaned);
            print_transcript(delay_ms(0));
            process::exit(0);
        }
        "flood" => {
            if env_os("FAKE_AGENT_TRANSCRIPT").is_some() {
                print_transcript(0);
            }
            flood(libc::STDOUT_FILENO);
        }
        // Memory floods: endless text deltas of FAKE_AGENT_DELTA_BYTES (default 1000) each,
        // or endless tool calls whose arguments are FAKE_AGENT_ARGS_BYTES (default 1 MiB) of
        // small JSON values, until the reader stops reading.
        "flood-deltas" => flood_deltas(),
        "flood-tool-args" => flood_tool_args(),
        "flood-stderr" => {
            if env_os("FAKE_AGENT_TRANSCRIPT").is_some() {
                print_transcript(0);
            }
            flood(libc::STDERR_FILENO);
        }
        "garbage" => {
            garbage();
            process::exit(0);
        }
        "fail" => {
            out_line(&session_header());
            let msg = env_str("FAKE_AGENT_STDERR")
                .unwrap_or_else(|| "fatal: something broke".to_string());
            write_stderr_line(&msg);
            process::exit(exit_code(3));
        }
        "die-by-signal" => die_by_signal(),
        "error-stop" => {
            emit_lines(&error_stop_transcript(), delay_ms(0));
            process::exit(0);
        }
        // Fails like `error-stop` while the file FAKE_AGENT_MARKER holds fewer than
        // FAKE_AGENT_FAIL_TIMES (default 1) lines (and adds one), then succeeds like
        // `replay`: a transient failure for retry tests. A failing attempt first runs
        // `sh -c "$FAKE_AGENT_BEFORE"` when it is set.
        "flaky" => {
            let marker = env_os("FAKE_AGENT_MARKER").expect("flaky needs FAKE_AGENT_MARKER");
            let times: usize = env_str("FAKE_AGENT_FAIL_TIMES").map_or(1, |n| n.parse().unwrap());
            let failed = fs::read(&marker).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count());
            if failed < times {
                let mut record = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&marker)
                    .unwrap();
                let _ = record.write_all(b"failed\n");
                if let Some(before) = env_str("FAKE_AGENT_BEFORE") {
                    let _ = Command::new("/bin/sh").args(["-c", &before]).status();
                }
                emit_lines(&error_stop_transcript(), delay_ms(0));
            } else {
                print_transcript(delay_ms(0));
            }
            process::exit(0);
        }
        // Turns that each say something, call a tool and cost something, until the
        // child is stopped: FAKE_AGENT_TURNS (default 1000) of them, then a final answer.
        // Per turn: input FAKE_AGENT_TURN_INPUT (100), output 10, cost FAKE_AGENT_TURN_COST
        // (0), FAKE_AGENT_DELAY_MS (20) apart. FAKE_AGENT_STAMP_TURN=k appends
        // `due <ns>` to FAKE_AGENT_TERM_STAMP when turn k is printed.
        // FAKE_AGENT_TURN_USAGE: the JSON text printed as every message's `usage` instead
        // (odd shapes: `{"input":"100","cost":null}`).
        "turns" => {
            turns();
            process::exit(0);
        }
        // One tool call that runs silently for FAKE_AGENT_TOOL_MS (default 1000), then
        // the answer "Build done.".
        "tool-call" => {
            tool_call();
            process::exit(0);
        }
        // A recognised stream, then only chatter on stderr, forever.
        "chatter-after-start" => {
            out_line(&session_header());
            let delay = delay_ms(100);
            let mut n: u64 = 0;
            loop {
                write_stderr_line(&format!("still working {n}"));
                n += 1;
                sleep_ms(delay);
            }
        }
        // A provider that never answers: failed requests and pi's retry notices, every
        // FAKE_AGENT_DELAY_MS (default 200), forever.
        "retrying" => retrying(),
        // Fails like `error-stop` (FAKE_AGENT_ERROR) when run with `--model
        // $FAKE_AGENT_BAD_MODEL`; otherwise answers "answered by <model>".
        "model-unavailable" => {
            let model = arg_after("--model").unwrap_or_default();
            if Some(&model) == env_str("FAKE_AGENT_BAD_MODEL").as_ref() {
                emit_lines(&error_stop_transcript(), 0);
            } else {
                emit_lines(&success_transcript(&format!("answered by {model}")), 0);
            }
            process::exit(0);
        }
        "end-no-exit" => {
            print_transcript(delay_ms(0));
            sleep_forever();
        }
        // Runs FAKE_AGENT_NESTED_CMD (see `nested`) and answers with what it printed.
        // With FAKE_AGENT_NESTED_PREFACE, a first turn says that text (costing
        // FAKE_AGENT_TURN_COST) before the command runs, and a second one after it (what
        // it printed, at the same cost), FAKE_AGENT_DELAY_MS before the answer `done`.
        "nested" => {
            let Some(preface) = env_str("FAKE_AGENT_NESTED_PREFACE") else {
                let text = nested();
                emit_lines(&success_transcript(&text), delay_ms(0));
                process::exit(0);
            };
            let cost: f64 = env_str("FAKE_AGENT_TURN_COST")
                .map(|c| c.trim().parse().unwrap_or(0.0))
                .unwrap_or(0.0);
            let usage = Usage {
                input: 100,
                output: 10,
                cache_read: 0,
                cache_write: 0,
                cost: [cost, 0.0, 0.0, 0.0, cost],
            };
            out_line(&session_header());
            out_line("{\"type\":\"agent_start\"}");
            let turn = |text: &str, ts: u64| {
                let msg = assistant_msg(&[text_block(text)], &usage, "toolUse", None, ts);
                out_line("{\"type\":\"turn_start\"}");
                out_line(&ev_msg("message_end", &msg));
                out_line(&format!(
                    "{{\"type\":\"turn_end\",\"message\":{msg},\"toolResults\":[]}}"
                ));
            };
            turn(&preface, BASE_TS + 1);
            // Then a turn on what it printed, and the answer.
            turn(&nested(), BASE_TS + 2);
            sleep_ms(delay_ms(0));
            out_line(&ev_msg(
                "message_end",
                &assistant_msg(
                    &[text_block("done")],
                    &ZERO_USAGE,
                    "stop",
                    None,
                    BASE_TS + 3,
                ),
            ));
            out_line("{\"type\":\"agent_end\",\"messages\":[]}");
            process::exit(0);
        }
        // The final text is the task itself (after `Task: `).
        "echo-task" => {
            let task = prompt_text();
            let text = task.strip_prefix("Task: ").unwrap_or(&task).to_string();
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        // FAKE_AGENT_TEXT streamed as text deltas of FAKE_AGENT_DELTA_CHARS characters
        // (default 3), FAKE_AGENT_DELAY_MS apart (default 5), then the whole message.
        "stream-text" => {
            let text = env_str("FAKE_AGENT_TEXT").unwrap_or_else(|| DEFAULT_TEXT.to_string());
            let chars = env_num("FAKE_AGENT_DELTA_CHARS", 3).max(1) as usize;
            emit_lines(&streamed_transcript(&text, chars), delay_ms(5));
            process::exit(0);
        }
        // A long run like a real exploring agent's: FAKE_AGENT_TOOL_CALLS turns (default
        // 40) of a sentence and a tool call each, then the final answer FAKE_AGENT_TEXT,
        // or FAKE_AGENT_ANSWER_BYTES (default 1500) of prose.
        "long-run" => {
            let calls = env_num("FAKE_AGENT_TOOL_CALLS", 40);
            let answer = env_str("FAKE_AGENT_TEXT")
                .unwrap_or_else(|| prose(env_num("FAKE_AGENT_ANSWER_BYTES", 1500) as usize));
            emit_lines(&long_run_transcript(calls, &answer), delay_ms(0));
            process::exit(0);
        }
        // Tries to write `probe <run id>` to each file of FAKE_AGENT_WRITE_PATHS (separated
        // by `:`; relative to the working directory; `$TMPDIR` at the start of one is the
        // variable's value) and answers with one line per path: `PATH: ok` or
        // `PATH: <error>`.
        "write-probe" => {
            let text = write_probe();
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        // Connects to 127.0.0.1:FAKE_AGENT_CONNECT_PORT and answers `connected` or the
        // error.
        "connect-probe" => {
            let port = env_num("FAKE_AGENT_CONNECT_PORT", 0) as u16;
            let text = match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(_) => "connected".to_string(),
                Err(e) => format!("not connected: {}", e.kind()),
            };
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        // Answers FAKE_AGENT_ANSWER_<N> in the Nth run of its `--session` file (the
        // number of lines in it, this run's included), or the highest N given: a child
        // that answers differently when its session is continued (a repair turn).
        "answers" => {
            let turn = session_file()
                .and_then(|p| fs::read_to_string(p).ok())
                .map_or(1, |s| s.lines().count().max(1));
            let text = (1..=turn)
                .rev()
                .find_map(|n| env_str(&format!("FAKE_AGENT_ANSWER_{n}")))
                .unwrap_or_else(|| DEFAULT_TEXT.to_string());
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        // A hostile child: runs FAKE_AGENT_SCRIPT with `sh -c` and answers with what it
        // printed (stdout and stderr, in order), trailing blank lines trimmed.
        "hostile" => {
            let text = shell_script();
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        // A child with a shell as its tool: runs `sh -c "$FAKE_AGENT_SHELL"` in its working
        // directory and answers with what the script printed (stdout, then stderr) and
        // `exit N`.
        "shell" => {
            let script = env_str("FAKE_AGENT_SHELL").unwrap_or_default();
            let text = match Command::new("/bin/sh")
                .args(["-c", &script])
                .stdin(Stdio::null())
                .output()
            {
                Ok(out) => format!(
                    "{}{}exit {}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                    out.status.code().unwrap_or(-1)
                ),
                Err(e) => format!("sh: {e}"),
            };
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        "echo-env" => {
            let text = match env_str("FAKE_AGENT_ECHO_VAR") {
                Some(name) => match std::env::var_os(&name) {
                    Some(v) => v.to_string_lossy().into_owned(),
                    None => "<unset>".to_string(),
                },
                None => "<FAKE_AGENT_ECHO_VAR not set>".to_string(),
            };
            emit_lines(&success_transcript(&text), delay_ms(0));
            process::exit(0);
        }
        other => {
            write_stderr_line(&format!(
                "fake_agent: unknown FAKE_AGENT_SCENARIO {other:?}"
            ));
            process::exit(64);
        }
    }
}

// ---------------------------------------------------------------------------
// Environment helpers

/// The file after `--session`, as pi takes it.
fn session_file() -> Option<String> {
    let argv: Vec<String> = std::env::args().collect();
    let i = argv.iter().position(|a| a == "--session")?;
    argv.get(i + 1).cloned()
}

fn env_os(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

fn env_str(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn env_num(name: &str, default: u64) -> u64 {
    match env_str(name) {
        Some(v) => v.trim().parse().unwrap_or_else(|_| {
            write_stderr_line(&format!("fake_agent: {name}={v:?} is not a number"));
            process::exit(64);
        }),
        None => default,
    }
}

fn delay_ms(default: u64) -> u64 {
    env_num("FAKE_AGENT_DELAY_MS", default)
}

fn exit_code(default: i32) -> i32 {
    match env_str("FAKE_AGENT_EXIT_CODE") {
        Some(v) => v.trim().parse().unwrap_or_else(|_| {
            write_stderr_line(&format!(
                "fake_agent: FAKE_AGENT_EXIT_CODE={v:?} is not a number"
            ));
            process::exit(64);
        }),
        None => default,
    }
}

// ---------------------------------------------------------------------------
// Output helpers. A failed write on stdout (EPIPE: the reader is gone) ends the process.

fn out_bytes(bytes: &[u8]) {
    let mut o = io::stdout().lock();
    if o.write_all(bytes).and_then(|()| o.flush()).is_err() {
        process::exit(1);
    }
}

fn out_line(line: &str) {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    out_bytes(&buf);
}

fn write_stderr_line(msg: &str) {
    let mut e = io::stderr().lock();
    let _ = e.write_all(msg.as_bytes());
    if !msg.ends_with('\n') {
        let _ = e.write_all(b"\n");
    }
    let _ = e.flush();
}

fn sleep_ms(ms: u64) {
    if ms > 0 {
        thread::sleep(Duration::from_millis(ms));
    }
}

fn sleep_forever() -> ! {
    let limit = env_num("FAKE_AGENT_FOREVER_MS", 600_000);
    thread::sleep(Duration::from_millis(limit));
    process::exit(99);
}

fn append_pid(pid: u32) {
    if let Some(path) = env_os("FAKE_AGENT_PIDFILE") {
        // One small write on an O_APPEND file: lines from several processes never interleave.
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = f.write_all(format!("{pid}\n").as_bytes());
        }
    }
}

fn ignore_signal(sig: libc::c_int) {
    // SAFETY: installing SIG_IGN has no preconditions.
    unsafe {
        libc::signal(sig, libc::SIG_IGN);
    }
}

// ---------------------------------------------------------------------------
// JSON helpers (serde-free). Escapes like JavaScript's JSON.stringify: U+2028/U+2029 stay raw.

fn js(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn js_opt(s: Option<String>) -> String {
    s.map_or_else(|| "null".to_string(), |v| js(&v))
}

fn write_argv_file(path: &OsString) {
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let argv = args.iter().map(|a| js(a)).collect::<Vec<_>>().join(",");
    let cwd = std::env::current_dir()
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let stdin = fs::read_link("/proc/self/fd/0")
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let prompt = args
        .iter()
        .position(|a| a == "--append-system-prompt")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| fs::read(p).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    // SAFETY: getpgrp has no preconditions.
    let pgid = unsafe { libc::getpgrp() };
    let json = format!(
        "{{\"argv\":[{argv}],\"cwd\":{},\"depth\":{},\"runId\":{},\"maxDepth\":{},\"pid\":{},\"pgid\":{pgid},\"stdin\":{},\"appendSystemPrompt\":{}}}\n",
        js_opt(cwd),
        js_opt(env_str("ORCHESTRATE_DEPTH")),
        js_opt(env_str("ORCHESTRATE_RUN_ID")),
        js_opt(env_str("ORCHESTRATE_MAX_DEPTH")),
        process::id(),
        js_opt(stdin),
        js_opt(prompt),
    );
    if let Err(e) = fs::write(path, json) {
        write_stderr_line(&format!(
            "fake_agent: cannot write FAKE_AGENT_ARGV_FILE: {e}"
        ));
    }
}

// ---------------------------------------------------------------------------
// pi event builders (shapes of pi `--mode json`, as `tests/fixtures/pi/` records them)

struct Usage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    /// cost.input, cost.output, cost.cacheRead, cost.cacheWrite, cost.total
    cost: [f64; 5],
}

const ZERO_USAGE: Usage = Usage {
    input: 0,
    output: 0,
    cache_read: 0,
    cache_write: 0,
    cost: [0.0; 5],
};

fn num(f: f64) -> String {
    if f == 0.0 {
        "0".to_string()
    } else {
        format!("{f}")
    }
}

fn usage_json(u: &Usage) -> String {
    format!(
        "{{\"input\":{},\"output\":{},\"cacheRead\":{},\"cacheWrite\":{},\"totalTokens\":{},\"cost\":{{\"input\":{},\"output\":{},\"cacheRead\":{},\"cacheWrite\":{},\"total\":{}}}}}",
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.input + u.output + u.cache_read + u.cache_write,
        num(u.cost[0]),
        num(u.cost[1]),
        num(u.cost[2]),
        num(u.cost[3]),
        num(u.cost[4]),
    )
}

fn text_block(text: &str) -> String {
    format!("{{\"type\":\"text\",\"text\":{}}}", js(text))
}

fn assistant_msg(
    content: &[String],
    usage: &Usage,
    stop: &str,
    error: Option<&str>,
    ts: u64,
) -> String {
    let err = error.map_or_else(String::new, |e| format!(",\"errorMessage\":{}", js(e)));
    format!(
        "{{\"role\":\"assistant\",\"content\":[{}],\"api\":\"anthropic-messages\",\"provider\":\"anthropic\",\"model\":\"claude-sonnet-4-5\",\"usage\":{},\"stopReason\":{}{err},\"timestamp\":{ts}}}",
        content.join(","),
        usage_json(usage),
        js(stop),
    )
}

fn user_msg(text: &str, ts: u64) -> String {
    format!(
        "{{\"role\":\"user\",\"content\":[{}],\"timestamp\":{ts}}}",
        text_block(text)
    )
}

fn session_header() -> String {
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_string());
    format!(
        "{{\"type\":\"session\",\"version\":3,\"id\":\"{SESSION_ID}\",\"timestamp\":\"{SESSION_TS}\",\"cwd\":{}}}",
        js(&cwd)
    )
}

fn ev_msg(kind: &str, msg: &str) -> String {
    format!("{{\"type\":\"{kind}\",\"message\":{msg}}}")
}

/// pre-1.0 `message_update`: carries `message` and `assistantMessageEvent.partial`.
fn ev_update_old(event_fields: &str, partial: &str) -> String {
    format!(
        "{{\"type\":\"message_update\",\"assistantMessageEvent\":{{{event_fields},\"partial\":{partial}}},\"message\":{partial}}}"
    )
}

/// pi 1.0 `message_update`: `{type,usage,assistantMessageEvent}`, no partial.
fn ev_update_new(event_fields: &str, usage: &Usage) -> String {
    format!(
        "{{\"type\":\"message_update\",\"usage\":{},\"assistantMessageEvent\":{{{event_fields}}}}}",
        usage_json(usage)
    )
}

fn text_delta_fields(delta: &str) -> String {
    format!(
        "\"type\":\"text_delta\",\"contentIndex\":0,\"delta\":{}",
        js(delta)
    )
}

/// The task: the last argument, or, in pi's RPC mode (`--mode rpc`), the message of the
/// first `prompt` command on stdin (read once; the lines before it are dropped).
fn prompt_text() -> String {
    static PROMPT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PROMPT
        .get_or_init(|| {
            let args: Vec<String> = std::env::args().skip(1).collect();
            let rpc = args.windows(2).any(|w| w[0] == "--mode" && w[1] == "rpc");
            let task = if rpc {
                rpc_prompt()
            } else {
                args.last().cloned()
            };
            task.filter(|a| a.starts_with("Task:"))
                .unwrap_or_else(|| "Task: say hello".to_string())
        })
        .clone()
}

/// The first `prompt` command's message, read from stdin a byte at a time (so that
/// nothing after its line is taken from whoever reads stdin next).
fn rpc_prompt() -> Option<String> {
    let mut stdin = io::stdin().lock();
    loop {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match stdin.read(&mut byte) {
                Ok(1) if byte[0] == b'\n' => break,
                Ok(1) => line.push(byte[0]),
                _ => return None,
            }
        }
        let line = String::from_utf8_lossy(&line).into_owned();
        let v: serde_json::Value = serde_json::from_str(&line).ok()?;
        if v["type"] == "prompt" {
            return v["message"].as_str().map(str::to_string);
        }
    }
}

/// A complete successful pi run whose final assistant text is `text`
/// (14 lines; usage input 100, output 10, cacheRead 0, cacheWrite 0, cost 0.00012, 1 turn).
fn success_transcript(text: &str) -> Vec<String> {
    let usage = Usage {
        input: 100,
        output: 10,
        cache_read: 0,
        cache_write: 0,
        cost: [0.0001, 0.00002, 0.0, 0.0, 0.00012],
    };
    let user = user_msg(&prompt_text(), BASE_TS);
    let split = text
        .char_indices()
        .map(|(i, _)| i)
        .nth(text.chars().count() / 2)
        .unwrap_or(text.len());
    let (a, b) = text.split_at(split);
    let ts = BASE_TS + 1;
    let empty = assistant_msg(&[], &ZERO_USAGE, "stop", None, ts);
    let part_a = assistant_msg(&[text_block(a)], &ZERO_USAGE, "stop", None, ts);
    let full_partial = assistant_msg(&[text_block(text)], &ZERO_USAGE, "stop", None, ts);
    let fin = assistant_msg(&[text_block(text)], &usage, "stop", None, ts);
    vec![
        session_header(),
        "{\"type\":\"agent_start\"}".to_string(),
        "{\"type\":\"turn_start\"}".to_string(),
        ev_msg("message_start", &user),
        ev_msg("message_end", &user),
        ev_msg("message_start", &empty),
        ev_update_old(
            "\"type\":\"text_start\",\"contentIndex\":0",
            &assistant_msg(&[text_block("")], &ZERO_USAGE, "stop", None, ts),
        ),
        ev_update_old(&text_delta_fields(a), &part_a),
        ev_update_old(&text_delta_fields(b), &full_partial),
        ev_update_old(
            &format!(
                "\"type\":\"text_end\",\"contentIndex\":0,\"content\":{}",
                js(text)
            ),
            &full_partial,
        ),
        ev_msg("message_end", &fin),
        format!("{{\"type\":\"turn_end\",\"message\":{fin},\"toolResults\":[]}}"),
        format!("{{\"type\":\"agent_end\",\"messages\":[{user},{fin}]}}"),
        "{\"type\":\"agent_settled\"}".to_string(),
    ]
}

/// A pi run whose one message arrives as text deltas of `chars` characters each, as pi
/// streams a model's answer, then ends like [`success_transcript`].
fn streamed_transcript(text: &str, chars: usize) -> Vec<String> {
    let full = success_transcript(text);
    let ts = BASE_TS + 1;
    let letters: Vec<char> = text.chars().collect();
    let mut deltas = Vec::new();
    let mut so_far = String::new();
    for piece in letters.chunks(chars) {
        let delta: String = piece.iter().collect();
        so_far.push_str(&delta);
        let partial = assistant_msg(&[text_block(&so_far)], &ZERO_USAGE, "stop", None, ts);
        deltas.push(ev_update_old(&text_delta_fields(&delta), &partial));
    }
    // The success transcript's own two deltas (lines 7 and 8) give way to these.
    let mut lines = full[..7].to_vec();
    lines.extend(deltas);
    lines.extend_from_slice(&full[9..]);
    lines
}

/// `bytes` of plain prose (whole sentences, cut on a word), for an answer of a known size.
fn prose(bytes: usize) -> String {
    const SENTENCES: [&str; 4] = [
        "Authentication lives in src/auth.rs, where login() checks the password hash with argon2 and issues a session token.",
        "The session middleware in src/http/session.rs validates that token on every request and loads the user.",
        "Password resets go through src/auth/reset.rs, which mails a one-time link that expires after thirty minutes.",
        "Tests for all three are in tests/auth.rs; the login rate limit is configured in config/auth.toml.",
    ];
    let mut text = String::new();
    let mut i = 0;
    while text.len() < bytes {
        if !text.is_empty() {
            text.push(if i % 4 == 0 { '\n' } else { ' ' });
        }
        text.push_str(SENTENCES[i % SENTENCES.len()]);
        i += 1;
    }
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text
}

/// `calls` turns of one sentence and one tool call (read, grep or bash in turn), each with
/// its tool result, then a last turn answering `answer`. Usage per turn: input 1000,
/// output 50, cost 0.001.
fn long_run_transcript(calls: u64, answer: &str) -> Vec<String> {
    let usage = Usage {
        input: 1000,
        output: 50,
        cache_read: 0,
        cache_write: 0,
        cost: [0.0008, 0.0002, 0.0, 0.0, 0.001],
    };
    let user = user_msg(&prompt_text(), BASE_TS);
    let mut lines = vec![
        session_header(),
        "{\"type\":\"agent_start\"}".to_string(),
        "{\"type\":\"turn_start\"}".to_string(),
        ev_msg("message_start", &user),
        ev_msg("message_end", &user),
    ];
    let mut messages = vec![user];
    for i in 0..calls {
        let ts = BASE_TS + 1 + i;
        let (name, args) = match i % 3 {
            0 => ("read", format!("{{\"path\":\"src/module_{i}.rs\"}}")),
            1 => (
                "grep",
                format!("{{\"pattern\":\"fn handler_{i}\",\"path\":\"src\"}}"),
            ),
            _ => (
                "bash",
                format!("{{\"command\":\"git log --oneline -5 -- src/module_{i}.rs\"}}"),
            ),
        };
        let call = format!(
            "{{\"type\":\"toolCall\",\"id\":\"call_{i}\",\"name\":\"{name}\",\"arguments\":{args}}}"
        );
        let text = text_block(&format!("Step {}: looking at module {i} next.", i + 1));
        let msg = assistant_msg(&[text, call], &usage, "toolUse", None, ts);
        let result = format!(
            "{{\"role\":\"toolResult\",\"toolCallId\":\"call_{i}\",\"toolName\":\"{name}\",\"content\":[{}],\"isError\":false,\"timestamp\":{ts}}}",
            text_block(&format!("// module {i}\nfn handler_{i}() {{}}\n"))
        );
        lines.push(ev_msg("message_start", &msg));
        lines.push(ev_msg("message_end", &msg));
        lines.push(ev_msg("message_start", &result));
        lines.push(ev_msg("message_end", &result));
        lines.push(format!(
            "{{\"type\":\"turn_end\",\"message\":{msg},\"toolResults\":[{result}]}}"
        ));
        lines.push("{\"type\":\"turn_start\"}".to_string());
        messages.push(msg);
        messages.push(result);
    }
    let ts = BASE_TS + 1 + calls;
    let fin = assistant_msg(&[text_block(answer)], &usage, "stop", None, ts);
    lines.push(ev_msg("message_start", &fin));
    lines.push(ev_msg("message_end", &fin));
    lines.push(format!(
        "{{\"type\":\"turn_end\",\"message\":{fin},\"toolResults\":[]}}"
    ));
    messages.push(fin);
    lines.push(format!(
        "{{\"type\":\"agent_end\",\"messages\":[{}]}}",
        messages.join(",")
    ));
    lines.push("{\"type\":\"agent_settled\"}".to_string());
    lines
}

/// pi json mode when the provider call failed: exits 0, last assistant message has
/// stopReason "error", no content, and an errorMessage.
fn error_stop_transcript() -> Vec<String> {
    let message =
        env_str("FAKE_AGENT_ERROR").unwrap_or_else(|| "401 Incorrect API key provided".to_string());
    let user = user_msg(&prompt_text(), BASE_TS);
    let ts = BASE_TS + 1;
    let empty = assistant_msg(&[], &ZERO_USAGE, "stop", None, ts);
    let fin = assistant_msg(&[], &ZERO_USAGE, "error", Some(&message), ts);
    vec![
        session_header(),
        "{\"type\":\"agent_start\"}".to_string(),
        "{\"type\":\"turn_start\"}".to_string(),
        ev_msg("message_start", &user),
        ev_msg("message_end", &user),
        ev_msg("message_start", &empty),
        ev_msg("message_end", &fin),
        format!("{{\"type\":\"turn_end\",\"message\":{fin},\"toolResults\":[]}}"),
        format!("{{\"type\":\"agent_end\",\"messages\":[{user},{fin}]}}"),
    ]
}

fn emit_lines(lines: &[String], delay: u64) {
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            sleep_ms(delay);
        }
        out_line(l);
    }
}

/// Prints `FAKE_AGENT_TRANSCRIPT` byte for byte (line by line, flushed, `delay` ms between
/// lines), or the built-in success transcript (text `FAKE_AGENT_TEXT`, default
/// "Hello from pi.") when the variable is unset.
fn print_transcript(delay: u64) {
    let Some(path) = env_os("FAKE_AGENT_TRANSCRIPT") else {
        let text = env_str("FAKE_AGENT_TEXT").unwrap_or_else(|| DEFAULT_TEXT.to_string());
        emit_lines(&success_transcript(&text), delay);
        return;
    };
    if delay == 0 {
        // Stream without holding the file in memory, as fast as `cat`: the throughput
        // benchmark measures orchestrate, not this program.
        let copied =
            fs::File::open(&path).and_then(|mut f| io::copy(&mut f, &mut io::stdout().lock()));
        if let Err(e) = copied {
            write_stderr_line(&format!(
                "fake_agent: cannot replay FAKE_AGENT_TRANSCRIPT {}: {e}",
                path.to_string_lossy()
            ));
            process::exit(66);
        }
        return;
    }
    let data = match fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            write_stderr_line(&format!(
                "fake_agent: cannot read FAKE_AGENT_TRANSCRIPT {}: {e}",
                path.to_string_lossy()
            ));
            process::exit(66);
        }
    };
    let mut first = true;
    for line in data.split_inclusive(|&b| b == b'\n') {
        if !first {
            sleep_ms(delay);
        }
        first = false;
        out_bytes(line);
    }
}

// ---------------------------------------------------------------------------
// Scenarios

fn chatter() -> ! {
    let delay = delay_ms(100);
    let user = user_msg(&prompt_text(), BASE_TS);
    let empty = assistant_msg(&[], &ZERO_USAGE, "stop", None, BASE_TS + 1);
    out_line(&session_header());
    out_line("{\"type\":\"agent_start\"}");
    out_line("{\"type\":\"turn_start\"}");
    out_line(&ev_msg("message_start", &user));
    out_line(&ev_msg("message_end", &user));
    out_line(&ev_msg("message_start", &empty));
    let mut n: u64 = 0;
    loop {
        let usage = Usage {
            output: n + 1,
            ..ZERO_USAGE
        };
        out_line(&ev_update_new(
            &text_delta_fields(&format!("tick {n} ")),
            &usage,
        ));
        n += 1;
        sleep_ms(delay);
    }
}

/// Progress on stderr only, forever: stderr activity alone must keep the idle timer quiet.
fn chatter_stderr() -> ! {
    let delay = delay_ms(100);
    let mut n: u64 = 0;
    loop {
        write_stderr_line(&format!("still working {n}"));
        n += 1;
        sleep_ms(delay);
    }
}

/// Forks a grandchild that ignores SIGTERM, keeps the inherited stdout/stderr open, appends
/// its pid to the pidfile and sleeps. Returns once the grandchild has written its pid.
fn spawn_grandchild() {
    spawn_grandchild_then(|_| sleep_forever());
}

/// Waits until the leader has exited (the grandchild was given another parent), then
/// floods stdout: output that arrives only after the leader's exit.
fn flood_stdout_once_orphaned(leader: libc::pid_t) -> ! {
    // SAFETY: getppid has no preconditions.
    while unsafe { libc::getppid() } == leader {
        sleep_ms(1);
    }
    flood(libc::STDOUT_FILENO);
}

/// Like `spawn_grandchild`, with `then` (given the leader's pid) as what the grandchild
/// does once ready.
fn spawn_grandchild_then(then: fn(libc::pid_t) -> !) {
    let leader = process::id() as libc::pid_t;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        write_stderr_line("fake_agent: pipe failed");
        process::exit(70);
    }
    let (r, w) = (fds[0], fds[1]);
    // SAFETY: this process is single-threaded, so the child may keep using std.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        write_stderr_line("fake_agent: fork failed");
        process::exit(70);
    }
    if pid == 0 {
        // SAFETY: plain fd and signal syscalls on fds we own.
        unsafe {
            libc::close(r);
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
        append_pid(process::id());
        // SAFETY: w is our write end; closing it tells the leader we are ready.
        unsafe {
            libc::write(w, b"k".as_ptr().cast(), 1);
            libc::close(w);
        }
        then(leader);
    }
    // SAFETY: closing our copy of the write end and reading one byte from r.
    unsafe {
        libc::close(w);
        let mut b = 0u8;
        loop {
            let n = libc::read(r, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        libc::close(r);
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Detach {
    /// A grandchild that calls `setsid()`.
    Setsid,
    /// A great-grandchild whose parent exits at once (reparented), in a session of its own.
    DoubleFork,
}

#[derive(Clone, Copy, PartialEq)]
enum Stdio3 {
    /// Keeps the stdin, stdout and stderr it inherited (the child's pipes).
    Inherited,
    /// Points them at /dev/null.
    DevNull,
}

/// Starts a descendant that tries to outlive the child: out of its session and process
/// group, ignoring SIGTERM and SIGHUP, sleeping "forever". Every process it forks appends
/// its pid to the pidfile. Returns once the descendant is fully detached.
fn start_detached(how: Detach, stdio: Stdio3) {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        write_stderr_line("fake_agent: pipe failed");
        process::exit(70);
    }
    let (r, w) = (fds[0], fds[1]);
    // SAFETY: this process is single-threaded, so the child may keep using std.
    match unsafe { libc::fork() } {
        -1 => {
            write_stderr_line("fake_agent: fork failed");
            process::exit(70);
        }
        0 => {
            // SAFETY: plain fd and process syscalls on fds we own.
            unsafe { libc::close(r) };
            append_pid(process::id());
            if how == Detach::DoubleFork {
                // SAFETY: as above; the intermediate exits at once, leaving the
                // great-grandchild to be reparented.
                match unsafe { libc::fork() } {
                    0 => append_pid(process::id()),
                    _ => unsafe { libc::_exit(0) },
                }
            }
            // SAFETY: plain process, signal and fd syscalls.
            unsafe {
                libc::setsid();
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                if stdio == Stdio3::DevNull {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    for fd in 0..3 {
                        libc::dup2(null, fd);
                    }
                    if null > 2 {
                        libc::close(null);
                    }
                }
                // Ready: tell the child, which waits for this byte.
                libc::write(w, b"k".as_ptr().cast(), 1);
                libc::close(w);
            }
            sleep_forever();
        }
        _ => {}
    }
    // SAFETY: closing our copy of the write end and reading one byte from r.
    unsafe {
        libc::close(w);
        let mut b = 0u8;
        loop {
            let n = libc::read(r, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        libc::close(r);
    }
}

fn write_probe() -> String {
    let tmpdir = env_str("TMPDIR").unwrap_or_else(|| "/tmp".to_string());
    env_str("FAKE_AGENT_WRITE_PATHS")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let path = match p.strip_prefix("$TMPDIR") {
                Some(rest) => format!("{tmpdir}{rest}"),
                None => p.to_string(),
            };
            let content = format!(
                "probe {}\n",
                env_str("ORCHESTRATE_RUN_ID").unwrap_or_default()
            );
            let outcome = match fs::write(&path, content) {
                Ok(()) => "ok".to_string(),
                Err(e) => e.kind().to_string(),
            };
            format!("{p}: {outcome}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The open descriptors, probed with `fcntl(F_GETFD)` (which opens nothing itself).
fn open_fds() -> Vec<i32> {
    // SAFETY: F_GETFD on any number only reports whether it is open.
    (0..4096)
        .filter(|&fd| unsafe { libc::fcntl(fd, libc::F_GETFD) } != -1)
        .collect()
}

fn flood(fd: libc::c_int) -> ! {
    let mut block = vec![b'x'; BLOCK];
    block[BLOCK - 1] = b'\n';
    let mut f = if fd == libc::STDOUT_FILENO {
        Box::new(io::stdout()) as Box<dyn Write>
    } else {
        Box::new(io::stderr())
    };
    loop {
        if f.write_all(&block).is_err() {
            process::exit(1);
        }
    }
}

fn arg_after(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

fn monotonic_ns() -> u128 {
    // SAFETY: an all-zero timespec is valid; clock_gettime only writes into it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

static TERM_STAMP_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_sigterm(_: libc::c_int) {
    // Only async-signal-safe calls: clock_gettime, write, _exit.
    let fd = TERM_STAMP_FD.load(std::sync::atomic::Ordering::Relaxed);
    // SAFETY: see above; the buffer is on the stack.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
        let mut ns = ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128;
        let mut buf = [0u8; 48];
        let mut i = buf.len();
        buf[i - 1] = b'\n';
        i -= 1;
        loop {
            i -= 1;
            buf[i] = b'0' + (ns % 10) as u8;
            ns /= 10;
            if ns == 0 {
                break;
            }
        }
        let prefix = b"term ";
        i -= prefix.len();
        buf[i..i + prefix.len()].copy_from_slice(prefix);
        if fd >= 0 {
            libc::write(fd, buf[i..].as_ptr().cast(), buf.len() - i);
        }
        libc::_exit(143);
    }
}

fn stamp_sigterm_into(path: &OsString) {
    use std::os::unix::io::IntoRawFd;
    let Ok(f) = OpenOptions::new().create(true).append(true).open(path) else {
        return;
    };
    TERM_STAMP_FD.store(f.into_raw_fd(), std::sync::atomic::Ordering::Relaxed);
    // SAFETY: installing a handler that only makes async-signal-safe calls.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_sigterm as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t,
        );
    }
}

fn stamp(what: &str) {
    if let Some(path) = env_os("FAKE_AGENT_TERM_STAMP") {
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(f, "{what} {}", monotonic_ns());
        }
    }
}

fn turns() {
    let n = env_num("FAKE_AGENT_TURNS", 1000);
    let delay = delay_ms(20);
    let input = env_num("FAKE_AGENT_TURN_INPUT", 100);
    let cost: f64 = env_str("FAKE_AGENT_TURN_COST")
        .map(|c| c.trim().parse().unwrap_or(0.0))
        .unwrap_or(0.0);
    let stamp_turn = env_num("FAKE_AGENT_STAMP_TURN", 0);
    let raw_usage = env_str("FAKE_AGENT_TURN_USAGE");
    let usage = Usage {
        input,
        output: 10,
        cache_read: 0,
        cache_write: 0,
        cost: [cost, 0.0, 0.0, 0.0, cost],
    };
    out_line(&session_header());
    out_line("{\"type\":\"agent_start\"}");
    for t in 1..=n {
        let ts = BASE_TS + t;
        let text = format!("turn {t}");
        let id = format!("call_{t}");
        let call = format!(
            "{{\"type\":\"toolCall\",\"id\":{},\"name\":\"read\",\"arguments\":{{\"path\":\"f{t}.rs\"}}}}",
            js(&id)
        );
        out_line("{\"type\":\"turn_start\"}");
        out_line(&ev_msg(
            "message_start",
            &assistant_msg(&[], &ZERO_USAGE, "stop", None, ts),
        ));
        out_line(&ev_update_new(&text_delta_fields(&text), &ZERO_USAGE));
        let msg = assistant_msg(&[text_block(&text), call], &usage, "toolUse", None, ts);
        let msg = with_raw_usage(msg, &usage, raw_usage.as_deref());
        if t == stamp_turn {
            stamp("due");
        }
        out_line(&ev_msg("message_end", &msg));
        out_line(&format!(
            "{{\"type\":\"tool_execution_start\",\"toolCallId\":{},\"toolName\":\"read\",\"args\":{{}}}}",
            js(&id)
        ));
        out_line(&format!(
            "{{\"type\":\"tool_execution_end\",\"toolCallId\":{},\"toolName\":\"read\",\"result\":{{}},\"isError\":false}}",
            js(&id)
        ));
        out_line(&format!(
            "{{\"type\":\"turn_end\",\"message\":{msg},\"toolResults\":[]}}"
        ));
        sleep_ms(delay);
    }
    let fin = assistant_msg(
        &[text_block(&format!("done after {n} turns"))],
        &usage,
        "stop",
        None,
        BASE_TS + n + 1,
    );
    let fin = with_raw_usage(fin, &usage, raw_usage.as_deref());
    out_line(&ev_msg("message_end", &fin));
    out_line("{\"type\":\"agent_end\",\"messages\":[]}");
}

/// `msg` with `raw` printed as its usage instead of `usage`, when given.
fn with_raw_usage(msg: String, usage: &Usage, raw: Option<&str>) -> String {
    match raw {
        Some(raw) => msg.replace(&usage_json(usage), raw),
        None => msg,
    }
}

fn tool_call() {
    let tool_ms = env_num("FAKE_AGENT_TOOL_MS", 1000);
    let usage = Usage {
        input: 100,
        output: 10,
        cache_read: 0,
        cache_write: 0,
        cost: [0.0; 5],
    };
    let call = "{\"type\":\"toolCall\",\"id\":\"build\",\"name\":\"bash\",\"arguments\":{\"command\":\"make\"}}".to_string();
    out_line(&session_header());
    out_line("{\"type\":\"agent_start\"}");
    out_line(&ev_msg(
        "message_end",
        &assistant_msg(
            &[text_block("Running the build."), call],
            &usage,
            "toolUse",
            None,
            BASE_TS + 1,
        ),
    ));
    out_line("{\"type\":\"tool_execution_start\",\"toolCallId\":\"build\",\"toolName\":\"bash\",\"args\":{\"command\":\"make\"}}");
    // The build prints nothing while it runs.
    sleep_ms(tool_ms);
    out_line("{\"type\":\"tool_execution_end\",\"toolCallId\":\"build\",\"toolName\":\"bash\",\"result\":{},\"isError\":false}");
    let fin = assistant_msg(
        &[text_block("Build done.")],
        &usage,
        "stop",
        None,
        BASE_TS + 2,
    );
    out_line(&ev_msg("message_end", &fin));
    out_line("{\"type\":\"agent_end\",\"messages\":[]}");
}

fn retrying() -> ! {
    let delay = delay_ms(200);
    let error = "503 The server is overloaded or not ready yet.";
    out_line(&session_header());
    out_line("{\"type\":\"agent_start\"}");
    let mut attempt: u64 = 1;
    loop {
        let ts = BASE_TS + attempt;
        out_line(&ev_msg(
            "message_start",
            &assistant_msg(&[], &ZERO_USAGE, "stop", None, ts),
        ));
        out_line(&ev_msg(
            "message_end",
            &assistant_msg(&[], &ZERO_USAGE, "error", Some(error), ts),
        ));
        out_line(&format!(
            "{{\"type\":\"auto_retry_start\",\"attempt\":{attempt},\"maxAttempts\":99,\"delayMs\":{delay},\"errorMessage\":{}}}",
            js(error)
        ));
        write_stderr_line(&format!("retrying in {delay}ms"));
        attempt += 1;
        sleep_ms(delay);
    }
}

fn flood_deltas() -> ! {
    let size = env_num("FAKE_AGENT_DELTA_BYTES", 1000) as usize;
    // Escapes make the parser build each delta rather than borrow it.
    let piece = r#"word \"quoted\"\n "#;
    let delta: String = piece.repeat(size / piece.len() + 1)[..size].to_string();
    let delta = delta.trim_end_matches('\\').to_string();
    out_line(&session_header());
    out_line(&ev_msg(
        "message_start",
        &assistant_msg(&[], &ZERO_USAGE, "stop", None, BASE_TS + 1),
    ));
    let line = format!(
        "{{\"type\":\"message_update\",\"assistantMessageEvent\":{{\"type\":\"text_delta\",\"contentIndex\":0,\"delta\":\"{delta}\"}}}}\n"
    );
    let block = line.repeat((BLOCK / line.len()).max(1));
    loop {
        out_bytes(block.as_bytes());
    }
}

fn flood_tool_args() -> ! {
    let size = env_num("FAKE_AGENT_ARGS_BYTES", 1 << 20) as usize;
    let items = vec!["1"; size / 2].join(",");
    let call = format!(
        "{{\"type\":\"toolCall\",\"id\":\"c1\",\"name\":\"write\",\"arguments\":{{\"path\":\"a\",\"items\":[{items}]}}}}"
    );
    let usage = Usage {
        input: 1,
        ..ZERO_USAGE
    };
    let line = ev_msg(
        "message_end",
        &assistant_msg(&[call], &usage, "toolUse", None, BASE_TS + 1),
    );
    out_line(&session_header());
    loop {
        out_line(&line);
    }
}

fn garbage() {
    let first_usage = Usage {
        input: 100,
        output: 5,
        cache_read: 0,
        cache_write: 0,
        cost: [0.0001, 0.00001, 0.0, 0.0, 0.00011],
    };
    let last_usage = Usage {
        input: 200,
        output: 7,
        cache_read: 50,
        cache_write: 0,
        cost: [0.0002, 0.000014, 0.000005, 0.0, 0.000219],
    };
    let first = assistant_msg(
        &[text_block("first")],
        &first_usage,
        "stop",
        None,
        BASE_TS + 1,
    );
    let last = assistant_msg(
        &[text_block("survived garbage")],
        &last_usage,
        "stop",
        None,
        BASE_TS + 2,
    );
    out_line(&session_header());
    out_line(&ev_msg("message_end", &first));

    // One huge line: {"type":"message_update","pad":"xxxx…"} of exactly N bytes, then \n.
    let total = env_num("FAKE_AGENT_GARBAGE_LINE_BYTES", 20 * 1024 * 1024) as usize;
    let head = b"{\"type\":\"message_update\",\"pad\":\"";
    let tail = b"\"}\n";
    let mut pad = total.saturating_sub(head.len() + tail.len() - 1);
    out_bytes(head);
    let chunk = vec![b'x'; BLOCK];
    while pad > 0 {
        let n = pad.min(BLOCK);
        out_bytes(&chunk[..n]);
        pad -= n;
    }
    out_bytes(tail);

    out_bytes(b"\xff\xfe\xc3\x28 not utf-8 \xa0\xa1 \xed\xa0\x80\xf8\x88\x80\x80\x80\n");
    out_bytes(b"hello world\n");
    out_bytes(b"\n");
    out_bytes(b"[1,2]\n");
    out_line("{\"type\":\"some_future_event\",\"data\":{\"x\":1}}");
    out_line(&ev_msg("message_end", &last));
    out_line(&format!(
        "{{\"type\":\"agent_end\",\"messages\":[{first},{last}]}}"
    ));
}

fn die_by_signal() -> ! {
    let sig = env_num("FAKE_AGENT_SIGNAL", 9) as libc::c_int;
    let usage = Usage {
        input: 300,
        output: 20,
        cache_read: 0,
        cache_write: 0,
        cost: [0.0003, 0.00004, 0.0, 0.0, 0.00034],
    };
    let user = user_msg(&prompt_text(), BASE_TS);
    let ts = BASE_TS + 1;
    let partial = assistant_msg(
        &[text_block("partial answer")],
        &ZERO_USAGE,
        "stop",
        None,
        ts,
    );
    let fin = assistant_msg(&[text_block("partial answer")], &usage, "stop", None, ts);
    out_line(&session_header());
    out_line("{\"type\":\"agent_start\"}");
    out_line("{\"type\":\"turn_start\"}");
    out_line(&ev_msg("message_start", &user));
    out_line(&ev_msg("message_end", &user));
    out_line(&ev_update_old(
        &text_delta_fields("partial answer"),
        &partial,
    ));
    out_line(&ev_msg("message_end", &fin));
    // SAFETY: resetting a handler, unblocking and raising a signal; no core dumps wanted.
    unsafe {
        let rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &rl);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
    }
    thread::sleep(Duration::from_millis(200));
    write_stderr_line(&format!(
        "fake_agent: signal {sig} did not terminate the process"
    ));
    process::exit(70);
}

/// Runs `FAKE_AGENT_NESTED_CMD` with args `FAKE_AGENT_NESTED_ARGS` (split on \x1f), env
/// inherited (plus `FAKE_AGENT_SCENARIO=$FAKE_AGENT_NESTED_SCENARIO` when that is set),
/// stdout captured, stderr inherited. Returns `nested exit=<code> stdout=<trimmed stdout>`.
fn nested() -> String {
    let Some(cmd) = env_os("FAKE_AGENT_NESTED_CMD") else {
        write_stderr_line("fake_agent: nested needs FAKE_AGENT_NESTED_CMD");
        process::exit(64);
    };
    let args: Vec<String> = match env_str("FAKE_AGENT_NESTED_ARGS") {
        Some(a) if !a.is_empty() => a.split('\x1f').map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let mut c = Command::new(&cmd);
    c.args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(s) = env_os("FAKE_AGENT_NESTED_SCENARIO") {
        c.env("FAKE_AGENT_SCENARIO", s);
    }
    let mut child = match c.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            write_stderr_line(&format!(
                "fake_agent: cannot run {}: {e}",
                cmd.to_string_lossy()
            ));
            return "nested exit=127 stdout=".to_string();
        }
    };
    append_pid(child.id());
    let mut captured = Vec::new();
    if let Some(mut so) = child.stdout.take() {
        let _ = so.read_to_end(&mut captured);
    }
    let code = match child.wait() {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            st.code()
                .or_else(|| st.signal().map(|s| 128 + s))
                .unwrap_or(-1)
        }
        Err(_) => -1,
    };
    format!(
        "nested exit={code} stdout={}",
        String::from_utf8_lossy(&captured).trim()
    )
}

/// An ACP agent (JSON-RPC on stdin and stdout), as `FAKE_ACP` says:
/// - `ok` (default): answers initialize and session/new; on the prompt it asks permission
///   for the tool call `FAKE_ACP_TOOL` (`kind:title:path`, default `edit:write x.txt:x.txt`),
///   reports the call completed when allowed or failed when not, says `Done: <optionId or
///   cancelled>`, reports a cost of 0.25 and ends the turn with usage; it exits on end of
///   input.
/// - `garbage`: as `ok`, with lines that are not JSON-RPC first.
/// - `silent-init`: never answers initialize.
/// - `hang`: streams a chunk of text after the prompt, reports a cost of 0.25, thinks, and
///   waits; a session/cancel ends the turn (`cancelled`), and it then waits for end of
///   input or SIGTERM.
/// - `ignore-cancel`: as `hang`, but ignores session/cancel and SIGTERM.
/// - `turns`: answers each prompt N (from 1) with `Answer N: <the prompt's text>` and usage
///   after `FAKE_ACP_TURN_MS` (default 0), reading nothing meanwhile; a prompt whose
///   number is in `FAKE_ACP_HOLD` (comma-separated) streams `Working on N` and waits for
///   session/cancel instead (`cancelled`). It exits on end of input.
///
/// With `FAKE_ACP_WRITES` set, an allowed call writes the file it names (relative to the
/// working directory), so that a test sees whether the tool ran.
fn acp_agent() -> ! {
    use std::io::BufRead;
    let variant = env_str("FAKE_ACP").unwrap_or_else(|| "ok".to_string());
    if variant == "ignore-cancel" {
        // SAFETY: ignoring a signal.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    let out = |line: &str| {
        let mut o = io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    if variant == "garbage" {
        out("this is not json");
        out("{\"jsonrpc\":\"2.0\",\"id\":\"nobody\",\"result\":{}}");
        out("[1,2,3]");
    }
    let session = "fake-session-1";
    let update = |kind_and_fields: &str| {
        out(&format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":\"{session}\",\"update\":{{{kind_and_fields}}}}}}}"
        ))
    };
    let tool = env_str("FAKE_ACP_TOOL").unwrap_or_else(|| "edit:write x.txt:x.txt".to_string());
    let mut parts = tool.splitn(3, ':');
    let (kind, title, path) = (
        parts.next().unwrap_or("edit").to_string(),
        parts.next().unwrap_or("tool").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut prompt_id: Option<String> = None;
    let mut prompts = 0u32;
    let held: Vec<u32> = env_str("FAKE_ACP_HOLD")
        .unwrap_or_default()
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let stdin = io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let method = json_field(&line, "method");
        let id = json_field(&line, "id");
        match (method.as_deref(), id) {
            (Some("initialize"), Some(id)) => {
                if variant == "silent-init" {
                    continue;
                }
                out(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"protocolVersion\":1,\"agentCapabilities\":{{\"loadSession\":false}}}}}}"
                ));
            }
            (Some("session/new"), Some(id)) => out(&format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"sessionId\":\"{session}\"}}}}"
            )),
            (Some("session/prompt"), Some(id)) if variant == "turns" => {
                prompts += 1;
                if held.contains(&prompts) {
                    update(&format!("\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"Working on {prompts}\"}}"));
                    prompt_id = Some(id);
                    continue;
                }
                std::thread::sleep(Duration::from_millis(env_num("FAKE_ACP_TURN_MS", 0)));
                let text = json_field(&line, "text").unwrap_or_default();
                update(&format!("\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"Answer {prompts}: {text}\"}}"));
                out(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"stopReason\":\"end_turn\",\"usage\":{{\"inputTokens\":100,\"outputTokens\":10,\"totalTokens\":110}}}}}}"
                ));
            }
            (Some("session/prompt"), Some(id)) => {
                if variant == "hang" || variant == "ignore-cancel" {
                    update("\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"Working on it\"}");
                    update("\"sessionUpdate\":\"usage_update\",\"used\":1000,\"size\":200000,\"cost\":{\"amount\":0.25,\"currency\":\"USD\"}");
                    update("\"sessionUpdate\":\"agent_thought_chunk\",\"content\":{\"type\":\"text\",\"text\":\"more\"}");
                    prompt_id = Some(id);
                    continue;
                }
                // Ask, then go on once the answer comes (the next line).
                out(&format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":\"perm-1\",\"method\":\"session/request_permission\",\"params\":{{\"sessionId\":\"{session}\",\"toolCall\":{{\"toolCallId\":\"call-1\",\"title\":\"{title}\",\"kind\":\"{kind}\",\"locations\":[{{\"path\":\"{path}\"}}]}},\"options\":[{{\"optionId\":\"yes\",\"name\":\"Allow\",\"kind\":\"allow_once\"}},{{\"optionId\":\"always\",\"name\":\"Always\",\"kind\":\"allow_always\"}},{{\"optionId\":\"no\",\"name\":\"Reject\",\"kind\":\"reject_once\"}}]}}}}"
                ));
                prompt_id = Some(id);
            }
            (None, Some(id)) if id == "perm-1" => {
                let chosen = json_field(&line, "optionId").unwrap_or_else(|| "cancelled".into());
                // The tool really runs when allowed: the file it edits is written.
                if env_str("FAKE_ACP_WRITES").is_some()
                    && (chosen == "yes" || chosen == "always")
                    && !path.is_empty()
                {
                    let _ = std::fs::write(&path, "written by the fake ACP agent\n");
                }
                let status = if chosen == "yes" {
                    "completed"
                } else {
                    "failed"
                };
                update(&format!(
                    "\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"call-1\",\"status\":\"{status}\""
                ));
                update(&format!(
                    "\"sessionUpdate\":\"agent_message_chunk\",\"content\":{{\"type\":\"text\",\"text\":\"Done: {}\"}}",
                    chosen
                ));
                update("\"sessionUpdate\":\"usage_update\",\"used\":1000,\"size\":200000,\"cost\":{\"amount\":0.25,\"currency\":\"USD\"}");
                if let Some(pid) = prompt_id.take() {
                    out(&format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{pid},\"result\":{{\"stopReason\":\"end_turn\",\"usage\":{{\"inputTokens\":120,\"outputTokens\":7,\"totalTokens\":127,\"cachedReadTokens\":30}}}}}}"
                    ));
                }
            }
            (Some("session/cancel"), None) => {
                if variant == "ignore-cancel" {
                    continue;
                }
                if let Some(pid) = prompt_id.take() {
                    out(&format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{pid},\"result\":{{\"stopReason\":\"cancelled\"}}}}"
                    ));
                }
            }
            _ => {}
        }
    }
    if variant == "ignore-cancel" {
        sleep_forever();
    }
    process::exit(0);
}

/// The JSON value of the first `"name":` in `line` (a string without its quotes), for a
/// fake that reads only what it needs.
fn json_field(line: &str, name: &str) -> Option<String> {
    let key = format!("\"{name}\":");
    let at = line.find(&key)? + key.len();
    let rest = line[at..].trim_start();
    if let Some(body) = rest.strip_prefix('"') {
        return Some(body[..body.find('"')?].to_string());
    }
    let end = rest.find([',', '}', ']']).unwrap_or(rest.len());
    Some(rest[..end].to_string())
}

// ---------------------------------------------------------------------------
// A hostile child's shell and probes.

fn shell_script() -> String {
    let script = env_str("FAKE_AGENT_SCRIPT").unwrap_or_default();
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("exec 2>&1\n{script}"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim_end().to_string(),
        Err(e) => format!("cannot run sh: {e}"),
    }
}

fn errno_text() -> String {
    io::Error::last_os_error().kind().to_string()
}

/// `probe tiocsti TEXT`: pushes TEXT into the input of the controlling terminal;
/// `probe connect-unix PATH` and `probe connect-abstract NAME`: connects to a unix socket;
/// `probe setxattr PATH`: sets `user.orchestrate` on PATH; `probe chmod PATH`: makes it
/// setuid and world-writable; `probe fchmod-setuid PATH`: the same through fchmod and
/// fchmodat2; `probe utimes PATH`: sets its times to 2001-09-09;
/// `probe signal PID`: sends it SIGUSR2; `probe ptrace PID`: attaches to it.
fn probe(args: &[String]) -> String {
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let ok_or_err = |rc: libc::c_int| {
        if rc == 0 {
            "ok".to_string()
        } else {
            errno_text()
        }
    };
    // SAFETY: plain system calls on valid pointers.
    unsafe {
        match arg(0).as_str() {
            "tiocsti" => {
                let fd = libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
                if fd < 0 {
                    return format!("tiocsti: open /dev/tty: {}", errno_text());
                }
                for b in arg(1).bytes() {
                    if libc::ioctl(fd, libc::TIOCSTI, &b as *const u8) != 0 {
                        return format!("tiocsti: {}", errno_text());
                    }
                }
                "tiocsti: ok".to_string()
            }
            kind @ ("connect-unix" | "connect-abstract") => {
                let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if s < 0 {
                    return format!("{kind}: socket: {}", errno_text());
                }
                let mut addr: libc::sockaddr_un = std::mem::zeroed();
                addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
                let name = arg(1);
                let start = usize::from(kind == "connect-abstract");
                for (i, b) in name.bytes().enumerate().take(100) {
                    addr.sun_path[start + i] = b as libc::c_char;
                }
                let len = std::mem::size_of::<libc::sa_family_t>() + start + name.len();
                let rc = libc::connect(
                    s,
                    &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                    len as libc::socklen_t,
                );
                format!("{kind}: {}", ok_or_err(rc))
            }
            "setxattr" => {
                let rc = libc::setxattr(
                    c(&arg(1)).as_ptr(),
                    c"user.orchestrate".as_ptr(),
                    b"x".as_ptr().cast(),
                    1,
                    0,
                );
                format!("setxattr: {}", ok_or_err(rc))
            }
            "chmod" => format!(
                "chmod: {}",
                ok_or_err(libc::chmod(c(&arg(1)).as_ptr(), 0o4777))
            ),
            "fchmod-setuid" => {
                // The calls `chmod` does not make: fchmod on a descriptor, and fchmodat2
                // (Linux 6.6) by number.
                let fd = libc::open(c(&arg(1)).as_ptr(), libc::O_RDONLY);
                if fd < 0 {
                    return format!("fchmod-setuid: open: {}", errno_text());
                }
                if libc::fchmod(fd, 0o4755) == 0 {
                    return "fchmod-setuid: ok by fchmod".to_string();
                }
                const SYS_FCHMODAT2: libc::c_long = 452;
                let rc = libc::syscall(
                    SYS_FCHMODAT2,
                    libc::AT_FDCWD,
                    c(&arg(1)).as_ptr(),
                    0o2755 as libc::c_uint,
                    0,
                );
                if rc == 0 {
                    return "fchmod-setuid: ok by fchmodat2".to_string();
                }
                "fchmod-setuid: denied".to_string()
            }
            "utimes" => {
                let t = [
                    libc::timespec {
                        tv_sec: 1_000_000_000,
                        tv_nsec: 0,
                    },
                    libc::timespec {
                        tv_sec: 1_000_000_000,
                        tv_nsec: 0,
                    },
                ];
                let rc = libc::utimensat(libc::AT_FDCWD, c(&arg(1)).as_ptr(), t.as_ptr(), 0);
                format!("utimes: {}", ok_or_err(rc))
            }
            "signal" => {
                let pid: libc::pid_t = arg(1).parse().unwrap_or(0);
                format!("signal: {}", ok_or_err(libc::kill(pid, libc::SIGUSR2)))
            }
            "ptrace" => {
                let pid: libc::pid_t = arg(1).parse().unwrap_or(0);
                let rc = libc::ptrace(libc::PTRACE_ATTACH, pid, 0, 0);
                format!("ptrace: {}", ok_or_err(rc as libc::c_int))
            }
            other => format!("unknown probe {other:?}"),
        }
    }
}
