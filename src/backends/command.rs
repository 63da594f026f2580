//! The generic `command` backend: any other CLI, from a command template and the name of
//! one of the dialects above.
//!
//! The template comes from the agent's `command:` key (else `ORCHESTRATE_COMMAND_TEMPLATE`)
//! and is split into arguments like a shell would, but no shell runs it: `{task}`,
//! `{system_prompt_file}` and `{model}` are replaced inside single arguments, so a task can
//! never inject another argument or command. The dialect comes from `dialect:` (else
//! `ORCHESTRATE_COMMAND_DIALECT`).

use std::ffi::OsString;

use super::{Backend, BackendError, BackendSpec, Invocation, InvocationInput};

pub(crate) static BACKEND: BackendSpec = BackendSpec {
    name: "command",
    aliases: &[],
    // The program is the template's first word.
    program: "",
    install_hint: "check the agent's `command:` template",
    auto: false,
    resumes: false,
    resumed_totals: super::SessionTotals::NONE,
    output_schema: super::SchemaRoute::Prompt,
    build,
    // Its agent names the dialect of its output.
    dialect: None,
    explain_exit: super::no_exit_meaning,
    transient_exit: super::no_transient_exit,
    // Whatever the template runs.
    provider: None,
    // Whatever the agent's command is: only the child's place and the workspace; any
    // provider's key.
    home: Some(|_| crate::sandbox::CliHome {
        env: super::any_provider_env(),
        ..Default::default()
    }),
    // Whatever the agent's command is: it has no known provider; `allow_hosts` names
    // what it may reach.
    provider_hosts: |_| Vec::new(),
};

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.trim().is_empty())
}

fn build(_program: OsString, input: &InvocationInput<'_>) -> Result<Invocation, BackendError> {
    let template = input
        .agent
        .command
        .clone()
        .or_else(|| env_value("ORCHESTRATE_COMMAND_TEMPLATE"))
        .ok_or_else(|| {
            BackendError::Command(format!(
                "a command template: set `command:` in {} or ORCHESTRATE_COMMAND_TEMPLATE",
                input.agent.source
            ))
        })?;
    let dialect = match input.agent.dialect {
        Some(d) => d,
        None => {
            let name = env_value("ORCHESTRATE_COMMAND_DIALECT").ok_or_else(|| {
                BackendError::Command(format!(
                    "a dialect: set `dialect:` ({}) in {} or ORCHESTRATE_COMMAND_DIALECT",
                    super::dialect_names().join(", "),
                    input.agent.source
                ))
            })?;
            Backend::parse_dialect(&name).map_err(|e| {
                BackendError::Command(format!(
                    "a known dialect in ORCHESTRATE_COMMAND_DIALECT: {e}"
                ))
            })?
        }
    };
    let words = shlex::split(&template)
        .filter(|w| !w.is_empty())
        .ok_or_else(|| {
            BackendError::Command(format!("a command template that parses, not {template:?}"))
        })?;
    let prompt_file = if template.contains("{system_prompt_file}") {
        // An empty file rather than none, so the CLI's flag always gets a readable path.
        let path = input.run_dir.join("system-prompt.md");
        super::write_prompt_file(&path, &input.agent.system_prompt)?;
        Some(path)
    } else {
        None
    };
    let model = input.model();
    if template.contains("{model}") && model.is_none() {
        return Err(BackendError::Command(
            "a model: the template uses {model}; pass --model or set `model:`".to_string(),
        ));
    }
    let prompt_path = prompt_file.as_ref().map(|p| p.to_string_lossy());
    let values = [
        ("{task}", Some(input.task)),
        ("{model}", model),
        ("{system_prompt_file}", prompt_path.as_deref()),
    ];
    let mut args = words
        .into_iter()
        .map(|w| OsString::from(fill_placeholders(&w, &values)));
    let program = args.next().expect("non-empty template");
    let mut inv = Invocation::new(program, dialect);
    inv.args = args.collect();
    inv.prompt_files.extend(prompt_file);
    if !template.contains("{task}") {
        inv.warnings
            .push("the command template has no {task}: the task was not passed".to_string());
    }
    Ok(inv)
}

/// `word` with each placeholder of the template replaced by its value, in one pass from
/// left to right: a value is never searched again, so a `{model}` inside the task stays
/// as it is. A placeholder without a value (none here) is left as written.
fn fill_placeholders(word: &str, values: &[(&str, Option<&str>)]) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        rest = &rest[open..];
        match values
            .iter()
            .find(|(name, value)| value.is_some() && rest.starts_with(name))
        {
            Some((name, Some(value))) => {
                out.push_str(value);
                rest = &rest[name.len()..];
            }
            _ => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::test_support::{agent, args};
    use pretty_assertions::assert_eq;

    #[test]
    fn placeholders_fill_single_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = agent(&[], false, "Be terse.");
        a.command = Some(
            "mycli --json --model {model} --system '{system_prompt_file}' -- \"Task: {task}\""
                .into(),
        );
        a.dialect = Some(Backend::named("claude"));
        let task = "fix it; rm -rf / $(echo x)";
        let inv = build(
            OsString::new(),
            &InvocationInput {
                agent: &a,
                task,
                model: Some("m1"),
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        let prompt = dir.path().join("system-prompt.md");
        assert_eq!(inv.program, OsString::from("mycli"));
        assert_eq!(
            args(&inv),
            [
                "--json",
                "--model",
                "m1",
                "--system",
                prompt.to_str().unwrap(),
                "--",
                &format!("Task: {task}")
            ]
        );
        assert_eq!(inv.dialect, Backend::named("claude"));
        assert_eq!(std::fs::read_to_string(prompt).unwrap(), "Be terse.");
    }

    #[test]
    fn missing_pieces_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = agent(&[], false, "");
        let input = |a: &crate::backends::AgentBrief| {
            build(
                OsString::new(),
                &InvocationInput {
                    agent: a,
                    task: "t",
                    model: None,
                    run_dir: dir.path(),
                    resume: None,
                    max_cost: None,
                    outer_sandbox: false,
                    permissions: &crate::backends::permissions::PermissionPolicy::default(),
                    stdin_pipe: false,
                    output_schema: None,
                },
            )
            .map(|_| ())
            .unwrap_err()
            .to_string()
        };
        assert!(input(&a).contains("a command template"));
        a.command = Some("x {task}".into());
        assert!(input(&a).contains("a dialect"));
        a.dialect = Some(Backend::named("pi"));
        a.command = Some("x {model} {task}".into());
        assert!(input(&a).contains("a model"));
        a.command = Some("x 'unclosed".into());
        assert!(input(&a).contains("parses"));
    }

    #[test]
    fn placeholders_in_the_task_or_the_model_stay_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = agent(&[], false, "");
        a.command = Some("cli --model {model} --sys {system_prompt_file} {task}".into());
        a.dialect = Some(Backend::named("pi"));
        let task = "explain {model}, {system_prompt_file} and {task} in the template";
        let inv = build(
            OsString::new(),
            &InvocationInput {
                agent: &a,
                task,
                model: Some("{task}"),
                run_dir: dir.path(),
                resume: None,
                max_cost: None,
                outer_sandbox: false,
                permissions: &crate::backends::permissions::PermissionPolicy::default(),
                stdin_pipe: false,
                output_schema: None,
            },
        )
        .unwrap();
        let prompt = dir.path().join("system-prompt.md");
        assert_eq!(
            args(&inv),
            ["--model", "{task}", "--sys", prompt.to_str().unwrap(), task]
        );
    }
}
