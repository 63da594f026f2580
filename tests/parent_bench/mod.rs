//! The benchmark of what a parent agent pays for one delegation (`scripts/bench-context`):
//! the real Claude Code and the real Codex as the parent, each through its shell tool
//! running `orchestrate run explorer "find auth"` and through the `subagent` MCP tool. The
//! mock LLM plays the parent's model and delegates once; the child is the fake pi
//! (`examples/fake_agent.rs`, scenario `long-run`): 40 tool calls, then a 1.5 KB answer.
//! What the parent's model was sent next is read from the mock's requests: the bytes of
//! the delegation's tool result, against the bytes of the answer (a successful delegation
//! may cost the parent at most the answer + 400 bytes, whatever the parent wraps it in),
//! and the bytes of orchestrate's tool definitions as the model got them.
//!
//! Each route is a trial that runs only on request:
//!
//! ```text
//! . ~/.cache/orchestrate-clis/env.sh
//! cargo test --test e2e_mcp_parent -- --ignored bench_context --nocapture
//! ```
//!
//! `BENCH_CONTEXT_OUT=<file>` appends each route's table row (Markdown) to that file;
//! `BENCH_CONTEXT_ORCHESTRATE=<path>` measures another build of orchestrate (an earlier
//! commit's, for a before/after table).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::mock_llm::contract::clis::codex::CODEX;
use crate::mock_llm::contract::harness::{self, Needing};
use crate::mock_llm::contract::{self, Sandbox};
use crate::mock_llm::{self as mock, MockLlm, MockUsage, Reply, Script};
use crate::support;

/// The child's run: tool calls before its answer, and the answer's size.
const CHILD_TOOL_CALLS: &str = "40";
const CHILD_ANSWER_BYTES: &str = "1500";
/// What the parent's model asks the subagent.
const TASK: &str = "find auth";
const PROMPT: &str = "Ask the explorer subagent where authentication lives, then tell me.";
/// Bytes reaching the parent's model for a success ≤ the answer + this: the result's lean
/// form leaves out what a parent does not act on (README, The result).
const OVERHEAD_BYTES: usize = 400;
const WALL_CLOCK: Duration = Duration::from_secs(180);
const USAGE: MockUsage = MockUsage {
    input: 300,
    output: 20,
    cached: 0,
};

#[derive(Clone, Copy, Debug)]
enum Parent {
    Claude,
    Codex,
}

#[derive(Clone, Copy, Debug)]
enum Via {
    Shell,
    Mcp,
}

impl Parent {
    fn name(self) -> &'static str {
        match self {
            Parent::Claude => "claude",
            Parent::Codex => "codex",
        }
    }

    fn needs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Parent::Claude => super::NEEDS_CLAUDE,
            Parent::Codex => &[(CODEX.var, "codex")],
        }
    }

    fn model(self) -> &'static str {
        match self {
            Parent::Claude => super::MODEL,
            Parent::Codex => CODEX.model,
        }
    }
}

impl Via {
    fn name(self) -> &'static str {
        match self {
            Via::Shell => "shell",
            Via::Mcp => "mcp",
        }
    }
}

/// One trial per route, run only on request.
pub fn benchmarks() -> Vec<Needing> {
    let routes = [
        (Parent::Claude, Via::Shell),
        (Parent::Claude, Via::Mcp),
        (Parent::Codex, Via::Shell),
        (Parent::Codex, Via::Mcp),
    ];
    routes
        .into_iter()
        .map(|(parent, via)| Needing {
            name: format!("bench_context::{}_{}", parent.name(), via.name()),
            clis: parent.needs(),
            run: Box::new(move |bin: &Path| measure(parent, via, bin)),
            on_request: true,
        })
        .chain([Needing {
            name: "bench_context::tools_list".into(),
            clis: &[],
            run: Box::new(|_: &Path| tools_list_bytes()),
            on_request: true,
        }])
        .collect()
}

