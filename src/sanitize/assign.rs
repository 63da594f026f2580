//! Layer (c): generic assignments of secrets, `DB_PASSWORD=…`, `"api_key": "…"`,
//! `--token=…`, `client_secret: …`, `POSTGRES_PASSWORD: …`. The key's name decides that a
//! value is a secret; the value decides whether it is a real one or a placeholder, a
//! reference, a path or code.
//!
//! Where the assignment stands changes how literal its value is: an env file, a dotted
//! property key at the start of its line (`spring.datasource.password=…`) and a printed
//! struct (`&{User:app Password:…}`) hold literals, code holds expressions. Sentences hold
//! secrets too (`the staging password is …`), and so do percent-encoded query strings
//! inside other URLs (`%3Ftoken%3D…`).
//!
//! A hand-written scanner rather than a regex: the key keywords are case-insensitive and
//! sit at the end of a name of any length, which no literal prefilter can anchor on, and
//! deciding about the value needs the name and the kind of separator anyway. One literal
//! search over the keywords' three spellings finds the candidates.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::LazyLock;

use memchr::memmem;

use super::literals::Literals;
use super::value::{
    ends_with_ignore_ascii_case, is_hex_or_uuid, is_label, is_path, is_placeholder, is_prose_value,
    is_prose_word, literal_reads_as_code, looks_like_random_token, looks_random,
    password_reads_as_code, percent_decode, reads_as_code,
};
use super::MASK;

/// Literals of which one occurs in every name that `SUFFIXES` accepts, in the three
/// spellings names come in (`api_key`, `apiKey`/`ApiKey`, `API_KEY`).
const ANCHORS: &[&str] = &[
    "token", "Token", "TOKEN", "secret", "Secret", "SECRET", "passw", "Passw", "PASSW", "passp",
    "Passp", "PASSP", "key", "Key", "KEY", "auth", "Auth", "AUTH", "cred", "Cred", "CRED",
];

/// How strongly a name says "secret", which sets how much the value must look like one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Strength {
    /// Passwords are chosen by people: any value that is not a placeholder, a reference,
    /// code or a word of prose.
    Password,
    /// Tokens, secrets, API keys, credentials: a literal string in env files and quotes, a
    /// random-looking value elsewhere.
    Secret,
    /// Any other `*_KEY`/`*Key`: most are not secrets (`PRIMARY_KEY`, `cacheKey`), so only
    /// a long random token, never a hash or UUID.
    Key,
    /// A `*_KEY` whose name names a vendor or a kind of credential (`ALGOLIA_ADMIN_KEY`,
    /// `NEW_RELIC_LICENSE_KEY`, `AZURE_OPENAI_KEY`): a token of any vendor shape, hex and
    /// UUIDs included, since that is what such vendors issue.
    VendorKey,
}

/// One family of the generic layer: a name ending (ASCII case-insensitively) with one of
/// `suffixes`. Listed in `docs/sanitizing.md`.
pub(crate) struct Keyword {
    #[cfg_attr(not(test), allow(dead_code))]
    pub family: &'static str,
    pub suffixes: &'static [&'static str],
    strength: Strength,
}

