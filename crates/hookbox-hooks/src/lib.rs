//! The hooks engine: finds `.agents/hooks.json`, validates it with precise diagnostics, matches
//! tool names, and dispatches `pre_tool_execution` / `post_tool_execution` handlers in order,
//! failing open on every handler failure and tracing each decision. hookbox's extensions live
//! here too, each active only when a file uses it: `on_failure`, `updated_args`,
//! `additional_context`, the `ask` decision, and the `pre_interaction` / `post_interaction`
//! events (matched against the agent's name).
//!
//! It owns the contract in `shared/spec/hooks.md` and nothing else: it must not build sandboxes,
//! enforce network policy, bound processes or know the HTTP API. Commands run through a
//! [`command::CommandRunner`] and HTTP handlers through an [`http::HttpPoster`] that other crates
//! provide (an environment's sandbox and egress, wired in `hookbox-environments`); processes are
//! bounded by `hookbox-process`, which the runners use.
//!
//! Other agent CLIs' hooks files (Claude Code, Gemini CLI, Codex, Cursor, Copilot) run through
//! the same engine when enabled ([`dialect`]; off by default): each becomes rules whose handlers
//! carry their dialect, which decides how their input is written and their answer read.
//!
//! Reading order: [`discover`] (where files come from) → [`config`] (what they mean) →
//! [`matcher`] (which tools a rule covers) → [`lint`] (whether each command's program exists in
//! the sandbox, for `hooks check`) → [`engine`] (running handlers and deciding), which
//! reads each handler's answer with [`answer`] and records what it decided as
//! [`decision`]'s values → [`scrub`] (injected secrets taken out of what handlers said, before
//! anything records it).

pub mod answer;
pub mod command;
pub mod config;
pub mod decision;
pub mod diagnostic;
pub mod dialect;
pub mod discover;
pub mod engine;
pub mod http;
pub mod lint;
pub mod matcher;
pub mod scrub;

pub use config::HooksConfig;
pub use config::OnFailure;
pub use decision::{Decision, Dispatch, Failure, HandlerTrace, Outcome};
pub use diagnostic::{Diagnostic, Severity};
pub use discover::{HooksCache, Loaded, load_from_root};
pub use engine::{ArgsValidator, HookEngine, VendorExtras};
