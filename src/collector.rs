//! Folds normalized events into what a result needs: usage, turns, the final and partial
//! text, display items and the child's error. Memory stays bounded however long the run
//! and whatever the child prints: texts keep their head (see [`KeptText`]), display items
//! and their arguments are cut, errors and ids are cut.

use std::collections::VecDeque;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::events::{AgentEvent, Problem, TextKind};
use crate::limits::Budgets;
use crate::result::PermissionRecord;
use crate::result::{round_usd, DisplayItem, Limit, Usage};

/// Display items kept (the most recent ones); older ones are counted and dropped.
pub(crate) const MAX_DISPLAY_ITEMS: usize = 100;
/// Text of one display item is cut to this many bytes (on a UTF-8 boundary).
pub(crate) const MAX_DISPLAY_TEXT_BYTES: usize = 8 * 1024;
/// A string value inside a tool call's args is cut to this many bytes.
pub(crate) const MAX_DISPLAY_ARG_BYTES: usize = 1024;
/// Tool arguments whose JSON is longer than this are not built whole (a megabyte array of
/// small numbers would take thirty times its size as values): their top-level keys are
/// kept, each value only when it is this small or a string (which is cut anyway).
pub(crate) const MAX_ARGS_JSON_BYTES: usize = 64 * 1024;
/// Top-level keys of oversized tool arguments that are shown.
const MAX_ARG_KEYS: usize = 100;
/// Bytes kept of an answer text (its head; the rest is counted). No model writes a
/// megabyte in one answer; the session file has everything.
pub(crate) const DEFAULT_KEPT_TEXT_BYTES: usize = 1024 * 1024;
/// JSON strings longer than this are not unescaped whole (serde would hold the text twice
/// beside the line): dialects hand them over raw, and they are folded in piece by piece.
pub(crate) const LONG_TEXT_JSON_BYTES: usize = 256 * 1024;
/// The pieces a long JSON string is unescaped in.
const UNESCAPE_PIECE_BYTES: usize = 64 * 1024;
/// Bytes kept of the child's own error message.
const MAX_ERROR_BYTES: usize = 64 * 1024;
/// Bytes kept of the child's session id.
const MAX_SESSION_ID_BYTES: usize = 1024;
/// Bytes kept of the child's last retry notice.
const MAX_RETRY_WORDS_BYTES: usize = 2 * 1024;
/// Warnings the dialect raises that are kept for the result.
const MAX_WARNINGS: usize = 16;
/// Permission decisions kept for the result; a child asking more often is counted.
pub(crate) const MAX_PERMISSION_RECORDS: usize = 200;
/// A tool name or title in a permission record is cut to this many bytes.
const MAX_PERMISSION_TEXT_BYTES: usize = 256;
/// Tool calls tracked as in flight; past this the oldest are forgotten (a CLI that never
/// reports their ends cannot grow the list).
const MAX_TOOLS_IN_FLIGHT: usize = 64;

/// A field of the child's stream that could not be used as it was, and how often.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OddField {
    /// Where it is in the CLI's JSON (`usage.cost.total`).
    pub field: &'static str,
    /// What was wrong the first time.
    pub problem: Problem,
    pub times: u64,
}

/// The head of a text that may grow without bound: at most the collector's limit is kept,
/// cut on a character boundary; the whole is only counted (bytes and lines), so that a
/// truncation marker can still say how long it was.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeptText {
    head: String,
    total_bytes: u64,
    newlines: u64,
    ends_with_newline: bool,
    cut: bool,
}

impl KeptText {
    pub(crate) fn of(text: &str, limit: usize) -> KeptText {
        let mut k = KeptText::default();
        k.push(text, limit);
        k
    }

    pub(crate) fn push(&mut self, text: &str, limit: usize) {
        if text.is_empty() {
            return;
        }
        self.total_bytes += text.len() as u64;
        self.newlines += memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64;
        self.ends_with_newline = text.ends_with('\n');
        if self.cut {
            return;
        }
        let room = limit.saturating_sub(self.head.len());
        let kept = cut_utf8(text, room);
        self.head.push_str(kept);
        // Once a piece did not fit, nothing after it may be appended: the head stays a
        // prefix of the text.
        self.cut = kept.len() < text.len();
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.head
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total_bytes == 0
    }

    /// Whether only the head was kept.
    pub(crate) fn is_cut(&self) -> bool {
        self.cut
    }

    /// Bytes and lines (as `str::lines` counts them) of the whole text.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let partial_last_line = u64::from(self.total_bytes > 0 && !self.ends_with_newline);
        (self.total_bytes, self.newlines + partial_last_line)
    }

    fn clear(&mut self) {
        self.head.clear();
        self.total_bytes = 0;
        self.newlines = 0;
        self.ends_with_newline = false;
        self.cut = false;
    }
}

