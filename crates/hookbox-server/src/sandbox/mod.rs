//! `hookbox-environments` behind the agent seams: [`SandboxBackend`] implements [`ToolExecutor`]
//! and [`EnvironmentProvider`] over the environments on disk, with those this replica has open.
//!
//! - `cache`: the environment cache (open environments, idle and LRU eviction, copies opened
//!   under a lease this replica lost, the stop);
//! - `executor`: [`ToolExecutor`]: each call handed to the environment's tool-call lifecycle
//!   (`hookbox_environments::lifecycle`), whose typed outcome (what the model sees, the verdict,
//!   the trace) becomes the loop's [`ToolExecution`](hookbox_agent::execution::ToolExecution);
//!   the interaction hooks and the sessions with remote MCP servers;
//! - `provider`: [`EnvironmentProvider`]: API sources as sandbox sources, create, fork,
//!   delete, files through the environment's confined tree;
//! - `errors`: the environments' errors as [`ProviderError`](hookbox_agent::seams::ProviderError)s.
//!
//! These adapt only: none of them runs hooks or tools, resolves paths or decides what a result
//! is; that is the lifecycle's, in the environments crate.
//!
//! [`ToolExecutor`]: hookbox_agent::seams::ToolExecutor
//! [`EnvironmentProvider`]: hookbox_agent::seams::EnvironmentProvider

mod cache;
mod errors;
mod executor;
mod provider;

pub use cache::{
    CacheLimits, Clock, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_OPEN, SandboxBackend, ShutdownReport,
};
pub use provider::{MAX_DOWNLOAD_BYTES, sandbox_sources};
