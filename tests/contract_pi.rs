//! Contract tests: the real `pi` run through `orchestrate run` against the loopback mock
//! LLM (OpenAI Chat Completions, as pi's `openai-completions` provider speaks it).
//!
//! pi comes from `ORCHESTRATE_CONTRACT_PI` (set by `scripts/install-agent-clis`' env.sh);
//! without it each test prints why it skips and passes, unless
//! `ORCHESTRATE_REQUIRE_CONTRACT=1` makes that a failure. pi runs fully offline: its own
//! agent dir (`PI_CODING_AGENT_DIR`) with a `mock` provider, `PI_OFFLINE=1`, version check
//! and telemetry off, HOME in a temp dir.

mod mock_llm;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mock_llm::contract::{self, Finished};
use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const AGENT: &str =
    "---\nname: pimock\ndescription: d\ntools: read, bash\nbackend: pi\n---\nYou are terse.\n";
const WALL_CLOCK: Duration = Duration::from_secs(120);
/// models.json prices, $ per million tokens.
const PRICE_INPUT: f64 = 1.0;
const PRICE_OUTPUT: f64 = 2.0;

struct PiSandbox {
    root: tempfile::TempDir,
    pi: PathBuf,
    agent_dir: PathBuf,
    agents: PathBuf,
    home: PathBuf,
    state: PathBuf,
    work: PathBuf,
}

impl PiSandbox {
    /// None (after printing why) when the real pi is not available.
    fn new(mock: &MockLlm) -> Option<PiSandbox> {
        let pi = contract::cli_binary("ORCHESTRATE_CONTRACT_PI", "pi")?;
        let root = tempfile::tempdir().expect("tempdir");
        let p = root.path();
        let sb = PiSandbox {
            pi,
            agent_dir: p.join("pi-agent"),
            agents: p.join("agents"),
            home: p.join("home"),
            state: p.join("state"),
            work: p.join("work"),
            root,
        };
        for d in [&sb.agent_dir, &sb.agents, &sb.home, &sb.work] {
            std::fs::create_dir_all(d).unwrap();
        }
        let models = json!({"providers": {"mock": {
            "baseUrl": format!("{}/v1", mock.base_url()),
            "api": "openai-completions",
            "apiKey": "test-key",
            "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false, "maxTokensField": "max_tokens"},
            "models": [{"id": "mock-1", "reasoning": false, "contextWindow": 128000, "maxTokens": 4096,
                        "cost": {"input": PRICE_INPUT, "output": PRICE_OUTPUT, "cacheRead": 0, "cacheWrite": 0}}]
        }}});
        std::fs::write(sb.agent_dir.join("models.json"), models.to_string()).unwrap();
        std::fs::write(
            sb.agent_dir.join("settings.json"),
            json!({"retry": {"enabled": false}}).to_string(),
        )
        .unwrap();
        std::fs::write(sb.agents.join("pimock.md"), AGENT).unwrap();
        Some(sb)
    }

    fn command(&self, task: &str, extra: &[&str]) -> std::process::Command {
        let mut args = vec!["run", "pimock", task];
        args.extend_from_slice(extra);
        self.command_args(&args)
    }

    /// `orchestrate ARGS --agents-dir … --model mock/mock-1` in this sandbox.
    fn command_args(&self, args: &[&str]) -> std::process::Command {
        let agents = self.agents.to_str().unwrap();
        let mut args = args.to_vec();
        args.extend_from_slice(&["--agents-dir", agents, "--model", "mock/mock-1"]);
        let mut cmd = contract::orchestrate_command(&args);
        cmd.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("ORCHESTRATE_STATE_DIR", &self.state)
            .env("ORCHESTRATE_PI_BIN", &self.pi)
            .env("PI_CODING_AGENT_DIR", &self.agent_dir)
            .env("PI_OFFLINE", "1")
            .env("PI_SKIP_VERSION_CHECK", "1")
            .env("PI_TELEMETRY", "0")
            .current_dir(&self.work);
        cmd
    }

    fn run(&self, task: &str, extra: &[&str]) -> Finished {
        let start = Instant::now();
        let child = self
            .command(task, extra)
            .spawn()
            .expect("spawn orchestrate");
        contract::wait_bounded(child, start, WALL_CLOCK)
    }

    /// `PI_CODING_AGENT_DIR=<this sandbox's dir>`: an environment entry only processes
    /// started by this test carry.
    fn env_marker(&self) -> String {
        format!("PI_CODING_AGENT_DIR={}", self.agent_dir.display())
    }
}

