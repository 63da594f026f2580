//! The queue and its thread, over a sender the test controls: what leaves, what is
//! dropped and counted, and how long a flush may wait.

use std::sync::mpsc;
use std::time::SystemTime;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use pretty_assertions::assert_eq;

use super::*;
use crate::observe::trace::context::SpanContext;
use crate::observe::trace::span::Kind;

fn config(max_queue_spans: usize, max_batch_spans: usize) -> ExportConfig {
    ExportConfig {
        url: "http://127.0.0.1:9/v1/traces".into(),
        headers: vec![],
        timeout: Duration::from_secs(10),
        service_name: "test".into(),
        resource: vec![],
        // Long: only a full batch or a flush sends.
        schedule_delay: Duration::from_secs(600),
        max_queue_spans,
        max_batch_spans,
        capture_content: false,
    }
}

fn span(name: &str) -> SpanData {
    let now = SystemTime::now();
    SpanData {
        context: SpanContext::root(),
        parent: None,
        parent_is_remote: false,
        name: name.into(),
        kind: Kind::Internal,
        start: now,
        end: now,
        attributes: vec![],
        error: None,
    }
}

/// A sender that records the span names of every request it is given.
fn recording() -> (Send, Arc<Mutex<Vec<Vec<String>>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let log = got.clone();
    let send: Send = Box::new(move |body: &[u8]| {
        let req = ExportTraceServiceRequest::decode(body).unwrap();
        let names = req.resource_spans[0].scope_spans[0]
            .spans
            .iter()
            .map(|s| s.name.clone())
            .collect();
        log.lock().unwrap().push(names);
        Ok(())
    });
    (send, got)
}

fn start(config: &ExportConfig, send: Send) -> Exporter {
    Exporter::with_sender(config, send, span::resource("test", &[])).unwrap()
}

#[test]
fn a_flush_sends_everything_in_batches() {
    let (send, got) = recording();
    let exporter = start(&config(100, 2), send);
    for name in ["a", "b", "c", "d", "e"] {
        exporter.push(span(name));
    }
    assert!(exporter.flush(Duration::from_secs(30)));
    let got = got.lock().unwrap().clone();
    assert_eq!(got.concat(), ["a", "b", "c", "d", "e"]);
    assert!(got.iter().all(|batch| batch.len() <= 2), "{got:?}");
    assert_eq!(
        exporter.counts(),
        Counts {
            queued: 0,
            dropped: 0,
            failed: 0
        }
    );
}

#[test]
fn a_full_queue_drops_and_counts_and_never_blocks() {
    // The sender is stuck on its first request, as with a collector that never answers.
    let (release, stuck) = mpsc::channel::<()>();
    let sent = Arc::new(Mutex::new(0usize));
    let count = sent.clone();
    let send: Send = Box::new(move |body: &[u8]| {
        let req = ExportTraceServiceRequest::decode(body).unwrap();
        *count.lock().unwrap() += req.resource_spans[0].scope_spans[0].spans.len();
        let _ = stuck.recv();
        Ok(())
    });
    let exporter = start(&config(3, 1), send);
    exporter.push(span("taken by the stuck request"));
    // The thread takes the first span; wait until it holds it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while exporter.counts().queued > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..10 {
        exporter.push(span(&format!("s{i}")));
    }
    assert_eq!(
        exporter.counts(),
        Counts {
            queued: 3,
            dropped: 7,
            failed: 0
        }
    );
    release.send(()).unwrap();
    drop(release);
    assert!(exporter.flush(Duration::from_secs(30)));
    assert_eq!(*sent.lock().unwrap(), 4);
}

#[test]
fn a_flush_gives_up_at_its_bound_when_the_collector_never_answers() {
    let (_keep, stuck) = mpsc::channel::<()>();
    let send: Send = Box::new(move |_: &[u8]| {
        let _ = stuck.recv();
        Ok(())
    });
    let exporter = start(&config(10, 10), send);
    exporter.push(span("never arrives"));
    let t = Instant::now();
    assert!(!exporter.flush(Duration::from_millis(200)));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[test]
fn failed_requests_are_counted_and_the_rest_still_goes() {
    let calls = Arc::new(Mutex::new(0));
    let n = calls.clone();
    let send: Send = Box::new(move |_: &[u8]| {
        let mut n = n.lock().unwrap();
        *n += 1;
        if *n == 1 {
            Err(ExportError::Status {
                url: "http://collector/v1/traces".into(),
                status: 503,
            })
        } else {
            Ok(())
        }
    });
    let exporter = start(&config(10, 2), send);
    for name in ["a", "b", "c"] {
        exporter.push(span(name));
    }
    assert!(exporter.flush(Duration::from_secs(30)));
    assert_eq!(*calls.lock().unwrap(), 2);
    assert_eq!(
        exporter.counts(),
        Counts {
            queued: 0,
            dropped: 0,
            failed: 2
        }
    );
}

#[test]
fn an_empty_flush_returns_at_once() {
    let (send, got) = recording();
    let exporter = start(&config(10, 10), send);
    assert!(exporter.flush(Duration::from_secs(30)));
    assert!(got.lock().unwrap().is_empty());
}
