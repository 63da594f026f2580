//! The child's network: `on` (the host's), `off` (a network namespace of its own with
//! only its own loopback), or `provider` (a namespace of its own, out only through
//! orchestrate's proxy to the hosts the run allows).
//!
//! - [`hosts`]: host patterns (an exact name, `*.suffix`) and the addresses the proxy
//!   never connects to;
//! - [`policy`]: what one child may reach: its backend's provider hosts (each backend
//!   declares them in its own file), the base URLs the user configured, `allow_hosts`,
//!   and a provider on the host's loopback, bridged in;
//! - [`proxy`]: the HTTP(S) proxy and the bridges, served from outside the namespace on
//!   listeners the platform made inside it;
//! - [`log`]: what was refused, for the result.
//!
//! The default is `provider` for an agent that cannot write, and `on` for the others
//! (README.md says why). A mode asked for that cannot be had refuses the run; the default
//! runs with the host's network and says so in `warnings`.

pub(crate) mod hosts;
pub(crate) mod log;
pub(crate) mod policy;
pub(crate) mod proxy;

use std::ffi::OsString;
use std::sync::Arc;

pub(crate) use crate::result::{DeniedHost, Network, NetworkInfo};
pub(crate) use hosts::HostPattern;
pub(crate) use log::NetworkLog;
pub(crate) use policy::Policy;

/// Where a backend's CLI reaches its model, as the backend declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderHost {
    /// A host the CLI talks to by default (`*.domain` for every name under one).
    Host(&'static str),
    /// A base URL the user configured, and where (`ANTHROPIC_BASE_URL`, a config file's
    /// key): its host is allowed, or bridged in when it is on the host's loopback.
    Url { url: String, from: String },
}

impl ProviderHost {
    pub fn url(url: impl Into<String>, from: impl Into<String>) -> ProviderHost {
        ProviderHost::Url {
            url: url.into(),
            from: from.into(),
        }
    }
}

/// A run's network, decided before anything is spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NetworkPlan {
    pub mode: Network,
    /// Asked for (flag, MCP argument, agent key, environment, config) rather than the
    /// default: then it must hold or the run is refused.
    pub requested: bool,
    /// Hosts allowed beside the provider's (`provider` only).
    pub allow_hosts: Vec<HostPattern>,
    /// What the default could not hold.
    pub warning: Option<String>,
}

/// Decides the run's network. `requested` is the mode asked for, `None` for the default;
/// `readonly` says whether the agent can write; `namespaces` whether the platform can give
/// the child a network of its own, as far as is known before trying.
pub(crate) fn plan(
    requested: Option<Network>,
    readonly: bool,
    allow_hosts: Vec<HostPattern>,
    namespaces: Result<(), String>,
) -> Result<NetworkPlan, String> {
    let mode = requested.unwrap_or(if readonly {
        Network::Provider
    } else {
        Network::On
    });
    let mut plan = NetworkPlan {
        mode,
        requested: requested.is_some(),
        allow_hosts,
        warning: None,
    };
    if mode == Network::On {
        return Ok(plan);
    }
    if let Err(why) = namespaces {
        if plan.requested {
            return Err(format!(
                "network {mode} was asked for, but the child cannot have a network of its own here: {why}"
            ));
        }
        plan.mode = Network::On;
        plan.warning = Some(fallback_warning(&why));
    }
    Ok(plan)
}

/// The warning of a default `provider` network that could not be had.
pub(crate) fn fallback_warning(why: &str) -> String {
    format!(
        "network provider (the default for an agent that cannot write) could not be had ({why}): the child used the host's network"
    )
}

/// The network of a child that runs on another machine (a Slurm node), where orchestrate's
/// namespaces and proxy do not reach: the host's, said in a warning when the default would
/// have been `provider`. `off` or `provider` asked for refuses the run.
pub(crate) fn remote_plan(
    requested: Option<Network>,
    readonly: bool,
    runner: &str,
) -> Result<NetworkPlan, String> {
    // `off` is the node's own network namespace, made by orchestrate's process there
    // (sandbox::remote); the proxy of `provider` would have to run there too.
    if let Some(mode) = requested.filter(|m| !crate::sandbox::remote::network_reaches_node(*m)) {
        return Err(format!(
            "network {mode} was asked for, but orchestrate cannot confine the network of a child that runs through the {runner} runner (use --runner local)"
        ));
    }
    Ok(NetworkPlan {
        mode: requested.unwrap_or(Network::On),
        requested: requested.is_some(),
        allow_hosts: Vec::new(),
        warning: (requested.is_none() && readonly).then(|| {
            format!(
                "network provider (the default for an agent that cannot write) cannot be had through the {runner} runner: the child uses the node's network"
            )
        }),
    })
}

/// What the supervisor needs to serve a `provider` child: its policy, and the run's log of
/// refusals (shared by every attempt).
#[derive(Debug, Clone)]
pub(crate) struct ChildNetwork {
    pub policy: Arc<Policy>,
    pub log: Arc<NetworkLog>,
    /// Configured provider URLs that could not be read (their hosts are not allowed).
    pub warnings: Vec<String>,
}

