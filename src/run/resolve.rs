//! The one place a run's settings are decided: from the request (flags or MCP arguments),
//! the agent's file, the environment and the config files, to a [`ResolvedRun`].
//!
//! Every setting follows the same precedence, highest first:
//! flag or MCP argument > the agent file's own key > `ORCHESTRATE_*` environment >
//! project config > user config > built-in default.
//! The lower four are layered by [`crate::config`]; `Config::under` puts the upper two on
//! top, for every setting of the table in [`crate::settings`] alike.

use std::path::PathBuf;

use super::{resume, RunEnv, RunRequest};
use crate::agents::{self, AgentDef, Catalog, DiscoveryOptions};
use crate::backends::{ResumeFrom, Selection};
use crate::config::{Config, Source};
use crate::error::RunError;
use crate::limits::{Budgets, SupervisionLimits};
use crate::network::{self, NetworkPlan};
use crate::runner::{self, RunnerChoice};
use crate::sandbox::{self, SandboxPlan};
use crate::settings::Effective;
use crate::structured::{OutputSchema, SchemaSource};
use crate::truncate::TruncateLimits;
use crate::units::Usd;

/// Everything one run needs, decided before anything is spawned.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedRun {
    pub run_id: String,
    /// The run folder already exists: whoever chose the id made it (a background run).
    pub preset_dir: bool,
    pub agent: AgentDef,
    pub task: String,
    pub backend: Selection,
    pub model: Option<String>,
    pub cwd: PathBuf,
    pub limits: SupervisionLimits,
    pub truncate: TruncateLimits,
    /// Attempts in all when failures are transient.
    pub attempts: u32,
    pub resume: Option<ResumeFrom>,
    /// What the child may spend.
    pub budgets: Budgets,
    /// Models to run in turn after `model` fails with a quota, rate-limit, overload or
    /// unknown-model error.
    pub fallback_models: Vec<String>,
    pub sandbox: SandboxPlan,
    pub network: NetworkPlan,
    /// The child works in a git worktree of its own.
    pub worktree: bool,
    /// The schema the answer must match, compiled.
    pub output_schema: Option<OutputSchema>,
    /// Where the child runs.
    pub runner: RunnerChoice,
    /// How the child's permission requests are answered.
    pub permissions: crate::backends::permissions::PermissionMode,
    /// The `acp` backend's agent command: the agent's own, else the config's.
    pub acp_command: Option<String>,
}

/// The output limits of a request before any agent is known (a fan-out's whole answer).
pub(crate) fn truncate_limits(req: &RunRequest, cfg: &Config) -> TruncateLimits {
    let s = cfg.under(&[&req.settings]);
    TruncateLimits {
        max_bytes: s.max_bytes,
        max_lines: s.max_lines,
    }
}

fn limits(s: &Effective) -> SupervisionLimits {
    SupervisionLimits {
        runtime_timeout: s.timeout,
        idle_timeout: s.idle_timeout,
        tool_timeout: s.tool_timeout,
        connect_timeout: s.connect_timeout,
        kill_grace: s.kill_grace,
        terminal_exit_grace: s.exit_grace,
        max_output_bytes: s.max_output_bytes,
        queue_timeout: s.queue_timeout,
        ..SupervisionLimits::default()
    }
}

fn budgets(s: &Effective) -> Budgets {
    // A run spends from the total of its fan-out, and a single run is a fan-out of one.
    let max_cost = match (s.max_cost, s.max_total_cost) {
        (Some(own), Some(total)) => Some(own.dollars().min(total.dollars())),
        (own, total) => own.or(total).map(Usd::dollars),
    };
    let max_tokens = match (s.max_tokens, s.max_total_tokens) {
        (Some(own), Some(total)) => Some(own.min(total)),
        (own, total) => own.or(total),
    };
    Budgets {
        max_turns: s.max_turns,
        max_tokens,
        max_cost,
    }
}

