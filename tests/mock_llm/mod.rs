//! A scripted mock LLM server on 127.0.0.1 for the contract tests, which run the real
//! agent CLIs offline against it. It speaks the four wire APIs those CLIs use, chosen by
//! path:
//!
//! | path | API |
//! |---|---|
//! | `POST …/v1/messages` (also `?beta=true`) | Anthropic Messages |
//! | `POST …/v1/chat/completions` | OpenAI Chat Completions |
//! | `POST …/v1/responses` | OpenAI Responses |
//! | `POST …/v1beta/models/{model}:streamGenerateContent?alt=sse` (and `:generateContent`) | Gemini |
//!
//! Streaming requests get SSE (`text/event-stream`, chunked, then the connection closes);
//! non-streaming ones get the API's JSON body. Any other path gets a 404 JSON and is
//! recorded. Requests that are not the main conversation (a CLI's title generation and
//! the like, see [`side_traffic`]) get a short text and never consume a scripted step.
//!
//! The server runs on its own thread with its own tokio runtime, so synchronous
//! `#[test]` functions can use it; it stops when dropped.
#![allow(dead_code)]

pub mod contract;
mod http;
pub mod otlp;
pub mod playground;
pub mod program;
mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};

pub use wire::{default_error_message, error_body, tool_call_id};

/// The wire API a request spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAiChat,
    OpenAiResponses,
    Gemini,
}

/// Token counts the mock reports. `input` is the whole prompt, cached tokens included
/// (OpenAI's `prompt_tokens`, Gemini's `promptTokenCount`); for Anthropic, whose
/// `input_tokens` excludes cache reads, the mock sends `input - cached`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockUsage {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A streamed (or, when the request did not stream, complete) text answer.
    Text { text: String, usage: MockUsage },
    /// `reply` (a text, a tool call, or both) with its usage object exactly as given, for
    /// what [`MockUsage`] cannot hold: negative counts, strings, null. It replaces the
    /// top-level `usage` of the events that carry one (OpenAI Chat's last chunk,
    /// Anthropic's `message_delta`, a complete answer's body).
    WithUsage { reply: Box<Reply>, usage: Value },
    /// One tool call with these arguments.
    ToolCall {
        name: String,
        args: Value,
        usage: MockUsage,
    },
    /// Text, then one tool call, in the same reply: a turn that says what it does.
    TextThenTool {
        text: String,
        name: String,
        args: Value,
        usage: MockUsage,
    },
    /// One call of a freeform ("custom") tool, whose input is raw text rather than JSON
    /// arguments: a `custom_tool_call` item in OpenAI Responses (codex's `apply_patch`).
    /// The other APIs have no such tool and get a function call with `{"input": input}`.
    CustomToolCall {
        name: String,
        input: String,
        usage: MockUsage,
    },
    /// An HTTP error with this JSON body. `Value::Null` = the API's own error shape with
    /// [`default_error_message`] for that status.
    HttpError { status: u16, body: Value },
    /// 529 `overloaded_error` for Anthropic, 503 with the API's error shape elsewhere.
    Overloaded,
    /// Sends the headers and the first event(s) of a text reply carrying `text_before`,
    /// then nothing more, and never closes the connection (until the client does or the
    /// mock is dropped).
    Hang { text_before: String },
    /// One Responses output item as given, for what the other replies do not express
    /// (codex's `tool_search_call`, a `function_call` in a `namespace`); `id` and `call_id`
    /// are filled in when absent. Only for the Responses API: another API gets a 400.
    ResponsesItem { item: Value, usage: MockUsage },
    /// A text answer quoting the request's latest tool result: `prefix` followed by the
    /// text of the last tool result the request carries (see [`tool_result_texts`]; just
    /// `prefix` when there is none). Served as [`Reply::Text`]; for end-to-end tests where
    /// the final answer must really have come through the tool.
    QuoteToolResult { prefix: String, usage: MockUsage },
    /// `reply` (a tool call, a Responses item, …) taking a word of the request's latest
    /// tool result: every [`QUOTED`] in its strings becomes the letters and digits that
    /// follow `after` in that result's text (`"runId":"` picks a run id out of JSON).
    /// Served as `reply` so filled in; for a model that must pass on what a tool returned
    /// (a run id) to its next call.
    Quoting { reply: Box<Reply>, after: String },
    /// `reply`, served once `file` exists (looked for every 20 ms, for at most
    /// [`AFTER_FILE_LIMIT`], then served anyway): a model whose answer a test holds back
    /// until something else has happened.
    AfterFile {
        file: std::path::PathBuf,
        reply: Box<Reply>,
    },
}

