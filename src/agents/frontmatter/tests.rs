use super::*;
use crate::backends::BackendChoice;
use crate::structured::SchemaSource;
use crate::units::Usd;
use pretty_assertions::assert_eq;
use std::path::PathBuf;
use std::time::Duration;

fn path() -> PathBuf {
    PathBuf::from("/proj/.orchestrate/agents/explorer.md")
}

fn parse(text: &str) -> Result<AgentDef, AgentProblem> {
    parse_agent_file(text, &path(), Scope::Project)
}

fn problem(text: &str) -> (Option<usize>, String) {
    let p = parse(text).expect_err("expected a problem");
    assert_eq!(p.file, path());
    (p.line, p.reason)
}

#[test]
fn full_orchestrate_file() {
    let text = "\
---
name: explorer
description: Read-only codebase exploration; answers \"where is X / how does Y work\".
tools: read, grep, find, ls          # comma string or YAML list
model: claude-haiku-4-5
backend: pi
timeout: 10m
idle_timeout: 90s
max_turns: 12
max_tokens: 200_000
max_cost: 0.50
tool_timeout: 5m
connect_timeout: 30s
fallback_models: [claude-sonnet-4-5, gpt-5.5]
runner: gpu
queue_timeout: 5m
readonly: true
enabled: true
---

You are a fast, read-only code explorer.

Be precise.

";
    assert_eq!(
        parse(text).unwrap(),
        AgentDef {
            name: "explorer".into(),
            description:
                "Read-only codebase exploration; answers \"where is X / how does Y work\".".into(),
            tools: vec![Tool::Read, Tool::Grep, Tool::Find, Tool::Ls],
            readonly: true,
            settings: Values {
                model: Some("claude-haiku-4-5".into()),
                backend: Some(BackendChoice::Named(Backend::named("pi"))),
                timeout: Some(Duration::from_secs(600)),
                idle_timeout: Some(Duration::from_secs(90)),
                max_turns: Some(12),
                max_tokens: Some(200_000),
                max_cost: Usd::new(0.5),
                tool_timeout: Some(Duration::from_secs(300)),
                connect_timeout: Some(Duration::from_secs(30)),
                fallback_models: Some(vec!["claude-sonnet-4-5".into(), "gpt-5.5".into()]),
                queue_timeout: Some(Duration::from_secs(300)),
                runner: Some("gpu".into()),
                ..Values::default()
            },
            command: None,
            dialect: None,
            enabled: true,
            system_prompt: "You are a fast, read-only code explorer.\n\nBe precise.".into(),
            source: AgentSource::File {
                path: path(),
                scope: Scope::Project,
            },
        }
    );
}

#[test]
fn claude_code_file_with_capitalized_tools_and_unknown_keys() {
    let text = "\
---
name: code-reviewer
description: Expert code review specialist. Use proactively after writing code.
tools: Read, Grep, Glob, Bash
model: sonnet
color: blue
permissionMode: default
---
You are a senior code reviewer.
";
    let p = PathBuf::from("/home/u/.claude/agents/code-reviewer.md");
    assert_eq!(
        parse_agent_file(text, &p, Scope::User).unwrap(),
        AgentDef {
            name: "code-reviewer".into(),
            description: "Expert code review specialist. Use proactively after writing code."
                .into(),
            tools: vec![Tool::Read, Tool::Grep, Tool::Find, Tool::Bash],
            readonly: false,
            settings: Values {
                model: Some("sonnet".into()),
                ..Values::default()
            },
            command: None,
            dialect: None,
            enabled: true,
            system_prompt: "You are a senior code reviewer.".into(),
            source: AgentSource::File {
                path: p.clone(),
                scope: Scope::User,
            },
        }
    );
}

#[test]
fn yaml_list_of_tools_keeps_order() {
    let def = parse("---\nname: x\ntools: [\"Read\", \"Grep\"]\n---\nbody").unwrap();
    assert_eq!(def.tools, vec![Tool::Read, Tool::Grep]);
    let def =
        parse("---\nname: x\ntools:\n  - bash\n  - \" read \"\n  - WebFetch\n---\nbody").unwrap();
    assert_eq!(
        def.tools,
        vec![Tool::Bash, Tool::Read, Tool::Native("WebFetch".into())]
    );
}

