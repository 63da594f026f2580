//! What one child may reach with `network: provider`: the hosts of its backend's provider
//! (the CLI's default API hosts, and the base URLs the user configured), the run's
//! `allow_hosts`, and a provider on the host's loopback, bridged into the child's network
//! namespace at the same address and port.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::hosts::{normalize_host, HostPattern};
use super::ProviderHost;
use crate::platform::Listen;

/// The port orchestrate's proxy listens on inside the child's namespace (the next free one
/// when a bridged provider has it).
const PROXY_PORT: u16 = 3128;

/// A provider on the host's loopback, reached from inside the namespace at the same
/// address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bridge {
    /// Where the child connects, inside its namespace.
    pub inside: SocketAddr,
    /// The host's addresses to forward to, tried in order (`localhost` is either).
    pub outside: Vec<SocketAddr>,
    /// Configured as `localhost` rather than an address.
    pub localhost: bool,
    /// A listener that may fail to exist (IPv6 loopback, where the kernel has no IPv6)
    /// without failing the run.
    pub optional: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    allowed: Vec<HostPattern>,
    bridges: Vec<Bridge>,
    proxy_port: u16,
}

impl Policy {
    /// The policy of a child whose backend declares `provider` and whose run allows
    /// `allow_hosts`; and a warning for each configured URL that could not be read (its
    /// host is then not allowed).
    pub(crate) fn build(
        provider: &[ProviderHost],
        allow_hosts: &[HostPattern],
    ) -> (Policy, Vec<String>) {
        let mut allowed: Vec<HostPattern> = Vec::new();
        let mut bridges: Vec<Bridge> = Vec::new();
        let mut warnings = Vec::new();
        for host in provider {
            match host {
                ProviderHost::Host(name) => match HostPattern::parse(name) {
                    Ok(p) => allowed.push(p),
                    Err(e) => warnings.push(format!("network provider: {e}")),
                },
                ProviderHost::Url { url, from } => match endpoint(url) {
                    Some(Endpoint::Remote(p)) => allowed.push(p),
                    Some(Endpoint::Loopback(b)) => bridges.extend(b),
                    None => warnings.push(format!(
                        "network provider: {from} is {url:?}, which is not an http(s) URL: its host is not allowed"
                    )),
                },
            }
        }
        allowed.extend(allow_hosts.iter().cloned());
        let mut seen = Vec::new();
        allowed.retain(|p| {
            let new = !seen.contains(p);
            seen.push(p.clone());
            new
        });
        let mut seen = Vec::new();
        bridges.retain(|b| {
            let new = !seen.contains(&b.inside);
            seen.push(b.inside);
            new
        });
        let taken: Vec<u16> = bridges
            .iter()
            .filter(|b| b.inside.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST))
            .map(|b| b.inside.port())
            .collect();
        let proxy_port = (PROXY_PORT..)
            .find(|p| !taken.contains(p))
            .expect("a free port");
        (
            Policy {
                allowed,
                bridges,
                proxy_port,
            },
            warnings,
        )
    }

    /// The proxy's address inside the namespace.
    pub(crate) fn proxy_addr(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.proxy_port)
    }

    /// Every listener the namespace needs: the proxy's first, then each bridge's.
    pub(crate) fn listeners(&self) -> Vec<Listen> {
        std::iter::once(Listen {
            addr: self.proxy_addr(),
            optional: false,
        })
        .chain(self.bridges.iter().map(|b| Listen {
            addr: b.inside,
            optional: b.optional,
        }))
        .collect()
    }

    pub(crate) fn bridges(&self) -> &[Bridge] {
        &self.bridges
    }

    /// Whether a request for `host` (normalized) may go out.
    pub(crate) fn allows(&self, host: &str) -> bool {
        self.allowed.iter().any(|p| p.matches(host))
    }

    /// The bridge of a request for the host's loopback (`localhost`, 127.x, ::1) at
    /// `port`, if that is a bridged provider.
    pub(crate) fn bridge_for(&self, host: &str, port: u16) -> Option<&Bridge> {
        let ip = match host {
            "localhost" => None,
            h => Some(h.parse::<IpAddr>().ok()?),
        };
        self.bridges.iter().find(|b| {
            b.inside.port() == port
                && match ip {
                    None => b.localhost,
                    Some(ip) => b.inside.ip() == ip,
                }
        })
    }

    /// What the result lists as allowed: the host patterns, then each bridged provider
    /// as `address:port`.
    pub(crate) fn allowed_list(&self) -> Vec<String> {
        let mut out: Vec<String> = self.allowed.iter().map(ToString::to_string).collect();
        for b in &self.bridges {
            let s = b.inside.to_string();
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// `NO_PROXY` for the child: the loopback names and addresses, which are reached
    /// directly (a bridged provider is there; nothing else is).
    pub(crate) fn no_proxy(&self) -> String {
        let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
        for b in &self.bridges {
            let h = b.inside.ip().to_string();
            if !hosts.contains(&h) {
                hosts.push(h);
            }
        }
        hosts.join(",")
    }
}

enum Endpoint {
    Remote(HostPattern),
    Loopback(Vec<Bridge>),
}

/// The host of an `http(s)://` (or `ws(s)://`) URL: a name to allow, or, on the host's
/// loopback, the bridges to make.
fn endpoint(url: &str) -> Option<Endpoint> {
    let uri: http::Uri = url.trim().parse().ok()?;
    let default_port = match uri.scheme_str()?.to_ascii_lowercase().as_str() {
        "http" | "ws" => 80,
        "https" | "wss" => 443,
        _ => return None,
    };
    let port = uri.port_u16().unwrap_or(default_port);
    let host = normalize_host(uri.host()?)?;
    let v4 = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port);
    if host == "localhost" {
        // The child's resolver may give either address; the host's server may listen on
        // either.
        return Some(Endpoint::Loopback(vec![
            Bridge {
                inside: v4,
                outside: vec![v4, v6],
                localhost: true,
                optional: false,
            },
            Bridge {
                inside: v6,
                outside: vec![v6, v4],
                localhost: true,
                optional: true,
            },
        ]));
    }
    match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_loopback() => {
            let at = SocketAddr::new(ip, port);
            Some(Endpoint::Loopback(vec![Bridge {
                inside: at,
                outside: vec![at],
                localhost: false,
                optional: false,
            }]))
        }
        _ => Some(Endpoint::Remote(HostPattern::Exact(host))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn url(u: &str) -> ProviderHost {
        ProviderHost::Url {
            url: u.into(),
            from: "ANTHROPIC_BASE_URL".into(),
        }
    }

    #[test]
    fn provider_hosts_urls_and_allow_hosts_make_one_list_and_a_loopback_url_a_bridge() {
        let (p, warnings) = Policy::build(
            &[
                ProviderHost::Host("api.anthropic.com"),
                url("https://Gateway.Example.com:8443/v1"),
                url("http://127.0.0.1:3128/v1"),
                url("not a url"),
            ],
            &[HostPattern::parse("*.github.com").unwrap()],
        );
        assert_eq!(
            warnings,
            ["network provider: ANTHROPIC_BASE_URL is \"not a url\", which is not an http(s) URL: its host is not allowed"]
        );
        assert_eq!(
            p.allowed_list(),
            [
                "api.anthropic.com",
                "gateway.example.com",
                "*.github.com",
                "127.0.0.1:3128"
            ]
        );
        assert!(p.allows("api.github.com"));
        assert!(p.allows("gateway.example.com"));
        assert!(!p.allows("github.com"));
        assert!(!p.allows("example.com"));
        // The bridged provider has 3128: the proxy takes the next port.
        assert_eq!(p.proxy_addr(), "127.0.0.1:3129".parse().unwrap());
        assert_eq!(
            p.listeners(),
            [
                Listen {
                    addr: "127.0.0.1:3129".parse().unwrap(),
                    optional: false
                },
                Listen {
                    addr: "127.0.0.1:3128".parse().unwrap(),
                    optional: false
                }
            ]
        );
        assert!(p.bridge_for("127.0.0.1", 3128).is_some());
        assert!(p.bridge_for("127.0.0.1", 3129).is_none());
        assert!(p.bridge_for("127.0.0.2", 3128).is_none());
        assert_eq!(p.no_proxy(), "localhost,127.0.0.1,::1");
    }

    #[test]
    fn a_localhost_provider_is_bridged_on_both_loopback_addresses_the_ipv6_one_optional() {
        let (p, _) = Policy::build(
            &[url("http://localhost:8080"), url("http://localhost:8080/x")],
            &[],
        );
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: SocketAddr = "[::1]:8080".parse().unwrap();
        assert_eq!(
            p.bridges(),
            [
                Bridge {
                    inside: v4,
                    outside: vec![v4, v6],
                    localhost: true,
                    optional: false
                },
                Bridge {
                    inside: v6,
                    outside: vec![v6, v4],
                    localhost: true,
                    optional: true
                }
            ]
        );
        assert_eq!(p.bridge_for("localhost", 8080), Some(&p.bridges()[0]));
        assert_eq!(p.bridge_for("::1", 8080), Some(&p.bridges()[1]));
        assert_eq!(p.proxy_addr().port(), 3128);
    }
}