#[derive(Debug)]
pub(crate) struct Collector {
    usage: Usage,
    usage_total: Option<Usage>,
    turns: u64,
    /// Bytes kept of each text.
    text_limit: usize,
    /// Text of the last complete assistant message.
    final_text: Option<KeptText>,
    /// The most recent non-empty complete text when the last one was empty, kept for
    /// partial results.
    last_nonempty_text: Option<KeptText>,
    /// Text streamed since the current message began.
    partial_text: KeptText,
    /// Budgets checked whenever the child goes on to more work.
    budgets: Budgets,
    /// The budget reached, once one is, and whether it was a fan-out's total.
    limit: Option<Limit>,
    limit_is_total: bool,
    /// Progress events so far (see [`AgentEvent`]).
    progress: u64,
    /// Ids of the tool calls started and not finished, oldest first.
    tools_in_flight: VecDeque<Option<String>>,
    tools_ended: u64,
    /// The turn under way called a tool: it will go on to another turn.
    tools_in_turn: bool,
    /// Retry or reconnect notices so far, those since the last progress, and the last
    /// one's words.
    retries: u64,
    retries_since_progress: u32,
    last_retry: Option<String>,
    /// How long the child said it waits before its last retry.
    retry_delay: Option<std::time::Duration>,
    display_items: VecDeque<DisplayItem>,
    dropped_display_items: u64,
    /// Every tool call of the run, not only those still in `display_items`.
    tool_calls: u64,
    /// The last tool called, until text follows it.
    current_tool: Option<String>,
    provider_error: Option<String>,
    session_id: Option<String>,
    /// The child's permission requests and their answers (the first
    /// [`MAX_PERMISSION_RECORDS`]; the rest are counted).
    permissions: Vec<PermissionRecord>,
    dropped_permissions: u64,
    /// What the child's dialect found it could not honour (at most
    /// [`MAX_WARNINGS`]).
    warnings: Vec<String>,
    terminal: bool,
    skipped_lines: u64,
    /// Fields the child printed that could not be used, once per field and kind of
    /// problem (a finite set: the dialects name the fields).
    odd_fields: Vec<OddField>,
    /// A usage sum reached the largest value it can hold.
    usage_saturated: bool,
    /// The child reported a cost, and token counts, above zero.
    cost_reported: bool,
    tokens_reported: bool,
    /// Bumped whenever something a streaming view shows changed.
    revision: u64,
}

impl Default for Collector {
    fn default() -> Self {
        Collector::with_text_limit(DEFAULT_KEPT_TEXT_BYTES)
    }
}

impl Collector {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A collector keeping at most `text_limit` bytes of each text.
    pub(crate) fn with_text_limit(text_limit: usize) -> Self {
        Collector {
            usage: Usage::default(),
            usage_total: None,
            turns: 0,
            text_limit,
            final_text: None,
            last_nonempty_text: None,
            partial_text: KeptText::default(),
            budgets: Budgets::default(),
            limit: None,
            limit_is_total: false,
            progress: 0,
            tools_in_flight: VecDeque::new(),
            tools_ended: 0,
            tools_in_turn: false,
            retries: 0,
            retries_since_progress: 0,
            last_retry: None,
            retry_delay: None,
            display_items: VecDeque::new(),
            dropped_display_items: 0,
            tool_calls: 0,
            current_tool: None,
            provider_error: None,
            session_id: None,
            permissions: Vec::new(),
            dropped_permissions: 0,
            warnings: Vec::new(),
            terminal: false,
            skipped_lines: 0,
            odd_fields: Vec::new(),
            usage_saturated: false,
            cost_reported: false,
            tokens_reported: false,
            revision: 0,
        }
    }

    /// Checks `budgets` whenever the child goes on to more work (see [`Collector::apply`]).
    pub(crate) fn with_budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Folds in one event, and returns whether it shows the child going on to more work:
    /// a turn that called tools ended (another will follow), or anything of a new turn
    /// arrived. Budgets are checked there, so a run's final turn, which ends it, is never
    /// cut short.
    pub(crate) fn apply(&mut self, event: AgentEvent<'_>) -> bool {
        if self.limit.is_some() {
            // The run is what it was when the budget was reached: whatever the child
            // still prints while it is being stopped (a CLI finishing the request it had
            // already sent) is not part of it.
            match event {
                AgentEvent::Terminal => self.terminal = true,
                AgentEvent::SessionId(id) => {
                    self.session_id = Some(cut_utf8(&id, MAX_SESSION_ID_BYTES).to_string())
                }
                _ => {}
            }
            return false;
        }
        let progress = is_progress(&event);
        let goes_on = match &event {
            AgentEvent::TurnEnd => self.tools_in_turn,
            AgentEvent::MessageStart
            | AgentEvent::TextDelta(_)
            | AgentEvent::AssistantMessage(_)
            | AgentEvent::LongText {
                kind: TextKind::Delta | TextKind::Message,
                ..
            }
            | AgentEvent::StreamedMessageEnd
            | AgentEvent::ToolCall { .. }
            | AgentEvent::ToolStart { .. }
            | AgentEvent::Working => true,
            // The CLI stopped itself at its budget: check what it reported against ours.
            AgentEvent::CostBudgetReached => true,
            _ => false,
        };
        self.fold(event);
        if progress {
            self.progress += 1;
            self.retries_since_progress = 0;
        }
        if goes_on && self.limit.is_none() && !self.terminal && !self.budgets.is_empty() {
            self.limit = self.budgets.reached(&self.usage());
            if self.limit.is_some() {
                self.revision += 1;
            }
        }
        goes_on
    }

