use super::*;
use crate::backends::permissions::PermissionMode;
use crate::backends::{Backend, BackendChoice};
use crate::network::HostPattern;
use crate::result::{Network, SandboxMode};
use crate::runner::RunnerDef;
use crate::settings::Setting;
use crate::units::Usd;
use pretty_assertions::assert_eq;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    cwd: PathBuf,
    env: HashMap<String, String>,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("repo");
        let cwd = project.join("src/deep");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let mut env = HashMap::new();
        env.insert("HOME".to_string(), home.to_string_lossy().into_owned());
        Fixture {
            _tmp: tmp,
            home,
            project,
            cwd,
            env,
        }
    }

    fn user_file(&self) -> PathBuf {
        self.home.join(".config/orchestrate/config.toml")
    }

    fn project_file(&self) -> PathBuf {
        self.project.join(".orchestrate/config.toml")
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn set(&mut self, k: &str, v: &str) {
        self.env.insert(k.to_string(), v.to_string());
    }

    fn load(&self) -> Result<Config, ConfigError> {
        Config::load_with(&self.cwd, &|k| self.env.get(k).cloned())
    }

    fn error(&self) -> String {
        self.load().unwrap_err().to_string()
    }
}

#[test]
fn built_in_defaults_when_nothing_is_set() {
    let f = Fixture::new();
    let c = f.load().unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(
        c.to_json(),
        json!({
            "backend": {"value": "auto", "source": "default"},
            "model": {"value": null, "source": "default"},
            "timeout": {"value": "15m", "source": "default"},
            "idle_timeout": {"value": "3m", "source": "default"},
            "kill_grace": {"value": "5s", "source": "default"},
            "exit_grace": {"value": "2s", "source": "default"},
            "max_output_bytes": {"value": 67108864, "source": "default"},
            "max_bytes": {"value": 51200, "source": "default"},
            "max_lines": {"value": 2000, "source": "default"},
            "max_depth": {"value": 1, "source": "default"},
            "disabled": {"value": false, "source": "default"},
            "retries": {"value": 2, "source": "default"},
            "concurrency": {"value": 4, "source": "default"},
            "max_tasks": {"value": 16, "source": "default"},
            "adaptive_concurrency": {"value": true, "source": "default"},
            "tool_timeout": {"value": "10m", "source": "default"},
            "connect_timeout": {"value": "1m", "source": "default"},
            "max_turns": {"value": null, "source": "default"},
            "max_tokens": {"value": null, "source": "default"},
            "max_cost": {"value": null, "source": "default"},
            "max_total_cost": {"value": null, "source": "default"},
            "max_total_tokens": {"value": null, "source": "default"},
            "fallback_models": {"value": [], "source": "default"},
            "sandbox": {"value": "auto", "source": "default"},
            "network": {"value": "auto", "source": "default"},
            "allow_hosts": {"value": [], "source": "default"},
            "permissions": {"value": "policy", "source": "default"},
            "acp_command": {"value": null, "source": "default"},
            "runner": {"value": "local", "source": "default"},
            "queue_timeout": {"value": "10m", "source": "default"},
            "runners": {"value": {}, "source": "default"},
        })
    );
}

