//! Shell completion. `orchestrate completions SHELL` prints a script that asks orchestrate
//! itself for each completion (`ORCHESTRATE_COMPLETE=SHELL orchestrate -- WORDS…`,
//! clap_complete's dynamic completion), so that agent names and run ids complete as well as subcommands,
//! flags and flag values; `--static` prints a script that needs no call back, without
//! agent names and run ids.
//!
//! clap_complete's dynamic completion is behind its `unstable-dynamic` feature: the
//! protocol between the printed script and the binary may change between its releases,
//! which is why the crate is pinned to one version and the README says to regenerate the
//! script after an update.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::StyledStr;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::{EnvCompleter, Shells};
use clap_complete::{CompleteEnv, Shell};

use crate::agents::{self, DiscoveryOptions};
use crate::history;
use crate::result::exit_status;
use crate::session::{RunId, StateDir};

/// The variable that turns a run of orchestrate into a completion request. Not clap's
/// default `COMPLETE`: orchestrate runs in whatever environment a parent agent has, and a
/// `COMPLETE` set there for something else must not turn a run into a completion.
const COMPLETE_VAR: &str = "ORCHESTRATE_COMPLETE";
/// How many run ids are offered, newest first.
const RUN_ID_CANDIDATES: usize = 200;
/// How much of a task a run id's description shows.
const TASK_CHARS_IN_DESCRIPTION: usize = 60;

/// Answers a completion request (`ORCHESTRATE_COMPLETE=bash orchestrate -- orchestrate run
/// ex`) and
/// exits, when this run of orchestrate is one; returns otherwise. Called before anything
/// is parsed or printed.
pub fn answer_if_asked() {
    CompleteEnv::with_factory(completing_command)
        .var(COMPLETE_VAR)
        .complete();
}

/// The command line with what only completion needs: where agent names and run ids come
/// from. (Arguments are changed in place: `mut_arg` would move a positional one behind the
/// others.)
fn completing_command() -> clap::Command {
    fn candidates(sub: &'static str) -> impl FnMut(clap::Arg) -> clap::Arg {
        move |a| match (sub, a.get_id().as_str()) {
            ("run", "agent") | ("runs", "agent") => {
                a.add(ArgValueCandidates::new(agent_candidates))
            }
            ("run", "resume") | (_, "run_id") if !a.is_hide_set() => {
                a.add(ArgValueCandidates::new(run_id_candidates))
            }
            _ => a,
        }
    }
    crate::cli::command()
        .mut_subcommand("run", |c| c.mut_args(candidates("run")))
        .mut_subcommand("runs", |c| c.mut_args(candidates("runs")))
        .mut_subcommand("wait", |c| c.mut_args(candidates("wait")))
        .mut_subcommand("stop", |c| c.mut_args(candidates("stop")))
        .mut_subcommand("show", |c| c.mut_args(candidates("show")))
        .mut_subcommand("worktree", |c| {
            c.mut_subcommand("rm", |c| c.mut_args(candidates("rm")))
        })
}

/// The agents a run here could use, with their descriptions.
fn agent_candidates() -> Vec<CompletionCandidate> {
    let Ok(cwd) = std::env::current_dir() else {
        return Vec::new();
    };
    let catalog = agents::discover(&DiscoveryOptions::from_env(cwd, None));
    catalog
        .agents()
        .map(|a| {
            CompletionCandidate::new(a.name.clone())
                .help(Some(StyledStr::from(a.description.clone())))
        })
        .collect()
}

/// Recorded runs, newest first (described by agent, status and task), then background
/// runs that have no result yet.
fn run_id_candidates() -> Vec<CompletionCandidate> {
    let Ok(state) = StateDir::from_env() else {
        return Vec::new();
    };
    let index = history::read_index(&state).unwrap_or_default();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for e in history::newest_first(&index.entries) {
        if seen.contains(&e.run_id) || RunId::parse(&e.run_id).is_err() {
            continue;
        }
        seen.push(e.run_id.clone());
        let task = e.task.as_deref().unwrap_or_default();
        let task = task.lines().next().unwrap_or_default();
        let task: String = task.chars().take(TASK_CHARS_IN_DESCRIPTION).collect();
        let help = format!("{} {} {task}", e.agent, history::status(e).as_str());
        out.push(
            CompletionCandidate::new(e.run_id.clone())
                .help(Some(StyledStr::from(help.trim_end().to_string()))),
        );
        if out.len() == RUN_ID_CANDIDATES {
            return out;
        }
    }
    for (id, _) in crate::background::unfinished(&state) {
        if !seen.contains(&id) {
            out.push(CompletionCandidate::new(id).help(Some(StyledStr::from("background"))));
        }
    }
    out
}

