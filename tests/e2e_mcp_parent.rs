//! End to end with a real parent: the real Claude Code (`claude -p … --mcp-config …
//! --strict-mcp-config --allowedTools mcp__orchestrate__subagent`) is the MCP client of
//! `orchestrate mcp`, which claude starts itself from the MCP config, and the mock LLM
//! plays claude's model. As a real model must with claude's default settings (MCP tools
//! are deferred: named in a `<system-reminder>`, schema not loaded), the model loads the
//! tool with `ToolSearch`, calls `mcp__orchestrate__subagent` with
//! `{"agent": "fake", "task": "find auth"}`, and, once the request carries that result,
//! answers with text quoting it ([`Reply::quote_tool_result`]). orchestrate runs the
//! subagent with the fake child standing in for pi (replaying
//! `tests/fixtures/pi/multi_turn.jsonl`), so claude's final answer holds the subagent's
//! words only if they really went child → orchestrate → claude → model → claude. A
//! second case does the same with the real pi as the child, on a mock of its own.
//!
//! claude comes from `ORCHESTRATE_CONTRACT_CLAUDE` (and pi from `ORCHESTRATE_CONTRACT_PI`),
//! set by `scripts/install-agent-clis`' env.sh. This binary has its own `main` (the
//! contract tests' harness, libtest-mimic): without those variables each test is reported
//! `ignored` with the reason, unless `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure.
//! claude runs offline with the settings of `tests/mock_llm/contract/clis/claude.rs`.
//! Two more tests run MCP Inspector's CLI against `orchestrate mcp`: its strict schema
//! check, and a call. `parent_bench` adds the benchmark of what the parent pays
//! (`scripts/bench-context`), which runs only on request. claude hands its whole environment to the MCP
//! servers it starts, plus the config's `env`; the config's `env` adds
//! `ORCHESTRATE_E2E_MCP_SERVER=<sandbox root>`, so the server (and the child it starts)
//! can be told apart in `/proc` from claude's own processes, which carry only the
//! sandbox marker.
//!
//! For investigation: `--nocapture` prints what the model was sent, claude's stream-json
//! and the MCP lines of its debug log (`--debug-file`); `ORCHESTRATE_CONTRACT_KEEP=1`
//! keeps the sandbox (`claude-debug.log`, `mcp.json`, orchestrate's run folders);
//! `ORCHESTRATE_E2E_MCP_TAP=1` puts the server behind `tee` and prints the JSON-RPC lines
//! both ways (docs/mcp-transcripts.md was made with it).
//!
//! ```text
//! . ~/.cache/orchestrate-clis/env.sh
//! cargo build --examples
//! cargo test --test e2e_mcp_parent -- --nocapture
//! ```

mod mock_llm;
mod parent_bench;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mock_llm::contract::clis::claude::CLAUDE;
use mock_llm::contract::harness::{self, Needing};
use mock_llm::contract::{self, Finished, Sandbox};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const WALL_CLOCK: Duration = Duration::from_secs(120);
/// A model id in claude's price table.
const MODEL: &str = CLAUDE.model;
const NEEDS_CLAUDE: &[(&str, &str)] = &[(CLAUDE.var, "claude")];
const NEEDS_CODEX: &[(&str, &str)] = &[(mock_llm::contract::clis::codex::CODEX.var, "codex")];
const NEEDS_CLAUDE_AND_PI: &[(&str, &str)] =
    &[(CLAUDE.var, "claude"), ("ORCHESTRATE_CONTRACT_PI", "pi")];

fn main() {
    let mut tests = vec![
        Needing {
            name: "claude_calls_orchestrate_mcp_which_runs_the_fake_child".into(),
            clis: NEEDS_CLAUDE,
            run: Box::new(claude_calls_orchestrate_mcp_which_runs_the_fake_child),
            on_request: false,
        },
        Needing {
            name: "claude_calls_orchestrate_mcp_which_runs_the_real_pi".into(),
            clis: NEEDS_CLAUDE_AND_PI,
            run: Box::new(claude_calls_orchestrate_mcp_which_runs_the_real_pi),
            on_request: false,
        },
        Needing {
            name: "claude_starts_a_background_subagent_messages_it_and_waits".into(),
            clis: NEEDS_CLAUDE,
            run: Box::new(claude_starts_a_background_subagent_messages_it_and_waits),
            on_request: false,
        },
        Needing {
            name: "claude_messages_a_background_real_pi_whose_model_sees_it".into(),
            clis: NEEDS_CLAUDE_AND_PI,
            run: Box::new(claude_messages_a_background_real_pi_whose_model_sees_it),
            on_request: false,
        },
        Needing {
            name: "codex_starts_a_background_subagent_messages_it_and_waits".into(),
            clis: NEEDS_CODEX,
            run: Box::new(codex_starts_a_background_subagent_messages_it_and_waits),
            on_request: false,
        },
        Needing {
            name: "claude_is_asked_for_a_childs_permission".into(),
            clis: NEEDS_CLAUDE,
            run: Box::new(claude_is_asked_for_a_childs_permission),
            on_request: false,
        },
    ];
    tests.extend([
        Needing {
            name: "mcp_inspector_strict_accepts_the_tool_definitions".into(),
            clis: NEEDS_INSPECTOR,
            run: Box::new(mcp_inspector_strict_accepts_the_tool_definitions),
            on_request: false,
        },
        Needing {
            name: "mcp_inspector_calls_subagent".into(),
            clis: NEEDS_INSPECTOR,
            run: Box::new(mcp_inspector_calls_subagent),
            on_request: false,
        },
    ]);
    tests.extend(parent_bench::benchmarks());
    harness::main_needing(tests);
}

/// MCP Inspector's CLI (`@modelcontextprotocol/inspector`, pinned by
/// `scripts/install-agent-clis`): a client written by others, with a strict schema check.
const NEEDS_INSPECTOR: &[(&str, &str)] = &[("ORCHESTRATE_CONTRACT_INSPECTOR", "inspector")];

/// `mcp-inspector --cli ARGS… <orchestrate> mcp --agents-dir <agents>`, over the fake
/// child, bounded.
fn inspector(bin: &Path, sb: &support::Sandbox, args: &[&str]) -> Finished {
    let agents = sb.agents.to_str().unwrap();
    let orchestrate = env!("CARGO_BIN_EXE_orchestrate");
    let env = [
        format!("ORCHESTRATE_PI_BIN={}", support::fake_agent_bin().display()),
        format!("ORCHESTRATE_STATE_DIR={}", sb.state.display()),
        "FAKE_AGENT_SCENARIO=replay".to_string(),
        format!("FAKE_AGENT_PIDFILE={}", sb.pidfile.display()),
    ];
    let mut all: Vec<&str> = vec!["--cli"];
    all.extend_from_slice(args);
    for e in &env {
        all.extend_from_slice(&["-e", e]);
    }
    all.extend_from_slice(&[orchestrate, "mcp", "--agents-dir", agents]);
    let mut cmd = std::process::Command::new(bin);
    cmd.args(&all)
        .env("HOME", &sb.home)
        .env("NO_COLOR", "1")
        .current_dir(&sb.work)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let start = Instant::now();
    contract::wait_bounded(cmd.spawn().expect("spawn mcp-inspector"), start, WALL_CLOCK)
}