#[test]
fn every_layer_overrides_the_one_below() {
    let mut f = Fixture::new();
    let user = f.user_file();
    let project = f.project_file();
    // Each layer sets timeout; each lower layer also sets one key no higher layer sets,
    // so that a layer is seen to apply even where it is not the winner.
    f.write(
        &user,
        "timeout = \"1m\"\nbackend = \"claude\"\nmax_lines = 10\nretries = 5\n",
    );
    let c = f.load().unwrap();
    assert_eq!(
        c.timeout,
        Setting::new(Duration::from_secs(60), Source::User(user.clone()))
    );

    f.write(
        &project,
        "timeout = \"2m\"\nbackend = \"codex\"\nmax_lines = 20\n",
    );
    let c = f.load().unwrap();
    assert_eq!(
        c.timeout,
        Setting::new(Duration::from_secs(120), Source::Project(project.clone()))
    );

    f.set("ORCHESTRATE_TIMEOUT", "3m");
    f.set("ORCHESTRATE_BACKEND", "gemini");
    let mut c = f.load().unwrap();
    assert_eq!(
        c.timeout,
        Setting::new(Duration::from_secs(180), Source::Env("ORCHESTRATE_TIMEOUT"))
    );

    c.timeout = Setting::flag(Duration::from_secs(240));
    let expected = Config {
        backend: Setting::new(
            BackendChoice::Named(Backend::named("gemini")),
            Source::Env("ORCHESTRATE_BACKEND"),
        ),
        timeout: Setting::flag(Duration::from_secs(240)),
        max_lines: Setting::new(20, Source::Project(project.clone())),
        retries: Setting::new(5, Source::User(user.clone())),
        ..Config::default()
    };
    assert_eq!(c, expected);
    assert_eq!(
        c.to_json()["timeout"],
        json!({"value": "4m", "source": "flag"})
    );
    assert_eq!(
        c.to_json()["max_lines"],
        json!({"value": 20, "source": format!("project:{}", project.display())})
    );
}

#[test]
fn nearest_project_file_wins_and_xdg_config_home_replaces_dot_config() {
    let mut f = Fixture::new();
    let outer = f.project_file();
    f.write(&outer, "model = \"outer\"\n");
    let inner = f.project.join("src/.orchestrate/config.toml");
    f.write(&inner, "model = \"inner\"\n");
    let xdg = f.home.join("xdg");
    let user = xdg.join("orchestrate/config.toml");
    f.write(&user, "model = \"user\"\nmax_depth = 0\n");
    // Ignored while XDG_CONFIG_HOME is set.
    f.write(&f.user_file(), "max_depth = 7\n");
    f.set("XDG_CONFIG_HOME", xdg.to_str().unwrap());
    let c = f.load().unwrap();
    assert_eq!(
        (c.model, c.max_depth),
        (
            Setting::new(Some("inner".to_string()), Source::Project(inner)),
            Setting::new(0, Source::User(user))
        )
    );
}