/// `orchestrate completions SHELL [--static]`: the script on stdout.
pub fn completions(shell: Shell, standalone: bool) -> i32 {
    let mut script = Vec::new();
    let written = if standalone {
        let mut cmd = visible_only(&crate::cli::command());
        clap_complete::generate(shell, &mut cmd, "orchestrate", &mut script);
        Ok(())
    } else {
        registration(shell, &mut script)
    };
    if let Err(e) = written {
        eprintln!("orchestrate: cannot write the {shell} completion script: {e}");
        return exit_status::FAILURE;
    }
    // A closed pipe (`… | head`) is the reader's choice, not a failure worth a panic.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

/// The script `ORCHESTRATE_COMPLETE=SHELL orchestrate` prints: it calls this very binary back (by
/// the name it was run as, made absolute when it was run by a path).
fn registration(shell: Shell, out: &mut Vec<u8>) -> std::io::Result<()> {
    let name = shell.to_string();
    let shells = Shells::builtins();
    let completer: &dyn EnvCompleter = shells
        .completer(&name)
        .ok_or_else(|| std::io::Error::other(format!("no dynamic completion for {name}")))?;
    let argv0 = PathBuf::from(
        std::env::args_os()
            .next()
            .unwrap_or(OsString::from("orchestrate")),
    );
    let program = if argv0.components().count() > 1 {
        std::path::absolute(&argv0).unwrap_or(argv0)
    } else {
        argv0
    };
    completer.write_registration(
        COMPLETE_VAR,
        "orchestrate",
        "orchestrate",
        &program.to_string_lossy(),
        out,
    )
}

/// `cmd` without its hidden arguments and subcommands, for the standalone scripts, whose
/// generators would offer them.
fn visible_only(cmd: &clap::Command) -> clap::Command {
    let mut built = cmd.clone();
    built.build();
    copy_visible(&built)
}

fn copy_visible(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(cmd.get_name().to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .visible_aliases(cmd.get_visible_aliases().map(str::to_string));
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_string());
    }
    out = out.args(cmd.get_arguments().filter(|a| !a.is_hide_set()).cloned());
    out.subcommands(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(copy_visible),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standalone(shell: Shell) -> String {
        let mut cmd = visible_only(&crate::cli::command());
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd, "orchestrate", &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn standalone_scripts_offer_flag_values_and_no_hidden_flag() {
        let bash = standalone(Shell::Bash);
        assert!(bash.contains("_orchestrate()"), "{bash}");
        for values in [
            "\"auto claude pi codex gemini opencode cursor command acp gemini-acp opencode-acp claude-acp codex-acp pi-acp qwen-acp\"",
            "\"read-only workspace-write off\"",
            "\"on off provider\"",
            "\"worktree none\"",
            "\"json text stream-json\"",
        ] {
            assert!(bash.contains(values), "bash: {values}");
        }
        let zsh = standalone(Shell::Zsh);
        assert!(zsh.contains("#compdef orchestrate"), "{zsh}");
        for values in [
            ":BACKEND:(auto claude pi codex gemini opencode cursor command acp gemini-acp opencode-acp claude-acp codex-acp pi-acp qwen-acp)",
            ":SANDBOX:(read-only workspace-write off)",
            ":NETWORK:(on off provider)",
            ":ISOLATION:(worktree none)",
            ":OUTPUT:(json text stream-json)",
        ] {
            assert!(zsh.contains(values), "zsh: {values}");
        }
        let fish = standalone(Shell::Fish);
        for values in [
            "-l backend -d 'The child CLI; auto: the first installed of claude, pi, codex, gemini, opencode, cursor-agent' -r -f -a \"auto\\t''",
            "-l sandbox",
            "-a \"read-only\\t''",
            "-l network",
            "-l isolation",
        ] {
            assert!(fish.contains(values), "fish: {values}\n{fish}");
        }
        for (shell, script) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
            assert!(
                !script.contains("run-id"),
                "{shell} offers the hidden --run-id"
            );
            assert!(script.contains("--idle-timeout") || script.contains("-l idle-timeout"));
        }
        // A duration completes as nothing, not as file names.
        let timeout = bash.split("--timeout)").nth(1).unwrap();
        assert!(
            timeout.trim_start().starts_with("COMPREPLY=(\"${cur}\")"),
            "{timeout}"
        );
    }
}
