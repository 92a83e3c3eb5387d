//! The client side: an agent's connections to remote MCP servers (an interaction's
//! `mcp_server` tools), with `rmcp` over streamable HTTP.
//!
//! Every connection leaves through the environment's own egress proxy (a token-guarded
//! loopback door into it, [`hookbox_egress::LocalEndpoint`]), so the environment's allowlist
//! must admit the server's host, the SSRF defences apply whatever DNS says, credentials are
//! injected by the proxy (intercepted TLS is trusted through the environment's CA), and the
//! audit log records it, exactly as for the sandbox's own traffic. A server that is refused,
//! does not answer or times out is reported, never fatal: [`McpSession`] lists it as
//! unavailable, or its call gets an error result. Each call goes through the environment's
//! tool-call lifecycle (`Environment::call_remote_tool`), whose run step is the call to the
//! server, so its hooks run only where a matcher written for MCP (`mcp:<server>/<tool>`) says
//! so. Header values are sent as given and never logged; what a server answers is scrubbed of
//! the values the egress injected (a server may echo them). This module must not run hooks or
//! tools, or decide policy itself.
//!
//! A server is hostile until its listing is read: every response is read only up to
//! [`MAX_RESPONSE_BYTES`] before it is parsed, and its `tools/list` is followed page by page
//! within [`MAX_LIST_PAGES`] pages, [`MAX_TOOLS_PER_SERVER`] tools and [`MAX_LISTING_BYTES`]
//! of JSON (counted page by page as the pages arrive). A server past any of them is
//! unavailable, saying which limit, and nothing of its listing is kept. Tools whose model names
//! clash are withheld ([`hookbox_agent::mcp::withhold_clashes`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hookbox_agent::execution::ToolExecution;
use hookbox_agent::mcp::{McpServerSpec, McpToolDecl, McpTools, Withheld, hook_name};
use hookbox_egress::{EgressProxy, LOCAL_PROXY_USER, LocalEndpoint};
use hookbox_environments::environment::Environment;
use hookbox_environments::lifecycle::{RemoteReply, ToolResult};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, ContentBlock, PaginatedRequestParams};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

/// The most pages of one server's `tools/list` that are followed.
pub const MAX_LIST_PAGES: usize = 32;
/// The most tools one server may list (before `allowed_tools` filters them).
pub const MAX_TOOLS_PER_SERVER: usize = 256;
/// The most bytes of JSON one server's tool listing may take, all pages together.
pub const MAX_LISTING_BYTES: usize = 2 << 20;
/// The largest response (a JSON body, or one SSE event) read from a server before it is parsed.
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// Limits of a session.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// Connecting and listing one server's tools.
    pub connect_timeout: Duration,
    /// One tool call.
    pub call_timeout: Duration,
    /// The most of a tool's output kept for the model (bytes); more is cut, saying so.
    pub output_limit: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(15),
            call_timeout: Duration::from_secs(60),
            output_limit: 1024 * 1024,
        }
    }
}

/// A run's connections to its MCP servers.
#[derive(Debug)]
pub struct McpSession {
    env: Arc<Environment>,
    options: ClientOptions,
    servers: HashMap<String, Connected>,
    tools: Vec<McpToolDecl>,
    withheld: Vec<Withheld>,
    unavailable: Vec<(String, String)>,
}

#[derive(Debug)]
struct Connected {
    service: RunningService<RoleClient, ()>,
    /// Keeps the egress door open as long as the connection.
    _endpoint: LocalEndpoint,
}

