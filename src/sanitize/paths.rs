//! Home directories become `~`: they name the user, and a parent agent gains nothing from
//! the name.

use std::borrow::Cow;
use std::ops::Range;

use memchr::memmem;
use regex::Captures;

use super::gated::GatedRegex;

/// What may stand right before a home path: the start of the text, a byte that cannot be
/// part of a longer path component (so `/srv/home/x` is not a home), or a JSON escape,
/// whose trailing letter would otherwise read as part of a path. `~` and `]` are excluded
/// too, so that neither a mapped home nor a mask (`…[REDACTED]/home/x`, where a secret ran
/// into the path) makes a path a home on a second pass.
const LEAD: &str = r"(?P<lead>^|[^A-Za-z0-9._~\]-]|\\[nrt])";

/// A user name; a final `.` is left out so that a sentence can end right after a path.
const USER: &str = r"(?P<user>[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?)";

/// Folders under the home roots that belong to no user; mapping them to `~` would mislead.
const NOT_USERS: &[&str] = &[
    "Shared",
    "Public",
    "Default",
    "Default User",
    "All Users",
    "linuxbrew",
];

/// A Windows user name with spaces (`John Smith`): only inside a quoted path, where the
/// quote before the drive and the separator or quote after the name bound it; unquoted,
/// `C:\Users\John Smith` could as well be the user `John` and a word of prose.
const SPACED_USER: &str =
    r#"(?P<user>[A-Za-z0-9_-][A-Za-z0-9._-]{0,31}(?: [A-Za-z0-9._-]{1,32}){1,3})(?:\\|/|"|')"#;

#[derive(Debug)]
pub(crate) struct HomeDirs {
    unix: GatedRegex,
    windows_spaced: GatedRegex,
    windows: GatedRegex,
    /// The user's own home when it is not under one of the roots above (`/root`,
    /// `/var/lib/jenkins`), with its JSON-escaped spelling when it has backslashes.
    own: Vec<memmem::Finder<'static>>,
}

impl HomeDirs {
    pub(super) fn new(home: Option<&str>) -> HomeDirs {
        let mut dirs = HomeDirs {
            unix: GatedRegex::new(
                "unix home",
                &["/home/", "/Users/"],
                &format!("{LEAD}/(?:home|Users)/{USER}"),
            ),
            windows_spaced: GatedRegex::new(
                "windows home with spaces",
                &["sers\\", "SERS\\", "sers/", "SERS/"],
                &format!(
                    r#"(?P<lead>"|'|\\")[A-Za-z]:(?:\\\\|\\|/)(?i-u:users)(?:\\\\|\\|/){SPACED_USER}"#
                ),
            ),
            // `\\\\` first: in JSON-escaped text the separator is two backslashes.
            windows: GatedRegex::new(
                "windows home",
                &["sers\\", "SERS\\", "sers/", "SERS/"],
                &format!(r"{LEAD}[A-Za-z]:(?:\\\\|\\|/)(?i-u:users)(?:\\\\|\\|/){USER}"),
            ),
            own: Vec::new(),
        };
        if let Some(home) = home.map(|h| h.trim_end_matches(['/', '\\'])) {
            let absolute = home.starts_with('/')
                || (home.len() > 3
                    && home.as_bytes()[1] == b':'
                    && home.as_bytes()[0].is_ascii_alphabetic());
            // A home under the roots above is already mapped by them.
            if absolute && home.len() >= 2 && dirs.apply(home) != "~" {
                dirs.own
                    .push(memmem::Finder::new(home.as_bytes()).into_owned());
                if home.contains('\\') {
                    let escaped = home.replace('\\', "\\\\");
                    dirs.own
                        .push(memmem::Finder::new(escaped.as_bytes()).into_owned());
                }
            }
        }
        dirs
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for finder in &self.own {
            if let Some(s) = replace_own(&out, finder) {
                out = Cow::Owned(s);
            }
        }
        // Windows first: `C:/Users/x` would otherwise read as `C:` and the macOS `/Users/x`.
        for regex in [&self.windows_spaced, &self.windows, &self.unix] {
            if let Cow::Owned(s) = regex.replace(&out, "~", home_range) {
                out = Cow::Owned(s);
            }
        }
        out
    }
}

/// The home directory in a match: all of it but the leading byte that bounds it.
fn home_range(caps: &Captures, _line_end: usize) -> Option<Range<usize>> {
    let user = caps.name("user")?;
    if NOT_USERS
        .iter()
        .any(|u| u.eq_ignore_ascii_case(user.as_str()))
    {
        return None;
    }
    Some(caps.name("lead")?.end()..user.end())
}

fn is_component_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-')
}

