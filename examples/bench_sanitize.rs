//! Sanitizer throughput on one core: `bench_sanitize FILE [ROUNDS]` prints
//! `{"sanitize_mb_s": …, "baseline_mb_s": …, "bytes": …, "changed": …}` where the baseline
//! is a memchr newline scan of the same bytes. Used by `scripts/bench`.

use std::time::Instant;

use orchestrate::sanitize::Sanitizer;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: bench_sanitize FILE [ROUNDS]");
    let rounds: usize = args
        .next()
        .map_or(5, |r| r.parse().expect("ROUNDS is a number"));
    let bytes = std::fs::read(&path).expect("readable file");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mb = text.len() as f64 / 1e6;
    let sanitizer = Sanitizer::global();
    let mut changed = false;
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        let out = sanitizer.sanitize(&text);
        ours.push(mb / t.elapsed().as_secs_f64());
        changed = matches!(out, std::borrow::Cow::Owned(_));
        let t = Instant::now();
        let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        base.push(mb / t.elapsed().as_secs_f64());
        std::hint::black_box(lines);
    }
    println!(
        "{{\"sanitize_mb_s\": {:.1}, \"baseline_mb_s\": {:.1}, \"bytes\": {}, \"changed\": {changed}}}",
        median(ours),
        median(base),
        text.len()
    );
}
