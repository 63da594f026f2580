//! pi (`@earendil-works/pi-coding-agent`): OpenAI Chat Completions through a `mock`
//! provider (`openai-completions`, a literal key, 1/2 $ per million tokens) in its own
//! agent dir (`PI_CODING_AGENT_DIR`), retries off, offline (`PI_OFFLINE=1`, version check
//! and telemetry off).

use serde_json::json;

use crate::mock_llm::contract::cli::*;
use crate::mock_llm::contract::Sandbox;
use crate::mock_llm::{Api, MockLlm};

pub const PI: Cli = Cli {
    name: "pi",
    var: "ORCHESTRATE_CONTRACT_PI",
    model: "mock/mock-1",
    configure,
    wire: Wire {
        api: Api::OpenAiChat,
        path: "/v1/chat/completions",
        auth: ("authorization", "Bearer test-key"),
        body: r#"{"model": "mock-1", "stream": true, "stream_options": {"include_usage": true}}"#,
    },
    prompt_in: PromptIn::System,
    traffic: Traffic::ConversationOnly,
    prices: Some(Prices {
        input: 1.0,
        output: 2.0,
        cache_read: 0.0,
    }),
    shell,
    write,
    worker_tools: Offered::Exactly(&["bash", "read"]),
    warnings: &[(
        "reader",
        "pi cannot sandbox bash: it was removed from this read-only agent",
    )],
    // pi exits 0 in json mode even when the model call failed; orchestrate reads the
    // failure from the stop reason.
    unauthorized: Unauthorized {
        exit_code: 0,
        turns: 1,
    },
    hang: Hang {
        idle_timeout_secs: 5,
        partial_text: true,
        min_processes: 1,
        env: &[],
        ends_its_turn: None,
    },
    refusals: &[Refusal {
        test: "a_read_only_agent_cannot_write_with_write_or_bash",
        agent: "reader",
        answer: "I could not write.",
        turns: 3,
        // pi cannot run a shell read-only: the agent has neither tool.
        attempts: |path| {
            vec![
                Attempt::new(write(path), "Tool write not found"),
                Attempt::new(shell("echo x > pwned.txt"), "Tool bash not found"),
            ]
        },
        offered: Offered::Exactly(&["grep", "read"]),
        workdir_files: &[],
    }],
    resume: Some(Resume {
        session_file: Some("child/pi-session.jsonl"),
    }),
    // No option for a schema: orchestrate asks for the JSON in the prompt.
    output_schema: SchemaSent::Prompt,
    tool_never_returns: true,
    unreachable: Unreachable {
        env: &[],
        words: "Connection error",
        stopped: false,
    },
    fallback_model: Some("mock/mock-2"),
    fallback_attempts: 2,
    config_plants: |sb| {
        let dir = sb.root.path().join("pi-agent");
        vec![
            dir.join("settings.json"),
            dir.join("models.json"),
            dir.join("extensions/evil.ts"),
        ]
    },
    known_defects: &[],
    // `auto_retry_start` carries the 429; its delay is pi's own backoff (2 s, doubling),
    // not the provider's retry-after, which only its provider-level retries (off by
    // default) follow, silently.
    rate_limit: Some(RateLimit {
        retries_on: |sb| {
            std::fs::write(sb.root.path().join("pi-agent").join("settings.json"), "{}").unwrap()
        },
        says_delay: false,
    }),
};

fn shell(command: &str) -> ToolUse {
    ToolUse::call("bash", json!({ "command": command }))
}

fn write(path: &str) -> ToolUse {
    ToolUse::call("write", json!({"path": path, "content": "x\n"}))
}

/// `<root>/pi-agent`: the `mock` provider (priced as [`PI`] says) and retries off.
fn configure(sb: &mut Sandbox, mock: &MockLlm) {
    let dir = sb.root.path().join("pi-agent");
    std::fs::create_dir_all(&dir).unwrap();
    let price = PI.prices.unwrap();
    // The run's model, and the fallback scenario's second one.
    let models: Vec<serde_json::Value> = ["mock-1", "mock-2"]
        .into_iter()
        .map(|id| json!({"id": id, "reasoning": false, "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": price.input, "output": price.output, "cacheRead": price.cache_read, "cacheWrite": 0}}))
        .collect();
    let models = json!({"providers": {"mock": {
        "baseUrl": format!("{}/v1", mock.base_url()),
        "api": "openai-completions",
        "apiKey": "test-key",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false, "maxTokensField": "max_tokens"},
        "models": models
    }}});
    std::fs::write(dir.join("models.json"), models.to_string()).unwrap();
    let settings = json!({"retry": {"enabled": false}});
    std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
    sb.env("PI_CODING_AGENT_DIR", &dir)
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .env("PI_TELEMETRY", "0");
}