impl Drop for PiSandbox {
    fn drop(&mut self) {
        // Never leave a process of ours behind, whatever failed.
        let marker = self.env_marker();
        for pid in contract::pids_with_env(&[&marker]) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = &self.root;
    }
}

/// Prints what the mock was asked and answered, and the session lines of interest (shown
/// with `--nocapture`, and on failure).
fn report(case: &str, mock: &MockLlm, out: &Finished) {
    eprintln!("=== {case}: mock requests");
    for r in mock.requests() {
        eprintln!("  {} {} side={} -> {}", r.method, r.path, r.side, r.served);
    }
    let json = out.json();
    if let Some(session) = json["details"]["results"][0]["sessionFile"].as_str() {
        eprintln!("=== {case}: pi session lines");
        for mut l in contract::session_lines(
            Path::new(session),
            &[
                "message_end",
                "tool_execution_end",
                "agent_end",
                "agent_settled",
            ],
        ) {
            if l["type"] == "agent_end" {
                l["messages"] = json!("…");
            }
            if l["message"]["role"] == "system" {
                continue;
            }
            eprintln!("  {l}");
        }
    }
    eprintln!(
        "=== {case}: orchestrate exit {} in {:?}\n  {}",
        out.status, out.elapsed, out.stdout
    );
}

/// The result with the fields that vary between runs fixed, for whole-object comparison.
fn normalized(mut r: Value) -> Value {
    let session = r["sessionFile"].as_str().expect("sessionFile").to_string();
    assert!(Path::new(&session).is_file(), "sessionFile exists");
    r["sessionFile"] = json!("SESSION");
    assert!(r["durationMs"].is_u64());
    r["durationMs"] = json!(0);
    // The CLI's own session id differs per run; it must be there to resume, so check
    // it is, then leave it out of the comparison.
    if let Some(id) = r.as_object_mut().and_then(|o| o.remove("childSessionId")) {
        assert!(
            id.as_str().is_some_and(|s| !s.is_empty()),
            "childSessionId: {id}"
        );
    }
    if let Some(c) = r["usage"]["cost"].as_f64() {
        r["usage"]["cost"] = json!(contract::round_cost(c));
    }
    r
}

#[test]
fn a_tool_call_then_text_gives_the_mocks_text_tool_call_and_summed_usage() {
    let first = MockUsage {
        input: 200,
        output: 14,
        cached: 40,
    };
    let second = MockUsage {
        input: 300,
        output: 9,
        cached: 100,
    };
    let mock = MockLlm::start(Script::tool_then_text(
        Reply::tool("bash", json!({"command": "echo hi-from-tool"}), first),
        Reply::text("Hello from mock.", second),
    ));
    let Some(sb) = PiSandbox::new(&mock) else {
        return;
    };
    let out = sb.run("Run echo hi-from-tool, then greet.", &[]);
    report("tool then text", &mock, &out);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);

    // Usage as pi normalizes it: input = prompt - cached, cacheRead = cached.
    let input = (first.input - first.cached) + (second.input - second.cached);
    let cache_read = first.cached + second.cached;
    let output = first.output + second.output;
    let cost = (input as f64 * PRICE_INPUT + output as f64 * PRICE_OUTPUT) / 1e6;
    let json = out.json();
    assert_eq!(
        json["content"],
        json!([{"type": "text", "text": "Hello from mock."}])
    );
    assert_eq!(json["details"]["mode"], json!("single"));
    assert_eq!(json["details"].get("error"), None);
    assert_eq!(
        normalized(out.result()),
        json!({
            "agent": "pimock",
            "task": "Run echo hi-from-tool, then greet.",
            "exitCode": 0,
            "usage": {"input": input, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
                      "cost": contract::round_cost(cost), "turns": 2},
            "sessionFile": "SESSION",
            "output": "Hello from mock.",
            "displayItems": [
                {"type": "toolCall", "name": "bash", "args": {"command": "echo hi-from-tool"}},
                {"type": "text", "text": "Hello from mock."}
            ],
            "backend": "pi",
            "model": "mock/mock-1",
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );

    // What pi sent: two Chat Completions requests, the second with the tool's real output.
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2, "no other traffic: {reqs:#?}");
    for r in &reqs {
        assert_eq!(r.api, Some(Api::OpenAiChat));
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.headers["authorization"], "Bearer test-key");
        assert_eq!(r.body["model"], json!("mock-1"));
        assert_eq!(r.body["stream"], json!(true));
        assert_eq!(r.body["stream_options"]["include_usage"], json!(true));
    }
    let tool_names: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert_eq!(tool_names, ["read", "bash"], "the agent's tools only");
    let system = mock_llm::system_text(Api::OpenAiChat, &reqs[0].body);
    assert!(
        system.contains("You are terse."),
        "agent prompt appended: {system}"
    );
    let tool_msg = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool result message");
    assert_eq!(tool_msg["tool_call_id"], json!("call_mock1"));
    assert!(
        tool_msg["content"].to_string().contains("hi-from-tool"),
        "the bash tool really ran: {tool_msg}"
    );
}