/// How long [`Reply::AfterFile`] waits for its file at most.
pub const AFTER_FILE_LIMIT: Duration = Duration::from_secs(120);

/// What [`Reply::Quoting`] replaces with the quoted word.
pub const QUOTED: &str = "{quoted}";

impl Reply {
    pub fn text(text: &str, usage: MockUsage) -> Reply {
        Reply::Text {
            text: text.to_string(),
            usage,
        }
    }

    pub fn tool(name: &str, args: Value, usage: MockUsage) -> Reply {
        Reply::ToolCall {
            name: name.to_string(),
            args,
            usage,
        }
    }

    pub fn text_then_tool(text: &str, name: &str, args: Value, usage: MockUsage) -> Reply {
        Reply::TextThenTool {
            text: text.to_string(),
            name: name.to_string(),
            args,
            usage,
        }
    }

    pub fn custom_tool(name: &str, input: &str, usage: MockUsage) -> Reply {
        Reply::CustomToolCall {
            name: name.to_string(),
            input: input.to_string(),
            usage,
        }
    }

    /// 401 with the API's own error shape and message.
    pub fn unauthorized() -> Reply {
        Reply::HttpError {
            status: 401,
            body: Value::Null,
        }
    }

    pub fn hang(text_before: &str) -> Reply {
        Reply::Hang {
            text_before: text_before.to_string(),
        }
    }

    pub fn responses_item(item: Value, usage: MockUsage) -> Reply {
        Reply::ResponsesItem { item, usage }
    }

    pub fn quote_tool_result(prefix: &str, usage: MockUsage) -> Reply {
        Reply::QuoteToolResult {
            prefix: prefix.to_string(),
            usage,
        }
    }

    pub fn after_file(file: &std::path::Path, reply: Reply) -> Reply {
        Reply::AfterFile {
            file: file.to_path_buf(),
            reply: Box::new(reply),
        }
    }

    /// [`Reply::Quoting`]: `reply` with the word after `after` in the latest tool result.
    pub fn quoting(reply: Reply, after: &str) -> Reply {
        Reply::Quoting {
            reply: Box::new(reply),
            after: after.to_string(),
        }
    }

    /// The reply as served for this request body: [`Reply::QuoteToolResult`] becomes
    /// [`Reply::Text`], [`Reply::Quoting`] its reply filled in; every other reply is
    /// unchanged.
    fn resolve(self, body: &Value) -> Reply {
        match self {
            Reply::AfterFile { file, reply } => Reply::AfterFile {
                file,
                reply: Box::new(reply.resolve(body)),
            },
            Reply::Quoting { reply, after } => {
                let latest = tool_result_texts(body).pop().unwrap_or_default();
                let word: String = latest
                    .split_once(after.as_str())
                    .map(|(_, rest)| {
                        rest.trim_start()
                            .chars()
                            .take_while(|c| c.is_alphanumeric())
                            .collect()
                    })
                    .unwrap_or_default();
                reply.with_quoted(&word).resolve(body)
            }
            Reply::QuoteToolResult { prefix, usage } => Reply::Text {
                text: format!(
                    "{prefix}{}",
                    tool_result_texts(body).pop().unwrap_or_default()
                ),
                usage,
            },
            other => other,
        }
    }

    /// The reply with every [`QUOTED`] in its arguments, texts and items replaced by `word`.
    fn with_quoted(self, word: &str) -> Reply {
        let text = |t: String| t.replace(QUOTED, word);
        match self {
            Reply::ToolCall { name, args, usage } => Reply::ToolCall {
                name,
                args: replace_quoted(args, word),
                usage,
            },
            Reply::TextThenTool {
                text: t,
                name,
                args,
                usage,
            } => Reply::TextThenTool {
                text: text(t),
                name,
                args: replace_quoted(args, word),
                usage,
            },
            Reply::Text { text: t, usage } => Reply::Text {
                text: text(t),
                usage,
            },
            Reply::ResponsesItem { item, usage } => Reply::ResponsesItem {
                item: replace_quoted(item, word),
                usage,
            },
            other => other,
        }
    }