fn mcp_inspector_strict_accepts_the_tool_definitions(bin: &Path) {
    let sb = support::Sandbox::new();
    let out = inspector(bin, &sb, &["--strict", "--method", "tools/list"]);
    // Exit 6 and a report on stderr for any problem; warnings are reported too.
    assert_eq!((out.status, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    let listed: Value = serde_json::from_str(&out.stdout).expect("the tool list as JSON");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_agents", "send", "stop", "subagent", "wait"]);
}

fn mcp_inspector_calls_subagent(bin: &Path) {
    let sb = support::Sandbox::new();
    let out = inspector(
        bin,
        &sb,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "subagent",
            "--tool-arg",
            "agent=fake",
            "--tool-arg",
            "task=find auth",
        ],
    );
    assert_eq!(out.status, 0, "{}\n{}", out.stdout, out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).expect("the call's result as JSON");
    assert_eq!(result["isError"], json!(false), "{result}");
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": "Hello from pi."}])
    );
    let details = &result["structuredContent"];
    assert_eq!(details["mode"], json!("single"), "{result}");
    assert_eq!(details["results"][0]["output"], json!("Hello from pi."));
    assert_eq!(details["results"][0].get("displayItems"), None);
    sb.assert_no_survivors();
}
/// How claude names orchestrate's tools: `mcp__<server>__<tool>`.
const SUBAGENT_TOOL: &str = "mcp__orchestrate__subagent";
const LIST_AGENTS_TOOL: &str = "mcp__orchestrate__list_agents";
/// The subagent's final answer in `multi_turn.jsonl` (after "## Answer\n").
const ANSWER: &str = "Auth lives in src/auth.rs (fn login at line 42).";
/// What the mock's final text starts with; the tool result follows.
const QUOTE: &str = "The subagent reports: ";
const PROMPT: &str = "Ask the fake subagent where authentication lives, then tell me.";
/// Set in the MCP server's `env` only (value: the sandbox root).
const SERVER_MARKER_VAR: &str = "ORCHESTRATE_E2E_MCP_SERVER";

/// A sandbox whose claude (at `bin`) talks only to `mock` (the proxy variables point at it
/// too, so any other traffic shows up there as a `CONNECT`), offline as in the contract
/// tests.
fn claude_sandbox(bin: &Path, mock: &MockLlm) -> Sandbox {
    let mut sb = Sandbox::with_bin(bin.to_path_buf(), "claude", MODEL);
    sb.catch_outbound(mock);
    (CLAUDE.configure)(&mut sb, mock);
    sb
}

/// What claude's model does, as a real model must with claude's default settings, where
/// MCP tools are deferred (listed by name in a `<system-reminder>`, schema not loaded):
/// load the subagent tool's schema with `ToolSearch`, call it with `args`, then answer
/// quoting its result.
fn parent_script(args: &Value, usage: MockUsage) -> Script {
    Script::sequence(vec![
        Reply::tool(
            "ToolSearch",
            json!({"query": format!("select:{SUBAGENT_TOOL}")}),
            usage,
        ),
        Reply::tool(SUBAGENT_TOOL, args.clone(), usage),
        Reply::quote_tool_result(QUOTE, usage),
    ])
}

/// `<root>/mcp.json`: one stdio server, `orchestrate mcp --agents-dir <agents>`, with
/// `env` (plus the server marker and the sandbox's state dir).
fn write_mcp_config(sb: &Sandbox, env: &[(&str, String)]) -> PathBuf {
    write_mcp_config_for(Path::new(env!("CARGO_BIN_EXE_orchestrate")), sb, env)
}

/// [`write_mcp_config`] for the orchestrate at `orchestrate`.
fn write_mcp_config_for(orchestrate: &Path, sb: &Sandbox, env: &[(&str, String)]) -> PathBuf {
    let mut server_env = serde_json::Map::new();
    server_env.insert(
        SERVER_MARKER_VAR.into(),
        json!(sb.root.path().to_str().unwrap()),
    );
    server_env.insert(
        "ORCHESTRATE_STATE_DIR".into(),
        json!(sb.state.to_str().unwrap()),
    );
    for (k, v) in env {
        server_env.insert(k.to_string(), json!(v));
    }
    let orchestrate = orchestrate.to_str().unwrap();
    let agents = sb.agents.to_str().unwrap();
    let (command, args) = if std::env::var("ORCHESTRATE_E2E_MCP_TAP").as_deref() == Ok("1") {
        // For transcripts: the same server behind `tee`, which copies what claude sends
        // to <root>/mcp-in.jsonl and what orchestrate answers to <root>/mcp-out.jsonl.
        // (claude's SIGINT at exit then reaches sh, and orchestrate stops on stdin EOF.)
        let root = sb.root.path().display();
        let script =
            format!("tee '{root}/mcp-in.jsonl' | \"$0\" \"$@\" | tee '{root}/mcp-out.jsonl'");
        (
            "/bin/sh".to_string(),
            json!(["-c", script, orchestrate, "mcp", "--agents-dir", agents]),
        )
    } else {
        (
            orchestrate.to_string(),
            json!(["mcp", "--agents-dir", agents]),
        )
    };
    let config = json!({"mcpServers": {"orchestrate": {
        "type": "stdio",
        "command": command,
        "args": args,
        "env": server_env,
    }}});
    let path = sb.root.path().join("mcp.json");
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    path
}

