//! The model a run resolves reaches the child's command line, for every backend, from
//! every layer of the precedence (flag > agent file > environment > project > user).
//! The fake agent stands in for each CLI and records its argv.

use crate::support;

use support::{fake_agent_bin, Sandbox};

/// Each backend and the flag its CLI takes the model with.
const BACKENDS: [(&str, &str); 6] = [
    ("pi", "--model"),
    ("claude", "--model"),
    ("codex", "-m"),
    ("gemini", "-m"),
    ("opencode", "-m"),
    ("cursor", "--model"),
];

/// A sandbox whose every CLI is the fake agent, with a `plain` agent that names no backend
/// or model and a `pinned` agent whose file says `model: model-from-agent`.
fn sandbox() -> Sandbox {
    let fake = fake_agent_bin();
    let mut sb = Sandbox::new();
    for (backend, _) in BACKENDS {
        sb = sb.set(
            &format!("ORCHESTRATE_{}_BIN", backend.to_ascii_uppercase()),
            fake.to_str().unwrap(),
        );
    }
    std::fs::write(
        sb.agents.join("plain.md"),
        "---\nname: plain\ndescription: no model, no backend\n---\nPrompt.\n",
    )
    .unwrap();
    std::fs::write(
        sb.agents.join("pinned.md"),
        "---\nname: pinned\ndescription: its own model\nmodel: model-from-agent\n---\nPrompt.\n",
    )
    .unwrap();
    std::fs::write(
        sb.agents.join("templated.md"),
        "---\nname: templated\ndescription: command backend\nbackend: command\ndialect: pi\n---\nPrompt.\n",
    )
    .unwrap();
    sb
}

fn write_project_config(sb: &Sandbox, text: &str) {
    let dir = sb.work.join(".orchestrate");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn write_user_config(sb: &Sandbox, text: &str) {
    let dir = sb.home.join(".config/orchestrate");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// The value after `flag` in the argv the child was started with, or None.
fn child_arg_after(sb: &Sandbox, flag: &str) -> Option<String> {
    let argv = sb.argv_json()["argv"].clone();
    let argv: Vec<String> = serde_json::from_value(argv).unwrap();
    let at = argv.iter().position(|a| a == flag)?;
    argv.get(at + 1).cloned()
}

/// Runs `agent` on every backend and returns the model each child was given.
fn models_given(sb: &Sandbox, agent: &str, extra: &[&str]) -> Vec<(String, Option<String>)> {
    BACKENDS
        .iter()
        .map(|(backend, flag)| {
            let _ = std::fs::remove_file(&sb.argv_file);
            let agents = sb.agents.to_str().unwrap();
            let mut args = vec![
                "run",
                agent,
                "say hi",
                "--agents-dir",
                agents,
                "--backend",
                backend,
            ];
            args.extend_from_slice(extra);
            let out = sb.run_args(&args);
            assert!(
                sb.argv_file.exists(),
                "{backend}: the child was not started: {}",
                out.stdout
            );
            (backend.to_string(), child_arg_after(sb, flag))
        })
        .collect()
}

fn everywhere(model: &str) -> Vec<(String, Option<String>)> {
    BACKENDS
        .iter()
        .map(|(b, _)| (b.to_string(), Some(model.to_string())))
        .collect()
}

#[test]
fn a_model_in_the_project_config_reaches_every_backend() {
    let sb = sandbox();
    write_project_config(&sb, "model = \"model-from-project\"\n");
    assert_eq!(
        models_given(&sb, "plain", &[]),
        everywhere("model-from-project")
    );
}

#[test]
fn a_model_in_the_user_config_reaches_every_backend() {
    let sb = sandbox();
    write_user_config(&sb, "model = \"model-from-user\"\n");
    assert_eq!(
        models_given(&sb, "plain", &[]),
        everywhere("model-from-user")
    );
}

#[test]
fn orchestrate_model_reaches_every_backend_and_beats_the_config_files() {
    let sb = sandbox().set("ORCHESTRATE_MODEL", "model-from-env");
    write_user_config(&sb, "model = \"model-from-user\"\n");
    write_project_config(&sb, "model = \"model-from-project\"\n");
    assert_eq!(
        models_given(&sb, "plain", &[]),
        everywhere("model-from-env")
    );
}

#[test]
fn the_agent_files_model_beats_the_environment_and_a_flag_beats_both() {
    let sb = sandbox().set("ORCHESTRATE_MODEL", "model-from-env");
    assert_eq!(
        models_given(&sb, "pinned", &[]),
        everywhere("model-from-agent")
    );
    assert_eq!(
        models_given(&sb, "pinned", &["--model", "model-from-flag"]),
        everywhere("model-from-flag")
    );
}

#[test]
fn no_model_anywhere_leaves_the_choice_to_the_cli() {
    let sb = sandbox();
    let none: Vec<(String, Option<String>)> = BACKENDS
        .iter()
        .map(|(b, _)| (b.to_string(), None))
        .collect();
    assert_eq!(models_given(&sb, "plain", &[]), none);
}

#[test]
fn a_model_in_the_config_fills_the_command_backends_template() {
    let fake = fake_agent_bin();
    let sb = sandbox().set(
        "ORCHESTRATE_COMMAND_TEMPLATE",
        &format!("{} --model {{model}} {{task}}", fake.display()),
    );
    write_project_config(&sb, "model = \"model-from-project\"\n");
    let agents = sb.agents.to_str().unwrap();
    sb.run_args(&["run", "templated", "say hi", "--agents-dir", agents]);
    assert_eq!(
        child_arg_after(&sb, "--model").as_deref(),
        Some("model-from-project")
    );
}
