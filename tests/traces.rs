//! Traces over OTLP/HTTP, received by a small receiver that decodes the real protobuf
//! (tests/mock_llm/otlp.rs): the tree of a fan-out with a retry and a nested orchestrate,
//! the trace handed in continued, and a collector that never answers costing a run
//! nothing but a bounded wait at exit.

#[path = "mock_llm/otlp.rs"]
mod otlp;
mod support;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::time::Duration;

use otlp::{attr, hex, to_json, Received, Receiver};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::{fixture, Sandbox};

const GIVEN_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const GIVEN_SPAN: &str = "b7ad6b7169203331";

/// An agent whose child is itself an `orchestrate run` (of the fake agent, on the task
/// it was given), which then prints a pi transcript for the outer run to read.
const NEST_AGENT: &str = "---\nname: nest\ndescription: Runs orchestrate inside.\nbackend: command\ncommand: sh -c '\"$NEST_ORCHESTRATE\" run fake \"$0\" --details full --agents-dir \"$NEST_AGENTS\" > \"$NEST_OUT\" 2>&1; cat \"$FAKE_AGENT_TRANSCRIPT\"' {task}\ndialect: pi\n---\nNested.\n";

fn sandbox(receiver: &Receiver) -> Sandbox {
    let sb = Sandbox::new();
    std::fs::write(sb.agents.join("nest.md"), NEST_AGENT).unwrap();
    let nest_out = sb.root.path().join("nested.json");
    let marker = sb.root.path().join("failed-once");
    let agents = sb.agents.to_str().unwrap().to_string();
    sb.set("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())
        .set("OTEL_SERVICE_NAME", "orchestrate-test")
        .set(
            "FAKE_AGENT_TRANSCRIPT",
            fixture("multi_turn.jsonl").to_str().unwrap(),
        )
        .set("FAKE_AGENT_MARKER", marker.to_str().unwrap())
        .set("FAKE_AGENT_ERROR", "503 server is overloaded")
        .set(
            "NEST_ORCHESTRATE",
            support::orchestrate_bin().to_str().unwrap(),
        )
        .set("NEST_AGENTS", &agents)
        .set("ORCHESTRATE_MAX_DEPTH", "2")
        .set("NEST_OUT", nest_out.to_str().unwrap())
}

fn fanout(sb: &Sandbox, tasks: &[&str]) -> support::RunOutput {
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut args = vec![
        "run".to_string(),
        "--agents-dir".to_string(),
        agents,
        "--details".to_string(),
        "full".to_string(),
    ];
    for t in tasks {
        args.push("--task".into());
        args.push(t.to_string());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    sb.run_args(&refs)
}

fn str_attr(s: &Received, key: &str) -> Option<String> {
    attr(&s.span.attributes, key)
        .as_ref()
        .and_then(otlp::as_str)
}

fn int_attr(s: &Received, key: &str) -> Option<i64> {
    attr(&s.span.attributes, key).and_then(|v| to_json(&v).as_i64())
}

/// The spans under `parent` as an indented outline: each span's name (and, for a run,
/// its agent's task index), children ordered by their place in the fan-out, then name,
/// then start.
fn outline(spans: &[Received], parent: &[u8], depth: usize, out: &mut Vec<String>) {
    let mut children: Vec<&Received> = spans
        .iter()
        .filter(|s| s.span.parent_span_id == parent)
        .collect();
    children.sort_by_key(|s| {
        (
            int_attr(s, "orchestrate.workflow.task").unwrap_or(-1),
            s.span.name.clone(),
            s.span.start_time_unix_nano,
        )
    });
    for s in children {
        let mut line = format!("{}{}", "  ".repeat(depth), s.span.name);
        if s.service != "orchestrate-test" {
            line.push_str(&format!(" ({})", s.service));
        }
        if s.span.status.as_ref().is_some_and(|st| st.code == 2) {
            line.push_str(" !");
        }
        out.push(line);
        outline(spans, &s.span.span_id, depth + 1, out);
    }
}

fn named<'a>(spans: &'a [Received], name: &str) -> Vec<&'a Received> {
    spans.iter().filter(|s| s.span.name == name).collect()
}

fn attributes(s: &Received, keys: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for k in keys {
        if let Some(v) = attr(&s.span.attributes, k) {
            out.insert(k.to_string(), to_json(&v));
        }
    }
    Value::Object(out)
}