/// Resolves `req` as seen from `env`. A refusal is a [`RunError`]; nothing has been
/// written or spawned when one is returned.
pub(crate) fn resolve(
    req: &RunRequest,
    env: &RunEnv,
    run_id: &str,
) -> Result<ResolvedRun, RunError> {
    // `--resume` fills what the earlier run knew: its agent, backend and folder.
    let (filled, resume) = match &req.resume {
        None => (None, None),
        Some(id) => {
            let (filled, from) = resume::load(env, id, req).map_err(RunError::InvalidInput)?;
            (Some(filled), Some(from))
        }
    };
    let req = filled.as_ref().unwrap_or(req);
    if req.agent.trim().is_empty() {
        return Err(RunError::invalid(
            "agent is required and must not be empty.",
        ));
    }
    if req.task.trim().is_empty() {
        return Err(RunError::invalid("task is required and must not be empty."));
    }
    refuse_if_not_allowed(env)?;
    let cwd = working_dir(req.cwd.as_deref())?;
    let catalog = agents::discover(&DiscoveryOptions::from_env(
        cwd.clone(),
        req.agents_dir.clone(),
    ));
    for p in catalog.problems() {
        tracing::warn!("skipped agent file: {p}");
    }
    let agent = find_agent(&catalog, &req.agent)?.clone();
    if !agent.enabled {
        return Err(RunError::SubagentDisabled {
            name: agent.name.clone(),
            file: agent.source.display(),
        });
    }
    let cfg = &env.config;
    // Every setting: the request's (flags, MCP arguments) over the agent file's over the
    // config's layers.
    let s = cfg.under(&[&req.settings, &agent.settings]);
    let backend = s.backend.select();
    let runner = runner::select(&s.runner, &cfg.runners.value)
        .map_err(|e| RunError::invalid(e.to_string()))?;
    let readonly = agent.permissions().readonly;
    // A child that runs elsewhere gets the same sandbox, built there by orchestrate's own
    // process (sandbox::remote); its network only as far as the node can hold it.
    let sandbox = sandbox::plan(
        s.sandbox,
        readonly,
        &backend.backend.sandbox_needs(),
        crate::platform::sandbox_mechanism(),
    )
    .map_err(RunError::invalid)?;
    let network = if runner.kind.here() {
        network::plan(
            s.network,
            readonly,
            s.allow_hosts.clone(),
            crate::platform::network_namespaces(),
        )
    } else {
        network::remote_plan(s.network, readonly, &runner.name)
    }
    .map_err(RunError::invalid)?;
    if s.isolation {
        crate::worktree::check(&cwd).map_err(|e| RunError::invalid(e.to_string()))?;
    }
    let output_schema = output_schema(req, &agent, s.output_schema.as_ref())?;
    Ok(ResolvedRun {
        run_id: run_id.to_string(),
        preset_dir: req.run_id.is_some(),
        limits: limits(&s),
        budgets: budgets(&s),
        truncate: TruncateLimits {
            max_bytes: s.max_bytes,
            max_lines: s.max_lines,
        },
        attempts: s.retries.max(1),
        task: req.task.clone(),
        model: s.model,
        fallback_models: s.fallback_models,
        worktree: s.isolation,
        backend,
        cwd,
        agent,
        resume,
        sandbox,
        network,
        runner,
        output_schema,
        permissions: s.permissions,
        acp_command: s.acp_command,
    })
}

/// The output schema, compiled: the request's (`--output-schema`, MCP `outputSchema`) over
/// the agent's own `output_schema:` (there is no config or environment layer: a schema
/// belongs to a task or an agent). A schema that cannot be used is bad input, named by
/// where it was given.
fn output_schema(
    req: &RunRequest,
    agent: &AgentDef,
    source: Option<&SchemaSource>,
) -> Result<Option<OutputSchema>, RunError> {
    let Some(source) = source else {
        return Ok(None);
    };
    OutputSchema::load(source).map(Some).map_err(|e| {
        let given = match (&req.settings.output_schema, source) {
            (Some(_), SchemaSource::File(path)) => format!("--output-schema {}", path.display()),
            (Some(_), SchemaSource::Inline(_)) => "outputSchema".to_string(),
            (None, SchemaSource::File(path)) => format!(
                "agent {}: invalid `output_schema` in {}: {}",
                agent.name,
                agent.source.display(),
                path.display()
            ),
            (None, SchemaSource::Inline(_)) => format!(
                "agent {}: invalid `output_schema` in {}",
                agent.name,
                agent.source.display()
            ),
        };
        RunError::invalid(format!("{given}: {e}"))
    })
}

