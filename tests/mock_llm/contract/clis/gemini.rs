//! Gemini CLI (`gemini -p … --output-format stream-json`): Gemini
//! `streamGenerateContent?alt=sse` at `GOOGLE_GEMINI_BASE_URL`, with a concrete model
//! (`auto` adds a routing call whose tokens count too). `~/.gemini/settings.json` selects
//! API-key auth (the key variable alone selects "gateway", which headless mode refuses)
//! and turns usage statistics, telemetry and update checks off.

use serde_json::{json, Value};

use crate::mock_llm::contract::cli::*;
use crate::mock_llm::contract::Sandbox;
use crate::mock_llm::{Api, MockLlm};

/// What orchestrate says of an agent with bash and no read-only flag.
const YOLO: &str = "gemini keeps its own tool set; the restriction is approval mode yolo";

pub const GEMINI: Cli = Cli {
    name: "gemini",
    var: "ORCHESTRATE_CONTRACT_GEMINI",
    model: "gemini-2.5-flash",
    configure,
    wire: Wire {
        api: Api::Gemini,
        path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        auth: ("x-goog-api-key", "test-key"),
        body: "{}",
    },
    // In front of the task.
    prompt_in: PromptIn::FirstMessage,
    traffic: Traffic::ConversationOnly,
    prices: None,
    shell: |command| ToolUse::call("run_shell_command", json!({ "command": command })),
    write: |path| ToolUse::call("write_file", json!({"file_path": path, "content": "x\n"})),
    // Approval mode yolo keeps the shell headless.
    worker_tools: Offered::Including(&["run_shell_command"]),
    warnings: &[
        ("worker", YOLO),
        ("implementer", YOLO),
        ("reader", "gemini keeps its own tool set; the restriction is approval mode plan and a policy denying enter_plan_mode, exit_plan_mode, run_shell_command, write_file, replace"),
        ("editor", "gemini keeps its own tool set; the restriction is approval mode auto_edit and a policy denying enter_plan_mode, exit_plan_mode, run_shell_command"),
    ],
    // gemini exits with the HTTP status mod 256.
    unauthorized: Unauthorized {
        exit_code: 145,
        turns: 0,
    },
    // Text comes as deltas; node and the node it relaunches itself as, which print
    // nothing for more than 5 s on a loaded machine (seen at load 7 on 2 cores).
    hang: Hang {
        idle_timeout_secs: 10,
        partial_text: true,
        min_processes: 2,
        env: &[],
        ends_its_turn: None,
    },
    refusals: &[
        Refusal {
            test: "a_read_only_agent_cannot_write_nor_leave_plan_mode",
            agent: "reader",
            answer: "I could not write.",
            turns: 6,
            attempts: read_only_attempts,
            offered: Offered::Excluding(&[
                "enter_plan_mode",
                "exit_plan_mode",
                "replace",
                "run_shell_command",
                "write_file",
            ]),
            workdir_files: &[],
        },
        // Without the policy, an auto_edit run reached the shell this way (observed): plan
        // mode is allowed headless, leaving it is approved headless, and leaving it means
        // YOLO.
        Refusal {
            test: "an_agent_without_bash_cannot_reach_the_shell_through_plan_mode",
            agent: "editor",
            answer: "No shell here.",
            turns: 4,
            attempts: |_| {
                vec![
                    not_found(call("enter_plan_mode", json!({"reason": "plan first"}))),
                    not_found(exit_plan_mode()),
                    not_found((GEMINI.shell)("echo x > pwned.txt")),
                ]
            },
            offered: Offered::Excluding(&["enter_plan_mode", "exit_plan_mode", "run_shell_command"]),
            workdir_files: &[],
        },
    ],
    resume: None,
    // No option for a schema: orchestrate asks for the JSON in the prompt.
    output_schema: SchemaSent::Prompt,
    // gemini runs the shell under a pseudo-terminal, in a session of its own; it dies
    // with the run because the whole tree does (it outlived gemini's process group
    // before orchestrate held the tree in a PID namespace).
    tool_never_returns: true,
    // gemini retries with backoff and says so only on stderr.
    unreachable: Unreachable {
        env: &[],
        words: "Retrying with backoff... Error: exception TypeError: fetch failed",
        stopped: true,
    },
    fallback_model: Some("gemini-2.5-pro"),
    fallback_attempts: 1,
    config_plants: |sb| {
        let dir = sb.home.join(".gemini");
        vec![
            dir.join("settings.json"),
            dir.join("extensions/evil/gemini-extension.json"),
            dir.join("commands/evil.toml"),
        ]
    },
    known_defects: &[],
    // `Attempt 1 failed with status 429. Retrying with backoff...` on stderr.
    rate_limit: Some(RateLimit {
        retries_on: |_| {},
        says_delay: false,
    }),
};

fn call(name: &str, args: Value) -> ToolUse {
    ToolUse::call(name, args)
}

fn exit_plan_mode() -> ToolUse {
    call("exit_plan_mode", json!({"plan_filename": "plan.md"}))
}

/// A tool the policy removed from the session: the model is told it does not exist.
fn not_found(tool: ToolUse) -> Attempt {
    // The tool result as JSON text: the quotes are escaped.
    let refusal = format!(r#"Tool \"{}\" not found"#, tool.name());
    Attempt::new(tool, refusal)
}

/// The writer, then the ways around plan mode seen to work without the policy: leaving
/// it (headless approves that by itself and switches to YOLO), a general-purpose
/// subagent (plan mode itself only lets its two read-only subagents run), the shell.
fn read_only_attempts(path: &str) -> Vec<Attempt> {
    let subagent = call(
        "invoke_agent",
        json!({"agent_name": "generalist", "prompt": "Create pwned.txt containing x."}),
    );
    vec![
        not_found((GEMINI.write)(path)),
        not_found(exit_plan_mode()),
        not_found((GEMINI.write)(path)),
        Attempt::new(subagent, "denied by policy"),
        not_found((GEMINI.shell)("echo x > pwned.txt")),
    ]
}

fn configure(sb: &mut Sandbox, mock: &MockLlm) {
    let dot_gemini = sb.home.join(".gemini");
    std::fs::create_dir_all(&dot_gemini).unwrap();
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
    });
    std::fs::write(dot_gemini.join("settings.json"), settings.to_string()).unwrap();
    sb.env("GOOGLE_GEMINI_BASE_URL", mock.base_url())
        .env("GEMINI_API_KEY", "test-key")
        // gemini 0.61.0 sometimes takes over 2 s (orchestrate's default exit grace) to
        // exit after its result, with or without the sandbox: node's exit waits for its
        // worker threads (seen with strace: one thread 1.9 s late on a loaded machine).
        // The scenarios check how it ended, not how loaded the machine was.
        .env("ORCHESTRATE_EXIT_GRACE", "10s");
}