/// Replaces whole-component occurrences of the user's own home; `None` when there are none.
fn replace_own(text: &str, home: &memmem::Finder) -> Option<String> {
    let b = text.as_bytes();
    let len = home.needle().len();
    let mut out = String::new();
    let mut copied = 0;
    for pos in home.find_iter(b) {
        if pos < copied {
            continue;
        }
        let before_ok = pos == 0
            || !(is_component_byte(b[pos - 1]) || matches!(b[pos - 1], b'.' | b'~' | b']'))
            || (pos >= 2 && b[pos - 2] == b'\\' && matches!(b[pos - 1], b'n' | b'r' | b't'));
        let end = pos + len;
        let after_ok = match b.get(end) {
            None => true,
            Some(b'.') => !b.get(end + 1).copied().is_some_and(is_component_byte),
            Some(&c) => !is_component_byte(c),
        };
        if before_ok && after_ok {
            super::reserve_copy(&mut out, text.len());
            out.push_str(&text[copied..pos]);
            out.push('~');
            copied = end;
        }
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn run(home: Option<&str>, input: &str) -> String {
        HomeDirs::new(home).apply(input).into_owned()
    }

    #[test]
    fn linux_and_macos_homes() {
        let cases = [
            ("/home/alice", "~"),
            ("cd /home/alice/src/app && ls", "cd ~/src/app && ls"),
            ("see /Users/bob.smith.", "see ~."),
            ("(/home/alice)", "(~)"),
            ("PATH=/home/a/bin:/home/b/bin", "PATH=~/bin:~/bin"),
            ("\"/Users/bob/x.rs\",", "\"~/x.rs\","),
            ("file:///home/alice/x", "file://~/x"),
            ("\\n/home/alice/x", "\\n~/x"),
            ("/home/alice:12:3", "~:12:3"),
        ];
        for (input, expected) in cases {
            assert_eq!(run(None, input), expected, "input: {input}");
        }
    }

    #[test]
    fn non_homes_are_untouched() {
        let input = "/home and /home/ and /homework/x and /srv/home/alice and /Users/Shared/x \
                     and /home/<user> and https://x.io/api/users/42 and ~/x";
        assert_eq!(run(None, input), input);
    }

    #[test]
    fn windows_homes() {
        let cases = [
            (r"C:\Users\alice\proj\a.rs", r"~\proj\a.rs"),
            (
                r#"{"cwd":"C:\\Users\\alice\\proj"}"#,
                r#"{"cwd":"~\\proj"}"#,
            ),
            ("d:/users/bob/x", "~/x"),
            ("C:/Users/bob/x", "~/x"),
            (r"at C:\Users\alice.", "at ~."),
        ];
        for (input, expected) in cases {
            assert_eq!(run(None, input), expected, "input: {input}");
        }
    }

    #[test]
    fn windows_user_names_with_spaces_in_quoted_paths() {
        let cases = [
            (
                r#"open "C:\Users\John Smith\Documents\a.txt""#,
                r#"open "~\Documents\a.txt""#,
            ),
            (
                r#"{"cwd":"C:\\Users\\Ana Maria Lopez\\src"}"#,
                r#"{"cwd":"~\\src"}"#,
            ),
            ("'C:/Users/John Smith'", "'~'"),
            (
                r#"{\"path\":\"C:\\Users\\John Smith\\x\"}"#,
                r#"{\"path\":\"~\\x\"}"#,
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(run(None, input), expected, "input: {input}");
        }
        // Unquoted, only the first word can be told to be the name.
        assert_eq!(run(None, r"cd C:\Users\John Smith\x"), r"cd ~ Smith\x");
    }

    #[test]
    fn windows_non_homes_are_untouched() {
        let input = r"C:\Users\Public\x C:\Program Files\x C:\Users\ X:\usersettings";
        assert_eq!(run(None, input), input);
    }

    #[test]
    fn own_home_outside_the_usual_roots() {
        assert_eq!(
            run(
                Some("/root"),
                "/root/.cargo/bin:/root;cat /root. /rootfs/x /srv/root"
            ),
            "~/.cargo/bin:~;cat ~. /rootfs/x /srv/root"
        );
        assert_eq!(
            run(Some("/var/lib/jenkins/"), "at /var/lib/jenkins/ws/x.go:3"),
            "at ~/ws/x.go:3"
        );
        assert_eq!(
            run(
                Some(r"D:\profiles\carol"),
                r#"D:\profiles\carol\x "D:\\profiles\\carol\\y""#
            ),
            r#"~\x "~\\y""#
        );
    }

    #[test]
    fn useless_homes_are_ignored() {
        let input = "/ and /x and relative/x";
        for home in ["/", "", "relative", "/x"] {
            let expected = if home == "/x" {
                "/ and ~ and relative/x"
            } else {
                input
            };
            assert_eq!(run(Some(home), input), expected, "home: {home}");
        }
    }
}
