//! The `main` of each contract test binary (`harness = false`, libtest-mimic): one trial
//! per scenario of the CLI, named `<cli>::<scenario>`, with libtest's command line
//! (filters, `--exact`, `--list`, `--ignored`, `--include-ignored`, `--test-threads`).
//! [`main_needing`] does the same for tests that need several CLIs (the end-to-end tests
//! with a real parent agent, and the benchmark of what the parent pays).
//!
//! Whether the CLI is installed is only known at run time, which `#[ignore]` cannot
//! express. So:
//! - installed (its variable names an existing file): the trials run;
//! - the variable names a missing file: the trials fail (a broken install);
//! - unset, and `ORCHESTRATE_REQUIRE_CONTRACT=1`: the trials fail (CI must run them);
//! - unset otherwise: each trial is reported `ignored (<why>)`, and `--ignored` or
//!   `--include-ignored` runs it, which then fails with the same reason, as an
//!   `#[ignore]`d test that cannot run would.
//!
//! A scenario the CLI lists in [`Cli::known_defects`] is likewise reported
//! `ignored (known defect: <what>)`, and runs with `--ignored` or `--include-ignored`.
//!
//! libtest-mimic does not capture output, so what a scenario notes ([`note`]: the mock's
//! requests, the session, the result) is kept and shown with its failure, or as it
//! happens with `--nocapture`, and after it with `--show-output`.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use super::cli::Cli;
use super::scenarios;

/// What a scenario runs, given the CLI's binary.
pub type Run = Box<dyn FnOnce(&Path) + Send>;

