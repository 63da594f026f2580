//! A CLI's login refreshed during a sandboxed run.
//!
//! The child's CLI reads its login (an OAuth token file) through the private layer over
//! its home, so what it writes there is thrown away after the run. A CLI that refreshes
//! its token mid-run writes the new one there; where the provider rotates refresh tokens
//! (each refresh invalidates the one before), throwing it away would log the user out.
//!
//! So, at the child's exit, the platform copies the private layer's version of each
//! login file into a memory file ([`Logins::copies`]); once the child's tree is gone,
//! orchestrate writes a copy back over the user's file only when it is a token refresh
//! of the file as it was when the run started: the same JSON, but for the values of
//! token fields (names with `token`, `access`, `refresh` or `expir` in them), and the
//! user's file unchanged meanwhile. Anything else the child wrote there (another
//! account's structure, a new provider entry, a setting) is dropped with a warning in the
//! log: the login file is the one file outside its writable places that a child can
//! change, and only as a refresh would.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::platform::LoginCopies;

const LOGIN_COPY_MAX_BYTES: u64 = LoginCopies::MAX_BYTES;
const COPY_HEADER_BYTES: usize = LoginCopies::HEADER_BYTES;

struct Login {
    path: PathBuf,
    /// The file when the run started.
    before: Vec<u8>,
}

/// The login files of a run's CLI, as they were when it started, and the memory file the
/// platform copies the child's versions into.
pub(crate) struct Logins {
    files: Vec<Login>,
    copies: Arc<OwnedFd>,
}

impl std::fmt::Debug for Logins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logins")
            .field(
                "files",
                &self.files.iter().map(|l| &l.path).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Logins {
    /// `files` (login files that exist, in the private layer's folders), read now. None
    /// when there are none.
    pub(super) fn new(files: Vec<PathBuf>) -> io::Result<Option<Logins>> {
        let mut logins = Vec::new();
        for path in files {
            let mut before = Vec::new();
            let read = File::open(&path).and_then(|f| {
                f.take(LOGIN_COPY_MAX_BYTES + 1)
                    .read_to_end(&mut before)
                    .map(|_| ())
            });
            if read.is_ok() && before.len() as u64 <= LOGIN_COPY_MAX_BYTES {
                logins.push(Login { path, before });
            }
        }
        if logins.is_empty() {
            return Ok(None);
        }
        // SAFETY: a C string; the new descriptor is ours.
        let fd = unsafe { libc::memfd_create(c"orchestrate-logins".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(Logins {
            files: logins,
            // SAFETY: a new descriptor, now ours.
            copies: Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }),
        }))
    }

    /// The files, in the order the copies are indexed by.
    pub(super) fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|l| l.path.clone()).collect()
    }

    /// The memory file the platform writes the copies into.
    pub(super) fn copies(&self) -> Arc<OwnedFd> {
        self.copies.clone()
    }

    /// The copies the platform wrote: `(index, bytes)`.
    fn read_copies(&self) -> Vec<(usize, Vec<u8>)> {
        let file = File::from(match self.copies.try_clone() {
            Ok(fd) => fd,
            Err(_) => return Vec::new(),
        });
        let mut out = Vec::new();
        let mut at = 0u64;
        loop {
            let mut header = [0u8; COPY_HEADER_BYTES];
            if file.read_exact_at(&mut header, at).is_err() {
                break;
            }
            let index = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
            let len = u64::from_le_bytes(header[4..].try_into().expect("8 bytes"));
            if len > LOGIN_COPY_MAX_BYTES {
                break;
            }
            let mut bytes = vec![0u8; len as usize];
            if file
                .read_exact_at(&mut bytes, at + COPY_HEADER_BYTES as u64)
                .is_err()
            {
                break;
            }
            at += COPY_HEADER_BYTES as u64 + len;
            out.push((index, bytes));
        }
        out
    }

    /// Writes back each copy that is a token refresh of its file (see the module's notes).
    fn write_back(&self) {
        for (index, copy) in self.read_copies() {
            let Some(login) = self.files.get(index) else {
                continue;
            };
            if copy == login.before {
                continue;
            }
            let now = std::fs::read(&login.path).ok();
            if now.as_deref() != Some(&login.before[..]) {
                tracing::warn!(
                    "{} changed outside the run meanwhile; the child's refreshed login is not written over it",
                    login.path.display()
                );
                continue;
            }
            if !is_token_refresh(&login.before, &copy) {
                tracing::warn!(
                    "the child changed {} beyond a token refresh; the change is not kept",
                    login.path.display()
                );
                continue;
            }
            if let Err(e) = replace_file(&login.path, &copy) {
                tracing::warn!(
                    "could not write the refreshed login back to {}: {e}",
                    login.path.display()
                );
            }
        }
    }
}