impl McpSession {
    /// Connects to every server (one after the other, each bounded by the connect timeout)
    /// and lists its tools within the listing limits, keeping those `allowed_tools` names and
    /// withholding those whose model names clash.
    pub async fn connect(
        env: Arc<Environment>,
        servers: &[McpServerSpec],
        options: ClientOptions,
    ) -> McpSession {
        let mut session = McpSession {
            env,
            options,
            servers: HashMap::new(),
            tools: Vec::new(),
            withheld: Vec::new(),
            unavailable: Vec::new(),
        };
        for spec in servers {
            let connected =
                tokio::time::timeout(options.connect_timeout, session.connect_one(spec)).await;
            let result = match connected {
                Ok(result) => result,
                Err(_) => Err(format!(
                    "no answer within {} s",
                    options.connect_timeout.as_secs_f64()
                )),
            };
            match result {
                Ok((connected, listed)) => {
                    tracing::info!(server = %spec.name, tools = listed.len(), "MCP server connected");
                    session.tools.extend(
                        listed
                            .into_iter()
                            .filter(|t| allowed(spec, &t.tool))
                            .collect::<Vec<_>>(),
                    );
                    session.servers.insert(spec.name.clone(), connected);
                }
                Err(why) => {
                    let why = session.scrubbed(why);
                    tracing::warn!(server = %spec.name, reason = %why, "MCP server unavailable");
                    session.unavailable.push((spec.name.clone(), why));
                }
            }
        }
        let (tools, withheld) =
            hookbox_agent::mcp::withhold_clashes(std::mem::take(&mut session.tools));
        for w in &withheld {
            tracing::warn!(server = %w.server, tool = %w.tool, model_name = %w.model_name, "MCP tool withheld: its model name clashes");
        }
        session.tools = tools;
        session.withheld = withheld;
        session
    }

