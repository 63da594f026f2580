//! The spans of a run as its events make them: tool calls paired with their starts and
//! ends the way each CLI reports them, attempts, usage, errors, what a child is handed.

use std::borrow::Cow;
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use pretty_assertions::assert_eq;
use prost::Message;
use serde_json::{json, Value as Json};

use super::export::{Exporter, Send};
use super::run_span::RunTrace;
use super::*;
use crate::events::AgentEvent;
use crate::observe::{AttemptKind, RunEvent, RunObserver, RunStart};
use crate::result::RunOutput;
use crate::result::{
    Details, ErrorCode, ErrorInfo, Mode, RunResult, SingleResult, TextContent, Usage,
};

const GIVEN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// An exporter whose requests land in a list, for the life of the test process.
fn exporter() -> (&'static Exporter, Arc<Mutex<Vec<Vec<u8>>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let log = bodies.clone();
    let send: Send = Box::new(move |body: &[u8]| {
        log.lock().unwrap().push(body.to_vec());
        Ok(())
    });
    let config = Settings::from_env(|k| {
        (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:9".to_string())
    })
    .export
    .unwrap();
    let exporter = Exporter::with_sender(&config, send, span::resource("test", &[])).unwrap();
    (Box::leak(Box::new(exporter)), bodies)
}

/// Every span sent, as `{name, kind, parent (its name, or the given span), start and end
/// in ms after t0, attributes, error}`, in the order they were sent.
fn sent(exporter: &Exporter, bodies: &Mutex<Vec<Vec<u8>>>, t0: SystemTime) -> Vec<Json> {
    assert!(exporter.flush(Duration::from_secs(30)));
    let spans: Vec<_> = bodies
        .lock()
        .unwrap()
        .iter()
        .flat_map(|b| {
            let req = ExportTraceServiceRequest::decode(&b[..]).unwrap();
            req.resource_spans[0].scope_spans[0].spans.clone()
        })
        .collect();
    let t0 = t0
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let given = SpanContext::parse(GIVEN, None).unwrap();
    SENT_NAMES.with(|names| {
        let mut names = names.borrow_mut();
        for s in &spans {
            names.insert(s.span_id.clone(), s.name.clone());
        }
    });
    spans
        .iter()
        .map(|s| {
            assert_eq!(s.trace_id, given.trace_id.0, "{}: one trace", s.name);
            let parent = if s.parent_span_id == given.span_id.0 {
                "(given)".to_string()
            } else {
                spans
                    .iter()
                    .find(|p| p.span_id == s.parent_span_id)
                    .map_or("(none)".to_string(), |p| p.name.clone())
            };
            let attributes: serde_json::Map<String, Json> = s
                .attributes
                .iter()
                .map(|kv| {
                    let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::StringValue(s)) => json!(s),
                        Some(any_value::Value::IntValue(n)) => json!(n),
                        Some(any_value::Value::DoubleValue(n)) => json!(n),
                        Some(any_value::Value::ArrayValue(a)) => Json::Array(
                            a.values
                                .iter()
                                .map(|v| match &v.value {
                                    Some(any_value::Value::StringValue(s)) => json!(s),
                                    other => json!(format!("{other:?}")),
                                })
                                .collect(),
                        ),
                        other => json!(format!("{other:?}")),
                    };
                    (kv.key.clone(), v)
                })
                .collect();
            let status = s.status.clone().unwrap_or_default();
            json!({
                "name": s.name,
                "kind": s.kind,
                "parent": parent,
                "ms": [(s.start_time_unix_nano - t0) / 1_000_000, (s.end_time_unix_nano - t0) / 1_000_000],
                "attributes": attributes,
                "error": (status.code == 2).then_some(status.message),
            })
        })
        .collect()
}

thread_local! {
    /// The names of the spans `sent` saw on this test's thread, by span id.
    static SENT_NAMES: std::cell::RefCell<std::collections::HashMap<Vec<u8>, String>> =
        Default::default();
}

/// The name of the sent span a `traceparent` points at.
fn spans_named(traceparent: &str) -> String {
    let ctx = SpanContext::parse(traceparent, None).unwrap();
    SENT_NAMES.with(|names| {
        names
            .borrow()
            .get(&ctx.span_id.0.to_vec())
            .cloned()
            .unwrap_or_else(|| format!("(no span {traceparent})"))
    })
}