#[test]
fn every_key_reads_from_a_file_and_from_the_environment() {
    let mut f = Fixture::new();
    let p = f.project_file();
    f.write(
        &p,
        r#"
backend = "pi"
model = "claude-haiku-4-5"
timeout = "1h30m"
idle_timeout = "90s"
kill_grace = 0
exit_grace = "500ms"
max_output_bytes = 1000
max_bytes = 2000
max_lines = 30
max_depth = 2
disabled = true
retries = 3
concurrency = 256
max_tasks = 4096
adaptive_concurrency = false
tool_timeout = "5m"
connect_timeout = "30s"
max_turns = 12
max_tokens = 200000
max_cost = 0.5
max_total_cost = "$2"
max_total_tokens = 1000000
fallback_models = ["claude-sonnet-4-5", "gpt-5.5"]
sandbox = "read-only"
network = "off"
allow_hosts = ["pypi.org", "*.github.com"]
permissions = "deny"
acp_command = "my-agent --acp"
runner = "gpu"
queue_timeout = "2m"
[runners.gpu]
kind = "slurm"
args = ["--partition=gpu", "--time=30"]
"#,
    );
    let src = || Source::Project(p.clone());
    assert_eq!(
        f.load().unwrap(),
        Config {
            backend: Setting::new(BackendChoice::Named(Backend::named("pi")), src()),
            model: Setting::new(Some("claude-haiku-4-5".into()), src()),
            timeout: Setting::new(Duration::from_secs(5400), src()),
            idle_timeout: Setting::new(Duration::from_secs(90), src()),
            kill_grace: Setting::new(Duration::ZERO, src()),
            exit_grace: Setting::new(Duration::from_millis(500), src()),
            max_output_bytes: Setting::new(1000, src()),
            max_bytes: Setting::new(2000, src()),
            max_lines: Setting::new(30, src()),
            max_depth: Setting::new(2, src()),
            disabled: Setting::new(true, src()),
            retries: Setting::new(3, src()),
            concurrency: Setting::new(256, src()),
            max_tasks: Setting::new(4096, src()),
            adaptive_concurrency: Setting::new(false, src()),
            tool_timeout: Setting::new(Duration::from_secs(300), src()),
            connect_timeout: Setting::new(Duration::from_secs(30), src()),
            max_turns: Setting::new(Some(12), src()),
            max_tokens: Setting::new(Some(200_000), src()),
            max_cost: Setting::new(Usd::new(0.5), src()),
            max_total_cost: Setting::new(Usd::new(2.0), src()),
            max_total_tokens: Setting::new(Some(1_000_000), src()),
            fallback_models: Setting::new(
                vec!["claude-sonnet-4-5".into(), "gpt-5.5".into()],
                src()
            ),
            sandbox: Setting::new(Some(SandboxMode::ReadOnly), src()),
            network: Setting::new(Some(Network::Off), src()),
            allow_hosts: Setting::new(
                vec![
                    HostPattern::parse("pypi.org").unwrap(),
                    HostPattern::parse("*.github.com").unwrap(),
                ],
                src(),
            ),
            permissions: Setting::new(PermissionMode::Deny, src()),
            acp_command: Setting::new(Some("my-agent --acp".into()), src()),
            runner: Setting::new("gpu".into(), src()),
            queue_timeout: Setting::new(Duration::from_secs(120), src()),
            runners: Setting::new(gpu_runner(), src()),
            ..Config::default()
        }
    );

    let vars = [
        ("ORCHESTRATE_BACKEND", "claude"),
        ("ORCHESTRATE_MODEL", "gpt-5"),
        ("ORCHESTRATE_TIMEOUT", "2500ms"),
        ("ORCHESTRATE_IDLE_TIMEOUT", "1m5s"),
        ("ORCHESTRATE_KILL_GRACE", "1s"),
        ("ORCHESTRATE_EXIT_GRACE", "0"),
        ("ORCHESTRATE_MAX_OUTPUT_BYTES", "4096"),
        ("ORCHESTRATE_MAX_BYTES", " 100 "),
        ("ORCHESTRATE_MAX_LINES", "5"),
        ("ORCHESTRATE_MAX_DEPTH", "0"),
        ("ORCHESTRATE_DISABLED", "off"),
        ("ORCHESTRATE_RETRIES", "1"),
        ("ORCHESTRATE_CONCURRENCY", "1"),
        ("ORCHESTRATE_MAX_TASKS", "1"),
        ("ORCHESTRATE_ADAPTIVE_CONCURRENCY", "true"),
        ("ORCHESTRATE_TOOL_TIMEOUT", "90s"),
        ("ORCHESTRATE_CONNECT_TIMEOUT", "10s"),
        ("ORCHESTRATE_MAX_TURNS", "3"),
        ("ORCHESTRATE_MAX_TOKENS", "5000"),
        ("ORCHESTRATE_MAX_COST", "$0.25"),
        ("ORCHESTRATE_MAX_TOTAL_COST", "1"),
        ("ORCHESTRATE_MAX_TOTAL_TOKENS", "50000"),
        ("ORCHESTRATE_FALLBACK_MODELS", "a, b,"),
        ("ORCHESTRATE_SANDBOX", "auto"),
        ("ORCHESTRATE_NETWORK", "provider"),
        ("ORCHESTRATE_PERMISSIONS", "allow"),
        ("ORCHESTRATE_ACP_COMMAND", "other-agent"),
        ("ORCHESTRATE_ALLOW_HOSTS", "docs.rs, *.crates.io"),
        ("ORCHESTRATE_RUNNER", "slurm"),
        ("ORCHESTRATE_QUEUE_TIMEOUT", "30s"),
    ];
    for (k, v) in vars {
        f.set(k, v);
    }
    assert_eq!(
        f.load().unwrap(),
        Config {
            backend: Setting::new(
                BackendChoice::Named(Backend::named("claude")),
                Source::Env("ORCHESTRATE_BACKEND")
            ),
            model: Setting::new(Some("gpt-5".into()), Source::Env("ORCHESTRATE_MODEL")),
            timeout: Setting::new(
                Duration::from_millis(2500),
                Source::Env("ORCHESTRATE_TIMEOUT")
            ),
            idle_timeout: Setting::new(
                Duration::from_secs(65),
                Source::Env("ORCHESTRATE_IDLE_TIMEOUT")
            ),
            kill_grace: Setting::new(
                Duration::from_secs(1),
                Source::Env("ORCHESTRATE_KILL_GRACE")
            ),
            exit_grace: Setting::new(Duration::ZERO, Source::Env("ORCHESTRATE_EXIT_GRACE")),
            max_output_bytes: Setting::new(4096, Source::Env("ORCHESTRATE_MAX_OUTPUT_BYTES")),
            max_bytes: Setting::new(100, Source::Env("ORCHESTRATE_MAX_BYTES")),
            max_lines: Setting::new(5, Source::Env("ORCHESTRATE_MAX_LINES")),
            max_depth: Setting::new(0, Source::Env("ORCHESTRATE_MAX_DEPTH")),
            disabled: Setting::new(false, Source::Env("ORCHESTRATE_DISABLED")),
            retries: Setting::new(1, Source::Env("ORCHESTRATE_RETRIES")),
            concurrency: Setting::new(1, Source::Env("ORCHESTRATE_CONCURRENCY")),
            max_tasks: Setting::new(1, Source::Env("ORCHESTRATE_MAX_TASKS")),
            adaptive_concurrency: Setting::new(
                true,
                Source::Env("ORCHESTRATE_ADAPTIVE_CONCURRENCY")
            ),
            tool_timeout: Setting::new(
                Duration::from_secs(90),
                Source::Env("ORCHESTRATE_TOOL_TIMEOUT")
            ),
            connect_timeout: Setting::new(
                Duration::from_secs(10),
                Source::Env("ORCHESTRATE_CONNECT_TIMEOUT")
            ),
            max_turns: Setting::new(Some(3), Source::Env("ORCHESTRATE_MAX_TURNS")),
            max_tokens: Setting::new(Some(5000), Source::Env("ORCHESTRATE_MAX_TOKENS")),
            max_cost: Setting::new(Usd::new(0.25), Source::Env("ORCHESTRATE_MAX_COST")),
            max_total_cost: Setting::new(Usd::new(1.0), Source::Env("ORCHESTRATE_MAX_TOTAL_COST")),
            max_total_tokens: Setting::new(
                Some(50_000),
                Source::Env("ORCHESTRATE_MAX_TOTAL_TOKENS")
            ),
            fallback_models: Setting::new(
                vec!["a".into(), "b".into()],
                Source::Env("ORCHESTRATE_FALLBACK_MODELS")
            ),
            sandbox: Setting::new(None, Source::Env("ORCHESTRATE_SANDBOX")),
            network: Setting::new(Some(Network::Provider), Source::Env("ORCHESTRATE_NETWORK")),
            // A list of hosts adds up: the file's, then the environment's.
            allow_hosts: Setting::new(
                vec![
                    HostPattern::parse("pypi.org").unwrap(),
                    HostPattern::parse("*.github.com").unwrap(),
                    HostPattern::parse("docs.rs").unwrap(),
                    HostPattern::parse("*.crates.io").unwrap(),
                ],
                Source::Env("ORCHESTRATE_ALLOW_HOSTS"),
            ),
            permissions: Setting::new(
                PermissionMode::Allow,
                Source::Env("ORCHESTRATE_PERMISSIONS"),
            ),
            acp_command: Setting::new(
                Some("other-agent".into()),
                Source::Env("ORCHESTRATE_ACP_COMMAND"),
            ),
            runner: Setting::new("slurm".into(), Source::Env("ORCHESTRATE_RUNNER")),
            queue_timeout: Setting::new(
                Duration::from_secs(30),
                Source::Env("ORCHESTRATE_QUEUE_TIMEOUT")
            ),
            // Named runners come from files only.
            runners: Setting::new(gpu_runner(), src()),
            ..Config::default()
        }
    );
}