    fn describe(&self) -> String {
        match self {
            Reply::Text { text, .. } => format!("text {text:?}"),
            Reply::ToolCall { name, args, .. } => format!("tool_call {name} {args}"),
            Reply::TextThenTool {
                text, name, args, ..
            } => format!("text {text:?} then tool_call {name} {args}"),
            Reply::CustomToolCall { name, input, .. } => {
                format!("custom_tool_call {name} {input:?}")
            }
            Reply::HttpError { status, .. } => format!("http_error {status}"),
            Reply::Overloaded => "overloaded".into(),
            Reply::Hang { text_before } => format!("hang after {text_before:?}"),
            Reply::QuoteToolResult { prefix, .. } => format!("quote tool results after {prefix:?}"),
            Reply::Quoting { reply, after } => {
                format!("{} quoting the word after {after:?}", reply.describe())
            }
            Reply::AfterFile { file, reply } => {
                format!("{} once {} exists", reply.describe(), file.display())
            }
            Reply::ResponsesItem { item, .. } => format!("responses item {item}"),
            Reply::WithUsage { reply, usage } => format!("{} with usage {usage}", reply.describe()),
        }
    }
}

/// `v` with every [`QUOTED`] in its strings replaced by `word`.
fn replace_quoted(v: Value, word: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace(QUOTED, word)),
        Value::Array(items) => items.into_iter().map(|i| replace_quoted(i, word)).collect(),
        Value::Object(map) => map
            .into_iter()
            .map(|(k, v)| (k, replace_quoted(v, word)))
            .collect(),
        other => other,
    }
}

/// Decides the reply per request.
#[derive(Clone, Debug)]
pub struct Script(ScriptKind);

#[derive(Clone, Debug)]
enum ScriptKind {
    Always(Reply),
    ToolThenText(Reply, Reply),
    Sequence(Vec<Reply>),
    PerModel(Vec<(String, Reply)>),
    Playground,
}

impl Script {
    pub fn always(reply: Reply) -> Script {
        Script(ScriptKind::Always(reply))
    }

    /// `text` when the request already carries a tool result (`tool_result`,
    /// `role: "tool"`, `function_call_output`, `functionResponse`), else `tool`.
    pub fn tool_then_text(tool: Reply, text: Reply) -> Script {
        Script(ScriptKind::ToolThenText(tool, text))
    }

    /// The replies in order; the last one repeats.
    pub fn sequence(replies: Vec<Reply>) -> Script {
        assert!(!replies.is_empty(), "a sequence needs at least one reply");
        Script(ScriptKind::Sequence(replies))
    }

    /// Any number of conversations, each going the same way, for every API (see
    /// [`playground`]): a call of a tool that lists the working directory, then an answer
    /// quoting what it returned.
    pub fn playground() -> Script {
        Script(ScriptKind::Playground)
    }

    /// The reply for the model the request names (the request's `model`, or the Gemini
    /// path's); a model not listed gets a 404 naming it.
    pub fn per_model(replies: &[(&str, Reply)]) -> Script {
        Script(ScriptKind::PerModel(
            replies
                .iter()
                .map(|(m, r)| (m.to_string(), r.clone()))
                .collect(),
        ))
    }
}

/// One request the mock received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    /// Lowercased names.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON; `Value::Null` when empty or not JSON.
    pub body: Value,
    /// The API the path selected (None: an unknown path, answered 404).
    pub api: Option<Api>,
    /// Side traffic (title generation, …): answered with a short text, no scripted step.
    pub side: bool,
    /// What the mock answered, for reports ("text \"…\"", "tool_call bash {…}", "404", …).
    pub served: String,
    /// The mock's number for the request, which the ids in its reply carry (see
    /// [`tool_call_id`]); 0 for a request it did not route.
    pub seq: u64,
}

struct State {
    script: Script,
    cursor: usize,
    counter: u64,
    requests: Vec<RecordedRequest>,
    limiter: Option<RateLimiter>,
}

/// A provider's request rate limit: at most `per_second` requests in any second; the
/// requests beyond it get 429 with the API's own error and `retry-after` (whole seconds)
/// and `retry-after-ms` headers saying when the next one would be admitted.
#[derive(Debug)]
struct RateLimiter {
    per_second: usize,
    /// When each request admitted within the last second arrived, oldest first.
    admitted: std::collections::VecDeque<Instant>,
    /// 429s served so far.
    refused: u64,
    /// What the 429s ask for, instead of when the next request would be admitted.
    retry_after: Option<Duration>,
}

const RATE_WINDOW: Duration = Duration::from_secs(1);

impl RateLimiter {
    /// None: admitted. Some(wait): refused, and when the next request would be admitted.
    fn check(&mut self, now: Instant) -> Option<Duration> {
        while self
            .admitted
            .front()
            .is_some_and(|t| now.duration_since(*t) >= RATE_WINDOW)
        {
            self.admitted.pop_front();
        }
        if self.admitted.len() < self.per_second {
            self.admitted.push_back(now);
            return None;
        }
        self.refused += 1;
        let oldest = *self.admitted.front().expect("the window is full");
        Some(
            self.retry_after
                .unwrap_or_else(|| (oldest + RATE_WINDOW).saturating_duration_since(now)),
        )
    }
}

