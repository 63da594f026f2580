//! How the command line presents itself to a person, apart from its grammar (`cli`): the
//! groups of `run --help`, what kind of value each option takes (so that a shell completes
//! a duration with nothing rather than with file names), and the values an option with a
//! fixed set of them offers.

use clap::ValueHint;

/// The groups of `run --help` and the options (by argument id: the field's name, or for a
/// setting its name in the settings table, `crate::settings`) in each; clap shows the groups in the order of their first option. Options not named
/// here stay under "Options".
const RUN_HELP_HEADINGS: &[(&str, &[&str])] = &[
    (
        "Several tasks",
        &[
            "tasks",
            "chain",
            "concurrency",
            "max_total_cost",
            "max_total_tokens",
        ],
    ),
    (
        "Child CLI",
        &[
            "backend",
            "model",
            "fallback_models",
            "retries",
            "cwd",
            "agents_dir",
            "runner",
        ],
    ),
    (
        "Time limits",
        &[
            "timeout",
            "idle_timeout",
            "tool_timeout",
            "connect_timeout",
            "queue_timeout",
            "kill_grace",
            "exit_grace",
        ],
    ),
    ("Budgets", &["max_turns", "max_tokens", "max_cost"]),
    (
        "Output",
        &[
            "output",
            "details",
            "output_schema",
            "max_bytes",
            "max_lines",
            "max_output_bytes",
        ],
    ),
    (
        "Sandbox and isolation",
        &["sandbox", "network", "isolation"],
    ),
    ("Background and resume", &["background", "resume"]),
];

/// Options whose value is a folder or a file, where clap would only know "a path".
const DIR_VALUES: &[(&str, &str)] = &[
    ("run", "cwd"),
    ("run", "agents_dir"),
    ("mcp", "agents_dir"),
    ("agents", "agents_dir"),
];
const FILE_VALUES: &[(&str, &str)] = &[("run", "output_schema")];

/// The whole command line as a person meets it: the grammar `cmd` (`crate::cli::Cli`'s)
/// with help headings and value hints. Parsing, help and completion all use it, through
/// `crate::cli::command`.
pub(crate) fn presented(cmd: clap::Command) -> clap::Command {
    present(cmd, &[])
}

/// `cmd` (reached through the subcommands `path`) and its subcommands, each argument
/// changed in place (clap lists headings and arguments in the order they were declared).
fn present(cmd: clap::Command, path: &[&str]) -> clap::Command {
    let name = cmd.get_name().to_string();
    let here: Vec<&str> = path.iter().copied().chain([name.as_str()]).collect();
    let sub = here.get(1).copied().unwrap_or_default();
    let mut cmd = cmd.mut_args(|a| describe(a, sub));
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for s in subs {
        cmd = cmd.mut_subcommand(&s, |c| present(c, &here));
    }
    cmd
}

/// One argument of subcommand `sub`: its heading in `run --help`, and what its value is.
fn describe(mut a: clap::Arg, sub: &str) -> clap::Arg {
    let id = a.get_id().as_str().to_string();
    if sub == "run" {
        if let Some((heading, _)) = RUN_HELP_HEADINGS
            .iter()
            .find(|(_, ids)| ids.contains(&id.as_str()))
        {
            a = a.help_heading(*heading);
        }
    }
    if DIR_VALUES.contains(&(sub, id.as_str())) {
        a = a.value_hint(ValueHint::DirPath);
    } else if FILE_VALUES.contains(&(sub, id.as_str())) {
        a = a.value_hint(ValueHint::FilePath);
    } else if !a.is_positional()
        && a.get_action().takes_values()
        && a.get_value_hint() == ValueHint::Unknown
        && a.get_possible_values().is_empty()
    {
        // A duration, a number, a model's name: no file names for these.
        a = a.value_hint(ValueHint::Other);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_command_line_is_well_formed_with_its_headings_and_hints() {
        command().debug_assert();
        // Every id the tables name is an argument of its subcommand.
        let cmd = command();
        let has = |sub: &str, id: &str| {
            cmd.find_subcommand(sub)
                .is_some_and(|c| c.get_arguments().any(|a| a.get_id() == id))
        };
        for (_, ids) in RUN_HELP_HEADINGS {
            for id in *ids {
                assert!(has("run", id), "run {id}");
            }
        }
        for (sub, id) in DIR_VALUES.iter().chain(FILE_VALUES) {
            assert!(has(sub, id), "{sub} {id}");
        }
    }

    #[test]
    fn every_option_value_says_what_it_is() {
        let cmd = command();
        let run = cmd.find_subcommand("run").unwrap();
        let hint = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap()
                .get_value_hint()
        };
        assert_eq!(
            [
                hint("cwd"),
                hint("output_schema"),
                hint("timeout"),
                hint("model")
            ],
            [
                ValueHint::DirPath,
                ValueHint::FilePath,
                ValueHint::Other,
                ValueHint::Other
            ]
        );
        let values = |id: &str| {
            run.get_arguments()
                .find(|a| a.get_id() == id)
                .unwrap()
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            values("backend"),
            [
                "auto",
                "claude",
                "pi",
                "codex",
                "gemini",
                "opencode",
                "cursor",
                "command",
                "acp",
                "gemini-acp",
                "opencode-acp",
                "claude-acp",
                "codex-acp",
                "pi-acp",
                "qwen-acp"
            ]
        );
        assert_eq!(values("permissions"), ["policy", "ask", "allow", "deny"]);
        assert_eq!(values("sandbox"), ["read-only", "workspace-write", "off"]);
        assert_eq!(values("network"), ["on", "off", "provider"]);
        assert_eq!(values("isolation"), ["worktree", "none"]);
        assert_eq!(values("output"), ["json", "text", "stream-json"]);
    }
}
