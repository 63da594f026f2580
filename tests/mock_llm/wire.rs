//! The four wire APIs' reply shapes: SSE events for streaming requests, one JSON body for
//! non-streaming ones, and each API's own error body. Shapes follow each API's published
//! streaming format, as far as the real CLIs read it (checked by running them against
//! the mock: tests/contract_*.rs).

use serde_json::{json, Value};

use super::{Api, MockUsage};

/// The id the mock gives the tool call it makes in its `n`th request (see [`Ctx::n`]);
/// None for Gemini, whose function calls carry no id.
pub fn tool_call_id(api: Api, n: u64) -> Option<String> {
    match api {
        Api::Anthropic => Some(format!("toolu_mock{n}")),
        Api::OpenAiChat | Api::OpenAiResponses => Some(format!("call_mock{n}")),
        Api::Gemini => None,
    }
}

/// What to say, independent of the API.
pub enum Content<'a> {
    Text(&'a str),
    Tool {
        name: &'a str,
        args: &'a Value,
    },
    /// Text, then a tool call, in one reply (a turn that says what it does and does it).
    TextThenTool {
        text: &'a str,
        name: &'a str,
        args: &'a Value,
    },
}

impl<'a> Content<'a> {
    /// The text and the tool call this content is made of.
    fn parts(&self) -> (Option<&'a str>, Option<(&'a str, &'a Value)>) {
        match *self {
            Content::Text(t) => (Some(t), None),
            Content::Tool { name, args } => (None, Some((name, args))),
            Content::TextThenTool { text, name, args } => (Some(text), Some((name, args))),
        }
    }
}

pub struct Ctx<'a> {
    pub api: Api,
    /// The `model` the request named (or the Gemini path's model).
    pub model: &'a str,
    /// A number unique within the mock, for ids.
    pub n: u64,
    /// Chat Completions: `stream_options.include_usage` was set.
    pub include_usage: bool,
}

/// One SSE event: `event: NAME` (when named) and `data: JSON`.
pub struct Sse {
    pub event: Option<&'static str>,
    pub data: String,
}

