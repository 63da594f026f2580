//! The ACP presets (`--backend gemini-acp`, …) against the mock: each real ACP agent run
//! through `orchestrate run`, as orchestrate's own ACP client holds the conversation. One
//! [`AcpAgent`] per preset says how its agent is pointed at the mock (the native CLI's
//! description, [`Cli`], and what the ACP mode needs beyond it) and what it does that
//! differs (whether it asks permission, what usage it reports); the scenarios are written
//! once:
//!
//! - a text answer, with the usage the agent reports;
//! - a command the agent asks permission for, allowed by the policy for an agent that
//!   lists `bash` and rejected for one that does not, which then never runs (agents that
//!   never ask are left out, with the reason);
//! - a runtime timeout on a hung stream: `session/cancel` is the first thing sent, and
//!   nothing of the run is left;
//! - a turn budget, stopped the same way;
//! - a message sent while the agent works (`orchestrate send`), which the same agent
//!   process gets as its next prompt once the turn ends: the model sees it after the
//!   first exchange, and its answer is the run's;
//! - a message sent with `--interrupt` while the model holds the first turn: the turn is
//!   cancelled (`session/cancel`), and the message's answer is the run's, from the same
//!   process.

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cli::{text_item, Cli, ToolUse};
use super::clis;
use super::harness::{note, Needing};
use super::{report, Finished, Sandbox};
use crate::mock_llm::{MockLlm, MockUsage, Reply, Script};

const WALL_CLOCK: Duration = Duration::from_secs(90);
const REPORT_LINE_CHARS: usize = 600;

const WORKER: &str = "---\nname: worker\ndescription: d\ntools: read, bash\n---\nYou are terse.\n";
/// Edits, but runs no commands.
const EDITOR: &str = "---\nname: editor\ndescription: d\ntools: read, edit\n---\nYou edit files.\n";
const IMPLEMENTER: &str =
    "---\nname: implementer\ndescription: d\ntools: read, edit, write, bash\n---\nYou change files.\n";

/// One ACP preset.
pub struct AcpAgent {
    /// The backend's name.
    pub name: &'static str,
    /// The installs it needs, `(variable, name)`: its own first.
    pub needs: &'static [(&'static str, &'static str)],
    /// The native CLI: model, how it reaches the mock, its shell tool.
    pub native: &'static Cli,
    /// What its ACP mode needs beyond the native CLI's configuration.
    pub configure: fn(&mut Sandbox, &MockLlm),
    /// The tool call it asks permission for (given the file it creates); `Err`: it never
    /// asks, and why (the scenario is not listed for it).
    pub asks: Result<fn(&str) -> ToolUse, &'static str>,
    /// After a rejected request it asks the model again (which then answers); else it
    /// ends the turn with no answer.
    pub answers_after_reject: bool,
    /// What it reports of a turn's usage.
    pub reports: Reports,
}

#[derive(Clone, Copy)]
pub struct Reports {
    /// The turn's input and output tokens (the prompt's result, or a quota in its `_meta`).
    pub tokens: bool,
    /// A cost (`usage_update`).
    pub cost: bool,
}

/// A message sent to a run reaches the agent's running process, which matters here: a
/// later process cannot continue the session of gemini (its session/load answers "No
/// previous sessions found for this project"), of opencode (its sessions are in its data
/// folder, which the sandbox gives each process anew) nor of pi-acp (its session folder
/// too: the loaded session is empty).
pub const AGENTS: [AcpAgent; 5] = [
    AcpAgent {
        name: "gemini-acp",
        needs: &[("ORCHESTRATE_CONTRACT_GEMINI", "gemini")],
        native: &clis::gemini::GEMINI,
        configure: |_, _| {},
        // `echo` runs without asking; a command that writes asks.
        asks: Ok(|path| (clis::gemini::GEMINI.shell)(&format!("touch {path}"))),
        answers_after_reject: true,
        reports: Reports {
            tokens: true,
            cost: false,
        },
    },
    AcpAgent {
        name: "opencode-acp",
        needs: &[("ORCHESTRATE_CONTRACT_OPENCODE", "opencode")],
        native: &clis::opencode::OPENCODE,
        configure: opencode_asks,
        asks: Ok(|path| (clis::opencode::OPENCODE.shell)(&format!("touch {path}"))),
        answers_after_reject: false,
        reports: Reports {
            tokens: true,
            cost: false,
        },
    },
    AcpAgent {
        name: "claude-acp",
        needs: &[("ORCHESTRATE_CONTRACT_CLAUDE_AGENT_ACP", "claude-agent-acp")],
        native: &clis::claude::CLAUDE,
        configure: |_, _| {},
        asks: Ok(|path| (clis::claude::CLAUDE.shell)(&format!("touch {path}"))),
        answers_after_reject: true,
        reports: Reports {
            tokens: true,
            cost: true,
        },
    },
    AcpAgent {
        name: "codex-acp",
        needs: &[("ORCHESTRATE_CONTRACT_CODEX_ACP", "codex-acp")],
        native: &clis::codex::CODEX,
        configure: |_, _| {},
        asks: Err(
            "codex-acp asks only when the model requests an escalation out of codex's own sandbox",
        ),
        answers_after_reject: false,
        reports: Reports {
            tokens: false,
            cost: false,
        },
    },
    AcpAgent {
        name: "pi-acp",
        needs: &[
            ("ORCHESTRATE_CONTRACT_PI_ACP", "pi-acp"),
            ("ORCHESTRATE_CONTRACT_PI", "pi"),
        ],
        native: &clis::pi::PI,
        configure: pi_on_path,
        asks: Err("pi has no permission requests"),
        answers_after_reject: false,
        reports: Reports {
            tokens: false,
            cost: false,
        },
    },
];

