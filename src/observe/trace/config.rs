//! What the standard OpenTelemetry environment asks of the trace exporter.
//!
//! Traces are exported when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER` names `otlp` (then to
//! `http://localhost:4318`), and never with `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none`. Unlike an SDK's default of `otlp`, nothing at all set means
//! nothing exported: orchestrate runs all day on machines with no collector, and a
//! connection attempt per run to a port nobody listens on is a cost with no use.

use std::time::Duration;

/// The W3C list format's limit on members, applied to every `k=v,...` variable so that
/// a runaway value cannot grow every span.
const MAX_LIST_MEMBERS: usize = 64;

const DEFAULT_ENDPOINT: &str = "http://localhost:4318";
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_SCHEDULE_DELAY_MS: u64 = 5_000;
const DEFAULT_MAX_QUEUE_SPANS: usize = 2_048;
const DEFAULT_MAX_BATCH_SPANS: usize = 512;

/// How spans leave: where, with what, and how they are batched.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExportConfig {
    /// The full URL spans are POSTed to (`…/v1/traces`).
    pub url: String,
    /// Sent with every request (`OTEL_EXPORTER_OTLP_HEADERS`, then the traces-only ones).
    pub headers: Vec<(String, String)>,
    /// Of one request, connecting included.
    pub timeout: Duration,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES` but `service.name`.
    pub resource: Vec<(String, String)>,
    /// How long a span may wait for its batch.
    pub schedule_delay: Duration,
    /// Spans waiting beyond this many are dropped (and counted).
    pub max_queue_spans: usize,
    pub max_batch_spans: usize,
    /// The task and the answer go into `gen_ai.input.messages`/`gen_ai.output.messages`
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`); off by default.
    pub capture_content: bool,
}

/// What the environment says: export (how), or not; and what in it was wrong.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub export: Option<ExportConfig>,
    /// One line each, naming the variable (never a header's value: it may be a key).
    pub warnings: Vec<String>,
}

impl Settings {
    pub(crate) fn from_process_env() -> Settings {
        Settings::from_env(|k| std::env::var(k).ok())
    }

    pub(crate) fn from_env(get: impl Fn(&str) -> Option<String>) -> Settings {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mut warnings = Vec::new();
        let export = export(&get, &mut warnings);
        Settings { export, warnings }
    }
}

fn export(
    get: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Option<ExportConfig> {
    if flag(get, "OTEL_SDK_DISABLED", warnings) {
        return None;
    }
    let exporters: Vec<String> = get("OTEL_TRACES_EXPORTER")
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .collect()
        })
        .unwrap_or_default();
    if exporters.iter().any(|e| e == "none") {
        return None;
    }
    let named_otlp = exporters.iter().any(|e| e == "otlp");
    if !exporters.is_empty() && !named_otlp {
        warnings.push(format!(
            "OTEL_TRACES_EXPORTER={}: orchestrate exports traces over OTLP only (otlp or none); none are exported",
            exporters.join(",")
        ));
        return None;
    }
    let traces_endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT");
    if traces_endpoint.is_none() && endpoint.is_none() && !named_otlp {
        return None;
    }
    let protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .map(|p| ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", p))
        .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL").map(|p| ("OTEL_EXPORTER_OTLP_PROTOCOL", p)));
    if let Some((var, p)) = protocol.filter(|(_, p)| p != "http/protobuf") {
        warnings.push(format!(
            "{var}={p}: orchestrate exports traces over http/protobuf only (an OTLP/HTTP receiver, port 4318 by default); none are exported"
        ));
        return None;
    }
    let (var, url) = match (traces_endpoint, endpoint) {
        (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url),
        (None, Some(base)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", signal_url(&base)),
        (None, None) => ("OTEL_TRACES_EXPORTER", signal_url(DEFAULT_ENDPOINT)),
    };
    if let Err(why) = check_url(&url) {
        warnings.push(format!("{var}: {why}; no traces are exported"));
        return None;
    }
    let mut headers = list(get, "OTEL_EXPORTER_OTLP_HEADERS", warnings);
    for (k, v) in list(get, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", warnings) {
        headers.retain(|(have, _)| !have.eq_ignore_ascii_case(&k));
        headers.push((k, v));
    }
    let timeout_var = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find(|v| get(v).is_some())
    .unwrap_or("OTEL_EXPORTER_OTLP_TIMEOUT");
    let timeout = millis(get, timeout_var, DEFAULT_TIMEOUT_MS, warnings);
    let mut resource = list(get, "OTEL_RESOURCE_ATTRIBUTES", warnings);
    let from_resource = resource
        .iter()
        .position(|(k, _)| k == "service.name")
        .map(|i| resource.remove(i).1);
    let service_name = get("OTEL_SERVICE_NAME")
        .or(from_resource)
        .unwrap_or_else(|| "orchestrate".to_string());
    let max_queue_spans = count(
        get,
        "OTEL_BSP_MAX_QUEUE_SIZE",
        DEFAULT_MAX_QUEUE_SPANS,
        warnings,
    );
    let max_batch_spans = count(
        get,
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        DEFAULT_MAX_BATCH_SPANS,
        warnings,
    )
    .min(max_queue_spans);
    Some(ExportConfig {
        url,
        headers,
        timeout,
        service_name,
        resource,
        schedule_delay: millis(
            get,
            "OTEL_BSP_SCHEDULE_DELAY",
            DEFAULT_SCHEDULE_DELAY_MS,
            warnings,
        ),
        max_queue_spans,
        max_batch_spans,
        capture_content: flag(
            get,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
            warnings,
        ),
    })
}

/// `OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL: the traces path goes after it.
fn signal_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

fn check_url(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!("{url:?} is not a URL (http://host:port/path)"));
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(format!("{url:?}: only http and https are supported"));
    }
    if rest.split(['/', '?', '#']).next().is_none_or(str::is_empty) {
        return Err(format!("{url:?} names no host"));
    }
    Ok(())
}