/// The lines of `<root>/<name>` when the MCP traffic was tapped (`ORCHESTRATE_E2E_MCP_TAP=1`).
fn tapped(sb: &Sandbox, name: &str) -> Vec<String> {
    std::fs::read_to_string(sb.root.path().join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// One claude run and what was seen of its processes meanwhile.
struct ParentRun {
    out: Finished,
    /// stdout's stream-json lines.
    lines: Vec<Value>,
    /// Every process seen with the sandbox marker while claude ran: pid → command line.
    tree: BTreeMap<i32, String>,
    /// Those that also carried the server marker: `orchestrate mcp` and its children.
    server_side: BTreeMap<i32, String>,
    debug_log: PathBuf,
}

impl ParentRun {
    fn result_line(&self) -> &Value {
        let last = self.lines.last().expect("claude printed stream-json lines");
        assert_eq!(last["type"], json!("result"), "the last line: {last}");
        last
    }

    /// The `system`/`init` line.
    fn init(&self) -> &Value {
        self.lines
            .iter()
            .find(|l| l["type"] == "system" && l["subtype"] == "init")
            .expect("an init line")
    }

    /// Content blocks of the stream-json `assistant`/`user` lines, with their line type.
    fn blocks(&self, ty: &str) -> Vec<Value> {
        self.lines
            .iter()
            .filter(|l| l["type"] == ty)
            .flat_map(|l| {
                l["message"]["content"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }

    /// claude's debug log lines about MCP (connection, calls, errors).
    fn mcp_debug_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.debug_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("MCP server \"orchestrate\""))
            .map(str::to_string)
            .collect()
    }
}

/// `claude -p PROMPT --output-format stream-json --verbose --mcp-config CONFIG
/// --strict-mcp-config --allowedTools mcp__orchestrate__subagent`, bounded by
/// [`WALL_CLOCK`], recording the processes of its tree (sandbox marker) every 10 ms while
/// it runs. Then waits (at most 10 s) until no process with the sandbox marker is left,
/// and fails naming any survivor.
fn run_parent(sb: &Sandbox, config: &Path) -> ParentRun {
    run_parent_with(sb, config, PROMPT, &[SUBAGENT_TOOL])
}

/// [`run_parent`] with this prompt, allowing these tools.
fn run_parent_with(sb: &Sandbox, config: &Path, prompt: &str, allowed: &[&str]) -> ParentRun {
    let debug_log = sb.root.path().join("claude-debug.log");
    let allowed = allowed.join(",");
    let args = [
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        config.to_str().unwrap(),
        "--strict-mcp-config",
        "--allowedTools",
        &allowed,
        "--model",
        MODEL,
        "--debug-file",
        debug_log.to_str().unwrap(),
    ];
    let marker = sb.marker();
    let server_marker = format!("{SERVER_MARKER_VAR}={}", sb.root.path().display());
    let tree = Arc::new(Mutex::new(BTreeMap::new()));
    let server_side = Arc::new(Mutex::new(BTreeMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = std::thread::spawn({
        let (tree, server_side, stop) = (tree.clone(), server_side.clone(), stop.clone());
        let (marker, server_marker) = (marker.clone(), server_marker.clone());
        move || {
            while !stop.load(Ordering::SeqCst) {
                // A process read while it starts or exits has an empty command line:
                // keep the first non-empty one.
                let note = |map: &Mutex<BTreeMap<i32, String>>, pid: i32, cmd: &str| {
                    let mut map = map.lock().unwrap();
                    let entry = map.entry(pid).or_default();
                    if entry.is_empty() {
                        *entry = cmd.to_string();
                    }
                };
                for pid in contract::pids_with_env(&[&marker]) {
                    note(&tree, pid, &contract::cmdline(pid));
                }
                for pid in contract::pids_with_env(&[&marker, &server_marker]) {
                    let cmd = contract::cmdline(pid);
                    note(&tree, pid, &cmd);
                    note(&server_side, pid, &cmd);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    });
    let start = Instant::now();
    let child = sb.program(&sb.bin, &args).spawn().expect("spawn claude");
    let out = contract::wait_bounded(child, start, WALL_CLOCK);
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();

    // claude stops its MCP servers as it exits (SIGINT); orchestrate stops its children
    // before it exits. Nothing of the tree may outlive claude by more than a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let survivors = loop {
        let left = contract::pids_with_env(&[&marker]);
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let described: Vec<(i32, String)> = survivors
        .iter()
        .map(|p| (*p, contract::cmdline(*p)))
        .collect();
    let tree = tree.lock().unwrap().clone();
    assert_eq!(
        described,
        [],
        "processes of claude's tree outlived it by 10 s (tree seen while it ran: {tree:?})"
    );
    let lines = out
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stream-json ({e}): {l}")))
        .collect();
    let server_side = server_side.lock().unwrap().clone();
    ParentRun {
        out,
        lines,
        tree,
        server_side,
        debug_log,
    }
}

fn cut(s: &str, max: usize) -> String {
    let c: String = s.chars().take(max).collect();
    if c.len() < s.len() {
        format!("{c} …")
    } else {
        c
    }
}

/// Prints what the model was asked (per request: the offered orchestrate tools and each
/// message's blocks), claude's stream-json lines and MCP debug lines, the processes seen,
/// and claude's stderr (shown with `--nocapture`, and on failure).
fn report(case: &str, sb: &Sandbox, mock: &MockLlm, run: &ParentRun) {
    use std::fmt::Write;
    let mut out = String::new();
    // Kept with the test (shown on failure, or with --nocapture / --show-output).
    macro_rules! eprintln {
        ($($arg:tt)*) => {{ let _ = writeln!(out, $($arg)*); }};
    }
    eprintln!("=== {case}: requests to claude's mock");
    for r in mock.requests() {
        eprintln!("  {} {} side={} -> {}", r.method, r.path, r.side, r.served);
        let tools: Vec<&str> = r.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        if !tools.is_empty() {
            eprintln!("    tools offered: {tools:?}");
        }
        for m in r.body["messages"].as_array().into_iter().flatten() {
            let blocks = m["content"].as_array().cloned().unwrap_or_default();
            // claude's own context (environment, skills, date, …) comes as
            // <system-reminder> text blocks: counted, not shown.
            let reminder = |b: &Value| {
                b["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("<system-reminder>"))
            };
            let reminders = blocks.iter().filter(|b| reminder(b)).count();
            if reminders > 0 {
                eprintln!(
                    "    {}: ({reminders} <system-reminder> blocks)",
                    m["role"].as_str().unwrap_or("?")
                );
            }
            for b in blocks.iter().filter(|b| !reminder(b)) {
                let shown = match b["type"].as_str() {
                    Some("text") => format!("text {:?}", b["text"].as_str().unwrap_or("")),
                    _ => b.to_string(),
                };
                eprintln!(
                    "    {}: {}",
                    m["role"].as_str().unwrap_or("?"),
                    cut(&shown, 400)
                );
            }
        }
    }
    eprintln!(
        "=== {case}: claude stream-json (exit {}, {:?})",
        run.out.status, run.out.elapsed
    );
    for l in &run.lines {
        eprintln!("  {}", cut(&l.to_string(), 400));
    }
    if let Some(r) = run.lines.last().filter(|l| l["type"] == "result") {
        let brief = json!({
            "type": r["type"], "subtype": r["subtype"], "is_error": r["is_error"],
            "num_turns": r["num_turns"], "duration_ms": r["duration_ms"],
            "total_cost_usd": r["total_cost_usd"], "result": r["result"],
        });
        eprintln!(
            "=== {case}: claude's result line, main fields\n  {}",
            cut(&brief.to_string(), 1500)
        );
    }
    eprintln!("=== {case}: claude's debug log, MCP lines");
    for l in run.mcp_debug_lines() {
        eprintln!("  {}", cut(&l, 300));
    }
    eprintln!(
        "=== {case}: processes seen while claude ran (server side: {:?})",
        run.server_side.keys().collect::<Vec<_>>()
    );
    for (pid, cmd) in &run.tree {
        eprintln!("  {pid} {}", cut(cmd, 200));
    }
    for (name, dir) in [
        ("mcp-in.jsonl", "claude -> orchestrate"),
        ("mcp-out.jsonl", "orchestrate -> claude"),
    ] {
        let lines = tapped(sb, name);
        if !lines.is_empty() {
            eprintln!("=== {case}: MCP {dir} ({name})");
            for l in lines {
                eprintln!("  {}", cut(&l, 600));
            }
        }
    }
    let stderr: Vec<&str> = run.out.stderr.lines().collect();
    eprintln!("=== {case}: claude stderr ({} lines, tail)", stderr.len());
    for l in &stderr[stderr.len().saturating_sub(10)..] {
        eprintln!("  {}", cut(l, 300));
    }
    harness::note(out.trim_end());
}

/// The MCP client is claude, and it is connected to orchestrate: the init line lists the
/// server as connected and its tools.
fn assert_connected(run: &ParentRun) {
    let init = run.init();
    let servers: Vec<(&Value, &Value)> = init["mcp_servers"]
        .as_array()
        .expect("mcp_servers")
        .iter()
        .map(|s| (&s["name"], &s["status"]))
        .collect();
    assert_eq!(
        servers,
        [(&json!("orchestrate"), &json!("connected"))],
        "{init}"
    );
    let tools: Vec<&str> = init["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|t| t.starts_with("mcp__"))
        .collect();
    assert_eq!(
        tools,
        [
            LIST_AGENTS_TOOL,
            "mcp__orchestrate__send",
            "mcp__orchestrate__stop",
            SUBAGENT_TOOL,
            "mcp__orchestrate__wait"
        ],
        "{init}"
    );
}

/// Checks claude's side of the exchange ([`parent_script`]) and returns the run id
/// orchestrate reported. `args`: what the model asked for; `answer`: what the subagent
/// answered.
fn assert_parent_exchange(mock: &MockLlm, run: &ParentRun, args: &Value, answer: &str) -> String {
    assert_eq!(run.out.status, 0, "claude failed: {}", run.out.stderr);
    assert_connected(run);
    // orchestrate's schemas use only standard formats: claude's validator has nothing to
    // warn about (it logged `unknown format "uint64" ignored in schema` for schemars').
    let debug_log = std::fs::read_to_string(&run.debug_log).unwrap_or_default();
    for (name, text) in [("stderr", &run.out.stderr), ("debug log", &debug_log)] {
        let warned: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("unknown format"))
            .collect();
        assert_eq!(warned, Vec::<&str>::new(), "claude's {name}");
    }

    // The model's calls, as claude ran them, and the results claude got back.
    let calls: Vec<Value> = run
        .blocks("assistant")
        .into_iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    let names: Vec<&str> = calls.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["ToolSearch", SUBAGENT_TOOL], "{calls:?}");
    assert_eq!(&calls[1]["input"], args);
    let results: Vec<Value> = run
        .blocks("user")
        .into_iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(
        results[0]["content"],
        json!([{"type": "tool_reference", "tool_name": SUBAGENT_TOOL}]),
        "ToolSearch loaded the subagent tool"
    );
    assert_eq!(results[1]["tool_use_id"], calls[1]["id"]);
    assert_ne!(results[1]["is_error"], json!(true), "{results:?}");
    let user_line = run
        .lines
        .iter()
        .filter(|l| l["type"] == "user")
        .nth(1)
        .expect("the subagent's result line");
    // claude keeps the server's structuredContent (orchestrate's details) beside it.
    let details = &user_line["tool_use_result"]["structuredContent"];
    assert_eq!(details["mode"], json!("single"), "{user_line}");
    assert_eq!(details["results"][0]["exitCode"], json!(0), "{user_line}");
    let run_id = details["runId"].as_str().expect("runId").to_string();

    // What the model was sent. Nothing else left claude (no CONNECT through the proxy
    // variables, no other path).
    let reqs = mock.requests();
    assert_eq!(
        reqs.len(),
        3,
        "no other traffic: {:#?}",
        reqs.iter()
            .map(|r| (&r.method, &r.path, &r.served))
            .collect::<Vec<_>>()
    );
    for r in &reqs {
        assert_eq!(r.api, Some(Api::Anthropic));
        assert_eq!(r.path, "/v1/messages?beta=true");
        assert_eq!(r.body["model"], json!(MODEL));
    }
    let tool = |r: &mock_llm::RecordedRequest| {
        r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == SUBAGENT_TOOL)
            .cloned()
    };
    // 1. orchestrate's tools are deferred: named in a <system-reminder>, no schema yet.
    assert_eq!(tool(&reqs[0]), None);
    let first = reqs[0].body["messages"].to_string();
    assert!(
        first.contains("deferred tools") && first.contains(SUBAGENT_TOOL),
        "the subagent tool is listed as deferred"
    );
    assert!(mock_llm::tool_result_texts(&reqs[0].body).is_empty());
    // 2. After ToolSearch, its schema (orchestrate's input schema) is loaded.
    let loaded = tool(&reqs[1]).expect("the subagent tool is offered after ToolSearch");
    let props = &loaded["input_schema"]["properties"];
    assert!(
        props.get("agent").is_some() && props.get("task").is_some(),
        "{loaded}"
    );
    // 3. The subagent's result, holding its answer.
    let seen = mock_llm::tool_result_texts(&reqs[2].body);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[1].contains(answer),
        "the model got the subagent's answer: {seen:?}"
    );

    // claude's final answer is the mock's quote of that tool result.
    let result = run.result_line();
    assert_eq!(result["subtype"], json!("success"), "{result}");
    assert_eq!(result["is_error"], json!(false), "{result}");
    assert_eq!(result["num_turns"], json!(3), "{result}");
    let text = result["result"].as_str().expect("result text");
    assert_eq!(text, format!("{QUOTE}{}", seen[1]));
    assert!(text.contains(answer), "{text}");
    run_id
}

/// orchestrate recorded exactly that run: its folder, with result.json whose output is
/// the answer.
fn assert_run_folder(sb: &Sandbox, run_id: &str, agent: &str, output: &str) -> Value {
    assert_eq!(contract::run_ids(&sb.state), [run_id], "one run folder");
    let folder = sb.state.join("runs").join(run_id);
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(folder.join("result.json")).expect("result.json"),
    )
    .expect("result.json is JSON");
    let r = &result["details"]["results"][0];
    assert_eq!(r["agent"], json!(agent), "{result}");
    assert_eq!(r["task"], json!("find auth"), "{result}");
    assert_eq!(r["exitCode"], json!(0), "{result}");
    assert_eq!(r["output"], json!(output), "{result}");
    assert_eq!(result["details"]["runId"], json!(run_id));
    assert!(folder.join("session.jsonl").is_file());
    result
}

/// The MCP server claude started was orchestrate, and it carried the server marker.
fn assert_server_seen(run: &ParentRun) {
    let orchestrate = env!("CARGO_BIN_EXE_orchestrate");
    assert!(
        run.server_side
            .values()
            .any(|c| c.starts_with(&format!("{orchestrate} mcp --agents-dir"))),
        "claude started `orchestrate mcp` with the config's env: {:?}",
        run.server_side
    );
}

/// claude's debug log names a problem on the MCP connection: printed, not failed on (see
/// docs/mcp-transcripts.md: orchestrate can send a progress notification after the
/// response when the child finishes quickly, and claude logs that as a connection error).
fn note_connection_errors(run: &ParentRun) {
    for l in run.mcp_debug_lines() {
        if l.contains("Connection error") || l.contains("connection dropped") {
            harness::note(&format!("NOTE: claude logged: {}", cut(&l, 300)));
        }
    }
}

fn claude_calls_orchestrate_mcp_which_runs_the_fake_child(claude: &Path) {
    let args = json!({"agent": "fake", "task": "find auth"});
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let mock = MockLlm::start(parent_script(&args, usage));
    let sb = claude_sandbox(claude, &mock);
    std::fs::write(sb.agents.join("fake.md"), support::TEST_AGENT).unwrap();
    let pidfile = sb.root.path().join("fake-pids");
    let fake = support::fake_agent_bin();
    let transcript = support::fixture("multi_turn.jsonl");
    let config = write_mcp_config(
        &sb,
        &[
            ("ORCHESTRATE_PI_BIN", fake.to_str().unwrap().to_string()),
            ("FAKE_AGENT_SCENARIO", "replay".into()),
            ("FAKE_AGENT_TRANSCRIPT", transcript.to_str().unwrap().into()),
            ("FAKE_AGENT_PIDFILE", pidfile.to_str().unwrap().into()),
            ("FAKE_AGENT_FOREVER_MS", "60000".into()),
            // The fake child writes its pid beside the sandbox, outside its working
            // directory: only with orchestrate's own sandbox off.
            ("ORCHESTRATE_SANDBOX", "off".into()),
        ],
    );

    let run = run_parent(&sb, &config);
    report("fake child", &sb, &mock, &run);
    note_connection_errors(&run);

    let run_id = assert_parent_exchange(&mock, &run, &args, ANSWER);
    let result = assert_run_folder(&sb, &run_id, "fake", &format!("## Answer\n{ANSWER}"));
    assert_eq!(result["details"]["results"][0]["backend"], json!("pi"));
    assert_server_seen(&run);

    // The fake child ran (once). It is gone like everything else of claude's tree, which
    // run_parent checks by environment: the pid it recorded is its own PID namespace's.
    let pids: Vec<i32> = std::fs::read_to_string(&pidfile)
        .expect("the fake child ran")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 1, "{pids:?}");
}

/// The pi contract setup (tests/contract_pi.rs): its own agent dir with a `mock` provider
/// at `pi_mock`, retries off.
fn pi_agent_dir(root: &Path, pi_mock: &MockLlm) -> PathBuf {
    let dir = root.join("pi-agent");
    std::fs::create_dir_all(&dir).unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", pi_mock.base_url()),
        "api": "openai-completions",
        "apiKey": "test-key",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false, "maxTokensField": "max_tokens"},
        "models": [{"id": "mock-1", "reasoning": false, "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0}}]
    }}});
    std::fs::write(dir.join("models.json"), models.to_string()).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        json!({"retry": {"enabled": false}}).to_string(),
    )
    .unwrap();
    dir
}