/// The bytes of every tool in `tools/list`, as orchestrate sends them.
fn tools_list_bytes() {
    use std::io::{BufRead, Write};
    let mut server = std::process::Command::new(orchestrate())
        .arg("mcp")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn orchestrate mcp");
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let listed: Value = lines
        .by_ref()
        .map_while(Result::ok)
        .map(|l| serde_json::from_str::<Value>(&l).unwrap())
        .find(|v| v["id"] == json!(1))
        .expect("a tools/list answer");
    drop(stdin);
    let _ = server.wait();
    let bytes = serde_json::to_string(&listed["result"]["tools"])
        .unwrap()
        .len();
    report_line(&format!(
        "tools/list: {bytes} bytes for every tool (limit 2800)"
    ));
}

/// Prints `line` to the terminal, and appends it to `BENCH_CONTEXT_OUT` if set.
fn report_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(file) = std::env::var_os("BENCH_CONTEXT_OUT") {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(PathBuf::from(file))
            .expect("BENCH_CONTEXT_OUT");
        writeln!(f, "{line}").unwrap();
    }
}

/// The shell command the parent's model runs on the shell route.
fn shell_command() -> String {
    format!("orchestrate run explorer \"{TASK}\"")
}

/// Where codex puts orchestrate's tools: the namespace `mcp__<server>`.
pub(super) const CODEX_NAMESPACE: &str = "mcp__orchestrate";

/// What the parent's model does: delegate once, then answer in a word.
fn script(parent: Parent, via: Via) -> Script {
    let delegate = json!({"agent": "explorer", "task": TASK});
    let done = Reply::text("Done.", USAGE);
    match (parent, via) {
        (Parent::Claude, Via::Shell) => Script::sequence(vec![
            Reply::tool(
                "Bash",
                json!({"command": shell_command(), "description": "Delegate to the explorer"}),
                USAGE,
            ),
            done,
        ]),
        // claude defers MCP tools: the model loads the schema with ToolSearch first.
        (Parent::Claude, Via::Mcp) => Script::sequence(vec![
            Reply::tool(
                "ToolSearch",
                json!({"query": format!("select:{}", super::SUBAGENT_TOOL)}),
                USAGE,
            ),
            Reply::tool(super::SUBAGENT_TOOL, delegate, USAGE),
            done,
        ]),
        (Parent::Codex, Via::Shell) => Script::sequence(vec![
            Reply::tool("exec_command", json!({"cmd": shell_command()}), USAGE),
            done,
        ]),
        // codex defers MCP tools too: the model finds them with its client-run
        // tool_search, then calls one inside the server's namespace.
        (Parent::Codex, Via::Mcp) => Script::sequence(vec![
            Reply::responses_item(
                json!({"type": "tool_search_call", "execution": "client", "status": "completed",
                       "arguments": {"query": "orchestrate subagent"}}),
                USAGE,
            ),
            Reply::responses_item(
                json!({"type": "function_call", "status": "completed",
                       "namespace": CODEX_NAMESPACE, "name": "subagent",
                       "arguments": delegate.to_string()}),
                USAGE,
            ),
            done,
        ]),
    }
}

/// The orchestrate measured: this build, or `BENCH_CONTEXT_ORCHESTRATE`.
fn orchestrate() -> PathBuf {
    std::env::var_os("BENCH_CONTEXT_ORCHESTRATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_orchestrate")))
}

/// The child and where orchestrate keeps its runs: the environment of `orchestrate run`
/// (shell routes) or of `orchestrate mcp` (MCP routes).
fn orchestrate_env(sb: &Sandbox) -> Vec<(&'static str, String)> {
    let bin_dir = orchestrate().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    vec![
        ("PATH", path),
        ("ORCHESTRATE_STATE_DIR", sb.state.display().to_string()),
        ("ORCHESTRATE_BACKEND", "pi".into()),
        (
            "ORCHESTRATE_PI_BIN",
            support::fake_agent_bin().display().to_string(),
        ),
        ("FAKE_AGENT_SCENARIO", "long-run".into()),
        ("FAKE_AGENT_TOOL_CALLS", CHILD_TOOL_CALLS.into()),
        ("FAKE_AGENT_ANSWER_BYTES", CHILD_ANSWER_BYTES.into()),
        ("FAKE_AGENT_FOREVER_MS", "60000".into()),
    ]
}