/// A boolean as the specification defines them: `true` (any case) is true; anything but
/// `false` is a mistake, said, and false.
fn flag(get: &dyn Fn(&str) -> Option<String>, var: &str, warnings: &mut Vec<String>) -> bool {
    match get(var) {
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if !v.eq_ignore_ascii_case("false") => {
            warnings.push(format!("{var}={v}: expected true or false; taken as false"));
            false
        }
        _ => false,
    }
}

fn millis(
    get: &dyn Fn(&str) -> Option<String>,
    var: &str,
    default: u64,
    warnings: &mut Vec<String>,
) -> Duration {
    Duration::from_millis(count(get, var, default as usize, warnings) as u64)
}

fn count(
    get: &dyn Fn(&str) -> Option<String>,
    var: &str,
    default: usize,
    warnings: &mut Vec<String>,
) -> usize {
    match get(var).map(|v| (v.parse::<usize>(), v)) {
        None => default,
        Some((Ok(n), _)) if n > 0 => n,
        Some((_, v)) => {
            warnings.push(format!(
                "{var}={v}: expected a positive whole number; {default} is used"
            ));
            default
        }
    }
}

/// `key1=value1,key2=value2`, values percent-decoded. A malformed member is skipped and
/// named by its position only: header values are often keys.
fn list(
    get: &dyn Fn(&str) -> Option<String>,
    var: &str,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let Some(value) = get(var) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, member) in value.split(',').enumerate() {
        if member.trim().is_empty() {
            continue;
        }
        match member.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && out.len() < MAX_LIST_MEMBERS => {
                out.push((percent_decode(k.trim()), percent_decode(v.trim())));
            }
            Some(_) if out.len() >= MAX_LIST_MEMBERS => {
                warnings.push(format!(
                    "{var}: more than {MAX_LIST_MEMBERS} entries; the rest are ignored"
                ));
                break;
            }
            _ => warnings.push(format!(
                "{var}: entry {} is not key=value; it is ignored",
                i + 1
            )),
        }
    }
    out
}

