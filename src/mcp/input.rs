//! What the MCP client sends, before rmcp reads it: the moment stdin closes is reported at
//! once (rmcp itself notices only after draining in-flight responses for up to 5 s, while
//! clients send SIGTERM 2 s after closing), and a message over [`MAX_MESSAGE_BYTES`] is
//! replaced by a small request naming its id, so that it gets an answer (rmcp drops an
//! oversized line without one, and the client's request hangs). A line that is not JSON
//! gets the JSON-RPC parse error (-32700, id null), and one that is JSON but no JSON-RPC
//! message the invalid-request error (-32600, with its id when it has one that can be read),
//! written beside rmcp's messages ([`super::output`]): rmcp ignores the first without an
//! answer and answers the second without an id.

use std::pin::Pin;
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// The longest JSON-RPC message (one line) taken from the client. Below rmcp's own limit
/// (16 MiB), so that this one applies first.
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// The method of the request that stands in for an oversized message; its params are
/// `{"method": <the message's method, or null>, "bytes": N, "limit": M}`.
pub(crate) const OVERSIZED_METHOD: &str = "orchestrate/oversizedMessage";

/// How much is read from the client at a time.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Reads the client's stream for rmcp, line by line: JSON-RPC messages up to the limit pass
/// unchanged, an oversized one becomes an [`OVERSIZED_METHOD`] request with its id (or
/// nothing, when it had none), a line that is no JSON-RPC message is answered on
/// `answers` and never reaches rmcp, and `on_eof` runs once when the stream ends.
pub(crate) struct ClientInput<R> {
    inner: R,
    on_eof: Option<Box<dyn FnOnce() + Send>>,
    /// Error answers to lines rmcp never sees, written to stdout between its messages.
    answers: Option<mpsc::Sender<String>>,
    max_line_bytes: usize,
    /// The current line, held until it ends or passes the limit.
    line: Vec<u8>,
    /// Set while the rest of an oversized line is skipped.
    oversized: Option<Oversized>,
    /// Bytes ready for the reader, and how many of them it has taken.
    ready: Vec<u8>,
    taken: usize,
    chunk: Box<[u8]>,
    ended: bool,
}

struct Oversized {
    bytes: usize,
    scan: TopLevelScan,
}

impl<R: AsyncRead + Unpin> ClientInput<R> {
    pub(crate) fn new(inner: R, on_eof: impl FnOnce() + Send + 'static) -> Self {
        Self::with_limit(inner, MAX_MESSAGE_BYTES, on_eof)
    }

    /// Answers lines that are no JSON-RPC message on `answers` (one JSON line each,
    /// without its newline); without it they pass to rmcp as they are.
    pub(crate) fn answering(mut self, answers: mpsc::Sender<String>) -> Self {
        self.answers = Some(answers);
        self
    }

    pub(crate) fn with_limit(
        inner: R,
        max_line_bytes: usize,
        on_eof: impl FnOnce() + Send + 'static,
    ) -> Self {
        ClientInput {
            inner,
            on_eof: Some(Box::new(on_eof)),
            answers: None,
            max_line_bytes,
            line: Vec::new(),
            oversized: None,
            ready: Vec::new(),
            taken: 0,
            chunk: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            ended: false,
        }
    }

