//! The little HTTP/1.1 the mock needs: read one request (request line, headers, a
//! `Content-Length` or chunked body), answer it with a JSON body or a chunked SSE stream,
//! then close the connection.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;
/// A client that connects and then says nothing is dropped after this.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Request {
    pub method: String,
    /// The request target as sent: path plus query.
    pub target: String,
    /// Lowercased names; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

pub async fn read_request(stream: &mut TcpStream) -> std::io::Result<Request> {
    tokio::time::timeout(READ_TIMEOUT, read_request_inner(stream))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "request read timeout"))?
}

async fn read_request_inner(stream: &mut TcpStream) -> std::io::Result<Request> {
    let mut buf = Vec::with_capacity(8192);
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("request head too large"));
        }
        if read_more(stream, &mut buf).await? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed before the request head ended",
            ));
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut rest = buf[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let k = k.trim().to_ascii_lowercase();
            let v = v.trim().to_string();
            headers
                .entry(k)
                .and_modify(|old| {
                    old.push_str(", ");
                    old.push_str(&v);
                })
                .or_insert(v);
        }
    }
    if headers
        .get("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
    }
    let chunked = headers
        .get("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let body = if chunked {
        read_chunked(stream, rest).await?
    } else {
        let len: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if len > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        while rest.len() < len {
            if read_more(stream, &mut rest).await? == 0 {
                return Err(invalid("connection closed inside the request body"));
            }
        }
        rest.truncate(len);
        rest
    };
    Ok(Request {
        method,
        target,
        headers,
        body,
    })
}

async fn read_chunked(stream: &mut TcpStream, mut buf: Vec<u8>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf, b"\r\n") {
                break i;
            }
            if read_more(stream, &mut buf).await? == 0 {
                return Err(invalid("connection closed inside a chunk size"));
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size_text = size_text.split(';').next().unwrap_or("").trim().to_string();
        let size = usize::from_str_radix(&size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        buf.drain(..line_end + 2);
        if size == 0 {
            // Trailers (rare) end with an empty line; the connection closes after the reply
            // anyway, so whatever follows is not read.
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        while buf.len() < size + 2 {
            if read_more(stream, &mut buf).await? == 0 {
                return Err(invalid("connection closed inside a chunk"));
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn invalid(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// A complete JSON response, then close.
pub async fn write_json(
    stream: &mut TcpStream,
    status: u16,
    extra_headers: &[(&str, String)],
    body: &serde_json::Value,
) -> std::io::Result<()> {
    let body = serde_json::to_vec(body).expect("serialize");
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra_headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&body).await?;
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// Writes the head of a chunked `text/event-stream` response.
pub async fn start_sse(stream: &mut TcpStream) -> std::io::Result<()> {
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .await?;
    stream.flush().await
}

/// One chunk of a chunked body (`data` must not be empty).
pub async fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    stream.write_all(&out).await?;
    stream.flush().await
}

/// The last chunk, then close.
pub async fn end_chunked(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(b"0\r\n\r\n").await?;
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// Never send anything more and never close: wait until the client goes away.
pub async fn hang(stream: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
