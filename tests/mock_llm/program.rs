//! The mock LLM as a program (`examples/mock_llm.rs`, and the `serve` test of
//! `mock_llm_selftest`): a script chosen by name, the URL announced, every request printed
//! (and logged as JSON lines), until a deadline.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{error_body, Api, MockLlm, MockUsage, Reply, Script};

/// Tokens each scripted reply reports.
const USAGE: MockUsage = MockUsage {
    input: 200,
    output: 14,
    cached: 40,
};

/// The answer of the `demo` script starts with this, so that nobody mistakes it for a
/// model's.
pub const DEMO_PREFIX: &str = "[scripted mock model, not an LLM] auth is handled in src/auth.rs; pi's read tool returned it:\n\n";

/// The scripts [`script_named`] knows, and what each does (`mock_llm --help` prints this).
pub const SCRIPTS: &[(&str, &str)] = &[
    (
        "playground",
        "any number of runs: a tool call that lists the working directory (the CLI's own listing, glob or shell tool), then an answer quoting the task and what the tool returned",
    ),
    (
        "demo",
        "one run of pi in scripts/demo's repository: ls of src, read of src/auth.rs, then an answer quoting what the read returned",
    ),
    (
        "tool_then_text",
        "the tool given by the caller (bash `echo hi-from-tool` for mock_llm), then \"Hello from mock.\"",
    ),
    ("text", "\"Hello from mock.\" to every request"),
    ("401", "HTTP 401 with the API's own error"),
    ("overloaded", "529 (Anthropic) or 503 with the API's own error"),
    ("hang", "the first events of an answer, then nothing, never closing"),
    ("http:STATUS:MESSAGE", "that HTTP status with the API's error shape carrying MESSAGE"),
];

/// The script named `name` (see [`SCRIPTS`]); `tool` is `tool_then_text`'s tool and its
/// arguments; `api` shapes an `http:` script's error body.
pub fn script_named(name: &str, tool: (&str, Value), api: Api) -> Result<Script, String> {
    let text = Reply::text("Hello from mock.", USAGE);
    Ok(match name {
        "playground" => Script::playground(),
        "tool_then_text" => Script::tool_then_text(Reply::tool(tool.0, tool.1, USAGE), text),
        "text" => Script::always(text),
        "demo" => Script::sequence(vec![
            Reply::tool("ls", json!({"path": "src"}), USAGE),
            Reply::tool("read", json!({"path": "src/auth.rs"}), USAGE),
            Reply::quote_tool_result(DEMO_PREFIX, USAGE),
        ]),
        "401" => Script::always(Reply::unauthorized()),
        "overloaded" => Script::always(Reply::Overloaded),
        "hang" => Script::always(Reply::hang("Partial ")),
        s if s.starts_with("http:") => {
            let mut parts = s.splitn(3, ':').skip(1);
            let status: u16 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("{s}: expected http:STATUS:MESSAGE"))?;
            let message = parts.next().unwrap_or("mock error");
            Script::always(Reply::HttpError {
                status,
                body: error_body(api, status, message),
            })
        }
        other => {
            let names: Vec<&str> = SCRIPTS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown script {other:?} (one of: {})",
                names.join(", ")
            ));
        }
    })
}

/// Prints each request as it comes (`METHOD PATH side=… -> what was served`) and appends
/// it to `log` as a JSON line, until `deadline` (None: until the process is stopped).
pub fn report_requests(mock: &MockLlm, deadline: Option<Instant>, log: Option<&Path>) {
    let mut seen = 0;
    while deadline.is_none_or(|d| Instant::now() < d) {
        let reqs = mock.requests();
        for r in &reqs[seen..] {
            println!("{} {} side={} -> {}", r.method, r.path, r.side, r.served);
            if let Some(log) = log {
                let line = json!({"method": r.method, "path": r.path, "headers": r.headers,
                                  "api": r.api.map(|a| format!("{a:?}")), "side": r.side,
                                  "served": r.served, "body": r.body});
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .expect("open the request log");
                writeln!(f, "{line}").expect("write the request log");
            }
        }
        let _ = std::io::stdout().flush();
        seen = reqs.len();
        std::thread::sleep(Duration::from_millis(100));
    }
}