#[test]
fn a_401_is_subagent_failed_with_the_providers_message() {
    let message = "Mock provider says: the API key test-key was rejected";
    let mock = MockLlm::start(Script::always(Reply::HttpError {
        status: 401,
        body: mock_llm::error_body(Api::OpenAiChat, 401, message),
    }));
    let Some(sb) = PiSandbox::new(&mock) else {
        return;
    };
    let out = sb.run("Say hi.", &[]);
    report("401", &mock, &out);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let json = out.json();
    let error = &json["details"]["error"];
    assert_eq!(error["code"], json!("SUBAGENT_FAILED"), "{json}");
    let msg = error["message"].as_str().unwrap();
    assert!(msg.contains(message), "provider message kept: {msg}");
    let r = out.result();
    assert!(
        r["error"].as_str().unwrap().contains(message),
        "result error: {r}"
    );
    // pi exits 0 in json mode even when the model call failed; orchestrate reads the
    // failure from stopReason/errorMessage; exitCode stays pi's own 0.
    let mut whole = normalized(r.clone());
    whole["error"] = json!("ERROR");
    assert_eq!(
        whole,
        json!({
            "agent": "pimock",
            "task": "Say hi.",
            "exitCode": 0,
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0, "turns": 1},
            "error": "ERROR",
            "sessionFile": "SESSION",
            "output": "",
            "displayItems": [],
            "backend": "pi",
            "model": "mock/mock-1",
            "durationMs": 0,
            "attempts": 1,
            "termination": {"kind": "exited", "code": 0}
        })
    );
    assert_eq!(mock.conversation().len(), 1, "retries are off for pi");
}

