//! Retries of transient provider failures (rate limits, overload, 5xx, a reset or refused
//! connection; never after a timeout, a cap, a budget or a cancel): which failures are
//! worth another attempt, and how long to wait before it.

use std::time::Duration;

use crate::backends::Backend;
pub(crate) use crate::events::Transient;

/// The wait before the second attempt; it doubles for each one after.
pub(crate) const BACKOFF_BASE: Duration = Duration::from_secs(1);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Classifies a failed attempt from the child's error message and exit code. Failures that
/// a retry cannot fix (bad key, bad request, a crash of the CLI itself) are `None`.
pub(crate) fn classify(backend: Backend, error: &str, exit_code: i32) -> Option<Transient> {
    let e = Words::of(error);
    if e.status(&["401", "403"])
        || e.any(&[
            "invalid api key",
            "invalid x-api-key",
            "incorrect api key",
            "authentication",
            "unauthorized",
            "permission denied",
            "not found on path",
        ])
    {
        return None;
    }
    if e.status(&["429"]) || e.any(&["rate limit", "rate_limit", "ratelimit", "too many requests"])
    {
        return Some(Transient::RateLimited);
    }
    if e.status(&["529"]) || e.any(&["overloaded"]) {
        return Some(Transient::Overloaded);
    }
    if e.status(&["500", "502", "503", "504"])
        || e.any(&[
            "internal server error",
            "bad gateway",
            "service unavailable",
            "gateway timeout",
            "server_error",
            "api_error_status\":5",
        ])
    {
        return Some(Transient::ServerError);
    }
    if e.any(&[
        "econnreset",
        "econnrefused",
        "connection reset",
        "connection refused",
        "socket hang up",
        "fetch failed",
        "network error",
        "stream disconnected",
        "broken pipe",
        "etimedout",
    ]) {
        return Some(Transient::Connection);
    }
    (backend.spec().transient_exit)(exit_code)
}

/// An error message as the classifiers read it: lower case, with its URLs blanked, since
/// a port or a path in them (codex's errors end with the request's URL) is not a status.
struct Words(String);

impl Words {
    fn of(error: &str) -> Self {
        static URL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
            regex::Regex::new(r"(?i)\b[a-z][a-z0-9+.-]*://\S*").expect("a valid pattern")
        });
        Words(
            URL.replace_all(&error.to_ascii_lowercase(), " ")
                .into_owned(),
        )
    }

    fn any(&self, words: &[&str]) -> bool {
        words.iter().any(|w| self.0.contains(w))
    }

    /// Whether one of `codes` stands as a number of its own, not as digits of a longer one.
    fn status(&self, codes: &[&str]) -> bool {
        let bytes = self.0.as_bytes();
        codes.iter().any(|code| {
            self.0.match_indices(code).any(|(at, _)| {
                let before = at.checked_sub(1).map(|i| bytes[i]);
                let after = bytes.get(at + code.len()).copied();
                !before.is_some_and(|b| b.is_ascii_digit())
                    && !after.is_some_and(|b| b.is_ascii_digit())
            })
        })
    }
}

/// Whether a CLI's retry notice says its provider pushed back (a rate limit or an
/// overload), which a fan-out's scheduler answers by running fewer children at once.
pub(crate) fn congestion(backend: Backend, words: &str) -> bool {
    matches!(
        classify(backend, words, 0),
        Some(Transient::RateLimited | Transient::Overloaded)
    )
}

/// The delay a provider's error asks for, where its words say one: `retry after 7s`,
/// `try again in 1.5s`, `Please retry in 20.3s`, `"retryDelay": "7s"`, `retry-after: 7`.
pub(crate) fn asked_delay(error: &str) -> Option<Duration> {
    static ASKED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?i)(?:retry[ -]after|try again in|retry in|retrydelay"?\s*:\s*"?)[:\s]*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?)?\b"#,
        )
        .expect("a valid pattern")
    });
    let caps = ASKED.captures(error)?;
    let n: f64 = caps[1].parse().ok()?;
    let secs = match caps.get(2).map(|m| m.as_str().to_ascii_lowercase()) {
        Some(unit) if unit.starts_with("ms") || unit.starts_with("milli") => n / 1000.0,
        _ => n,
    };
    Duration::try_from_secs_f64(secs).ok()
}