    fn fold(&mut self, event: AgentEvent<'_>) {
        match event {
            AgentEvent::MessageStart => {
                self.partial_text.clear();
                // The model answers again: the tools it called have finished.
                self.tools_in_flight.clear();
            }
            AgentEvent::TextDelta(t) => {
                self.partial_text.push(&t, self.text_limit);
                self.revision += 1;
            }
            AgentEvent::AssistantMessage(text) => {
                self.partial_text.clear();
                let kept = KeptText::of(&text, self.text_limit);
                self.complete_message(kept, true);
            }
            AgentEvent::StreamedMessageEnd => {
                let kept = std::mem::take(&mut self.partial_text);
                self.complete_message(kept, true);
            }
            AgentEvent::FinalText(text) => {
                let kept = KeptText::of(&text, self.text_limit);
                self.complete_message(kept, false);
            }
            AgentEvent::LongText {
                parts,
                separator,
                kind,
            } => {
                let limit = self.text_limit;
                let mut whole = KeptText::default();
                let target = match kind {
                    TextKind::Delta => &mut self.partial_text,
                    TextKind::Message | TextKind::Final => &mut whole,
                };
                for (i, raw) in parts.iter().enumerate() {
                    if i > 0 {
                        target.push(separator, limit);
                    }
                    unescape_in_pieces(raw.get(), &mut |piece| target.push(piece, limit));
                }
                match kind {
                    TextKind::Delta => self.revision += 1,
                    TextKind::Message => {
                        self.partial_text.clear();
                        self.complete_message(whole, true);
                    }
                    TextKind::Final => self.complete_message(whole, false),
                }
            }
            AgentEvent::ToolCall { name, mut args } => {
                self.tools_in_turn = true;
                cut_long_strings(&mut args, MAX_DISPLAY_ARG_BYTES);
                self.tool_calls += 1;
                self.current_tool = Some(name.to_string());
                self.push_display(DisplayItem::ToolCall {
                    name: name.into_owned(),
                    args,
                });
                self.revision += 1;
            }
            AgentEvent::ToolStart { id } => {
                if self.tools_in_flight.len() == MAX_TOOLS_IN_FLIGHT {
                    self.tools_in_flight.pop_front();
                }
                let id = id.map(|id| cut_utf8(&id, MAX_SESSION_ID_BYTES).to_string());
                self.tools_in_flight.push_back(id);
            }
            AgentEvent::ToolEnd { id } => {
                self.tools_ended += 1;
                // Without an id the oldest ends; an id that was never started ends nothing.
                let at = match id {
                    Some(id) => self
                        .tools_in_flight
                        .iter()
                        .position(|t| t.as_deref() == Some(&id)),
                    None => (!self.tools_in_flight.is_empty()).then_some(0),
                };
                if let Some(at) = at {
                    self.tools_in_flight.remove(at);
                }
            }
            AgentEvent::Working | AgentEvent::CostBudgetReached => {}
            AgentEvent::RetryDelay(delay) => self.retry_delay = Some(delay),
            AgentEvent::Retry(words) => {
                self.retries += 1;
                self.retries_since_progress = self.retries_since_progress.saturating_add(1);
                self.last_retry = Some(cut_utf8(&words, MAX_RETRY_WORDS_BYTES).to_string());
            }
            AgentEvent::Usage(u) => {
                self.note_reported(&u);
                self.usage_saturated |= self.usage.add(&u);
                self.revision += 1;
            }
            AgentEvent::UsageTotal(u) => {
                self.note_reported(&u);
                self.usage_total = Some(u);
            }
            AgentEvent::TurnEnd => {
                self.turns += 1;
                self.tools_in_turn = false;
                self.revision += 1;
            }
            AgentEvent::ProviderError(e) => {
                self.provider_error = Some(cut_utf8(&e, MAX_ERROR_BYTES).to_string())
            }
            AgentEvent::Recovered => self.provider_error = None,
            AgentEvent::SessionId(id) => {
                self.session_id = Some(cut_utf8(&id, MAX_SESSION_ID_BYTES).to_string())
            }
            AgentEvent::Terminal => self.terminal = true,
            AgentEvent::Warning(w) => {
                if self.warnings.len() < MAX_WARNINGS && !self.warnings.iter().any(|k| *k == w) {
                    self.warnings
                        .push(cut_utf8(&w, MAX_ERROR_BYTES.min(4096)).to_string());
                }
            }
            AgentEvent::Permission(mut record) => {
                if self.permissions.len() < MAX_PERMISSION_RECORDS {
                    record.tool = cut_utf8(&record.tool, MAX_PERMISSION_TEXT_BYTES).to_string();
                    record.title = record
                        .title
                        .map(|t| cut_utf8(&t, MAX_PERMISSION_TEXT_BYTES).to_string());
                    self.permissions.push(record);
                } else {
                    self.dropped_permissions += 1;
                }
            }
            AgentEvent::OddField { field, problem } => {
                // Once per field and kind of problem: a count ignored and one counted as
                // the largest are two different things to say.
                let kind = std::mem::discriminant(&problem);
                match self
                    .odd_fields
                    .iter_mut()
                    .find(|o| o.field == field && std::mem::discriminant(&o.problem) == kind)
                {
                    Some(seen) => seen.times += 1,
                    None => self.odd_fields.push(OddField {
                        field,
                        problem,
                        times: 1,
                    }),
                }
            }
        }
    }