    async fn connect_one(
        &self,
        spec: &McpServerSpec,
    ) -> Result<(Connected, Vec<McpToolDecl>), String> {
        let url = reqwest_mcp::Url::parse(&spec.url).map_err(|e| format!("bad url: {e}"))?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let egress = self.env.network().egress();
        // Said plainly before anything is sent (the proxy decides again for every connection).
        if let Err(denial) = egress.authorize(host.trim_matches(['[', ']']), port) {
            return Err(format!(
                "refused by the environment's egress policy: {denial}"
            ));
        }
        let endpoint = EgressProxy::new(egress.clone())
            .local_endpoint()
            .await
            .map_err(|e| format!("cannot open the egress proxy: {e}"))?;
        let tls = egress
            .client_tls()
            .map_err(|e| format!("the environment's egress TLS: {e}"))?;
        let client = http_client(&endpoint, tls)?;
        let mut headers = HashMap::new();
        for (name, value) in &spec.headers {
            let name = name
                .parse::<http::HeaderName>()
                .map_err(|_| format!("header `{name}` is not a valid name"))?;
            let value = http::HeaderValue::from_str(value)
                .map_err(|_| format!("header `{name}` has an invalid value"))?;
            headers.insert(name, value);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(spec.url.as_str())
            .custom_headers(headers)
            .max_json_response_size(MAX_RESPONSE_BYTES)
            .max_sse_event_size(MAX_RESPONSE_BYTES);
        config.reinit_on_expired_session = true;
        let transport = StreamableHttpClientTransport::with_client(client, config);
        let service = ()
            .serve(transport)
            .await
            .map_err(|e| format!("could not connect: {}", plain_error(&e)))?;
        let tools = match list_tools(&service, &spec.name).await {
            Ok(tools) => tools,
            Err(why) => {
                let _ = service.cancel().await;
                return Err(why);
            }
        };
        Ok((
            Connected {
                service,
                _endpoint: endpoint,
            },
            tools,
        ))
    }

    /// `text` from a server (a result, an error) without the values the environment's egress
    /// injected into the requests to it: a server that echoes its `Authorization` header must
    /// not hand the credential to the model, the steps or the log.
    fn scrubbed(&self, text: String) -> String {
        hookbox_hooks::scrub::scrub(&text, &self.env.network().egress().injected_values())
    }

    /// Closes every connection.
    pub async fn close(self) {
        for (_, connected) in self.servers {
            let _ = connected.service.cancel().await;
        }
    }

    /// Calls `tool` of `server` (the lifecycle's run step): its answer as text, scrubbed and
    /// cut to the output limit, or why there is none.
    async fn call_server(&self, server: &str, tool: &str, args: &Value) -> RemoteReply {
        let (text, is_error) = self.answer(server, tool, args).await;
        let secrets = self.env.network().egress().injected_values();
        RemoteReply {
            text: reply_text(text, &secrets, self.options.output_limit),
            is_error,
        }
    }

    async fn answer(&self, server: &str, tool: &str, args: &Value) -> (String, bool) {
        let Some(connected) = self.servers.get(server) else {
            return (format!("MCP server `{server}` is not connected"), true);
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        match args {
            Value::Object(map) => params = params.with_arguments(map.clone()),
            Value::Null => {}
            other => {
                return (
                    format!("the arguments of an MCP tool must be a JSON object, not {other}"),
                    true,
                );
            }
        }
        let call = connected.service.call_tool(params);
        match tokio::time::timeout(self.options.call_timeout, call).await {
            Err(_) => (
                format!(
                    "MCP server `{server}` did not answer the call of `{tool}` within {} s",
                    self.options.call_timeout.as_secs_f64()
                ),
                true,
            ),
            Ok(Err(e)) => (format!("MCP server `{server}`: {}", plain_error(&e)), true),
            Ok(Ok(result)) => {
                let mut text = String::new();
                for block in &result.content {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    match block {
                        ContentBlock::Text(t) => text.push_str(&t.text),
                        other => text.push_str(&serde_json::to_string(other).unwrap_or_default()),
                    }
                }
                if text.is_empty()
                    && let Some(structured) = &result.structured_content
                {
                    text = structured.to_string();
                }
                (text, result.is_error == Some(true))
            }
        }
    }
}

#[async_trait]
impl McpTools for McpSession {
    fn tools(&self) -> &[McpToolDecl] {
        &self.tools
    }

    fn unavailable(&self) -> &[(String, String)] {
        &self.unavailable
    }

    fn withheld(&self) -> &[Withheld] {
        &self.withheld
    }

    async fn call(&self, server: &str, tool: &str, args: &Value) -> ToolExecution {
        if !self
            .tools
            .iter()
            .any(|t| t.server == server && t.tool == tool)
        {
            return ToolExecution::error(format!(
                "`{tool}` is not one of MCP server `{server}`'s allowed tools"
            ));
        }
        let outcome = self
            .env
            .call_remote_tool(
                hook_name(server, tool),
                args.clone(),
                Box::new(move |args| {
                    Box::pin(async move { self.call_server(server, tool, &args).await })
                }),
            )
            .await;
        tracing::info!(
            server,
            tool,
            error = outcome.view.is_error,
            "MCP tool called"
        );
        let denied_reason = match &outcome.result {
            ToolResult::Denied { reason } => Some(reason.clone()),
            ToolResult::Ok { .. } | ToolResult::Error { .. } | ToolResult::NeedsApproval { .. } => {
                None
            }
        };
        ToolExecution {
            output: outcome.view.output,
            is_error: outcome.view.is_error,
            denied_reason,
            trace: outcome.trace,
            approval: None,
        }
    }
}

/// Lists `service`'s tools page by page within [`MAX_LIST_PAGES`], [`MAX_TOOLS_PER_SERVER`]
/// and [`MAX_LISTING_BYTES`] (each page's JSON counted as it arrives), as the tools of
/// `server`. Past a limit: why, naming it, and nothing kept.
async fn list_tools(
    service: &RunningService<RoleClient, ()>,
    server: &str,
) -> Result<Vec<McpToolDecl>, String> {
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let page = service
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("could not list its tools: {}", plain_error(&e)))?;
        bytes = bytes.saturating_add(json_len(&page.tools));
        if bytes > MAX_LISTING_BYTES {
            return Err(format!(
                "its tool listing is larger than {MAX_LISTING_BYTES} bytes of JSON, the most hookbox reads from one MCP server"
            ));
        }
        if tools.len() + page.tools.len() > MAX_TOOLS_PER_SERVER {
            return Err(format!(
                "it lists more than {MAX_TOOLS_PER_SERVER} tools, the most hookbox takes from one MCP server"
            ));
        }
        tools.extend(page.tools.into_iter().map(|t| McpToolDecl {
            server: server.to_owned(),
            tool: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            parameters: Value::Object((*t.input_schema).clone()),
        }));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(format!(
        "its tool listing goes on past {MAX_LIST_PAGES} pages, the most hookbox follows for one MCP server"
    ))
}

/// The length of `tools` as JSON, without building the text.
fn json_len(tools: &[rmcp::model::Tool]) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, tools);
    count.0
}