/// The switches checked before anything is spawned: subagents disabled, or too deep.
pub(crate) fn refuse_if_not_allowed(env: &RunEnv) -> Result<(), RunError> {
    let disabled = &env.config.disabled;
    if disabled.value {
        let how = match &disabled.source {
            Source::Env(var) => format!("Unset {var} (or set it to 0) to enable them."),
            Source::User(path) | Source::Project(path) => {
                format!(
                    "Set `disabled = false` in {} to enable them.",
                    path.display()
                )
            }
            _ => "Set ORCHESTRATE_DISABLED=0 to enable them.".to_string(),
        };
        return Err(RunError::SubagentsDisabled { how });
    }
    let max_depth = env.config.max_depth.value;
    if env.depth >= max_depth {
        return Err(RunError::DepthExceeded { max_depth });
    }
    Ok(())
}

fn working_dir(requested: Option<&std::path::Path>) -> Result<PathBuf, RunError> {
    match requested {
        Some(dir) if !dir.is_dir() => Err(RunError::invalid(format!(
            "cwd {} is not an existing directory.",
            dir.display()
        ))),
        Some(dir) => Ok(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())),
        None => std::env::current_dir()
            .map_err(|e| RunError::invalid(format!("the current directory is not usable: {e}"))),
    }
}

/// The agent named `name`; when its file could not be read, the error names the file and
/// why rather than claiming the agent does not exist.
fn find_agent<'c>(catalog: &'c Catalog, name: &str) -> Result<&'c AgentDef, RunError> {
    if let Some(agent) = catalog.get(name) {
        return Ok(agent);
    }
    let broken = catalog
        .problems()
        .iter()
        .find(|p| p.file.file_stem().and_then(|s| s.to_str()) == Some(name));
    if let Some(problem) = broken {
        return Err(RunError::invalid(format!(
            "agent {name} could not be read: {problem}"
        )));
    }
    let unreadable = match catalog.problems().len() {
        0 => String::new(),
        n => format!(" ({n} agent file(s) could not be read; `orchestrate agents` lists why)"),
    };
    let available = catalog.names_sorted();
    Err(RunError::UnknownAgent {
        name: name.to_string(),
        suggestion: nearest_name(name, &available).map(str::to_string),
        available: available.into_iter().map(str::to_string).collect(),
        unreadable,
    })
}

/// How alike two names must be (Jaro similarity, case ignored) for one to be suggested
/// for the other: clap's threshold for its own "did you mean".
const SUGGESTION_SIMILARITY: f64 = 0.7;

