//! The two seams between the agent loop and the environments. The server implements them
//! (`hookbox_server::sandbox`, over `hookbox-environments`, whose tool-call lifecycle runs each
//! call); test doubles implement them in `hookbox-test-support`. [`ToolExecutor`] runs one tool
//! call with its pre and post hooks inside an environment and answers with a
//! [`ToolExecution`]; [`EnvironmentProvider`] creates environments from sources and serves their
//! files. This module only defines the contracts; it must not implement isolation.

use async_trait::async_trait;
use hookbox_protocol::ToolCall;
use hookbox_protocol::api::{EnvironmentFile, Network, Source};
use serde_json::{Map, Value};

use crate::execution::ToolExecution;

/// Runs a built-in tool call in an environment: pre hooks → tool in the sandbox → post hooks.
/// Failures of the tool are results (`is_error`), not errors: the model must see them.
#[async_trait]
pub trait ToolExecutor: Send + Sync + std::fmt::Debug {
    async fn execute(&self, environment_id: &str, call: &ToolCall) -> ToolExecution;

    /// [`Self::execute`], with `output` seeing `code_execution`'s stdout as text while it is
    /// produced; each piece continues the one before, and together they begin the result the
    /// model sees. Executors that cannot stream run the call as `execute` does.
    async fn execute_streaming(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: OutputSink,
    ) -> ToolExecution {
        let _ = output;
        self.execute(environment_id, call).await
    }

    /// [`Self::execute`] (or [`Self::execute_streaming`] when `output` is given) with what the
    /// interaction knows of the call: its steps so far, which another agent CLI's hooks read as
    /// their `transcript_path`. Executors without such hooks run the call as `execute` does.
    async fn execute_in(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<OutputSink>,
        context: &CallContext,
    ) -> ToolExecution {
        let _ = context;
        match output {
            Some(output) => self.execute_streaming(environment_id, call, output).await,
            None => self.execute(environment_id, call).await,
        }
    }

    /// Runs a call a person approved after a pre hook asked about it (hookbox extension): the
    /// tool with exactly `call.args`, then the post hooks, but not the pre hooks again (the
    /// reviewer's approval is their decision). `output` as in [`Self::execute_streaming`].
    /// Required, so no executor can silently re-ask or skip the tool.
    async fn execute_approved(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<OutputSink>,
    ) -> ToolExecution;

    /// Connects to the interaction's remote MCP servers, through the environment's egress,
    /// for one run; servers that cannot be reached are listed as unavailable (never an error).
    /// Executors that cannot reach any network report every server unavailable.
    async fn mcp_session(
        &self,
        environment_id: &str,
        servers: &[crate::mcp::McpServerSpec],
    ) -> std::sync::Arc<dyn crate::mcp::McpTools> {
        let _ = environment_id;
        std::sync::Arc::new(crate::mcp::Unreachable::all(
            servers,
            "this server cannot reach MCP servers",
        ))
    }

    /// Runs the environment's interaction hooks for `payload.hook_event_name` (hookbox
    /// extension). Executors without hooks run none.
    async fn interaction_hooks(
        &self,
        environment_id: &str,
        payload: &hookbox_protocol::InteractionHookPayload,
    ) -> InteractionHooks {
        let _ = (environment_id, payload);
        InteractionHooks::default()
    }
}

/// What the interaction knows of a tool call beyond its arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallContext {
    /// The interaction's steps up to this call as JSON Lines, bounded
    /// ([`crate::transcript::jsonl`]).
    pub transcript: Vec<u8>,
}

/// What an environment's `pre_interaction` / `post_interaction` hooks decided (hookbox
/// extension).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InteractionHooks {
    /// `Some(reason)` when a `pre_interaction` hook denied the turn.
    pub denied: Option<String>,
    /// Every `additional_context` the handlers answered, in order: context for the model.
    pub context: Vec<String>,
    /// What ran, as the interaction shows it (its `hooks` field: each handler's outcome,
    /// stderr excerpt and duration, the decision, the context); `None` when no handler ran.
    pub trace: Option<serde_json::Value>,
}