const PI_AGENT: &str = "---\nname: pimock\ndescription: Finds things in the code.\ntools: read, bash\nbackend: pi\nmodel: mock/mock-1\n---\nYou are terse.\n";

fn claude_calls_orchestrate_mcp_which_runs_the_real_pi(claude: &Path) {
    let pi = contract::cli_binary("ORCHESTRATE_CONTRACT_PI", "pi")
        .expect("the harness runs this only with pi installed");
    let args = json!({"agent": "pimock", "task": "find auth"});
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let mock = MockLlm::start(parent_script(&args, usage));
    // pi's own model: a bash call, then the answer.
    let pi_mock = MockLlm::start(Script::tool_then_text(
        Reply::tool(
            "bash",
            json!({"command": "echo login-is-at-src/auth.rs:42"}),
            usage,
        ),
        Reply::text(ANSWER, usage),
    ));
    let sb = claude_sandbox(claude, &mock);
    std::fs::write(sb.agents.join("pimock.md"), PI_AGENT).unwrap();
    let agent_dir = pi_agent_dir(sb.root.path(), &pi_mock);
    let config = write_mcp_config(
        &sb,
        &[
            ("ORCHESTRATE_PI_BIN", pi.to_str().unwrap().to_string()),
            ("PI_CODING_AGENT_DIR", agent_dir.to_str().unwrap().into()),
            ("PI_OFFLINE", "1".into()),
            ("PI_SKIP_VERSION_CHECK", "1".into()),
            ("PI_TELEMETRY", "0".into()),
        ],
    );

    let run = run_parent(&sb, &config);
    report("real pi", &sb, &mock, &run);
    let pi_requests: Vec<String> = pi_mock
        .requests()
        .iter()
        .map(|r| format!("  {} {} side={} -> {}", r.method, r.path, r.side, r.served))
        .collect();
    harness::note(&format!(
        "=== real pi: requests to pi's mock\n{}",
        pi_requests.join("\n")
    ));
    note_connection_errors(&run);

    let run_id = assert_parent_exchange(&mock, &run, &args, ANSWER);
    let result = assert_run_folder(&sb, &run_id, "pimock", ANSWER);
    let r = &result["details"]["results"][0];
    assert_eq!(r["backend"], json!("pi"));
    assert_eq!(r["model"], json!("mock/mock-1"));
    assert_eq!(r["usage"]["turns"], json!(2), "{r}");
    assert_server_seen(&run);

    // pi really ran the bash tool, and its model got the output.
    let pi_reqs = pi_mock.conversation();
    assert_eq!(pi_reqs.len(), 2, "{pi_reqs:#?}");
    assert_eq!(pi_reqs[0].api, Some(Api::OpenAiChat));
    let bash = mock_llm::tool_result_texts(&pi_reqs[1].body);
    assert!(
        bash.iter()
            .any(|t| t.contains("login-is-at-src/auth.rs:42")),
        "{bash:?}"
    );
    // pi's processes were on the server side of claude's tree, and are gone.
    let pi_side: Vec<&String> = run
        .server_side
        .values()
        .filter(|c| !c.starts_with(env!("CARGO_BIN_EXE_orchestrate")))
        .collect();
    assert!(
        !pi_side.is_empty(),
        "pi ran under orchestrate: {:?}",
        run.server_side
    );
}