#[test]
fn crlf_and_bom() {
    let text = "\u{feff}---\r\nname: x\r\ndescription: d\r\nreadonly: \"1\"\r\n---\r\n\r\nline one\r\nline two\r\n";
    let def = parse(text).unwrap();
    assert_eq!(
        (def.name.as_str(), def.description.as_str(), def.readonly),
        ("x", "d", true)
    );
    assert_eq!(def.system_prompt, "line one\nline two");
}

#[test]
fn minimal_file_takes_name_from_stem_and_defaults_the_rest() {
    let def = parse("---\n---\n").unwrap();
    assert_eq!(
        def,
        AgentDef {
            name: "explorer".into(),
            description: String::new(),
            tools: vec![],
            readonly: false,
            settings: Values::default(),
            command: None,
            dialect: None,
            enabled: true,
            system_prompt: String::new(),
            source: AgentSource::File {
                path: path(),
                scope: Scope::Project,
            },
        }
    );
    // Empty values mean "not set", as in Claude Code files.
    let def = parse("---\nname: y\nmodel:\ntools:\nbackend: \"\"\n---\nb").unwrap();
    assert_eq!(
        (def.name.as_str(), def.settings.model, def.settings.backend),
        ("y", None, None)
    );
    assert!(def.tools.is_empty());
}

#[test]
fn aliases_and_spellings() {
    let def = parse(
            "---\ntimeoutMs: 120000\nidleTimeoutMs: \"30s\"\nmaxTurns: \"7\"\nreadonly: yes\nenabled: \"false\"\n---\n",
        )
        .unwrap();
    assert_eq!(
        (
            def.settings.timeout,
            def.settings.idle_timeout,
            def.settings.max_turns,
            def.readonly,
            def.enabled
        ),
        (
            Some(Duration::from_secs(120)),
            Some(Duration::from_secs(30)),
            Some(7),
            true,
            false
        )
    );
    let def = parse("---\ntimeout_ms: 5000\nidle_timeout_ms: 2000\n---\n").unwrap();
    assert_eq!(
        (def.settings.timeout, def.settings.idle_timeout),
        (Some(Duration::from_secs(5)), Some(Duration::from_secs(2)))
    );
    let def = parse("---\nidleTimeout: 1m\nreadonly: 0\n---\n").unwrap();
    assert_eq!(
        (def.settings.idle_timeout, def.readonly),
        (Some(Duration::from_secs(60)), false)
    );
}

#[test]
fn unquoted_colon_in_description_is_tolerated_like_claude_code() {
    let text = "---\nname: hunter\ndescription: Use this agent when: reviewing PRs. Examples: user: \"check it\"\ntools: Read, Grep\n---\nbody\n";
    let def = parse(text).unwrap();
    assert_eq!(
        def.description,
        "Use this agent when: reviewing PRs. Examples: user: \"check it\""
    );
    assert_eq!(def.tools, vec![Tool::Read, Tool::Grep]);
}

#[test]
fn missing_and_unterminated_front_matter() {
    assert_eq!(
        problem("# Explorer\n\nYou explore.\n"),
        (Some(1), MISSING_FRONT_MATTER.to_string())
    );
    assert_eq!(problem(""), (Some(1), MISSING_FRONT_MATTER.to_string()));
    assert_eq!(
        problem("---\nname: x\n\nbody without a closing line\n"),
        (
            Some(1),
            "unterminated front matter: the --- on line 1 has no closing --- line".into()
        )
    );
}

#[test]
fn yaml_syntax_error_reports_the_file_line() {
    let (line, reason) =
        problem("---\nname: x\ndescription: ok\ntools: [read, grep\nmodel: m\n---\nbody\n");
    assert_eq!(line, Some(5));
    assert!(
        reason.starts_with("invalid YAML in front matter: "),
        "{reason}"
    );
    // The message's own line numbers are file lines too.
    assert!(reason.contains("at line 5 column"), "{reason}");
    assert!(reason.contains("flow sequence at line 4"), "{reason}");

    let (line, reason) = problem("---\nname: x\n  oops: 1\n---\n");
    assert_eq!(line, Some(3), "{reason}");
}

