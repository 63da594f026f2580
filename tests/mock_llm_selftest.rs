//! The mock LLM itself, checked with a raw TCP client: every API's text and tool replies
//! parse as SSE with the right event names, errors carry each API's own body, a hung
//! stream really hangs, side traffic does not consume a scripted step.
//!
//! Also `serve`, an ignored test that runs the mock by hand for investigating a CLI:
//! `MOCK_LLM_SCRIPT=tool_then_text MOCK_LLM_LOG=/tmp/mock.jsonl \
//!  cargo test --test mock_llm_selftest serve -- --ignored --nocapture`
//! prints the URL (and writes it to `$MOCK_LLM_URL_FILE` when set), logs every request
//! to `$MOCK_LLM_LOG` as JSON lines, and stops after `$MOCK_LLM_SECONDS` (default 300).
//! Scripts: `tool_then_text` (default; tool `$MOCK_LLM_TOOL` with `$MOCK_LLM_TOOL_ARGS`),
//! `text`, `401`, `overloaded`, `hang`, `http:STATUS:MESSAGE` (error body in the shape of
//! `$MOCK_LLM_API`: anthropic, gemini, else OpenAI).

mod mock_llm;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use mock_llm::{Api, MockLlm, MockUsage, Reply, Script};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

const USAGE: MockUsage = MockUsage {
    input: 120,
    output: 7,
    cached: 20,
};

struct Response {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Response {
    /// `(event name, data)` for each SSE event.
    fn sse(&self) -> Vec<(Option<String>, String)> {
        assert!(
            self.headers.contains("content-type: text/event-stream"),
            "{}",
            self.headers
        );
        parse_sse(&String::from_utf8(self.body.clone()).unwrap())
    }

    fn sse_json(&self) -> Vec<(Option<String>, Value)> {
        self.sse()
            .into_iter()
            .filter(|(_, d)| d != "[DONE]")
            .map(|(e, d)| (e, serde_json::from_str(&d).expect("data is JSON")))
            .collect()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

fn parse_sse(text: &str) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event: ") {
                event = Some(e.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                data.push_str(d);
            } else {
                panic!("unexpected SSE line {line:?}");
            }
        }
        out.push((event, data));
    }
    out
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let i = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..i]).unwrap(), 16).unwrap();
        raw = &raw[i + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        assert_eq!(&raw[size..size + 2], b"\r\n");
        raw = &raw[size + 2..];
    }
}

fn raw_request(mock: &MockLlm, method: &str, path: &str, body: &Value) -> TcpStream {
    raw_request_at(mock.addr(), method, path, body)
}

fn raw_request_at(addr: SocketAddr, method: &str, path: &str, body: &Value) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nX-Api-Key: k\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

fn call(mock: &MockLlm, path: &str, body: Value) -> Response {
    call_at(mock.addr(), path, body)
}

