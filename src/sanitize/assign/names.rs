//! Which names say "secret", and how strongly: the keyword families, the names that end
//! like a secret's but hold none, the vendors and qualifiers that make a `*_KEY` a
//! credential, and finding a whole name around a keyword the scan found.

use std::sync::LazyLock;

use memchr::memmem;

use super::super::value::ends_with_ignore_ascii_case;

/// Bounds on how far a name is followed, so that megabytes of `tokentoken…` stay linear.
const MAX_NAME: usize = 128;
/// How far back an ARN's `arn:` is looked for from a name inside it.
const MAX_ARN_BYTES: usize = 256;

/// Literals of which one occurs in every name that `SUFFIXES` accepts, in the three
/// spellings names come in (`api_key`, `apiKey`/`ApiKey`, `API_KEY`).
pub(super) const ANCHORS: &[&str] = &[
    "token", "Token", "TOKEN", "secret", "Secret", "SECRET", "passw", "Passw", "PASSW", "passp",
    "Passp", "PASSP", "key", "Key", "KEY", "auth", "Auth", "AUTH", "cred", "Cred", "CRED",
];

/// How strongly a name says "secret", which sets how much the value must look like one.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Strength {
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

/// The strength of a secret's name, or `None` for any other name.
pub(super) fn strength_of(name: &[u8]) -> Option<Strength> {
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
pub(super) fn name_around(b: &[u8], pos: usize, len: usize) -> Option<(usize, usize)> {
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
pub(super) fn inside_arn(b: &[u8], start: usize) -> bool {
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

#[cfg(test)]
mod tests {
    #[test]
    fn vendor_words_are_sorted_for_binary_search() {
        assert!(super::VENDOR_WORDS.windows(2).all(|w| w[0] < w[1]));
    }
}