#[test]
fn duplicate_yaml_key_points_at_the_second_occurrence() {
    let (line, reason) = problem("---\nname: x\nmodel: a\nmodel: b\n---\n");
    assert_eq!(line, Some(4));
    assert!(
        reason.contains("duplicate entry with key \"model\""),
        "{reason}"
    );
}

#[test]
fn front_matter_that_is_not_a_mapping() {
    assert_eq!(
        problem("---\n- a\n- b\n---\n"),
        (
            Some(2),
            "front matter must be YAML `key: value` lines, not a list".into()
        )
    );
}

#[test]
fn each_bad_value_names_the_key_and_its_line() {
    let cases: &[(&str, &str, usize, &str)] = &[
            ("timeout", "soon", 4, "invalid `timeout`: invalid duration \"soon\""),
            ("timeout", "0s", 4, "invalid `timeout`: must be greater than zero"),
            ("timeout", "5", 4, "invalid `timeout`: invalid duration 5: a number needs a unit: did you mean 5s?"),
            ("timeout", "\"90\"", 4, "invalid `timeout`: invalid duration \"90\": a number needs a unit: did you mean 90s?"),
            ("timeoutMs", "-5", 4, "invalid `timeoutMs`: expected a whole number of milliseconds, got -5"),
            ("idle_timeout", "[1]", 4, "invalid `idle_timeout`: expected a duration (e.g. 90s, 15m, 1h30m or 500ms), got a list"),
            ("max_turns", "-3", 4, "invalid `max_turns`: expected a whole number of at least 1, got -3"),
            ("maxTurns", "0", 4, "invalid `maxTurns`: expected a whole number of at least 1, got 0"),
            ("max_turns", "2.5", 4, "invalid `max_turns`: expected a whole number of at least 1, got 2.5"),
            ("max_tokens", "lots", 4, "invalid `max_tokens`: expected a whole number of at least 1, got \"lots\""),
            ("max_cost", "-1", 4, "invalid `max_cost`: expected an amount of US dollars greater than 0, such as 0.50, got -1"),
            ("maxCostUsd", "\"$0\"", 4, "invalid `maxCostUsd`: expected an amount of US dollars greater than 0, such as 0.50, got \"$0\""),
            ("tool_timeout", "0s", 4, "invalid `tool_timeout`: must be greater than zero"),
            ("connectTimeout", "soon", 4, "invalid `connectTimeout`: invalid duration \"soon\""),
            ("fallback_models", "{a: 1}", 4, "invalid `fallback_models`: expected a list of model names, or a comma-separated string of them, got a mapping"),
            ("tools", "5", 4, "invalid `tools`: expected a comma-separated string or a list of tool names, got 5"),
            ("tools", "[read, 3]", 4, "invalid `tools`: expected every list item to be a tool name, got 3"),
            ("tools", "{a: 1}", 4, "invalid `tools`: expected a comma-separated string or a list of tool names, got a mapping"),
            ("enabled", "maybe", 4, "invalid `enabled`: expected true or false, got \"maybe\""),
            ("enabled", "2", 4, "invalid `enabled`: expected true or false, got 2"),
            ("model", "[a, b]", 4, "invalid `model`: expected text, got a list"),
            ("backend", "true", 4, "invalid `backend`: expected text, got true"),
            ("description", "{x: 1}", 4, "invalid `description`: expected text, got a mapping"),
        ];
    for (key, value, line, reason) in cases {
        let text =
            format!("---\nname: x\n# a comment line\n{key}: {value}\nreadonly: false\n---\nbody\n");
        let (got_line, got_reason) = problem(&text);
        assert_eq!(got_line, Some(*line), "{key}: {value} -> {got_reason}");
        assert!(
            got_reason.starts_with(reason),
            "{key}: {value}\n  got:  {got_reason}\n  want: {reason}…"
        );
    }
}

