//! Host names as the network policy reads them: the patterns a run allows (an exact name,
//! or `*.suffix` for every name under a domain), the host a request names, and the
//! addresses the proxy never connects to whatever name led there.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The longest host name DNS can carry.
pub(crate) const MAX_HOST_BYTES: usize = 253;

/// A host the policy allows: one name (or address), or every name under a domain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// This name or address only.
    Exact(String),
    /// Any name that ends with `.<domain>` (not the domain itself: list it too for that).
    Subdomains(String),
}

impl HostPattern {
    /// `api.example.com`, `*.example.com`, `10.0.0.5` or `[::1]`/`::1`, case-insensitive.
    /// A URL, a port, a path or a wildcard anywhere but in front is refused, saying what
    /// was expected.
    pub fn parse(s: &str) -> Result<HostPattern, String> {
        let raw = s.trim();
        let hint = |why: &str| {
            format!("invalid host {raw:?}: {why} (use a host name such as api.example.com, *.example.com for every name under a domain, or an IP address)")
        };
        if raw.is_empty() {
            return Err(hint("it is empty"));
        }
        if raw.contains("://") {
            let host = raw
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.host().map(str::to_string));
            return Err(match host {
                Some(h) => hint(&format!("a URL, not a host; its host is {h}")),
                None => hint("a URL, not a host"),
            });
        }
        if raw == "*" {
            return Err(hint(
                "`*` would allow every host (use network: on for an unfiltered network)",
            ));
        }
        if let Some(domain) = raw.strip_prefix("*.") {
            let domain = normalize_host(domain).ok_or_else(|| hint("not a host name"))?;
            if domain.parse::<IpAddr>().is_ok() {
                return Err(hint("a wildcard covers names, not addresses"));
            }
            return Ok(HostPattern::Subdomains(domain));
        }
        if raw.contains('*') {
            return Err(hint("a wildcard is only allowed as a leading `*.`"));
        }
        if raw.contains('/') {
            return Err(hint("a path is not part of a host"));
        }
        let host = normalize_host(raw).ok_or_else(|| {
            if raw
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                hint("a port is not part of a host (every port of an allowed host is allowed)")
            } else {
                hint("not a host name")
            }
        })?;
        let refused = match host.parse::<IpAddr>() {
            Ok(ip) => refused_address(ip),
            Err(_) if host == "localhost" => Some(LOOPBACK),
            Err(_) => None,
        };
        match refused {
            Some(LOOPBACK) => Err(hint(
                "the host's loopback is reached only as the provider's base URL, bridged in at its address and port (use network: on for other local services)",
            )),
            Some(why) => Err(hint(&format!("the proxy never connects to {why}"))),
            None => Ok(HostPattern::Exact(host)),
        }
    }

    /// Whether `host` (as [`normalize_host`] gives it) is allowed by this pattern.
    pub(crate) fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(name) => name == host,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(name) => f.write_str(name),
            HostPattern::Subdomains(domain) => write!(f, "*.{domain}"),
        }
    }
}

/// A host as the policy compares it: lower case, without a trailing dot, an IPv6 address
/// without its brackets (and in its canonical form, as is an IPv4 one). None for what is
/// not a host name or address.
pub(crate) fn normalize_host(host: &str) -> Option<String> {
    let host = host.trim();
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let name = bare.strip_suffix('.').unwrap_or(bare).to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (name.len() <= MAX_HOST_BYTES && name.split('.').all(label_ok)).then_some(name)
}

/// Why the proxy never connects to `ip` (unless it is the bridged provider itself): the
/// host's own loopback, link-local addresses (where cloud metadata services answer), and
/// addresses that name no single remote host. None for an ordinary address.
pub(crate) fn refused_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => {
            // An IPv4 address in IPv6 clothing is judged as itself: mapped
            // (::ffff:a.b.c.d), compatible (::a.b.c.d) and the NAT64 prefix (RFC 6052).
            if let Some(v4) = v6.to_ipv4_mapped() {
                return refused_v4(v4);
            }
            let s = v6.segments();
            if s[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
                return refused_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
            }
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return refused_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
            }
            refused_v6(v6)
        }
    }
}

