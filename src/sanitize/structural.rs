//! Layer (b): secrets found by where they stand rather than by a prefix of their own:
//! `Authorization` headers, API-key headers, passwords in URLs, connection strings and
//! command lines, `.netrc`, session cookies, JWTs, AWS credentials next to their names.
//! PEM private keys span lines and have their own scanner, `pem`.
//!
//! Each rule keeps the context (the header name, the scheme, the URL up to the password)
//! and masks only the value.

use super::rules::token_rules;
use super::rules::{
    always, not_placeholder, random_not_placeholder, raw_credential, Candidate, TokenRule,
    AUTH_SCHEMES,
};
use super::value::{is_placeholder, is_prose_word, looks_random, percent_decode};
use super::MASK;

pub(crate) const RULES: &[TokenRule] = token_rules! {
    // JSON Web Tokens, header and payload both `eyJ` (base64 of `{"`). Vendors whose
    // tokens embed one (`ops_eyJ…`, `sk.eyJ…`) are masked first with their prefix kept.
    "jwt" ["eyJ"] always
        r"{LEAD}(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)";
    // `Authorization` and `Proxy-Authorization` with a scheme, in every dress: HTTP dumps,
    // `curl -H`, JSON and Python dicts, Go's `map[Authorization:[Bearer …]]`, CGI's
    // `HTTP_AUTHORIZATION`, percent-encoded, and in source code a header map's entry
    // (`headers["Authorization"] = "Basic …"`, `'Authorization' => 'Basic …'`) or a
    // setter's arguments (`setRequestHeader("Authorization", "Basic …")`).
    "authorization-scheme" AUTHORIZATION_GATES scheme_credential locate after_scheme
        r#"{LEAD}(?i-u:(?:[a-z0-9]+[_-])*(?:proxy-)?authorization(?:\\?["']\]?[ \t]*(?:=>|[:=,])|\]?[ \t]*(?:=>|[:=]|%3a))[ \t]*(?:\\?["'\[])?(?:%20|\+)*(?:bearer|basic|token|digest|negotiate|ntlm|dpop|apikey|sso-key)(?:[ \t]+|%20|\+))(?P<secret>(?:[A-Za-z0-9._~+/=:-]|\\/|%2[bBfF]|%3[dD])+)"#;
    // A header value without a scheme; it must look like a credential, since
    // "Authorization: required" is prose. Eight characters at least, in the pattern
    // itself: a shorter value (`= headers`) then costs no capture.
    "authorization-raw" AUTHORIZATION_GATES raw_credential
        r#"{LEAD}(?i-u:(?:[a-z0-9]+[_-])*(?:proxy-)?authorization(?:\\?["']\]?[ \t]*(?:=>|[:=,])|\]?[ \t]*(?:=>|[:=]|%3a))[ \t]*(?:\\?["'\[])?(?:%20|\+)*)(?P<secret>(?:[A-Za-z0-9._~+/=:-]|\\/){8,})"#;
    // A bearer token anywhere (SDK debug logs print it without the header name).
    "bearer" ["earer", "EARER"] random_not_placeholder
        r"{LEAD}(?i-u:bearer)(?:[ \t]+|%20|\+)(?P<secret>(?:[A-Za-z0-9._~+/-]|\\/){16,}=*)";
    // API-key and token headers: `x-api-key`, `api-key`, `x-goog-api-key`,
    // `ocp-apim-subscription-key`, `x-functions-key`, `x-auth-token`, `private-token`,
    // `x-vault-token`, `x-amz-security-token`, …
    "api-key-header" [
        "api-key", "Api-Key", "API-Key", "API-KEY", "apikey", "ApiKey", "APIKey", "APIKEY",
        "apiKey", "-token", "-Token", "-TOKEN", "ubscription-key", "ubscription-Key",
        "UBSCRIPTION-KEY", "unctions-key", "unctions-Key", "UNCTIONS-KEY"
    ] random_not_placeholder
        r#"{LEAD}(?i-u:(?:[a-z0-9]+-)*(?:api-?key|(?:auth|access|api|vault|private|session|security|server|gitlab|figma|job)-token|subscription-key|functions-key))(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'\[])?(?P<secret>(?:[A-Za-z0-9._~+/=-]|\\/|%(?:[013-9A-Fa-f][0-9A-Fa-f]|2[0-57-9A-Fa-f]))+)"#;
    // `scheme://user:password@host` for any scheme; the scheme stays outside the match so
    // that the regex starts at the literal `:`. `\/` for JSON writers that escape slashes.
    // A password may hold a raw `#`, which people write though it should be encoded.
    "url-password" ["://", r":\/\/"] not_placeholder requires ["@"]
        r#":(?:\\?/){2}[^\s:/?#@"'<>\\]*:(?P<secret>[^\s/?@"'<>\\]+)@"#;
    // The same, percent-encoded inside another URL (`redirect=https%3A%2F%2Fu%3Ap%40h`).
    "url-password-encoded" [
        "%3A%2F%2F", "%3a%2f%2f", "%3A%2f%2f", "%3a%2F%2F"
    ] not_placeholder requires ["%40"]
        r"%3[aA]%2[fF]%2[fF](?:[A-Za-z0-9._~!$'()*+,;=-]|%(?:[014-9A-Fa-f][0-9A-Fa-f]|2[0-24-9A-Ea-e]|3[0-9B-Eb-e]))*%3[aA](?P<secret>(?:[A-Za-z0-9._~!$'()*+,;=-]|%(?:[013-9A-Fa-f][0-9A-Fa-f]|2[0-24-9A-Ea-e]|3[0-9A-Ea-e]))+?)%40";
    // `Password=` / `Pwd=` in ADO.NET, ODBC and JDBC connection strings: a `;` on one
    // side tells a connection string from prose.
    "connection-string-password" [
        "assword=", "ASSWORD=", "assword =", "ASSWORD =", "wd=", "WD=", "wd =", "WD ="
    ] connection_string_password requires [";"]
        r#"(?i-u:(?:^|[;"'\s])(?:password|pwd)[ \t]*=[ \t]*)(?P<secret>[^;"'\\\r\n]*[^;"'\\\s])"#;
    // `curl -u user:password`, `curl --user=user:password`.
    "curl-user" ["curl"] not_placeholder requires ["-u", ":"] locate after_user
        r#"(?-u:\b)curl(?-u:\b)[^\n]*?[ \t](?:-u|--user)(?:[ \t]+|=)(?:\\?["'])?[^\s:"'\\]*:(?P<secret>[^\s"'\\]+)"#;
    // `.netrc`: `machine h login u password p`, or `password p` on a line of its own.
    "netrc-password" ["password ", "password	"] netrc_password
        r#"(?:(?-u:\b)login[ \t]+[^\s"'\\]+[ \t]+|^[ \t]*|\\n[ \t]*)password[ \t]+(?P<secret>[^\s"'\\=:][^\s"'\\]*)"#;
    // Session cookies in `Cookie:` / `Set-Cookie:` headers, `document.cookie`, and curl's
    // `-b` / `--cookie`: each `name=value` pair whose name says session, id or token.
    "session-cookie" ["ookie", "OOKIE", "curl"] session_cookie requires ["="]
        r#"(?:(?i-u:(?:set-)?cookie)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?|--cookie[ \t=]+(?:\\?["'])?|[ \t]-b[ \t]+(?:\\?["'])?|;[ \t]*)[A-Za-z0-9_.!#$%&*+^|~-]+=(?P<secret>[^;,\s"'\\]+)"#;
    // AWS secret access keys next to their name (`aws_secret_access_key = …`,
    // `"SecretAccessKey": "…"`), 40 base64 characters.
    "aws-secret-access-key" [
        "ecret_access_key", "ECRET_ACCESS_KEY", "ecretAccessKey", "ecret-access-key", "ecret_key",
        "ECRET_KEY", "ecretKey"
    ] aws_secret
        r#"(?i-u:aws[_-]?secret[_-]?(?:access[_-]?)?key|secret[_-]?access[_-]?key)(?:\\?["'])?[ \t]*(?:[:=]|=>)[ \t]*(?:\\?["'])?(?P<secret>(?:[A-Za-z0-9+/]|\\/){40})(?:[^A-Za-z0-9+/=]|$)"#;
    // AWS session tokens next to their name (`aws_session_token`, `"SessionToken"`,
    // `X-Amz-Security-Token`).
    "aws-session-token" [
        "ession_token", "ESSION_TOKEN", "essionToken", "ecurity_token", "ECURITY_TOKEN",
        "ecurity-token", "ecurity-Token", "ECURITY-TOKEN", "ecurityToken"
    ] always
        r#"(?i-u:(?:aws[_-]?)?session[_-]?token|(?:x-amz-|aws[_-]?)security[_-]?token)(?:\\?["'])?[ \t]*(?:[:=]|=>)[ \t]*(?:\\?["'])?(?P<secret>(?:[A-Za-z0-9+/=]|\\/){100,})"#;
    // `<password>…</password>` (Maven `settings.xml`, .NET configs) and kin.
    "xml-password" [
        "assword>", "ASSWORD>", "asswd>", "assphrase>", "ecret>", "ECRET>", "oken>", "OKEN>",
        "piKey>", "pikey>", "pi_key>"
    ] xml_password
        r"<[A-Za-z_][A-Za-z0-9_:.-]*>(?P<secret>[^<\s][^<]*)</";
    // NuGet's `<add key="ClearTextPassword" value="…" />`.
    "nuget-clear-text-password" ["TextPassword"] not_placeholder
        r#"(?i-u:key=\\?"ClearTextPassword\\?"[ \t]+value=\\?")(?P<secret>[^"\\]+)"#;
    // `mysql -pPASSWORD` (no space: with a space, mysql prompts).
    "mysql-password-flag" ["mysql"] not_placeholder requires ["-p"]
        r#"(?-u:\b)mysql(?:dump|admin|import|sh|check|pump|binlog|slap)?(?-u:\b)[^\n]*?[ \t]-p(?:\\?["'])?(?P<secret>[^\s"'\\-][^\s"'\\]*)"#;
    // `--password VALUE` with a space (`--password=VALUE` is an assignment, `assign`'s).
    "cli-password-option" ["--pass"] cli_password
        r#"(?:^|[ \t])--(?:password|passwd|pass)[ \t]+(?:\\?["'])?(?P<secret>[^\s"'\\-][^\s"'\\]*)"#;
    // `docker login -p VALUE` and the other registry clients that copy it.
    "docker-login-password" ["login"] cli_password requires ["-p"]
        r#"(?:docker|podman|nerdctl|buildah|skopeo|helm(?:[ \t]+registry)?|oras)[ \t]+login(?-u:\b)[^\n]*?[ \t]-p[ \t]+(?:\\?["'])?(?P<secret>[^\s"'\\-][^\s"'\\]*)"#;
    // `sshpass -p VALUE`.
    "sshpass-password" ["sshpass"] cli_password
        r#"sshpass[ \t]+-p[ \t]*(?:\\?["'])?(?P<secret>[^\s"'\\-][^\s"'\\]*)"#;
    // OpenSSL's `-passin pass:VALUE`, `-passout pass:VALUE`.
    "openssl-pass-arg" ["pass:"] not_placeholder
        r#"-pass(?:in|out)?[ \t]+pass:(?P<secret>[^\s"'\\]+)"#;
    // `redis-cli -a VALUE`.
    "redis-cli-password" ["redis-cli"] cli_password
        r#"redis-cli(?-u:\b)[^\n]*?[ \t](?:-a|--pass)[ \t]+(?:\\?["'])?(?P<secret>[^\s"'\\-][^\s"'\\]*)"#;
    // The credential, security-token and signature parameters of pre-signed cloud storage
    // URLs (S3 and its kin, GCS, OSS, CloudFront, S3 and GCS v2): whoever holds the URL
    // holds the access until it expires. The whole value goes, with the access key id that
    // a vendor rule may have masked inside it already.
    "presigned-url-credential" [
        "X-Amz-", "x-amz-", "X-AMZ-", "X-Goog-", "x-goog-", "X-GOOG-", "x-oss-", "Signature=",
        "signature=", "security-token="
    ] presigned_param requires ["="] locate after_equals
        r"(?:[?&;]|\\u0026|&amp;)(?i-u:x-(?:amz|goog|oss)-(?:credential|security-token|signature)|security-token|signature)=(?P<secret>(?:[A-Za-z0-9._~+/=-]|%(?:[013-9A-Fa-f][0-9A-Fa-f]|2[0-57-9A-Fa-f])|\\/|\[REDACTED\])+)";
    // A secret passed positionally to an SDK constructor right after the id that names its
    // vendor: Twilio's account SID (`Client("AC…", "<auth token>")`), an AWS access key id
    // (`new BasicAWSCredentials("AKIA…", "<secret key>")`), an Alibaba Cloud one
    // (`AcsClient("LTAI…", "<secret>")`). The id stays (AWS's and Alibaba's are masked by
    // their own families).
    "sdk-positional-secret" ["\"AC", "'AC", "AKIA", "ASIA", "LTAI"] sdk_positional requires [","]
        r#"(?-u:\b)(?:AC[0-9a-f]{32}|(?:AKIA|ASIA)(?:[A-Z0-9]{16}|\[REDACTED\])|LTAI(?:[A-Za-z0-9]{20}|\[REDACTED\]))\\?["'][ \t]*,[ \t]*\\?["'](?P<secret>[A-Za-z0-9/+=]{30,40})\\?["']"#;
};

