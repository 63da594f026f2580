//! The `orchestrate` command line: parses arguments and dispatches to `commands`.

fn main() {
    // `ORCHESTRATE_COMPLETE=bash orchestrate -- …`: a shell asking for completions, answered
    // and done.
    orchestrate::commands::completions::answer_if_asked();
    orchestrate::commands::warm_up();
    orchestrate::commands::init_tracing();
    let status = match orchestrate::cli::parse() {
        Ok(cli) => orchestrate::commands::dispatch(cli),
        Err(status) => status,
    };
    std::process::exit(status);
}