/// opencode asks only for tools whose rule is `ask`.
fn opencode_asks(sb: &mut Sandbox, _: &MockLlm) {
    let file = sb.home.join(".config/opencode/opencode.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    config["permission"] = json!({"bash": "ask"});
    std::fs::write(&file, config.to_string()).unwrap();
}

/// pi-acp runs `pi --mode rpc`, with the model pi's settings name.
fn pi_on_path(sb: &mut Sandbox, _: &MockLlm) {
    let pi = std::env::var("ORCHESTRATE_CONTRACT_PI").expect("pi is installed");
    let dir = sb.root.path().join("pi-agent");
    let settings = json!({"retry": {"enabled": false}, "defaultProvider": "mock",
                          "defaultModel": "mock-1", "quietStartup": true});
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    sb.env("PI_ACP_PI_COMMAND", pi);
}

/// One scenario, run for one preset with its binary.
type Scenario = fn(&'static AcpAgent, &Path);

/// Every scenario of every preset.
pub fn all() -> Vec<Needing> {
    let mut out = Vec::new();
    for agent in &AGENTS {
        let scenarios: [(&str, Scenario); 6] = [
            ("a_text_answer_has_the_usage_the_agent_reports", text_answer),
            (
                "a_command_is_allowed_for_an_agent_with_bash_and_rejected_for_one_without",
                permissions,
            ),
            (
                "a_runtime_timeout_sends_session_cancel_first_and_leaves_nothing_running",
                runtime_timeout,
            ),
            (
                "a_turn_budget_stops_the_agent_with_session_cancel",
                turn_budget,
            ),
            (
                "a_message_sent_mid_run_is_the_next_prompt_of_the_same_process",
                message_mid_run,
            ),
            (
                "send_interrupt_cancels_the_turn_and_the_message_is_answered",
                interrupt_mid_run,
            ),
        ];
        for (name, run) in scenarios {
            if name.starts_with("a_command_") && agent.asks.is_err() {
                continue;
            }
            out.push(Needing {
                name: format!("{}::{name}", agent.name),
                clis: agent.needs,
                run: Box::new(move |bin: &Path| run(agent, bin)),
                on_request: false,
            });
        }
    }
    out
}

/// A sandbox whose agent talks only to a mock running `script` (made with the sandbox at
/// hand), with the agents written.
fn setup(
    agent: &AcpAgent,
    bin: &Path,
    script: impl FnOnce(&Sandbox) -> Script,
) -> (MockLlm, Sandbox) {
    let mut sb = Sandbox::with_bin(bin.to_path_buf(), agent.name, agent.native.model);
    let mock = MockLlm::start(script(&sb));
    sb.catch_outbound(&mock);
    (agent.native.configure)(&mut sb, &mock);
    (agent.configure)(&mut sb, &mock);
    for (name, text) in [
        ("worker", WORKER),
        ("editor", EDITOR),
        ("implementer", IMPLEMENTER),
    ] {
        sb.agent(name, text);
    }
    (mock, sb)
}

/// What orchestrate wrote to the agent: the `method` of each request and notification,
/// `reply` for each answer to the agent's own requests.
fn sent(result: &Value) -> Vec<String> {
    let session = Path::new(result["sessionFile"].as_str().expect("sessionFile"));
    let text = std::fs::read_to_string(session.with_file_name("stdin.jsonl")).expect("stdin.jsonl");
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            v["method"]
                .as_str()
                .map_or("reply".to_string(), str::to_string)
        })
        .collect()
}