#[test]
fn a_fanout_with_a_retry_and_a_nested_run_is_one_trace_under_the_given_span() {
    let receiver = Receiver::start();
    let sb = sandbox(&receiver).set("TRACEPARENT", &format!("00-{GIVEN_TRACE}-{GIVEN_SPAN}-01"));
    let out = fanout(
        &sb,
        &["fake=alpha", "fake=beta @scenario:flaky", "nest=gamma"],
    );
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let json = out.json();
    let results = json["details"]["results"].as_array().unwrap().clone();
    assert_eq!(
        results
            .iter()
            .map(|r| r["attempts"].clone())
            .collect::<Vec<_>>(),
        [json!(1), json!(2), json!(1)]
    );
    let nested: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.root.path().join("nested.json")).unwrap())
            .expect("the nested orchestrate printed its result");
    assert_eq!(
        nested["details"]["results"][0]["exitCode"],
        json!(0),
        "{nested}"
    );

    // Everything arrived by the time orchestrate exited: the exporter flushes at exit.
    let spans = receiver.spans();
    assert_eq!(receiver.refused(), Vec::<String>::new());
    for s in &spans {
        assert_eq!(
            hex(&s.span.trace_id),
            GIVEN_TRACE,
            "{}: one trace",
            s.span.name
        );
        assert_eq!(s.scope, "orchestrate");
    }
    let mut tree = Vec::new();
    outline(&spans, &support_hex(GIVEN_SPAN), 0, &mut tree);
    assert_eq!(
        tree,
        [
            "invoke_workflow parallel",
            "  invoke_agent fake",
            "    attempt first",
            "      execute_tool grep",
            "      execute_tool read",
            "  invoke_agent fake",
            "    attempt first !",
            "    attempt retry",
            "      execute_tool grep",
            "      execute_tool read",
            "  invoke_agent nest",
            "    attempt first",
            "      execute_tool grep",
            "      execute_tool read",
            "      invoke_agent fake",
            "        attempt first",
            "          execute_tool grep",
            "          execute_tool read",
        ],
        "{spans:#?}"
    );
    assert_eq!(
        spans.len(),
        tree.len(),
        "no span outside the tree: {spans:#?}"
    );

    let workflow = named(&spans, "invoke_workflow parallel")[0];
    let run_id = json["details"]["runId"].as_str().unwrap();
    assert_eq!(
        attributes(
            workflow,
            &[
                "gen_ai.operation.name",
                "gen_ai.workflow.name",
                "orchestrate.workflow.id",
                "orchestrate.workflow.tasks",
                "error.type"
            ]
        ),
        json!({
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": "parallel",
            "orchestrate.workflow.id": run_id,
            "orchestrate.workflow.tasks": 3,
        })
    );
    let keys = [
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.agent.name",
        "gen_ai.agent.id",
        "orchestrate.backend",
        "orchestrate.depth",
        "orchestrate.workflow.task",
        "orchestrate.attempt.count",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "orchestrate.usage.cost_usd",
        "error.type",
    ];
    let mut runs: Vec<&Received> = named(&spans, "invoke_agent fake");
    runs.extend(named(&spans, "invoke_agent nest"));
    let by_id: BTreeMap<String, Value> = runs
        .iter()
        .map(|s| {
            (
                str_attr(s, "gen_ai.agent.id").unwrap(),
                attributes(s, &keys),
            )
        })
        .collect();
    let run = |r: &Value, id: &Value, agent: &str, backend: &str, depth: u64, task: Option<u64>| {
        let usage = &r["usage"];
        let mut a = json!({
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": backend,
            "gen_ai.agent.name": agent,
            "gen_ai.agent.id": id,
            "orchestrate.backend": backend,
            "orchestrate.depth": depth,
            "orchestrate.attempt.count": r["attempts"],
            "gen_ai.usage.input_tokens": usage["input"].as_u64().unwrap_or(0)
                + usage["cacheRead"].as_u64().unwrap_or(0)
                + usage["cacheWrite"].as_u64().unwrap_or(0),
            "gen_ai.usage.output_tokens": usage["output"],
            "orchestrate.usage.cost_usd": usage["cost"],
        });
        if let Some(t) = task {
            a["orchestrate.workflow.task"] = json!(t);
        }
        (id.as_str().unwrap().to_string(), a)
    };
    let nested_result = &nested["details"]["results"][0];
    let expected: BTreeMap<String, Value> = [
        run(&results[0], &results[0]["runId"], "fake", "pi", 0, Some(0)),
        run(&results[1], &results[1]["runId"], "fake", "pi", 0, Some(1)),
        run(
            &results[2],
            &results[2]["runId"],
            "nest",
            "command",
            0,
            Some(2),
        ),
        run(
            nested_result,
            &nested["details"]["runId"],
            "fake",
            "pi",
            1,
            None,
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_id, expected);
    // The nested run names the run whose child started it.
    let inner = runs
        .iter()
        .find(|s| int_attr(s, "orchestrate.depth") == Some(1))
        .unwrap();
    assert_eq!(
        str_attr(inner, "orchestrate.parent_run_id").as_deref(),
        results[2]["runId"].as_str()
    );
    // The failed attempt says why; the tool spans name their tool.
    let failed = named(&spans, "attempt first")
        .into_iter()
        .find(|s| s.span.status.as_ref().is_some_and(|st| st.code == 2))
        .unwrap();
    assert_eq!(
        attributes(
            failed,
            &[
                "orchestrate.attempt",
                "orchestrate.attempt.kind",
                "error.type"
            ]
        ),
        json!({"orchestrate.attempt": 1, "orchestrate.attempt.kind": "first", "error.type": "SUBAGENT_FAILED"})
    );
    for s in named(&spans, "execute_tool grep") {
        assert_eq!(
            attributes(s, &["gen_ai.operation.name", "gen_ai.tool.name"]),
            json!({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "grep"})
        );
        assert!(s.span.end_time_unix_nano >= s.span.start_time_unix_nano);
    }
    // The first span of orchestrate's in the trace says its parent is another process's.
    assert_eq!(workflow.span.flags & 0x300, 0x300, "remote parent");
}

