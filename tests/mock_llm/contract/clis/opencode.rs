//! opencode (`opencode run --format json`): OpenAI Chat Completions through a `mock`
//! provider (`@ai-sdk/openai-compatible`, 1/2/0.5 $ per million tokens) in
//! `~/.config/opencode/opencode.json` (orchestrate's own `OPENCODE_CONFIG`, with the
//! agent, is layered on top of it); models.dev fetches, autoupdate, default plugins and
//! sharing off.

use serde_json::{json, Value};

use crate::mock_llm::contract::cli::*;
use crate::mock_llm::contract::Sandbox;
use crate::mock_llm::{Api, MockLlm};

pub const OPENCODE: Cli = Cli {
    name: "opencode",
    var: "ORCHESTRATE_CONTRACT_OPENCODE",
    model: "mock/mock-model",
    configure,
    wire: Wire {
        api: Api::OpenAiChat,
        path: "/v1/chat/completions",
        auth: ("authorization", "Bearer test-key"),
        body: r#"{"model": "mock-model", "stream": true}"#,
    },
    // As instructions.
    prompt_in: PromptIn::System,
    // The session title is asked for beside the first turn.
    traffic: Traffic::TitleRequests,
    prices: Some(Prices {
        input: 1.0,
        output: 2.0,
        cache_read: 0.5,
    }),
    shell: |command| ToolUse::call("bash", json!({"command": command, "description": "run"})),
    write: |path| ToolUse::call("write", json!({"filePath": path, "content": "x\n"})),
    // The agent's read and bash; the tools it did not list that can write or run a
    // subagent are off; opencode's harmless extras stay.
    worker_tools: Offered::Exactly(&["bash", "read", "skill", "todowrite", "webfetch"]),
    warnings: &[],
    // An `error` event carrying the provider's message.
    unauthorized: Unauthorized {
        exit_code: 1,
        turns: 0,
    },
    // opencode prints nothing until its first model request is under way, 3 to 6 s after
    // it starts on a busy machine: with its logs on stderr (a line every second or so
    // while it starts, none once the stream hangs) the 5 s measure the hang, not startup.
    // One process; it ignores SIGTERM and dies by SIGKILL after the grace.
    hang: Hang {
        idle_timeout_secs: 5,
        partial_text: false,
        min_processes: 1,
        env: &[("OPENCODE_PRINT_LOGS", "1")],
        ends_its_turn: None,
    },
    refusals: &[Refusal {
        test: "a_read_only_agent_cannot_write_nor_hand_the_write_to_a_subagent",
        agent: "reader",
        answer: "I could not write.",
        turns: 4,
        attempts: read_only_attempts,
        // The session never had them.
        offered: Offered::Exactly(&["grep", "read", "skill", "todowrite", "webfetch"]),
        // A project config that allows everything: opencode reads it after
        // orchestrate's file, so only the agent's own settings can hold against it.
        workdir_files: &[(
            "opencode.json",
            r#"{"permission": {"edit": "allow", "bash": "allow", "task": "allow"},
                "tools": {"write": true, "edit": true, "bash": true, "task": true}}"#,
        )],
    }],
    resume: None,
    // opencode 1.18.33 never started the command of a tool call within the 10 s of the
    // scenario (no process, no event): not understood yet, so not run.
    // No option for a schema: orchestrate asks for the JSON in the prompt.
    output_schema: SchemaSent::Prompt,
    tool_never_returns: false,
    // opencode retries with backoff for about a minute, saying so only in its log
    // (which orchestrate turns on), then gives up.
    unreachable: Unreachable {
        env: &[],
        words: "AI_APICallError: Cannot connect to API",
        stopped: true,
    },
    fallback_model: Some("mock/mock-model-2"),
    // opencode retries an overloaded model until the connect limit stops it.
    fallback_attempts: 1,
    config_plants: |sb| {
        let dir = sb.home.join(".config/opencode");
        vec![
            dir.join("opencode.json"),
            dir.join("plugin/evil.ts"),
            dir.join("agent/evil.md"),
        ]
    },
    known_defects: &[],
    // It retries a 429 without a word, in its stream or on stderr.
    rate_limit: None,
};

/// A `general` subagent first (it has write and bash, and without the agent's own
/// `task: false` it would get the two writes that follow as its own turns), then the
/// write tool, then the shell. opencode sends a call of a tool the session does not have
/// to its `invalid` tool, with the name the model used.
fn read_only_attempts(path: &str) -> Vec<Attempt> {
    let subagent = ToolUse::call(
        "task",
        json!({"description": "write", "prompt": "Create pwned.txt containing x.", "subagent_type": "general"}),
    );
    [subagent, (OPENCODE.write)(path), (OPENCODE.shell)("echo x > pwned.txt")]
        .into_iter()
        .map(|tool| {
            let name = tool.name().to_string();
            let error = format!("Model tried to call unavailable tool '{name}'. Available tools: grep, invalid, read, skill, todowrite, webfetch.");
            let shown = json!({"tool": name, "error": error});
            Attempt::new(tool.shown_as("invalid", shown), error)
        })
        .collect()
}

fn configure(sb: &mut Sandbox, mock: &MockLlm) {
    let config_dir = sb.home.join(".config/opencode");
    std::fs::create_dir_all(&config_dir).unwrap();
    let price = OPENCODE.prices.unwrap();
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Mock",
            "options": {"baseURL": format!("{}/v1", mock.base_url()), "apiKey": "test-key"},
            // The run's model, and the fallback scenario's second one.
            "models": {
                "mock-model": {"name": "Mock model",
                    "cost": {"input": price.input, "output": price.output, "cache_read": price.cache_read, "cache_write": 0}},
                "mock-model-2": {"name": "Mock model 2",
                    "cost": {"input": price.input, "output": price.output, "cache_read": price.cache_read, "cache_write": 0}}
            }
        }},
        "model": OPENCODE.model,
        "autoupdate": false,
        "share": "disabled"
    });
    std::fs::write(config_dir.join("opencode.json"), config.to_string()).unwrap();
    // opencode installs `@opencode-ai/plugin` into each config dir from npm, unless the
    // dir has a node_modules and a package-lock naming it; its tools wait for that
    // install, which against an unreachable registry took 1 to 4+ s of silent startup.
    std::fs::create_dir_all(config_dir.join("node_modules")).unwrap();
    let lock: Value = json!({"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}});
    std::fs::write(config_dir.join("package-lock.json"), lock.to_string()).unwrap();
    sb.env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_SHARE", "1");
}