impl Sse {
    fn named(event: &'static str, data: Value) -> Sse {
        Sse {
            event: Some(event),
            data: data.to_string(),
        }
    }
    fn data(data: Value) -> Sse {
        Sse {
            event: None,
            data: data.to_string(),
        }
    }
    pub fn encode(&self) -> String {
        match self.event {
            Some(e) => format!("event: {e}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// Splits text in two at a char boundary near the middle, so clients see several deltas.
pub fn pieces(text: &str) -> Vec<&str> {
    if text.chars().count() < 2 {
        return vec![text];
    }
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid += 1;
    }
    vec![&text[..mid], &text[mid..]]
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

// ---------------------------------------------------------------- usage per API

fn anthropic_usage(u: &MockUsage) -> Value {
    json!({
        "input_tokens": u.input.saturating_sub(u.cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached,
        "output_tokens": u.output,
    })
}

fn chat_usage(u: &MockUsage) -> Value {
    json!({
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": 0},
    })
}

fn responses_usage(u: &MockUsage) -> Value {
    json!({
        "input_tokens": u.input,
        "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input + u.output,
    })
}

fn gemini_usage(u: &MockUsage) -> Value {
    let mut v = json!({
        "promptTokenCount": u.input,
        "candidatesTokenCount": u.output,
        "totalTokenCount": u.input + u.output,
    });
    if u.cached > 0 {
        v["cachedContentTokenCount"] = json!(u.cached);
    }
    v
}

// ---------------------------------------------------------------- streaming replies

/// The complete event stream for a reply.
pub fn stream(ctx: &Ctx<'_>, content: &Content<'_>, usage: &MockUsage) -> Vec<Sse> {
    match ctx.api {
        Api::Anthropic => anthropic_stream(ctx, content, usage, true),
        Api::OpenAiChat => chat_stream(ctx, content, usage, true),
        Api::OpenAiResponses => responses_stream(ctx, content, usage, true),
        Api::Gemini => gemini_stream(ctx, content, usage, true),
    }
}

/// The first events of a text reply carrying `text_before`, and nothing that ends it.
pub fn stream_start(ctx: &Ctx<'_>, text_before: &str) -> Vec<Sse> {
    let usage = MockUsage::default();
    let content = Content::Text(text_before);
    match ctx.api {
        Api::Anthropic => anthropic_stream(ctx, &content, &usage, false),
        Api::OpenAiChat => chat_stream(ctx, &content, &usage, false),
        Api::OpenAiResponses => responses_stream(ctx, &content, &usage, false),
        Api::Gemini => gemini_stream(ctx, &content, &usage, false),
    }
}

fn anthropic_stream(ctx: &Ctx<'_>, content: &Content<'_>, u: &MockUsage, finish: bool) -> Vec<Sse> {
    let mut start_usage = anthropic_usage(u);
    start_usage["output_tokens"] = json!(u.output.min(1));
    let mut out = vec![
        Sse::named(
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_mock{}", ctx.n), "type": "message", "role": "assistant",
                "model": ctx.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": start_usage,
            }}),
        ),
        Sse::named("ping", json!({"type": "ping"})),
    ];
    let (text, tool) = content.parts();
    let mut index = 0;
    if let Some(text) = text {
        out.push(Sse::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for p in pieces(text) {
            out.push(Sse::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        if tool.is_some() {
            out.push(Sse::named(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
    }
    if let Some((name, args)) = tool {
        out.push(Sse::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": tool_call_id(ctx.api, ctx.n), "name": name, "input": {}}}),
        ));
        let args = args.to_string();
        for p in pieces(&args) {
            out.push(Sse::named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
    }
    let stop_reason = if tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    if finish {
        out.push(Sse::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        out.push(Sse::named(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                   "usage": anthropic_usage(u)}),
        ));
        out.push(Sse::named("message_stop", json!({"type": "message_stop"})));
    }
    out
}

fn chat_chunk(ctx: &Ctx<'_>, delta: Value, finish_reason: Option<&str>) -> Sse {
    Sse::data(json!({
        "id": format!("chatcmpl-mock{}", ctx.n), "object": "chat.completion.chunk",
        "created": now(), "model": ctx.model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    }))
}

fn chat_stream(ctx: &Ctx<'_>, content: &Content<'_>, u: &MockUsage, finish: bool) -> Vec<Sse> {
    let mut out = Vec::new();
    let (text, tool) = content.parts();
    if let Some(text) = text {
        out.push(chat_chunk(
            ctx,
            json!({"role": "assistant", "content": ""}),
            None,
        ));
        for p in pieces(text) {
            out.push(chat_chunk(ctx, json!({"content": p}), None));
        }
    }
    if let Some((name, args)) = tool {
        let mut first = json!({"tool_calls": [{
            "index": 0, "id": tool_call_id(ctx.api, ctx.n), "type": "function",
            "function": {"name": name, "arguments": ""}}]});
        if text.is_none() {
            first["role"] = json!("assistant");
            first["content"] = Value::Null;
        }
        out.push(chat_chunk(ctx, first, None));
        let args = args.to_string();
        for p in pieces(&args) {
            out.push(chat_chunk(
                ctx,
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            ));
        }
    }
    let finish_reason = if tool.is_some() { "tool_calls" } else { "stop" };
    if finish {
        out.push(chat_chunk(ctx, json!({}), Some(finish_reason)));
        if ctx.include_usage {
            out.push(Sse::data(json!({
                "id": format!("chatcmpl-mock{}", ctx.n), "object": "chat.completion.chunk",
                "created": now(), "model": ctx.model, "choices": [], "usage": chat_usage(u),
            })));
        }
        out.push(Sse {
            event: None,
            data: "[DONE]".into(),
        });
    }
    out
}

fn responses_item(ctx: &Ctx<'_>, content: &Content<'_>, done: bool) -> Value {
    let status = if done { "completed" } else { "in_progress" };
    match content {
        Content::Text(text) => json!({
            "id": format!("msg_mock{}", ctx.n), "type": "message", "status": status, "role": "assistant",
            "content": if done { json!([{"type": "output_text", "text": text, "annotations": []}]) } else { json!([]) },
        }),
        Content::Tool { name, args } => json!({
            "id": format!("fc_mock{}", ctx.n), "type": "function_call", "status": status,
            "call_id": tool_call_id(ctx.api, ctx.n), "name": name,
            "arguments": if done { args.to_string() } else { String::new() },
        }),
        Content::TextThenTool { .. } => unreachable!("split into its text and its tool first"),
    }
}

fn responses_object(ctx: &Ctx<'_>, status: &str, output: Value, usage: Value) -> Value {
    json!({
        "id": format!("resp_mock{}", ctx.n), "object": "response", "created_at": now(),
        "status": status, "model": ctx.model, "output": output, "usage": usage,
        "error": null, "incomplete_details": null,
    })
}

/// Text then a tool call: two output items, the message first.
fn responses_text_then_tool_stream(
    ctx: &Ctx<'_>,
    text: &str,
    name: &str,
    args: &Value,
    u: &MockUsage,
) -> Vec<Sse> {
    let mut seq = 0u64;
    let mut ev = |event: &'static str, mut data: Value| {
        data["type"] = json!(event);
        data["sequence_number"] = json!(seq);
        seq += 1;
        Sse::named(event, data)
    };
    let message = Content::Text(text);
    let call = Content::Tool { name, args };
    let msg_id = format!("msg_mock{}", ctx.n);
    let fc_id = format!("fc_mock{}", ctx.n);
    let mut out = vec![
        ev(
            "response.created",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": responses_item(ctx, &message, false)}),
        ),
        ev(
            "response.content_part.added",
            json!({"item_id": msg_id, "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
        ),
    ];
    for p in pieces(text) {
        out.push(ev(
            "response.output_text.delta",
            json!({"item_id": msg_id, "output_index": 0, "content_index": 0, "delta": p, "logprobs": []}),
        ));
    }
    out.push(ev(
        "response.output_text.done",
        json!({"item_id": msg_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
    ));
    out.push(ev(
        "response.output_item.done",
        json!({"output_index": 0, "item": responses_item(ctx, &message, true)}),
    ));
    out.push(ev(
        "response.output_item.added",
        json!({"output_index": 1, "item": responses_item(ctx, &call, false)}),
    ));
    let arguments = args.to_string();
    out.push(ev(
        "response.function_call_arguments.done",
        json!({"item_id": fc_id, "output_index": 1, "arguments": arguments}),
    ));
    out.push(ev(
        "response.output_item.done",
        json!({"output_index": 1, "item": responses_item(ctx, &call, true)}),
    ));
    let output = json!([
        responses_item(ctx, &message, true),
        responses_item(ctx, &call, true)
    ]);
    out.push(ev(
        "response.completed",
        json!({"response": responses_object(ctx, "completed", output, responses_usage(u))}),
    ));
    out
}

fn responses_stream(ctx: &Ctx<'_>, content: &Content<'_>, u: &MockUsage, finish: bool) -> Vec<Sse> {
    if let Content::TextThenTool { text, name, args } = *content {
        return responses_text_then_tool_stream(ctx, text, name, args, u);
    }
    let mut seq = 0u64;
    let mut ev = |name: &'static str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        Sse::named(name, data)
    };
    let item_id = match content {
        Content::Text(_) => format!("msg_mock{}", ctx.n),
        Content::Tool { .. } | Content::TextThenTool { .. } => format!("fc_mock{}", ctx.n),
    };
    let mut out = vec![
        ev(
            "response.created",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.in_progress",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": responses_item(ctx, content, false)}),
        ),
    ];
    match content {
        Content::TextThenTool { .. } => unreachable!("streamed by responses_text_then_tool_stream"),
        Content::Text(text) => {
            out.push(ev(
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                       "part": {"type": "output_text", "text": "", "annotations": []}}),
            ));
            for p in pieces(text) {
                out.push(ev(
                    "response.output_text.delta",
                    json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": p, "logprobs": []}),
                ));
            }
            if finish {
                out.push(ev(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
                ));
                out.push(ev(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": 0, "content_index": 0,
                           "part": {"type": "output_text", "text": text, "annotations": []}}),
                ));
            }
        }
        Content::Tool { args, .. } => {
            let args = args.to_string();
            for p in pieces(&args) {
                out.push(ev(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": 0, "delta": p}),
                ));
            }
            if finish {
                out.push(ev(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": 0, "arguments": args}),
                ));
            }
        }
    }
    if finish {
        let item = responses_item(ctx, content, true);
        out.push(ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": item.clone()}),
        ));
        out.push(ev(
            "response.completed",
            json!({"response": responses_object(ctx, "completed", json!([item]), responses_usage(u))}),
        ));
    }
    out
}

/// A Responses `custom_tool_call` item (a freeform tool: raw `input`, no JSON arguments).
fn responses_custom_item(ctx: &Ctx<'_>, name: &str, input: &str, done: bool) -> Value {
    json!({
        "id": format!("ctc_mock{}", ctx.n), "type": "custom_tool_call",
        "status": if done { "completed" } else { "in_progress" },
        "call_id": tool_call_id(ctx.api, ctx.n), "name": name,
        "input": if done { input } else { "" },
    })
}

/// The event stream of a Responses reply calling a freeform tool.
pub fn responses_custom_tool_stream(
    ctx: &Ctx<'_>,
    name: &str,
    input: &str,
    u: &MockUsage,
) -> Vec<Sse> {
    let mut seq = 0u64;
    let mut ev = |event: &'static str, mut data: Value| {
        data["type"] = json!(event);
        data["sequence_number"] = json!(seq);
        seq += 1;
        Sse::named(event, data)
    };
    let item_id = format!("ctc_mock{}", ctx.n);
    let mut out = vec![
        ev(
            "response.created",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.in_progress",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": responses_custom_item(ctx, name, input, false)}),
        ),
    ];
    for p in pieces(input) {
        out.push(ev(
            "response.custom_tool_call_input.delta",
            json!({"item_id": item_id, "output_index": 0, "delta": p}),
        ));
    }
    out.push(ev(
        "response.custom_tool_call_input.done",
        json!({"item_id": item_id, "output_index": 0, "input": input}),
    ));
    let item = responses_custom_item(ctx, name, input, true);
    out.push(ev(
        "response.output_item.done",
        json!({"output_index": 0, "item": item.clone()}),
    ));
    out.push(ev(
        "response.completed",
        json!({"response": responses_object(ctx, "completed", json!([item]), responses_usage(u))}),
    ));
    out
}