impl State {
    fn next_reply(&mut self, api: Api, body: &Value, model: &str) -> Reply {
        let has_tool_result = has_tool_result(body);
        match &self.script.0 {
            ScriptKind::Playground => playground::reply(api, body),
            ScriptKind::PerModel(replies) => replies
                .iter()
                .find(|(m, _)| m == model)
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| Reply::HttpError {
                    status: 404,
                    body: json!({"error": {"type": "not_found_error",
                                           "message": format!("model {model} not found")}}),
                }),
            ScriptKind::Always(r) => r.clone(),
            ScriptKind::ToolThenText(tool, text) => {
                if has_tool_result {
                    text.clone()
                } else {
                    tool.clone()
                }
            }
            ScriptKind::Sequence(replies) => {
                let r = replies[self.cursor.min(replies.len() - 1)].clone();
                self.cursor += 1;
                r
            }
        }
    }
}

pub struct MockLlm {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockLlm {
    /// Binds 127.0.0.1 on a free port and serves on a thread of its own.
    pub fn start(script: Script) -> MockLlm {
        MockLlm::start_on(script, std::net::Ipv4Addr::LOCALHOST.into())
    }

    /// Binds `ip` (an address of this machine) on a free port and serves on a thread of
    /// its own.
    pub fn start_on(script: Script, ip: std::net::IpAddr) -> MockLlm {
        let listener =
            std::net::TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("bind {ip}: {e}"));
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State {
            script,
            cursor: 0,
            counter: 0,
            requests: Vec::new(),
            limiter: None,
        }));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("mock-llm-{}", addr.port()))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("tokio listener");
                    tokio::select! {
                        _ = accept_loop(listener, st) => {}
                        _ = rx => {}
                    }
                });
                // Dropping the runtime cancels the connection tasks (hung streams
                // included) and closes their sockets.
                drop(rt);
            })
            .expect("spawn mock thread");
        MockLlm {
            addr,
            state,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// From now on, admits at most `per_second` requests (of any kind) in any second; the
    /// others get 429 (`rate_limit_error`, `rate_limit_exceeded`, `RESOURCE_EXHAUSTED` as
    /// the API says it) with `retry-after` and `retry-after-ms` headers, and consume no
    /// scripted step.
    pub fn rate_limit(&self, per_second: usize) {
        self.rate_limit_asking(per_second, None);
    }

    /// As [`MockLlm::rate_limit`], the 429s asking for `retry_after` (None: when the next
    /// request would be admitted).
    pub fn rate_limit_asking(&self, per_second: usize, retry_after: Option<Duration>) {
        assert!(
            per_second > 0,
            "a rate limit admits at least one request a second"
        );
        self.state.lock().unwrap().limiter = Some(RateLimiter {
            per_second,
            admitted: Default::default(),
            refused: 0,
            retry_after,
        });
    }

    /// The 429s the rate limit has served.
    pub fn rate_limited(&self) -> u64 {
        self.state
            .lock()
            .unwrap()
            .limiter
            .as_ref()
            .map_or(0, |l| l.refused)
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The requests of the main conversation (known API, not side traffic).
    pub fn conversation(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.api.is_some() && !r.side)
            .collect()
    }

    /// Waits until `n` conversation requests have arrived; false on timeout.
    pub fn wait_for_conversation(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.conversation().len() >= n {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let st = Arc::clone(&state);
                tokio::spawn(async move {
                    let _ = handle(stream, st).await;
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// The API a path speaks, and whether the path itself asks for a stream (Gemini).
fn route(method: &str, path: &str) -> Option<(Api, Option<bool>)> {
    if method != "POST" {
        return None;
    }
    if path.ends_with("/v1/messages") {
        Some((Api::Anthropic, None))
    } else if path.ends_with("/chat/completions") {
        Some((Api::OpenAiChat, None))
    } else if path.ends_with("/responses") {
        Some((Api::OpenAiResponses, None))
    } else if path.contains("/models/") && path.ends_with(":streamGenerateContent") {
        Some((Api::Gemini, Some(true)))
    } else if path.contains("/models/") && path.ends_with(":generateContent") {
        Some((Api::Gemini, Some(false)))
    } else {
        None
    }
}

/// The model a recorded request asked for: its body's `model`, or the Gemini path's.
pub fn requested_model(r: &RecordedRequest) -> String {
    match r.api {
        Some(Api::Gemini) => gemini_model(r.path.split('?').next().unwrap_or_default()).to_string(),
        _ => r.body["model"].as_str().unwrap_or_default().to_string(),
    }
}

fn gemini_model(path: &str) -> &str {
    path.rsplit("/models/")
        .next()
        .and_then(|m| m.split(':').next())
        .unwrap_or("gemini-mock")
}

/// True when the request carries the result of a tool call, in any API's shape.
pub fn has_tool_result(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            let t = map.get("type").and_then(Value::as_str);
            if matches!(
                t,
                Some("tool_result" | "function_call_output" | "custom_tool_call_output")
            ) || map.get("role").and_then(Value::as_str) == Some("tool")
                || map.contains_key("functionResponse")
            {
                return true;
            }
            map.values().any(has_tool_result)
        }
        Value::Array(items) => items.iter().any(has_tool_result),
        _ => false,
    }
}

/// The text of every tool result a request carries, in order, whatever the API: an
/// Anthropic `tool_result` block's `content` (a string or text blocks), an OpenAI
/// `role: "tool"` message's `content`, a Responses `function_call_output`'s `output`, a
/// Gemini `functionResponse`'s `response` (as JSON).
pub fn tool_result_texts(body: &Value) -> Vec<String> {
    fn text_of(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|i| match i.get("text") {
                    Some(Value::String(t)) => t.clone(),
                    _ => text_of(i),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                let t = map.get("type").and_then(Value::as_str);
                if t == Some("tool_result")
                    || map.get("role").and_then(Value::as_str) == Some("tool")
                {
                    out.push(text_of(map.get("content").unwrap_or(&Value::Null)));
                } else if matches!(t, Some("function_call_output" | "custom_tool_call_output")) {
                    out.push(text_of(map.get("output").unwrap_or(&Value::Null)));
                } else if let Some(r) = map.get("functionResponse") {
                    out.push(text_of(&r["response"]));
                } else {
                    map.values().for_each(|v| walk(v, out));
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, &mut out);
    out
}

/// The ids of the tool calls a request's tool results answer, in order, whatever the API:
/// Anthropic `tool_use_id`, OpenAI Chat `tool_call_id`, Responses `call_id`, Gemini
/// `functionResponse.id` (where the client sends one).
pub fn tool_result_ids(body: &Value) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                let t = map.get("type").and_then(Value::as_str);
                let id = if t == Some("tool_result") {
                    Some(&map["tool_use_id"])
                } else if map.get("role").and_then(Value::as_str) == Some("tool") {
                    Some(&map["tool_call_id"])
                } else if matches!(t, Some("function_call_output" | "custom_tool_call_output")) {
                    Some(&map["call_id"])
                } else {
                    map.get("functionResponse").map(|r| &r["id"])
                };
                match id {
                    Some(id) => out.extend(id.as_str().map(str::to_string)),
                    None => map.values().for_each(|v| walk(v, out)),
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, &mut out);
    out
}

/// The names of the tools a request offers, in order, whatever the API: Anthropic and
/// Responses `tools[].name` (a Responses built-in tool: its `type`), OpenAI Chat
/// `tools[].function.name`, Gemini `tools[].functionDeclarations[].name`.
pub fn offered_tools(api: Api, body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().into_iter().flatten();
    let names: Vec<&Value> = match api {
        Api::Anthropic => tools.map(|t| &t["name"]).collect(),
        Api::OpenAiChat => tools.map(|t| &t["function"]["name"]).collect(),
        Api::OpenAiResponses => tools
            .map(|t| {
                if t["name"].is_string() {
                    &t["name"]
                } else {
                    &t["type"]
                }
            })
            .collect(),
        Api::Gemini => tools
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .map(|f| &f["name"])
            .collect(),
    };
    names
        .into_iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// The first message of the conversation (after any system or developer message), as
/// JSON text, whatever the API.
pub fn first_message_text(api: Api, body: &Value) -> String {
    let list = match api {
        Api::Anthropic | Api::OpenAiChat => &body["messages"],
        Api::OpenAiResponses => &body["input"],
        Api::Gemini => &body["contents"],
    };
    list.as_array()
        .into_iter()
        .flatten()
        .find(|m| !matches!(m["role"].as_str(), Some("system" | "developer")))
        .map(Value::to_string)
        .unwrap_or_default()
}

/// The text parts of the user's messages in a request, each on its own, whatever the API:
/// Anthropic `messages[role=user].content` (a string or text blocks), OpenAI Chat
/// `messages[role=user].content`, Responses `input[role=user].content[].text`, Gemini
/// `contents[role=user].parts[].text`. Tool results are not text parts.
pub fn user_texts(api: Api, body: &Value) -> Vec<String> {
    let list = match api {
        Api::Anthropic | Api::OpenAiChat => &body["messages"],
        Api::OpenAiResponses => &body["input"],
        Api::Gemini => &body["contents"],
    };
    let mut out = Vec::new();
    for m in list.as_array().into_iter().flatten() {
        if m["role"].as_str() != Some("user") {
            continue;
        }
        let parts = if api == Api::Gemini {
            &m["parts"]
        } else {
            &m["content"]
        };
        match parts {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => out.extend(
                items
                    .iter()
                    .filter(|i| {
                        i.get("type")
                            .is_none_or(|t| matches!(t.as_str(), Some("text" | "input_text")))
                    })
                    .filter_map(|i| i["text"].as_str().map(str::to_string)),
            ),
            _ => {}
        }
    }
    out
}

/// The system prompt text of a request, whatever the API.
pub fn system_text(api: Api, body: &Value) -> String {
    fn texts(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|i| texts(i, out)),
            Value::Object(m) => {
                if let Some(t) = m.get("text") {
                    texts(t, out);
                }
                if let Some(c) = m.get("content") {
                    texts(c, out);
                }
                if let Some(p) = m.get("parts") {
                    texts(p, out);
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    match api {
        Api::Anthropic => texts(&body["system"], &mut out),
        Api::OpenAiChat | Api::OpenAiResponses => {
            texts(&body["instructions"], &mut out);
            let list = if api == Api::OpenAiChat {
                &body["messages"]
            } else {
                &body["input"]
            };
            for m in list.as_array().into_iter().flatten() {
                if matches!(m["role"].as_str(), Some("system" | "developer")) {
                    texts(&m["content"], &mut out);
                }
            }
        }
        Api::Gemini => texts(&body["systemInstruction"], &mut out),
    }
    out
}

/// Requests a CLI sends beside the conversation, which must not consume a scripted step.
/// Each marker was found by running the CLI against this mock (see docs/contract-tests.md).
pub fn side_traffic(api: Api, path: &str, body: &Value) -> bool {
    let system = system_text(api, body);
    // opencode: the session title ("You are a title generator. You output ONLY a thread
    // title. …"), sent beside the first turn.
    if system.contains("You are a title generator") {
        return true;
    }
    // claude-agent-acp (ACP): the session's title ("You are naming a coding session"), and
    // after a turn the next prompt it would suggest ("[SUGGESTION MODE: …").
    if system.contains("You are naming a coding session")
        || user_texts(api, body)
            .iter()
            .any(|t| t.contains("[SUGGESTION MODE:"))
    {
        return true;
    }
    // Gemini CLI: its non-streaming helper calls (next-speaker check, routing, …); the
    // conversation always streams.
    if api == Api::Gemini && path.ends_with(":generateContent") {
        return true;
    }
    false
}

/// The text of a side-traffic reply: "Mock side reply", or, when the request asks for
/// JSON with a schema (Gemini's `responseJsonSchema`/`responseSchema`, OpenAI's
/// `response_format`/`text.format`), a minimal instance of it. Gemini CLI's model router
/// (`-m auto`) retries with backoff until it gets valid JSON.
pub fn side_reply_text(body: &Value) -> String {
    let schema = [
        &body["generationConfig"]["responseJsonSchema"],
        &body["generationConfig"]["responseSchema"],
        &body["response_format"]["json_schema"]["schema"],
        &body["text"]["format"]["schema"],
    ]
    .into_iter()
    .find(|s| s.is_object());
    match schema {
        Some(s) => json_from_schema(s).to_string(),
        None => "Mock side reply".to_string(),
    }
}

/// A minimal value matching a JSON schema (OpenAPI-style upper-case types too).
pub fn json_from_schema(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let ty = schema["type"]
        .as_str()
        .or_else(|| schema["type"].as_array().and_then(|t| t[0].as_str()))
        .unwrap_or("object")
        .to_ascii_lowercase();
    match ty.as_str() {
        "string" => json!("mock"),
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or_else(|| json!(1)),
        "boolean" => json!(false),
        "array" => json!([]),
        "null" => Value::Null,
        _ => {
            let mut out = serde_json::Map::new();
            for (k, v) in schema["properties"].as_object().into_iter().flatten() {
                out.insert(k.clone(), json_from_schema(v));
            }
            Value::Object(out)
        }
    }
}

async fn handle(mut stream: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let req = http::read_request(&mut stream).await?;
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let path = req.path().to_string();
    let Some((api, path_stream)) = route(&req.method, &path) else {
        record(&state, &req, body, None, false, "404".into());
        let err = json!({"error": {"type": "not_found", "message": format!("mock: no route for {} {}", req.method, req.target)}});
        return http::write_json(&mut stream, 404, &[], &err).await;
    };
    let streaming = path_stream.unwrap_or_else(|| body["stream"].as_bool() == Some(true));
    let model = match api {
        Api::Gemini => gemini_model(&path).to_string(),
        _ => body["model"].as_str().unwrap_or("mock").to_string(),
    };
    let include_usage = body["stream_options"]["include_usage"].as_bool() == Some(true);
    let side = side_traffic(api, &path, &body);
    let refused = {
        let mut st = state.lock().unwrap();
        let wait = st.limiter.as_mut().and_then(|l| l.check(Instant::now()));
        if wait.is_some() {
            st.requests.push(RecordedRequest {
                method: req.method.clone(),
                path: req.target.clone(),
                headers: req.headers.clone(),
                body: body.clone(),
                api: Some(api),
                side,
                served: "429 rate limited".into(),
                seq: 0,
            });
        }
        wait
    };
    if let Some(wait) = refused {
        let body = error_body(api, 429, default_error_message(api, 429));
        let headers = [
            (
                "retry-after",
                wait.as_secs_f64().ceil().max(1.0).to_string(),
            ),
            ("retry-after-ms", wait.as_millis().max(1).to_string()),
        ];
        return http::write_json(&mut stream, 429, &headers, &body).await;
    }
    let (reply, n) = {
        let mut st = state.lock().unwrap();
        st.counter += 1;
        let n = st.counter;
        let reply = if side {
            Reply::text(
                &side_reply_text(&body),
                MockUsage {
                    input: 10,
                    output: 3,
                    cached: 0,
                },
            )
        } else {
            st.next_reply(api, &body, &model).resolve(&body)
        };
        st.requests.push(RecordedRequest {
            method: req.method.clone(),
            path: req.target.clone(),
            headers: req.headers.clone(),
            body: body.clone(),
            api: Some(api),
            side,
            served: reply.describe(),
            seq: n,
        });
        (reply, n)
    };
    let ctx = wire::Ctx {
        api,
        model: &model,
        n,
        include_usage,
    };
    let reply = match reply {
        Reply::AfterFile { file, reply } => {
            let since = Instant::now();
            while !file.exists() && since.elapsed() < AFTER_FILE_LIMIT {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            *reply
        }
        other => other,
    };
    match reply {
        Reply::Text { text, usage } => {
            send(
                &mut stream,
                &ctx,
                streaming,
                &wire::Content::Text(&text),
                &usage,
            )
            .await
        }
        Reply::WithUsage { reply, usage: raw } => {
            let (text, tool) = match *reply {
                Reply::Text { text, .. } => (Some(text), None),
                Reply::ToolCall { name, args, .. } => (None, Some((name, args))),
                Reply::TextThenTool {
                    text, name, args, ..
                } => (Some(text), Some((name, args))),
                other => panic!("the mock gives a usage of its own only to a text or a tool call, not {other:?}"),
            };
            let content = match (&text, &tool) {
                (Some(text), None) => wire::Content::Text(text),
                (None, Some((name, args))) => wire::Content::Tool { name, args },
                (Some(text), Some((name, args))) => {
                    wire::Content::TextThenTool { text, name, args }
                }
                (None, None) => unreachable!("a reply is a text or a tool call"),
            };
            send_with_usage(&mut stream, &ctx, streaming, &content, &raw).await
        }
        Reply::ToolCall { name, args, usage } => {
            let content = wire::Content::Tool {
                name: &name,
                args: &args,
            };
            send(&mut stream, &ctx, streaming, &content, &usage).await
        }
        Reply::TextThenTool {
            text,
            name,
            args,
            usage,
        } => {
            let content = wire::Content::TextThenTool {
                text: &text,
                name: &name,
                args: &args,
            };
            send(&mut stream, &ctx, streaming, &content, &usage).await
        }
        Reply::CustomToolCall { name, input, usage } if api == Api::OpenAiResponses => {
            if streaming {
                http::start_sse(&mut stream).await?;
                for ev in wire::responses_custom_tool_stream(&ctx, &name, &input, &usage) {
                    http::write_chunk(&mut stream, ev.encode().as_bytes()).await?;
                }
                http::end_chunked(&mut stream).await
            } else {
                let body = wire::responses_custom_tool_complete(&ctx, &name, &input, &usage);
                http::write_json(&mut stream, 200, &[], &body).await
            }
        }
        Reply::ResponsesItem { item, usage } if api == Api::OpenAiResponses => {
            let item = wire::responses_item_with_ids(&ctx, item);
            if streaming {
                http::start_sse(&mut stream).await?;
                for ev in wire::responses_raw_item_stream(&ctx, &item, &usage) {
                    http::write_chunk(&mut stream, ev.encode().as_bytes()).await?;
                }
                http::end_chunked(&mut stream).await
            } else {
                let body = wire::responses_raw_item_complete(&ctx, &item, &usage);
                http::write_json(&mut stream, 200, &[], &body).await
            }
        }
        Reply::ResponsesItem { .. } => {
            let body = error_body(
                api,
                400,
                "the mock serves a Responses item only to the Responses API",
            );
            http::write_json(&mut stream, 400, &[], &body).await
        }
        Reply::CustomToolCall { name, input, usage } => {
            let args = json!({ "input": input });
            let content = wire::Content::Tool {
                name: &name,
                args: &args,
            };
            send(&mut stream, &ctx, streaming, &content, &usage).await
        }
        Reply::HttpError { status, body } => {
            let body = if body.is_null() {
                error_body(api, status, default_error_message(api, status))
            } else {
                body
            };
            http::write_json(&mut stream, status, &[], &body).await
        }
        Reply::Overloaded => {
            let (status, body) = wire::overloaded(api);
            let extra = if api == Api::Anthropic {
                vec![("x-should-retry", "true".to_string())]
            } else {
                vec![]
            };
            http::write_json(&mut stream, status, &extra, &body).await
        }
        Reply::Hang { text_before } => {
            if streaming {
                http::start_sse(&mut stream).await?;
                for ev in wire::stream_start(&ctx, &text_before) {
                    http::write_chunk(&mut stream, ev.encode().as_bytes()).await?;
                }
            } else {
                use tokio::io::AsyncWriteExt;
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{")
                    .await?;
                stream.flush().await?;
            }
            http::hang(&mut stream).await;
            Ok(())
        }
        Reply::QuoteToolResult { .. } => unreachable!("resolved to Text when recorded"),
        Reply::Quoting { .. } => unreachable!("resolved when recorded"),
        Reply::AfterFile { .. } => unreachable!("unwrapped above"),
    }
}

async fn send(
    stream: &mut TcpStream,
    ctx: &wire::Ctx<'_>,
    streaming: bool,
    content: &wire::Content<'_>,
    usage: &MockUsage,
) -> std::io::Result<()> {
    if streaming {
        http::start_sse(stream).await?;
        for ev in wire::stream(ctx, content, usage) {
            http::write_chunk(stream, ev.encode().as_bytes()).await?;
        }
        http::end_chunked(stream).await
    } else {
        http::write_json(stream, 200, &[], &wire::complete(ctx, content, usage)).await
    }
}

/// As [`send`], with `raw` as every top-level `usage` the events carry.
async fn send_with_usage(
    stream: &mut TcpStream,
    ctx: &wire::Ctx<'_>,
    streaming: bool,
    content: &wire::Content<'_>,
    raw: &Value,
) -> std::io::Result<()> {
    let replaced = |mut v: Value| {
        if let Some(usage) = v.get_mut("usage") {
            *usage = raw.clone();
        }
        v
    };
    let usage = MockUsage::default();
    if streaming {
        http::start_sse(stream).await?;
        for mut ev in wire::stream(ctx, content, &usage) {
            if let Ok(v) = serde_json::from_str::<Value>(&ev.data) {
                ev.data = replaced(v).to_string();
            }
            http::write_chunk(stream, ev.encode().as_bytes()).await?;
        }
        http::end_chunked(stream).await
    } else {
        let body = replaced(wire::complete(ctx, content, &usage));
        http::write_json(stream, 200, &[], &body).await
    }
}

fn record(
    state: &Arc<Mutex<State>>,
    req: &http::Request,
    body: Value,
    api: Option<Api>,
    side: bool,
    served: String,
) {
    state.lock().unwrap().requests.push(RecordedRequest {
        method: req.method.clone(),
        path: req.target.clone(),
        headers: req.headers.clone(),
        body,
        api,
        side,
        served,
        seq: 0,
    });
}