/// Receives a running tool call's output, piece by piece.
pub type OutputSink = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// Errors of an [`EnvironmentProvider`]; the server maps them to HTTP statuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("environment `{0}` not found")]
    EnvironmentNotFound(String),
    #[error("file `{0}` not found")]
    FileNotFound(String),
    #[error("file `{0}` already exists")]
    FileExists(String),
    /// A source the provider refuses (escaping target, bad encoding, unsupported type). The
    /// message is shown to the client.
    #[error("invalid source: {0}")]
    InvalidSource(String),
    /// A path that escapes the environment or is malformed. Shown to the client.
    #[error("invalid path: {0}")]
    InvalidPath(String),
    /// The environment exists but cannot be brought onto this host now (its snapshot store
    /// does not answer). Shown to the client, who may retry.
    #[error("{0}")]
    Unavailable(String),
    /// The environment's snapshot is damaged or missing; it cannot be restored. Shown to the
    /// client (names the environment, never a credential).
    #[error("{0}")]
    Unrestorable(String),
    /// Anything else; logged, not shown to clients.
    #[error("environment backend failed: {0}")]
    Internal(String),
}

/// What an environment is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvironmentSetup {
    pub sources: Vec<Source>,
    pub network: Option<Network>,
    /// `env` of the embedded environment: names to values or `{credential}` references.
    pub env: Option<Map<String, Value>>,
    /// The project the environment belongs to (its network's credentials resolve there only).
    /// Empty: the backend's default project.
    pub project: String,
    /// The environment's disk cap in bytes (`0`: none); `None`: the backend's default.
    pub disk_limit_bytes: Option<u64>,
    /// The isolation runtime by name (`namespaces`, `gvisor`); `None`: the backend's default.
    /// A fork ignores it: it keeps its parent's.
    pub runtime: Option<String>,
}

/// Size of an environment's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnvironmentUsage {
    pub file_count: u64,
    pub size_bytes: u64,
}

/// Creates, forks and deletes environments and serves their files. Paths are sandbox paths
/// (`/workspace/a.txt`; relative paths resolve against `/`).
#[async_trait]
pub trait EnvironmentProvider: Send + Sync + std::fmt::Debug {
    /// Materialises a new environment from `setup` and returns its id (the provider picks it).
    /// Nothing is left behind on error.
    async fn create(&self, setup: &EnvironmentSetup) -> Result<String, ProviderError>;
    /// Places more sources into an existing environment (and replaces network/env if given).
    async fn update(&self, id: &str, setup: &EnvironmentSetup) -> Result<(), ProviderError>;
    /// Creates a new environment with `setup`'s network and env (its sources are ignored) and
    /// copies the files of environment `from` into it; returns the new id.
    async fn fork(&self, from: &str, setup: &EnvironmentSetup) -> Result<String, ProviderError>;
    async fn delete(&self, id: &str) -> Result<(), ProviderError>;
    /// The entry at `path` (one element for a file) or its children (all descendants when
    /// `recursive`).
    async fn list_files(
        &self,
        id: &str,
        path: &str,
        recursive: bool,
    ) -> Result<Vec<EnvironmentFile>, ProviderError>;
    async fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>, ProviderError>;
    async fn write_file(
        &self,
        id: &str,
        path: &str,
        bytes: &[u8],
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError>;
    /// [`Self::write_file`] with the content of `source` from its start (an upload's spool
    /// file), copied without holding it in memory.
    async fn write_file_from(
        &self,
        id: &str,
        path: &str,
        source: std::fs::File,
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError>;
    async fn usage(&self, id: &str) -> Result<EnvironmentUsage, ProviderError>;
    /// Saves what changed in the environment to durable storage off this host, if the provider
    /// has any: waiting for the upload when `wait`, else scheduling it. Providers without
    /// snapshots do nothing.
    async fn checkpoint(&self, id: &str, wait: bool) -> Result<(), ProviderError> {
        let _ = (id, wait);
        Ok(())
    }
    /// Closes the environment on this host so that another can take it over (a draining server
    /// handing over an idle environment): `Ok(true)` once it is closed and, with snapshots, its
    /// newest state uploaded; `Ok(false)` while it is in use (it stays). Providers that keep
    /// nothing open hand over at once.
    async fn hand_over(&self, id: &str) -> Result<bool, ProviderError> {
        let _ = id;
        Ok(true)
    }
    /// The `hooks check` report of the environment's hooks files as its next tool call would
    /// read them (`{"files": [...], "diagnostics": [...], "frozen": bool}`). Providers without
    /// hooks report none.
    async fn hooks_report(&self, id: &str) -> Result<serde_json::Value, ProviderError> {
        let _ = id;
        Ok(serde_json::json!({"files": [], "diagnostics": [], "frozen": false}))
    }
}