const SEND_TOOL: &str = "mcp__orchestrate__send";
const WAIT_TOOL: &str = "mcp__orchestrate__wait";
/// The message the parent sends its background subagent, and the answers the subagent
/// gives without it and with it.
const STEER: &str = "look for the blue file instead";
const FIRST_ANSWER: &str = "The red file.";
/// Where a run id stands in orchestrate's details as JSON.
const RUN_ID_KEY: &str = r#""runId":""#;
const STEERED_ANSWER: &str = "The blue file, as asked.";

/// claude's model starts a subagent in the background, messages it while its child is
/// still in its first turn, waits for it, and answers quoting what `wait` returned: the
/// run id goes tool result → model → next call ([`Reply::quoting`]), the message
/// reaches the child (its next turn is the message, and its answer changes), and nothing
/// of the background run outlives claude.
fn claude_starts_a_background_subagent_messages_it_and_waits(claude: &Path) {
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let start_args = json!({"agent": "fake", "task": "find the file", "background": true});
    let send_args = json!({"runId": mock_llm::QUOTED, "message": STEER});
    let wait_args = json!({"runId": mock_llm::QUOTED, "timeoutMs": 60000});
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::tool(
            "ToolSearch",
            json!({"query": format!("select:{SUBAGENT_TOOL},{SEND_TOOL},{WAIT_TOOL}")}),
            usage,
        ),
        Reply::tool(SUBAGENT_TOOL, start_args.clone(), usage),
        // claude shows its model a result's structuredContent (orchestrate's details, as
        // JSON) when there is one: the run id is read from there, as a model would.
        Reply::quoting(Reply::tool(SEND_TOOL, send_args, usage), RUN_ID_KEY),
        Reply::quoting(Reply::tool(WAIT_TOOL, wait_args, usage), RUN_ID_KEY),
        Reply::quote_tool_result(QUOTE, usage),
    ]));
    let sb = claude_sandbox(claude, &mock);
    std::fs::write(sb.agents.join("fake.md"), support::TEST_AGENT).unwrap();
    let pidfile = sb.root.path().join("fake-pids");
    // The child's first turn lasts until the model has had the answer to its `send`.
    let hold = sb.root.path().join("release-the-child");
    let fake = support::fake_agent_bin();
    let config = write_mcp_config(
        &sb,
        &[
            ("ORCHESTRATE_PI_BIN", fake.to_str().unwrap().to_string()),
            ("FAKE_AGENT_SCENARIO", "answers".into()),
            ("FAKE_AGENT_ANSWER_1", FIRST_ANSWER.into()),
            ("FAKE_AGENT_ANSWER_2", STEERED_ANSWER.into()),
            ("FAKE_AGENT_HOLD_FILE", hold.to_str().unwrap().into()),
            ("FAKE_AGENT_PIDFILE", pidfile.to_str().unwrap().into()),
            ("FAKE_AGENT_FOREVER_MS", "60000".into()),
            // The fake child reads the hold file and writes its pid beside the sandbox,
            // outside its working directory: only with orchestrate's own sandbox off.
            ("ORCHESTRATE_SANDBOX", "off".into()),
        ],
    );
    // Releases the child once the model has been sent the `send` result (its 4th
    // request: after ToolSearch, subagent and send), and notes how many child processes
    // had started by then.
    let done = AtomicBool::new(false);
    let sent = || mock.conversation().len() >= 4;
    let (run, started_when_released) = std::thread::scope(|scope| {
        let releaser = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let started = std::fs::read_to_string(&pidfile)
                    .unwrap_or_default()
                    .lines()
                    .count();
                // On a loaded machine the background supervisor may start the child only
                // after the `send` answered: released once both happened.
                if sent() && started > 0 {
                    std::fs::write(&hold, "").unwrap();
                    return Some(started);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        let run = run_parent_with(
            &sb,
            &config,
            "Start the fake subagent in the background, tell it to look for the blue file, then give me its answer.",
            &[SUBAGENT_TOOL, SEND_TOOL, WAIT_TOOL],
        );
        done.store(true, Ordering::SeqCst);
        (run, releaser.join().unwrap())
    });
    report("background, send, wait", &sb, &mock, &run);
    note_connection_errors(&run);
    assert_eq!(run.out.status, 0, "claude failed: {}", run.out.stderr);
    assert_connected(&run);
    assert_server_seen(&run);
    // The send came while the child's first (and only) turn was running.
    assert_eq!(
        started_when_released,
        Some(1),
        "child processes when released"
    );

    // The model's calls, as claude ran them, with the run id passed on.
    let calls: Vec<Value> = run
        .blocks("assistant")
        .into_iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    let names: Vec<&str> = calls.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(
        names,
        ["ToolSearch", SUBAGENT_TOOL, SEND_TOOL, WAIT_TOOL],
        "{calls:?}"
    );
    let run_ids = contract::run_ids(&sb.state);
    assert_eq!(run_ids.len(), 1, "one run folder: {run_ids:?}");
    let run_id = &run_ids[0];
    assert_eq!(calls[1]["input"], start_args);
    assert_eq!(
        calls[2]["input"],
        json!({"runId": run_id, "message": STEER})
    );
    assert_eq!(
        calls[3]["input"],
        json!({"runId": run_id, "timeoutMs": 60000})
    );
    let results: Vec<Value> = run
        .blocks("user")
        .into_iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    for (call, result) in calls.iter().zip(&results) {
        assert_eq!(result["tool_use_id"], call["id"]);
        assert_ne!(result["is_error"], json!(true), "{result}");
    }
    let structured = |i: usize| {
        run.lines
            .iter()
            .filter(|l| l["type"] == "user")
            .nth(i)
            .map(|l| l["tool_use_result"]["structuredContent"].clone())
            .unwrap_or_default()
    };
    // The start: the run id at once, the run still going.
    let started = structured(1);
    assert_eq!(started["runId"], json!(run_id), "{started}");
    assert_eq!(
        started["background"]["status"],
        json!("running"),
        "{started}"
    );
    // The wait: the run's result, whose answer is the one the message asked for.
    let waited = structured(3);
    let mut single = waited["results"][0].clone();
    single["messages"][0]["at"] = json!("AT");
    assert_eq!(
        (&single["output"], &single["exitCode"], &single["messages"]),
        (
            &json!(STEERED_ANSWER),
            &json!(0),
            &json!([{"at": "AT", "text": STEER, "delivery": "afterTurn"}])
        ),
        "{waited}"
    );

    // The model got that answer, and claude's final answer quotes it.
    let reqs = mock.conversation();
    assert_eq!(
        reqs.len(),
        5,
        "{:#?}",
        reqs.iter().map(|r| &r.served).collect::<Vec<_>>()
    );
    let seen = mock_llm::tool_result_texts(&reqs[4].body);
    let last = seen.last().expect("the wait result");
    assert!(last.contains(STEERED_ANSWER), "{seen:?}");
    assert!(!last.contains(FIRST_ANSWER), "{seen:?}");
    let result = run.result_line();
    assert_eq!(result["is_error"], json!(false), "{result}");
    assert_eq!(
        result["result"],
        json!(format!("{QUOTE}{last}")),
        "{result}"
    );

    // The child's own side: its second turn was the message (its session has a line per
    // turn, with the turn's prompt), and it ran twice.
    let session = sb
        .state
        .join("runs")
        .join(run_id)
        .join("child/pi-session.jsonl");
    let turns: Vec<String> = std::fs::read_to_string(&session)
        .expect("the child's session")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["task"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[0].contains("find the file"), "{turns:?}");
    assert!(turns[1].contains(STEER), "{turns:?}");
    let pids = std::fs::read_to_string(&pidfile).expect("the fake child ran");
    assert_eq!(pids.lines().count(), 2, "{pids}");
}

