//! Any bytes, as lossy UTF-8 lines, through the pi dialect's line parser into a collector,
//! then everything a result reads from the collector: nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use orchestrate::backends::DialectKind;
use orchestrate::collector::Collector;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parser = DialectKind::Pi.parser();
    let mut collector = Collector::new();
    for line in text.split('\n') {
        if !parser.parse_line(line, &mut |e| collector.apply(e)) {
            collector.note_skipped_line();
        }
    }
    let _ = collector.usage();
    let _ = collector.display_items();
    let _ = collector.final_text();
    let _ = collector.partial_text();
    let _ = collector.latest_text();
    let _ = collector.provider_error();
    let _ = collector.session_id();
    let _ = collector.terminal_seen();
});
