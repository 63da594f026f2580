//! The project's scripted mock LLM (`tests/mock_llm/`) as a program, for `scripts/demo` and
//! for trying a CLI against it by hand. It serves Anthropic Messages, OpenAI Chat
//! Completions and Responses, and Gemini on 127.0.0.1 (see `tests/mock_llm/mod.rs`); it is
//! no model: every answer comes from the script.
//!
//! ```text
//! mock_llm [--script NAME] [--url-file FILE] [--log FILE] [--seconds N]
//!          [--rate-limit N [--retry-after SECS]]
//! ```
//! - `--script`: `playground` (any number of runs: a listing tool call, then an answer
//!   quoting it; what `scripts/playground` uses), `demo`, `tool_then_text` (default),
//!   `text`, `401`, `overloaded`, `hang`, `http:STATUS:MESSAGE`; `--help` says what each
//!   does (`SCRIPTS` in `tests/mock_llm/program.rs`).
//! - `--url-file`: where to write its URL (`http://127.0.0.1:PORT`) once it listens.
//! - `--log`: every request as a JSON line.
//! - `--seconds`: stop after this long (default: run until stopped).
//! - `--rate-limit`: at most N requests a second; the others get 429 with `retry-after`
//!   and `retry-after-ms` (a provider's rate limit, for trying a CLI's retries): when the
//!   next request would be admitted, or `--retry-after` seconds.
//!
//! It prints its URL, then one line per request.

#[path = "../tests/mock_llm/mod.rs"]
mod mock_llm;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mock_llm::{Api, MockLlm};

fn help() -> String {
    let mut text = String::from(
        "A scripted mock LLM on 127.0.0.1 (not a model: every answer comes from a script). It\n\
         speaks Anthropic Messages, OpenAI Chat Completions and Responses, and Gemini, chosen\n\
         by the request's path.\n\n\
         Usage: mock_llm [--script NAME] [--url-file FILE] [--log FILE] [--seconds N]\n\
         \x20               [--rate-limit N [--retry-after SECS]]\n\n\
         Options:\n  \
         --script NAME    what it answers (default tool_then_text), one of the scripts below\n  \
         --url-file FILE  write its URL (http://127.0.0.1:PORT) there once it listens\n  \
         --log FILE       append every request there as a JSON line\n  \
         --seconds N      stop after N seconds (default: run until stopped)\n  \
         --rate-limit N   admit at most N requests a second; 429 with retry-after beyond\n  \
         --retry-after S  the retry-after those 429s ask for (default: when one would pass)\n\n\
         Scripts:\n",
    );
    let width = mock_llm::program::SCRIPTS
        .iter()
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0);
    for (name, what) in mock_llm::program::SCRIPTS {
        text.push_str(&format!("  {name:<width$}  {what}\n"));
    }
    text.push_str(
        "\nscripts/playground runs orchestrate against it with the installed agent CLIs.\n",
    );
    text
}

fn main() {
    let mut script = "tool_then_text".to_string();
    let mut url_file: Option<PathBuf> = None;
    let mut log: Option<PathBuf> = None;
    let mut seconds: Option<u64> = None;
    let mut rate_limit: Option<usize> = None;
    let mut retry_after: Option<Duration> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next().unwrap_or_else(|| {
                eprintln!("mock_llm: {flag} needs a value");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--script" => script = value(),
            "--url-file" => url_file = Some(value().into()),
            "--log" => log = Some(value().into()),
            "--seconds" => {
                seconds = Some(value().parse().unwrap_or_else(|e| {
                    eprintln!("mock_llm: --seconds: {e}");
                    std::process::exit(2)
                }))
            }
            "--rate-limit" => {
                rate_limit = Some(value().parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
                    eprintln!("mock_llm: --rate-limit takes a number of requests a second above 0");
                    std::process::exit(2)
                }))
            }
            "--retry-after" => {
                retry_after = Some(
                    value()
                        .parse()
                        .ok()
                        .and_then(|s: f64| Duration::try_from_secs_f64(s).ok())
                        .unwrap_or_else(|| {
                            eprintln!("mock_llm: --retry-after takes seconds, such as 2 or 0.5");
                            std::process::exit(2)
                        }),
                )
            }
            "-h" | "--help" => {
                print!("{}", help());
                return;
            }
            other => {
                eprintln!("mock_llm: unknown argument {other:?} (see --help)");
                std::process::exit(2)
            }
        }
    }
    let tool = ("bash", serde_json::json!({"command": "echo hi-from-tool"}));
    let script =
        mock_llm::program::script_named(&script, tool, Api::OpenAiChat).unwrap_or_else(|e| {
            eprintln!("mock_llm: {e}");
            std::process::exit(2)
        });
    let mock = MockLlm::start(script);
    if let Some(n) = rate_limit {
        mock.rate_limit_asking(n, retry_after);
    }
    println!("mock LLM at {}", mock.base_url());
    if let Some(path) = &url_file {
        // Whole or not at all: a reader polling for the file never sees half a URL.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, mock.base_url())
            .and_then(|()| std::fs::rename(&tmp, path))
            .unwrap_or_else(|e| {
                eprintln!("mock_llm: cannot write {}: {e}", path.display());
                std::process::exit(1)
            });
    }
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    mock_llm::program::report_requests(&mock, deadline, log.as_deref());
}
