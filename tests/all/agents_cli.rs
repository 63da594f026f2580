//! `orchestrate agents`: discovery across scopes through the real binary, Claude Code
//! agent files unchanged, and a broken file reported without hiding the others.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use support::Sandbox;

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn agents_json(sb: &Sandbox, cwd: &std::path::Path, extra: &[&str]) -> Value {
    let mut args = vec!["agents", "--json"];
    args.extend_from_slice(extra);
    let out = sb.command(&args).current_dir(cwd).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn source_of(listing: &Value, name: &str) -> String {
    listing["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == json!(name))
        .unwrap_or_else(|| panic!("{name} not listed: {listing}"))["source"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn precedence_runs_from_flag_to_project_to_user_to_builtin() {
    let sb = Sandbox::new();
    let project = sb.work.join("repo");
    let nested = project.join("src/deep");
    std::fs::create_dir_all(&nested).unwrap();
    let def = |d: &str| format!("---\nname: explorer\ndescription: {d}\n---\nPrompt from {d}.\n");
    let layers = [
        sb.home.join(".pi/agent/agents/explorer.md"),
        sb.home.join(".claude/agents/explorer.md"),
        sb.home.join(".config/orchestrate/agents/explorer.md"),
        project.join(".pi/agents/explorer.md"),
        project.join(".claude/agents/explorer.md"),
        project.join(".orchestrate/agents/explorer.md"),
    ];
    let flag_dir = sb.root.path().join("flag-agents");
    write(&flag_dir.join("explorer.md"), &def("flag"));
    assert_eq!(
        source_of(&agents_json(&sb, &nested, &[]), "explorer"),
        "builtin"
    );
    for (i, path) in layers.iter().enumerate() {
        write(path, &def(&format!("layer {i}")));
        let listing = agents_json(&sb, &nested, &[]);
        assert_eq!(
            source_of(&listing, "explorer"),
            path.to_str().unwrap(),
            "layer {i} wins"
        );
    }
    let listing = agents_json(&sb, &nested, &["--agents-dir", flag_dir.to_str().unwrap()]);
    assert_eq!(
        source_of(&listing, "explorer"),
        flag_dir.join("explorer.md").to_str().unwrap()
    );
}

#[test]
fn a_claude_code_agent_file_works_and_a_broken_file_hides_nothing() {
    let sb = Sandbox::new();
    let dir = sb.work.join(".claude/agents");
    write(
        &dir.join("code-reviewer.md"),
        "---\nname: code-reviewer\ndescription: Reviews code. Use proactively after changes.\ntools: Read, Grep, Glob\nmodel: sonnet\ncolor: purple\n---\nYou review code.\n",
    );
    write(
        &dir.join("broken.md"),
        "---\nname: broken\ndescription: [unclosed\ntools: read\n---\nBody\n",
    );
    write(
        &dir.join("zz-good.md"),
        "---\nname: zz-good\ndescription: fine\n---\nBody\n",
    );
    let listing = agents_json(&sb, &sb.work, &[]);
    let mut reviewer = listing["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == json!("code-reviewer"))
        .unwrap()
        .clone();
    // Which CLI `auto` resolves to depends on what this machine has installed.
    assert_eq!(reviewer["backendAuto"], json!(true));
    assert!(reviewer["resolvedBackend"].is_string());
    let obj = reviewer.as_object_mut().unwrap();
    obj.remove("backendAuto");
    obj.remove("resolvedBackend");
    assert_eq!(
        reviewer,
        json!({"name": "code-reviewer", "description": "Reviews code. Use proactively after changes.",
               "tools": ["read", "grep", "find"], "model": "sonnet", "backend": null, "readonly": false,
               "enabled": true, "source": dir.join("code-reviewer.md").to_str().unwrap(), "scope": "project"})
    );
    source_of(&listing, "zz-good");
    source_of(&listing, "explorer");
    let problems = listing["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0]["file"],
        json!(dir.join("broken.md").to_str().unwrap())
    );
    // The YAML parser notices the unclosed flow sequence on the next line.
    assert_eq!(problems[0]["line"], json!(4));
    assert!(!problems[0]["reason"].as_str().unwrap().is_empty());

    // The text listing names the file, line and reason, and a run of another agent works.
    let out = sb.command(&["agents"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!("{}:4:", dir.join("broken.md").display())),
        "{text}"
    );
    let sb = sb.scenario("replay");
    let out = sb.run("x", &[]);
    assert_eq!(out.status, 0, "{}", out.stderr);
}

#[test]
fn a_backend_typo_is_listed_as_a_problem_with_its_file_and_line_and_the_run_names_it() {
    let sb = Sandbox::new();
    let file = sb.work.join(".orchestrate/agents/typo.md");
    write(
        &file,
        "---\nname: typo\ndescription: d\nbackend: cluade\n---\nP\n",
    );
    let listing = agents_json(&sb, &sb.work, &[]);
    assert_eq!(
        listing["problems"],
        json!([{"file": file.to_str().unwrap(), "line": 4,
                "reason": "invalid `backend`: unknown backend \"cluade\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp, qwen-acp)"}])
    );
    let out = sb.run_args(&["run", "typo", "t"]);
    assert_eq!(out.status, 2);
    assert_eq!(out.error_code(), "INVALID_INPUT");
    let message = out.json()["details"]["error"]["message"].clone();
    assert_eq!(
        message,
        json!(format!(
            "Invalid input: agent typo could not be read: {}:4: invalid `backend`: unknown backend \"cluade\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp, qwen-acp)",
            file.display()
        ))
    );
}