fn text_answer(agent: &'static AcpAgent, bin: &Path) {
    let usage = MockUsage {
        input: 200,
        output: 14,
        cached: 40,
    };
    let hello = "Hello from mock.";
    let (mock, sb) = setup(agent, bin, |_| Script::always(Reply::text(hello, usage)));
    let out = sb.run("worker", "Say hi.", &[], WALL_CLOCK);
    report("text answer", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        (
            &r["exitCode"],
            &r["output"],
            &r["backend"],
            &r["childSessionId"].is_string()
        ),
        (&json!(0), &json!(hello), &json!(agent.name), &true)
    );
    assert_eq!(r["displayItems"], json!([text_item(hello)]));
    let u = &r["usage"];
    if agent.reports.tokens {
        // Cached tokens are input too, whichever way the agent splits them.
        let input = u["input"].as_u64().unwrap() + u["cacheRead"].as_u64().unwrap();
        assert_eq!(
            (input, &u["output"]),
            (usage.input, &json!(usage.output)),
            "{u}"
        );
    } else {
        assert_eq!((&u["input"], &u["output"]), (&json!(0), &json!(0)), "{u}");
    }
    assert_eq!(u["cost"].as_f64().unwrap() > 0.0, agent.reports.cost, "{u}");
    // The prompt, the agent's instructions in front of the task, went over ACP.
    let methods = sent(&r);
    assert_eq!(methods[..2], ["initialize", "session/new"], "{methods:?}");
    assert_eq!(
        methods.last().map(String::as_str),
        Some("session/prompt"),
        "{methods:?}"
    );
    let first = &mock.conversation()[0];
    assert!(
        first.body.to_string().contains("You are terse."),
        "the agent's prompt reached the model: {}",
        first.body
    );
}

fn message_mid_run(agent: &'static AcpAgent, bin: &Path) {
    const MESSAGE: &str = "Look for the blue file instead.";
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let shell = (agent.native.shell)("sleep 3");
    let (mock, sb) = setup(agent, bin, |_| {
        Script::sequence(vec![
            shell.reply.clone(),
            Reply::text("The red file.", usage),
            Reply::text("The blue file, as asked.", usage),
        ])
    });
    let out = super::scenarios::send_mid_run(&mock, &sb, MESSAGE);
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(r["output"], json!("The blue file, as asked."));
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": MESSAGE, "delivery": "nextPrompt"}])
    );
    one_process(&sb, &r, &["session/prompt", "session/prompt"]);
    let reqs = mock.conversation();
    let asked = reqs.last().expect("a request").body.to_string();
    assert!(
        asked.contains(MESSAGE) && asked.contains("The red file."),
        "{asked}"
    );
}

