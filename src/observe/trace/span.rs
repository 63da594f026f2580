//! A finished span as orchestrate records it, and the OTLP protobuf request a batch of
//! them becomes.

use std::time::{SystemTime, UNIX_EPOCH};

use super::proto::{
    any_value, AnyValue, ExportTraceServiceRequest, InstrumentationScope, KeyValue, Resource,
    ResourceSpans, ScopeSpans, Span, SpanKind, Status, StatusCode, FLAGS_CONTEXT_HAS_IS_REMOTE,
    FLAGS_CONTEXT_IS_REMOTE,
};

use super::context::{SpanContext, SpanId};

/// The instrumentation scope every span of orchestrate's is under.
pub(crate) const SCOPE: &str = "orchestrate";

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    Double(f64),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Value {
        Value::Double(n)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Internal,
    Client,
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SpanData {
    pub context: SpanContext,
    /// `None` for the first span of a trace.
    pub parent: Option<SpanId>,
    /// The parent is another process's (given in `TRACEPARENT` or an MCP request).
    pub parent_is_remote: bool,
    pub name: String,
    pub kind: Kind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<(&'static str, Value)>,
    /// The error's description when the operation failed.
    pub error: Option<String>,
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn any(value: Value) -> AnyValue {
    let value = match value {
        Value::Str(s) => any_value::Value::String(s),
        Value::Int(n) => any_value::Value::Int(n),
        Value::Double(n) => any_value::Value::Double(n),
    };
    AnyValue { value: Some(value) }
}

pub(crate) fn key_value(key: impl Into<String>, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(any(value)),
    }
}

impl SpanData {
    fn into_proto(self) -> Span {
        let mut flags = FLAGS_CONTEXT_HAS_IS_REMOTE | u32::from(self.context.sampled);
        if self.parent_is_remote {
            flags |= FLAGS_CONTEXT_IS_REMOTE;
        }
        let status = match self.error {
            Some(message) => Status {
                message,
                code: StatusCode::Error as i32,
            },
            None => Status::default(),
        };
        Span {
            trace_id: self.context.trace_id.0.to_vec(),
            span_id: self.context.span_id.0.to_vec(),
            trace_state: self.context.trace_state,
            parent_span_id: self.parent.map(|p| p.0.to_vec()).unwrap_or_default(),
            flags,
            name: self.name,
            kind: match self.kind {
                Kind::Internal => SpanKind::Internal,
                Kind::Client => SpanKind::Client,
            } as i32,
            start_time_unix_nano: unix_nanos(self.start),
            end_time_unix_nano: unix_nanos(self.end).max(unix_nanos(self.start)),
            attributes: self
                .attributes
                .into_iter()
                .map(|(k, v)| key_value(k, v))
                .collect(),
            status: Some(status),
        }
    }
}

/// The request that carries `spans`, under one resource (the service) and one scope.
pub(crate) fn request(resource: &Resource, spans: Vec<SpanData>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource.clone()),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: SCOPE.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                spans: spans.into_iter().map(SpanData::into_proto).collect(),
                // The GenAI conventions are still in development, with no schema version
                // of their own to name.
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The service's resource: its name, the user's `OTEL_RESOURCE_ATTRIBUTES`, and what
/// the SDKs say of themselves.
pub(crate) fn resource(service_name: &str, extra: &[(String, String)]) -> Resource {
    let mut attributes = vec![
        key_value("service.name", service_name.into()),
        key_value("service.version", env!("CARGO_PKG_VERSION").into()),
        key_value("telemetry.sdk.name", SCOPE.into()),
        key_value("telemetry.sdk.language", "rust".into()),
        key_value("telemetry.sdk.version", env!("CARGO_PKG_VERSION").into()),
    ];
    for (k, v) in extra {
        attributes.retain(|a| &a.key != k);
        attributes.push(key_value(k.clone(), v.clone().into()));
    }
    Resource { attributes }
}
