//! The agent loop of an interaction: model → tool calls → the environment (whose tool-call
//! lifecycle runs pre hooks, the tool and post hooks) → results back to the model, until the
//! model answers or the step budget is spent. Steps are sent through a channel as they happen.
//!
//! This crate owns the [`model::Model`] trait and its three backends ([`offline`], [`gemini`],
//! [`openai`]), the loop ([`agent_loop`]), the seams the environments plug into
//! ([`seams::ToolExecutor`], [`seams::EnvironmentProvider`], and [`mcp::McpTools`] for remote
//! MCP servers' tools), what a call produced ([`execution`]), how calls and results become steps
//! ([`steps`]), how a call a hook asked about is paused ([`approval`]) and what deferred tools
//! the model sees until a tool search loads them ([`tool_search`]). It must not know
//! about HTTP serving, storage or isolation. Tests run it over `hookbox-test-support`'s
//! unisolated `LocalBackend`.

pub mod agent_loop;
pub mod approval;
pub mod env_vars;
mod error;
pub mod execution;
pub mod gemini;
pub mod mcp;
pub mod model;
pub mod offline;
pub mod openai;
pub mod seams;
pub mod steps;
pub mod tool_search;
pub mod transcript;

pub use agent_loop::{LoopConfig, LoopEvent, LoopOutcome, run};
pub use error::{Error, Result};
pub use execution::{ApprovalRequest, ToolExecution};
pub use model::{Model, ModelCall, ModelRequest, ModelTurn};
pub use seams::{EnvironmentProvider, InteractionHooks, OutputSink, ToolExecutor};