impl Drop for Logins {
    /// Dropped once the child's tree is gone.
    fn drop(&mut self) {
        self.write_back();
    }
}

/// Whether a field of this name may change in a token refresh. Not an address (where the
/// tokens are sent or refreshed), whatever else its name says.
fn token_field(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["token", "access", "refresh", "expir"]
        .iter()
        .any(|w| n.contains(w))
        && ![
            "url", "uri", "endpoint", "host", "issuer", "server", "domain", "base",
        ]
        .iter()
        .any(|w| n.contains(w))
}

/// Whether `after` may stand for `before` as a token's value: no address, and a token
/// that says whose it is (a JWT) still the same account's.
fn token_value(before: Option<&Value>, after: Option<&Value>) -> bool {
    match after {
        Some(Value::String(new)) => {
            !new.contains("://")
                && match (
                    before.and_then(Value::as_str).and_then(jwt_claims),
                    jwt_claims(new),
                ) {
                    (Some(old), Some(new)) => ["sub", "email"]
                        .iter()
                        .all(|&c| old.get(c).is_none() || old.get(c) == new.get(c)),
                    // A JWT's claims come or go with the token's kind: not a refresh.
                    (Some(_), None) | (None, Some(_)) => false,
                    (None, None) => true,
                }
        }
        _ => true,
    }
}

/// The claims of a JWT (`header.claims.signature`, base64url), if `token` is one.
fn jwt_claims(token: &str) -> Option<serde_json::Map<String, Value>> {
    use base64::Engine;
    let mut parts = token.split('.');
    let (_, claims, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// `after` is `before` with only token fields changed, added or removed (both JSON).
pub(crate) fn is_token_refresh(before: &[u8], after: &[u8]) -> bool {
    fn same_but_tokens(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
                for k in keys {
                    match (a.get(k), b.get(k)) {
                        (Some(x), Some(y)) if x == y => {}
                        // A token's value, whatever its type (a string, a number of
                        // seconds), or a token field come or gone.
                        _ if token_field(k) => {
                            if !token_value(a.get(k), b.get(k)) {
                                return false;
                            }
                            let nested = |v: Option<&Value>| {
                                matches!(v, Some(Value::Object(_)) | Some(Value::Array(_)))
                            };
                            if nested(a.get(k)) || nested(b.get(k)) {
                                match (a.get(k), b.get(k)) {
                                    (Some(x), Some(y)) if same_but_tokens(x, y) => {}
                                    _ => return false,
                                }
                            }
                        }
                        (Some(x), Some(y)) if same_but_tokens(x, y) => {}
                        _ => return false,
                    }
                }
                true
            }
            (Value::Array(a), Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_but_tokens(x, y))
            }
            (a, b) => a == b,
        }
    }
    match (
        serde_json::from_slice::<Value>(before),
        serde_json::from_slice::<Value>(after),
    ) {
        (Ok(a @ Value::Object(_)), Ok(b @ Value::Object(_))) => same_but_tokens(&a, &b),
        _ => false,
    }
}

/// Replaces `path` with `bytes` at once (a new file renamed over it), keeping its mode.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".orchestrate-{}", std::process::id()));
    let tmp = path.with_file_name(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
    Ok(())
}

