//! A small OTLP/HTTP trace receiver on 127.0.0.1 for the tests: it takes
//! `POST /v1/traces` with a protobuf body (HTTP/1.1, kept-alive connections, plain or
//! gzip-free bodies as orchestrate and Claude Code send them), decodes it with the
//! `opentelemetry-proto` crate's generated types, keeps every span with the service and
//! scope it came under, and answers 200 with an `ExportTraceServiceResponse`. Anything
//! else gets a 400 or 404 and is counted as refused. It stops when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// A request body read, at most.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// One span as received.
#[derive(Clone, Debug)]
pub struct Received {
    pub service: String,
    pub scope: String,
    pub span: Span,
}

#[derive(Default)]
struct Log {
    spans: Vec<Received>,
    requests: usize,
    /// What was refused, and why.
    refused: Vec<String>,
}

pub struct Receiver {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the OTLP receiver");
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let l = l.clone();
                std::thread::spawn(move || serve(conn, &l));
            }
        });
        Receiver { addr, log, stop }
    }

    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<Received> {
        self.log.lock().unwrap().spans.clone()
    }

    pub fn requests(&self) -> usize {
        self.log.lock().unwrap().requests
    }

    pub fn refused(&self) -> Vec<String> {
        self.log.lock().unwrap().refused.clone()
    }

    /// Waits up to `limit` for `done` to hold of the spans received; returns them.
    pub fn wait_for(&self, limit: Duration, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let spans = self.spans();
            if done(&spans) || start.elapsed() > limit {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(conn: TcpStream, log: &Mutex<Log>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut out = conn.try_clone().expect("clone the connection");
    let mut reader = BufReader::new(conn);
    loop {
        let mut request_line = String::new();
        match reader.read_line(&mut request_line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut length = 0usize;
        let mut encoding = None;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "content-encoding" => encoding = Some(v.trim().to_ascii_lowercase()),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length.min(MAX_BODY_BYTES)];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string();
        let answer = if !request_line.starts_with("POST ") || path != "/v1/traces" {
            Err((404, request_line.trim().to_string()))
        } else if encoding.as_deref().is_some_and(|e| e != "identity") {
            Err((400, format!("content-encoding {encoding:?}")))
        } else {
            ExportTraceServiceRequest::decode(&body[..]).map_err(|e| (400, e.to_string()))
        };
        let status = match answer {
            Ok(req) => {
                let mut log = log.lock().unwrap();
                log.requests += 1;
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .as_ref()
                        .and_then(|r| attr(&r.attributes, "service.name"))
                        .and_then(|v| as_str(&v))
                        .unwrap_or_default();
                    for ss in rs.scope_spans {
                        let scope = ss.scope.map(|s| s.name).unwrap_or_default();
                        for span in ss.spans {
                            log.spans.push(Received {
                                service: service.clone(),
                                scope: scope.clone(),
                                span,
                            });
                        }
                    }
                }
                200
            }
            Err((status, why)) => {
                log.lock().unwrap().refused.push(why);
                status
            }
        };
        let reply = if status == 200 {
            ExportTraceServiceResponse::default().encode_to_vec()
        } else {
            Vec::new()
        };
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Bad Request" },
            reply.len()
        );
        if out
            .write_all(head.as_bytes())
            .and_then(|()| out.write_all(&reply))
            .is_err()
        {
            return;
        }
    }
}

/// An attribute's value by key.
pub fn attr(attributes: &[KeyValue], key: &str) -> Option<AnyValue> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
}

pub fn as_str(v: &AnyValue) -> Option<String> {
    match &v.value {
        Some(any_value::Value::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// An attribute as JSON (strings, integers, doubles, booleans, arrays of those).
pub fn to_json(v: &AnyValue) -> serde_json::Value {
    use serde_json::json;
    match &v.value {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(n)) => json!(n),
        Some(any_value::Value::DoubleValue(n)) => json!(n),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::ArrayValue(a)) => {
            serde_json::Value::Array(a.values.iter().map(to_json).collect())
        }
        other => json!(format!("{other:?}")),
    }
}

/// Lower-case hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