/// Why a loopback address is refused.
const LOOPBACK: &str = "a loopback address of the host";

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if ip.is_link_local() {
        Some("a link-local address (where cloud metadata services answer)")
    } else if ip.is_unspecified() || ip.octets()[0] == 0 {
        Some("an unspecified address")
    } else if ip.is_broadcast() || ip.is_multicast() {
        Some("a broadcast or multicast address")
    } else {
        None
    }
}

/// AWS's metadata service over IPv6.
const AWS_METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address (where cloud metadata services answer)")
    } else if ip == AWS_METADATA_V6 {
        Some("a cloud metadata address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if ip.is_multicast() {
        Some("a broadcast or multicast address")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn patterns_parse_names_wildcards_and_addresses_and_refuse_the_rest_saying_why() {
        let ok = |s: &str| HostPattern::parse(s).unwrap();
        assert_eq!(
            ok("API.Example.com."),
            HostPattern::Exact("api.example.com".into())
        );
        assert_eq!(
            ok("*.github.com"),
            HostPattern::Subdomains("github.com".into())
        );
        assert_eq!(ok("10.0.0.5"), HostPattern::Exact("10.0.0.5".into()));
        assert_eq!(
            ok("[2001:db8::1]"),
            HostPattern::Exact("2001:db8::1".into())
        );
        assert_eq!(
            ok("2001:DB8:0::1"),
            HostPattern::Exact("2001:db8::1".into())
        );
        assert_eq!(ok("*.github.com").to_string(), "*.github.com");
        let err = |s: &str| HostPattern::parse(s).unwrap_err();
        assert_eq!(
            err("https://api.example.com/v1"),
            "invalid host \"https://api.example.com/v1\": a URL, not a host; its host is api.example.com (use a host name such as api.example.com, *.example.com for every name under a domain, or an IP address)"
        );
        assert!(err("example.com:443").contains("a port is not part of a host"));
        assert!(err("*").contains("would allow every host"));
        assert!(err("a.*.com").contains("only allowed as a leading"));
        assert!(err("*.10.0.0.1").contains("covers names, not addresses"));
        assert!(err("").contains("it is empty"));
        assert!(err("169.254.169.254").contains("the proxy never connects to a link-local address"));
        for loopback in [
            "localhost",
            "127.0.0.1",
            "[::1]",
            "127.1.2.3",
            "::ffff:127.0.0.1",
        ] {
            assert!(
                err(loopback).contains("reached only as the provider's base URL"),
                "{loopback}"
            );
        }
        assert!(err("exa mple.com").contains("not a host name"));
        assert!(err("example.com/x").contains("a path is not part of a host"));
        assert!(err(&"a".repeat(254)).contains("not a host name"));
    }

    #[test]
    fn a_wildcard_matches_names_under_its_domain_but_not_the_domain_or_lookalikes() {
        let p = HostPattern::parse("*.example.com").unwrap();
        assert!(p.matches("api.example.com"));
        assert!(p.matches("a.b.example.com"));
        assert!(!p.matches("example.com"));
        assert!(!p.matches("evilexample.com"));
        assert!(!p.matches("example.com.evil.net"));
        let exact = HostPattern::parse("example.com").unwrap();
        assert!(exact.matches("example.com"));
        assert!(!exact.matches("api.example.com"));
    }

    #[test]
    fn loopback_link_local_metadata_and_their_ipv6_disguises_are_refused() {
        let refused = |s: &str| refused_address(s.parse().unwrap()).is_some();
        for bad in [
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "ff02::1",
        ] {
            assert!(refused(bad), "{bad} must be refused");
        }
        for good in [
            "93.184.216.34",
            "10.0.0.5",
            "192.168.1.1",
            "2606:4700::1111",
            "fd00::2",
        ] {
            assert!(!refused(good), "{good} is an ordinary address");
        }
    }

    #[test]
    fn hosts_normalize_to_one_spelling() {
        assert_eq!(
            normalize_host("Example.COM.").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            normalize_host("[::FFFF:7f00:1]").as_deref(),
            Some("::ffff:127.0.0.1")
        );
        assert_eq!(normalize_host("bad host"), None);
        assert_eq!(normalize_host("a..b"), None);
    }
}