/// Runs the scenarios of `cli` and exits with libtest's status.
pub fn main(cli: &'static Cli) -> ! {
    let mut args = Arguments::from_args();
    // The sandboxes run one at a time anyway (see `serial`); on one thread each test's
    // name is printed before it runs rather than after.
    args.test_threads.get_or_insert(1);
    install_panic_hook();
    let install = Install::find(cli);
    let scenarios = scenarios::all(cli);
    let unavailable = scenarios::unavailable(cli);
    for (name, _) in cli.known_defects {
        assert!(
            scenarios.iter().any(|(s, _)| s == name),
            "{}'s known defect names no scenario: {name}",
            cli.name
        );
    }
    let trials = scenarios
        .into_iter()
        .map(|(name, run)| {
            let defect = cli.known_defects.iter().find(|(s, _)| *s == name);
            let cannot = unavailable.iter().find(|(s, _)| *s == name);
            let install = match (defect, cannot, &install) {
                (Some((_, what)), _, Install::Found(bin)) => {
                    Install::Defective(bin.clone(), format!("known defect: {what}"))
                }
                (None, Some((_, why)), Install::Found(bin)) => {
                    Install::Defective(bin.clone(), format!("cannot run here: {why}"))
                }
                _ => install.clone(),
            };
            trial(&args, &install, format!("{}::{name}", cli.name), run)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// A test that needs real CLIs, outside the table of scenarios (the end-to-end tests with a
/// real parent): its name, the CLIs it needs as `(variable, name)`, and what it runs,
/// given the first one's binary (the others through [`super::cli_binary`]).
pub struct Needing {
    pub name: String,
    pub clis: &'static [(&'static str, &'static str)],
    pub run: Run,
    /// Never part of a plain run: only `--ignored` or `--include-ignored` runs it (a
    /// benchmark), and then it fails if a CLI is missing.
    pub on_request: bool,
}

/// Runs `tests` as [`main`] runs scenarios: each is reported `ignored (<why>)` when a CLI
/// it needs is not installed, and fails when one is broken or
/// `ORCHESTRATE_REQUIRE_CONTRACT=1` asks for it.
pub fn main_needing(tests: Vec<Needing>) -> ! {
    let mut args = Arguments::from_args();
    args.test_threads.get_or_insert(1);
    install_panic_hook();
    let trials = tests
        .into_iter()
        .map(|t| {
            let install = Install::find_all(t.clis);
            let asked_for_ignored = args.ignored || args.include_ignored;
            if !t.on_request {
                return trial(&args, &install, t.name, t.run);
            }
            if !asked_for_ignored {
                return Trial::ignorable_test(t.name, || {
                    Ok(Completion::ignored_with(
                        "runs on request: --ignored (scripts/bench-context)",
                    ))
                });
            }
            match install {
                Install::Found(bin) | Install::Defective(bin, _) => {
                    let (show_output, capture) = (args.show_output, !args.nocapture);
                    let run = t.run;
                    Trial::test(t.name, move || {
                        run_captured(capture, show_output, || run(&bin))
                    })
                    .with_ignored_flag(true)
                }
                // Asked for, but a CLI is missing: fail with the reason.
                Install::Absent(why) | Install::Broken(why) => {
                    Trial::test(t.name, move || Err(why.into())).with_ignored_flag(true)
                }
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// One trial outside the table of scenarios, in a test binary with a `main` of its own
/// (the Slurm tests): it needs the CLI named by `var`, and is run, ignored or failed as
/// a scenario of that CLI would be. Call [`install_panic_hook`] once first, so that a
/// failure carries its panic message.
pub fn trial_needing(args: &Arguments, var: &str, cli: &str, name: String, run: Run) -> Trial {
    trial(args, &Install::find_var(var, cli), name, run)
}

#[derive(Clone)]
enum Install {
    Found(PathBuf),
    /// Installed, but the scenario fails for a known reason (given).
    Defective(PathBuf, String),
    /// Not installed; the reason.
    Absent(String),
    /// Cannot run; the reason.
    Broken(String),
}

impl Install {
    fn find(cli: &Cli) -> Install {
        Install::find_var(cli.var, cli.name)
    }

    /// Every CLI of `clis` installed: the first one's binary; else why not (a broken
    /// install first).
    fn find_all(clis: &[(&str, &str)]) -> Install {
        let all: Vec<Install> = clis
            .iter()
            .map(|(var, name)| Install::find_var(var, name))
            .collect();
        if let Some(broken) = all.iter().find(|i| matches!(i, Install::Broken(_))) {
            return broken.clone();
        }
        if let Some(absent) = all.iter().find(|i| matches!(i, Install::Absent(_))) {
            return absent.clone();
        }
        // A test that needs no CLI at all runs as it is.
        all.into_iter()
            .next()
            .unwrap_or_else(|| Install::Found(PathBuf::new()))
    }

    fn find_var(var: &str, name: &str) -> Install {
        let required = std::env::var("ORCHESTRATE_REQUIRE_CONTRACT").as_deref() == Ok("1");
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(p) if Path::new(&p).is_file() => Install::Found(PathBuf::from(p)),
            Some(p) => Install::Broken(format!(
                "{var}={} does not exist (run scripts/install-agent-clis)",
                Path::new(&p).display()
            )),
            None if required => Install::Broken(format!(
                "{var} is not set but ORCHESTRATE_REQUIRE_CONTRACT=1: run scripts/install-agent-clis and source <cache>/env.sh"
            )),
            None => Install::Absent(format!(
                "{name} is not installed: {var} is not set; run scripts/install-agent-clis, then `. <cache>/env.sh`"
            )),
        }
    }
}

fn trial(args: &Arguments, install: &Install, name: String, run: Run) -> Trial {
    let show_output = args.show_output;
    let capture = !args.nocapture;
    let asked_for_ignored = args.ignored || args.include_ignored;
    match install {
        Install::Found(bin) => {
            let bin = bin.clone();
            Trial::test(name, move || {
                run_captured(capture, show_output, || run(&bin))
            })
        }
        Install::Defective(bin, _) if asked_for_ignored => {
            let bin = bin.clone();
            Trial::test(name, move || {
                run_captured(capture, show_output, || run(&bin))
            })
            .with_ignored_flag(true)
        }
        Install::Defective(_, why) => {
            let why = why.clone();
            Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
        }
        Install::Broken(why) => {
            let why = why.clone();
            Trial::test(name, move || Err(why.into()))
        }
        // Asked to run ignored tests: this one is, and cannot run.
        Install::Absent(why) if asked_for_ignored => {
            let why = why.clone();
            Trial::test(name, move || Err(why.into())).with_ignored_flag(true)
        }
        Install::Absent(why) => {
            let why = why.clone();
            Trial::ignorable_test(name, move || Ok(Completion::ignored_with(why)))
        }
    }
}

thread_local! {
    /// What the running scenario noted, while its output is captured.
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Output of a contract scenario for investigation: kept and shown if the test fails (or
/// with `--show-output`); printed at once with `--nocapture`, and outside the harness.
pub fn note(text: &str) {
    let kept = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push_str(text);
            buf.push('\n');
            true
        }
        None => false,
    });
    if !kept {
        // Straight to the handle: under libtest (other test binaries) eprintln! of a
        // passing test is captured, which is what they want anyway.
        eprintln!("{text}");
    }
}

/// Runs `f` on this thread, its notes and panic message kept: a panic fails the trial
/// with them.
fn run_captured(capture: bool, show_output: bool, f: impl FnOnce()) -> Result<(), Failed> {
    if capture {
        CAPTURED.with(|c| *c.borrow_mut() = Some(String::new()));
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let log = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    match outcome {
        Ok(()) => {
            if show_output && !log.is_empty() {
                eprint!("---- output ----\n{log}");
            }
            Ok(())
        }
        // The panic hook put the message (and where it was raised) at the end of the log.
        Err(_) if capture => Err(log.into()),
        Err(payload) => Err(panic_text(&*payload).into()),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".to_string())
}

/// While a scenario's output is captured, a panic on its thread goes into the log (with
/// the place it was raised) instead of straight to stderr; other panics as before.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let kept = CAPTURED.with(|c| match c.try_borrow_mut() {
            Ok(mut c) => c.as_mut().map(|buf| buf.push_str(&format!("{info}\n"))),
            Err(_) => None,
        });
        if kept.is_none() {
            default(info);
        }
    }));
}