/// Runs a task that never finishes with `--idle-timeout 3s --kill-grace 1s` (and a runtime
/// bound `extra`), records the processes of the run's tree once the mock has seen
/// `requests` conversation requests, and checks they are all gone after the result.
fn run_until_timeout(mock: &MockLlm, sb: &PiSandbox, requests: usize, extra: &[&str]) -> Finished {
    let start = Instant::now();
    let mut args = vec!["--idle-timeout", "3s", "--kill-grace", "1s"];
    args.extend_from_slice(extra);
    let child = sb
        .command("Say hi.", &args)
        .spawn()
        .expect("spawn orchestrate");
    let orchestrate_pid = child.id() as i32;

    // The processes of the run's tree: those whose environment has this run's
    // ORCHESTRATE_RUN_ID (the run folder in our own state dir names it) and this
    // sandbox's PI_CODING_AGENT_DIR.
    let mut child = child;
    let waited = Instant::now();
    while mock.conversation().len() < requests {
        if child.try_wait().expect("try_wait").is_some() {
            let out = contract::wait_bounded(child, start, WALL_CLOCK);
            panic!("orchestrate ended before pi got to request {requests}: {out:?}");
        }
        if waited.elapsed() > Duration::from_secs(60) {
            unsafe { libc::kill(-orchestrate_pid, libc::SIGKILL) };
            let _ = child.wait();
            panic!("pi never got to request {requests}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the tool (if any) start its processes.
    std::thread::sleep(Duration::from_millis(500));
    let ids = contract::run_ids(&sb.state);
    assert_eq!(ids.len(), 1, "one run folder: {ids:?}");
    let run_marker = format!("ORCHESTRATE_RUN_ID={}", ids[0]);
    let marker = sb.env_marker();
    let tree = contract::pids_with_env(&[&run_marker, &marker]);
    assert!(!tree.is_empty(), "pi's processes are visible in /proc");
    assert!(!tree.contains(&orchestrate_pid));
    let described: Vec<(i32, String)> = tree.iter().map(|p| (*p, contract::cmdline(*p))).collect();
    eprintln!("=== pi's tree before the timeout: {described:?}");

    let out = contract::wait_bounded(child, start, WALL_CLOCK);
    let survivors = contract::wait_all_gone(&tree, Duration::from_secs(5));
    assert_eq!(survivors, [], "processes of pi's tree survived the run");
    let late = contract::pids_with_env(&[&run_marker]);
    assert_eq!(late, Vec::<i32>::new(), "no process of the run is left");
    out
}

#[test]
fn a_hung_stream_hits_the_idle_timeout_and_leaves_no_process_of_pis_tree() {
    let mock = MockLlm::start(Script::always(Reply::hang("Thinking about it")));
    let Some(sb) = PiSandbox::new(&mock) else {
        return;
    };
    let out = run_until_timeout(&mock, &sb, 1, &[]);
    report("hang", &mock, &out);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let json = out.json();
    assert_eq!(
        json["details"]["error"],
        json!({"code": "SUBAGENT_TIMEOUT", "message": "Subagent timed out after 3000ms without activity."})
    );
    let r = out.result();
    assert_eq!(r["exitCode"], json!(124));
    assert_eq!(r["timeoutReason"], json!("idle"));
    assert_eq!(
        r["output"],
        json!("Thinking about it"),
        "the partial text is kept"
    );
    assert_eq!(
        (&r["termination"], r.get("leak")),
        (
            &json!({"kind": "terminated", "reason": "idleTimeout"}),
            None
        ),
        "{r}"
    );
    assert!(
        out.elapsed < Duration::from_secs(30),
        "took {:?}",
        out.elapsed
    );
}

/// pi runs its bash tool in a detached process group of its own; a tool that never
/// returns must still die with the run.
#[test]
fn a_tool_that_never_returns_times_out_and_its_detached_shell_dies_too() {
    let mock = MockLlm::start(Script::tool_then_text(
        Reply::tool(
            "bash",
            json!({"command": "sleep 300"}),
            MockUsage {
                input: 10,
                output: 5,
                cached: 0,
            },
        ),
        Reply::text("unreachable", MockUsage::default()),
    ));
    let Some(sb) = PiSandbox::new(&mock) else {
        return;
    };
    let out = run_until_timeout(&mock, &sb, 1, &["--timeout", "10s"]);
    report("tool never returns", &mock, &out);
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["exitCode"], json!(124));
    assert_eq!(
        r["displayItems"],
        json!([{"type": "toolCall", "name": "bash", "args": {"command": "sleep 300"}}])
    );
    assert_eq!(
        (&r["termination"], r.get("leak")),
        (
            &json!({"kind": "terminated", "reason": "idleTimeout"}),
            None
        ),
        "{r}"
    );
    assert_eq!(mock.conversation().len(), 1);
}

#[test]
fn a_resumed_run_continues_pis_own_session() {
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::text("First answer.", usage),
        Reply::text("Second answer.", usage),
    ]));
    let Some(sb) = PiSandbox::new(&mock) else {
        return;
    };
    let first = sb.run("Remember the word kumquat.", &[]);
    report("resume, first run", &mock, &first);
    assert_eq!(first.status, 0, "{}", first.stderr);
    let json = first.json();
    let id = json["details"]["runId"].as_str().unwrap().to_string();
    assert!(json["details"]["results"][0]["childSessionId"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    assert!(
        sb.state
            .join("runs")
            .join(&id)
            .join("pi-session.jsonl")
            .is_file(),
        "pi saved its session in the run folder"
    );

    let start = Instant::now();
    let child = sb
        .command_args(&["run", "--resume", &id, "What was the word?"])
        .spawn()
        .unwrap();
    let second = contract::wait_bounded(child, start, WALL_CLOCK);
    report("resume, second run", &mock, &second);
    assert_eq!(second.status, 0, "{}", second.stderr);
    let r = &second.json()["details"]["results"][0];
    assert_eq!(r["output"], json!("Second answer."));
    assert_eq!(r["agent"], json!("pimock"));
    // The model saw the first exchange again: pi continued its session.
    let asked = mock
        .conversation()
        .last()
        .expect("a second request")
        .body
        .to_string();
    assert!(
        asked.contains("kumquat")
            && asked.contains("First answer.")
            && asked.contains("What was the word?"),
        "{asked}"
    );
}
