//! The hooks engine: finds `.agents/hooks.json`, validates it with precise diagnostics, matches
//! tool names, and dispatches `pre_tool_execution` / `post_tool_execution` handlers in order,
//! failing open on every handler failure and tracing each decision.
//!
//! It owns the contract in `shared/spec/hooks.md` and nothing else: it must not build sandboxes,
//! open network policy or know the HTTP API. Commands run through a [`runner::CommandRunner`] and
//! HTTP handlers through an [`http::HttpPoster`] that other crates provide.

pub mod http;
pub mod runner;