fn call_at(addr: SocketAddr, path: &str, body: Value) -> Response {
    let mut s = raw_request_at(addr, "POST", path, &body);
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read to close");
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let headers = String::from_utf8(raw[..head_end].to_vec())
        .unwrap()
        .to_ascii_lowercase();
    let status = headers.split(' ').nth(1).unwrap().parse().unwrap();
    let rest = &raw[head_end + 4..];
    let body = if headers.contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn names(events: &[(Option<String>, Value)]) -> Vec<String> {
    events
        .iter()
        .map(|(e, d)| e.clone().unwrap_or_else(|| d["type"].to_string()))
        .collect()
}

fn tool_reply() -> Reply {
    Reply::tool("bash", json!({"command": "echo hi"}), USAGE)
}

#[test]
fn anthropic_text_and_tool_streams() {
    let mock = MockLlm::start(Script::tool_then_text(
        tool_reply(),
        Reply::text("Hello from mock.", USAGE),
    ));
    let req = json!({"model": "claude-sonnet-4-5", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let r = call(&mock, "/v1/messages?beta=true", req.clone());
    assert_eq!(r.status, 200);
    let ev = r.sse_json();
    assert_eq!(
        names(&ev),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    for (name, data) in &ev {
        assert_eq!(Some(data["type"].as_str().unwrap()), name.as_deref());
    }
    assert_eq!(
        ev[2].1["content_block"],
        json!({"type": "tool_use", "id": "toolu_mock1", "name": "bash", "input": {}})
    );
    let partial: String = ev[3..5]
        .iter()
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"command": "echo hi"})
    );
    assert_eq!(ev[6].1["delta"]["stop_reason"], json!("tool_use"));
    assert_eq!(
        ev[6].1["usage"],
        json!({"input_tokens": 100, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 0, "output_tokens": 7})
    );
    assert_eq!(ev[0].1["message"]["model"], json!("claude-sonnet-4-5"));

    let mut req2 = req;
    req2["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_mock1", "content": "hi"}]}));
    let ev = call(&mock, "/v1/messages", req2).sse_json();
    let text: String = ev
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from mock.");
    assert_eq!(
        ev[2].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    assert_eq!(ev[6].1["delta"]["stop_reason"], json!("end_turn"));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].api, Some(Api::Anthropic));
    assert_eq!(reqs[0].path, "/v1/messages?beta=true");
    assert_eq!(reqs[0].headers["x-api-key"], "k");
    assert_eq!(reqs[1].served, "text \"Hello from mock.\"");
}

