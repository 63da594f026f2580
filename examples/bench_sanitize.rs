//! Sanitizer throughput on one core: `bench_sanitize FILE [ROUNDS]` prints
//! `{"sanitize_mb_s": …, "baseline_mb_s": …, "bytes": …, "changed": …}` where the baseline
//! is a memchr newline scan of the same bytes. Used by `scripts/bench`.
//!
//! `bench_sanitize FILE [ROUNDS] --pathological` also times inputs built to push the rules
//! into their worst cases (long runs of token characters, chains of `=`, long URLs, repeated
//! keywords and prefixes, each on one line and on many), each of the same size as a slice
//! of FILE that serves as clean text, and adds
//! `"pathological": [{"name": …, "mb_s": …, "slowdown": …, "edits_per_kb": …}, …]`,
//! `"worst_slowdown"` over the inputs that are not mostly secrets, and
//! `"worst_dense_slowdown"` over those that are (an edit, a mask or a home mapped to `~`,
//! every [`DENSE_BYTES_PER_EDIT`] bytes or closer): there each edit costs a judgement and
//! often a regex capture, so their time follows the number of secrets rather than the size
//! of the text.
//!
//! Two more modes, for measurements that must not depend on the machine's load:
//! - `bench_sanitize FILE --write OUT` sanitizes FILE once and writes the result to OUT,
//!   so that two builds can be compared byte for byte (with `--run NAME`, the input NAME
//!   is sanitized and written instead);
//! - `bench_sanitize FILE --run NAME` sanitizes one input once more after a first call
//!   that builds what is built lazily: NAME is `file` (FILE itself), `clean` (the slice of
//!   FILE that pathological inputs are compared with) or a pathological input's name. The
//!   second call is made in [`measured`], so that
//!   `valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured*'` counts
//!   the instructions of that call alone (`scripts/bench --only sanitizer-instructions`);
//!   `--list` prints the pathological inputs' names, one a line.

use std::time::Instant;

use orchestrate::sanitize::Sanitizer;

/// The size of each pathological input and of the clean slice it is compared with.
const PATHOLOGICAL_BYTES: usize = 2_000_000;

/// Inputs with an edit every this many bytes or closer are mostly secrets.
const DENSE_BYTES_PER_EDIT: usize = 100;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median MB/s of sanitizing `text`, and how many edits (masks and `~` for a home) the
/// output holds that the input did not.
fn rate(sanitizer: &Sanitizer, text: &str, rounds: usize) -> (f64, usize) {
    let mb = text.len() as f64 / 1e6;
    let edits = |s: &str| s.matches("[REDACTED]").count() + s.matches('~').count();
    let mut made = 0;
    let rates = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let out = sanitizer.sanitize(std::hint::black_box(text));
            let r = mb / t.elapsed().as_secs_f64();
            made = edits(&out).saturating_sub(edits(text));
            r
        })
        .collect();
    (median(rates), made)
}

/// Repeats `unit` to `bytes` (cut on a character boundary).
fn repeat_to(unit: &str, bytes: usize) -> String {
    let mut s = unit.repeat(bytes / unit.len() + 1);
    let mut cut = bytes.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

/// Deterministic pseudo-random characters from `alphabet`.
fn random_run(alphabet: &[u8], bytes: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(alphabet[(x % alphabet.len() as u64) as usize])
        })
        .collect()
}

