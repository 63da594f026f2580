//! The progress line on stderr: drawn only when stderr is a terminal (here a pseudo-terminal
//! from `script`), never for `TERM=dumb`, and cleared before the result prints.

use crate::support;

use support::Sandbox;

/// Runs orchestrate under `script`, which gives it a pseudo-terminal for stdout and stderr,
/// and returns everything the terminal showed.
fn through_a_pty(sb: &Sandbox, term: &str) -> String {
    let agents = sb.agents.to_str().unwrap().to_string();
    let bin = support::orchestrate_bin();
    let inner = format!(
        "{} run fake 'find auth' --agents-dir {agents}",
        bin.display()
    );
    let out = sb
        .command(&[])
        .env("TERM", term)
        .output_with_program("script", &["-q", "-e", "-c", &inner, "/dev/null"]);
    String::from_utf8_lossy(&out).into_owned()
}

trait ScriptCommand {
    fn output_with_program(&mut self, program: &str, args: &[&str]) -> Vec<u8>;
}

impl ScriptCommand for std::process::Command {
    /// The sandbox's environment and folder, but `program args` instead of orchestrate.
    fn output_with_program(&mut self, program: &str, args: &[&str]) -> Vec<u8> {
        let mut cmd = std::process::Command::new(program);
        cmd.args(args).current_dir(self.get_current_dir().unwrap());
        for (k, v) in self.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let out = cmd
            .stdin(std::process::Stdio::null())
            .output()
            .expect("script runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

#[test]
fn a_terminal_gets_a_progress_line_that_is_cleared_before_the_result() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "40")
        .transcript("multi_turn.jsonl");
    let screen = through_a_pty(&sb, "xterm");
    assert!(
        screen.contains("\r\x1b[2K[orchestrate] fake "),
        "progress drawn: {screen:?}"
    );
    assert!(
        screen.contains("· turn 1 · read"),
        "current tool shown: {screen:?}"
    );
    // Cleared, then the one JSON line.
    let tail = screen.rsplit("\r\x1b[2K").next().unwrap();
    assert!(
        tail.trim_start().starts_with("{\"content\""),
        "result after the clear: {tail:?}"
    );
    sb.assert_no_survivors();
}

#[test]
fn term_dumb_gets_no_progress_line() {
    let sb = Sandbox::new()
        .scenario("slow")
        .set("FAKE_AGENT_DELAY_MS", "40")
        .transcript("multi_turn.jsonl");
    let screen = through_a_pty(&sb, "dumb");
    assert!(!screen.contains("[orchestrate] fake"), "{screen:?}");
    assert!(screen.contains("{\"content\""), "{screen:?}");
}