#[test]
fn text_then_a_tool_call_in_one_reply_for_anthropic_and_chat() {
    let mock = MockLlm::start(Script::always(Reply::text_then_tool(
        "Step 1.",
        "bash",
        json!({"command": "echo hi"}),
        USAGE,
    )));
    let ev = call(
        &mock,
        "/v1/messages",
        json!({"model": "m", "stream": true, "messages": []}),
    )
    .sse_json();
    let blocks: Vec<(u64, Value)> = ev
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_start"))
        .map(|(_, d)| (d["index"].as_u64().unwrap(), d["content_block"].clone()))
        .collect();
    assert_eq!(
        blocks,
        [
            (0, json!({"type": "text", "text": ""})),
            (
                1,
                json!({"type": "tool_use", "id": "toolu_mock1", "name": "bash", "input": {}})
            )
        ]
    );
    let stops: Vec<u64> = ev
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_stop"))
        .map(|(_, d)| d["index"].as_u64().unwrap())
        .collect();
    assert_eq!(stops, [0, 1]);
    let chat = call(
        &mock,
        "/v1/chat/completions",
        json!({"model": "m", "stream": false, "messages": []}),
    );
    let body: Value = serde_json::from_slice(&chat.body).unwrap();
    assert_eq!(
        (
            &body["choices"][0]["message"]["content"],
            &body["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
            &body["choices"][0]["finish_reason"]
        ),
        (&json!("Step 1."), &json!("bash"), &json!("tool_calls"))
    );
}

#[test]
fn a_per_model_script_answers_each_model_and_404s_the_others() {
    let mock = MockLlm::start(Script::per_model(&[
        ("m1", Reply::Overloaded),
        ("m2", Reply::text("two", USAGE)),
    ]));
    let ask = |model: &str| {
        call(
            &mock,
            "/v1/chat/completions",
            json!({"model": model, "stream": false, "messages": []}),
        )
        .status
    };
    assert_eq!((ask("m1"), ask("m2"), ask("m3")), (503, 200, 404));
    let models: Vec<String> = mock
        .requests()
        .iter()
        .map(mock_llm::requested_model)
        .collect();
    assert_eq!(models, ["m1", "m2", "m3"]);
}

#[test]
fn chat_completions_text_and_tool_streams_with_usage_chunk() {
    let mock = MockLlm::start(Script::tool_then_text(
        tool_reply(),
        Reply::text("Hello from mock.", USAGE),
    ));
    let req = json!({"model": "mock-1", "stream": true, "stream_options": {"include_usage": true},
                     "messages": [{"role": "user", "content": "hi"}]});
    let r = call(&mock, "/v1/chat/completions", req.clone());
    let raw = r.sse();
    assert!(raw.iter().all(|(e, _)| e.is_none()), "data-only events");
    assert_eq!(raw.last().unwrap().1, "[DONE]");
    let ev = r.sse_json();
    assert_eq!(ev.len(), 5, "{ev:?}");
    assert_eq!(
        ev[0].1["choices"][0]["delta"]["tool_calls"][0],
        json!({"index": 0, "id": "call_mock1", "type": "function", "function": {"name": "bash", "arguments": ""}})
    );
    let args: String = ev[1..3]
        .iter()
        .map(|(_, d)| {
            d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(args, r#"{"command":"echo hi"}"#);
    assert_eq!(ev[3].1["choices"][0]["finish_reason"], json!("tool_calls"));
    assert_eq!(ev[4].1["choices"], json!([]));
    assert_eq!(
        ev[4].1["usage"],
        json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
               "prompt_tokens_details": {"cached_tokens": 20}, "completion_tokens_details": {"reasoning_tokens": 0}})
    );

    let mut req2 = req;
    req2["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "tool", "tool_call_id": "call_mock1", "content": "hi"}));
    req2["stream_options"] = Value::Null;
    let ev = call(&mock, "/v1/chat/completions", req2).sse_json();
    let text: String = ev
        .iter()
        .filter_map(|(_, d)| d["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello from mock.");
    assert_eq!(
        ev.last().unwrap().1["choices"][0]["finish_reason"],
        json!("stop")
    );
    assert!(
        ev.iter().all(|(_, d)| d.get("usage").is_none()),
        "no usage chunk unless asked"
    );
}

#[test]
fn responses_text_and_tool_streams() {
    let mock = MockLlm::start(Script::tool_then_text(
        Reply::tool("exec_command", json!({"cmd": "echo hi"}), USAGE),
        Reply::text("Hello from mock.", USAGE),
    ));
    let req = json!({"model": "gpt-5.5", "stream": true, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]});
    let ev = call(&mock, "/v1/responses", req.clone()).sse_json();
    assert_eq!(
        names(&ev),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, (name, data)) in ev.iter().enumerate() {
        assert_eq!(Some(data["type"].as_str().unwrap()), name.as_deref());
        assert_eq!(data["sequence_number"], json!(i));
    }
    assert_eq!(
        ev[6].1["item"],
        json!({"id": "fc_mock1", "type": "function_call", "status": "completed", "call_id": "call_mock1",
               "name": "exec_command", "arguments": "{\"cmd\":\"echo hi\"}"})
    );
    assert_eq!(
        ev[7].1["response"]["usage"],
        json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 20}, "output_tokens": 7,
               "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 127})
    );

    let mut req2 = req;
    req2["input"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "function_call_output", "call_id": "call_mock1", "output": "hi"}));
    let ev = call(&mock, "/v1/responses", req2).sse_json();
    assert_eq!(
        names(&ev),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(
        ev[8].1["item"]["content"],
        json!([{"type": "output_text", "text": "Hello from mock.", "annotations": []}])
    );
    assert_eq!(ev[9].1["response"]["status"], json!("completed"));
}

#[test]
fn gemini_text_and_tool_streams_and_non_streaming() {
    let mock = MockLlm::start(Script::tool_then_text(
        Reply::tool("run_shell_command", json!({"command": "echo hi"}), USAGE),
        Reply::text("Hello from mock.", USAGE),
    ));
    let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
    let req = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let ev = call(&mock, path, req.clone()).sse_json();
    assert_eq!(ev.len(), 1);
    assert!(ev[0].0.is_none());
    assert_eq!(
        ev[0].1["candidates"][0],
        json!({"content": {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi"}}}]},
               "index": 0, "finishReason": "STOP"})
    );
    assert_eq!(
        ev[0].1["usageMetadata"],
        json!({"promptTokenCount": 120, "candidatesTokenCount": 7, "totalTokenCount": 127, "cachedContentTokenCount": 20})
    );
    assert_eq!(ev[0].1["modelVersion"], json!("gemini-2.5-pro"));

    let mut req2 = req;
    req2["contents"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "parts": [
        {"functionResponse": {"name": "run_shell_command", "response": {"output": "hi"}}}]}));
    let ev = call(&mock, path, req2.clone()).sse_json();
    let text: String = ev
        .iter()
        .map(|(_, d)| {
            d["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(text, "Hello from mock.");
    assert_eq!(
        ev.last().unwrap().1["candidates"][0]["finishReason"],
        json!("STOP")
    );
    assert!(ev[0].1["candidates"][0].get("finishReason").is_none());

    // Non-streaming helper calls are side traffic: a short text, no scripted step.
    let r = call(
        &mock,
        "/v1beta/models/gemini-2.5-flash:generateContent",
        req2,
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json()["candidates"][0]["content"]["parts"],
        json!([{"text": "Mock side reply"}])
    );
    let reqs = mock.requests();
    assert_eq!(
        reqs.iter().map(|r| r.side).collect::<Vec<_>>(),
        [false, false, true]
    );
}

#[test]
fn http_401_carries_each_apis_own_error_body() {
    let mock = MockLlm::start(Script::always(Reply::unauthorized()));
    let r = call(
        &mock,
        "/v1/messages",
        json!({"model": "m", "stream": true, "messages": []}),
    );
    assert_eq!(r.status, 401);
    assert!(r.headers.contains("content-type: application/json"));
    assert_eq!(
        r.json(),
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}, "request_id": "req_mock"})
    );
    let r = call(
        &mock,
        "/v1/chat/completions",
        json!({"model": "m", "stream": true}),
    );
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["error"]["code"], json!("invalid_api_key"));
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Incorrect API key provided"));
    let r = call(
        &mock,
        "/v1beta/models/g:streamGenerateContent?alt=sse",
        json!({}),
    );
    assert_eq!(
        r.json(),
        json!({"error": {"code": 401, "message": "API key not valid. Please pass a valid API key.", "status": "UNAUTHENTICATED"}})
    );

    let custom = json!({"error": {"message": "custom", "type": "x"}});
    let mock = MockLlm::start(Script::always(Reply::HttpError {
        status: 401,
        body: custom.clone(),
    }));
    let r = call(&mock, "/v1/responses", json!({"stream": true}));
    assert_eq!((r.status, r.json()), (401, custom));
}