/// Inputs that reach many rules at once or make one rule look far: every keyword and
/// prefix the rules gate on, separators without values, unterminated quotes and URLs.
fn pathological(bytes: usize) -> Vec<(&'static str, String)> {
    let base64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let hex: &[u8] = b"0123456789abcdef";
    let line = |unit: &str| repeat_to(unit, bytes);
    let lines = |unit: &str| repeat_to(&format!("{unit}\n"), bytes);
    vec![
        ("base64 run, one line", random_run(base64, bytes)),
        ("hex run, one line", random_run(hex, bytes)),
        ("one letter, one line", line("A")),
        ("equals signs", line("=")),
        ("a=a=a=", line("a=")),
        ("token=token=", line("token=")),
        ("password: password: ", line("password: ")),
        ("key=\" unterminated", line("api_key=\"q7VbN2xK")),
        (
            "quoted secrets, one line",
            line("\"password\": \"hunter2\", "),
        ),
        ("KEY=value lines", lines("API_KEY=q7VbN2xK9mPzR4tLw8Yc")),
        ("password is, prose", line("the password is password is ")),
        (
            "prose with values",
            lines("The staging password is Harbor4417! ok"),
        ),
        ("struct dumps", line("&{Host:db Password:x User:y ")),
        ("open braces", line("{Password:")),
        ("map[ opens", line("map[password:")),
        ("presigned URL, a signature per param", {
            let mut s = String::from("https://b.s3.amazonaws.com/k?");
            s.push_str(&line("X-Amz-Signature=abcdef0123456789abcdef&"));
            s
        }),
        ("long URL, plain params", {
            let mut s = String::from("https://example.com/search?");
            s.push_str(&line("page=2&sort=asc&q=token&"));
            s
        }),
        ("long URL path", {
            let mut s = String::from("https://example.com");
            s.push_str(&line("/api/v1/users/key"));
            s
        }),
        ("long percent-encoded URL", {
            let mut s = String::from("?next=https%3A%2F%2Fexample.com");
            s.push_str(&line("%2Fsettings%3Ftab%3Dtoken%26x%3D1"));
            s
        }),
        ("dashes and underscores", line("-_")),
        ("presigned, no values", line("&X-Amz-Credential=")),
        ("percent-encoded URL", line("%3A%2F%2Fu%3Ap%3A")),
        ("encoded query", line("%3Ftoken%3D%26token%3D")),
        ("URL without @", line("https://u:p")),
        ("scheme://user: runs", line("://a:")),
        ("Authorization headers", line("Authorization: Bearer ")),
        (
            "header map, no value",
            line("headers[\"Authorization\"] = "),
        ),
        ("bearer bearer", line("bearer ")),
        ("vendor prefixes", line("sk-ghp_AKIAxoxb-glpat-eyJ")),
        ("sk- dashes", line("sk-a-b-c-d-e-f-g-h-")),
        ("AKIA and a comma", line("\"AKIA\", \"")),
        (
            "Twilio-like ids",
            line("\"AC0123456789abcdef0123456789abcdef\", \""),
        ),
        ("webhook paths", line("hooks.slack.com/services/")),
        (
            "encoded webhook paths",
            line("hooks.slack.com%2Fservices%2F"),
        ),
        ("home paths", line("/home/")),
        ("Windows homes", line("C:\\Users\\")),
        ("PEM armour", lines("-----BEGIN RSA PRIVATE KEY-----")),
        ("base64 PEM marker", line("LS0tLS1CRUdJTi")),
        ("frame lines", lines("    at f (a.js:1:2)")),
        ("escaped frames", line("\\n    at f (a.js:1:2)")),
        ("masks", line("[REDACTED]")),
        ("ARN colons", line("arn:aws:secretsmanager:secret:")),
        ("cookie pairs", line("Cookie: sessionid=")),
        ("curl -u", line("curl -u a:")),
    ]
}

/// The call whose instructions `--run` has callgrind count.
#[inline(never)]
fn measured(sanitizer: &Sanitizer, text: &str) -> usize {
    sanitizer.sanitize(std::hint::black_box(text)).len()
}