/// Whether `allowed_tools` lets the model see `tool`.
fn allowed(spec: &McpServerSpec, tool: &str) -> bool {
    spec.allowed_tools
        .as_ref()
        .is_none_or(|names| names.iter().any(|n| n == tool))
}

/// The HTTP client of one connection: everything through `endpoint`, with the TLS trust of
/// the environment's egress (public roots, the operator's extra CA, and the environment's CA,
/// which signs what the proxy intercepts to inject headers).
fn http_client(
    endpoint: &LocalEndpoint,
    tls: Arc<rustls::ClientConfig>,
) -> Result<reqwest_mcp::Client, String> {
    let tls = (*tls).clone();
    let proxy = reqwest_mcp::Proxy::all(endpoint.url())
        .map_err(|e| format!("egress proxy: {e}"))?
        .basic_auth(LOCAL_PROXY_USER, endpoint.token());
    reqwest_mcp::Client::builder()
        .proxy(proxy)
        .tls_backend_preconfigured(tls)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// An rmcp error as a person (or model) reads it: without the transport's Rust type names, and
/// saying what the egress proxy's answers mean.
fn plain_error(e: &dyn std::fmt::Display) -> String {
    let mut text = e.to_string();
    if let (Some(start), Some(end)) = (text.find("Transport ["), text.find("] error: "))
        && start < end
    {
        text.replace_range(start..end + "] error: ".len(), "");
    }
    if text.contains("HTTP 403") {
        text.push_str(" (refused by the environment's egress proxy)");
    } else if text.contains("HTTP 502") || text.contains("HTTP 504") {
        text.push_str(" (the egress proxy could not reach the server)");
    }
    text
}

/// What the model gets of a server's answer: scrubbed whole, then cut to `limit`, so a value
/// the limit falls inside is replaced rather than cut with its start left in the text.
fn reply_text(text: String, secrets: &[String], limit: usize) -> String {
    cut(hookbox_hooks::scrub::scrub(&text, secrets), limit)
}

fn cut(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut at = limit;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    text.push_str("\n(output truncated)");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_plainly_and_output_is_cut_on_a_char_boundary() {
        let e = "Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: HTTP 502, when send initialize request";
        assert_eq!(
            plain_error(&e),
            "Send message error HTTP 502, when send initialize request (the egress proxy could not reach the server)"
        );
        assert_eq!(cut("héllo".into(), 2), "h\n(output truncated)");
        assert_eq!(cut("hi".into(), 2), "hi");
    }

    /// A server's answer is scrubbed before it is cut to the limit: an injected value the
    /// limit falls inside must not reach the model with its start.
    #[test]
    fn a_value_cut_by_the_output_limit_leaves_nothing_of_itself() {
        let secrets = vec!["Bearer sk-live-0123456789".to_owned()];
        let answer = format!(
            "{}auth: Bearer sk-live-0123456789 {}",
            "x".repeat(40),
            "y".repeat(40)
        );
        let limit = 40 + "auth: Bearer sk-live".len();
        let text = reply_text(answer, &secrets, limit);
        assert!(!text.contains("sk-live"), "{text}");
        assert!(text.ends_with("(output truncated)"), "{text}");
    }

    #[test]
    fn allowed_tools_filter_by_name() {
        let spec = |allowed: Option<Vec<&str>>| McpServerSpec {
            name: "docs".into(),
            url: "http://x/mcp".into(),
            headers: Vec::new(),
            allowed_tools: allowed.map(|a| a.into_iter().map(str::to_owned).collect()),
        };
        assert!(allowed(&spec(None), "anything"));
        assert!(allowed(&spec(Some(vec!["search"])), "search"));
        assert!(!allowed(&spec(Some(vec!["search"])), "secret"));
        assert!(!allowed(&spec(Some(vec![])), "search"));
    }
}