/// The gates of the two `Authorization` rules: the header's name and what may follow it.
const AUTHORIZATION_GATES: [&str; 14] = [
    "uthorization:",
    "uthorization=",
    "uthorization\"",
    "uthorization'",
    "uthorization\\",
    "uthorization%3",
    "uthorization]",
    "UTHORIZATION:",
    "UTHORIZATION=",
    "UTHORIZATION\"",
    "UTHORIZATION'",
    "UTHORIZATION\\",
    "UTHORIZATION%3",
    "UTHORIZATION]",
];

// Locators (`TokenRule::locate`): where the `secret` group of a match starts, read off the
// match the one way its pattern allows. Each returns `None` where the match does not read
// as expected, and the regex resolves the group instead.

/// `authorization-scheme`: every part before the secret ends at the one place where what
/// follows cannot continue it: the lead (a word character, or an escape whose end the
/// header's name follows), the name (a run of name bytes, ending `authorization`), the
/// separator (quoted or not), blanks, an opening quote or bracket, `%20`s and `+`s, the
/// scheme (no scheme starts another), then blanks, `%20` or a single `+`.
fn after_scheme(m: &str) -> Option<usize> {
    let b = m.as_bytes();
    let at = |i: usize| b.get(i).copied();
    let blanks = |i: usize| {
        i + b[i.min(b.len())..]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count()
    };
    let starts_ci =
        |i: usize, w: &[u8]| b.len() >= i + w.len() && b[i..i + w.len()].eq_ignore_ascii_case(w);
    // {LEAD}: `\b`, `\\[nrt]`, ESC `[…m`, `\\u001b[…m`, `\\u` and four hex digits, `%` and two.
    let sgr_end = |i: usize| {
        let n = b[i.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == b';')
            .count();
        (at(i + n) == Some(b'm')).then_some(i + n + 1)
    };
    let hex =
        |i: usize, n: usize| b.len() >= i + n && b[i..i + n].iter().all(u8::is_ascii_hexdigit);
    let lead = match (at(0)?, at(1)) {
        (c, _) if c.is_ascii_alphanumeric() || c == b'_' => 0,
        (b'\\', Some(b'n' | b'r' | b't')) => 2,
        (b'\\', Some(b'u')) if starts_ci(2, b"001b[") => sgr_end(7)?,
        (b'\\', Some(b'u')) if hex(2, 4) => 6,
        (0x1b, Some(b'[')) => sgr_end(2)?,
        (b'%', _) if hex(1, 2) => 3,
        _ => return None,
    };
    let name_end = lead
        + b[lead..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-'))
            .count();
    if name_end < lead + 13 || !b[name_end - 13..name_end].eq_ignore_ascii_case(b"authorization") {
        return None;
    }
    let mut i = name_end;
    // `\\?["']\]?[ \t]*(?:=>|[:=,])` or `\]?[ \t]*(?:=>|[:=]|%3a)`.
    let quoted = match (at(i), at(i + 1)) {
        (Some(b'\\'), Some(b'"' | b'\'')) => 2,
        (Some(b'"' | b'\''), _) => 1,
        _ => 0,
    };
    i += quoted;
    i += usize::from(at(i) == Some(b']'));
    i = blanks(i);
    i += match at(i)? {
        b'=' if at(i + 1) == Some(b'>') => 2,
        b':' | b'=' => 1,
        b',' if quoted > 0 => 1,
        b'%' if quoted == 0 && starts_ci(i, b"%3a") => 3,
        _ => return None,
    };
    i = blanks(i);
    i += match (at(i), at(i + 1)) {
        (Some(b'\\'), Some(b'"' | b'\'' | b'[')) => 2,
        (Some(b'"' | b'\'' | b'['), _) => 1,
        _ => 0,
    };
    loop {
        if b[i.min(b.len())..].starts_with(b"%20") {
            i += 3;
        } else if at(i) == Some(b'+') {
            i += 1;
        } else {
            break;
        }
    }
    let scheme = AUTH_SCHEMES.iter().find(|w| starts_ci(i, w.as_bytes()))?;
    i += scheme.len();
    i = match at(i)? {
        b' ' | b'\t' => blanks(i),
        b'%' if b[i..].starts_with(b"%20") => i + 3,
        b'+' => i + 1,
        _ => return None,
    };
    (i < b.len()).then_some(i)
}

/// `curl-user`: the secret holds no white space, and between it and the match's last
/// white space stand only `-u=` or `--user=`, a quote and the user name, none of which
/// holds a `:`; so it starts after the first `:` of the match's last run of non-white
/// space (white space as the regex's `\s` reads it: Unicode's, which is `char`'s).
fn after_user(m: &str) -> Option<usize> {
    let run = m
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map(|(i, c)| i + c.len_utf8())?;
    memchr::memchr(b':', &m.as_bytes()[run..]).map(|colon| run + colon + 1)
}

/// `presigned-url-credential`: neither what opens the parameter nor its name holds a
/// `=`, so the secret starts after the match's first `=`.
fn after_equals(m: &str) -> Option<usize> {
    memchr::memchr(b'=', m.as_bytes()).map(|i| i + 1)
}

/// A credential after an `Authorization` scheme, unless it is a placeholder or the prefix
/// of a masked token (`Bearer ghp_****`, `Bearer sk-<key>`).
fn scheme_credential(c: &Candidate) -> bool {
    !is_placeholder(c.secret) && !c.after.starts_with(['*', '•', '…', '<', '{', '$'])
}

/// A pre-signed URL's parameter: 16+ characters besides any mask already in it, not a
/// placeholder (AWS's documentation credential holds `EXAMPLE`).
fn presigned_param(c: &Candidate) -> bool {
    let rest = c.secret.replace(MASK, "");
    rest.len() >= 16 && !is_placeholder(&percent_decode(&rest))
}

/// The secret that the id before it calls for: Twilio's auth token is 32 hex digits, an
/// AWS secret access key 40 base64 characters, an Alibaba Cloud secret 30 letters and
/// digits.
fn sdk_positional(c: &Candidate) -> bool {
    let head = c
        .before
        .trim_end_matches(['"', '\'', '\\', ',', ' ', '\t'])
        .as_bytes();
    // The id ends `head`: its prefix and `body` characters, or its prefix and a mask.
    let id = |prefixes: &[&str], body: usize| {
        let (h, n) = match head.strip_suffix(MASK.as_bytes()) {
            Some(h) => (h, 0),
            None => (head, body),
        };
        h.len() >= n + 4
            && prefixes
                .iter()
                .any(|p| h[h.len() - n - 4..].starts_with(p.as_bytes()))
    };
    let s = c.secret;
    let twilio = head.len() >= 34
        && head[head.len() - 34..].starts_with(b"AC")
        && head[head.len() - 32..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
    if twilio {
        s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    } else if id(&["AKIA", "ASIA"], 16) {
        s.len() == 40 && looks_random(s) && !s.contains("EXAMPLE")
    } else if id(&["LTAI"], 20) {
        s.len() == 30 && s.bytes().all(|b| b.is_ascii_alphanumeric()) && looks_random(s)
    } else {
        false
    }
}

/// `Password=` in a connection string: a `;` before the name, or a `;` and another
/// `Key=` pair after the value (`let pwd = f();` is code, not a connection string).
fn connection_string_password(c: &Candidate) -> bool {
    let head = c.before.trim_end_matches([' ', '\t']);
    let head = head.strip_suffix('=').unwrap_or(head);
    let head = head.trim_end_matches([' ', '\t']);
    let head = head.trim_end_matches(|ch: char| ch.is_ascii_alphabetic());
    let head = head.trim_end_matches([' ', '\t', '"', '\'']);
    let pair_follows = c.after.strip_prefix(';').is_some_and(|rest| {
        let rest = rest.trim_start_matches([' ', '\t']);
        let name = rest
            .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == ' ' || ch == '_'))
            .unwrap_or(rest.len());
        name > 0 && rest[name..].starts_with('=')
    });
    (head.ends_with(';') || pair_follows) && !is_placeholder(c.secret.trim())
}