    fn note_reported(&mut self, u: &Usage) {
        self.cost_reported |= u.cost > 0.0;
        self.tokens_reported |= u.tokens() > 0;
    }

    /// A complete message's text becomes the final text (shown as a display item unless
    /// it is the CLI's restatement of the answer). The last non-empty text is moved aside,
    /// never copied, for a run whose last message is empty.
    fn complete_message(&mut self, kept: KeptText, shown: bool) {
        if shown && !kept.is_empty() {
            self.current_tool = None;
            self.push_display(DisplayItem::Text {
                text: cut_utf8(kept.as_str(), MAX_DISPLAY_TEXT_BYTES).to_string(),
            });
        }
        if kept.is_empty() {
            if let Some(previous) = self.final_text.take().filter(|t| !t.is_empty()) {
                self.last_nonempty_text = Some(previous);
            }
        } else {
            self.last_nonempty_text = None;
        }
        self.final_text = Some(kept);
        self.revision += 1;
    }

    pub(crate) fn note_skipped_line(&mut self) {
        self.skipped_lines += 1;
    }

    fn push_display(&mut self, item: DisplayItem) {
        if self.display_items.len() == MAX_DISPLAY_ITEMS {
            self.display_items.pop_front();
            self.dropped_display_items += 1;
        }
        self.display_items.push_back(item);
    }

    /// Usage summed over the run, with `turns` filled in.
    pub(crate) fn usage(&self) -> Usage {
        let mut u = self.usage_total.unwrap_or(self.usage);
        if u.turns == 0 {
            u.turns = self.turns;
        }
        u.cost = round_usd(u.cost);
        u
    }

    /// Fields the child printed that could not be used, in the order first seen.
    pub(crate) fn odd_fields(&self) -> &[OddField] {
        &self.odd_fields
    }

    /// Whether a usage sum reached the largest value it can hold and stayed there.
    pub(crate) fn usage_saturated(&self) -> bool {
        self.usage_saturated
    }

    /// Whether the child reported any cost above zero, and any tokens.
    pub(crate) fn reported(&self) -> (bool, bool) {
        (self.cost_reported, self.tokens_reported)
    }

    pub(crate) fn terminal_seen(&self) -> bool {
        self.terminal
    }

    /// The budget the child reached, if it did.
    pub(crate) fn limit(&self) -> Option<Limit> {
        self.limit
    }

    /// Records a budget reached outside this run (a fan-out's total), unless one was.
    pub(crate) fn note_limit(&mut self, limit: Limit) {
        if self.limit.is_none() {
            self.limit = Some(limit);
            self.limit_is_total = true;
            self.revision += 1;
        }
    }

    /// Whether the budget reached was a fan-out's total rather than this run's own.
    pub(crate) fn limit_is_total(&self) -> bool {
        self.limit_is_total
    }

    /// Progress events so far.
    pub(crate) fn progress(&self) -> u64 {
        self.progress
    }

    pub(crate) fn tools_in_flight(&self) -> usize {
        self.tools_in_flight.len()
    }

    pub(crate) fn tools_ended(&self) -> u64 {
        self.tools_ended
    }

    /// Retry or reconnect notices so far.
    pub(crate) fn retries(&self) -> u64 {
        self.retries
    }

    /// Retry or reconnect notices since the last progress.
    pub(crate) fn retries_since_progress(&self) -> u32 {
        self.retries_since_progress
    }

    /// The child's words in its last retry or reconnect notice.
    pub(crate) fn last_retry(&self) -> Option<&str> {
        self.last_retry.as_deref()
    }

    /// How long the child said it waits before its last retry, where it said.
    pub(crate) fn retry_delay(&self) -> Option<std::time::Duration> {
        self.retry_delay
    }

    pub(crate) fn provider_error(&self) -> Option<&str> {
        self.provider_error.as_deref()
    }

    /// The permission requests answered (the first [`MAX_PERMISSION_RECORDS`]), and how
    /// many more there were.
    pub(crate) fn permissions(&self) -> (&[PermissionRecord], u64) {
        (&self.permissions, self.dropped_permissions)
    }

    /// What the child could not honour, found as it ran.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub(crate) fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    pub(crate) fn skipped_lines(&self) -> u64 {
        self.skipped_lines
    }

    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    pub(crate) fn tool_calls(&self) -> u64 {
        self.tool_calls
    }

    /// The tool the child called last, while no text has come after it.
    pub(crate) fn current_tool(&self) -> Option<&str> {
        self.current_tool.as_deref()
    }

    /// Whether [`Collector::latest_text`] is a message still being written (its tail may
    /// be cut mid-word).
    pub(crate) fn text_is_streaming(&self) -> bool {
        !self.partial_text.is_empty()
    }

    pub(crate) fn display_items(&self) -> Vec<DisplayItem> {
        self.display_items.iter().cloned().collect()
    }

    /// The final text of a run that completed: the last complete assistant message.
    pub(crate) fn final_text(&self) -> Option<&str> {
        self.final_text.as_ref().map(KeptText::as_str)
    }

    /// The final text with its whole length.
    pub(crate) fn final_kept(&self) -> Option<&KeptText> {
        self.final_text.as_ref()
    }

    /// The best text to return from a run that did not complete: text still streaming,
    /// else the last complete message, else the last non-empty one.
    pub(crate) fn partial_kept(&self) -> Option<&KeptText> {
        if !self.partial_text.is_empty() {
            return Some(&self.partial_text);
        }
        match &self.final_text {
            Some(t) if !t.is_empty() => Some(t),
            _ => self.last_nonempty_text.as_ref(),
        }
    }

    pub(crate) fn partial_text(&self) -> &str {
        self.partial_kept().map_or("", KeptText::as_str)
    }

    /// The text a streaming view shows: what is being written now, or the last message.
    pub(crate) fn latest_text(&self) -> &str {
        self.partial_text()
    }
}

