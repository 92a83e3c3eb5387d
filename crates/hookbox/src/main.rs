//! The `hookbox` command line. Parses arguments, sets up logging and hands each subcommand to its
//! module under `cli/`. Library crates do the work; this crate only wires them together and is
//! the one place where errors become `anyhow` and exit codes.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let quiet = matches!(args.command, cli::Command::Hooks(_));
    let traces = cli::init_logging(args.verbose, quiet);
    let code = match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    };
    // Spans still in the batch go out before the process does.
    if let Some(provider) = traces {
        let _ = provider.shutdown();
    }
    code
}