/// `.netrc`'s `password`: after `login USER`, or alone on its line.
fn netrc_password(c: &Candidate) -> bool {
    let head = c.before.trim_end_matches([' ', '\t']);
    let head = head.strip_suffix("password").unwrap_or(head);
    let head = head.trim_end_matches([' ', '\t']);
    let head = head.trim_end_matches(|ch: char| !ch.is_ascii_whitespace());
    let after_login = head.trim_end_matches([' ', '\t']).ends_with("login");
    let rest = c.after.trim_start_matches([' ', '\t', '\r']);
    let alone = rest.is_empty() || rest.starts_with("\\n") || rest.starts_with("\\r");
    // Alone on its line, a lowercase word is more likely the end of a sentence that
    // wrapped after "password" than a password.
    let word = c
        .secret
        .trim_end_matches(['.', ',', ';', ':', '!', '?'])
        .bytes()
        .all(|b| b.is_ascii_lowercase());
    (after_login || (alone && !word)) && !is_placeholder(c.secret) && !is_prose_word(c.secret)
}

/// A cookie whose name says it carries a session, an id or a token.
fn session_cookie(c: &Candidate) -> bool {
    let head = c.before.strip_suffix('=').unwrap_or(c.before);
    let start = head
        .rfind(|ch: char| !(ch.is_ascii_alphanumeric() || "_.!#$%&*+^|~-".contains(ch)))
        .map_or(0, |i| i + 1);
    let name = head[start..].to_ascii_lowercase();
    const SESSIONISH: &[&str] = &["sess", "sid", "token", "auth", "jwt", "remember", "login"];
    SESSIONISH.iter().any(|s| name.contains(s))
        && c.secret.len() >= 8
        && !is_placeholder(c.secret)
        && !matches!(c.secret, "deleted" | "invalid" | "expired")
}

