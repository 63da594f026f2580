//! Codex CLI (`codex exec --json`): OpenAI Responses (`/v1/responses`) through a `mock`
//! model provider in `CODEX_HOME/config.toml` (HTTP SSE; the built-in provider would try
//! WebSockets first), retries off, plugins and analytics off (without them codex
//! connects to github.com and chatgpt.com), no update check.

use serde_json::json;

use crate::mock_llm::contract::cli::*;
use crate::mock_llm::contract::Sandbox;
use crate::mock_llm::{Api, MockLlm};

pub const CODEX: Cli = Cli {
    name: "codex",
    var: "ORCHESTRATE_CONTRACT_CODEX",
    // A slug codex knows (an unknown one adds a "Model metadata … not found" error item).
    model: "gpt-5.5",
    configure,
    wire: Wire {
        api: Api::OpenAiResponses,
        path: "/v1/responses",
        auth: ("authorization", "Bearer test-key"),
        body: r#"{"model": "gpt-5.5", "stream": true}"#,
    },
    // As developer instructions.
    prompt_in: PromptIn::System,
    traffic: Traffic::ConversationOnly,
    prices: None,
    shell,
    write,
    worker_tools: Offered::Including(&["exec_command"]),
    warnings: &[],
    unauthorized: Unauthorized {
        exit_code: 1,
        turns: 0,
    },
    // The node launcher and the native binary.
    hang: Hang {
        idle_timeout_secs: 5,
        partial_text: false,
        min_processes: 2,
        env: &[],
        ends_its_turn: None,
    },
    refusals: &[Refusal {
        test: "a_read_only_agent_cannot_write_with_apply_patch_or_the_shell",
        agent: "reader",
        answer: "I could not write.",
        turns: 1,
        // `-s read-only` rejects the patch outright (exec never asks for approval) and
        // runs the command in a read-only sandbox. codex prints no item for either.
        attempts: |path| {
            vec![
                Attempt::new(
                    write(path).hidden(),
                    "writing is blocked by read-only sandbox",
                ),
                Attempt::new(
                    shell("echo x > pwned.txt").hidden(),
                    "Read-only file system",
                ),
            ]
        },
        offered: Offered::Including(&["apply_patch", "exec_command"]),
        workdir_files: &[],
    }],
    resume: Some(Resume { session_file: None }),
    // `--output-schema FILE`: `text.format` = {type: json_schema, name:
    // codex_output_schema, strict: true, schema} on every request; codex does not check
    // the answer itself.
    output_schema: SchemaSent::TextFormat,
    tool_never_returns: true,
    unreachable: Unreachable {
        env: &[],
        words: "Reconnecting... waiting for network",
        stopped: true,
    },
    fallback_model: Some("gpt-5.4"),
    fallback_attempts: 2,
    config_plants: |sb| {
        let dir = sb.home.join(".codex");
        vec![
            dir.join("config.toml"),
            dir.join("rules/evil.rules"),
            dir.join("prompts/evil.md"),
        ]
    },
    known_defects: &[],
    // `Reconnecting... 1/4 (exceeded retry limit, last status: 429 Too Many Requests)`;
    // it waits for the retry-after without saying so.
    rate_limit: Some(RateLimit {
        retries_on: |sb| {
            let path = sb.home.join(".codex").join("config.toml");
            let config = std::fs::read_to_string(&path)
                .unwrap()
                .replace("request_max_retries = 0", "request_max_retries = 4")
                .replace("stream_max_retries = 0", "stream_max_retries = 4");
            std::fs::write(path, config).unwrap();
        },
        says_delay: false,
    }),
};

/// codex reports the command it ran wrapped in its login shell.
fn shell(command: &str) -> ToolUse {
    ToolUse::call("exec_command", json!({ "cmd": command })).shown_as(
        "bash",
        json!({ "command": format!("/bin/bash -lc '{command}'") }),
    )
}

/// `apply_patch` is a freeform tool (a `custom_tool_call` whose input is the patch text;
/// as a JSON function call codex rejects it), shown as the change it made.
fn write(path: &str) -> ToolUse {
    ToolUse::custom(
        "apply_patch",
        "*** Begin Patch\n*** Add File: pwned.txt\n+x\n*** End Patch\n",
    )
    .shown_as("edit", json!({"changes": [{"kind": "add", "path": path}]}))
}

fn configure(sb: &mut Sandbox, mock: &MockLlm) {
    let codex_home = sb.home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "{model}"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{url}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
"#,
        model = CODEX.model,
        url = mock.base_url()
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    sb.env("CODEX_HOME", &codex_home)
        .env("MOCK_API_KEY", "test-key");
}