/// The parent's sandbox, offline against `mock`, set up for the route.
fn sandbox(parent: Parent, via: Via, bin: &Path, mock: &MockLlm) -> Sandbox {
    let mut sb = match parent {
        Parent::Claude => super::claude_sandbox(bin, mock),
        Parent::Codex => {
            let mut sb = Sandbox::with_bin(bin.to_path_buf(), "codex", CODEX.model);
            sb.catch_outbound(mock);
            (CODEX.configure)(&mut sb, mock);
            sb
        }
    };
    let env = orchestrate_env(&sb);
    match via {
        // The parent's shell inherits the parent's environment. codex's runs `bash -lc`,
        // whose /etc/profile sets PATH afresh: the sandbox HOME's profile puts
        // orchestrate back on it.
        Via::Shell => {
            for (k, v) in &env {
                sb.env(k, v);
            }
            let path = &env.iter().find(|(k, _)| *k == "PATH").unwrap().1;
            std::fs::write(
                sb.home.join(".bash_profile"),
                format!("export PATH={}\n", serde_json::to_string(path).unwrap()),
            )
            .unwrap();
        }
        // The server's environment comes from the parent's MCP config.
        Via::Mcp => {
            if let Parent::Codex = parent {
                add_codex_mcp_server(&sb, &env);
            }
        }
    }
    sb
}

/// `[mcp_servers.orchestrate]` in the sandbox's codex config: `orchestrate mcp` with `env`.
pub(super) fn add_codex_mcp_server(sb: &Sandbox, env: &[(&str, String)]) {
    let config = sb.home.join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).expect("codex config");
    let toml_str = |s: &str| serde_json::to_string(s).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.orchestrate]\ncommand = {}\nargs = [\"mcp\", \"--agents-dir\", {}]\ntool_timeout_sec = 600\n\n[mcp_servers.orchestrate.env]\n",
        toml_str(orchestrate().to_str().unwrap()),
        toml_str(sb.agents.to_str().unwrap()),
    ));
    for (k, v) in env {
        text.push_str(&format!("{k} = {}\n", toml_str(v)));
    }
    text.push_str(&format!(
        "{} = {}\n",
        "ORCHESTRATE_CONTRACT_SANDBOX",
        toml_str(&sb.root.path().display().to_string())
    ));
    std::fs::write(config, text).unwrap();
}

/// The parent's command line for the route.
fn parent_args(parent: Parent, via: Via, sb: &Sandbox) -> Vec<String> {
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    match (parent, via) {
        (Parent::Claude, _) => {
            let allowed = match via {
                Via::Shell => "Bash".to_string(),
                Via::Mcp => super::SUBAGENT_TOOL.to_string(),
            };
            let mut args = s(&["-p", PROMPT, "--output-format", "stream-json", "--verbose"]);
            if let Via::Mcp = via {
                let env: Vec<(&str, String)> = orchestrate_env(sb);
                let config = super::write_mcp_config_for(&orchestrate(), sb, &env);
                args.extend(s(&[
                    "--mcp-config",
                    config.to_str().unwrap(),
                    "--strict-mcp-config",
                ]));
            }
            args.extend(s(&["--allowedTools", &allowed, "--model", parent.model()]));
            args
        }
        (Parent::Codex, _) => s(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            parent.model(),
            PROMPT,
        ]),
    }
}

/// One route's numbers.
#[derive(Debug)]
struct Measured {
    route: String,
    tool_result_bytes: usize,
    answer_bytes: usize,
    definition_bytes: usize,
}

impl Measured {
    fn limit(&self) -> usize {
        self.answer_bytes + OVERHEAD_BYTES
    }

    fn row(&self) -> String {
        let ratio = self.tool_result_bytes as f64 / self.answer_bytes as f64;
        let verdict = if self.tool_result_bytes <= self.limit() {
            "pass"
        } else {
            "FAIL"
        };
        let definitions = if self.definition_bytes == 0 {
            "—".to_string()
        } else {
            self.definition_bytes.to_string()
        };
        format!(
            "| {} | {} | {} | {ratio:.2}× | ≤ {} | {definitions} | {verdict} |",
            self.route,
            self.tool_result_bytes,
            self.answer_bytes,
            self.limit()
        )
    }
}