fn start<'a>(group: Option<&'a crate::observe::GroupSlot>) -> RunStart<'a> {
    RunStart {
        run_id: "ab12cd34",
        agent: "explorer",
        backend: "claude",
        model: Some("sonnet"),
        task: "find the auth code; token ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        cwd: Path::new("/work"),
        run_dir: Path::new("/state/runs/ab12cd34"),
        depth: 0,
        parent_run_id: None,
        group,
    }
}

fn output(error: Option<ErrorCode>, usage: Usage) -> RunOutput {
    RunOutput::from_result(RunResult {
        content: vec![TextContent::text("the answer")],
        details: Details {
            mode: Mode::Single,
            run_id: Some("ab12cd34".into()),
            results: vec![SingleResult {
                usage,
                model: Some("sonnet".into()),
                child_session_id: Some("session-1".into()),
                ..Default::default()
            }],
            error: error.map(|code| ErrorInfo {
                code,
                message: "it broke at /home/someone/x with token ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".into(),
            }),
            streaming: None,
            background: None,
            scheduler: Default::default(),
            tree_usage: None,
        },
    })
}

fn at(t0: SystemTime, ms: u64) -> SystemTime {
    t0 + Duration::from_millis(ms)
}

fn call(name: &'static str) -> AgentEvent<'static> {
    AgentEvent::ToolCall {
        name: Cow::Borrowed(name),
        args: json!({}),
    }
}

fn tool_start(id: Option<&'static str>) -> AgentEvent<'static> {
    AgentEvent::ToolStart {
        id: id.map(Cow::Borrowed),
    }
}

fn tool_end(id: Option<&'static str>) -> AgentEvent<'static> {
    AgentEvent::ToolEnd {
        id: id.map(Cow::Borrowed),
    }
}

fn tool(name: &str, ms: [u64; 2], id: Option<&str>, attempt: u64) -> Json {
    let mut attributes = json!({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "orchestrate.attempt": attempt,
    });
    if let Some(id) = id {
        attributes["gen_ai.tool.call.id"] = json!(id);
    }
    json!({
        "name": format!("execute_tool {name}"),
        "kind": 1,
        "parent": "attempt first",
        "ms": ms,
        "attributes": attributes,
        "error": null,
    })
}

/// Feeds `events` (at their ms after t0) to a run's tracer under the given context and
/// returns the spans it sent.
fn traced(events: &[(u64, RunEvent<'_>)]) -> (Vec<Json>, Vec<(OsString, OsString)>) {
    let (exporter, bodies) = exporter();
    let t0 = SystemTime::now();
    let given = SpanContext::parse(GIVEN, Some("congo=t61rcWkgMzE")).unwrap();
    let mut run = RunTrace::start(Some((exporter, false)), Some(given), &start(None));
    let mut env = Vec::new();
    for (ms, event) in events {
        if let RunEvent::Attempt { n, .. } = event {
            run.on_event(at(t0, *ms), event);
            run.child_env(*n, &mut env);
        } else {
            run.on_event(at(t0, *ms), event);
        }
    }
    (sent(exporter, &bodies, t0), env)
}

const FIRST: RunEvent<'static> = RunEvent::Attempt {
    n: 1,
    model: Some("sonnet"),
    kind: AttemptKind::First,
};

#[test]
fn tool_calls_pair_with_their_starts_and_ends_however_the_cli_reports_them() {
    let ok = output(None, Usage::default());
    let (claude_a, claude_b) = (call("Read"), call("Grep"));
    let (pi_call, codex_call, opencode_call) = (call("bash"), call("edit"), call("webfetch"));
    let events = [
        (0, FIRST),
        // Claude: a call and its start on one line, two in one message, ended out of order.
        (10, RunEvent::Child(&claude_a)),
        (10, RunEvent::Child(&tool_start(Some("toolu_1")))),
        (10, RunEvent::Child(&claude_b)),
        (10, RunEvent::Child(&tool_start(Some("toolu_2")))),
        (30, RunEvent::Child(&tool_end(Some("toolu_2")))),
        (40, RunEvent::Child(&tool_end(Some("toolu_1")))),
        // pi: the call with its message, the execution's start and end later, by id.
        (50, RunEvent::Child(&pi_call)),
        (55, RunEvent::Child(&tool_start(Some("build")))),
        (90, RunEvent::Child(&tool_end(Some("build")))),
        // codex's edits: started unnamed, named as they complete.
        (100, RunEvent::Child(&tool_start(Some("item_7")))),
        (120, RunEvent::Child(&codex_call)),
        (120, RunEvent::Child(&tool_end(Some("item_7")))),
        // An end nobody started ends nothing.
        (125, RunEvent::Child(&tool_end(Some("never-started")))),
        // opencode: the call alone.
        (130, RunEvent::Child(&opencode_call)),
        (200, RunEvent::AttemptEnded { n: 1, output: &ok }),
        (210, RunEvent::Ended { output: &ok }),
    ];
    let (spans, _) = traced(&events);
    let tools: Vec<Json> = spans
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("execute_tool"))
        .cloned()
        .collect();
    assert_eq!(
        tools,
        vec![
            tool("Grep", [10, 30], Some("toolu_2"), 1),
            tool("Read", [10, 40], Some("toolu_1"), 1),
            tool("bash", [50, 90], Some("build"), 1),
            tool("edit", [100, 120], Some("item_7"), 1),
            tool("webfetch", [130, 130], None, 1),
        ]
    );
}

#[test]
fn a_run_with_a_retry_is_one_invoke_agent_span_over_a_span_per_attempt() {
    let failed = output(Some(ErrorCode::SubagentFailed), Usage::default());
    let usage = Usage {
        input: 100,
        output: 20,
        cache_read: 50,
        cache_write: 5,
        cost: 0.25,
        turns: 2,
    };
    let ok = output(None, usage);
    let bash = call("bash");
    let events = [
        (0, FIRST),
        (5, RunEvent::Child(&bash)),
        (6, RunEvent::Child(&tool_start(None))),
        (
            20,
            RunEvent::AttemptEnded {
                n: 1,
                output: &failed,
            },
        ),
        (
            20,
            RunEvent::Retrying {
                attempt: 1,
                of: 2,
                reason: "overloaded",
                wait: Duration::from_secs(1),
            },
        ),
        (
            1020,
            RunEvent::Attempt {
                n: 2,
                model: Some("sonnet"),
                kind: AttemptKind::Retry,
            },
        ),
        (1100, RunEvent::AttemptEnded { n: 2, output: &ok }),
        (1100, RunEvent::Ended { output: &ok }),
    ];
    let (spans, env) = traced(&events);
    let attempt = |n: u64, kind: &str, ms: [u64; 2], error: Option<&str>| {
        let mut attributes = json!({
            "orchestrate.attempt": n,
            "orchestrate.attempt.kind": kind,
            "gen_ai.request.model": "sonnet",
        });
        if error.is_some() {
            attributes["error.type"] = json!("SUBAGENT_FAILED");
        }
        json!({
            "name": format!("attempt {kind}"),
            "kind": 1,
            "parent": "invoke_agent explorer",
            "ms": ms,
            "attributes": attributes,
            "error": error,
        })
    };
    assert_eq!(
        spans,
        vec![
            // The tool of the failed attempt ended with it, unfinished.
            json!({
                "name": "execute_tool bash",
                "kind": 1,
                "parent": "attempt first",
                "ms": [5, 20],
                "attributes": {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "bash",
                    "orchestrate.attempt": 1,
                    "error.type": "unfinished",
                },
                "error": "the attempt ended before the tool did",
            }),
            attempt(
                1,
                "first",
                [0, 20],
                Some("it broke at ~/x with token ghp_[REDACTED]")
            ),
            attempt(2, "retry", [1020, 1100], None),
            json!({
                "name": "invoke_agent explorer",
                "kind": 3,
                "parent": "(given)",
                "ms": [0, 1100],
                "attributes": {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": "anthropic",
                    "gen_ai.agent.name": "explorer",
                    "gen_ai.agent.id": "ab12cd34",
                    "orchestrate.backend": "claude",
                    "orchestrate.depth": 0,
                    "gen_ai.request.model": "sonnet",
                    "gen_ai.response.model": "sonnet",
                    "gen_ai.usage.input_tokens": 155,
                    "gen_ai.usage.output_tokens": 20,
                    "gen_ai.usage.cache_read.input_tokens": 50,
                    "gen_ai.usage.cache_creation.input_tokens": 5,
                    "orchestrate.usage.cost_usd": 0.25,
                    "orchestrate.usage.turns": 2,
                    "gen_ai.conversation.id": "session-1",
                    "orchestrate.attempt.count": 2,
                },
                "error": null,
            }),
        ]
    );
    // Each attempt's child is handed its attempt's span, with the given state.
    let handed: Vec<String> = env
        .iter()
        .filter(|(k, _)| k == "TRACEPARENT")
        .map(|(_, v)| v.to_str().unwrap().to_string())
        .collect();
    assert_eq!(
        handed.iter().map(|tp| spans_named(tp)).collect::<Vec<_>>(),
        vec!["attempt first", "attempt retry"]
    );
    assert_eq!(
        env,
        vec![
            ("TRACEPARENT".into(), handed[0].clone().into()),
            ("TRACESTATE".into(), "congo=t61rcWkgMzE".into()),
            ("TRACEPARENT".into(), handed[1].clone().into()),
            ("TRACESTATE".into(), "congo=t61rcWkgMzE".into()),
        ]
    );
}

#[test]
fn a_failed_run_says_its_error_sanitized_and_keeps_content_out() {
    let failed = output(Some(ErrorCode::SubagentTimeout), Usage::default());
    let events = [
        (0, FIRST),
        (
            10,
            RunEvent::AttemptEnded {
                n: 1,
                output: &failed,
            },
        ),
        (10, RunEvent::Ended { output: &failed }),
    ];
    let (spans, _) = traced(&events);
    let run_span = &spans[1];
    assert_eq!(run_span["name"], json!("invoke_agent explorer"));
    assert_eq!(
        run_span["attributes"]["error.type"],
        json!("SUBAGENT_TIMEOUT")
    );
    assert_eq!(
        run_span["error"],
        json!("it broke at ~/x with token ghp_[REDACTED]")
    );
    let text = run_span.to_string();
    assert!(
        !text.contains("find the auth code"),
        "no task by default: {text}"
    );
    assert!(!text.contains("the answer"), "no answer by default: {text}");
}

#[test]
fn content_is_captured_only_when_asked_and_sanitized() {
    let (exporter, bodies) = exporter();
    let t0 = SystemTime::now();
    let given = SpanContext::parse(GIVEN, None).unwrap();
    let mut run = RunTrace::start(Some((exporter, true)), Some(given), &start(None));
    let ok = output(None, Usage::default());
    run.on_event(at(t0, 1), &FIRST);
    run.on_event(at(t0, 2), &RunEvent::Ended { output: &ok });
    let spans = sent(exporter, &bodies, t0);
    assert_eq!(spans[1]["name"], json!("invoke_agent explorer"));
    let attributes = &spans[1]["attributes"];
    assert_eq!(
        (
            &attributes["gen_ai.input.messages"],
            &attributes["gen_ai.output.messages"]
        ),
        (
            &json!(
                r#"[{"parts":[{"content":"find the auth code; token ghp_[REDACTED]","type":"text"}],"role":"user"}]"#
            ),
            &json!(r#"[{"parts":[{"content":"the answer","type":"text"}],"role":"assistant"}]"#)
        )
    );
}

#[test]
fn an_unsampled_context_is_handed_on_and_nothing_is_recorded() {
    let (exporter, bodies) = exporter();
    let unsampled = GIVEN.replace("-01", "-00");
    let given = SpanContext::parse(&unsampled, None).unwrap();
    let mut run = RunTrace::start(Some((exporter, false)), Some(given.clone()), &start(None));
    let ok = output(None, Usage::default());
    let mut env = Vec::new();
    run.on_event(SystemTime::now(), &FIRST);
    run.child_env(1, &mut env);
    run.on_event(SystemTime::now(), &RunEvent::Ended { output: &ok });
    assert!(exporter.flush(Duration::from_secs(30)));
    assert!(bodies.lock().unwrap().is_empty());
    let handed = SpanContext::parse(env[0].1.to_str().unwrap(), None).unwrap();
    assert_eq!((handed.trace_id, handed.sampled), (given.trace_id, false));
}

#[test]
fn without_an_exporter_the_given_context_is_handed_on_as_it_is() {
    let given = SpanContext::parse(GIVEN, Some("congo=t61rcWkgMzE")).unwrap();
    let mut run = RunTrace::start(None, Some(given), &start(None));
    let mut env = Vec::new();
    run.child_env(1, &mut env);
    assert_eq!(
        env,
        vec![
            ("TRACEPARENT".into(), GIVEN.into()),
            ("TRACESTATE".into(), "congo=t61rcWkgMzE".into())
        ]
    );
}

#[test]
fn providers_follow_the_conventions_names() {
    let cases = [
        ("claude", None, "anthropic"),
        ("codex", Some("gpt-5"), "openai"),
        ("gemini", None, "gcp.gemini"),
        ("opencode", Some("anthropic/claude-sonnet-4"), "anthropic"),
        ("pi", Some("google/gemini-2.5-pro"), "gcp.gemini"),
        ("pi", Some("mistral/devstral"), "mistral_ai"),
        ("pi", Some("local-model"), "pi"),
        ("cursor", None, "cursor"),
    ];
    for (backend, model, want) in cases {
        assert_eq!(provider(backend, model), want, "{backend} {model:?}");
    }
}