/// Whether an event is progress: the model or a tool produced something. Empty messages,
/// zero usage, turn ends, errors, retries and the CLI's bookkeeping are not.
fn is_progress(event: &AgentEvent<'_>) -> bool {
    match event {
        AgentEvent::TextDelta(t) | AgentEvent::AssistantMessage(t) | AgentEvent::FinalText(t) => {
            !t.is_empty()
        }
        AgentEvent::LongText { .. }
        | AgentEvent::StreamedMessageEnd
        | AgentEvent::ToolCall { .. }
        | AgentEvent::ToolStart { .. }
        | AgentEvent::ToolEnd { .. }
        | AgentEvent::Working => true,
        AgentEvent::Usage(u) | AgentEvent::UsageTotal(u) => *u != Usage::default(),
        AgentEvent::MessageStart
        | AgentEvent::TurnEnd
        | AgentEvent::ProviderError(_)
        | AgentEvent::Retry(_)
        | AgentEvent::RetryDelay(_)
        | AgentEvent::CostBudgetReached
        | AgentEvent::Recovered
        | AgentEvent::SessionId(_)
        | AgentEvent::Permission(_)
        | AgentEvent::Warning(_)
        | AgentEvent::OddField { .. }
        | AgentEvent::Terminal => false,
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub(crate) fn cut_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The text of a JSON string (`json`, with its quotes), unescaped and handed to `f` in
/// pieces of about [`UNESCAPE_PIECE_BYTES`], never split inside an escape (a surrogate pair
/// included) or a character. Something that is not a JSON string gives nothing.
pub(crate) fn unescape_in_pieces(json: &str, f: &mut dyn FnMut(&str)) {
    let Some(inner) = json.strip_prefix('"').and_then(|s| s.strip_suffix('"')) else {
        return;
    };
    let bytes = inner.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        // Walk escapes whole up to the piece's end; the last position reached is safe.
        let mut i = start;
        let end = (start + UNESCAPE_PIECE_BYTES).min(bytes.len());
        while i < end {
            i += match bytes[i] {
                b'\\' if bytes.get(i + 1) == Some(&b'u') => {
                    let pair = bytes
                        .get(i + 2)
                        .is_some_and(|b| b.eq_ignore_ascii_case(&b'd'))
                        && matches!(
                            bytes.get(i + 3),
                            Some(b'8'..=b'9' | b'a'..=b'b' | b'A'..=b'B')
                        )
                        && bytes.get(i + 6) == Some(&b'\\');
                    if pair {
                        12
                    } else {
                        6
                    }
                }
                b'\\' => 2,
                _ => 1,
            };
        }
        let mut cut = i.min(bytes.len());
        while !inner.is_char_boundary(cut) {
            cut += 1;
        }
        let piece = format!("\"{}\"", &inner[start..cut]);
        if let Ok(text) = serde_json::from_str::<std::borrow::Cow<'_, str>>(&piece) {
            f(&text);
        }
        start = cut;
    }
}

/// A JSON string's text whole, or `LongText` material when it is too long for that.
pub(crate) fn is_long_text(raw: &RawValue) -> bool {
    raw.get().len() > LONG_TEXT_JSON_BYTES
}

/// A tool call's arguments as a display item shows them, built without ever holding more
/// than about [`MAX_ARGS_JSON_BYTES`] of values: small arguments whole; larger ones as
/// their first [`MAX_ARG_KEYS`] top-level keys, each value whole when small, cut when a
/// string, and otherwise said to be too long.
pub(crate) fn display_args(raw: Option<&RawValue>) -> Value {
    let Some(raw) = raw else {
        return Value::Null;
    };
    let text = raw.get();
    if text.len() <= MAX_ARGS_JSON_BYTES {
        // What serde_json cannot build (a number past f64, nesting past its limit) is
        // shown as the text it is, rather than lost.
        return serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
    }
    let too_long = |json: &str| Value::String(format!("[{} bytes of JSON not shown]", json.len()));
    let Ok(fields) = serde_json::from_str::<
        std::collections::BTreeMap<std::borrow::Cow<'_, str>, &RawValue>,
    >(text) else {
        return too_long(text);
    };
    let mut shown = serde_json::Map::new();
    for (key, value) in fields.iter().take(MAX_ARG_KEYS) {
        let json = value.get();
        let v = if json.len() <= MAX_ARGS_JSON_BYTES / MAX_ARG_KEYS.min(fields.len()) {
            serde_json::from_str(json).unwrap_or(Value::Null)
        } else if json.starts_with('"') {
            serde_json::from_str::<std::borrow::Cow<'_, str>>(json)
                .map_or(Value::Null, |s| Value::String(s.into_owned()))
        } else {
            too_long(json)
        };
        shown.insert(key.to_string(), v);
    }
    if fields.len() > MAX_ARG_KEYS {
        shown.insert(
            "…".to_string(),
            Value::String(format!("{} more keys", fields.len() - MAX_ARG_KEYS)),
        );
    }
    Value::Object(shown)
}

