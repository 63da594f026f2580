//! A CLI's own OpenTelemetry spans join orchestrate's trace: orchestrate hands the child
//! its attempt's span in `TRACEPARENT`, and the child, with its telemetry on, exports
//! spans under it to the same OTLP/HTTP receiver (tests/mock_llm/otlp.rs).

use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::{report, setup, REPORT_LINE_CHARS, WALL_CLOCK};
use crate::mock_llm::contract::cli::Cli;
use crate::mock_llm::otlp::{attr, hex, Received, Receiver};
use crate::mock_llm::{MockUsage, Reply, Script};

const GIVEN_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const GIVEN_SPAN: &str = "00f067aa0ba902b7";

/// Claude Code with its telemetry on (`CLAUDE_CODE_ENABLE_TELEMETRY`, the enhanced
/// telemetry beta for traces, `OTEL_TRACES_EXPORTER=otlp`) under an orchestrate that was
/// handed a trace: one trace, Claude's interaction under orchestrate's attempt, its tool
/// call under the interaction.
pub fn claude_spans_join_the_trace(cli: &Cli, bin: &Path) {
    let receiver = Receiver::start();
    let usage = MockUsage {
        input: 100,
        output: 10,
        cached: 0,
    };
    let shell = (cli.shell)("echo traced").with_usage(usage);
    let (mock, mut sb) = setup(cli, bin, |_| {
        Script::tool_then_text(shell.reply.clone(), Reply::text("Traced.", usage))
    });
    sb.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
        .env("OTEL_TRACES_EXPORTER", "otlp")
        .env("CLAUDE_CODE_ENABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_ENHANCED_TELEMETRY_BETA", "1")
        .env("TRACEPARENT", format!("00-{GIVEN_TRACE}-{GIVEN_SPAN}-01"));
    let out = sb.run("worker", "Run echo traced, then say so.", &[], WALL_CLOCK);
    report("traced", &mock, &out, REPORT_LINE_CHARS);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    // Claude exports at its exit, orchestrate at its own: both are in by now, but give a
    // slow receiver thread a moment.
    let spans = receiver.wait_for(Duration::from_secs(10), |s| {
        s.iter().any(|r| r.span.name == "claude_code.tool")
            && s.iter().any(|r| r.span.name == "invoke_agent worker")
    });
    let names: Vec<(String, String)> = spans
        .iter()
        .map(|s| (s.service.clone(), s.span.name.clone()))
        .collect();
    for s in &spans {
        assert_eq!(
            hex(&s.span.trace_id),
            GIVEN_TRACE,
            "{} ({}): one trace; all: {names:?}",
            s.span.name,
            s.service
        );
    }
    let one = |name: &str| -> &Received {
        let found: Vec<&Received> = spans.iter().filter(|s| s.span.name == name).collect();
        assert_eq!(found.len(), 1, "one {name}: {names:?}");
        found[0]
    };
    let run = one("invoke_agent worker");
    let attempt = one("attempt first");
    let interaction = one("claude_code.interaction");
    let tool = one("claude_code.tool");
    assert_eq!(hex(&run.span.parent_span_id), GIVEN_SPAN);
    assert_eq!(attempt.span.parent_span_id, run.span.span_id);
    assert_eq!(
        interaction.span.parent_span_id, attempt.span.span_id,
        "claude's interaction is under the attempt that ran it"
    );
    assert_eq!(interaction.service, "claude-code");
    assert_eq!(tool.span.parent_span_id, interaction.span.span_id);
    let tool_name = attr(&tool.span.attributes, "gen_ai.tool.name")
        .as_ref()
        .and_then(crate::mock_llm::otlp::as_str);
    assert_eq!(tool_name.as_deref(), Some("Bash"));
}