impl Transient {
    /// The reason as the run's events name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Transient::RateLimited => "rateLimited",
            Transient::Overloaded => "overloaded",
            Transient::ServerError => "serverError",
            Transient::Connection => "connection",
        }
    }
}

/// Why a model cannot serve a run, so that another model may: what a fallback model is
/// for. Unlike a transient failure, a quota or an unknown model does not pass by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unavailable {
    RateLimited,
    Overloaded,
    Quota,
    ModelNotFound,
}

impl Unavailable {
    /// The reason as the run's events name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Unavailable::RateLimited => "rateLimited",
            Unavailable::Overloaded => "overloaded",
            Unavailable::Quota => "quota",
            Unavailable::ModelNotFound => "modelNotFound",
        }
    }
}

/// Whether a failed attempt says its model is unavailable (see [`Unavailable`]).
pub(crate) fn unavailable(backend: Backend, error: &str, exit_code: i32) -> Option<Unavailable> {
    let e = Words::of(error);
    if e.any(&[
        "insufficient_quota",
        "exceeded your current quota",
        "quota exceeded",
        "quota_exceeded",
        "resource_exhausted",
        "credit balance",
        "billing",
    ]) {
        return Some(Unavailable::Quota);
    }
    if e.any(&["model"])
        && e.any(&[
            "not found",
            "not_found",
            "does not exist",
            "unknown model",
            "no such model",
            "invalid model",
            "unsupported model",
            "model is not supported",
            "not available",
        ])
    {
        return Some(Unavailable::ModelNotFound);
    }
    match classify(backend, error, exit_code) {
        Some(Transient::RateLimited) => Some(Unavailable::RateLimited),
        Some(Transient::Overloaded) => Some(Unavailable::Overloaded),
        _ => None,
    }
}

/// How many times a fan-out task whose provider refused it for load (a rate limit, an
/// overload) in a lane that narrows (adaptive concurrency) is tried again without using up one of its attempts. Such a refusal says
/// that the fleet asked too fast, which the scheduler answers by narrowing the lane, not
/// that the task failed; bounded, so that a provider that never recovers still ends it.
pub(crate) const LANE_THROTTLES_FORGIVEN: u32 = 3;

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// The attempt is the result.
    Stop,
    /// Another attempt, which uses up one of the task's.
    Retry,
    /// Another attempt, which does not (see [`LANE_THROTTLES_FORGIVEN`]).
    RetryForgiven,
}

/// How many attempts a task has had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tries {
    /// Those that count against `--attempts` (the first included).
    pub counted: u32,
    /// The fan-out's throttles tried again without counting.
    pub forgiven: u32,
}

impl Tries {
    pub(crate) const FIRST: Tries = Tries {
        counted: 1,
        forgiven: 0,
    };

    /// What follows an attempt that failed with `failure` (`None`: not worth another),
    /// where `lane_throttle` says its provider refused a fan-out's task for load (not for
    /// a spent quota). `--attempts 1` turns every retry off, a throttle's too.
    pub(crate) fn next(self, failure: Option<Transient>, lane_throttle: bool, max: u32) -> Next {
        match failure {
            None => Next::Stop,
            Some(_) if max <= 1 => Next::Stop,
            Some(_) if lane_throttle && self.forgiven < LANE_THROTTLES_FORGIVEN => {
                Next::RetryForgiven
            }
            Some(_) if self.counted < max => Next::Retry,
            Some(_) => Next::Stop,
        }
    }

    /// All the attempts so far, for the growing backoff.
    pub(crate) fn all(self) -> u32 {
        self.counted + self.forgiven
    }
}

