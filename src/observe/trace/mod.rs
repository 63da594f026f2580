//! Traces: a run's spans, exported over OTLP/HTTP when the standard OpenTelemetry
//! environment asks for it (see `config`), following the GenAI semantic conventions for
//! agents.
//!
//! - `invoke_workflow {parallel|chain}` (INTERNAL) for a fan-out or chain, the parent of
//!   its tasks' runs;
//! - `invoke_agent {agent}` (CLIENT: the agent is another process) per run, from its start
//!   to its result, with `gen_ai.agent.id` its run id and the run's usage and cost;
//! - `attempt {first|retry|fallback|repair}` (INTERNAL) per attempt of the run's child,
//!   with its model and how it ended. The conventions know no attempt; these spans carry
//!   no `gen_ai.operation.name` and no usage, so that backends adding up `invoke_agent`
//!   spans count a run once. Each attempt's child gets its attempt's span in
//!   `TRACEPARENT`, so the child's own spans (Claude Code's, a nested orchestrate's) hang
//!   under the attempt that ran them;
//! - `execute_tool {tool}` (INTERNAL) per tool call the child made, timed from its
//!   stream (from the call, or the tool's start, to the tool's end), with the attempt it
//!   was made in, under that attempt.
//!
//! The context handed in (`TRACEPARENT`/`TRACESTATE`, or an MCP request's `_meta`) is
//! continued, and handed on to every child in `TRACEPARENT`. With no
//! exporter configured no tracer exists at all: no thread, and nothing per event.

mod config;
mod context;
mod export;
mod proto;
mod run_span;
mod span;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

pub(crate) use config::Settings;
pub(crate) use context::SpanContext;

use super::{GroupEvent, Observe, RunObserver, RunStart};
use crate::result::Mode;
use export::Exporter;
use span::{Kind, SpanData, Value};

/// The process's exporter, made on first use from the environment.
struct Export {
    exporter: Exporter,
    capture_content: bool,
}

static EXPORT: OnceLock<Option<Export>> = OnceLock::new();

fn export() -> Option<&'static Export> {
    EXPORT
        .get_or_init(|| start(Settings::from_process_env()))
        .as_ref()
}

fn start(settings: Settings) -> Option<Export> {
    for warning in &settings.warnings {
        tracing::warn!("traces: {warning}");
    }
    let config = settings.export?;
    match Exporter::start(&config) {
        Ok(exporter) => Some(Export {
            exporter,
            capture_content: config.capture_content,
        }),
        Err(e) => {
            tracing::warn!("traces: the export thread could not start: {e}; none are exported");
            None
        }
    }
}

/// The trace context this process was started in (`TRACEPARENT`, `TRACESTATE`).
fn given_by_env() -> Option<&'static SpanContext> {
    static GIVEN: OnceLock<Option<SpanContext>> = OnceLock::new();
    GIVEN
        .get_or_init(|| {
            let traceparent = std::env::var("TRACEPARENT").ok()?;
            let ctx = SpanContext::parse(&traceparent, std::env::var("TRACESTATE").ok().as_deref());
            if ctx.is_none() {
                tracing::debug!(
                    "TRACEPARENT {traceparent:?} is not a W3C traceparent; a new trace starts"
                );
            }
            ctx
        })
        .as_ref()
}

/// Sends what is queued before the process exits, waiting at most
/// [`export::EXIT_FLUSH_MAX`]; says what was lost. Nothing to do when no exporter was
/// ever made.
pub(crate) fn shutdown() {
    let Some(export) = EXPORT.get().and_then(Option::as_ref) else {
        return;
    };
    let flushed = export.exporter.flush(export::EXIT_FLUSH_MAX);
    let counts = export.exporter.counts();
    if !flushed {
        tracing::warn!(
            "traces: the collector did not take the last spans within {:?}; {} are lost",
            export::EXIT_FLUSH_MAX,
            counts.queued
        );
    }
    if counts.dropped > 0 {
        tracing::warn!(
            "traces: {} spans were dropped because the export queue was full (OTEL_BSP_MAX_QUEUE_SIZE)",
            counts.dropped
        );
    }
}

/// The tracer of the runs of one call (a command line, or an MCP request): where their
/// spans go and what they continue.
pub(crate) struct Tracer {
    export: Option<&'static Export>,
    /// The context handed in; `None` starts a new trace.
    given: Option<SpanContext>,
    /// The open fan-outs and chains: their span, the parent of their tasks' runs.
    groups: Mutex<HashMap<String, OpenGroup>>,
}

