//! An environment as an MCP server: the six built-in tools of one environment, each call going
//! through the environment's hooks exactly as an agent's call does (the tool-call lifecycle,
//! `hookbox_environments::lifecycle`: pre hooks → tool in the sandbox → post hooks). A deny is a
//! tool error carrying the hook's reason, so the calling agent sees it and can adapt, as the
//! reference's model does.
//!
//! Served over stdio ([`serve_stdio`]) or streamable HTTP ([`router`], mounted at `/mcp` behind
//! the browser guard, so no web page can call the tools), with the official Rust SDK (`rmcp`).
//! This crate translates MCP to the lifecycle and back; it must not run hooks or tools itself
//! (of the hooks crate it uses only `scrub`), nor open stores (the binary hands it an opened
//! environment).
//!
//! [`client`] is the other direction: the agent's connections to remote MCP servers (an
//! interaction's `mcp_server` tools), through the environment's egress; their calls go through
//! the same lifecycle, with the remote call as its run step.

pub mod client;

use std::sync::Arc;

use hookbox_environments::environment::Environment;
use hookbox_environments::lifecycle::ToolResult;
use hookbox_environments::tools::ToolOutput;
use hookbox_protocol::{ToolCall, ToolName};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::Value;

/// Errors of serving MCP.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("MCP session: {0}")]
    Session(String),
}

/// The tools of one opened environment, as an MCP [`ServerHandler`].
#[derive(Debug, Clone)]
pub struct SandboxTools {
    env: Arc<Environment>,
}

impl SandboxTools {
    pub fn new(env: Arc<Environment>) -> Self {
        Self { env }
    }

    /// The MCP tool list: names, descriptions and argument schemas of the six tools.
    pub fn tools() -> Vec<Tool> {
        ToolName::ALL
            .iter()
            .map(|tool| {
                let (description, schema) = hookbox_agent::steps::declaration(*tool);
                let schema = match schema {
                    Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                Tool::new(tool.as_str(), description, Arc::new(schema))
            })
            .collect()
    }

    /// Runs one call through the environment's hooks and turns the outcome into MCP's result:
    /// the tool's output as JSON text, or why it did not run; a deny or a failed tool is an
    /// error result (`isError`) whose text the caller sees.
    pub async fn call(&self, tool: ToolName, args: Value) -> CallToolResult {
        let outcome = self.env.call_tool(ToolCall { name: tool, args }).await;
        tracing::info!(
            env_id = %outcome.environment_id,
            tool = %tool,
            pre_handlers = outcome.pre.trace.len(),
            decision = outcome.pre.decision.label(),
            "mcp tool call"
        );
        let (text, failed) = match &outcome.result {
            ToolResult::Ok { output } => (
                hookbox_agent::steps::output_as_text(&output.json()),
                matches!(output, ToolOutput::Code(code) if code.failed()),
            ),
            ToolResult::Error { error } => (error.clone(), true),
            ToolResult::Denied { reason } => (
                format!("Denied by a pre_tool_execution hook: {reason}"),
                true,
            ),
            // An MCP server has nobody to ask: the call does not run, and the caller is told
            // why (the API server is where a person approves calls).
            ToolResult::NeedsApproval { reason, .. } => (
                format!(
                    "Not run: a pre_tool_execution hook asks a person to approve this call ({reason}), and `hookbox mcp` has no reviewer; approvals need `hookbox serve`."
                ),
                true,
            ),
        };
        let mut content = vec![ContentBlock::text(text)];
        // Hooks that answered `additional_context` (hookbox extension): one more text block,
        // which the caller's model sees with the result.
        let context = outcome.context_lines();
        if !context.is_empty() {
            content.push(ContentBlock::text(context.join("\n")));
        }
        if failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
    }
}

impl ServerHandler for SandboxTools {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new("hookbox", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(format!(
            "The six tools of hookbox environment {}: every call runs in its sandbox and through its hooks; a denied call returns the hook's reason as an error.",
            self.env.id()
        ));
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(Self::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Ok(tool) = request.name.parse::<ToolName>() else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`; the tools are {}",
                    request.name,
                    ToolName::ALL.map(|t| t.as_str()).join(", ")
                ),
                None,
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(self.call(tool, args).await.into())
    }
}

/// Serves MCP on stdin/stdout until the client closes the session.
pub async fn serve_stdio(tools: SandboxTools) -> Result<(), Error> {
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Session(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Session(e.to_string()))?;
    Ok(())
}

/// The streamable HTTP endpoint at `/mcp`, behind the browser guard `guard`
/// (`hookbox-browser-guard`: `Host` an IP address, `localhost` or an allowed name, `Origin` its
/// own or a listed one, JSON bodies), which applies to every path of the server. The guard
/// decides alone: rmcp's own `Host` list is turned off, since it would refuse the IP addresses
/// the guard answers (rebinding forges names, never addresses), and its `Origin` check is off
/// by default.
pub fn router(tools: SandboxTools, guard: &hookbox_browser_guard::Policy) -> axum::Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    guard.protect(axum::Router::new().nest_service("/mcp", service))
}