    /// Sorts freshly read bytes into whole lines (made ready) and the line in progress.
    fn take_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (part, ends_line) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], true),
                None => (bytes, false),
            };
            bytes = &bytes[part.len() + usize::from(ends_line)..];
            match &mut self.oversized {
                Some(o) => {
                    o.bytes += part.len();
                    o.scan.feed(part);
                }
                None if self.line.len() + part.len() > self.max_line_bytes => {
                    let mut scan = TopLevelScan::default();
                    scan.feed(&self.line);
                    scan.feed(part);
                    self.oversized = Some(Oversized {
                        bytes: self.line.len() + part.len(),
                        scan,
                    });
                    self.line = Vec::new();
                }
                None => self.line.extend_from_slice(part),
            }
            if ends_line {
                self.end_line();
            }
        }
    }

    fn end_line(&mut self) {
        match self.oversized.take() {
            None => {
                if let Some(answer) = self.answers.as_ref().and(refusal(&self.line)) {
                    self.answer(answer);
                    self.line.clear();
                    return;
                }
                self.ready.append(&mut self.line);
                self.ready.push(b'\n');
            }
            Some(o) => match o.scan.id() {
                Some(id) => {
                    tracing::warn!(
                        "a message of {} bytes is over the limit of {} bytes; answering it with an error",
                        o.bytes,
                        self.max_line_bytes
                    );
                    let stand_in = serde_json::json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "method": OVERSIZED_METHOD,
                        "params": {
                            "method": o.scan.method(),
                            "bytes": o.bytes,
                            "limit": self.max_line_bytes,
                        },
                    });
                    self.ready.extend_from_slice(stand_in.to_string().as_bytes());
                    self.ready.push(b'\n');
                }
                None => tracing::warn!(
                    "dropped a message of {} bytes (over the limit of {} bytes) that has no id to answer",
                    o.bytes,
                    self.max_line_bytes
                ),
            },
        }
    }
}

impl<R> ClientInput<R> {
    fn answer(&self, answer: serde_json::Value) {
        tracing::warn!("answered a line from the client that is no JSON-RPC message: {answer}");
        let Some(answers) = &self.answers else { return };
        // A client that floods garbage and reads nothing back fills the queue; past it,
        // the answers are only logged.
        if answers.try_send(answer.to_string()).is_err() {
            tracing::warn!("too many error answers waiting to be written; this one is dropped");
        }
    }
}

/// The top-level members that make a JSON-RPC message, each left unparsed.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// The error answer to a line that is no JSON-RPC message, or None for one that is (or a
/// blank line, which rmcp skips). rmcp takes it from there: what it cannot read as a
/// request of the protocol it answers itself.
fn refusal(line: &[u8]) -> Option<serde_json::Value> {
    const BOM: &[u8] = b"\xef\xbb\xbf";
    let line = line.strip_prefix(BOM).unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let answer = |id: serde_json::Value, code: i64, message: String| {
        Some(serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": code, "message": message},
        }))
    };
    let parse_error = |e: serde_json::Error| {
        answer(
            serde_json::Value::Null,
            PARSE_ERROR,
            format!("Parse error: {e}"),
        )
    };
    let invalid = |what: &str| {
        answer(
            serde_json::Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: {what}"),
        )
    };
    // An object, first: serde would read an array as a struct's fields in order.
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(line) {
            return parse_error(e);
        }
        return invalid(match line.iter().find(|b| !b.is_ascii_whitespace()) {
            Some(b'[') => "an array, not a JSON-RPC 2.0 message (batches are not supported)",
            Some(b'"') => "a string, not a JSON-RPC 2.0 message",
            _ => "a single value, not a JSON-RPC 2.0 message",
        });
    }
    let envelope = match serde_json::from_slice::<Envelope<'_>>(line) {
        Ok(e) => e,
        Err(e) if e.is_syntax() || e.is_eof() => return parse_error(e),
        Err(_) => return invalid("not a JSON-RPC 2.0 message (a member is given twice)"),
    };
    // The id, when it is one a response can carry: a number or a string.
    let id = envelope
        .id
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
        .filter(|v| v.is_number() || v.is_string())
        .unwrap_or(serde_json::Value::Null);
    let why = if envelope.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        "not a JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\")"
    } else if let Some(method) = envelope.method {
        if method.get().starts_with('"') {
            return None;
        }
        "its \"method\" is not a string"
    } else if envelope.result.is_some() || envelope.error.is_some() {
        // A response, to a request of the server's: never answered.
        return None;
    } else {
        "neither a request (no \"method\") nor a response (no \"result\" or \"error\")"
    };
    answer(id, INVALID_REQUEST, format!("Invalid Request: {why}"))
}