/// The wait after failed attempt `attempt` (1-based): exponential, capped, with ±25%
/// jitter so that parallel runs hitting the same limit do not retry in step.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF_BASE
        .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(16))
        .min(BACKOFF_MAX);
    let unit = (uuid::Uuid::new_v4().as_u128() % 1000) as f64 / 1000.0; // [0, 1)
    base.mul_f64(0.75 + unit * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fan_outs_throttles_are_retried_without_counting_up_to_a_bound() {
        use Next::*;
        let rl = Some(Transient::RateLimited);
        let tries = |counted, forgiven| Tries { counted, forgiven };
        let cases = [
            // (failure, in a lane, tries so far, --attempts) => next
            ((None, true, tries(1, 0), 2), Stop),
            ((rl, false, tries(1, 0), 2), Retry),
            ((rl, false, tries(2, 0), 2), Stop),
            ((rl, true, tries(1, 0), 2), RetryForgiven),
            (
                (rl, true, tries(1, LANE_THROTTLES_FORGIVEN - 1), 2),
                RetryForgiven,
            ),
            ((rl, true, tries(1, LANE_THROTTLES_FORGIVEN), 2), Retry),
            ((rl, true, tries(2, LANE_THROTTLES_FORGIVEN), 2), Stop),
            ((rl, true, tries(1, 0), 1), Stop),
            ((Some(Transient::ServerError), false, tries(1, 0), 3), Retry),
        ];
        let got: Vec<_> = cases
            .iter()
            .map(|&((f, lane, t, max), _)| ((f, lane, t, max), t.next(f, lane, max)))
            .collect();
        let want: Vec<_> = cases.iter().map(|&(k, n)| (k, n)).collect();
        assert_eq!(got, want);
        assert_eq!(tries(2, 3).all(), 5);
    }

    #[test]
    fn transient_failures_are_recognized() {
        let cases = [
            (
                "pi reported an error: 429 Rate limit reached for requests",
                Some(Transient::RateLimited),
            ),
            (
                "claude reported an error: API Error: 529 {\"type\":\"overloaded_error\"}",
                Some(Transient::Overloaded),
            ),
            (
                "pi reported an error: 503: {\"error\":{\"message\":\"server is overloaded\"}}",
                Some(Transient::Overloaded),
            ),
            (
                "codex reported an error: unexpected status 502 Bad Gateway",
                Some(Transient::ServerError),
            ),
            (
                "opencode exited with code 1: Error: read ECONNRESET",
                Some(Transient::Connection),
            ),
            ("pi reported an error: 401 Incorrect API key provided", None),
            (
                "claude reported an error: API Error: 400 invalid request",
                None,
            ),
            ("pi exited with code 3: fatal: config broken", None),
        ];
        for (message, want) in cases {
            assert_eq!(
                classify(Backend::named("pi"), message, 1),
                want,
                "{message}"
            );
        }
        assert_eq!(
            classify(Backend::named("gemini"), "gemini exited with code 173", 173),
            Some(Transient::RateLimited)
        );
        assert_eq!(
            classify(Backend::named("pi"), "pi exited with code 173", 173),
            None
        );
    }

    /// A status code is a number of its own: the digits of a port or an id in the message
    /// (codex's errors end with the request's URL) say nothing. CI saw an overloaded model
    /// on port 40387 read as a 403 and never fall back.
    #[test]
    fn digits_inside_a_url_or_a_longer_number_are_not_a_status_code() {
        let cases = [
            (
                "codex reported an error: unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., url: http://127.0.0.1:40387/v1/responses",
                Some(Transient::Overloaded),
            ),
            (
                "codex reported an error: unexpected status 400 Bad Request, url: http://127.0.0.1:42913/v1/responses",
                None,
            ),
            (
                "codex reported an error: unexpected status 400 Bad Request, url: http://127.0.0.1:429/v1/responses",
                None,
            ),
            (
                "pi reported an error: request req_5291 failed: connection refused",
                Some(Transient::Connection),
            ),
            ("pi reported an error: 400 invalid request id 15020", None),
            ("pi reported an error: status 401 at http://127.0.0.1:5029/", None),
            ("claude reported an error: API Error: 429", Some(Transient::RateLimited)),
            ("pi reported an error: (500)", Some(Transient::ServerError)),
        ];
        for (message, want) in cases {
            assert_eq!(
                classify(Backend::named("pi"), message, 1),
                want,
                "{message}"
            );
        }
        assert_eq!(
            unavailable(
                Backend::named("codex"),
                "codex reported an error: unexpected status 503 Service Unavailable: The server is overloaded or not ready yet., url: http://127.0.0.1:40387/v1/responses",
                1
            ),
            Some(Unavailable::Overloaded)
        );
    }

    #[test]
    fn unavailable_models_are_recognized_and_other_failures_are_not() {
        let cases = [
            (
                "claude reported an error: API Error: 529 {\"type\":\"overloaded_error\"}",
                Some(Unavailable::Overloaded),
            ),
            (
                "pi reported an error: 429 Rate limit reached",
                Some(Unavailable::RateLimited),
            ),
            (
                "codex reported an error: You exceeded your current quota, please check your plan",
                Some(Unavailable::Quota),
            ),
            (
                "claude reported an error: API Error: 404 {\"type\":\"not_found_error\",\"message\":\"model: claude-9\"}",
                Some(Unavailable::ModelNotFound),
            ),
            (
                "pi reported an error: 404 The model `gpt-9` does not exist or you do not have access to it.",
                Some(Unavailable::ModelNotFound),
            ),
            ("pi reported an error: 401 Incorrect API key provided", None),
            ("codex reported an error: unexpected status 502 Bad Gateway", None),
            ("opencode exited with code 1: Error: read ECONNRESET", None),
            ("pi exited with code 3: ENOENT: file not found", None),
        ];
        for (message, want) in cases {
            assert_eq!(
                unavailable(Backend::named("pi"), message, 1),
                want,
                "{message}"
            );
        }
    }

    #[test]
    fn congestion_is_a_rate_limit_or_an_overload() {
        let cases = [
            ("retry 1/3: 429: {\"code\":\"rate_limit_exceeded\"}", true),
            ("API retry 1/4: rate_limit (HTTP 429)", true),
            (
                "Reconnecting... 1/4 (exceeded retry limit, last status: 429 Too Many Requests)",
                true,
            ),
            (
                "Attempt 1 failed with status 429. Retrying with backoff...",
                true,
            ),
            ("API retry 2/10: overloaded (HTTP 529)", true),
            (
                "Reconnecting... 2/5 (stream disconnected before completion)",
                false,
            ),
            ("retry 1/3: 500 internal server error", false),
        ];
        for (words, want) in cases {
            assert_eq!(congestion(Backend::named("pi"), words), want, "{words}");
        }
    }

    #[test]
    fn a_delay_the_provider_asked_for_is_read_from_its_words() {
        let cases = [
            ("429 Too Many Requests; retry after 7s", Some(7.0)),
            ("Rate limit reached. Please try again in 1.5s.", Some(1.5)),
            ("Please try again in 250ms", Some(0.25)),
            (
                "RESOURCE_EXHAUSTED ... \"retryDelay\": \"20s\" ...",
                Some(20.0),
            ),
            ("retry-after: 3", Some(3.0)),
            ("Please retry in 20.321508s.", Some(20.321508)),
            ("429 Too Many Requests", None),
            ("retry 2/3: 429", None),
        ];
        for (error, want) in cases {
            assert_eq!(asked_delay(error).map(|d| d.as_secs_f64()), want, "{error}");
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        for _ in 0..50 {
            let first = backoff(1);
            assert!(
                first >= Duration::from_millis(750) && first <= Duration::from_millis(1250),
                "{first:?}"
            );
            let third = backoff(3);
            assert!(
                third >= Duration::from_secs(3) && third <= Duration::from_secs(5),
                "{third:?}"
            );
            assert!(backoff(40) <= BACKOFF_MAX.mul_f64(1.25));
        }
    }
}