/// The same with the real Codex as the parent (`codex exec`, orchestrate in its
/// `[mcp_servers]`), whose model finds orchestrate's tools with its client-run
/// `tool_search` and calls them in the server's namespace.
fn codex_starts_a_background_subagent_messages_it_and_waits(codex: &Path) {
    use mock_llm::contract::clis::codex::CODEX;
    use parent_bench::CODEX_NAMESPACE;
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let call = |name: &str, args: Value| {
        Reply::responses_item(
            json!({"type": "function_call", "status": "completed",
                   "namespace": CODEX_NAMESPACE, "name": name, "arguments": args.to_string()}),
            usage,
        )
    };
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::responses_item(
            json!({"type": "tool_search_call", "execution": "client", "status": "completed",
                   "arguments": {"query": "orchestrate subagent send wait"}}),
            usage,
        ),
        call(
            "subagent",
            json!({"agent": "fake", "task": "find the file", "background": true}),
        ),
        Reply::quoting(
            call("send", json!({"runId": mock_llm::QUOTED, "message": STEER})),
            RUN_ID_KEY,
        ),
        Reply::quoting(
            call(
                "wait",
                json!({"runId": mock_llm::QUOTED, "timeoutMs": 60000}),
            ),
            RUN_ID_KEY,
        ),
        Reply::quote_tool_result(QUOTE, usage),
    ]));
    let mut sb = Sandbox::with_bin(codex.to_path_buf(), "codex", CODEX.model);
    sb.catch_outbound(&mock);
    (CODEX.configure)(&mut sb, &mock);
    std::fs::write(sb.agents.join("fake.md"), support::TEST_AGENT).unwrap();
    let pidfile = sb.root.path().join("fake-pids");
    let hold = sb.root.path().join("release-the-child");
    let fake = support::fake_agent_bin();
    parent_bench::add_codex_mcp_server(
        &sb,
        &[
            ("ORCHESTRATE_STATE_DIR", sb.state.display().to_string()),
            ("ORCHESTRATE_PI_BIN", fake.to_str().unwrap().to_string()),
            ("FAKE_AGENT_SCENARIO", "answers".into()),
            ("FAKE_AGENT_ANSWER_1", FIRST_ANSWER.into()),
            ("FAKE_AGENT_ANSWER_2", STEERED_ANSWER.into()),
            ("FAKE_AGENT_HOLD_FILE", hold.to_str().unwrap().into()),
            ("FAKE_AGENT_PIDFILE", pidfile.to_str().unwrap().into()),
            ("FAKE_AGENT_FOREVER_MS", "60000".into()),
            ("ORCHESTRATE_SANDBOX", "off".into()),
        ],
    );
    let done = AtomicBool::new(false);
    let marker = sb.marker();
    let (out, started_when_released) = std::thread::scope(|scope| {
        let releaser = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let started = std::fs::read_to_string(&pidfile)
                    .unwrap_or_default()
                    .lines()
                    .count();
                // As in claude's test: released once the send answered and the child runs.
                if mock.conversation().len() >= 4 && started > 0 {
                    std::fs::write(&hold, "").unwrap();
                    return Some(started);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        let args = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            CODEX.model,
            "Start the fake subagent in the background, tell it to look for the blue file, then give me its answer.",
        ];
        let start = Instant::now();
        let child = sb.program(&sb.bin, &args).spawn().expect("spawn codex");
        let out = contract::wait_bounded(child, start, WALL_CLOCK);
        done.store(true, Ordering::SeqCst);
        (out, releaser.join().unwrap())
    });
    let reqs = mock.conversation();
    harness::note(&format!(
        "=== codex: exit {} in {:?}\nstdout: {}\nstderr (tail): {}\nrequests: {:#?}",
        out.status,
        out.elapsed,
        cut(&out.stdout, 6000),
        cut(&out.stderr, 3000),
        reqs.iter()
            .map(|r| (r.served.clone(), mock_llm::tool_result_texts(&r.body)))
            .collect::<Vec<_>>()
    ));
    // Nothing of codex's tree outlives it by more than a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    let survivors = loop {
        let left = contract::pids_with_env(&[&marker]);
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(survivors, Vec::<i32>::new(), "processes outlived codex");
    assert_eq!(out.status, 0, "codex failed: {}", out.stderr);
    assert_eq!(
        started_when_released,
        Some(1),
        "child processes when released"
    );
    let run_ids = contract::run_ids(&sb.state);
    assert_eq!(run_ids.len(), 1, "one run folder: {run_ids:?}");
    let run_id = &run_ids[0];
    assert_eq!(
        reqs.len(),
        5,
        "{:#?}",
        reqs.iter().map(|r| &r.served).collect::<Vec<_>>()
    );
    // The model passed the run id on, and the message changed the subagent's answer.
    assert!(
        reqs[3].served.contains(run_id.as_str()),
        "{}",
        reqs[3].served
    );
    assert!(
        reqs[4].served.contains(run_id.as_str()),
        "{}",
        reqs[4].served
    );
    let seen = mock_llm::tool_result_texts(&reqs[4].body);
    let last = seen.last().expect("the wait result");
    assert!(last.contains(STEERED_ANSWER), "{seen:?}");
    assert!(last.contains("afterTurn"), "{seen:?}");
    let session = sb
        .state
        .join("runs")
        .join(run_id)
        .join("child/pi-session.jsonl");
    let turns = std::fs::read_to_string(&session).expect("the child's session");
    let turns: Vec<&str> = turns.lines().collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    assert!(turns[1].contains(STEER), "{turns:?}");
    assert!(
        out.stdout.contains(STEERED_ANSWER),
        "codex's answer: {}",
        out.stdout
    );
}