/// `item` with `id` and `call_id` filled in (from the request number) when absent.
pub fn responses_item_with_ids(ctx: &Ctx<'_>, mut item: Value) -> Value {
    if item.get("id").is_none() {
        item["id"] = json!(format!("item_mock{}", ctx.n));
    }
    if item.get("call_id").is_none() {
        item["call_id"] = json!(tool_call_id(ctx.api, ctx.n));
    }
    item
}

/// The event stream of a Responses reply whose one output item is `item`, as given.
pub fn responses_raw_item_stream(ctx: &Ctx<'_>, item: &Value, u: &MockUsage) -> Vec<Sse> {
    let mut seq = 0u64;
    let mut ev = |event: &'static str, mut data: Value| {
        data["type"] = json!(event);
        data["sequence_number"] = json!(seq);
        seq += 1;
        Sse::named(event, data)
    };
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    vec![
        ev(
            "response.created",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.in_progress",
            json!({"response": responses_object(ctx, "in_progress", json!([]), Value::Null)}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ),
        ev(
            "response.completed",
            json!({"response": responses_object(ctx, "completed", json!([item]), responses_usage(u))}),
        ),
    ]
}

/// The JSON body of a non-streaming Responses reply whose one output item is `item`.
pub fn responses_raw_item_complete(ctx: &Ctx<'_>, item: &Value, u: &MockUsage) -> Value {
    responses_object(ctx, "completed", json!([item]), responses_usage(u))
}

