//! Any bytes, as lossy UTF-8, through the sanitizer: it must not panic, must be idempotent,
//! and must return text it leaves alone borrowed and unchanged. The dictionary
//! `sanitize.dict` holds the prefixes, keywords and escapes that reach the rules.

#![no_main]

use std::borrow::Cow;
use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use orchestrate::sanitize::Sanitizer;

static SANITIZER: LazyLock<Sanitizer> = LazyLock::new(|| Sanitizer::new(Some("/root")));

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let once = SANITIZER.sanitize(&text);
    if let Cow::Borrowed(same) = &once {
        assert_eq!(*same, &*text, "borrowed output differs from the input");
    }
    let twice = SANITIZER.sanitize(&once);
    assert_eq!(twice, once, "sanitizing is not idempotent on {text:?}");
});
