//! Subcommand definitions and dispatch. Each subcommand group lives in its own module.

mod hooks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// hookbox: a self-hosted agent sandbox with hooks.
#[derive(Debug, Parser)]
#[command(name = "hookbox", version, about)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace). `RUST_LOG` overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check and try out hooks configurations.
    #[command(subcommand)]
    Hooks(hooks::HooksCommand),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Hooks(cmd) => hooks::run(cmd),
    }
}

/// Logs go to stderr only; stdout is for the command's result.
pub fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