/// `%XX` escapes decoded; a `%` that starts none is kept as it is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| s.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::from_env(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    fn defaults(url: &str) -> ExportConfig {
        ExportConfig {
            url: url.into(),
            headers: vec![],
            timeout: Duration::from_secs(10),
            service_name: "orchestrate".into(),
            resource: vec![],
            schedule_delay: Duration::from_secs(5),
            max_queue_spans: 2048,
            max_batch_spans: 512,
            capture_content: false,
        }
    }

    #[test]
    fn nothing_set_exports_nothing_and_says_nothing() {
        assert_eq!(
            settings(&[]),
            Settings {
                export: None,
                warnings: vec![]
            }
        );
        assert_eq!(settings(&[("OTEL_SERVICE_NAME", "x")]).export, None);
    }

    #[test]
    fn a_base_endpoint_gets_the_traces_path_and_a_traces_endpoint_is_used_as_is() {
        for base in ["http://127.0.0.1:4318", "http://127.0.0.1:4318/"] {
            let s = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", base)]);
            assert_eq!(s.export, Some(defaults("http://127.0.0.1:4318/v1/traces")));
        }
        let s = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://api.honeycomb.io/v1/traces",
            ),
        ]);
        assert_eq!(
            s.export,
            Some(defaults("https://api.honeycomb.io/v1/traces"))
        );
        let s = settings(&[("OTEL_TRACES_EXPORTER", "otlp")]);
        assert_eq!(s.export, Some(defaults("http://localhost:4318/v1/traces")));
    }

    #[test]
    fn disabled_or_none_wins_over_an_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for off in [
            ("OTEL_SDK_DISABLED", "TRUE"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                settings(&[endpoint, off]),
                Settings {
                    export: None,
                    warnings: vec![]
                }
            );
        }
        let s = settings(&[endpoint, ("OTEL_SDK_DISABLED", "false")]);
        assert!(s.export.is_some());
    }

    #[test]
    fn what_cannot_be_honoured_is_said_and_exports_nothing() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
        let cases: [(&[(&str, &str)], &str); 5] = [
            (&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: orchestrate exports traces over http/protobuf only (an OTLP/HTTP receiver, port 4318 by default); none are exported"),
            (&[endpoint, ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")], "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: orchestrate exports traces over http/protobuf only (an OTLP/HTTP receiver, port 4318 by default); none are exported"),
            (&[endpoint, ("OTEL_TRACES_EXPORTER", "console")], "OTEL_TRACES_EXPORTER=console: orchestrate exports traces over OTLP only (otlp or none); none are exported"),
            (&[("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")], "OTEL_EXPORTER_OTLP_ENDPOINT: \"localhost:4318/v1/traces\" is not a URL (http://host:port/path); no traces are exported"),
            (&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://h:4317")], "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: \"grpc://h:4317\": only http and https are supported; no traces are exported"),
        ];
        for (vars, warning) in cases {
            assert_eq!(
                settings(vars),
                Settings {
                    export: None,
                    warnings: vec![warning.to_string()]
                }
            );
        }
    }

    #[test]
    fn headers_resource_and_limits_are_read() {
        let s = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-honeycomb-team=abc, Authorization=Basic%20dXNlcjpwYXNz ,broken",
            ),
            (
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "authorization=Bearer%20t",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1500"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=from-resource,deployment.environment=ci",
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ]);
        assert_eq!(
            s,
            Settings {
                export: Some(ExportConfig {
                    headers: vec![
                        ("x-honeycomb-team".into(), "abc".into()),
                        ("authorization".into(), "Bearer t".into()),
                    ],
                    timeout: Duration::from_millis(1500),
                    service_name: "from-resource".into(),
                    resource: vec![("deployment.environment".into(), "ci".into())],
                    max_queue_spans: 100,
                    max_batch_spans: 100,
                    capture_content: true,
                    ..defaults("http://127.0.0.1:4318/v1/traces")
                }),
                warnings: vec![
                    "OTEL_EXPORTER_OTLP_HEADERS: entry 3 is not key=value; it is ignored".into(),
                    "OTEL_BSP_SCHEDULE_DELAY=soon: expected a positive whole number; 5000 is used"
                        .into(),
                ],
            }
        );
        let named = settings(&[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_SERVICE_NAME", "mine"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=other"),
        ]);
        assert_eq!(named.export.unwrap().service_name, "mine");
    }

    #[test]
    fn percent_decoding_keeps_what_is_no_escape() {
        assert_eq!(percent_decode("a%20b%2Cc%zz%4"), "a b,c%zz%4");
    }
}