#[test]
fn overloaded_is_529_for_anthropic_and_503_elsewhere() {
    let mock = MockLlm::start(Script::always(Reply::Overloaded));
    let r = call(&mock, "/v1/messages", json!({"stream": true}));
    assert_eq!(r.status, 529);
    assert_eq!(r.json()["error"]["type"], json!("overloaded_error"));
    let r = call(&mock, "/v1/responses", json!({"stream": true}));
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["type"], json!("server_error"));
    let r = call(
        &mock,
        "/v1beta/models/g:streamGenerateContent?alt=sse",
        json!({}),
    );
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["status"], json!("UNAVAILABLE"));
}

#[test]
fn a_hung_stream_sends_its_first_events_and_then_nothing() {
    let mock = MockLlm::start(Script::always(Reply::hang("Partial ")));
    for (path, body) in [
        ("/v1/messages", json!({"stream": true})),
        (
            "/v1/chat/completions",
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ),
        ("/v1/responses", json!({"stream": true})),
        ("/v1beta/models/g:streamGenerateContent?alt=sse", json!({})),
    ] {
        let mut s = raw_request(&mock, "POST", path, &body);
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let start = Instant::now();
        let timed_out = loop {
            match s.read(&mut buf) {
                Ok(0) => break false,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break true
                }
                Err(e) => panic!("{path}: {e}"),
            }
            assert!(start.elapsed() < Duration::from_secs(5), "{path}");
        };
        assert!(timed_out, "{path}: the server closed a hung stream");
        let text = String::from_utf8(got).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{path}: {text}");
        // The text arrives in two deltas ("Part", "ial "), each in its own chunk.
        assert!(
            text.contains("Part") && text.contains("ial "),
            "{path}: {text}"
        );
        for end in [
            "message_stop",
            "[DONE]",
            "response.completed",
            "finishReason",
        ] {
            assert!(!text.contains(end), "{path}: {end} sent: {text}");
        }
    }
}

