//! PLACEHOLDER until the truncate module lands.
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
pub const DEFAULT_MAX_LINES: usize = 2000;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncateLimits {
    pub max_bytes: usize,
    pub max_lines: usize,
}
impl Default for TruncateLimits {
    fn default() -> Self {
        TruncateLimits {
            max_bytes: DEFAULT_MAX_BYTES,
            max_lines: DEFAULT_MAX_LINES,
        }
    }
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    pub shown_lines: usize,
    pub total_lines: usize,
    pub shown_bytes: usize,
    pub total_bytes: usize,
}
impl Truncation {
    pub fn error_message(&self) -> String {
        format!(
            "Output truncated: showing {} of {} lines",
            self.shown_lines, self.total_lines
        )
    }
}
pub fn truncate_head(
    text: &str,
    _limits: TruncateLimits,
    _session_file: &str,
) -> (String, Option<Truncation>) {
    (text.to_string(), None)
}
