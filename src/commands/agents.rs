//! `orchestrate agents [--json]`: the agents a run can use, and where each came from.

use std::io::Write;
use std::path::PathBuf;

use crate::agents::{self, problem_json, AgentDef, DiscoveryOptions};
use crate::config::Config;
use crate::run::backend_of;

/// The backend a run of `agent` would use with no flag, and whether `auto` chose it.
fn resolved_backend(agent: &AgentDef, config: &Config) -> (String, bool) {
    let sel = backend_of(agent, config);
    if sel.auto && !sel.installed {
        return ("none installed".to_string(), true);
    }
    (sel.backend.name().to_string(), sel.auto)
}

pub fn agents(json: bool, agents_dir: Option<PathBuf>) -> i32 {
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("orchestrate: the current directory is not usable: {e}");
            return 1;
        }
    };
    let config = Config::load(&cwd).unwrap_or_else(|e| {
        eprintln!("orchestrate: {e}; showing backends as if there were no config");
        Config::default()
    });
    let catalog = agents::discover(&DiscoveryOptions::from_env(cwd, agents_dir));
    let mut out = std::io::stdout().lock();
    let written = if json {
        let value = serde_json::json!({
            "agents": catalog.agents().map(|a| {
                let mut v = a.to_json();
                let (backend, auto) = resolved_backend(a, &config);
                v["resolvedBackend"] = serde_json::json!(backend);
                v["backendAuto"] = serde_json::json!(auto);
                v
            }).collect::<Vec<_>>(),
            "problems": catalog.problems().iter().map(problem_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{value}")
    } else {
        let mut text = String::new();
        for a in catalog.agents() {
            let mut tags = Vec::new();
            let (backend, auto) = resolved_backend(a, &config);
            tags.push(if auto {
                format!("backend: auto → {backend}")
            } else {
                format!("backend: {backend}")
            });
            if let Some(m) = &a.settings.model {
                tags.push(format!("model: {m}"));
            }
            if a.readonly {
                tags.push("readonly".to_string());
            }
            if !a.enabled {
                tags.push("disabled".to_string());
            }
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", tags.join(", "))
            };
            text.push_str(&format!(
                "{}{tags}\n  {}\n  from {}\n",
                a.name,
                a.description,
                a.source.display()
            ));
        }
        if !catalog.problems().is_empty() {
            text.push_str("\nSkipped agent files:\n");
            for p in catalog.problems() {
                text.push_str(&format!("  {p}\n"));
            }
        }
        out.write_all(text.as_bytes())
    };
    match written {
        Ok(()) => 0,
        Err(_) => 1,
    }
}