#[test]
fn sequence_steps_skip_side_traffic_and_unknown_paths_get_404() {
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::text("one", USAGE),
        Reply::text("two", USAGE),
    ]));
    let text_of = |r: Response| -> String {
        r.sse_json()
            .iter()
            .filter_map(|(_, d)| d["choices"][0]["delta"]["content"].as_str())
            .collect()
    };
    let req =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        text_of(call(&mock, "/v1/chat/completions", req.clone())),
        "one"
    );
    let title = json!({"model": "m", "stream": true, "messages": [
        {"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
        {"role": "user", "content": "hi"}]});
    assert_eq!(
        text_of(call(&mock, "/v1/chat/completions", title)),
        "Mock side reply"
    );
    assert_eq!(
        text_of(call(&mock, "/v1/chat/completions", req.clone())),
        "two"
    );
    assert_eq!(
        text_of(call(&mock, "/v1/chat/completions", req)),
        "two",
        "the last step repeats"
    );
    let r = call(&mock, "/v1/models", Value::Null);
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["type"], json!("not_found"));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 5);
    assert_eq!(reqs[1].side, true);
    assert_eq!(reqs[4].api, None);
    assert_eq!(reqs[4].path, "/v1/models");
    assert_eq!(mock.conversation().len(), 3);
}

#[test]
fn non_streaming_requests_get_the_apis_json() {
    let mock = MockLlm::start(Script::always(Reply::text("plain", USAGE)));
    let r = call(&mock, "/v1/messages", json!({"model": "m"}));
    assert_eq!(
        r.json()["content"],
        json!([{"type": "text", "text": "plain"}])
    );
    let r = call(&mock, "/v1/chat/completions", json!({"model": "m"}));
    assert_eq!(r.json()["choices"][0]["message"]["content"], json!("plain"));
    let r = call(&mock, "/v1/responses", json!({"model": "m"}));
    assert_eq!(r.json()["output"][0]["content"][0]["text"], json!("plain"));
}

#[test]
fn side_requests_that_ask_for_json_get_a_minimal_instance_of_their_schema() {
    // Gemini CLI's model router (`-m auto`) retries until it parses JSON.
    let mock = MockLlm::start(Script::always(Reply::text("main", USAGE)));
    let router = json!({"contents": [{"role": "user", "parts": [{"text": "route"}]}],
        "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT", "required": ["complexity_reasoning", "complexity_score"],
            "properties": {"complexity_reasoning": {"type": "STRING"}, "complexity_score": {"type": "INTEGER"}}}}});
    let r = call(
        &mock,
        "/v1beta/models/gemini-flash-lite:generateContent",
        router,
    );
    let text = r.json()["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"complexity_reasoning": "mock", "complexity_score": 1})
    );
    assert_eq!(mock.conversation().len(), 0);
}