impl ChildNetwork {
    /// The proxy variables a child needs, and what reaches it directly (`NO_PROXY`: its
    /// loopback, where a bridged provider is). `NODE_USE_ENV_PROXY` makes node's own
    /// `fetch` and `http` honour them (node >= 22.21 and 24.5).
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        let proxy = format!("http://{}", self.policy.proxy_addr());
        let no_proxy = self.policy.no_proxy();
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        for k in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            env.push((k.into(), proxy.clone().into()));
        }
        for k in ["NO_PROXY", "no_proxy"] {
            env.push((k.into(), no_proxy.clone().into()));
        }
        env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        env
    }

    /// The result's `network` for a child that ran with this policy.
    pub(crate) fn info(&self) -> NetworkInfo {
        NetworkInfo {
            mode: Network::Provider,
            allowed: self.policy.allowed_list(),
            denied: self.log.denied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_default_is_provider_for_an_agent_that_cannot_write_and_on_for_the_others() {
        let p = plan(None, true, Vec::new(), Ok(())).unwrap();
        assert_eq!(
            (p.mode, p.requested, p.warning),
            (Network::Provider, false, None)
        );
        let p = plan(None, false, Vec::new(), Ok(())).unwrap();
        assert_eq!((p.mode, p.requested), (Network::On, false));
        let p = plan(Some(Network::Off), false, Vec::new(), Ok(())).unwrap();
        assert_eq!((p.mode, p.requested), (Network::Off, true));
    }

    #[test]
    fn without_namespaces_the_default_falls_back_with_a_warning_and_a_request_refuses() {
        let none = || Err("clone of a new PID namespace failed: EPERM".to_string());
        let p = plan(None, true, Vec::new(), none()).unwrap();
        assert_eq!(p.mode, Network::On);
        assert_eq!(
            p.warning.as_deref(),
            Some("network provider (the default for an agent that cannot write) could not be had (clone of a new PID namespace failed: EPERM): the child used the host's network")
        );
        assert_eq!(
            plan(Some(Network::Provider), true, Vec::new(), none()),
            Err("network provider was asked for, but the child cannot have a network of its own here: clone of a new PID namespace failed: EPERM".to_string())
        );
        assert!(plan(Some(Network::Off), true, Vec::new(), none()).is_err());
        assert_eq!(
            plan(Some(Network::On), true, Vec::new(), none())
                .unwrap()
                .warning,
            None
        );
    }

    #[test]
    fn a_cluster_runner_holds_off_refuses_provider_and_warns_for_the_default() {
        assert_eq!(
            remote_plan(Some(Network::Provider), true, "slurm"),
            Err("network provider was asked for, but orchestrate cannot confine the network of a child that runs through the slurm runner (use --runner local)".to_string())
        );
        // The node's own network namespace.
        let off = remote_plan(Some(Network::Off), true, "slurm").unwrap();
        assert_eq!(
            (off.mode, off.requested, off.warning),
            (Network::Off, true, None)
        );
        let p = remote_plan(None, true, "slurm").unwrap();
        assert_eq!(p.mode, Network::On);
        assert!(p.warning.unwrap().contains("through the slurm runner"));
        assert_eq!(remote_plan(None, false, "slurm").unwrap().warning, None);
    }

    #[test]
    fn modes_parse_and_serialize_by_their_names_and_an_unknown_one_lists_them() {
        for m in [Network::On, Network::Off, Network::Provider] {
            assert_eq!(Network::parse(m.name()), Ok(m));
            assert_eq!(
                serde_json::to_value(m).unwrap(),
                serde_json::json!(m.name())
            );
        }
        assert_eq!(
            Network::parse("proxy"),
            Err("unknown network setting \"proxy\" (use on, off, provider)".to_string())
        );
        let info = NetworkInfo {
            mode: Network::Provider,
            allowed: vec!["api.anthropic.com".into()],
            denied: vec![DeniedHost {
                host: "example.com".into(),
                count: 2,
            }],
        };
        assert_eq!(
            serde_json::to_value(&info).unwrap(),
            serde_json::json!({"mode": "provider", "allowed": ["api.anthropic.com"], "denied": [{"host": "example.com", "count": 2}]})
        );
    }

    #[test]
    fn the_child_gets_the_proxy_in_every_variable_and_its_loopback_as_no_proxy() {
        let (policy, _) = Policy::build(&[ProviderHost::url("http://127.0.0.1:9999/v1", "X")], &[]);
        let net = ChildNetwork {
            policy: Arc::new(policy),
            log: Arc::default(),
            warnings: Vec::new(),
        };
        let env: Vec<(String, String)> = net
            .env()
            .into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect();
        let proxy = "http://127.0.0.1:3128".to_string();
        let mut want: Vec<(String, String)> = [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ]
        .iter()
        .map(|k| (k.to_string(), proxy.clone()))
        .collect();
        want.push(("NO_PROXY".into(), "localhost,127.0.0.1,::1".into()));
        want.push(("no_proxy".into(), "localhost,127.0.0.1,::1".into()));
        want.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        assert_eq!(env, want);
    }
}
