//! The `hookbox` command line. Parses arguments, sets up logging and hands each subcommand to its
//! module under `cli/`. Library crates do the work; this crate only wires them together and is
//! the one place where errors become `anyhow` and exit codes.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        // --help and --version print on stdout and succeed; a usage error has its own status,
        // so that a script can tell it from a denied call (2).
        Err(err) => {
            let _ = err.print();
            return match err.use_stderr() {
                true => ExitCode::from(cli::exit::USAGE),
                false => ExitCode::SUCCESS,
            };
        }
    };
    let quiet = matches!(args.command, Some(cli::Command::Hooks(_)));
    let traces = cli::init_logging(args.verbose, quiet);
    let code = match cli::run(args) {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): end quietly, as ripgrep does.
        Err(err) if cli::output::is_reader_gone(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            match err.downcast_ref::<cli::UsageError>() {
                Some(_) => ExitCode::from(cli::exit::USAGE),
                None => ExitCode::FAILURE,
            }
        }
    };
    // Spans still in the batch go out before the process does.
    if let Some(provider) = traces {
        let _ = provider.shutdown();
    }
    code
}
