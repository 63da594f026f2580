//! The span queue and the thread that sends it: OTLP over HTTP, protobuf bodies.
//!
//! A span that ends is queued (a lock held for a push, never across I/O); the thread
//! sends a batch when the queue holds a full one, when a span has waited the schedule
//! delay, or when asked to flush. Nothing here ever waits on the collector on behalf of a
//! run: a full queue drops the span and counts it, a failed request drops its batch and
//! counts it, and both are said once. At exit the queue is flushed for at most
//! [`EXIT_FLUSH_MAX`], after which the process ends whatever the collector does.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prost::Message;

use super::config::ExportConfig;
use super::span::{self, SpanData};

/// The longest orchestrate waits for its spans to leave when it exits: a collector that
/// accepts the connection and never answers costs this much, once.
pub(crate) const EXIT_FLUSH_MAX: Duration = Duration::from_secs(1);

/// A response body read for its error message, at most.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;

/// Why a batch did not arrive.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExportError {
    #[error("the collector at {url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("could not reach the collector at {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: ureq::Error,
    },
}

/// Sends one encoded request.
pub(crate) type Send = Box<dyn FnMut(&[u8]) -> Result<(), ExportError> + std::marker::Send>;

/// The process's span exporter (one thread).
pub(crate) struct Exporter {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// The thread waits here for spans or a flush.
    wake: Condvar,
    /// Flushers wait here for the thread to have sent what they asked.
    sent: Condvar,
    max_queue_spans: usize,
    max_batch_spans: usize,
    schedule_delay: Duration,
}

#[derive(Default)]
struct State {
    queue: VecDeque<SpanData>,
    /// Spans dropped because the queue was full.
    dropped: u64,
    /// Spans whose request failed.
    failed: u64,
    /// Whether a failure was already said.
    warned: bool,
    /// Flushes asked for, and the last one the thread completed.
    flushes_asked: u64,
    flushes_done: u64,
}

/// What the exporter counted, for the last word at exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub queued: usize,
    pub dropped: u64,
    pub failed: u64,
}

impl Exporter {
    /// Starts the thread that sends to the collector `config` names.
    pub(crate) fn start(config: &ExportConfig) -> std::io::Result<Exporter> {
        let resource = span::resource(&config.service_name, &config.resource);
        let post = http_post(config);
        Exporter::with_sender(config, Box::new(post), resource)
    }

    pub(crate) fn with_sender(
        config: &ExportConfig,
        mut send: Send,
        resource: super::proto::Resource,
    ) -> std::io::Result<Exporter> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            sent: Condvar::new(),
            max_queue_spans: config.max_queue_spans,
            max_batch_spans: config.max_batch_spans,
            schedule_delay: config.schedule_delay,
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("otlp-export".into())
            .spawn(move || worker.run(&mut send, &resource))?;
        Ok(Exporter { shared })
    }

    /// Queues a finished span; drops it (counted) when the queue is full.
    pub(crate) fn push(&self, span: SpanData) {
        let mut state = self.shared.lock();
        if state.queue.len() >= self.shared.max_queue_spans {
            state.dropped += 1;
            return;
        }
        state.queue.push_back(span);
        if state.queue.len() >= self.shared.max_batch_spans {
            self.shared.wake.notify_one();
        }
    }

    /// Sends everything queued so far, waiting at most `bound`; whether it all went.
    pub(crate) fn flush(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut state = self.shared.lock();
        state.flushes_asked += 1;
        let asked = state.flushes_asked;
        self.shared.wake.notify_one();
        while state.flushes_done < asked {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match self.shared.sent.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    pub(crate) fn counts(&self) -> Counts {
        let state = self.shared.lock();
        Counts {
            queued: state.queue.len(),
            dropped: state.dropped,
            failed: state.failed,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves a queue that is still a queue.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The thread: waits for a batch, a flush or the delay; sends; repeats (for the life
    /// of the process).
    fn run(&self, send: &mut Send, resource: &super::proto::Resource) {
        loop {
            let (batch, flush) = self.next_batch();
            if !batch.is_empty() {
                let n = batch.len() as u64;
                let body = span::request(resource, batch).encode_to_vec();
                if let Err(e) = send(&body) {
                    let first = {
                        let mut state = self.lock();
                        state.failed += n;
                        !std::mem::replace(&mut state.warned, true)
                    };
                    if first {
                        tracing::warn!("traces: {e}; its spans are dropped (said once)");
                    } else {
                        tracing::debug!("traces: {e}");
                    }
                }
            }
            if let Some(asked) = flush {
                let mut state = self.lock();
                if state.queue.is_empty() {
                    state.flushes_done = state.flushes_done.max(asked);
                    self.sent.notify_all();
                }
            }
        }
    }

    /// The next batch to send (possibly empty), and the flush it serves.
    fn next_batch(&self) -> (Vec<SpanData>, Option<u64>) {
        let mut state = self.lock();
        let deadline = Instant::now() + self.schedule_delay;
        loop {
            let flushing = state.flushes_asked > state.flushes_done;
            if flushing || state.queue.len() >= self.max_batch_spans {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = match self.wake.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        let flush = (state.flushes_asked > state.flushes_done).then_some(state.flushes_asked);
        let n = state.queue.len().min(self.max_batch_spans);
        (state.queue.drain(..n).collect(), flush)
    }
}

/// POSTs a request body to the collector, with the configured headers and timeout.
fn http_post(config: &ExportConfig) -> impl FnMut(&[u8]) -> Result<(), ExportError> {
    // Every phase but the name lookup is bounded by the timeout. A timeout on the lookup
    // would cost a thread per connection (ureq resolves on a thread of its own to time
    // it out); the lookup runs on the export thread, which no run waits for, and the
    // flush at exit is bounded whatever the thread is doing.
    let timeout = Some(config.timeout);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(timeout)
        .timeout_send_request(timeout)
        .timeout_send_body(timeout)
        .timeout_recv_response(timeout)
        .timeout_recv_body(timeout)
        .http_status_as_error(false)
        .user_agent(concat!("orchestrate/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let url = config.url.clone();
    let headers = config.headers.clone();
    move |body: &[u8]| {
        let mut request = agent
            .post(&url)
            .header("Content-Type", "application/x-protobuf");
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        let transport = |source| ExportError::Transport {
            url: url.clone(),
            source,
        };
        let mut response = request.send(body).map_err(transport)?;
        // Read (a bounded part of) the answer, so that the connection can be used again.
        let _ = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec();
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(ExportError::Status {
                url: url.clone(),
                status,
            })
        }
    }
}

#[cfg(test)]
mod tests;
