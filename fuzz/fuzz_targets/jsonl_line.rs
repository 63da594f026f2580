//! Any bytes, as lossy UTF-8 lines, through every dialect's line parser into a collector,
//! then everything a result reads from the collector: nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    orchestrate::fuzzing::every_dialect(&String::from_utf8_lossy(data));
});
