//! `orchestrate completions bash|zsh|fish|elvish|powershell`: a completion script on stdout.

use clap_complete::Shell;

use crate::result::exit_status;

/// `cmd` is the whole CLI (`Cli::command()`), so the script always matches the parser.
pub fn completions(shell: Shell, cmd: &mut clap::Command) -> i32 {
    let name = cmd
        .get_bin_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, name, &mut script);
    // A closed pipe (`… | head`) is the reader's choice, not a failure worth a panic.
    match std::io::Write::write_all(&mut std::io::stdout().lock(), &script) {
        Ok(()) => exit_status::SUCCESS,
        Err(_) => exit_status::FAILURE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli() -> clap::Command {
        clap::Command::new("orchestrate")
            .subcommand(
                clap::Command::new("run")
                    .arg(clap::Arg::new("agent"))
                    .arg(clap::Arg::new("timeout").long("timeout")),
            )
            .subcommand(clap::Command::new("runs"))
    }

    fn script(shell: Shell) -> String {
        let mut cmd = cli();
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd, "orchestrate", &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn scripts_name_the_subcommands_and_flags() {
        let bash = script(Shell::Bash);
        assert!(bash.contains("_orchestrate()"), "{bash}");
        assert!(bash.contains("orchestrate,run)"), "{bash}");
        assert!(bash.contains("--timeout"), "{bash}");
        let fish = script(Shell::Fish);
        assert!(fish.contains("-a \"runs\""), "{fish}");
        let zsh = script(Shell::Zsh);
        assert!(zsh.contains("#compdef orchestrate"), "{zsh}");
    }
}
