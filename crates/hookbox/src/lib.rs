//! The `hookbox` command line, shared by its binaries: `hookbox`, the small front people and
//! hooks run (the one-shot commands and the sandbox launcher), and `hookbox-full`, the whole CLI
//! (the server, the MCP server, projects and keys), which the front execs for those
//! ([`cli::full`]); `hookbox-sandbox-exec`, the launcher alone, needs none of it. The modules under `cli/` parse arguments and wire the library crates
//! together; the work is done there. This crate is the one place where errors become `anyhow`
//! and exit codes.

pub mod cli;