/// JSON-RPC's error codes for a line that is not JSON, and for JSON that is no request.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

impl<R: AsyncRead + Unpin> AsyncRead for ClientInput<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.taken < this.ready.len() {
                let n = buf.remaining().min(this.ready.len() - this.taken);
                buf.put_slice(&this.ready[this.taken..this.taken + n]);
                this.taken += n;
                if this.taken == this.ready.len() {
                    this.ready.clear();
                    this.taken = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) if chunk.filled().is_empty() => {
                    this.ended = true;
                    if let Some(on_eof) = this.on_eof.take() {
                        on_eof();
                    }
                    // A last line without its newline is passed on as it is (rmcp ignores
                    // it, as it would have).
                    if this.oversized.is_none() {
                        this.ready.append(&mut this.line);
                    }
                }
                Poll::Ready(Ok(())) => {
                    let n = chunk.filled().len();
                    let bytes = this.chunk[..n].to_vec();
                    this.take_in(&bytes);
                }
            }
        }
    }
}

/// Finds the top-level `id` and `method` of a JSON object read in pieces, without keeping
/// it: enough of a tokenizer to know the nesting depth and where strings are.
#[derive(Default)]
struct TopLevelScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, a key is expected next (after `{` or `,`).
    expect_key: bool,
    /// The key string being read at depth 1, and the last complete one.
    key: Option<Vec<u8>>,
    last_key: Vec<u8>,
    /// The raw value being captured, for the key `id` or `method`.
    capture: Option<(Field, Vec<u8>)>,
    id: Option<Vec<u8>>,
    method: Option<Vec<u8>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Id,
    Method,
}

/// Ids and method names are short; a longer value is not one worth answering to.
const MAX_CAPTURED_BYTES: usize = 256;
const MAX_KEY_BYTES: usize = 16;

