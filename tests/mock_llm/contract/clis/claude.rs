//! Claude Code (`claude -p --output-format stream-json`): Anthropic Messages
//! (`/v1/messages?beta=true`) at `ANTHROPIC_BASE_URL`, nonessential traffic (telemetry,
//! update checks, error reports) off, retries off, `IS_SANDBOX=1` (claude refuses some
//! permission modes as root without it), `CLAUDE_CONFIG_DIR` in the sandbox's HOME.

use serde_json::json;

use crate::mock_llm::contract::cli::*;
use crate::mock_llm::contract::Sandbox;
use crate::mock_llm::{Api, MockLlm};

pub const CLAUDE: Cli = Cli {
    name: "claude",
    var: "ORCHESTRATE_CONTRACT_CLAUDE",
    // In claude's price table, so that it computes a cost.
    model: "claude-sonnet-4-5",
    configure,
    wire: Wire {
        api: Api::Anthropic,
        path: "/v1/messages?beta=true",
        auth: ("x-api-key", "test-key"),
        body: r#"{"model": "claude-sonnet-4-5", "stream": true}"#,
    },
    prompt_in: PromptIn::System,
    traffic: Traffic::ConversationOnly,
    // claude-sonnet-4-5 in claude's own table, $ per million tokens.
    prices: Some(Prices {
        input: 3.0,
        output: 15.0,
        cache_read: 0.3,
    }),
    shell,
    write: |path| ToolUse::call("Write", json!({"file_path": path, "content": "x\n"})),
    worker_tools: Offered::Exactly(&["Bash", "Read"]),
    // None for the read-only agent's Bash either: its input is streamed, and a command
    // its allow rules (git's read-only commands) do not cover is put to the policy.
    warnings: &[],
    // Exit 1 with `is_error: true`; a 401 whose message is Anthropic's own "invalid
    // x-api-key" would read "Invalid API key · Fix external API key" instead.
    unauthorized: Unauthorized {
        exit_code: 1,
        turns: 1,
    },
    // claude prints an assistant line only once a message is complete (no
    // --include-partial-messages): no partial text. One process, the native binary.
    hang: Hang {
        idle_timeout_secs: 5,
        partial_text: true,
        min_processes: 1,
        env: &[],
        // Interrupted at the idle timeout, claude prints the aborted message and prices
        // its four tokens ("Thinking about it", `outputTokens: 4` in its `modelUsage`) at
        // $15 per million output tokens.
        ends_its_turn: Some(0.00006),
    },
    refusals: &[Refusal {
        test: "a_read_only_agent_cannot_write_with_write_or_bash",
        agent: "reader",
        answer: "I could not write.",
        turns: 5,
        attempts: read_only_attempts,
        offered: Offered::Exactly(&["Bash", "Grep", "Read"]),
        workdir_files: &[],
    }],
    resume: Some(Resume { session_file: None }),
    // `--json-schema`: a `StructuredOutput` tool (observed with 2.1.332: no tool_choice,
    // no output format; the call's input is checked against the schema and a mismatch
    // is a tool error; one request answered by the call counts as 2 turns; a text answer
    // gets "[structured-output-enforce] You MUST call the StructuredOutput tool…" once).
    output_schema: SchemaSent::Tool {
        name: "StructuredOutput",
        turns: 2,
        text_requests: 2,
    },
    tool_never_returns: true,
    unreachable: Unreachable {
        env: &[("CLAUDE_CODE_MAX_RETRIES", "10")],
        words: "API retry",
        stopped: true,
    },
    fallback_model: Some("claude-haiku-4-5"),
    fallback_attempts: 2,
    config_plants: |sb| {
        let dir = sb.home.join(".claude");
        vec![
            dir.join("settings.json"),
            dir.join("hooks/evil.sh"),
            dir.join("commands/evil.md"),
            dir.join("plugins/evil/plugin.json"),
        ]
    },
    known_defects: &[],
    // `system/api_retry` with `error_status: 429` and `retry_delay_ms`, the provider's
    // retry-after (7068 ms for a 7 s retry-after).
    rate_limit: Some(RateLimit {
        retries_on: |sb| {
            sb.env("CLAUDE_CODE_MAX_RETRIES", "10");
        },
        says_delay: true,
    }),
};

fn shell(command: &str) -> ToolUse {
    ToolUse::call("Bash", json!({"command": command, "description": "run"}))
}

/// `Write` is not in a read-only session at all (`--tools`), and every Bash command
/// that writes is outside the allow rules, so claude asks orchestrate (its input is
/// streamed), whose policy rejects it: the agent is read-only, and no sandbox keeps a
/// command from writing here. A redirect, and two through `git`, whose read-only
/// subcommands are what its Bash may run without asking (`git diff --output` writes a
/// file, even outside a repository; claude's rule matcher does not let
/// `Bash(git diff:*)` cover `--output` or a redirect).
fn read_only_attempts(path: &str) -> Vec<Attempt> {
    let why = "the agent is read-only and no sandbox keeps a command from writing";
    let denied = format!("Permission denied by orchestrate's permission policy: {why}.");
    let bash = |command: &str| {
        Attempt::new(shell(command), denied.clone()).asked(json!({
            "tool": "Bash", "decision": "rejected", "by": "policy", "title": command,
            "reason": why,
        }))
    };
    vec![
        Attempt::new((CLAUDE.write)(path), "No such tool available: Write"),
        bash("echo x > pwned.txt"),
        bash("git diff --no-index --output=pwned.txt /dev/null /etc/hostname"),
        bash("git log > pwned.txt"),
    ]
}

fn configure(sb: &mut Sandbox, mock: &MockLlm) {
    let config = sb.home.join(".claude");
    std::fs::create_dir_all(&config).unwrap();
    sb.env("ANTHROPIC_BASE_URL", mock.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("CLAUDE_CONFIG_DIR", &config)
        // No telemetry, update checks, error reports or other side traffic (without it:
        // CONNECT api.anthropic.com at startup).
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        // Failures come straight back instead of after ten retries with backoff.
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // claude refuses to run some permission modes as root unless it is told it is
        // in a sandbox; the tests may run as root.
        .env("IS_SANDBOX", "1");
}