#[test]
fn quoted_key_is_found_for_its_line() {
    assert_eq!(
        problem("---\nname: x\n\"max_turns\": nope\n---\n"),
        (
            Some(3),
            "invalid `max_turns`: expected a whole number of at least 1, got \"nope\"".into()
        )
    );
}

#[test]
fn two_aliases_set_is_a_problem() {
    assert_eq!(
        problem("---\ntimeout: 5m\ntimeoutMs: 1000\n---\n"),
        (
            Some(3),
            "`timeout` and `timeoutMs` are both set; keep one".into()
        )
    );
}

#[test]
fn the_first_problem_in_the_file_is_reported() {
    let (line, reason) = problem("---\nname: x\nenabled: maybe\ntimeout: soon\n---\n");
    assert_eq!(line, Some(3), "{reason}");
    assert!(reason.starts_with("invalid `enabled`"), "{reason}");
}

#[test]
fn bad_names() {
    assert_eq!(
        problem("---\ndescription: d\nname: \"  \"\n---\n"),
        (Some(3), "invalid `name`: the name is empty".into())
    );
    assert_eq!(
            problem("---\nname: my agent\n---\n"),
            (
                Some(2),
                "invalid `name`: \"my agent\" contains ' '; a name may only contain letters, digits, '.', '_' and '-'".into()
            )
        );
    assert_eq!(problem("---\nname: a/b\n---\n").0, Some(2));
    assert_eq!(
        problem("---\nname: [a]\n---\n"),
        (Some(2), "invalid `name`: expected text, got a list".into())
    );
    let p = parse_agent_file("---\n---\n", Path::new("/x/my agent.md"), Scope::User).unwrap_err();
    assert_eq!(p.line, None);
    assert!(
        p.reason
            .starts_with("no `name` key, and the file name does not make a valid one"),
        "{}",
        p.reason
    );
    // Numbers are fine as names and the allowed punctuation is kept.
    assert_eq!(parse("---\nname: 42\n---\n").unwrap().name, "42");
    assert_eq!(parse("---\nname: a.b_c-D\n---\n").unwrap().name, "a.b_c-D");
}

#[test]
fn an_output_schema_is_inline_yaml_or_a_path_next_to_the_agent_file() {
    let text = "---\nname: x\noutput_schema:\n  type: object\n  properties:\n    files: {type: array, items: {type: string}}\n    count: {type: integer, minimum: 0}\n  required: [files]\n---\nP\n";
    assert_eq!(
        parse(text).unwrap().settings.output_schema,
        Some(SchemaSource::Inline(serde_json::json!({
            "type": "object",
            "properties": {
                "files": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer", "minimum": 0}
            },
            "required": ["files"]
        })))
    );
    // A path is relative to the agent file's folder; an absolute one is kept.
    assert_eq!(
        parse("---\nname: x\noutputSchema: schemas/answer.json\n---\nP\n")
            .unwrap()
            .settings
            .output_schema,
        Some(SchemaSource::File(PathBuf::from(
            "/proj/.orchestrate/agents/schemas/answer.json"
        )))
    );
    assert_eq!(
        parse("---\nname: x\noutput_schema: /etc/s.json\n---\nP\n")
            .unwrap()
            .settings
            .output_schema,
        Some(SchemaSource::File(PathBuf::from("/etc/s.json")))
    );
}

#[test]
fn a_broken_inline_output_schema_is_a_problem_on_its_line() {
    let (line, reason) =
        problem("---\nname: x\noutput_schema:\n  type: object\n  required: yes\n---\nP\n");
    assert_eq!(line, Some(3), "{reason}");
    assert!(
        reason.starts_with("invalid `output_schema`: not a valid JSON Schema: $.required: "),
        "{reason}"
    );
    assert_eq!(
            problem("---\nname: x\noutput_schema: 5\n---\nP\n"),
            (
                Some(3),
                "invalid `output_schema`: expected a JSON Schema (a YAML mapping) or the path of a JSON Schema file, got 5".to_string()
            )
        );
}