fn gpu_runner() -> BTreeMap<String, RunnerDef> {
    BTreeMap::from([(
        "gpu".to_string(),
        RunnerDef {
            kind: crate::runner::Kind::parse("slurm").unwrap(),
            args: vec!["--partition=gpu".into(), "--time=30".into()],
        },
    )])
}

#[test]
fn an_empty_environment_variable_counts_as_unset() {
    let mut f = Fixture::new();
    f.write(&f.user_file(), "retries = 4\n");
    f.set("ORCHESTRATE_RETRIES", "  ");
    assert_eq!(
        f.load().unwrap().retries,
        Setting::new(4, Source::User(f.user_file()))
    );
}

#[test]
fn bad_file_values_name_the_file_the_key_and_the_reason() {
    let cases = [
        (
            "timeout = \"soon\"",
            "key `timeout`: invalid duration \"soon\": each unit needs a number before it (e.g. 90s, 15m, 1h30m or 500ms)",
        ),
        (
            "timeout = \"5\"",
            "key `timeout`: invalid duration \"5\": a number needs a unit: did you mean 5s? (units: ms, s, m, h, d)",
        ),
        (
            "timeout = 120000",
            "key `timeout`: invalid duration 120000: a number needs a unit: did you mean 120000s? (units: ms, s, m, h, d)",
        ),
        ("timeout = 0", "key `timeout`: must be greater than zero (leave it out for the default)"),
        ("idle_timeout = \"0s\"", "key `idle_timeout`: must be greater than zero (leave it out for the default)"),
        ("kill_grace = -5", "key `kill_grace`: must not be negative (got -5)"),
        (
            "exit_grace = 1.5",
            "key `exit_grace`: invalid duration 1.5: a number needs a unit: did you mean 1.5s? (units: ms, s, m, h, d)",
        ),
        (
            "exit_grace = [1]",
            "key `exit_grace`: expected a duration (e.g. 90s, 15m, 1h30m or 500ms), got a list",
        ),
        ("backend = 3", "key `backend`: expected text, got 3"),
        (
            "backend = \"nope\"",
            "key `backend`: unknown backend \"nope\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp, qwen-acp)",
        ),
        ("model = \"  \"", "key `model`: must not be empty"),
        ("max_output_bytes = 0", "key `max_output_bytes`: expected a whole number of at least 1, got 0"),
        ("max_bytes = \"50k\"", "key `max_bytes`: expected a whole number of at least 1, got \"50k\""),
        ("max_lines = -1", "key `max_lines`: expected a whole number of at least 1, got -1"),
        ("max_depth = -1", "key `max_depth`: expected a whole number from 0 to 4294967295, got -1"),
        ("max_depth = 4294967296", "key `max_depth`: expected a whole number from 0 to 4294967295, got 4294967296"),
        ("disabled = \"yes\"", "key `disabled`: expected true or false, got \"yes\""),
        ("retries = 0", "key `retries`: expected a whole number from 1 to 4294967295, got 0"),
        ("concurrency = 257", "key `concurrency`: expected a whole number from 1 to 256, got 257"),
        ("concurrency = 0", "key `concurrency`: expected a whole number from 1 to 256, got 0"),
        ("max_tasks = 4097", "key `max_tasks`: expected a whole number from 1 to 4096, got 4097"),
        ("max_tasks = [1]", "key `max_tasks`: expected a whole number from 1 to 4096, got a list"),
    ];
    for (toml_text, reason) in cases {
        let f = Fixture::new();
        let p = f.project_file();
        f.write(&p, &format!("{toml_text}\n"));
        assert_eq!(
            f.error(),
            format!("{}: {reason}", p.display()),
            "for {toml_text}"
        );
    }
}

