//! What the backends share in declaring their provider's hosts (`BackendSpec::
//! provider_hosts`, what `network: provider` lets a child reach): the query, the API hosts
//! of the providers several CLIs speak to, and reading a CLI's JSON config.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::ChildEnv;
pub(crate) use crate::network::ProviderHost;

/// What a backend reads its provider's hosts from.
pub struct ProviderQuery<'a> {
    /// The child's environment (orchestrate's, with the invocation's variables on top).
    pub env: &'a ChildEnv<'a>,
    /// The attempt's model (a fallback model may be another provider's).
    pub model: Option<&'a str>,
    /// The child's working directory (where project config files are).
    pub cwd: &'a Path,
}

impl ProviderQuery<'_> {
    /// `var`'s value as a configured base URL, when it is set.
    pub fn env_url(&self, var: &str) -> Option<ProviderHost> {
        self.env
            .get(var)
            .map(|v| ProviderHost::url(v.to_string_lossy(), var))
    }

    /// The provider a `provider/model` name names, if it names one.
    pub fn model_provider(&self) -> Option<&str> {
        self.model
            .and_then(|m| m.split_once('/'))
            .map(|(p, _)| p)
            .filter(|p| !p.is_empty())
    }
}

/// The API hosts of the providers that pi and opencode know by name (their built-in
/// provider ids), where each sends its requests unless a base URL is configured.
/// A login's token is refreshed at the second host (`platform.claude.com` for a Claude
/// subscription, `auth.openai.com` for ChatGPT's).
pub(crate) fn known_hosts(provider: &str) -> &'static [&'static str] {
    match provider {
        "anthropic" => &["api.anthropic.com", "platform.claude.com"],
        "openai" => &["api.openai.com"],
        "openai-codex" => &["chatgpt.com", "auth.openai.com"],
        "google" | "gemini" => &["generativelanguage.googleapis.com"],
        "openrouter" => &["openrouter.ai"],
        "groq" => &["api.groq.com"],
        "mistral" => &["api.mistral.ai"],
        "xai" => &["api.x.ai", "auth.x.ai"],
        "deepseek" => &["api.deepseek.com"],
        "cerebras" => &["api.cerebras.ai"],
        "togetherai" | "together" => &["api.together.xyz", "api.together.ai"],
        "fireworks" | "fireworks-ai" => &["api.fireworks.ai"],
        "opencode" => &["opencode.ai"],
        _ => &[],
    }
}

/// Every provider [`known_hosts`] names, for a model whose provider cannot be told.
pub(crate) const KNOWN_PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "google",
    "openrouter",
    "groq",
    "mistral",
    "xai",
    "deepseek",
    "cerebras",
    "togetherai",
    "fireworks",
];

pub(crate) fn hosts_of(provider: &str) -> impl Iterator<Item = ProviderHost> {
    known_hosts(provider).iter().map(|h| ProviderHost::Host(h))
}

/// A JSON (or JSONC: comments and trailing commas are allowed) config file: None when it
/// does not exist; an error, naming the file, when it cannot be read or parsed.
pub(crate) fn read_json(path: &Path) -> Result<Option<Value>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    parse_jsonc(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// JSON with `//` and `/* */` comments and trailing commas, as CLIs write their configs.
pub(crate) fn parse_jsonc(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str(&strip_jsonc(text))
}

fn strip_jsonc(text: &str) -> String {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
                out.extend_from_slice(&b[start..i]);
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i = (i + 2).min(b.len());
            }
            b',' => {
                // A comma followed (past blanks) by a closing bracket is a trailing one.
                let next = b[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
                if !matches!(next, Some(b'}') | Some(b']')) {
                    out.push(b',');
                }
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// `dir/name`, then the same in each parent up to (and including) the first that holds a
/// `.git`, nearest first: where CLIs look for a project's config.
pub(crate) fn project_files(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in dir.ancestors() {
        for n in names {
            out.push(d.join(n));
        }
        if d.join(".git").exists() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn jsonc_comments_and_trailing_commas_are_read_and_strings_kept_whole() {
        let v = parse_jsonc(
            r#"{
  // a comment
  "url": "http://a//b", /* another */ "s": "x \" // y",
  "list": [1, 2,],
}"#,
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"url": "http://a//b", "s": "x \" // y", "list": [1, 2]})
        );
    }
}