fn cut_long_strings(v: &mut serde_json::Value, max: usize) {
    match v {
        serde_json::Value::String(s) if s.len() > max => {
            let kept = cut_utf8(s, max).len();
            let dropped = s.len() - kept;
            s.truncate(kept);
            s.push_str(&format!("… [{dropped} bytes cut]"));
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| cut_long_strings(x, max)),
        serde_json::Value::Object(o) => o.values_mut().for_each(|x| cut_long_strings(x, max)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use std::borrow::Cow;

    fn usage(input: u64, output: u64, cost: f64) -> Usage {
        Usage {
            input,
            output,
            cost,
            ..Usage::default()
        }
    }

    #[test]
    fn sums_usage_and_keeps_the_last_message_as_final_text() {
        let mut c = Collector::new();
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("looking")));
        c.apply(AgentEvent::ToolCall {
            name: Cow::Borrowed("read"),
            args: json!({"path": "a.rs"}),
        });
        c.apply(AgentEvent::Usage(usage(10, 2, 0.5)));
        c.apply(AgentEvent::TurnEnd);
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("done")));
        c.apply(AgentEvent::Usage(usage(20, 3, 0.25)));
        c.apply(AgentEvent::TurnEnd);
        assert_eq!(
            c.usage(),
            Usage {
                input: 30,
                output: 5,
                cost: 0.75,
                turns: 2,
                ..Usage::default()
            }
        );
        assert_eq!(c.final_text(), Some("done"));
        assert_eq!(
            c.display_items(),
            vec![
                DisplayItem::Text {
                    text: "looking".into()
                },
                DisplayItem::ToolCall {
                    name: "read".into(),
                    args: json!({"path": "a.rs"})
                },
                DisplayItem::Text {
                    text: "done".into()
                },
            ]
        );
    }

    #[test]
    fn partial_text_prefers_what_is_streaming() {
        let mut c = Collector::new();
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("first")));
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("")));
        assert_eq!(c.partial_text(), "first");
        c.apply(AgentEvent::MessageStart);
        c.apply(AgentEvent::TextDelta(Cow::Borrowed("stre")));
        c.apply(AgentEvent::TextDelta(Cow::Borrowed("aming")));
        assert_eq!(c.partial_text(), "streaming");
    }

    #[test]
    fn a_later_success_clears_a_provider_error() {
        let mut c = Collector::new();
        c.apply(AgentEvent::ProviderError(Cow::Borrowed("429 rate limited")));
        assert_eq!(c.provider_error(), Some("429 rate limited"));
        c.apply(AgentEvent::Recovered);
        assert_eq!(c.provider_error(), None);
    }

    #[test]
    fn display_items_and_their_sizes_are_bounded() {
        let mut c = Collector::new();
        for i in 0..(MAX_DISPLAY_ITEMS + 5) {
            c.apply(AgentEvent::AssistantMessage(Cow::Owned(format!("m{i}"))));
        }
        let items = c.display_items();
        assert_eq!(items.len(), MAX_DISPLAY_ITEMS);
        assert_eq!(items[0], DisplayItem::Text { text: "m5".into() });
        c.apply(AgentEvent::ToolCall {
            name: Cow::Borrowed("write"),
            args: json!({"content": "é".repeat(MAX_DISPLAY_ARG_BYTES)}),
        });
        let Some(DisplayItem::ToolCall { args, .. }) = c.display_items().pop() else {
            panic!("expected a tool call");
        };
        let content = args["content"].as_str().unwrap();
        assert!(content.ends_with(&format!("… [{} bytes cut]", MAX_DISPLAY_ARG_BYTES)));
        assert!(content.len() < MAX_DISPLAY_ARG_BYTES + 40);
    }

    #[test]
    fn streamed_text_keeps_its_head_and_counts_the_rest() {
        let mut c = Collector::with_text_limit(10);
        c.apply(AgentEvent::MessageStart);
        for _ in 0..1000 {
            c.apply(AgentEvent::TextDelta(Cow::Borrowed("abcé\n")));
        }
        // 10 bytes fit "abcé\nabc"; the next "é" would be split, and nothing after it may
        // be appended.
        assert_eq!(c.partial_text(), "abcé\nabc");
        let kept = c.partial_kept().unwrap();
        assert!(kept.is_cut());
        assert_eq!(kept.totals(), (6000, 1000));
        c.apply(AgentEvent::StreamedMessageEnd);
        assert_eq!(c.final_text(), Some("abcé\nabc"));
        assert_eq!(c.final_kept().unwrap().totals(), (6000, 1000));
        assert_eq!(
            c.display_items(),
            vec![DisplayItem::Text {
                text: "abcé\nabc".into()
            }]
        );
    }

    #[test]
    fn a_complete_message_keeps_its_head_and_an_empty_one_keeps_the_last_text() {
        let mut c = Collector::with_text_limit(4);
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("one two")));
        assert_eq!(c.final_text(), Some("one "));
        assert_eq!(c.final_kept().unwrap().totals(), (7, 1));
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("")));
        assert_eq!(c.final_text(), Some(""));
        assert_eq!(c.partial_text(), "one ");
    }

    #[test]
    fn huge_tool_arguments_are_shown_by_their_keys_without_being_built() {
        let items = vec!["1"; MAX_ARGS_JSON_BYTES].join(",");
        let text = "x".repeat(MAX_ARGS_JSON_BYTES);
        let json = format!(r#"{{"path":"a.rs","content":"{text}","items":[{items}]}}"#);
        let raw: Box<RawValue> = serde_json::from_str(&json).unwrap();
        let mut c = Collector::new();
        c.apply(AgentEvent::ToolCall {
            name: Cow::Borrowed("write"),
            args: display_args(Some(&raw)),
        });
        assert_eq!(
            c.display_items(),
            vec![DisplayItem::ToolCall {
                name: "write".into(),
                args: json!({
                    "path": "a.rs",
                    "content": format!("{}… [{} bytes cut]", "x".repeat(MAX_DISPLAY_ARG_BYTES), MAX_ARGS_JSON_BYTES - MAX_DISPLAY_ARG_BYTES),
                    "items": format!("[{} bytes of JSON not shown]", items.len() + 2),
                })
            }]
        );
        // Small arguments are shown whole; an array that is too long says so.
        let small: Box<RawValue> = serde_json::from_str(r#"{"a":[1,2]}"#).unwrap();
        assert_eq!(display_args(Some(&small)), json!({"a": [1, 2]}));
        let array: Box<RawValue> = serde_json::from_str(&format!("[{items}]")).unwrap();
        assert_eq!(
            display_args(Some(&array)),
            json!(format!("[{} bytes of JSON not shown]", items.len() + 2))
        );
        assert_eq!(display_args(None), Value::Null);
    }

    /// One pi-style turn: its text, its tool calls (if any), its usage, its end.
    fn turn(c: &mut Collector, text: &str, tools: bool, cost: f64) {
        c.apply(AgentEvent::MessageStart);
        c.apply(AgentEvent::AssistantMessage(Cow::Owned(text.to_string())));
        if tools {
            c.apply(AgentEvent::ToolCall {
                name: Cow::Borrowed("read"),
                args: json!({}),
            });
        }
        c.apply(AgentEvent::Usage(usage(100, 10, cost)));
        c.apply(AgentEvent::TurnEnd);
    }

    #[test]
    fn a_turn_budget_is_reached_when_the_child_goes_on_past_it() {
        let budgets = Budgets {
            max_turns: Some(2),
            ..Budgets::default()
        };
        let mut c = Collector::new().with_budgets(budgets);
        turn(&mut c, "one", true, 0.0);
        assert_eq!(c.limit(), None);
        // Turn 2 called a tool: a third turn would follow.
        turn(&mut c, "two", true, 0.0);
        assert_eq!(c.limit(), Some(Limit::Turns { limit: 2, used: 2 }));
        assert_eq!(c.partial_text(), "two");

        // A final answer in the last allowed turn ends the run within its budget.
        let mut c = Collector::new().with_budgets(budgets);
        turn(&mut c, "one", true, 0.0);
        turn(&mut c, "answer", false, 0.0);
        c.apply(AgentEvent::Terminal);
        assert_eq!(c.limit(), None);

        // Unless the child goes on anyway (a retry after a failed turn).
        let mut c = Collector::new().with_budgets(budgets);
        turn(&mut c, "one", true, 0.0);
        turn(&mut c, "", false, 0.0);
        c.apply(AgentEvent::MessageStart);
        assert_eq!(c.limit(), Some(Limit::Turns { limit: 2, used: 2 }));
    }

    #[test]
    fn the_run_is_what_it_was_when_the_budget_was_reached() {
        let mut c = Collector::new().with_budgets(Budgets {
            max_turns: Some(1),
            ..Budgets::default()
        });
        turn(&mut c, "one", true, 0.1);
        assert_eq!(c.limit(), Some(Limit::Turns { limit: 1, used: 1 }));
        // The child answers its next request while it is being stopped.
        turn(&mut c, "two", true, 0.1);
        c.apply(AgentEvent::ProviderError(Cow::Borrowed("aborted")));
        c.apply(AgentEvent::Terminal);
        assert_eq!(
            (
                c.partial_text(),
                c.usage().turns,
                c.usage().cost,
                c.provider_error()
            ),
            ("one", 1, 0.1, None)
        );
        assert_eq!(c.display_items().len(), 2);
        assert!(c.terminal_seen());
    }

    #[test]
    fn a_cost_budget_is_reached_by_the_turn_that_passes_it_and_goes_on() {
        let mut c = Collector::new().with_budgets(Budgets {
            max_cost: Some(0.5),
            ..Budgets::default()
        });
        for n in 1..=2 {
            turn(&mut c, &format!("turn {n}"), true, 0.2);
            assert_eq!(c.limit(), None, "after turn {n}");
        }
        turn(&mut c, "turn 3", true, 0.2);
        assert_eq!(
            c.limit(),
            Some(Limit::Cost {
                limit: 0.5,
                used: 0.6
            })
        );
        // The first budget reached stays the reason.
        turn(&mut c, "turn 4", true, 0.2);
        assert_eq!(
            c.limit(),
            Some(Limit::Cost {
                limit: 0.5,
                used: 0.6
            })
        );
    }

    #[test]
    fn a_cli_stopping_at_its_own_cost_budget_reports_ours() {
        let mut c = Collector::new().with_budgets(Budgets {
            max_cost: Some(0.5),
            ..Budgets::default()
        });
        turn(&mut c, "one", true, 0.0);
        c.apply(AgentEvent::UsageTotal(Usage {
            cost: 0.52,
            turns: 2,
            ..Usage::default()
        }));
        c.apply(AgentEvent::CostBudgetReached);
        c.apply(AgentEvent::Terminal);
        assert_eq!(
            c.limit(),
            Some(Limit::Cost {
                limit: 0.5,
                used: 0.52
            })
        );
    }

    #[test]
    fn progress_tools_in_flight_and_retries_are_tracked() {
        let mut c = Collector::new();
        c.apply(AgentEvent::SessionId(Cow::Borrowed("s")));
        c.apply(AgentEvent::MessageStart);
        c.apply(AgentEvent::AssistantMessage(Cow::Borrowed("")));
        c.apply(AgentEvent::Usage(Usage::default()));
        assert_eq!(
            c.progress(),
            0,
            "bookkeeping, empty text and zero usage are not"
        );
        c.apply(AgentEvent::Retry(Cow::Borrowed("retry 1/3: 503")));
        c.apply(AgentEvent::Retry(Cow::Borrowed("retry 2/3: 503")));
        assert_eq!((c.retries(), c.retries_since_progress()), (2, 2));
        assert_eq!(c.last_retry(), Some("retry 2/3: 503"));
        c.apply(AgentEvent::ToolStart {
            id: Some(Cow::Borrowed("a")),
        });
        c.apply(AgentEvent::ToolStart {
            id: Some(Cow::Borrowed("b")),
        });
        assert_eq!((c.progress(), c.retries_since_progress()), (2, 0));
        c.apply(AgentEvent::ToolEnd {
            id: Some(Cow::Borrowed("never started")),
        });
        assert_eq!(c.tools_in_flight(), 2);
        c.apply(AgentEvent::ToolEnd {
            id: Some(Cow::Borrowed("b")),
        });
        assert_eq!((c.tools_in_flight(), c.tools_ended()), (1, 2));
        // The model answering again means its tools are done.
        c.apply(AgentEvent::MessageStart);
        assert_eq!(c.tools_in_flight(), 0);
    }

    #[test]
    fn a_long_json_string_is_unescaped_in_pieces_that_make_the_whole() {
        // Escapes of every length, a surrogate pair and multi-byte characters, around the
        // piece boundaries.
        let unit = "ab\\n\\\"é🦀\\u00e9\\ud83e\\udd80\\\\";
        let json = format!("\"{}\"", unit.repeat(UNESCAPE_PIECE_BYTES / 10));
        let whole: String = serde_json::from_str(&json).unwrap();
        let mut pieces = Vec::new();
        unescape_in_pieces(&json, &mut |p| pieces.push(p.to_string()));
        assert!(pieces.len() > 1, "{} pieces", pieces.len());
        assert_eq!(pieces.concat(), whole);
        let mut none = 0;
        unescape_in_pieces("[1]", &mut |_| none += 1);
        assert_eq!(none, 0);
    }

    #[test]
    fn a_long_text_is_folded_in_as_a_delta_or_a_message() {
        let long = format!("\"{}\"", "line\\n".repeat(LONG_TEXT_JSON_BYTES / 6));
        let raw: Box<RawValue> = serde_json::from_str(&long).unwrap();
        let mut c = Collector::with_text_limit(10);
        c.apply(AgentEvent::LongText {
            parts: vec![&raw],
            separator: "",
            kind: TextKind::Delta,
        });
        assert_eq!(c.partial_text(), "line\nline\n");
        let lines = (LONG_TEXT_JSON_BYTES / 6) as u64;
        assert_eq!(c.partial_kept().unwrap().totals(), (lines * 5, lines));
        let small: Box<RawValue> = serde_json::from_str("\"tail\"").unwrap();
        c.apply(AgentEvent::LongText {
            parts: vec![&small, &raw],
            separator: "\n",
            kind: TextKind::Message,
        });
        assert_eq!(c.final_text(), Some("tail\nline\n"));
        assert_eq!(
            c.final_kept().unwrap().totals(),
            (4 + 1 + lines * 5, lines + 1)
        );
        assert_eq!(c.partial_text(), "tail\nline\n");
        assert_eq!(c.display_items().len(), 1);
    }

    #[test]
    fn cut_utf8_never_splits_a_char() {
        assert_eq!(cut_utf8("aé", 2), "a");
        assert_eq!(cut_utf8("aé", 3), "aé");
        assert_eq!(cut_utf8("🦀🦀", 5), "🦀");
    }
}