/// The JSON body of a non-streaming Responses reply calling a freeform tool.
pub fn responses_custom_tool_complete(
    ctx: &Ctx<'_>,
    name: &str,
    input: &str,
    u: &MockUsage,
) -> Value {
    responses_object(
        ctx,
        "completed",
        json!([responses_custom_item(ctx, name, input, true)]),
        responses_usage(u),
    )
}

fn gemini_chunk(ctx: &Ctx<'_>, parts: Value, finish: bool, usage: Value) -> Value {
    let mut cand = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if finish {
        cand["finishReason"] = json!("STOP");
    }
    json!({
        "candidates": [cand], "usageMetadata": usage,
        "modelVersion": ctx.model, "responseId": format!("resp_mock{}", ctx.n),
    })
}

fn gemini_stream(ctx: &Ctx<'_>, content: &Content<'_>, u: &MockUsage, finish: bool) -> Vec<Sse> {
    // Partial chunks carry the prompt count only; the last one carries the full usage.
    let partial_usage = json!({"promptTokenCount": u.input, "totalTokenCount": u.input});
    if let Content::TextThenTool { text, name, args } = *content {
        return vec![Sse::data(gemini_chunk(
            ctx,
            json!([{"text": text}, {"functionCall": {"name": name, "args": args}}]),
            finish,
            if finish {
                gemini_usage(u)
            } else {
                partial_usage
            },
        ))];
    }
    match content {
        Content::Text(text) => {
            let ps = pieces(text);
            let last = ps.len() - 1;
            ps.iter()
                .enumerate()
                .map(|(i, p)| {
                    let end = finish && i == last;
                    let usage = if end {
                        gemini_usage(u)
                    } else {
                        partial_usage.clone()
                    };
                    Sse::data(gemini_chunk(ctx, json!([{"text": p}]), end, usage))
                })
                .collect()
        }
        Content::TextThenTool { .. } => unreachable!("returned above"),
        Content::Tool { name, args } => vec![Sse::data(gemini_chunk(
            ctx,
            json!([{"functionCall": {"name": name, "args": args}}]),
            finish,
            if finish {
                gemini_usage(u)
            } else {
                partial_usage
            },
        ))],
    }
}