/// The mock as a program (`examples/mock_llm.rs`, which `scripts/demo` runs): it says
/// where it listens and answers as its script says.
#[test]
fn the_mock_program_announces_its_url_and_answers() {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let program = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("examples/mock_llm");
    assert!(program.exists(), "not built: {}", program.display());
    let dir = tempfile::tempdir().unwrap();
    let url_file = dir.path().join("url");
    let mut child = std::process::Command::new(&program)
        .args(["--script", "text", "--seconds", "60", "--url-file"])
        .arg(&url_file)
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let url = loop {
        if let Ok(url) = std::fs::read_to_string(&url_file) {
            break url;
        }
        assert!(Instant::now() < deadline, "no URL written");
        std::thread::sleep(Duration::from_millis(20));
    };
    let addr: SocketAddr = url.strip_prefix("http://").unwrap().parse().unwrap();
    let r = call_at(
        addr,
        "/v1/chat/completions",
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(r.status, 200);
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        json!("Hello from mock.")
    );
}

/// Runs the mock by hand (see the file's doc comment).
#[test]
#[ignore]
fn serve() {
    let tool_name = std::env::var("MOCK_LLM_TOOL").unwrap_or_else(|_| "bash".into());
    let tool_args: Value = std::env::var("MOCK_LLM_TOOL_ARGS")
        .ok()
        .map(|s| serde_json::from_str(&s).expect("MOCK_LLM_TOOL_ARGS is JSON"))
        .unwrap_or_else(|| json!({"command": "echo hi-from-tool"}));
    let api = match std::env::var("MOCK_LLM_API").as_deref() {
        Ok("anthropic") => Api::Anthropic,
        Ok("gemini") => Api::Gemini,
        _ => Api::OpenAiChat,
    };
    let name = std::env::var("MOCK_LLM_SCRIPT").unwrap_or_else(|_| "tool_then_text".into());
    let script =
        mock_llm::program::script_named(&name, (&tool_name, tool_args), api).expect("script");
    let mock = MockLlm::start(script);
    println!("mock LLM at {}", mock.base_url());
    if let Ok(f) = std::env::var("MOCK_LLM_URL_FILE") {
        std::fs::write(f, mock.base_url()).unwrap();
    }
    let secs: u64 = std::env::var("MOCK_LLM_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let log = std::env::var_os("MOCK_LLM_LOG").map(std::path::PathBuf::from);
    mock_llm::program::report_requests(
        &mock,
        Some(Instant::now() + Duration::from_secs(secs)),
        log.as_deref(),
    );
}

/// The playground script's request of `api` with `tools` offered and, when given, the
/// result of a tool call `call_1`: what each API's client sends.
fn playground_request(api: Api, tools: Value, result: Option<&str>) -> (String, Value) {
    let task = "find where auth is handled";
    match api {
        Api::Anthropic => {
            // Claude Code puts context in tags before the task.
            let mut messages = vec![json!({"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nToday is a day.\n</system-reminder>"},
                {"type": "text", "text": task}]})];
            if let Some(r) = result {
                messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "Glob", "input": {}}]}));
                messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": r}]}));
            }
            (
                "/v1/messages".into(),
                json!({"model": "m", "system": "You are an agent.", "messages": messages, "tools": tools}),
            )
        }
        Api::OpenAiChat => {
            let mut messages = vec![
                json!({"role": "system", "content": "You are an agent."}),
                json!({"role": "user", "content": task}),
            ];
            if let Some(r) = result {
                messages.push(json!({"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}));
                messages.push(json!({"role": "tool", "tool_call_id": "call_1", "content": r}));
            }
            (
                "/v1/chat/completions".into(),
                json!({"model": "m", "messages": messages, "tools": tools}),
            )
        }
        Api::OpenAiResponses => {
            let mut input =
                vec![json!({"role": "user", "content": [{"type": "input_text", "text": task}]})];
            if let Some(r) = result {
                input.push(json!({"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}));
                input.push(
                    json!({"type": "function_call_output", "call_id": "call_1", "output": r}),
                );
            }
            (
                "/v1/responses".into(),
                json!({"model": "m", "instructions": "You are an agent.", "input": input, "tools": tools}),
            )
        }
        Api::Gemini => {
            // Gemini CLI puts its context in tags in the same text as the task.
            let mut contents = vec![json!({"role": "user", "parts": [
                {"text": format!("<session_context>\nThis is the Gemini CLI.\n</session_context>\n{task}")}]})];
            if let Some(r) = result {
                contents.push(json!({"role": "model", "parts": [{"functionCall": {"name": "list_directory", "args": {}}}]}));
                contents.push(json!({"role": "user", "parts": [{"functionResponse": {"name": "list_directory", "response": {"output": r}}}]}));
            }
            (
                "/v1beta/models/g:streamGenerateContent?alt=sse".into(),
                json!({"contents": contents, "tools": tools}),
            )
        }
    }
}

/// The text and the tool calls (name, arguments) of a reply, whatever the API.
fn playground_answer(api: Api, r: &Response) -> (String, Vec<(String, Value)>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    match api {
        Api::Anthropic => {
            for block in r.json()["content"].as_array().unwrap() {
                match block["type"].as_str() {
                    Some("text") => text.push_str(block["text"].as_str().unwrap()),
                    Some("tool_use") => calls.push((
                        block["name"].as_str().unwrap().to_string(),
                        block["input"].clone(),
                    )),
                    _ => {}
                }
            }
        }
        Api::OpenAiChat => {
            let message = &r.json()["choices"][0]["message"];
            text.push_str(message["content"].as_str().unwrap_or_default());
            for c in message["tool_calls"].as_array().into_iter().flatten() {
                let args = c["function"]["arguments"].as_str().unwrap();
                calls.push((
                    c["function"]["name"].as_str().unwrap().to_string(),
                    serde_json::from_str(args).unwrap(),
                ));
            }
        }
        Api::OpenAiResponses => {
            for item in r.json()["output"].as_array().unwrap() {
                match item["type"].as_str() {
                    Some("message") => text.push_str(item["content"][0]["text"].as_str().unwrap()),
                    Some("function_call") => calls.push((
                        item["name"].as_str().unwrap().to_string(),
                        serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap(),
                    )),
                    _ => {}
                }
            }
        }
        Api::Gemini => {
            for (_, event) in r.sse_json() {
                for part in event["candidates"][0]["content"]["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    if let Some(t) = part["text"].as_str() {
                        text.push_str(t);
                    }
                    if let Some(f) = part.get("functionCall") {
                        calls.push((f["name"].as_str().unwrap().to_string(), f["args"].clone()));
                    }
                }
            }
        }
    }
    (text, calls)
}

#[test]
fn the_playground_lists_the_directory_then_quotes_the_result_in_every_api_for_any_number_of_runs() {
    let mock = MockLlm::start(Script::playground());
    let schema = |required: &[&str]| {
        let props: serde_json::Map<String, Value> = required
            .iter()
            .map(|p| (p.to_string(), json!({"type": "string"})))
            .chain([("other".to_string(), json!({"type": "integer"}))])
            .collect();
        json!({"type": "object", "properties": props, "required": required})
    };
    // Each API with the tools its CLIs offer: a write tool first (never chosen), then the
    // listing tool the playground prefers over the shell.
    let cases = [
        (
            Api::Anthropic,
            json!([{"name": "Write", "input_schema": schema(&["file_path", "content"])},
                   {"name": "Read", "input_schema": schema(&["file_path"])},
                   {"name": "Glob", "input_schema": schema(&["pattern"])}]),
            ("Glob", json!({"pattern": "*"})),
        ),
        (
            Api::OpenAiChat,
            json!([{"type": "function", "function": {"name": "write", "parameters": schema(&["path", "content"])}},
                   {"type": "function", "function": {"name": "glob", "parameters": schema(&["pattern"])}},
                   {"type": "function", "function": {"name": "bash", "parameters": schema(&["command", "description"])}}]),
            (
                "bash",
                json!({"command": "ls -la", "description": "List the working directory"}),
            ),
        ),
        (
            Api::OpenAiResponses,
            json!([{"type": "custom", "name": "apply_patch"},
                   {"type": "function", "name": "exec_command", "parameters": schema(&["cmd"])}]),
            ("exec_command", json!({"cmd": "ls -la"})),
        ),
        (
            Api::Gemini,
            json!([{"functionDeclarations": [
                {"name": "run_shell_command", "parametersJsonSchema": schema(&["command"])},
                {"name": "list_directory", "parametersJsonSchema": schema(&["dir_path"])}]}]),
            ("list_directory", json!({"dir_path": "."})),
        ),
    ];
    for (api, tools, (tool, args)) in cases {
        // Three runs in a row go the same way: a playground has no state between runs.
        for run in 0..3 {
            let (path, body) = playground_request(api, tools.clone(), None);
            let (text, calls) = playground_answer(api, &call(&mock, &path, body));
            assert_eq!(
                (text.as_str(), calls),
                (
                    "[scripted mock model, not an LLM] Let me look at the working directory first.",
                    vec![(tool.to_string(), args.clone())]
                ),
                "{api:?} run {run}"
            );
            let result = match api {
                Api::Anthropic => "Cargo.toml\nsrc\n<system-reminder>\nnoise\n</system-reminder>",
                _ => "Cargo.toml\nsrc",
            };
            let (path, body) = playground_request(api, tools.clone(), Some(result));
            let (text, calls) = playground_answer(api, &call(&mock, &path, body));
            assert_eq!(calls, vec![], "{api:?}");
            assert_eq!(
                text,
                "[scripted mock model, not an LLM] You asked:\n\n> find where auth is handled\n\nI listed the working directory; the tool returned:\n\nCargo.toml\nsrc",
                "{api:?}"
            );
        }
        // Offered no tool to list with: an answer at once.
        let (path, body) = playground_request(api, json!([]), None);
        let (text, calls) = playground_answer(api, &call(&mock, &path, body));
        assert_eq!(calls, vec![], "{api:?}");
        assert!(
            text.ends_with("I was offered no tool to look around with, so this is all I can say."),
            "{api:?}: {text}"
        );
    }
}

/// `Reply::quoting` fills a tool call's arguments with the word after a marker in the
/// latest tool result (or nothing when there is none); `Reply::after_file` holds its
/// answer until the file exists.
#[test]
fn a_quoting_reply_takes_a_word_of_the_latest_tool_result_and_after_file_waits() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let mock = MockLlm::start(Script::sequence(vec![
        Reply::quoting(
            Reply::tool("wait", json!({"runId": mock_llm::QUOTED, "n": 1}), USAGE),
            r#""runId":""#,
        ),
        Reply::after_file(&gate, Reply::text("released", USAGE)),
    ]));
    let args_of = |r: Response| -> Value {
        let args: String = r
            .sse_json()
            .iter()
            .filter_map(|(_, d)| {
                d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            })
            .collect();
        serde_json::from_str(&args).unwrap()
    };
    let with_result = |text: &str| {
        json!({"model": "m", "stream": true, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "subagent", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": text}]})
    };
    assert_eq!(
        args_of(call(
            &mock,
            "/v1/chat/completions",
            with_result(r#"{"mode":"single","runId":"ab12cd34","results":[]}"#)
        )),
        json!({"runId": "ab12cd34", "n": 1})
    );
    let held = std::thread::spawn({
        let addr = mock.addr();
        move || call_at(addr, "/v1/chat/completions", with_result("x"))
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!held.is_finished(), "answered before the file existed");
    std::fs::write(&gate, "").unwrap();
    let text: String = held
        .join()
        .unwrap()
        .sse_json()
        .iter()
        .filter_map(|(_, d)| d["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "released");
}
