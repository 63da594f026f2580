//! What the proxy refused, counted per host for the result. Bounded: a child that tries a
//! million names gets the first [`MAX_DENIED_HOSTS`] listed and the rest counted together.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::DeniedHost;

/// Distinct hosts listed in `denied`; the others are counted under [`OTHER_HOSTS`].
pub(crate) const MAX_DENIED_HOSTS: usize = 32;
/// The entry that counts the refusals of hosts past [`MAX_DENIED_HOSTS`].
pub(crate) const OTHER_HOSTS: &str = "(other hosts)";

/// Shared by the proxies of every attempt of a run.
#[derive(Debug, Default)]
pub(crate) struct NetworkLog {
    denied: Mutex<Denied>,
}

#[derive(Debug, Default)]
struct Denied {
    /// In the order first seen.
    hosts: Vec<String>,
    counts: BTreeMap<String, u64>,
    others: u64,
}

impl NetworkLog {
    pub(crate) fn deny(&self, host: &str) {
        let mut d = self.denied.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = d.counts.get_mut(host) {
            *n += 1;
        } else if d.hosts.len() < MAX_DENIED_HOSTS {
            d.hosts.push(host.to_string());
            d.counts.insert(host.to_string(), 1);
        } else {
            d.others += 1;
        }
    }

    /// The refusals so far, in the order each host was first refused.
    pub(crate) fn denied(&self) -> Vec<DeniedHost> {
        let d = self.denied.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<DeniedHost> = d
            .hosts
            .iter()
            .map(|h| DeniedHost {
                host: h.clone(),
                count: d.counts[h],
            })
            .collect();
        if d.others > 0 {
            out.push(DeniedHost {
                host: OTHER_HOSTS.to_string(),
                count: d.others,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn refusals_are_counted_per_host_in_order_and_past_the_bound_together() {
        let log = NetworkLog::default();
        log.deny("b.example");
        log.deny("a.example");
        log.deny("b.example");
        assert_eq!(
            log.denied(),
            [
                DeniedHost {
                    host: "b.example".into(),
                    count: 2
                },
                DeniedHost {
                    host: "a.example".into(),
                    count: 1
                }
            ]
        );
        for i in 0..100 {
            log.deny(&format!("h{i}.example"));
        }
        let denied = log.denied();
        assert_eq!(denied.len(), MAX_DENIED_HOSTS + 1);
        assert_eq!(
            denied.last(),
            Some(&DeniedHost {
                host: OTHER_HOSTS.into(),
                count: 100 - (MAX_DENIED_HOSTS as u64 - 2)
            })
        );
    }
}