#[test]
fn bad_environment_values_name_the_variable_and_the_reason() {
    let cases = [
        (
            "ORCHESTRATE_TIMEOUT",
            "x",
            "invalid duration \"x\": each unit needs a number before it (e.g. 90s, 15m, 1h30m or 500ms)",
        ),
        (
            "ORCHESTRATE_TIMEOUT",
            "2500",
            "invalid duration \"2500\": a number needs a unit: did you mean 2500s? (units: ms, s, m, h, d)",
        ),
        ("ORCHESTRATE_IDLE_TIMEOUT", "0", "must be greater than zero (leave it out for the default)"),
        ("ORCHESTRATE_KILL_GRACE", "-1s", "invalid duration \"-1s\": each unit needs a number before it (e.g. 90s, 15m, 1h30m or 500ms)"),
        ("ORCHESTRATE_MAX_OUTPUT_BYTES", "64MiB", "expected a whole number of at least 1, got \"64MiB\""),
        ("ORCHESTRATE_MAX_BYTES", "0", "expected a whole number of at least 1, got \"0\""),
        ("ORCHESTRATE_MAX_LINES", "-3", "expected a whole number of at least 1, got \"-3\""),
        ("ORCHESTRATE_MAX_DEPTH", "-1", "expected a whole number from 0 to 4294967295, got \"-1\""),
        ("ORCHESTRATE_DISABLED", "maybe", "expected true or false, got \"maybe\""),
        ("ORCHESTRATE_RETRIES", "0", "expected a whole number from 1 to 4294967295, got \"0\""),
        ("ORCHESTRATE_CONCURRENCY", "300", "expected a whole number from 1 to 256, got \"300\""),
        ("ORCHESTRATE_MAX_TASKS", "1.5", "expected a whole number from 1 to 4096, got \"1.5\""),
        ("ORCHESTRATE_TOOL_TIMEOUT", "0", "must be greater than zero (leave it out for the default)"),
        ("ORCHESTRATE_MAX_TURNS", "0", "expected a whole number of at least 1, got \"0\""),
        ("ORCHESTRATE_MAX_COST", "free", "expected an amount of US dollars greater than 0, such as 0.50, got \"free\""),
        ("ORCHESTRATE_MAX_TOTAL_COST", "-1", "expected an amount of US dollars greater than 0, such as 0.50, got \"-1\""),
        (
            "ORCHESTRATE_RUNNERS",
            "gpu",
            "named runners are set in a config file ([runners.NAME] with kind and args), not in the environment",
        ),
    ];
    for (var, value, reason) in cases {
        let mut f = Fixture::new();
        f.set(var, value);
        assert_eq!(
            f.error(),
            format!("environment variable {var}={value:?}: {reason}")
        );
    }
}

