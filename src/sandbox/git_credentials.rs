//! The credentials git's configuration files hold in plain text, left out of the copies a
//! child reads in their place: a token in a URL's user part (a remote cloned as
//! `https://oauth2:TOKEN@…`, a `url.<base>.insteadOf` rewrite that adds one), an
//! `http.extraHeader` (`AUTHORIZATION: bearer …`), and whatever else the sanitizer takes
//! for a secret. The rest stays as it was, line for line, so that git still reads the
//! user's name, the remotes and the rewrites.

use std::borrow::Cow;

/// What stands in a URL's user part, and for a header's value.
const REDACTED: &str = "REDACTED";

/// A user part this long is a token even without a `:` (`https://TOKEN@github.com/`);
/// a user name (`git@`, `alice@`) is shorter.
const MIN_TOKEN_USER_CHARS: usize = 16;

/// `text` without its credentials, or `None` where it holds none.
pub(super) fn redacted(text: &str) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let clean = line_redacted(line);
        changed |= clean != line;
        out.push_str(&clean);
    }
    changed.then_some(out)
}

fn line_redacted(line: &str) -> Cow<'_, str> {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    if let Some((key, _)) = body.split_once('=') {
        // A header git sends with every request: an authorization, as often as not.
        if key.trim().eq_ignore_ascii_case("extraheader") {
            let end = if line.ends_with('\n') { "\n" } else { "" };
            return Cow::Owned(format!("{indent}{} = {REDACTED}{end}", key.trim()));
        }
    }
    let urls = user_parts_redacted(line);
    match crate::sanitize::Sanitizer::global().sanitize(&urls) {
        Cow::Borrowed(_) => urls,
        Cow::Owned(s) => Cow::Owned(s),
    }
}

/// `line` with the user part of each URL that holds a password or a token replaced.
fn user_parts_redacted(line: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut rest = line;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| matches!(c, '/' | '"' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(user_end)
                if authority[..user_end].contains(':')
                    || authority[..user_end].chars().count() >= MIN_TOKEN_USER_CHARS =>
            {
                out.push_str(REDACTED);
                out.push_str(&authority[user_end..]);
                changed = true;
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    if !changed {
        return Cow::Borrowed(line);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_left_out_and_the_rest_stays() {
        let text = "[user]\n\tname = Alice\n\temail = alice@example.com\n\
                    [remote \"origin\"]\n\turl = https://oauth2:s3cret-value@gitlab.com/x.git\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                    [remote \"mirror\"]\n\turl = https://abcdefghijklmnopqrstuvwxyz0123@github.com/y.git\n\
                    [remote \"ssh\"]\n\turl = ssh://git@github.com/z.git\n\
                    [url \"https://x-access-token:tok-value@github.com/\"]\n\tinsteadOf = https://github.com/\n\
                    [http \"https://example.com/\"]\n\textraHeader = AUTHORIZATION: basic dXNlcjpwYXNz\n";
        let want = "[user]\n\tname = Alice\n\temail = alice@example.com\n\
                    [remote \"origin\"]\n\turl = https://REDACTED@gitlab.com/x.git\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                    [remote \"mirror\"]\n\turl = https://REDACTED@github.com/y.git\n\
                    [remote \"ssh\"]\n\turl = ssh://git@github.com/z.git\n\
                    [url \"https://REDACTED@github.com/\"]\n\tinsteadOf = https://github.com/\n\
                    [http \"https://example.com/\"]\n\textraHeader = REDACTED\n";
        assert_eq!(redacted(text).as_deref(), Some(want));
    }

    #[test]
    fn a_file_without_credentials_is_left_alone() {
        let text = "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@github.com:o/r.git\n";
        assert_eq!(redacted(text), None);
    }

    #[test]
    fn a_token_the_sanitizer_knows_is_left_out_anywhere() {
        let text = "[github]\n\ttoken = ghp_0123456789abcdefghijABCDEFGHIJ012345\n";
        let got = redacted(text).expect("redacted");
        assert!(!got.contains("ghp_0123456789abcdef"), "{got}");
        assert!(got.starts_with("[github]\n\ttoken = "), "{got}");
    }
}
