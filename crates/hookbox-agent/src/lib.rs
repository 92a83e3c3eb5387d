//! The agent loop of an interaction: model → tool calls → the environment (whose tool-call
//! lifecycle runs pre hooks, the tool and post hooks) → results back to the model, until the
//! model answers or the step budget is spent. Steps are sent through a channel as they happen.
//!
//! This crate owns the [`model::Model`] trait and its three backends ([`offline`], [`gemini`],
//! [`openai`]), the loop ([`agent_loop`]), the seams the environments plug into
//! ([`seams::ToolExecutor`], [`seams::EnvironmentProvider`], and [`mcp::McpTools`] for remote
//! MCP servers' tools), what a call produced ([`execution`]), how calls and results become steps
//! ([`steps`]) and how a call a hook asked about is paused ([`approval`]). It must not know
//! about HTTP serving, storage or isolation. Tests run it over `hookbox-test-support`'s
//! unisolated `LocalBackend`.

pub mod agent_loop;
pub mod approval;
pub mod execution;
pub mod gemini;
pub mod mcp;
pub mod model;
pub mod offline;
pub mod openai;
pub mod seams;
pub mod steps;

pub use agent_loop::{LoopConfig, LoopEvent, LoopOutcome, run};
pub use execution::{ApprovalRequest, ToolExecution};
pub use model::{Model, ModelCall, ModelRequest, ModelTurn};
pub use seams::{EnvironmentProvider, InteractionHooks, OutputSink, ToolExecutor};

/// Environment variable names this crate reads.
pub mod env_vars {
    /// Key for the `gemini` backend; its presence makes `gemini` the default model.
    pub const GEMINI_API_KEY: &str = "GEMINI_API_KEY";
    /// Base URL of the Gemini API (default `https://generativelanguage.googleapis.com`).
    pub const HOOKBOX_GEMINI_BASE_URL: &str = "HOOKBOX_GEMINI_BASE_URL";
    /// Default Gemini model.
    pub const HOOKBOX_GEMINI_MODEL: &str = "HOOKBOX_GEMINI_MODEL";
    /// Base URL of an OpenAI-compatible server (e.g. `http://127.0.0.1:11434/v1`); selects the
    /// `openai` backend.
    pub const HOOKBOX_OPENAI_BASE_URL: &str = "HOOKBOX_OPENAI_BASE_URL";
    /// Model name for the `openai` backend.
    pub const HOOKBOX_OPENAI_MODEL: &str = "HOOKBOX_OPENAI_MODEL";
    /// Optional bearer key for the `openai` backend.
    pub const HOOKBOX_OPENAI_API_KEY: &str = "HOOKBOX_OPENAI_API_KEY";
}

/// Errors of models and the loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("model request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("model server answered {status}: {message}")]
    ModelStatus { status: u16, message: String },
    #[error("model response could not be understood: {0}")]
    ModelResponse(String),
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