/// The name in `names` nearest to `typed`, when one is near enough to be what was meant.
fn nearest_name<'a>(typed: &str, names: &[&'a str]) -> Option<&'a str> {
    let typed = typed.to_lowercase();
    names
        .iter()
        .map(|n| (strsim::jaro(&typed, &n.to_lowercase()), *n))
        .filter(|(score, _)| *score >= SUGGESTION_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// The backend a run of `agent` would use with no flag (`orchestrate agents`).
pub(crate) fn backend_of(agent: &AgentDef, cfg: &Config) -> Selection {
    cfg.under(&[&agent.settings]).backend.select()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{Backend, BackendChoice};

    #[test]
    fn an_unknown_agent_name_suggests_the_nearest_one_when_it_is_near() {
        let names = ["explorer", "planner", "reviewer"];
        let cases = [
            ("explroer", Some("explorer")),
            ("Explorer", Some("explorer")),
            ("reveiwer", Some("reviewer")),
            ("plan", Some("planner")),
            ("zzz", None),
            ("", None),
        ];
        for (typed, want) in cases {
            assert_eq!(nearest_name(typed, &names), want, "{typed}");
        }
        assert_eq!(nearest_name("explorer", &[]), None);
    }
    use crate::session::StateDir;
    use crate::settings::Values;
    use pretty_assertions::assert_eq;
    use std::collections::HashMap;
    use std::time::Duration;

    /// The precedence layers, highest first.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Layer {
        Flag,
        Agent,
        Env,
        Project,
        User,
        Default,
    }

    const LAYERS: [Layer; 6] = [
        Layer::Flag,
        Layer::Agent,
        Layer::Env,
        Layer::Project,
        Layer::User,
        Layer::Default,
    ];

    /// A value that says which layer it was set in: layer `i` sets `i + 1`.
    fn n(layer: Layer) -> u64 {
        LAYERS.iter().position(|l| *l == layer).unwrap() as u64 + 1
    }

    const BACKEND_OF: [(Layer, &str); 5] = [
        (Layer::Flag, "claude"),
        (Layer::Agent, "codex"),
        (Layer::Env, "gemini"),
        (Layer::Project, "opencode"),
        (Layer::User, "cursor"),
    ];

    /// A cost that says which layer it was set in.
    fn cost(layer: Layer) -> f64 {
        n(layer) as f64 * 0.25
    }

    fn backend_set_in(layer: Layer) -> Backend {
        Backend::named(BACKEND_OF.iter().find(|(l, _)| *l == layer).unwrap().1)
    }

    /// The settings a run resolves when every layer from `top` down sets every key it
    /// can hold, each to a value naming its layer.
    fn resolved_from(top: Layer) -> ResolvedRun {
        let dir = tempfile::tempdir().unwrap();
        let set =
            |l: Layer| LAYERS.iter().position(|x| *x == l) >= LAYERS.iter().position(|x| *x == top);
        let keys = |l: Layer| {
            format!(
                "backend = \"{}\"\nmodel = \"model-{l:?}\"\ntimeout = \"{}ms\"\nidle_timeout = \"{}ms\"\nkill_grace = \"{}ms\"\nexit_grace = \"{}ms\"\nmax_output_bytes = {}\nmax_bytes = {}\nmax_lines = {}\nretries = {}\ntool_timeout = \"{}ms\"\nconnect_timeout = \"{}ms\"\nmax_turns = {}\nmax_tokens = {}\nmax_cost = {:?}\nfallback_models = [\"fb-{l:?}\"]\n",
                backend_set_in(l).name(),
                n(l) * 1000, n(l) * 100, n(l) * 10, n(l) * 20, n(l) * 30_000, n(l) * 40_000, n(l) * 50, n(l) * 10,
                n(l) * 200, n(l) * 300, n(l) * 3, n(l) * 1000, cost(l)
            )
        };
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        let agents = dir.path().join("agents");
        for d in [&home, &project, &agents] {
            std::fs::create_dir_all(d).unwrap();
        }
        if set(Layer::User) {
            let user = home.join(".config/orchestrate");
            std::fs::create_dir_all(&user).unwrap();
            std::fs::write(user.join("config.toml"), keys(Layer::User)).unwrap();
        }
        if set(Layer::Project) {
            std::fs::create_dir_all(project.join(".orchestrate")).unwrap();
            std::fs::write(
                project.join(".orchestrate/config.toml"),
                keys(Layer::Project),
            )
            .unwrap();
        }
        let mut env: HashMap<String, String> = HashMap::new();
        env.insert("HOME".into(), home.to_string_lossy().into_owned());
        if set(Layer::Env) {
            let e = Layer::Env;
            for (k, v) in [
                ("ORCHESTRATE_BACKEND", backend_set_in(e).name().to_string()),
                ("ORCHESTRATE_MODEL", format!("model-{e:?}")),
                ("ORCHESTRATE_TIMEOUT", format!("{}ms", n(e) * 1000)),
                ("ORCHESTRATE_IDLE_TIMEOUT", format!("{}ms", n(e) * 100)),
                ("ORCHESTRATE_KILL_GRACE", format!("{}ms", n(e) * 10)),
                ("ORCHESTRATE_EXIT_GRACE", format!("{}ms", n(e) * 20)),
                ("ORCHESTRATE_MAX_OUTPUT_BYTES", (n(e) * 30_000).to_string()),
                ("ORCHESTRATE_MAX_BYTES", (n(e) * 40_000).to_string()),
                ("ORCHESTRATE_MAX_LINES", (n(e) * 50).to_string()),
                ("ORCHESTRATE_RETRIES", (n(e) * 10).to_string()),
                ("ORCHESTRATE_TOOL_TIMEOUT", format!("{}ms", n(e) * 200)),
                ("ORCHESTRATE_CONNECT_TIMEOUT", format!("{}ms", n(e) * 300)),
                ("ORCHESTRATE_MAX_TURNS", (n(e) * 3).to_string()),
                ("ORCHESTRATE_MAX_TOKENS", (n(e) * 1000).to_string()),
                ("ORCHESTRATE_MAX_COST", cost(e).to_string()),
                ("ORCHESTRATE_FALLBACK_MODELS", format!("fb-{e:?}")),
            ] {
                env.insert(k.into(), v);
            }
        }
        let config = Config::load_with(&project, &|k| env.get(k).cloned()).unwrap();
        let a = Layer::Agent;
        let agent_keys = if set(a) {
            format!(
                "backend: {}\nmodel: model-{a:?}\ntimeout: {}ms\nidle_timeout: {}ms\ntool_timeout: {}ms\nconnect_timeout: {}ms\nmax_turns: {}\nmax_tokens: {}\nmax_cost: {}\nfallback_models: [fb-{a:?}]\n",
                backend_set_in(a).name(),
                n(a) * 1000,
                n(a) * 100,
                n(a) * 200,
                n(a) * 300,
                n(a) * 3,
                n(a) * 1000,
                cost(a)
            )
        } else {
            String::new()
        };
        std::fs::write(
            agents.join("probe.md"),
            format!("---\nname: probe\ndescription: d\n{agent_keys}---\nP\n"),
        )
        .unwrap();
        let f = Layer::Flag;
        let mut req = RunRequest {
            agent: "probe".into(),
            task: "t".into(),
            cwd: Some(project.clone()),
            agents_dir: Some(agents.clone()),
            ..RunRequest::default()
        };
        if set(f) {
            req.settings = Values {
                backend: Some(BackendChoice::Named(backend_set_in(f))),
                model: Some(format!("model-{f:?}")),
                timeout: Some(Duration::from_millis(n(f) * 1000)),
                idle_timeout: Some(Duration::from_millis(n(f) * 100)),
                kill_grace: Some(Duration::from_millis(n(f) * 10)),
                exit_grace: Some(Duration::from_millis(n(f) * 20)),
                max_output_bytes: Some(n(f) * 30_000),
                max_bytes: Some((n(f) * 40_000) as usize),
                max_lines: Some((n(f) * 50) as usize),
                retries: Some((n(f) * 10) as u32),
                tool_timeout: Some(Duration::from_millis(n(f) * 200)),
                connect_timeout: Some(Duration::from_millis(n(f) * 300)),
                max_turns: Some(n(f) * 3),
                max_tokens: Some(n(f) * 1000),
                max_cost: Usd::new(cost(f)),
                fallback_models: Some(vec![format!("fb-{f:?}")]),
                ..Values::default()
            };
        }
        let run_env = RunEnv {
            depth: 0,
            config,
            state: StateDir {
                root: dir.path().join("state"),
            },
            total: None,
            inherited: Default::default(),
            scheduler: None,
            observe: crate::observe::Hub::none(),
            parent_run_id: None,
            group: None,
            fanout_id: None,
            parent: Default::default(),
        };
        resolve(&req, &run_env, "ab12cd34").unwrap()
    }

    /// Where each setting came from, read back from the values.
    fn winners(r: &ResolvedRun) -> Vec<(&'static str, Layer)> {
        let layer_of = |v: u64, unit: u64| {
            LAYERS
                .into_iter()
                .find(|l| *l != Layer::Default && n(*l) * unit == v)
                .unwrap_or(Layer::Default)
        };
        let backend = BACKEND_OF
            .iter()
            .find(|(_, b)| *b == r.backend.backend.name() && !r.backend.auto)
            .map_or(Layer::Default, |(l, _)| *l);
        let model = LAYERS
            .into_iter()
            .find(|l| r.model.as_deref() == Some(format!("model-{l:?}").as_str()))
            .unwrap_or(Layer::Default);
        let ms = |d: Duration| d.as_millis() as u64;
        vec![
            ("backend", backend),
            ("model", model),
            ("timeout", layer_of(ms(r.limits.runtime_timeout), 1000)),
            ("idle_timeout", layer_of(ms(r.limits.idle_timeout), 100)),
            ("kill_grace", layer_of(ms(r.limits.kill_grace), 10)),
            ("exit_grace", layer_of(ms(r.limits.terminal_exit_grace), 20)),
            (
                "max_output_bytes",
                layer_of(r.limits.max_output_bytes, 30_000),
            ),
            ("max_bytes", layer_of(r.truncate.max_bytes as u64, 40_000)),
            ("max_lines", layer_of(r.truncate.max_lines as u64, 50)),
            ("attempts", layer_of(u64::from(r.attempts), 10)),
            ("tool_timeout", layer_of(ms(r.limits.tool_timeout), 200)),
            (
                "connect_timeout",
                layer_of(ms(r.limits.connect_timeout), 300),
            ),
            (
                "max_turns",
                r.budgets
                    .max_turns
                    .map_or(Layer::Default, |v| layer_of(v, 3)),
            ),
            (
                "max_tokens",
                r.budgets
                    .max_tokens
                    .map_or(Layer::Default, |v| layer_of(v, 1000)),
            ),
            (
                "max_cost",
                r.budgets
                    .max_cost
                    .map_or(Layer::Default, |v| layer_of((v / 0.25).round() as u64, 1)),
            ),
            (
                "fallback_models",
                LAYERS
                    .into_iter()
                    .find(|l| r.fallback_models == [format!("fb-{l:?}")])
                    .unwrap_or(Layer::Default),
            ),
        ]
    }

    #[test]
    fn every_setting_follows_flag_agent_env_project_user_default() {
        // Keys an agent file cannot set fall through its layer to the next one.
        let agent_keys = [
            "backend",
            "model",
            "timeout",
            "idle_timeout",
            "tool_timeout",
            "connect_timeout",
            "max_turns",
            "max_tokens",
            "max_cost",
            "fallback_models",
        ];
        for top in LAYERS {
            let got = winners(&resolved_from(top));
            let want: Vec<(&str, Layer)> = got
                .iter()
                .map(|(key, _)| {
                    let layer = match top {
                        Layer::Agent if !agent_keys.contains(key) => Layer::Env,
                        other => other,
                    };
                    (*key, layer)
                })
                .collect();
            assert_eq!(got, want, "every layer from {top:?} down is set");
        }
    }

    /// Resolves a run of `agents/<name>.md` (written from `agent`) with `flag` as the
    /// request's output schema.
    fn resolve_schema(
        dir: &std::path::Path,
        agent: &str,
        flag: Option<SchemaSource>,
    ) -> Result<ResolvedRun, RunError> {
        let agents = dir.join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(agents.join("probe.md"), agent).unwrap();
        let req = RunRequest {
            agent: "probe".into(),
            task: "t".into(),
            cwd: Some(dir.to_path_buf()),
            agents_dir: Some(agents),
            settings: Values {
                output_schema: flag,
                ..Values::default()
            },
            ..RunRequest::default()
        };
        let env = RunEnv {
            depth: 0,
            config: Config::default(),
            state: StateDir {
                root: dir.join("state"),
            },
            total: None,
            inherited: Default::default(),
            scheduler: None,
            observe: crate::observe::Hub::none(),
            parent_run_id: None,
            group: None,
            fanout_id: None,
            parent: Default::default(),
        };
        resolve(&req, &env, "ab12cd34")
    }

    #[test]
    fn the_output_schema_is_the_flags_over_the_agents_and_compiled_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("agent.json"), r#"{"type": "array"}"#).unwrap();
        std::fs::write(d.join("flag.json"), r#"{"type": "object"}"#).unwrap();
        let agent = "---\nname: probe\noutput_schema: ../agent.json\n---\nP\n";
        let compact = |r: ResolvedRun| r.output_schema.map(|s| s.compact());
        assert_eq!(
            compact(resolve_schema(d, agent, None).unwrap()),
            Some(r#"{"type":"array"}"#.to_string())
        );
        assert_eq!(
            compact(
                resolve_schema(d, agent, Some(SchemaSource::File(d.join("flag.json")))).unwrap()
            ),
            Some(r#"{"type":"object"}"#.to_string())
        );
        let inline = SchemaSource::Inline(serde_json::json!({"type": "string"}));
        assert_eq!(
            compact(resolve_schema(d, agent, Some(inline)).unwrap()),
            Some(r#"{"type":"string"}"#.to_string())
        );
        assert_eq!(
            compact(resolve_schema(d, "---\nname: probe\n---\nP\n", None).unwrap()),
            None
        );
    }

    #[test]
    fn an_unusable_output_schema_is_invalid_input_naming_where_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bad.json"),
            r#"{"type": "object", "minProperties": -1}"#,
        )
        .unwrap();
        let plain = "---\nname: probe\n---\nP\n";
        let err = resolve_schema(d, plain, Some(SchemaSource::File(d.join("bad.json"))))
            .unwrap_err()
            .to_string();
        let want = format!(
            "Invalid input: --output-schema {}: not a valid JSON Schema: $.minProperties: ",
            d.join("bad.json").display()
        );
        assert!(err.starts_with(&want), "{err}");
        let err = resolve_schema(
            d,
            plain,
            Some(SchemaSource::Inline(serde_json::json!({"type": "thing"}))),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("Invalid input: outputSchema: not a valid JSON Schema: $.type: "),
            "{err}"
        );
        let err = resolve_schema(
            d,
            "---\nname: probe\noutput_schema: missing.json\n---\nP\n",
            None,
        )
        .unwrap_err()
        .to_string();
        let agents = d.join("agents");
        assert_eq!(
            err,
            format!(
                "Invalid input: agent probe: invalid `output_schema` in {}: {}: cannot read it: No such file or directory (os error 2)",
                agents.join("probe.md").display(),
                agents.join("missing.json").display()
            )
        );
    }

    #[test]
    fn a_total_cost_budget_caps_the_runs_own() {
        let cfg = Config::default();
        let agent = crate::agents::parse_agent_file(
            "---\nname: a\nmax_cost: 0.5\n---\n",
            std::path::Path::new("/x/a.md"),
            crate::agents::Scope::User,
        )
        .unwrap();
        let max_cost = |total: Option<f64>| {
            let flags = Values {
                max_total_cost: total.and_then(Usd::new),
                ..Values::default()
            };
            budgets(&cfg.under(&[&flags, &agent.settings])).max_cost
        };
        assert_eq!(max_cost(None), Some(0.5));
        assert_eq!(max_cost(Some(0.2)), Some(0.2));
        assert_eq!(max_cost(Some(3.0)), Some(0.5));
    }

    #[test]
    fn a_malformed_agent_file_is_named_rather_than_called_unknown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("broken.md"),
            "---\nname: broken\nbackend: cluade\n---\nP\n",
        )
        .unwrap();
        let req = RunRequest {
            agent: "broken".into(),
            task: "t".into(),
            cwd: Some(dir.path().to_path_buf()),
            agents_dir: Some(dir.path().to_path_buf()),
            ..RunRequest::default()
        };
        let env = RunEnv {
            depth: 0,
            config: Config::default(),
            state: StateDir {
                root: dir.path().join("state"),
            },
            total: None,
            inherited: Default::default(),
            scheduler: None,
            observe: crate::observe::Hub::none(),
            parent_run_id: None,
            group: None,
            fanout_id: None,
            parent: Default::default(),
        };
        let err = resolve(&req, &env, "ab12cd34").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "Invalid input: agent broken could not be read: {}:3: invalid `backend`: unknown backend \"cluade\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp, qwen-acp)",
                dir.path().join("broken.md").display()
            )
        );
    }
}