#[test]
fn a_toml_syntax_error_gives_line_and_column() {
    let f = Fixture::new();
    let p = f.user_file();
    f.write(&p, "backend = \"pi\"\n\ntimeout = 15m\n");
    match f.load().unwrap_err() {
        ConfigError::Syntax {
            path,
            line,
            column,
            message,
        } => {
            assert_eq!((path, line, column), (p.clone(), 3, 11));
            assert!(!message.is_empty());
            assert_eq!(
                f.error(),
                format!("{}:3:11: invalid TOML: {message}", p.display())
            );
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn a_duplicate_key_is_a_syntax_error() {
    let f = Fixture::new();
    let p = f.project_file();
    f.write(&p, "retries = 1\nretries = 2\n");
    let e = f.error();
    assert!(e.starts_with(&format!("{}:2:", p.display())), "{e}");
}

#[test]
fn unknown_keys_and_tables_are_tolerated() {
    let f = Fixture::new();
    let p = f.project_file();
    f.write(&p, "retries = 3\ntimeout_ms = 5\n[mcp]\nport = 1\n");
    assert_eq!(
        f.load().unwrap(),
        Config {
            retries: Setting::new(3, Source::Project(p.clone())),
            ..Config::default()
        }
    );
}

#[test]
fn an_unreadable_config_path_is_an_error_naming_it() {
    let f = Fixture::new();
    // A folder where the file should be cannot be read as one.
    std::fs::create_dir_all(f.user_file()).unwrap();
    let e = f.error();
    assert!(
        e.starts_with(&format!(
            "{}: cannot read the config file: ",
            f.user_file().display()
        )),
        "{e}"
    );
}

#[test]
fn line_column_counts_characters() {
    assert_eq!(line_column("a\nbé = x", 6), (2, 4));
    assert_eq!(line_column("abc", 0), (1, 1));
    assert_eq!(line_column("abc", 99), (1, 4));
}