pub(crate) const KEYWORDS: &[Keyword] = &[
    Keyword {
        family: "password-assignment",
        suffixes: &["password", "passwd"],
        strength: Strength::Password,
    },
    Keyword {
        family: "passphrase-assignment",
        suffixes: &["passphrase"],
        strength: Strength::Password,
    },
    // A secret manager's secret itself (`"SecretString": "…"` from AWS, Terraform's
    // `secret_string = "…"`): whatever a person chose.
    Keyword {
        family: "secret-value-assignment",
        suffixes: &["secretstring", "secret_string", "secret-string"],
        strength: Strength::Password,
    },
    Keyword {
        family: "secret-assignment",
        suffixes: &["secret"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "token-assignment",
        suffixes: &["token"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "api-key-assignment",
        suffixes: &["apikey", "api_key", "api-key"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "access-or-secret-key-assignment",
        suffixes: &[
            "secretkey",
            "secret_key",
            "secret-key",
            "accesskey",
            "access_key",
            "access-key",
        ],
        strength: Strength::Secret,
    },
    Keyword {
        family: "private-key-assignment",
        suffixes: &["privatekey", "private_key", "private-key"],
        strength: Strength::Secret,
    },
    // Keys that encrypt, sign or open an application: their values are hex or
    // `base64:…` (Laravel's `APP_KEY`), which a `*_KEY` that is an id would not mask.
    Keyword {
        family: "encryption-key-assignment",
        suffixes: &[
            "app_key",
            "appkey",
            "app-key",
            "application_key",
            "applicationkey",
            "application-key",
            "encryption_key",
            "encryptionkey",
            "encryption-key",
            "encrypt_key",
            "enc_key",
            "signing_key",
            "signingkey",
            "signing-key",
            "sign_key",
            "master_key",
            "masterkey",
            "master-key",
            "hmac_key",
            "hmackey",
            "hmac-key",
            "aes_key",
            "aeskey",
            "cipher_key",
            "cipherkey",
            "crypt_key",
            "crypto_key",
            "cryptokey",
            "jwt_key",
            "jwtkey",
            "secret_key_base",
            "secretkeybase",
        ],
        strength: Strength::Secret,
    },
    Keyword {
        family: "credential-assignment",
        suffixes: &["credential", "credentials", "creds"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "auth-assignment",
        suffixes: &["auth"],
        strength: Strength::Secret,
    },
    Keyword {
        family: "vendor-key-assignment",
        suffixes: &["_key", "-key", ".key", "Key"],
        strength: Strength::VendorKey,
    },
    Keyword {
        family: "other-key-assignment",
        suffixes: &["_key", "-key", ".key"],
        strength: Strength::Key,
    },
];

/// Secrets in sentences: `the staging password is …` (passwords, passphrases) and
/// `my API key is …` (keys, tokens, secrets).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) const PROSE_FAMILIES: &[&str] = &["password-in-prose", "secret-in-prose"];

/// Names that end like a secret's but hold none: pagination and progress tokens, and keys
/// that are ids or public.
const NOT_SECRETS: &[&str] = &[
    "progresstoken",
    "progress_token",
    "pagetoken",
    "page_token",
    "nexttoken",
    "next_token",
    "continuationtoken",
    "continuation_token",
    "synctoken",
    "sync_token",
    "cancellationtoken",
    "cancellation_token",
    "primary_key",
    "primarykey",
    "foreign_key",
    "foreignkey",
    "sort_key",
    "sortkey",
    "partition_key",
    "partitionkey",
    "cache_key",
    "cachekey",
    "hash_key",
    "hashkey",
    "range_key",
    "rangekey",
    "row_key",
    "rowkey",
    "routing_key",
    "routingkey",
    "idempotency_key",
    "idempotencykey",
    "lookup_key",
    "lookupkey",
    "dedup_key",
    "dedupkey",
    "public_key",
    "publickey",
    "public-key",
    "pub_key",
    "publishable_key",
    "publishablekey",
    "site_key",
    "sitekey",
    "object_key",
    "objectkey",
    "query_key",
    "querykey",
    "i18n_key",
    "translation_key",
    "group_key",
    "map_key",
    "sort-key",
    "host_key",
    "hostkey",
];

/// Words in a `*_KEY` name, right before `key`, that make it an id, a hash or a public
/// value whatever vendor it names (`GITHUB_SHA_KEY`, `openai_cache_key`).
const ID_QUALIFIERS: &[&str] = &[
    "object",
    "cache",
    "sort",
    "partition",
    "primary",
    "foreign",
    "hash",
    "range",
    "row",
    "idempotency",
    "dedup",
    "lookup",
    "public",
    "pub",
    "publishable",
    "site",
    "browser",
    "query",
    "i18n",
    "translation",
    "group",
    "map",
    "host",
    "index",
    "etag",
    "lock",
    "sha",
    "commit",
    "digest",
    "checksum",
    "file",
    "path",
    "bucket",
    "s3",
    "release",
    "build",
    "event",
    "entity",
    "item",
    "record",
    "message",
    "storage_account",
];

/// Words right before `key` that name a kind of credential (`ALGOLIA_ADMIN_KEY`,
/// `SEGMENT_WRITE_KEY`, `*_SUBSCRIPTION_KEY`).
const CREDENTIAL_QUALIFIERS: &[&str] = &[
    "admin",
    "license",
    "licence",
    "write",
    "ingest",
    "ingestion",
    "insert",
    "integration",
    "routing",
    "subscription",
    "service",
    "server",
    "sdk",
    "account",
    "search",
    "speech",
    "translator",
    "vision",
    "management",
    "partner",
    "merchant",
    "developer",
    "consumer",
    "user",
    "personal",
    "restricted",
    "live",
    "prod",
    "production",
];

/// Vendors whose keys have no prefix of their own, so that a name holding one of these
/// words and ending in `key` holds the vendor's key.
const VENDOR_WORDS: &[&str] = &[
    "ably",
    "adyen",
    "airtable",
    "alchemy",
    "algolia",
    "amplitude",
    "anthropic",
    "assemblyai",
    "auth0",
    "azure",
    "binance",
    "bing",
    "braintree",
    "browserstack",
    "bugsnag",
    "calendly",
    "circleci",
    "clerk",
    "cloudflare",
    "cloudinary",
    "codecov",
    "cohere",
    "coinbase",
    "contentful",
    "coveralls",
    "datadog",
    "dd",
    "deepgram",
    "deepl",
    "digitalocean",
    "discord",
    "elevenlabs",
    "etherscan",
    "fastly",
    "finnhub",
    "firebase",
    "fireworks",
    "freshdesk",
    "fullstory",
    "gemini",
    "github",
    "gitlab",
    "groq",
    "heap",
    "heroku",
    "honeycomb",
    "hotjar",
    "hubspot",
    "huggingface",
    "infura",
    "intercom",
    "ipinfo",
    "ipstack",
    "launchdarkly",
    "linode",
    "logdna",
    "loggly",
    "logrocket",
    "mailchimp",
    "mailgun",
    "mailjet",
    "mandrill",
    "mapbox",
    "mapquest",
    "meilisearch",
    "messagebird",
    "mistral",
    "mixpanel",
    "moralis",
    "netlify",
    "newrelic",
    "nexmo",
    "notion",
    "okta",
    "onesignal",
    "openai",
    "openweather",
    "openweathermap",
    "opsgenie",
    "optimizely",
    "pagerduty",
    "papertrail",
    "paypal",
    "paystack",
    "pinecone",
    "plaid",
    "plivo",
    "polygon",
    "posthog",
    "postmark",
    "pubnub",
    "pusher",
    "rapidapi",
    "raygun",
    "razorpay",
    "recaptcha",
    "relic",
    "replicate",
    "rollbar",
    "saucelabs",
    "segment",
    "sendgrid",
    "sentry",
    "shopify",
    "slack",
    "snyk",
    "sonar",
    "sonarqube",
    "sparkpost",
    "splunk",
    "square",
    "statsig",
    "storyblok",
    "stripe",
    "sumologic",
    "supabase",
    "telegram",
    "tmdb",
    "together",
    "tomtom",
    "twilio",
    "typeform",
    "typesense",
    "upstash",
    "vercel",
    "vonage",
    "vultr",
    "weather",
    "weaviate",
    "zendesk",
    "zoom",
];

/// Bounds on how far a candidate is followed, so that pathological input (megabytes of
/// `tokentoken…` or an unterminated quote) stays linear.
const MAX_NAME: usize = 128;
const MAX_VALUE: usize = 1024;
/// How far back a printed struct's opening `{` or `map[` is looked for.
const MAX_DUMP_LOOKBACK_BYTES: usize = 512;
/// How far back an ARN's `arn:` is looked for from a name inside it.
const MAX_ARN_BYTES: usize = 256;
/// Words between a secret's name and `is` in a sentence (`password for the admin account
/// is`), and before the name for `set the password to`.
const MAX_PROSE_WORDS: usize = 5;

#[derive(Debug)]
pub(crate) struct Assignments {
    /// Built directly rather than through `regex`, whose meta engine cost about a
    /// million instructions to build: a sixth of a whole trivial run. The names' keywords
    /// are common words (`token`, `auth`), so the search is called once per word: the
    /// SIMD searcher made this scan four times faster than a standard automaton.
    anchors: Literals,
}

impl Assignments {
    pub(super) fn new() -> Assignments {
        Assignments {
            anchors: Literals::new(ANCHORS),
        }
    }

    pub(super) fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        let mut pos = 0;
        let ends = ValueEnds::new();
        let mut last_name: Option<(&[u8], Option<Strength>)> = None;
        while let Some((hit_start, hit_end, _)) = self.anchors.find(bytes, pos) {
            pos = hit_end;
            let Some((start, end)) = name_around(bytes, hit_start, hit_end - hit_start) else {
                continue;
            };
            // The rest of this name holds no other candidate.
            pos = pos.max(end);
            if start < copied || inside_arn(bytes, start) {
                continue;
            }
            // Names repeat (a JSON stream's keys, a file of settings): the last one's
            // strength is kept.
            let mut strength = |name: &'a [u8]| match last_name {
                Some((last, strength)) if last == name => strength,
                _ => {
                    let strength = strength_of(name);
                    last_name = Some((name, strength));
                    strength
                }
            };
            let found = if separator_follows(bytes, end) {
                strength(&bytes[start..end])
                    .and_then(|strength| secret_value(text, start, end, strength, &ends))
            } else if let Some(vs) = encoded_value_start(bytes, start, end) {
                strength(&bytes[start..end])
                    .and_then(|strength| encoded_value(text, start, end, vs, strength, &ends))
            } else {
                // Most candidates are words in prose or code (`the token is`, `auth(req)`):
                // only a sentence that gives the value is worth a closer look.
                prose_value(text, start, end, &ends)
            };
            let Some((vs, ve)) = found else {
                continue;
            };
            if vs < copied {
                continue;
            }
            super::reserve_copy(&mut out, text.len());
            out.push_str(&text[copied..vs]);
            out.push_str(MASK);
            copied = ve;
            pos = pos.max(ve);
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

/// Cheap first look: a separator after the name, its closing quote and blanks.
fn separator_follows(b: &[u8], end: usize) -> bool {
    let mut i = end;
    if let Some(q) = quote_at(b, i) {
        i += q.len();
    }
    let i = skip_blanks(b, skip_ansi(b, i));
    matches!(b.get(i), Some(b'=' | b':'))
}

/// The strength of a secret's name, or `None` for any other name.
fn strength_of(name: &[u8]) -> Option<Strength> {
    // The suffix tables as one automaton over reversed suffixes, matched at the start of
    // the reversed name: one pass over the name instead of a comparison per suffix.
    let mut reversed = [0u8; 2 * MAX_NAME + 16];
    let n = name.len().min(reversed.len());
    for (slot, &c) in reversed.iter_mut().zip(name.iter().rev().take(n)) {
        *slot = c;
    }
    let input = aho_corasick::Input::new(&reversed[..n]).anchored(aho_corasick::Anchored::Yes);
    if let Some(found) = SUFFIXES.automaton.find(input) {
        let (suffix, strength) = SUFFIXES.entries[found.pattern().as_usize()];
        return match strength {
            Some(strength) => Some(strength),
            // PagerDuty's routing key is its integration secret; a queue's is a topic.
            None => (["routing_key", "routingkey"].contains(&suffix) && names_a_vendor(name))
                .then_some(Strength::VendorKey),
        };
    }
    // `STRIPE_KEY`, `license-key`, `encryptionKey`, but not `monkey` or `hotkey`.
    let camel_key =
        name.len() > 3 && name.ends_with(b"Key") && name[name.len() - 4].is_ascii_lowercase();
    let separated = name.len() > 4
        && matches!(name[name.len() - 4], b'_' | b'-' | b'.')
        && ends_with_ignore_ascii_case(name, "key");
    if !(camel_key || separated) {
        return None;
    }
    Some(if names_a_vendor(name) {
        Strength::VendorKey
    } else {
        Strength::Key
    })
}

/// [`NOT_SECRETS`] (as `None`), then the suffixes of the keyword families other than the
/// `*_KEY` ones in table order: the first that ends a name decides.
struct Suffixes {
    entries: Vec<(&'static str, Option<Strength>)>,
    /// The entries reversed, leftmost-first, anchored, ASCII case-insensitive.
    automaton: aho_corasick::AhoCorasick,
}

static SUFFIXES: LazyLock<Suffixes> = LazyLock::new(|| {
    let keywords = KEYWORDS
        .iter()
        .filter(|k| !matches!(k.strength, Strength::Key | Strength::VendorKey))
        .flat_map(|k| k.suffixes.iter().map(|s| (*s, Some(k.strength))));
    let entries: Vec<_> = NOT_SECRETS
        .iter()
        .map(|s| (*s, None))
        .chain(keywords)
        .collect();
    let automaton = aho_corasick::AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .start_kind(aho_corasick::StartKind::Anchored)
        .ascii_case_insensitive(true)
        .build(
            entries
                .iter()
                .map(|(s, _)| s.bytes().rev().collect::<Vec<u8>>()),
        )
        .expect("a set of literals builds");
    Suffixes { entries, automaton }
});

/// The words of a name, lowercased: split at `_`, `-`, `.` and lower-to-upper case changes
/// (`algoliaAdminKey` → `algolia`, `admin`, `key`).
fn name_words(name: &[u8]) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in name.iter().enumerate() {
        let boundary = !c.is_ascii_alphanumeric()
            || (c.is_ascii_uppercase() && i > 0 && name[i - 1].is_ascii_lowercase());
        if boundary && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(char::from(c.to_ascii_lowercase()));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A `*_KEY` name that names a vendor or a kind of credential, and whose last qualifier
/// does not make it an id.
fn names_a_vendor(name: &[u8]) -> bool {
    let words = name_words(name);
    let Some((_, before_key)) = words.split_last() else {
        return false;
    };
    if before_key
        .last()
        .is_some_and(|q| ID_QUALIFIERS.contains(&q.as_str()))
    {
        return false;
    }
    let new_relic = words.windows(2).any(|w| w[0] == "new" && w[1] == "relic");
    new_relic
        || before_key
            .last()
            .is_some_and(|q| CREDENTIAL_QUALIFIERS.contains(&q.as_str()))
        || before_key
            .iter()
            .any(|w| VENDOR_WORDS.binary_search(&w.as_str()).is_ok())
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// The whole name around an anchor found at `pos`, or `None` when the name is too long to
/// be one or is a shell reference (`$TOKEN`, `${TOKEN:-default}`) rather than an assignment.
fn name_around(b: &[u8], pos: usize, len: usize) -> Option<(usize, usize)> {
    let mut start = pos;
    while start > 0 && is_name_byte(b[start - 1]) {
        start -= 1;
        if pos - start > MAX_NAME {
            return None;
        }
    }
    // In JSON-escaped text `\nAPI_KEY=` reads as the name `nAPI_KEY`, and in a
    // percent-encoded query `%26token%3D` as `26token`.
    if start > 0 && b[start - 1] == b'\\' && matches!(b[start], b'n' | b'r' | b't') && start < pos {
        start += 1;
    } else if start > 0
        && b[start - 1] == b'%'
        && start + 2 <= pos
        && b[start..start + 2].iter().all(u8::is_ascii_hexdigit)
    {
        start += 2;
    }
    let mut end = pos + len;
    while end < b.len() && is_name_byte(b[end]) {
        end += 1;
        if end - pos > MAX_NAME {
            return None;
        }
    }
    let before = if start > 0 { b[start - 1] } else { b' ' };
    if before == b'$' || (before == b'{' && start >= 2 && b[start - 2] == b'$') {
        return None;
    }
    Some((start, end))
}

/// A name inside an ARN (`arn:aws:secretsmanager:…:secret:prod/db`): the ARN names a
/// secret, it does not hold one.
fn inside_arn(b: &[u8], start: usize) -> bool {
    if start == 0 || b[start - 1] != b':' {
        return false;
    }
    let lo = start.saturating_sub(MAX_ARN_BYTES);
    let Some(arn) = memmem::rfind(&b[lo..start], b"arn:").map(|i| lo + i) else {
        return false;
    };
    let breaks_run =
        |c: &u8| c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'`' | b'=' | b',' | b'(');
    (arn == 0 || breaks_run(&b[arn - 1]) || !is_name_byte(b[arn - 1]))
        && !b[arn..start].iter().any(breaks_run)
}

/// Skips one SGR colour code, raw (`ESC[1;31m`) or JSON-escaped (`\u001b[0m`).
fn skip_ansi(b: &[u8], i: usize) -> usize {
    let rest = &b[i..];
    let body = if rest.starts_with(b"\x1b[") {
        2
    } else if rest.len() >= 7 && rest[..6].eq_ignore_ascii_case(b"\\u001b") && rest[6] == b'[' {
        7
    } else {
        return i;
    };
    let mut j = i + body;
    while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
        j += 1;
    }
    if j < b.len() && b[j] == b'm' {
        j + 1
    } else {
        i
    }
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    i
}

/// A quote, plain or JSON-escaped: returns its bytes.
fn quote_at(b: &[u8], i: usize) -> Option<&[u8]> {
    match b.get(i..)? {
        [b'\\', b'"' | b'\'', ..] => Some(&b[i..i + 2]),
        [b'"' | b'\'' | b'`', ..] => Some(&b[i..i + 1]),
        _ => None,
    }
}

/// Bytes that end any unquoted value. `<` and `{` are here so that `<YOUR_KEY>` and
/// `{{ secrets.X }}` give an empty value; `(` so that a call is recognised. Besides these,
/// `&` ends a value in a URL query (a password elsewhere may hold one), and `]` ends a
/// value in a printed Go map (`map[password:x]`): see [`unquoted_end`].
fn ends_any_value(c: u8) -> bool {
    c.is_ascii_whitespace()
        || c.is_ascii_control()
        || matches!(
            c,
            b'"' | b'\'' | b'`' | b'\\' | b',' | b';' | b'|' | b'(' | b')' | b'{' | b'}' | b'<'
        )
}

/// The next byte at or after a value's start that [`ends_any_value`], remembered between
/// the candidates of one text. Their values start further and further on, so each byte is
/// looked at about once however many names a stretch holds: `token=token=…` looked a
/// kilobyte ahead from every name before.
///
/// It also remembers the last verdict on a value ([`ValueEnds::judged`]): text that repeats
/// an assignment (a setting printed on every line of a log) has it judged once.
struct ValueEnds(Cell<(usize, usize)>, RefCell<Verdict>);

/// A verdict and everything it was given: where the value and the name stand in the text
/// (compared by content), and what of the key and the context the judgement reads.
#[derive(Default)]
struct Verdict {
    value: (usize, usize),
    name: (usize, usize),
    /// The strength, how the key was written and the context, as [`judge`] or
    /// [`judge_prose`] read them; `None` before the first verdict.
    given: Option<Given>,
    secret: bool,
}

/// Strength, `spaced`, `tight`, the context of an assignment or `None` for prose, quoted.
type Given = (Strength, bool, bool, Option<Context>, bool);

impl ValueEnds {
    fn new() -> ValueEnds {
        // `from > end`: nothing known yet.
        ValueEnds(Cell::new((1, 0)), RefCell::new(Verdict::default()))
    }

    fn from(&self, b: &[u8], i: usize) -> usize {
        let (from, end) = self.0.get();
        if from <= i && i <= end {
            return end;
        }
        let end = b[i..]
            .iter()
            .position(|&c| ends_any_value(c))
            .map_or(b.len(), |n| i + n);
        self.0.set((i, end));
        end
    }

    /// `judge()`, which is `given` the rest of what decides the verdict about the value at
    /// `value` assigned to the name at `name` in `text`, unless the last verdict was given
    /// exactly the same.
    fn judged(
        &self,
        text: &str,
        value: (usize, usize),
        name: (usize, usize),
        given: Given,
        judge: impl FnOnce() -> bool,
    ) -> bool {
        let b = text.as_bytes();
        let same = |a: (usize, usize), c: (usize, usize)| b[a.0..a.1] == b[c.0..c.1];
        let mut last = self.1.borrow_mut();
        if last.given == Some(given) && same(last.value, value) && same(last.name, name) {
            return last.secret;
        }
        let secret = judge();
        *last = Verdict {
            value,
            name,
            given: Some(given),
            secret,
        };
        secret
    }
}

/// The byte range of the value assigned to the name at `start..end`, if it is a secret.
fn secret_value(
    text: &str,
    start: usize,
    end: usize,
    strength: Strength,
    ends: &ValueEnds,
) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let mut i = end;
    if let Some(q) = quote_at(b, i) {
        i += q.len();
    }
    let (i, sep) = separator(b, skip_ansi(b, i))?;
    let name = &text[start..end];
    let key = Key {
        name,
        name_at: start,
        strength,
        env_style: sep == Sep::Tight && is_env_name(name.as_bytes()),
        tight: sep == Sep::Tight,
        in_query: start > 0 && matches!(b[start - 1], b'?' | b'&'),
        spaced: sep == Sep::Other,
        property: is_property_key(b, start, end, name, sep),
        dump: sep == Sep::Colon && b.get(end) == Some(&b':') && in_dump(b, start, end, ends),
        ends,
    };
    value_at(text, i, &key, sep == Sep::Colon && !key.dump)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sep {
    /// `=` with no blank on either side, as in `.env` files and shells.
    Tight,
    /// `:` alone, which may also start a type annotation.
    Colon,
    /// Any other: ` = `, `:=`, `=>`, `: ` after a quoted key.
    Other,
}

/// Parses blanks, a separator and blanks from `i`; returns where the value starts.
fn separator(b: &[u8], i: usize) -> Option<(usize, Sep)> {
    let at = skip_blanks(b, i);
    let rest = &b[at..];
    let (len, sep) = if rest.starts_with(b":=") || rest.starts_with(b"=>") {
        (2, Sep::Other)
    } else if rest.first() == Some(&b'=') && !matches!(rest.get(1), Some(b'=' | b'~')) {
        (1, Sep::Tight)
    } else if rest.first() == Some(&b':') && rest.get(1) != Some(&b':') {
        (1, Sep::Colon)
    } else {
        return None;
    };
    let value = skip_blanks(b, at + len);
    let sep = match sep {
        Sep::Tight if at != i || value != at + len => Sep::Other,
        sep => sep,
    };
    Some((skip_ansi(b, value), sep))
}

/// What the name of an assignment says about its value.
struct Key<'a> {
    name: &'a str,
    /// Where `name` starts in the text.
    name_at: usize,
    strength: Strength,
    /// `NAME=value`, where a value is a literal string even when it is a plain word.
    env_style: bool,
    /// `name=value` with no blanks: a literal in shells, URLs and CLI flags.
    tight: bool,
    /// `?name=value&…`: `&` ends the value.
    in_query: bool,
    /// ` = `, `:=`, `=>`: what code assigns with.
    spaced: bool,
    /// A dotted property key starting its line (`spring.datasource.password=…`) or a JVM
    /// `-D` flag: its value, to the end of the line, is a literal.
    property: bool,
    /// `Name:value` in a printed struct or map (`&{User:app Password:…}`): a literal.
    dump: bool,
    ends: &'a ValueEnds,
}

/// Where and how a value was written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// In quotes: a string literal.
    Quoted,
    /// `NAME=value` in an env file or shell.
    EnvLiteral,
    /// A property file's value or a printed struct's field: data, though it may look like
    /// an identifier (`HarborFalconLantern`); only calls, indexes and field paths are code.
    Literal,
    /// Anything else: a literal, or code. `line_end`: nothing but blanks or a comment
    /// follows on its line, as in YAML and `.properties` files.
    Unquoted { line_end: bool },
}

fn value_at(text: &str, i: usize, key: &Key, may_be_typed: bool) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let (vs, ve, context) = if let Some(q) = quote_at(b, i) {
        let vs = i + q.len();
        let window = &b[vs..b.len().min(vs + MAX_VALUE)];
        match closing_quote(window, q) {
            Some(n) => {
                let literal = key.dump || (key.property && ends_line(b, vs + n + q.len()));
                let context = if literal {
                    Context::Literal
                } else {
                    Context::Quoted
                };
                (vs, vs + n, context)
            }
            // No closing quote on the line (the text was cut, or the quote is an
            // apostrophe): judge the word after it.
            None => (vs, unquoted_end(b, vs, key)?, Context::Quoted),
        }
    } else {
        let ve = unquoted_end(b, i, key)?;
        if b.get(ve) == Some(&b'(') {
            return None;
        }
        // `apiKey: string = "…"`, `api_key: str = "…"`: what follows `:` was a type.
        if may_be_typed {
            if let Some((after, Sep::Other | Sep::Tight)) = separator(b, ve) {
                let typed = Key {
                    env_style: false,
                    tight: false,
                    spaced: true,
                    property: false,
                    ..*key
                };
                return value_at(text, after, &typed, false);
            }
        }
        let line_end = ends_line(b, ve);
        let context = if key.env_style {
            Context::EnvLiteral
        } else if key.dump || (key.property && (line_end || key.name.starts_with("-D"))) {
            Context::Literal
        } else {
            Context::Unquoted { line_end }
        };
        (i, ve, context)
    };
    let value = &text[vs..ve];
    // Too short a value is no secret, which `judge` finds first: most candidates of
    // ordinary text, not worth remembering.
    if value.len() < min_chars(key.strength, context) {
        return None;
    }
    let name = (key.name_at, key.name_at + key.name.len());
    let given = (key.strength, key.spaced, key.tight, Some(context), false);
    key.ends
        .judged(text, (vs, ve), name, given, || judge(value, key, context))
        .then_some((vs, ve))
}

/// Where the quote `q` (`"`, `'`, `` ` `` or JSON's `\"`) closes in `window`, if it does
/// before the line ends. Looks only as far as the first of the two.
fn closing_quote(window: &[u8], q: &[u8]) -> Option<usize> {
    let last = q[q.len() - 1];
    let mut from = 0;
    while let Some(n) = memchr::memchr2(last, b'\n', &window[from..]) {
        let at = from + n;
        if window[at] == b'\n' {
            return None;
        }
        if q.len() == 1 || (at >= 1 && window[at - 1] == q[0]) {
            return Some(at + 1 - q.len());
        }
        from = at + 1;
    }
    None
}

/// The fewest characters a secret of this strength has in this context.
fn min_chars(strength: Strength, context: Context) -> usize {
    match (strength, context) {
        (Strength::Password, Context::Unquoted { .. }) => 6,
        (Strength::Password, _) => 4,
        _ => 8,
    }
}

/// Whether the value is a secret, given its key and context.
fn judge(value: &str, key: &Key, context: Context) -> bool {
    // A URL is where a secret is used, not the secret; its password is the URL rule's.
    let random = || looks_random(value) && !value.contains("://");
    let min_chars = min_chars(key.strength, context);
    // Cheapest first: most candidates fail the first checks.
    if value.len() < min_chars
        || (!value.is_ascii() && value.chars().count() < min_chars)
        || (key.strength != Strength::Password && value.contains(char::is_whitespace))
        || is_label(value, key.name)
        || is_path(value)
        || is_placeholder(value)
    {
        return false;
    }
    match (key.strength, context) {
        (Strength::Password, Context::Quoted | Context::EnvLiteral) => true,
        (Strength::Password, Context::Literal) => {
            !literal_reads_as_code(value) && !is_prose_word(value)
        }
        (Strength::Password, Context::Unquoted { line_end }) => {
            // After ` = ` a plain word is a variable (`self.password = credentials`);
            // an INI file's password has a digit or a symbol more often than not.
            let plain_word = value.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_');
            let word_or_code = password_reads_as_code(value)
                || is_prose_word(value)
                || value.contains(char::is_whitespace)
                || (key.spaced && plain_word);
            (random() && !reads_as_code(value)) || (!word_or_code && (key.tight || line_end))
        }
        (Strength::Secret, Context::EnvLiteral) => true,
        (Strength::Secret, Context::Literal) => {
            !literal_reads_as_code(value) && !is_prose_word(value)
        }
        (Strength::Secret, Context::Quoted) => random(),
        (Strength::Secret, Context::Unquoted { .. }) => random() && !reads_as_code(value),
        (Strength::Key, Context::Quoted | Context::EnvLiteral | Context::Literal) => {
            looks_like_random_token(value)
        }
        (Strength::Key, Context::Unquoted { .. }) => {
            looks_like_random_token(value) && !reads_as_code(value)
        }
        (Strength::VendorKey, Context::Unquoted { .. }) => {
            looks_like_vendor_key(value) && !reads_as_code(value)
        }
        (Strength::VendorKey, _) => looks_like_vendor_key(value),
    }
}

/// What vendors without a prefix issue: 16+ characters of a token alphabet, random, hex
/// or a UUID.
fn looks_like_vendor_key(value: &str) -> bool {
    value.len() >= 16
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-'))
        && (is_hex_or_uuid(value) || looks_random(value))
}

/// Nothing but blanks, a comment, or the end of the enclosing JSON string follows `i` on
/// its line.
fn ends_line(b: &[u8], i: usize) -> bool {
    let j = skip_blanks(b, i);
    matches!(
        b.get(j..),
        None | Some([] | [b'\n' | b'\r' | b'#' | b'"', ..] | [b'\\', b'n' | b'r' | b'"', ..])
    )
}

/// Only blanks between the start of the line and `i`: a raw line break, a JSON `\n`
/// escape, or the opening quote of a JSON string (a file's content, a JSON key).
fn starts_line(b: &[u8], i: usize) -> bool {
    let mut i = i;
    while i > 0 && matches!(b[i - 1], b' ' | b'\t') {
        i -= 1;
    }
    i == 0
        || matches!(b[i - 1], b'\n' | b'\r')
        || (i >= 2 && b[i - 2] == b'\\' && matches!(b[i - 1], b'n' | b'r'))
        || (b[i - 1] == b'"' && (i == 1 || matches!(b[i - 2], b':' | b'[' | b'{' | b',' | b' ')))
}

/// End of an unquoted value starting at `i`; `None` when there is none or it is too long
/// to be a secret.
fn unquoted_end(b: &[u8], i: usize, key: &Key) -> Option<usize> {
    let limit = b.len().min(i + MAX_VALUE);
    let end = key.ends.from(b, i).min(limit);
    let window = &b[i..end];
    let amp = key.in_query || key.strength != Strength::Password;
    let soft = match (amp, key.dump) {
        (true, true) => memchr::memchr2(b'&', b']', window),
        (true, false) => memchr::memchr(b'&', window),
        (false, true) => memchr::memchr(b']', window),
        (false, false) => None,
    };
    let j = soft.map_or(end, |n| i + n);
    (j > i && (j < limit || limit == b.len())).then_some(j)
}

/// `DB_PASSWORD`, `export`ed or not: in `.env` files and shells a value after `=` is a
/// literal string even when it is a plain word.
fn is_env_name(name: &[u8]) -> bool {
    name.iter().any(|b| b.is_ascii_uppercase())
        && name
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// The objects code assigns fields of (`self.password = …`, `this.token = …`): a dotted
/// name starting with one of these is code, not a property key.
const CODE_OBJECTS: &[&str] = &[
    "self", "this", "cls", "me", "super", "window", "document", "process", "os", "sys", "module",
    "exports", "props", "state", "ctx", "req", "res", "request", "response", "obj", "opts",
    "options", "args", "params", "user", "form", "data", "body", "input", "client",
];

/// A dotted key naming a password or a secret (`spring.datasource.password`,
/// `app.jwt.secret`, `security.jwt.secret-key`) at the start of its line in a `.properties`
/// file or `application.yml`, or `-Dapp.jwt.secret` on a JVM command line. Code assigns
/// fields the same way (`self.password = …`, `    creds.access_key = …`), so a `=` line
/// must not be indented, and `self.`, `this.` and their kin are code.
fn is_property_key(b: &[u8], start: usize, end: usize, name: &str, sep: Sep) -> bool {
    if !name.contains('.') {
        return false;
    }
    let secretish = ["password", "passwd", "passphrase", "secret"]
        .iter()
        .chain(&["secret-key", "secret_key", "secretkey"])
        .any(|s| ends_with_ignore_ascii_case(name.as_bytes(), s));
    if !secretish {
        return false;
    }
    if let Some(property) = name.strip_prefix("-D") {
        return property.contains('.');
    }
    let Some((first, _)) = name.split_once('.') else {
        return false;
    };
    let indented = start > 0 && matches!(b[start - 1], b' ' | b'\t');
    let yaml = sep == Sep::Colon || b[end..].starts_with(b":");
    !first.is_empty()
        && !name.contains("..")
        && !name.ends_with('.')
        && !CODE_OBJECTS.iter().any(|o| o.eq_ignore_ascii_case(first))
        && (yaml || !indented)
        && starts_line(b, start)
}

/// `Name:value` inside a printed struct or map: Go's `%+v` (`&{Host:db Password:x}`), Go
/// maps (`map[password:x]`). The name follows `{`, `[` or a space, the `:` is tight on both
/// sides, the value ends at a space, `}` or `]`, and an unclosed `map[`, or `{` before an
/// exported (capitalised) field name, comes before it on its line. Minified JavaScript
/// writes objects the same way (`{credentials:credential}`), with lowercase keys.
fn in_dump(b: &[u8], start: usize, colon: usize, ends: &ValueEnds) -> bool {
    if start == 0 || !matches!(b[start - 1], b'{' | b'[' | b' ') {
        return false;
    }
    if b.get(colon + 1)
        .is_none_or(|c| c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'{' | b'['))
    {
        return false;
    }
    let lo = start.saturating_sub(MAX_DUMP_LOOKBACK_BYTES);
    let mut depth = 0usize;
    let mut opened = false;
    for i in (lo..start).rev() {
        match b[i] {
            b'\n' => return false,
            b'}' | b']' => depth += 1,
            b'{' | b'[' if depth > 0 => depth -= 1,
            b'{' => {
                opened = b[start].is_ascii_uppercase();
                break;
            }
            b'[' => {
                opened = i >= 3 && &b[i - 3..i] == b"map";
                break;
            }
            _ => {}
        }
    }
    if !opened {
        return false;
    }
    // The value ends where an unquoted value ends, and that must be where a printed field
    // ends.
    let v = colon + 1;
    let end = ends.from(b, v).min(b.len().min(v + MAX_VALUE));
    let value_end = memchr::memchr2(b']', b'[', &b[v..end]).map_or(end, |n| v + n);
    value_end == b.len() || matches!(b[value_end], b' ' | b'\t' | b'}' | b']' | b'"')
}

/// Where the value starts after `%3D` (`=` percent-encoded), for a name that is a
/// parameter of a percent-encoded query (`%3Ftoken%3D…`, `%26token%3D…`, `?token%3D…`).
fn encoded_value_start(b: &[u8], start: usize, end: usize) -> Option<usize> {
    let separator = b.get(end..end + 3)?;
    if !separator.eq_ignore_ascii_case(b"%3D") {
        return None;
    }
    let opened = (start >= 1 && matches!(b[start - 1], b'?' | b'&'))
        || (start >= 3
            && (b[start - 3..start].eq_ignore_ascii_case(b"%3F")
                || b[start - 3..start].eq_ignore_ascii_case(b"%26")));
    opened.then_some(end + 3)
}

/// The value of a percent-encoded query parameter: up to the next encoded `&` or `#`, or
/// whatever ends the enclosing URL; judged decoded.
fn encoded_value(
    text: &str,
    start: usize,
    end: usize,
    vs: usize,
    strength: Strength,
    ends: &ValueEnds,
) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    let limit = b.len().min(vs + MAX_VALUE);
    let mut ve = vs;
    while ve < limit {
        let c = b[ve];
        if c.is_ascii_whitespace()
            || c.is_ascii_control()
            || matches!(c, b'&' | b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
            || (c == b'%'
                && b.get(ve + 1..ve + 3).is_some_and(|e| {
                    e.eq_ignore_ascii_case(b"26") || e.eq_ignore_ascii_case(b"23")
                }))
        {
            break;
        }
        ve += 1;
    }
    if ve == vs {
        return None;
    }
    let key = Key {
        name: &text[start..end],
        name_at: start,
        strength,
        env_style: false,
        tight: true,
        in_query: true,
        spaced: false,
        property: false,
        dump: false,
        ends,
    };
    let value = percent_decode(&text[vs..ve]);
    judge(&value, &key, Context::Unquoted { line_end: false }).then_some((vs, ve))
}

/// `the staging password is …`, `Password for the admin account is …`, `my API key is
/// …`, `I set the password to …`: the range of the value a sentence gives for the word at
/// `start..end`, if it looks like that kind of secret.
fn prose_value(text: &str, start: usize, end: usize, ends: &ValueEnds) -> Option<(usize, usize)> {
    let b = text.as_bytes();
    // The first look is two bytes: prose has a space after the name, then `is`, `was`,
    // `for`, `of`, `on`, `in` or `to`. Most names in text are followed by neither.
    if b.get(end) != Some(&b' ')
        || !b
            .get(end + 1)
            .is_some_and(|c| matches!(c.to_ascii_lowercase(), b'i' | b'w' | b'f' | b'o' | b't'))
    {
        return None;
    }
    let name = &b[start..end];
    if !name.iter().all(u8::is_ascii_alphabetic) || (start > 0 && !is_word_gap(b[start - 1])) {
        return None;
    }
    let strength = prose_strength(b, start, name)?;
    let mut words = Words { b, at: end };
    let mut word = words.next()?;
    if is_one_of(word, &["for", "of", "on", "in"]) {
        // `password for the admin account is`
        let mut found = false;
        for _ in 0..MAX_PROSE_WORDS {
            word = words.next()?;
            if is_one_of(word, &["is", "was"]) {
                found = true;
                break;
            }
        }
        if !found {
            return None;
        }
    }
    if is_one_of(word, &["is", "was"]) {
        let mark = words.at;
        if !words
            .next()
            .is_some_and(|w| is_one_of(w, &["now", "still", "currently", "just", "also"]))
        {
            words.at = mark;
        }
        let mark = words.at;
        let set = words
            .next()
            .is_some_and(|w| is_one_of(w, &["set", "changed", "reset", "updated"]));
        if !(set && words.next().is_some_and(|w| is_one_of(w, &["to"]))) {
            words.at = mark;
        }
    } else if !(is_one_of(word, &["to"]) && set_before(b, start)) {
        // `set the password to …`: only after a verb that sets it.
        return None;
    }
    let vs = skip_blanks(b, words.at);
    if vs == words.at && vs < b.len() {
        // No blank after the last word: not a sentence.
        return None;
    }
    let (vs, ve, quoted) = match b.get(vs) {
        Some(&q @ (b'"' | b'\'' | b'`')) => {
            let limit = b.len().min(vs + 1 + MAX_VALUE);
            let close = b[vs + 1..limit]
                .iter()
                .position(|&c| c == q || c == b'\n')
                .map(|n| vs + 1 + n)
                .filter(|&c| b[c] == q)?;
            (vs + 1, close, true)
        }
        _ => {
            let limit = b.len().min(vs + MAX_VALUE);
            let mut ve = vs;
            while ve < limit
                && !b[ve].is_ascii_whitespace()
                && !matches!(b[ve], b'"' | b'\'' | b'`' | b'\\' | b'<' | b'>')
            {
                ve += 1;
            }
            // A sentence's own punctuation after the value.
            while ve > vs && matches!(b[ve - 1], b'.' | b',' | b';' | b':') {
                ve -= 1;
            }
            if ve > vs && b[ve - 1] == b')' && !b[vs..ve].contains(&b'(') {
                ve -= 1;
            }
            (vs, ve, false)
        }
    };
    let value = text.get(vs..ve)?;
    // The name plays no part in the verdict on prose.
    let given = (strength, false, false, None, quoted);
    ends.judged(text, (vs, ve), (0, 0), given, || {
        judge_prose(value, strength, quoted)
    })
    .then_some((vs, ve))
}

/// Whether `c` may stand before a word of a sentence.
fn is_word_gap(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'(' | b'*' | b'_' | b'>' | b'-')
}

/// The kind of secret a word of a sentence names: passwords, or keys, tokens and secrets.
fn prose_strength(b: &[u8], start: usize, name: &[u8]) -> Option<Strength> {
    if is_one_of(name, &["password", "passwd", "passphrase"]) {
        Some(Strength::Password)
    } else if is_one_of(name, &["secret", "token"]) {
        Some(Strength::Secret)
    } else if is_one_of(name, &["key"]) {
        // `API key`, `access key`, `secret key`: a key is a secret only with its kind.
        let before = &b[..start.saturating_sub(1)];
        let word_start = before
            .iter()
            .rposition(|c| !c.is_ascii_alphabetic())
            .map_or(0, |i| i + 1);
        let qualifier = &before[word_start..];
        let kinds = [
            "api",
            "access",
            "secret",
            "private",
            "license",
            "encryption",
            "signing",
            "master",
        ];
        is_one_of(qualifier, &kinds).then_some(Strength::Secret)
    } else {
        None
    }
}

/// `word` is one of `words`, ASCII case-insensitively.
fn is_one_of(word: &[u8], words: &[&str]) -> bool {
    words
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
}

/// A verb that sets a password among the few words before the name (`I set the password
/// to …`, `we changed the root password to …`).
fn set_before(b: &[u8], start: usize) -> bool {
    let lo = start.saturating_sub(48);
    b[lo..start]
        .split(|c| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .rev()
        .take(MAX_PROSE_WORDS)
        .any(|w| {
            is_one_of(
                w,
                &["set", "change", "changed", "reset", "update", "updated"],
            )
        })
}

/// The words of a sentence after a position: runs of non-blank bytes separated by blanks,
/// on one line.
struct Words<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Words<'a> {
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = skip_blanks(self.b, self.at);
        if start == self.at && start != 0 {
            // Words are separated by blanks.
            if !matches!(self.b.get(start.wrapping_sub(1)), Some(b' ' | b'\t')) {
                return None;
            }
        }
        let mut end = start;
        while end < self.b.len() && end - start < 32 && self.b[end].is_ascii_alphabetic() {
            end += 1;
        }
        if end == start || !self.b.get(end).is_none_or(|c| matches!(c, b' ' | b'\t')) {
            return None;
        }
        self.at = end;
        Some(&self.b[start..end])
    }
}

/// A value that a sentence gives for a password (people's choice: a digit or a symbol in
/// it, or quotes around it) or for a key or token (random).
fn judge_prose(value: &str, strength: Strength, quoted: bool) -> bool {
    // What a value of its kind must have first, then what rules it out: most sentences
    // fail the first checks.
    let shaped = match strength {
        Strength::Password if quoted => value.chars().count() >= 4 && !reads_as_code(value),
        Strength::Password => {
            let symbol = value.bytes().any(|c| b"!@#$%^&*+=?~".contains(&c));
            value.chars().count() >= 6
                && (value.bytes().any(|c| c.is_ascii_digit()) || symbol)
                && !is_prose_value(value)
                && !password_reads_as_code(value)
        }
        _ => {
            value.len() >= if quoted { 8 } else { 16 }
                && !value.contains(char::is_whitespace)
                && looks_random(value)
        }
    };
    shaped
        && !value.contains("://")
        && !is_prose_word(value)
        && !is_path(value)
        && !is_placeholder(value)
}

#[cfg(test)]
mod tests;