/// The clean text that pathological inputs are compared with: the start of FILE.
fn clean_slice(text: &str) -> &str {
    let mut cut = PATHOLOGICAL_BYTES.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let with_pathological = args.iter().any(|a| a == "--pathological");
    if args.iter().any(|a| a == "--list") {
        for (name, _) in pathological(16) {
            println!("{name}");
        }
        return;
    }
    let option = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args.get(i + 1).expect("option takes a value").as_str())
    };
    let (write, run) = (option("--write"), option("--run"));
    let mut positional = args
        .iter()
        .enumerate()
        .filter(|&(i, a)| {
            let value_of_option = i > 0 && matches!(args[i - 1].as_str(), "--write" | "--run");
            !a.starts_with("--") && !value_of_option
        })
        .map(|(_, a)| a);
    let path = positional.next().expect(
        "usage: bench_sanitize FILE [ROUNDS] [--pathological] | FILE --write OUT | FILE --run NAME",
    );
    let rounds: usize = positional
        .next()
        .map_or(5, |r| r.parse().expect("ROUNDS is a number"));
    let bytes = std::fs::read(path).expect("readable file");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let mb = text.len() as f64 / 1e6;
    let sanitizer = Sanitizer::global();
    if let (Some(out), None) = (write, run) {
        std::fs::write(out, sanitizer.sanitize(&text).as_bytes()).expect("writable output");
        return;
    }
    if let Some(name) = run {
        let clean = clean_slice(&text);
        let input = match name {
            "file" => text.clone(),
            "clean" => clean.to_string(),
            _ => {
                pathological(clean.len())
                    .into_iter()
                    .find(|(n, _)| *n == name)
                    .unwrap_or_else(|| panic!("no input named {name:?}"))
                    .1
            }
        };
        if let Some(out) = write {
            std::fs::write(out, sanitizer.sanitize(&input).as_bytes()).expect("writable output");
            return;
        }
        let first = sanitizer.sanitize(&input).len();
        let again = measured(sanitizer, &input);
        assert_eq!(first, again, "sanitizing is deterministic");
        println!("{{\"input\": {name:?}, \"bytes\": {}}}", input.len());
        return;
    }
    let (ours, edits) = rate(sanitizer, &text, rounds);
    let changed = edits > 0;
    let base = median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
                std::hint::black_box(lines);
                mb / t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let mut json = format!(
        "{{\"sanitize_mb_s\": {ours:.1}, \"baseline_mb_s\": {base:.1}, \"bytes\": {}, \"changed\": {changed}",
        text.len()
    );
    if with_pathological {
        let clean_text = clean_slice(&text);
        let cut = clean_text.len();
        let (clean, _) = rate(sanitizer, clean_text, rounds);
        let (mut worst, mut worst_dense): (f64, f64) = (0.0, 0.0);
        let rows: Vec<String> = pathological(cut)
            .into_iter()
            .map(|(name, input)| {
                // Clean and pathological runs alternate, so that both see the same load
                // on a shared machine.
                let (mut clean_rates, mut rates, mut edits) = (Vec::new(), Vec::new(), 0);
                for _ in 0..rounds {
                    clean_rates.push(rate(sanitizer, clean_text, 1).0);
                    let (r, e) = rate(sanitizer, &input, 1);
                    rates.push(r);
                    edits = e;
                }
                let r = median(rates);
                let slowdown = median(clean_rates) / r;
                if edits * DENSE_BYTES_PER_EDIT >= input.len() {
                    worst_dense = worst_dense.max(slowdown);
                } else {
                    worst = worst.max(slowdown);
                }
                let per_kb = edits as f64 * 1000.0 / input.len() as f64;
                format!(
                    "{{\"name\": {name:?}, \"mb_s\": {r:.1}, \"slowdown\": {slowdown:.2}, \"edits_per_kb\": {per_kb:.1}}}"
                )
            })
            .collect();
        json.push_str(&format!(
            ", \"clean_slice_mb_s\": {clean:.1}, \"worst_slowdown\": {worst:.2}, \
             \"worst_dense_slowdown\": {worst_dense:.2}, \"pathological\": [{}]",
            rows.join(", ")
        ));
    }
    json.push('}');
    println!("{json}");
}