#[test]
fn builtin_scope_gives_builtin_source() {
    let def = parse_agent_file("---\nname: x\n---\nb", Path::new("x.md"), Scope::Builtin).unwrap();
    assert_eq!(def.source, AgentSource::Builtin);
}

#[test]
fn body_keeps_inner_blank_lines_and_indentation() {
    let def = parse("---\nname: x\n---\n\n\n    indented\n\n  - item\n   \n\n").unwrap();
    assert_eq!(def.system_prompt, "    indented\n\n  - item");
    // A later --- is body text, not more front matter.
    let def = parse("---\nname: x\n---\na\n---\nb").unwrap();
    assert_eq!(def.system_prompt, "a\n---\nb");
}

#[test]
fn garbage_never_panics() {
    for text in [
        "---",
        "---\n",
        "---\n---",
        "---\n:\n---",
        "---\n{{{{\n---",
        "---\n\t\u{0}\n---",
        "---\n!!binary x\n---",
        "---\nname: *a\n---",
        "---\r\n---\r\n",
        "\u{feff}",
        "---\nname: [\n---\nname: ok\n---\n",
    ] {
        let _ = parse(text);
    }
}

#[test]
fn a_backend_or_dialect_typo_is_a_problem_on_its_line() {
    assert_eq!(
            problem("---\nname: x\ndescription: d\nbackend: cluade\n---\nP\n"),
            (
                Some(4),
                "invalid `backend`: unknown backend \"cluade\" (available: auto, claude, pi, codex, gemini, opencode, cursor, command, acp, gemini-acp, opencode-acp, claude-acp, codex-acp, pi-acp, qwen-acp)".to_string()
            )
        );
    assert_eq!(
            problem("---\nname: x\nbackend: command\ndialect: klingon\n---\nP\n"),
            (
                Some(4),
                "invalid `dialect`: unknown dialect \"klingon\" (available: claude, pi, codex, gemini, opencode, cursor)".to_string()
            )
        );
    let def = parse("---\nname: x\nbackend: claude-code\ndialect: codex\n---\nP\n").unwrap();
    assert_eq!(
        (def.settings.backend, def.dialect),
        (
            Some(BackendChoice::Named(Backend::named("claude"))),
            Some(Backend::named("codex"))
        )
    );
}

/// A hostile agent file must cost milliseconds, not the 40 s (release; minutes in a
/// debug build) that YAML parsing of 200 KB of `[` took. The bound is generous; the
/// speed itself is measured in `scripts/bench`.
#[test]
fn hostile_front_matter_is_a_problem_found_at_once() {
    let cases = [
        // The reported file: 200 KB of `[`.
        (
            format!("extra: {}", "[".repeat(200_000)),
            "front matter is 200016 bytes, more than the 65536 allowed",
        ),
        // Within the size bound, each way of nesting.
        (
            format!("extra: {}", "[".repeat(60_000)),
            "nests deeper than 32",
        ),
        (
            format!("extra: {}", "{a: ".repeat(15_000)),
            "nests deeper than 32",
        ),
        (
            format!("extra:\n  {}x", "- ".repeat(30_000)),
            "nests deeper than 32",
        ),
    ];
    for (front, why) in cases {
        let text = format!("---\nname: x\n{front}\n---\nBody.\n");
        let started = std::time::Instant::now();
        let err = parse(&text).unwrap_err();
        let took = started.elapsed();
        assert!(err.reason.contains(why), "{}", err.reason);
        assert!(
            took < std::time::Duration::from_secs(5),
            "{why}: took {took:?}"
        );
    }
}

#[test]
fn brackets_in_quotes_and_comments_and_shallow_nesting_are_fine() {
    let deep_ok = format!("{}x{}", "[".repeat(32), "]".repeat(32));
    let text = format!(
            "---\nname: x\ndescription: \"see [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ here\" # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n\
             tools: [read, grep]\nextra: {deep_ok}\nlist:\n  - - - a\n---\nBody.\n"
        );
    let def = parse(&text).unwrap();
    assert_eq!(def.tools.len(), 2);
}