impl TopLevelScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.step(b);
        }
    }

    fn step(&mut self, b: u8) {
        if let Some((_, raw)) = &mut self.capture {
            raw.push(b);
            if raw.len() > MAX_CAPTURED_BYTES {
                self.capture = None;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if let Some(key) = self.key.take() {
                    self.last_key = key;
                }
                return;
            }
            if let Some(key) = &mut self.key {
                if key.len() <= MAX_KEY_BYTES {
                    key.push(b);
                }
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.expect_key {
                    self.key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.finish_capture();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.expect_key = false;
                let field = match self.last_key.as_slice() {
                    b"id" => Some(Field::Id),
                    b"method" => Some(Field::Method),
                    _ => None,
                };
                self.capture = field.map(|f| (f, Vec::new()));
            }
            b',' if self.depth == 1 => {
                self.finish_capture();
                self.expect_key = true;
            }
            _ => {}
        }
    }

    /// The value ends at this `,` or `}`, which was captured with it.
    fn finish_capture(&mut self) {
        if let Some((field, mut raw)) = self.capture.take() {
            raw.pop();
            match field {
                Field::Id => self.id = Some(raw),
                Field::Method => self.method = Some(raw),
            }
        }
    }

    /// The message's id, if it had one that a response can name (a number or a string).
    fn id(&self) -> Option<serde_json::Value> {
        let raw = self.id.as_deref()?;
        serde_json::from_slice::<serde_json::Value>(raw)
            .ok()
            .filter(|v| v.is_number() || v.is_string())
    }

    fn method(&self) -> Option<String> {
        serde_json::from_slice::<String>(self.method.as_deref()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    fn scan(text: &str) -> (Option<serde_json::Value>, Option<String>) {
        let mut s = TopLevelScan::default();
        // In pieces, as it arrives.
        for piece in text.as_bytes().chunks(3) {
            s.feed(piece);
        }
        (s.id(), s.method())
    }

    #[test]
    fn finds_the_top_level_id_and_method_wherever_they_are() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"id":1}}"#),
            (Some(json!(7)), Some("tools/call".to_string()))
        );
        // The TypeScript SDK writes the id last.
        assert_eq!(
            scan(
                r#"{"method":"tools/call","params":{"arguments":{"task":"a \"}\" {\"id\":3}","id":9}},"jsonrpc":"2.0","id":"req-1"}"#
            ),
            (Some(json!("req-1")), Some("tools/call".to_string()))
        );
        assert_eq!(
            scan(r#"{"method":"notifications/x","params":{"id":2}}"#),
            (None, Some("notifications/x".to_string()))
        );
        assert_eq!(scan(r#"{"id":{"a":1},"method":5}"#), (None, None));
    }

    #[test]
    fn only_json_rpc_messages_reach_rmcp_and_the_rest_gets_its_error() {
        let passes = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#,
            // rmcp answers a request it cannot read itself (here: an id of no type a
            // response can carry), and responses are never answered.
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":2}\r",
            "",
            "  \r",
        ];
        for line in passes {
            assert_eq!(refusal(line.as_bytes()), None, "{line}");
        }
        let error = |id: serde_json::Value, code: i64, message: &str| {
            Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
        };
        assert_eq!(
            refusal(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"),
            error(
                json!(null),
                -32700,
                "Parse error: EOF while parsing an object at line 1 column 56"
            )
        );
        assert_eq!(
            refusal(b"\xff"),
            error(
                json!(null),
                -32700,
                "Parse error: expected value at line 1 column 1"
            )
        );
        assert_eq!(
            refusal(b"42"),
            error(
                json!(null),
                -32600,
                "Invalid Request: a single value, not a JSON-RPC 2.0 message"
            )
        );
        assert_eq!(
            refusal(br#"{"jsonrpc":"2.0","id":"a","method":5}"#),
            error(
                json!("a"),
                -32600,
                "Invalid Request: its \"method\" is not a string"
            )
        );
        assert_eq!(
            refusal(br#"{"jsonrpc":"1.0","id":{"x":1},"method":"m"}"#),
            error(
                json!(null),
                -32600,
                "Invalid Request: not a JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\")"
            )
        );
        assert_eq!(
            refusal(br#"{"jsonrpc":"2.0","id":4}"#),
            error(
                json!(4),
                -32600,
                "Invalid Request: neither a request (no \"method\") nor a response (no \"result\" or \"error\")"
            )
        );
        assert_eq!(
            refusal(br#"{"jsonrpc":"2.0","jsonrpc":"2.0","method":"m"}"#),
            error(
                json!(null),
                -32600,
                "Invalid Request: not a JSON-RPC 2.0 message (a member is given twice)"
            )
        );
    }

    async fn read_all(input: &[u8], limit: usize) -> (String, usize) {
        let eofs = Arc::new(AtomicUsize::new(0));
        let counter = eofs.clone();
        let mut reader = ClientInput::with_limit(input, limit, move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        (String::from_utf8(out).unwrap(), eofs.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_and_an_oversized_one_is_replaced() {
        let big = format!(
            r#"{{"method":"tools/call","params":{{"arguments":{{"task":"{}"}}}},"jsonrpc":"2.0","id":4}}"#,
            "x".repeat(500)
        );
        let input = format!("{{\"id\":1}}\n{big}\n{{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{{\"t\":\"{}\"}}}}\n{{\"id\":2}}\nlast", "y".repeat(300));
        let (out, eofs) = read_all(input.as_bytes(), 200).await;
        let stand_in = json!({"jsonrpc": "2.0", "id": 4, "method": OVERSIZED_METHOD,
            "params": {"method": "tools/call", "bytes": big.len(), "limit": 200}});
        assert_eq!(out, format!("{{\"id\":1}}\n{stand_in}\n{{\"id\":2}}\nlast"));
        assert_eq!(eofs, 1);
    }
}
