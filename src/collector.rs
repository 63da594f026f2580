//! Folds normalized events into what a result needs: usage, turns, the final and partial
//! text, display items and the child's error. Memory stays bounded however long the run.

use std::collections::VecDeque;

use crate::events::AgentEvent;
use crate::result::{DisplayItem, Usage};

/// Display items kept (the most recent ones); older ones are counted and dropped.
pub(crate) const MAX_DISPLAY_ITEMS: usize = 100;
/// Text of one display item is cut to this many bytes (on a UTF-8 boundary).
pub(crate) const MAX_DISPLAY_TEXT_BYTES: usize = 8 * 1024;
/// A string value inside a tool call's args is cut to this many bytes.
pub(crate) const MAX_DISPLAY_ARG_BYTES: usize = 1024;

#[derive(Debug, Default)]
pub(crate) struct Collector {
    usage: Usage,
    usage_total: Option<Usage>,
    turns: u64,
    /// Text of the last complete assistant message.
    final_text: Option<String>,
    /// The most recent non-empty complete text, kept for partial results.
    last_nonempty_text: Option<String>,
    /// Text streamed since the current message began.
    partial_text: String,
    display_items: VecDeque<DisplayItem>,
    dropped_display_items: u64,
    /// Every tool call of the run, not only those still in `display_items`.
    tool_calls: u64,
    /// The last tool called, until text follows it.
    current_tool: Option<String>,
    provider_error: Option<String>,
    session_id: Option<String>,
    terminal: bool,
    skipped_lines: u64,
    /// Bumped whenever something a streaming view shows changed.
    revision: u64,
}

impl Collector {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn apply(&mut self, event: AgentEvent<'_>) {
        match event {
            AgentEvent::MessageStart => self.partial_text.clear(),
            AgentEvent::TextDelta(t) => {
                self.partial_text.push_str(&t);
                self.revision += 1;
            }
            AgentEvent::AssistantMessage(text) => {
                self.partial_text.clear();
                if !text.is_empty() {
                    self.current_tool = None;
                    self.push_display(DisplayItem::Text {
                        text: cut_utf8(&text, MAX_DISPLAY_TEXT_BYTES).to_string(),
                    });
                    self.last_nonempty_text = Some(text.to_string());
                }
                self.final_text = Some(text.into_owned());
                self.revision += 1;
            }
            AgentEvent::FinalText(text) => {
                if !text.is_empty() {
                    self.last_nonempty_text = Some(text.to_string());
                }
                self.final_text = Some(text.into_owned());
                self.revision += 1;
            }
            AgentEvent::ToolCall { name, mut args } => {
                cut_long_strings(&mut args, MAX_DISPLAY_ARG_BYTES);
                self.tool_calls += 1;
                self.current_tool = Some(name.to_string());
                self.push_display(DisplayItem::ToolCall {
                    name: name.into_owned(),
                    args,
                });
                self.revision += 1;
            }
            AgentEvent::Usage(u) => {
                self.usage.add(&u);
                self.revision += 1;
            }
            AgentEvent::UsageTotal(u) => self.usage_total = Some(u),
            AgentEvent::TurnEnd => {
                self.turns += 1;
                self.revision += 1;
            }
            AgentEvent::ProviderError(e) => self.provider_error = Some(e.into_owned()),
            AgentEvent::Recovered => self.provider_error = None,
            AgentEvent::SessionId(id) => self.session_id = Some(id.into_owned()),
            AgentEvent::Terminal => self.terminal = true,
        }
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
        // Sums of per-request costs drift in the last bits (0.0005 + 0.0007 =
        // 0.0012000000000000001); a ten-billionth of a dollar is far below any price.
        u.cost = (u.cost * 1e10).round() / 1e10;
        u
    }

    pub(crate) fn terminal_seen(&self) -> bool {
        self.terminal
    }

    pub(crate) fn provider_error(&self) -> Option<&str> {
        self.provider_error.as_deref()
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
        self.final_text.as_deref()
    }

    /// The best text to return from a run that did not complete: text still streaming,
    /// else the last complete message, else the last non-empty one.
    pub(crate) fn partial_text(&self) -> &str {
        if !self.partial_text.is_empty() {
            return &self.partial_text;
        }
        match self.final_text.as_deref() {
            Some(t) if !t.is_empty() => t,
            _ => self.last_nonempty_text.as_deref().unwrap_or(""),
        }
    }

    /// The text a streaming view shows: what is being written now, or the last message.
    pub(crate) fn latest_text(&self) -> &str {
        self.partial_text()
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
    fn cut_utf8_never_splits_a_char() {
        assert_eq!(cut_utf8("aé", 2), "a");
        assert_eq!(cut_utf8("aé", 3), "aé");
        assert_eq!(cut_utf8("🦀🦀", 5), "🦀");
    }
}
