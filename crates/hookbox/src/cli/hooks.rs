//! `hookbox hooks check` and `hookbox hooks test`.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum HooksCommand {}

pub fn run(cmd: HooksCommand) -> anyhow::Result<ExitCode> {
    match cmd {}
}