/// Writes one copy into the memory file, as the platform does (for tests of the reading
/// side; the platform's own writer makes system calls only).
#[cfg(test)]
fn push_copy(fd: &OwnedFd, index: u32, bytes: &[u8]) {
    use std::io::Write;
    let mut f = File::from(fd.try_clone().unwrap());
    f.write_all(&index.to_le_bytes()).unwrap();
    f.write_all(&(bytes.len() as u64).to_le_bytes()).unwrap();
    f.write_all(bytes).unwrap();
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_token_refresh_is_told_from_any_other_change() {
        let claude = br#"{"claudeAiOauth":{"accessToken":"a1","refreshToken":"r1","expiresAt":1,"scopes":["user:inference"],"subscriptionType":"max"}}"#;
        let refreshed = br#"{"claudeAiOauth":{"accessToken":"a2","refreshToken":"r2","expiresAt":2,"scopes":["user:inference"],"subscriptionType":"max"}}"#;
        assert!(is_token_refresh(claude, refreshed));
        let codex = br#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"i","access_token":"a","refresh_token":"r","account_id":"acc1"},"last_refresh":"2026-01-01"}"#;
        let codex_refreshed = br#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"i2","access_token":"a2","refresh_token":"r2","account_id":"acc1"},"last_refresh":"2026-02-01"}"#;
        assert!(is_token_refresh(codex, codex_refreshed));
        // A field added by the refresh, if it is a token's.
        let gemini = br#"{"access_token":"a","scope":"s","token_type":"Bearer"}"#;
        let gemini_refreshed =
            br#"{"access_token":"b","scope":"s","token_type":"Bearer","expiry_date":9}"#;
        assert!(is_token_refresh(gemini, gemini_refreshed));

        for (what, after) in [
            (
                "another account",
                &br#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"i2","access_token":"a2","refresh_token":"r2","account_id":"evil"},"last_refresh":"x"}"#[..],
            ),
            (
                "an API key put in",
                br#"{"OPENAI_API_KEY":"sk-evil","tokens":{"id_token":"i","access_token":"a","refresh_token":"r","account_id":"acc1"},"last_refresh":"2026-01-01"}"#,
            ),
            (
                "a new entry",
                br#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"i","access_token":"a","refresh_token":"r","account_id":"acc1"},"last_refresh":"2026-01-01","https://evil":{"type":"wellknown","key":"k","token":"t"}}"#,
            ),
            ("not JSON", b"planted"),
            ("not an object", b"[1]"),
        ] {
            assert!(!is_token_refresh(codex, after), "{what}");
        }
        // A token field's value may not become a structure with other things in it.
        let pi = br#"{"anthropic":{"type":"oauth","refresh":"r","access":"a","expires":1}}"#;
        let pi_bad =
            br#"{"anthropic":{"type":"wellknown","refresh":"r","access":"a","expires":1}}"#;
        assert!(!is_token_refresh(pi, pi_bad));
        let pi_nested = br#"{"anthropic":{"type":"oauth","refresh":{"command":["sh"]},"access":"a","expires":1}}"#;
        assert!(!is_token_refresh(pi, pi_nested));
        // Where the tokens go: an address is no token, even under a token-like name.
        let pi_redirected = br#"{"anthropic":{"type":"oauth","refresh":"r2","access":"a2","expires":2,"accessUrl":"https://evil.example/","refreshEndpoint":"https://evil.example/"}}"#;
        assert!(!is_token_refresh(pi, pi_redirected));
        let pi_url_token =
            br#"{"anthropic":{"type":"oauth","refresh":"https://evil.example/r","access":"a","expires":1}}"#;
        assert!(!is_token_refresh(pi, pi_url_token));
    }

    /// A token that says whose it is (a JWT's `sub` and `email`) stays the same account's.
    #[test]
    fn a_refreshed_jwt_is_the_same_accounts() {
        let jwt = |claims: &str| {
            use base64::Engine;
            let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
            format!("{}.{}.sig", b64(r#"{"alg":"RS256"}"#), b64(claims))
        };
        let login = |id: &str| {
            format!(r#"{{"tokens":{{"id_token":"{id}","access_token":"a","account_id":"acc1"}}}}"#)
        };
        let before = login(&jwt(r#"{"sub":"user-1","email":"me@example.com","exp":1}"#));
        let same = login(&jwt(r#"{"sub":"user-1","email":"me@example.com","exp":2}"#));
        let other = login(&jwt(
            r#"{"sub":"attacker","email":"evil@example.com","exp":2}"#,
        ));
        assert!(is_token_refresh(before.as_bytes(), same.as_bytes()));
        assert!(!is_token_refresh(before.as_bytes(), other.as_bytes()));
    }

    #[test]
    fn a_refreshed_login_is_written_back_and_anything_else_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (ok, bad, moved) = (
            dir.path().join("auth.json"),
            dir.path().join("creds.json"),
            dir.path().join("other.json"),
        );
        let before = br#"{"tokens":{"access_token":"a","account_id":"x"}}"#;
        for p in [&ok, &bad, &moved] {
            std::fs::write(p, before).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let logins = Logins::new(vec![ok.clone(), bad.clone(), moved.clone()])
            .unwrap()
            .unwrap();
        let refreshed = br#"{"tokens":{"access_token":"b","account_id":"x"}}"#;
        push_copy(&logins.copies(), 0, refreshed);
        push_copy(
            &logins.copies(),
            1,
            br#"{"tokens":{"access_token":"b","account_id":"evil"}}"#,
        );
        push_copy(&logins.copies(), 2, refreshed);
        // The user logged in again meanwhile: theirs stays.
        std::fs::write(&moved, b"{\"theirs\":1}").unwrap();
        drop(logins);
        assert_eq!(std::fs::read(&ok).unwrap(), refreshed);
        assert_eq!(std::fs::read(&bad).unwrap(), before);
        assert_eq!(std::fs::read(&moved).unwrap(), b"{\"theirs\":1}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&ok).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 3, "no temporary file left: {names:?}");
    }
}