/// The model holds the first turn; `send --interrupt` cancels it, and the message's
/// answer, from the same process and session, is the run's.
fn interrupt_mid_run(agent: &'static AcpAgent, bin: &Path) {
    const MESSAGE: &str = "Stop and say which file is blue.";
    let usage = MockUsage {
        input: 50,
        output: 5,
        cached: 0,
    };
    let (mock, sb) = setup(agent, bin, |_| {
        Script::sequence(vec![
            Reply::hang("Thinking about it"),
            Reply::text("The blue file.", usage),
        ])
    });
    let start = std::time::Instant::now();
    let child = sb
        .command("worker", "Find the file.", &[])
        .spawn()
        .expect("spawn orchestrate");
    assert!(
        mock.wait_for_conversation(1, WALL_CLOCK),
        "the agent never asked the model"
    );
    let run = only_run(&sb);
    let sent = sb
        .in_sandbox(super::orchestrate_command(&[
            "send",
            &run,
            MESSAGE,
            "--interrupt",
        ]))
        .output()
        .unwrap();
    assert_eq!(sent.status.code(), Some(0), "{sent:?}");
    let out = super::wait_bounded(child, start, WALL_CLOCK);
    report("interrupt mid-run", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let mut r = out.result();
    r["messages"][0]["at"] = json!("AT");
    assert_eq!(r["output"], json!("The blue file."));
    assert_eq!(
        r["messages"],
        json!([{"at": "AT", "text": MESSAGE, "delivery": "interrupted"}])
    );
    one_process(
        &sb,
        &r,
        &["session/prompt", "session/cancel", "session/prompt"],
    );
    let asked = mock
        .conversation()
        .last()
        .expect("a request")
        .body
        .to_string();
    assert!(asked.contains(MESSAGE), "{asked}");
}

fn only_run(sb: &Sandbox) -> String {
    let runs: Vec<_> = std::fs::read_dir(sb.state.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// One agent process served the run (one attempt, one stdin record), and orchestrate's
/// prompts and cancels to it, after the handshake, were `turns`.
fn one_process(sb: &Sandbox, r: &Value, turns: &[&str]) {
    assert_eq!(r["attempts"], json!(1), "{r}");
    let run = sb.state.join("runs").join(only_run(sb));
    assert!(!run.join("stdin.attempt-2.jsonl").exists());
    let sent: Vec<String> = std::fs::read_to_string(run.join("stdin.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let m = serde_json::from_str::<Value>(l).unwrap()["method"].clone();
            m.as_str()
                .filter(|m| m.starts_with("session/prompt") || *m == "session/cancel")
                .map(str::to_string)
        })
        .collect();
    assert_eq!(sent, turns);
}

fn permissions(agent: &'static AcpAgent, bin: &Path) {
    let asks = agent.asks.expect("listed only for an agent that asks");
    for (name, allowed) in [("implementer", true), ("editor", false)] {
        let (mock, sb) = setup(agent, bin, |sb| {
            let tool = asks(sb.work.join("pwned.txt").to_str().unwrap());
            Script::tool_then_text(tool.reply, Reply::text("Done.", MockUsage::default()))
        });
        let path = sb.work.join("pwned.txt");
        let out = sb.run(
            name,
            "Create pwned.txt.",
            &["--idle-timeout", "60s"],
            WALL_CLOCK,
        );
        report(name, &mock, &out, REPORT_LINE_CHARS);
        let r = out.result();
        if allowed || agent.answers_after_reject {
            assert_eq!(out.status, 0, "stderr: {}", out.stderr);
            assert_eq!(r["output"], json!("Done."));
        } else {
            // The turn ended on the refusal, with no answer.
            assert_eq!(out.status, 1, "stderr: {}", out.stderr);
            let error = r["error"].as_str().unwrap_or_default();
            let expected = format!("{} exited without a final answer", agent.name);
            assert!(error.starts_with(&expected), "{r}");
        }
        let decision = if allowed { "allowed" } else { "rejected" };
        let records = r["permissions"].as_array().cloned().unwrap_or_default();
        assert_eq!(
            records
                .iter()
                .map(|p| (p["decision"].clone(), p["by"].clone()))
                .collect::<Vec<_>>(),
            [(json!(decision), json!("policy"))],
            "{r}"
        );
        assert_eq!(path.exists(), allowed, "{}", path.display());
    }
}

fn runtime_timeout(agent: &'static AcpAgent, bin: &Path) {
    let (mock, sb) = setup(agent, bin, |_| {
        Script::always(Reply::hang("Thinking about it"))
    });
    // Past the slowest agent's start on a loaded machine (opencode took over 15 s to its
    // first request), so that the timeout falls on the hung stream.
    let flags = [
        "--timeout",
        "30s",
        "--idle-timeout",
        "120s",
        "--kill-grace",
        "5s",
    ];
    let (out, tree) = sb.run_until_timeout(&mock, "worker", &flags, 1, None, WALL_CLOCK);
    report("runtime timeout", &mock, &out, REPORT_LINE_CHARS);
    note(&format!("the run's tree: {tree:?}"));
    assert_eq!(out.status, 124, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(r["timeoutReason"], json!("runtime"));
    assert_eq!(r["termination"]["reason"], json!("runtimeTimeout"), "{r}");
    stopped_with_cancel(&sent(&r));
}

fn turn_budget(agent: &'static AcpAgent, bin: &Path) {
    let shell = |n: u32| (agent.native.shell)(&format!("echo step-{n}")).reply;
    let script = Script::sequence(vec![
        shell(1),
        shell(2),
        shell(3),
        Reply::text("Done.", MockUsage::default()),
    ]);
    let (mock, sb) = setup(agent, bin, |_| script);
    let out: Finished = sb.run(
        "worker",
        "Do the three steps.",
        &[
            "--max-turns",
            "1",
            "--idle-timeout",
            "60s",
            "--kill-grace",
            "5s",
        ],
        WALL_CLOCK,
    );
    report("turn budget", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 1, "stderr: {}", out.stderr);
    let r = out.result();
    assert_eq!(
        r["limit"],
        json!({"kind": "turns", "limit": 1, "used": 1}),
        "{r}"
    );
    assert_eq!(r["termination"]["reason"], json!("budget"), "{r}");
    stopped_with_cancel(&sent(&r));
}

/// The stop began with `session/cancel` during the prompt: after it orchestrate wrote
/// only answers to the agent's requests (a permission request pending then is answered
/// `cancelled`), and nothing but `session/prompt` and such answers came before it since
/// the prompt.
fn stopped_with_cancel(methods: &[String]) {
    let cancel = methods
        .iter()
        .position(|m| m == "session/cancel")
        .unwrap_or_else(|| panic!("no session/cancel: {methods:?}"));
    assert!(
        methods[cancel + 1..].iter().all(|m| m == "reply"),
        "{methods:?}"
    );
    let before: Vec<&String> = methods[..cancel].iter().filter(|m| *m != "reply").collect();
    assert_eq!(
        before.last().map(|m| m.as_str()),
        Some("session/prompt"),
        "{methods:?}"
    );
}