// ---------------------------------------------------------------- non-streaming replies

/// The JSON body of a non-streaming reply.
pub fn complete(ctx: &Ctx<'_>, content: &Content<'_>, u: &MockUsage) -> Value {
    match ctx.api {
        Api::Anthropic => {
            let (text, tool) = content.parts();
            let mut blocks = Vec::new();
            if let Some(t) = text {
                blocks.push(json!({"type": "text", "text": t}));
            }
            if let Some((name, args)) = tool {
                blocks.push(json!({"type": "tool_use", "id": tool_call_id(ctx.api, ctx.n), "name": name, "input": args}));
            }
            let stop = if tool.is_some() {
                "tool_use"
            } else {
                "end_turn"
            };
            json!({"id": format!("msg_mock{}", ctx.n), "type": "message", "role": "assistant",
                   "model": ctx.model, "content": blocks, "stop_reason": stop, "stop_sequence": null,
                   "usage": anthropic_usage(u)})
        }
        Api::OpenAiChat => {
            let (text, tool) = content.parts();
            let mut message = json!({"role": "assistant", "content": text});
            if let Some((name, args)) = tool {
                message["tool_calls"] = json!([{
                    "id": tool_call_id(ctx.api, ctx.n), "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}}]);
            }
            let finish = if tool.is_some() { "tool_calls" } else { "stop" };
            json!({"id": format!("chatcmpl-mock{}", ctx.n), "object": "chat.completion", "created": now(),
                   "model": ctx.model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": chat_usage(u)})
        }
        Api::OpenAiResponses => {
            let items: Vec<Value> = match content.parts() {
                (Some(text), Some((name, args))) => vec![
                    responses_item(ctx, &Content::Text(text), true),
                    responses_item(ctx, &Content::Tool { name, args }, true),
                ],
                _ => vec![responses_item(ctx, content, true)],
            };
            responses_object(ctx, "completed", json!(items), responses_usage(u))
        }
        Api::Gemini => {
            let (text, tool) = content.parts();
            let mut parts = Vec::new();
            if let Some(t) = text {
                parts.push(json!({"text": t}));
            }
            if let Some((name, args)) = tool {
                parts.push(json!({"functionCall": {"name": name, "args": args}}));
            }
            let parts = json!(parts);
            gemini_chunk(ctx, parts, true, gemini_usage(u))
        }
    }
}

// ---------------------------------------------------------------- errors

/// Each API's own error body.
pub fn error_body(api: Api, status: u16, message: &str) -> Value {
    match api {
        Api::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_mock"})
        }
        Api::OpenAiChat | Api::OpenAiResponses => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                429 => ("rate_limit_exceeded", json!("rate_limit_exceeded")),
                s if s >= 500 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
        Api::Gemini => {
            let st = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": st}})
        }
    }
}

/// The generic message the mock puts in an API-shaped error body when the script gives
/// none.
pub fn default_error_message(api: Api, status: u16) -> &'static str {
    match (api, status) {
        (Api::Anthropic, 401) => "invalid x-api-key",
        (Api::OpenAiChat | Api::OpenAiResponses, 401) => {
            "Incorrect API key provided: mock-key. You can find your API key at https://platform.openai.com/account/api-keys."
        }
        (Api::Gemini, 401) => "API key not valid. Please pass a valid API key.",
        (Api::Anthropic, 529) => "Overloaded",
        (Api::Gemini, 503) => "The model is overloaded. Please try again later.",
        (_, 503) => "The server is overloaded or not ready yet.",
        (_, 429) => "Rate limit reached.",
        _ => "mock error",
    }
}

/// Overloaded: 529 `overloaded_error` for Anthropic, 503 elsewhere.
pub fn overloaded(api: Api) -> (u16, Value) {
    let status = if api == Api::Anthropic { 529 } else { 503 };
    (
        status,
        error_body(api, status, default_error_message(api, status)),
    )
}