/// AWS documentation's example key contains `EXAMPLE`.
fn aws_secret(c: &Candidate) -> bool {
    looks_random(c.secret) && !c.secret.contains("EXAMPLE")
}

/// The value of an XML element named like a password (anything not a placeholder) or
/// like a token, secret or API key (random).
fn xml_password(c: &Candidate) -> bool {
    let tag = c
        .before
        .strip_suffix('>')
        .and_then(|h| h.rfind('<').map(|i| &h[i + 1..]))
        .unwrap_or("")
        .to_ascii_lowercase();
    let value = c.secret.trim_end();
    if ["password", "passwd", "passphrase"]
        .iter()
        .any(|s| tag.ends_with(s))
    {
        !is_placeholder(value) && !is_prose_word(value)
    } else if ["secret", "token", "apikey", "api_key"]
        .iter()
        .any(|s| tag.ends_with(s))
    {
        looks_random(value) && !is_placeholder(value)
    } else {
        false
    }
}

/// A password given on a command line.
fn cli_password(c: &Candidate) -> bool {
    !is_placeholder(c.secret) && !is_prose_word(c.secret)
}

#[cfg(test)]
mod tests {
    use super::super::rules::testing::{case, check_locator, check_table, Case};
    use super::*;

    // Random values generated for these tests, split so that secret scanners do not flag
    // this file.
    const JWT: &str = concat!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJrDRbibvGA_BgFZZYswpSVoTlIkD2xUv_",
        "7t5M3EQruieeo45dS3hZDfA0ms7V.R41yUuT-zKN2_jWvfC6S1WAjrwOmNvw9-ItFo3LsrOo"
    );
    const GHP: &str = concat!("ghp_", "yzKcxtlipszL3gsFyOzvxKMNq2QJGbQVqWP5");
    const AWS_SECRET: &str = concat!("wbQHJr06lTnJ6dEhc1HH", "PUG0SoUpTxcg4MijRZmR");
    const AWS_SESSION: &str = concat!(
        "ZWzwDFrlGXl+z1BVXBt7wRkl8OZfIa2AUk7z7gTqBu4wweocv81k2lsNaWQrZzhB4GZqT8hqt0pmpsLww0sAO/DGpU",
        "xjKbgRBWZRZX1VlxeVZ4DNCNnOBFXL4k41GiLP9qG3L0uKW4yWRzSaTLyvH1D0SZaozaNv4AH17KzcnNjeh1MVLymY"
    );
    const SESSION: &str = concat!("WaGqgjMUZXq4l0bO", "zuxuuZmvea0iLbAh");
    const API_KEY: &str = concat!("zYlqDvi4i5C3", "2SSyAJ9Tlxqn");
    const BASIC: &str = concat!("dXNlcjpwYXN", "zUDFepeI7==");
    const AWS_ID: &str = concat!("AKIA", "EPVYF3EDFEAWDKVD");
    const HEX64: &str = concat!(
        "4b66bae803a181ec0f62d963eac18b96",
        "d9fe23e31a9515b769a045f52d802762"
    );
    const HEX32: &str = concat!("672005ed217a33c1", "13ddd3cab40fbbef");
    const HEX32B: &str = concat!("90d024bb94ab1246", "db5c63c112fdbf3d");

    #[test]
    fn locators_agree_with_their_regexes() {
        // What may stand around and inside a secret: blanks and Unicode white space,
        // quotes, escapes, percent-escapes, masks, separators again.
        let noise: &[&str] = &[
            "",
            "",
            " ",
            "\t",
            "\"",
            "'",
            "\\",
            ":",
            "=",
            "+",
            "%20",
            "%2F",
            "\\/",
            "é",
            "\u{a0}",
            "\u{2028}",
            "[REDACTED]",
            "x",
            "-",
            ",",
        ];
        let value: &[&str] = &[
            "q7VbN2xK9mPzR4tLw8Yc",
            "a",
            "+x",
            "=:~",
            "p%3dq",
            "",
            "[REDACTED]",
        ];
        check_locator(
            RULES,
            "authorization-scheme",
            &[
                &[
                    "",
                    "x",
                    "\\n",
                    "\\u001b[1;31m",
                    "\\u001B[m",
                    "\x1b[0m",
                    "\\u0041",
                    "%41",
                    " ",
                    "_",
                ],
                &["", "my_", "x-", "a1-b2_", "proxy-", "Proxy-", "-"],
                &[
                    "Authorization",
                    "authorization",
                    "AUTHORIZATION",
                    "authorisation",
                ],
                &["", "\"", "'", "\\\"", "\\'", "]", "\"]", "\\"],
                &["", " ", "\t ", "  "],
                &[":", "=", "=>", ",", "%3a", "%3A", "%3b", ";"],
                &["", " ", "\t"],
                &["", "\"", "'", "[", "\\\"", "\\[", "\\x"],
                &["", "%20", "+", "%20+%20", "++"],
                &[
                    "Bearer",
                    "bearer",
                    "BASIC",
                    "token",
                    "Digest",
                    "negotiate",
                    "NTLM",
                    "dpop",
                    "ApiKey",
                    "sso-key",
                    "Bearers",
                    "tok",
                ],
                &[" ", "\t", "  ", "%20", "+", "++", "%2B", "", "\u{a0}"],
                value,
                noise,
            ],
        );
        check_locator(
            RULES,
            "curl-user",
            &[
                &["curl", "curl", "xcurl", "curl_"],
                &[" ", "\t", " -s ", " -H 'a: b' ", "\u{a0}", " -u a:b "],
                &["-u", "--user", "-U", "-user"],
                &[" ", "\t\t", "=", "\u{2028}", ""],
                &["", "\"", "'", "\\\"", "\\'"],
                &["", "alice", "a\u{a0}b", "é", "a=b"],
                &[":", "::", ":é:", ":\\"],
                value,
                noise,
            ],
        );
        check_locator(
            RULES,
            "presigned-url-credential",
            &[
                &["https://b.s3.amazonaws.com/k", "", "x"],
                &["?", "&", ";", "\\u0026", "&amp;", "#"],
                &[
                    "X-Amz-Signature",
                    "x-goog-credential",
                    "X-OSS-Security-Token",
                    "security-token",
                    "Signature",
                    "signature",
                    "X-Amz-Credential",
                ],
                &["=", "==", "=%3D"],
                value,
                noise,
            ],
        );
    }

    #[test]
    fn the_scheme_locator_knows_the_schemes_of_the_pattern() {
        let rule = RULES
            .iter()
            .find(|r| r.family == "authorization-scheme")
            .expect("the family exists");
        let schemes = format!("(?:{})", AUTH_SCHEMES.join("|"));
        assert!(rule.pattern.contains(&schemes), "{schemes}");
    }

    fn cases() -> Vec<Case> {
        vec![
            case(
                "jwt",
                format!("id_token={JWT}&state=x"),
                "id_token=[REDACTED]&state=x",
                "eyJ alone and eyJhbGciOiJIUzI1NiJ9 without a payload",
            ),
            case(
                "authorization-scheme",
                format!("> authorization: Basic {BASIC}\r\n< HTTP/2 200"),
                "> authorization: Basic [REDACTED]\r\n< HTTP/2 200",
                "Authorization: Bearer $TOKEN\nAuthorization: Bearer <token>\n\
                 authorization: Bearer ${API_TOKEN}\nAuthorization: Bearer YOUR_TOKEN",
            ),
            case(
                "authorization-raw",
                "AUTHORIZATION: q8W3e5R7t9Y1u".to_string(),
                "AUTHORIZATION: [REDACTED]",
                "Authorization: required\nthe Authorization header\n\
                 pub Authorization: WINBIO_PRESENCE_0,\n\
                 authorization = base64.decodebytes(authorization)",
            ),
            case(
                "bearer",
                "sent bearer Zq8Wm3Xr7Kp2Ln9Vb4Tc)".to_string(),
                "sent bearer [REDACTED])",
                "Bearer authentication_is_simple; Bearer tokens expire; Bearer a1b2c3",
            ),
            case(
                "api-key-header",
                format!("-H 'x-api-key: {API_KEY}' -H \"Ocp-Apim-Subscription-Key: {SESSION}\""),
                "-H 'x-api-key: [REDACTED]' -H \"Ocp-Apim-Subscription-Key: [REDACTED]\"",
                "x-api-key: $ANTHROPIC_API_KEY\nX-Api-Key: <your key>\nx-api-key: required",
            ),
            case(
                "url-password",
                "postgres://app:hunter2@db:5432/x and redis://:s3cr3t@cache".to_string(),
                "postgres://app:[REDACTED]@db:5432/x and redis://:[REDACTED]@cache",
                "https://example.com:8443/a@b ssh://git@github.com/x.git \
                 postgres://app:${DB_PASSWORD}@db postgres://app:****@db http://[::1]:80/",
            ),
            case(
                "url-password-encoded",
                "next=https%3A%2F%2Fbob%3Ap%25w0rd%40example.com%2F".to_string(),
                "next=https%3A%2F%2Fbob%3A[REDACTED]%40example.com%2F",
                "next=https%3A%2F%2Fexample.com%3A8443%2Fa%40b",
            ),
            case(
                "connection-string-password",
                "Server=db;Database=app;User Id=sa;Password=Sup3r Secret!;Encrypt=true".to_string(),
                "Server=db;Database=app;User Id=sa;Password=[REDACTED];Encrypt=true",
                "Password=${DB_PASSWORD};\nthe password= sign in prose\n\
                 if pwd == cwd {}\nPassword=;\nlet mut pwd = mem::MaybeUninit::<libc::passwd>::uninit();",
            ),
            case(
                "curl-user",
                "$ curl -s -u admin:hunter2 https://api.example.com".to_string(),
                "$ curl -s -u admin:[REDACTED] https://api.example.com",
                "curl -u admin https://x\ncurl -u \"$USER:$PASS\" https://x\nsort -u a:b",
            ),
            case(
                "netrc-password",
                "machine api.example.com login bob password hunter2\n  password s3cr3t!\n"
                    .to_string(),
                "machine api.example.com login bob password [REDACTED]\n  password [REDACTED]\n",
                "password reset\nthe password field is required\npassword = x\nmachine h login u\n\
                 \x20   password combination.\n--username and --password options",
            ),
            case(
                "session-cookie",
                format!("Cookie: theme=dark; sessionid={SESSION}; csrftoken={API_KEY}"),
                "Cookie: theme=dark; sessionid=[REDACTED]; csrftoken=[REDACTED]",
                "Set-Cookie: theme=dark; Path=/; HttpOnly\nSet-Cookie: session=deleted; Max-Age=0",
            ),
            case(
                "aws-secret-access-key",
                format!("aws_secret_access_key = {AWS_SECRET}\n"),
                "aws_secret_access_key = [REDACTED]\n",
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            ),
            case(
                "aws-session-token",
                format!("{{\"SessionToken\": \"{AWS_SESSION}\"}}"),
                "{\"SessionToken\": \"[REDACTED]\"}",
                "\"SessionToken\": null",
            ),
            case(
                "xml-password",
                "<server><id>repo</id><password>hunter2hunter2</password></server>".to_string(),
                "<server><id>repo</id><password>[REDACTED]</password></server>",
                "<password>${env.REPO_PASSWORD}</password><token>nextPage</token><b>x</b>",
            ),
            case(
                "nuget-clear-text-password",
                "<add key=\"ClearTextPassword\" value=\"hunter2\" />".to_string(),
                "<add key=\"ClearTextPassword\" value=\"[REDACTED]\" />",
                "<add key=\"ClearTextPassword\" value=\"%NUGET_PASSWORD%\" />",
            ),
            case(
                "mysql-password-flag",
                "$ mysql -u root -pHunter2 app < dump.sql".to_string(),
                "$ mysql -u root -p[REDACTED] app < dump.sql",
                "mysql -u root -p app\nmysql -P 3306 -h db\nmysqldump -p\"$PASS\" app",
            ),
            case(
                "cli-password-option",
                "vault login --method=userpass username=me --password hunter2".to_string(),
                "vault login --method=userpass username=me --password [REDACTED]",
                "--password $PASS\n--password-stdin\n--password required",
            ),
            case(
                "docker-login-password",
                "docker login -u me -p hunter2 registry.example.com".to_string(),
                "docker login -u me -p [REDACTED] registry.example.com",
                "docker login -u me --password-stdin\ndocker login -u me -p $TOKEN",
            ),
            case(
                "sshpass-password",
                "sshpass -p 'hunter2' ssh me@host".to_string(),
                "sshpass -p '[REDACTED]' ssh me@host",
                "sshpass -p \"$SSHPASS\" ssh me@host\nsshpass -e ssh me@host",
            ),
            case(
                "openssl-pass-arg",
                "openssl pkcs12 -export -passout pass:hunter2 -out a.p12".to_string(),
                "openssl pkcs12 -export -passout pass:[REDACTED] -out a.p12",
                "openssl pkcs12 -passin pass:$P12_PASS -in a.p12",
            ),
            case(
                "presigned-url-credential",
                format!(
                    "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=\
                     {AWS_ID}%2F20240501%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=900&X-Amz-Signature=\
                     {HEX64}"
                ),
                "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=\
                 [REDACTED]&X-Amz-Expires=900&X-Amz-Signature=[REDACTED]",
                "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=900&X-Amz-SignedHeaders=host\n\
                 ?X-Amz-Signature=<signature>&signature_version=4\n\
                 ?X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request",
            ),
            case(
                "sdk-positional-secret",
                format!("client = Client(\"AC{HEX32}\", \"{HEX32B}\")"),
                &format!("client = Client(\"AC{HEX32}\", \"[REDACTED]\")"),
                "client = Client(\"AC0123456789abcdef0123456789abcdef\", auth_token)\n\
                 lookup(\"AC0123456789abcdef0123456789abcdef\", \"MG0123456789abcdef0123456789abcdef\")\n\
                 new BasicAWSCredentials(\"AKIAIOSFODNN7EXAMPLE\", \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\")",
            ),
            case(
                "redis-cli-password",
                "redis-cli -h cache -a hunter2 ping".to_string(),
                "redis-cli -h cache -a [REDACTED] ping",
                "redis-cli -h cache -a $REDIS_PASSWORD ping",
            ),
        ]
    }

    #[test]
    fn every_structural_family_masks_its_value_and_spares_its_lookalike() {
        check_table(RULES, &cases());
    }

    #[test]
    fn authorization_in_every_dress() {
        let s = crate::sanitize::Sanitizer::new(None);
        let cases = [
            (
                "Authorization: Bearer abc.def-ghi",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "Proxy-Authorization: token 9f8e7d6c5b4a",
                "Proxy-Authorization: token [REDACTED]",
            ),
            (
                r#"curl -H "Authorization: Bearer x7Kq2" https://api.example.com"#,
                r#"curl -H "Authorization: Bearer [REDACTED]" https://api.example.com"#,
            ),
            (
                r#"{"authorization": "Bearer x7Kq2"}"#,
                r#"{"authorization": "Bearer [REDACTED]"}"#,
            ),
            (
                r#"{\"Authorization\":\"Bearer x7Kq2\"}"#,
                r#"{\"Authorization\":\"Bearer [REDACTED]\"}"#,
            ),
            (
                "{'headers': {'Authorization': 'Bearer x7Kq2'}}",
                "{'headers': {'Authorization': 'Bearer [REDACTED]'}}",
            ),
            (
                "map[Authorization:[Bearer x7Kq2] Accept:[*/*]]",
                "map[Authorization:[Bearer [REDACTED]] Accept:[*/*]]",
            ),
            (
                "HTTP_AUTHORIZATION=Basic Zm9vOmJhcg==",
                "HTTP_AUTHORIZATION=Basic [REDACTED]",
            ),
            (
                "?h=Authorization%3A%20Bearer%20x7Kq2%2Fz&x=1",
                "?h=Authorization%3A%20Bearer%20[REDACTED]&x=1",
            ),
            (
                "\\nAuthorization: Basic Zm9vOmJhcg==",
                "\\nAuthorization: Basic [REDACTED]",
            ),
            (
                "\x1b[1mAuthorization\x1b[0m: x",
                "\x1b[1mAuthorization\x1b[0m: x",
            ),
            (
                "headers[\"Authorization\"] = \"Basic Zm9vOmJhcg==\"",
                "headers[\"Authorization\"] = \"Basic [REDACTED]\"",
            ),
            (
                "xhr.setRequestHeader('Authorization', 'Basic Zm9vOmJhcg==');",
                "xhr.setRequestHeader('Authorization', 'Basic [REDACTED]');",
            ),
            (
                "$h = ['Authorization' => 'Bearer x7Kq2'];",
                "$h = ['Authorization' => 'Bearer [REDACTED]'];",
            ),
            (
                "request.headers[:authorization] = \"Basic Zm9vOmJhcg==\"",
                "request.headers[:authorization] = \"Basic [REDACTED]\"",
            ),
            (
                "req.Header.Set(\"Authorization\", \"Basic \"+basicAuth(u, p))",
                "req.Header.Set(\"Authorization\", \"Basic \"+basicAuth(u, p))",
            ),
            (
                "headers.set(\"Authorization\", authHeader)",
                "headers.set(\"Authorization\", authHeader)",
            ),
            (
                "Authorization: Bearer ghp_****",
                "Authorization: Bearer ghp_****",
            ),
            (
                "Authorization: Bearer sk-...",
                "Authorization: Bearer sk-...",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(s.sanitize(input), expected, "input: {input}");
        }
        let token = format!("Authorization: token {GHP}");
        assert_eq!(s.sanitize(&token), "Authorization: token ghp_[REDACTED]");
    }
}