fn measure(parent: Parent, via: Via, bin: &Path) {
    let mock = MockLlm::start(script(parent, via));
    let sb = sandbox(parent, via, bin, &mock);
    let args = parent_args(parent, via, &sb);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let start = Instant::now();
    let child = sb
        .program(&sb.bin, &arg_refs)
        .spawn()
        .expect("spawn the parent");
    let out = contract::wait_bounded(child, start, WALL_CLOCK);
    let requests = mock.conversation();
    harness::note(&format!(
        "=== {} {}: exit {} in {:?}\nstdout (tail): {}\nstderr (tail): {}\nrequests: {:#?}",
        parent.name(),
        via.name(),
        out.status,
        out.elapsed,
        tail(&out.stdout, 3000),
        tail(&out.stderr, 3000),
        requests
            .iter()
            .map(|r| (
                r.path.clone(),
                mock::offered_tools(r.api.unwrap_or(mock::Api::Anthropic), &r.body),
                mock::tool_result_texts(&r.body)
                    .iter()
                    .map(|t| tail(t, 400))
                    .collect::<Vec<_>>()
            ))
            .collect::<Vec<_>>()
    ));
    assert_eq!(out.status, 0, "the parent failed");
    let last = requests.last().expect("the parent asked its model");
    let results = mock::tool_result_texts(&last.body);
    let tool_result = results
        .last()
        .expect("the delegation's tool result")
        .clone();
    let answer = child_answer(&sb.state);
    assert!(
        tool_result.contains(&answer[..200]),
        "the answer reached the parent's model: {tool_result}"
    );
    let measured = Measured {
        route: format!("{} via {}", parent.name(), route_name(via)),
        tool_result_bytes: tool_result.len(),
        answer_bytes: answer.len(),
        definition_bytes: match via {
            Via::Shell => 0,
            Via::Mcp => definition_bytes(&requests),
        },
    };
    report_line(&measured.row());
    harness::note(&format!("tool result as the model got it:\n{tool_result}"));
    assert!(
        measured.tool_result_bytes <= measured.limit(),
        "{measured:?}: over {} bytes",
        measured.limit()
    );
}

fn route_name(via: Via) -> &'static str {
    match via {
        Via::Shell => "its shell tool (`orchestrate run`)",
        Via::Mcp => "MCP (`subagent` tool)",
    }
}

/// The subagent's answer, from the one run's result.json.
fn child_answer(state: &Path) -> String {
    let ids = contract::run_ids(state);
    assert_eq!(ids.len(), 1, "one run: {ids:?}");
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("runs").join(&ids[0]).join("result.json"))
            .expect("result.json"),
    )
    .unwrap();
    let r = &result["details"]["results"][0];
    assert_eq!(r["exitCode"], json!(0), "{result}");
    assert_eq!(
        r["displayItems"].as_array().map(Vec::len),
        Some(2 * 40 + 1),
        "the child's 40 steps (a sentence and a call each) and its answer"
    );
    r["output"].as_str().unwrap().to_string()
}

/// The bytes of orchestrate's tool definitions as the model got them, in the request where
/// it had the most of them loaded: claude's `tools` entries named `mcp__orchestrate__…`,
/// codex's `mcp__orchestrate` namespace (what its tool_search returned).
fn definition_bytes(requests: &[mock::RecordedRequest]) -> usize {
    fn walk(v: &Value, total: &mut usize) {
        match v {
            Value::Object(o) => {
                let name = o.get("name").and_then(Value::as_str).unwrap_or_default();
                let is_tool = o.contains_key("description")
                    && (o.contains_key("input_schema")
                        || o.contains_key("parameters")
                        || o.contains_key("tools"));
                if is_tool && name.starts_with("mcp__orchestrate") {
                    *total += serde_json::to_string(v).unwrap().len();
                } else {
                    o.values().for_each(|x| walk(x, total));
                }
            }
            Value::Array(items) => items.iter().for_each(|x| walk(x, total)),
            _ => {}
        }
    }
    requests
        .iter()
        .map(|r| {
            let mut total = 0;
            walk(&r.body["tools"], &mut total);
            walk(&r.body["input"], &mut total);
            total
        })
        .max()
        .unwrap_or(0)
}

fn tail(s: &str, max: usize) -> String {
    let start = s.len().saturating_sub(max);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_string()
}