struct OpenGroup {
    context: SpanContext,
    parent: Option<SpanContext>,
    start: SystemTime,
}

impl Tracer {
    /// The tracer of a call, continuing `given` (an MCP request's context) or else the
    /// process's `TRACEPARENT`; `None` when there is nothing to do: no exporter, and no
    /// context given by the call to hand on (the process's own reaches the children with
    /// the rest of its environment).
    pub(crate) fn for_call(given: Option<SpanContext>) -> Option<Tracer> {
        let export = export();
        if export.is_none() && given.is_none() {
            return None;
        }
        Some(Tracer {
            export,
            given: given.or_else(|| given_by_env().cloned()),
            groups: Mutex::new(HashMap::new()),
        })
    }

    /// The parent of a run or group: its group's span, or the given context.
    fn parent_of(&self, group: Option<&str>) -> Option<SpanContext> {
        let from_group = group.and_then(|id| {
            let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
            groups.get(id).map(|g| g.context.clone())
        });
        from_group.or_else(|| self.given.clone())
    }
}

impl Observe for Tracer {
    fn run(&self, start: &RunStart<'_>) -> Option<Box<dyn RunObserver>> {
        let parent = self.parent_of(start.group.map(|g| g.id.as_str()));
        Some(Box::new(run_span::RunTrace::start(
            self.export.map(|e| (&e.exporter, e.capture_content)),
            parent,
            start,
        )))
    }

    fn group(&self, at: SystemTime, event: &GroupEvent<'_>) {
        let Some(export) = self.export else {
            return;
        };
        match *event {
            GroupEvent::Started { id, .. } => {
                let parent = self.given.clone();
                let context = parent
                    .as_ref()
                    .map_or_else(SpanContext::root, SpanContext::child);
                let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
                groups.insert(
                    id.to_string(),
                    OpenGroup {
                        context,
                        parent,
                        start: at,
                    },
                );
            }
            GroupEvent::Ended { id, mode, output } => {
                let open = {
                    let mut groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
                    groups.remove(id)
                };
                let Some(open) = open else { return };
                if !open.context.sampled {
                    return;
                }
                let name = match mode {
                    Mode::Chain => "chain",
                    _ => "parallel",
                };
                let details = &output.result.details;
                let mut attributes = vec![
                    ("gen_ai.operation.name", Value::from("invoke_workflow")),
                    ("gen_ai.workflow.name", name.into()),
                    ("orchestrate.workflow.id", id.into()),
                    (
                        "orchestrate.workflow.tasks",
                        (details.results.len() as u64).into(),
                    ),
                ];
                let usage =
                    details
                        .results
                        .iter()
                        .fold(crate::result::Usage::default(), |mut sum, r| {
                            sum.add(&r.usage);
                            sum
                        });
                run_span::usage_attributes(&usage, &mut attributes);
                let error = run_span::error_of(output, &mut attributes);
                export.exporter.push(SpanData {
                    parent: open.parent.as_ref().map(|p| p.span_id),
                    parent_is_remote: open.parent.is_some(),
                    context: open.context,
                    name: format!("invoke_workflow {name}"),
                    kind: Kind::Internal,
                    start: open.start,
                    end: at,
                    attributes,
                    error,
                });
            }
        }
    }
}

/// The GenAI provider of a run, as the conventions name them: the vendor's CLI says it,
/// and for the CLIs that reach many providers, the `provider/model` form of the model
/// does; otherwise the backend's own name stands in.
pub(crate) fn provider(backend: &str, model: Option<&str>) -> String {
    let known = |p: &str| -> Option<&'static str> {
        Some(match p.to_ascii_lowercase().as_str() {
            "anthropic" | "claude" => "anthropic",
            "openai" | "codex" => "openai",
            "google" | "gemini" => "gcp.gemini",
            "vertex" | "google-vertex" | "vertex_ai" => "gcp.vertex_ai",
            "bedrock" | "amazon-bedrock" | "aws.bedrock" => "aws.bedrock",
            "azure" | "azure-openai" => "azure.ai.openai",
            "mistral" => "mistral_ai",
            "xai" => "x_ai",
            "groq" => "groq",
            "deepseek" => "deepseek",
            "cohere" => "cohere",
            "perplexity" => "perplexity",
            _ => return None,
        })
    };
    if let Some(p) = known(backend) {
        return p.to_string();
    }
    model
        .and_then(|m| m.split_once('/'))
        .and_then(|(p, _)| known(p))
        .map_or_else(|| backend.to_string(), str::to_string)
}

#[cfg(test)]
mod tests;