/// The same with the real pi as the subagent, on a mock of its own that holds pi's first
/// answer until claude's model has had the `send` result: pi's model sees the message in
/// its next request, and its answer to it is what claude's model quotes.
fn claude_messages_a_background_real_pi_whose_model_sees_it(claude: &Path) {
    let pi = contract::cli_binary("ORCHESTRATE_CONTRACT_PI", "pi")
        .expect("the harness runs this only with pi installed");
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let start_args = json!({"agent": "pimock", "task": "find the file", "background": true});
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::tool(
            "ToolSearch",
            json!({"query": format!("select:{SUBAGENT_TOOL},{SEND_TOOL},{WAIT_TOOL}")}),
            usage,
        ),
        Reply::tool(SUBAGENT_TOOL, start_args, usage),
        Reply::quoting(
            Reply::tool(
                SEND_TOOL,
                json!({"runId": mock_llm::QUOTED, "message": STEER}),
                usage,
            ),
            RUN_ID_KEY,
        ),
        Reply::quoting(
            Reply::tool(
                WAIT_TOOL,
                json!({"runId": mock_llm::QUOTED, "timeoutMs": 60000}),
                usage,
            ),
            RUN_ID_KEY,
        ),
        Reply::quote_tool_result(QUOTE, usage),
    ]));
    let sb = claude_sandbox(claude, &mock);
    let hold = sb.root.path().join("release-pi");
    let pi_mock = MockLlm::start(Script::sequence(vec![
        Reply::after_file(&hold, Reply::text(FIRST_ANSWER, usage)),
        Reply::text(STEERED_ANSWER, usage),
    ]));
    std::fs::write(sb.agents.join("pimock.md"), PI_AGENT).unwrap();
    let agent_dir = pi_agent_dir(sb.root.path(), &pi_mock);
    let config = write_mcp_config(
        &sb,
        &[
            ("ORCHESTRATE_PI_BIN", pi.to_str().unwrap().to_string()),
            ("PI_CODING_AGENT_DIR", agent_dir.to_str().unwrap().into()),
            ("PI_OFFLINE", "1".into()),
            ("PI_SKIP_VERSION_CHECK", "1".into()),
            ("PI_TELEMETRY", "0".into()),
        ],
    );
    // pi's first answer goes out once claude's model has had the `send` result and pi
    // has asked its model.
    let done = AtomicBool::new(false);
    let (run, released) = std::thread::scope(|scope| {
        let releaser = scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if mock.conversation().len() >= 4 && !pi_mock.conversation().is_empty() {
                    std::fs::write(&hold, "").unwrap();
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        });
        let run = run_parent_with(
            &sb,
            &config,
            "Start the pimock subagent in the background, tell it to look for the blue file, then give me its answer.",
            &[SUBAGENT_TOOL, SEND_TOOL, WAIT_TOOL],
        );
        done.store(true, Ordering::SeqCst);
        (run, releaser.join().unwrap())
    });
    report("background real pi, send, wait", &sb, &mock, &run);
    let pi_requests: Vec<String> = pi_mock
        .requests()
        .iter()
        .map(|r| format!("  {} {} side={} -> {}", r.method, r.path, r.side, r.served))
        .collect();
    harness::note(&format!(
        "=== background real pi: requests to pi's mock\n{}",
        pi_requests.join("\n")
    ));
    assert_eq!(run.out.status, 0, "claude failed: {}", run.out.stderr);
    assert!(released, "pi's first answer was held until the send");
    let names: Vec<String> = run
        .blocks("assistant")
        .into_iter()
        .filter(|b| b["type"] == "tool_use")
        .filter_map(|b| b["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, ["ToolSearch", SUBAGENT_TOOL, SEND_TOOL, WAIT_TOOL]);
    // pi's model: the task, then a request that carries the message, answered anew.
    let pi_reqs = pi_mock.conversation();
    assert_eq!(pi_reqs.len(), 2, "{pi_reqs:#?}");
    let asked =
        |r: &mock_llm::RecordedRequest| mock_llm::user_texts(r.api.unwrap(), &r.body).join("\n");
    assert!(
        asked(&pi_reqs[0]).contains("find the file"),
        "{}",
        asked(&pi_reqs[0])
    );
    assert!(
        !asked(&pi_reqs[0]).contains(STEER),
        "{}",
        asked(&pi_reqs[0])
    );
    assert!(asked(&pi_reqs[1]).contains(STEER), "{}", asked(&pi_reqs[1]));
    // What wait returned, and claude's final answer quoting it, hold the new answer.
    let reqs = mock.conversation();
    assert_eq!(reqs.len(), 5);
    let seen = mock_llm::tool_result_texts(&reqs[4].body);
    let last = seen.last().expect("the wait result").clone();
    assert!(last.contains(STEERED_ANSWER), "{seen:?}");
    assert!(last.contains(STEER), "the result lists the message: {last}");
    let result = run.result_line();
    assert_eq!(
        result["result"],
        json!(format!("{QUOTE}{last}")),
        "{result}"
    );
    let run_ids = contract::run_ids(&sb.state);
    assert_eq!(run_ids.len(), 1, "one run folder: {run_ids:?}");
}

/// `permissions: ask` with claude as the parent: the fake ACP child asks to write `x.txt`;
/// orchestrate (started with `ORCHESTRATE_PERMISSIONS=ask`, so that claude settles on
/// protocol 2025-11-25) asks claude with `elicitation/create`, and claude's `Elicitation`
/// hook accepts with `allow: true` (in print mode, with no hook, claude answers `cancel`).
fn claude_is_asked_for_a_childs_permission(claude: &Path) {
    let args = json!({"agent": "acpfake", "task": "find auth", "permissions": "ask"});
    let usage = MockUsage {
        input: 300,
        output: 20,
        cached: 0,
    };
    let mock = MockLlm::start(parent_script(&args, usage));
    let sb = claude_sandbox(claude, &mock);
    let fake = support::fake_agent_bin();
    std::fs::write(
        sb.agents.join("acpfake.md"),
        format!(
            "---\nname: acpfake\ndescription: d\ntools: read\nreadonly: true\nbackend: acp\nacp_command: {}\n---\nBe brief.\n",
            fake.display()
        ),
    )
    .unwrap();
    let answer = json!({"hookSpecificOutput": {"hookEventName": "Elicitation", "action": "accept", "content": {"allow": true}}});
    let hooks = json!({"hooks": {"Elicitation": [{"matcher": "orchestrate", "hooks": [
        {"type": "command", "command": format!("echo '{answer}'")}]}]}});
    std::fs::write(
        sb.home.join(".claude/settings.json"),
        serde_json::to_string(&hooks).unwrap(),
    )
    .unwrap();
    let config = write_mcp_config(
        &sb,
        &[
            ("FAKE_AGENT_SCENARIO", "acp".into()),
            ("FAKE_ACP_WRITES", "1".into()),
            ("ORCHESTRATE_PERMISSIONS", "ask".into()),
            ("ORCHESTRATE_SANDBOX", "off".into()),
        ],
    );
    let run = run_parent(&sb, &config);
    report("ask", &sb, &mock, &run);
    assert_eq!(run.out.status, 0, "claude failed: {}", run.out.stderr);
    let ids = contract::run_ids(&sb.state);
    assert_eq!(ids.len(), 1, "one run: {ids:?}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(sb.state.join("runs").join(&ids[0]).join("result.json"))
            .expect("result.json"),
    )
    .unwrap();
    let r = &result["details"]["results"][0];
    // A read-only agent: the policy would have rejected the edit; claude allowed it.
    assert_eq!(
        r["permissions"],
        json!([{"tool": "edit", "decision": "allowed", "by": "parent", "title": "write x.txt"}]),
        "{result}"
    );
    assert_eq!(r["output"], json!("Done: yes"), "{result}");
    let cwd = r["sessionFile"]
        .as_str()
        .map(|_| sb.work.join("x.txt"))
        .unwrap();
    assert!(cwd.is_file(), "the allowed edit ran: {}", cwd.display());
    let debug_log = std::fs::read_to_string(&run.debug_log).unwrap_or_default();
    assert!(
        debug_log.contains("Elicitation resolved by hook"),
        "claude's hook answered the question"
    );
}
