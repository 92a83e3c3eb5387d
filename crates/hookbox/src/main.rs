//! `hookbox`: the small front. It parses the arguments and runs the one-shot commands (`tool`,
//! `hooks`, `env`, `credential`) and the sandbox launcher itself; for the rest, or when spans
//! are to be exported, it execs `hookbox-full` (see `hookbox::cli::full`). What it runs itself
//! names none of the server's routes, the MCP server, the agents' clients or the OTLP exporter,
//! so they are not linked into it. `tool` and `hooks test` leave the freeing of their address
//! space to a keeper process, after their caller has seen them end (`hookbox::cli::keeper`).

use std::process::ExitCode;

use hookbox::cli;

fn main() -> ExitCode {
    let args = match cli::parse() {
        Ok(args) => args,
        Err(code) => return code,
    };
    if let Some(command) = &args.command {
        if command.needs_full() {
            return match cli::full::find() {
                Ok(full) => cli::full::exec(&full),
                Err(why) => {
                    eprintln!(
                        "error: this command runs in {}: {why}",
                        cli::full::FULL_NAME
                    );
                    ExitCode::FAILURE
                }
            };
        }
        if command.exports_spans() {
            match cli::full::find() {
                Ok(full) => return cli::full::exec(&full),
                // A gate must still decide: the command runs here, its spans not exported.
                Err(why) => eprintln!(
                    "hookbox: OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, but only {} exports \
                     spans: {why}; this command's spans are not exported",
                    cli::full::FULL_NAME
                ),
            }
        }
    }
    // Its caller need not wait for its address space to be freed.
    if args
        .command
        .as_ref()
        .is_some_and(cli::Command::keeps_address_space)
    {
        cli::keeper::keep_address_space_past_exit();
    }
    let quiet = args.command.as_ref().is_some_and(cli::Command::quiet_logs);
    cli::init_logging(args.verbose, quiet, None);
    cli::finish(cli::run_front(args))
}
