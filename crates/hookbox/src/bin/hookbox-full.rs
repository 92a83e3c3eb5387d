//! `hookbox-full`: the whole `hookbox` command line (the server, the MCP server, projects and
//! keys, and every one-shot command), installed beside `hookbox`, which execs it for what it
//! does not run itself (`hookbox::cli::full`). Run directly, it behaves as `hookbox`.

use std::process::ExitCode;

use hookbox::cli;

fn main() -> ExitCode {
    // SAFETY: the first thing in main; no other thread has started.
    if let Err(message) = unsafe { cli::full::accept_handover() } {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let args = match cli::parse() {
        Ok(args) => args,
        Err(code) => return code,
    };
    let quiet = args.command.as_ref().is_some_and(cli::Command::quiet_logs);
    let (provider, export) = cli::otel_export().unzip();
    cli::init_logging(args.verbose, quiet, export);
    let code = cli::finish(cli::run(args));
    // Spans still in the batch go out before the process does.
    if let Some(provider) = provider {
        let _ = provider.shutdown();
    }
    code
}