fn support_hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn without_a_given_trace_a_run_starts_its_own_and_hands_it_to_its_child() {
    let receiver = Receiver::start();
    let sb = sandbox(&receiver).scenario("replay");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let spans = receiver.spans();
    let mut tree = Vec::new();
    outline(&spans, &[], 0, &mut tree);
    assert_eq!(
        tree,
        [
            "invoke_agent fake",
            "  attempt first",
            "    execute_tool grep",
            "    execute_tool read",
        ]
    );
    let trace = &spans[0].span.trace_id;
    assert!(spans.iter().all(|s| &s.span.trace_id == trace));
    let root = named(&spans, "invoke_agent fake")[0];
    assert_eq!(
        root.span.flags & 0x300,
        0x100,
        "a root span, no remote parent"
    );
}

#[test]
fn a_collector_that_never_answers_costs_a_bounded_wait_and_fails_nothing() {
    // Accepts connections, reads nothing, answers nothing.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in silent.incoming().take(4) {
            conns.push(c);
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    let sb = Sandbox::new()
        .scenario("replay")
        .set("OTEL_EXPORTER_OTLP_ENDPOINT", &format!("http://{addr}"));
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    assert_eq!(out.json()["content"][0]["text"], json!("Hello from pi."));
    // The flush at exit is bounded (1 s), well under the request timeout (10 s).
    assert!(
        out.elapsed < Duration::from_secs(8),
        "took {:?}",
        out.elapsed
    );
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("traces"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    drop(held);

    // A port nobody listens on: no delay worth the name, one warning.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let sb = Sandbox::new()
        .scenario("replay")
        .set("OTEL_EXPORTER_OTLP_ENDPOINT", &format!("http://{closed}"));
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "stderr: {}", out.stderr);
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("traces"))
        .collect();
    assert!(warnings.len() <= 1, "{}", out.stderr);
}

/// `orchestrate mcp`, driven by a real MCP client (rmcp): each call continues the trace in
/// its own request's `_meta`.
#[tokio::test]
async fn an_mcp_call_continues_the_trace_in_its_meta() {
    use rmcp::model::CallToolRequestParams;
    use rmcp::ServiceExt;

    let receiver = Receiver::start();
    // Spans leave within 100 ms rather than at the server's exit.
    let sb = sandbox(&receiver).set("OTEL_BSP_SCHEDULE_DELAY", "100");
    let agents = sb.agents.to_str().unwrap().to_string();
    let mut cmd = tokio::process::Command::from(sb.command(&["mcp", "--agents-dir", &agents]));
    cmd.stdin(std::process::Stdio::piped()).kill_on_drop(true);
    let mut process = cmd.spawn().expect("spawn orchestrate mcp");
    let (stdin, stdout) = (
        process.stdin.take().unwrap(),
        process.stdout.take().unwrap(),
    );
    let client = ().serve((stdout, stdin)).await.expect("MCP handshake");
    let traces = [
        ("11111111111111111111111111111111", "2222222222222222"),
        ("33333333333333333333333333333333", "4444444444444444"),
    ];
    for (i, (trace, span)) in traces.iter().enumerate() {
        let params: CallToolRequestParams = serde_json::from_value(json!({
            "name": "subagent",
            "arguments": {"agent": "fake", "task": format!("call {i}")},
            "_meta": {"traceparent": format!("00-{trace}-{span}-01"), "tracestate": "vendor=x"},
        }))
        .unwrap();
        let r = client.call_tool(params).await.unwrap();
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    let spans = receiver.wait_for(Duration::from_secs(20), |s| {
        s.iter()
            .filter(|r| r.span.name == "invoke_agent fake")
            .count()
            == 2
    });
    client.cancel().await.unwrap();
    let _ = process.wait().await;
    for (trace, span) in traces {
        let mut tree = Vec::new();
        outline(&spans, &support_hex(span), 0, &mut tree);
        assert_eq!(
            tree,
            [
                "invoke_agent fake",
                "  attempt first",
                "    execute_tool grep",
                "    execute_tool read",
            ],
            "{spans:#?}"
        );
        let run = spans
            .iter()
            .find(|s| s.span.parent_span_id == support_hex(span))
            .unwrap();
        assert_eq!(hex(&run.span.trace_id), trace);
        assert_eq!(run.span.trace_state, "vendor=x");
    }
}
