//! The child's network as the result reports it. The policy that decides it, the proxy and
//! the bridges are `crate::network`; these are only what they report.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether and how the child may use the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network, unfiltered.
    #[default]
    On,
    /// Only a loopback interface of its own (not even the host's 127.0.0.1): for agents
    /// whose CLI needs no provider, such as a local `command` backend.
    Off,
    /// A network of its own; out only through orchestrate's proxy, to its provider's
    /// hosts and `allow_hosts`.
    Provider,
}

impl Network {
    pub const NAMES: &'static str = "on, off, provider";

    pub fn parse(s: &str) -> Result<Network, String> {
        match s.trim() {
            "on" | "true" | "yes" => Ok(Network::On),
            "off" | "false" | "no" => Ok(Network::Off),
            "provider" => Ok(Network::Provider),
            other => Err(format!(
                "unknown network setting {other:?} (use {})",
                Network::NAMES
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Network::On => "on",
            Network::Off => "off",
            Network::Provider => "provider",
        }
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the result says of the child's network: the mode it had, and with `provider`
/// what it was allowed and what it was refused. (The lean result keeps it only when
/// something was refused, and then without `allowed`.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInfo {
    pub mode: Network,
    /// The hosts the proxy let through (`*.domain` for every name under it), and each
    /// bridged loopback provider as `address:port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// Each host refused, with how many times, in the order first refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<DeniedHost>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeniedHost {
    pub host: String,
    pub count: u64,
}
