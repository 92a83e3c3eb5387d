//! Remote MCP servers' tools (`mcp_server` tools of an interaction) as the loop sees them: what
//! the model is offered, the name it calls each tool by, and the seam that runs a call
//! ([`McpTools`], implemented where connections and egress live). At most [`MAX_SERVERS`] per
//! interaction; listed tools whose model names clash are [`Withheld`], never shadowed. This
//! module opens no connection itself.

use async_trait::async_trait;
use serde_json::Value;

use crate::execution::ToolExecution;

/// The most `mcp_server` entries one request may declare (each is a connection, a listing and
/// tools in every model turn).
pub const MAX_SERVERS: usize = 16;

/// One `mcp_server` entry of an interaction's `tools`. Its `Debug` never shows header values.
#[derive(Clone, PartialEq)]
pub struct McpServerSpec {
    /// How steps and hook matchers name the server (`mcp:<name>/<tool>`).
    pub name: String,
    pub url: String,
    /// Sent with every request to the server, as given; never stored or traced.
    pub headers: Vec<(String, String)>,
    /// `allowed_tools[].tools`, all lists together; `None`: every tool the server lists.
    pub allowed_tools: Option<Vec<String>>,
}

impl std::fmt::Debug for McpServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerSpec")
            .field("name", &self.name)
            .field("url", &self.url)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("allowed_tools", &self.allowed_tools)
            .finish()
    }
}

/// A tool of a connected server, as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolDecl {
    pub server: String,
    pub tool: String,
    pub description: String,
    /// JSON schema of its arguments.
    pub parameters: Value,
}

impl McpToolDecl {
    /// The function name the model calls it by ([`model_name`]).
    pub fn model_name(&self) -> String {
        model_name(&self.server, &self.tool)
    }
}

/// The name a model calls `tool` of `server` by: `<server>__<tool>`, with every character
/// outside `[A-Za-z0-9_-]` replaced by `_` and cut to 64 characters, which both Gemini and
/// OpenAI-compatible servers accept.
pub fn model_name(server: &str, tool: &str) -> String {
    format!("{server}__{tool}")
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .take(64)
        .collect()
}

/// A listed tool the model is not offered because its model name ([`model_name`]) is also
/// another listed tool's (`a.b` and `a_b` both become `<server>__a_b`): offering either would
/// let one shadow the other, so neither is offered, and the model is told why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub server: String,
    /// The tool's own name, as its server lists it.
    pub tool: String,
    /// The model name it shares.
    pub model_name: String,
    /// Why, naming the tools that share it.
    pub why: String,
}

/// Splits `tools` into those offered and those [`Withheld`] because their model names clash.
/// Order is kept.
pub fn withhold_clashes(tools: Vec<McpToolDecl>) -> (Vec<McpToolDecl>, Vec<Withheld>) {
    let mut by_name: std::collections::HashMap<String, Vec<String>> =
        std::collections::HashMap::new();
    for t in &tools {
        by_name
            .entry(t.model_name())
            .or_default()
            .push(format!("`{}` of `{}`", t.tool, t.server));
    }
    let mut offered = Vec::new();
    let mut withheld = Vec::new();
    for t in tools {
        let name = t.model_name();
        match by_name.get(&name) {
            Some(sharing) if sharing.len() > 1 => withheld.push(Withheld {
                why: format!(
                    "the tools {} would all be called `{name}`, so none of them is offered (keep one with allowed_tools)",
                    sharing.join(" and ")
                ),
                server: t.server,
                tool: t.tool,
                model_name: name,
            }),
            _ => offered.push(t),
        }
    }
    (offered, withheld)
}

/// The hook matcher name of a call (`mcp:<server>/<tool>`): only matchers that start with
/// `mcp:` see it.
pub fn hook_name(server: &str, tool: &str) -> String {
    format!("mcp:{server}/{tool}")
}

/// The remote MCP servers of one run: their tools, the ones that could not be reached, and
/// calls.
#[async_trait]
pub trait McpTools: Send + Sync + std::fmt::Debug {
    /// The tools offered to the model (already filtered by `allowed_tools`).
    fn tools(&self) -> &[McpToolDecl];
    /// Servers whose tools could not be listed, with why (told to the model; a call of a tool
    /// of theirs gets the reason as its error).
    fn unavailable(&self) -> &[(String, String)];
    /// Listed tools not offered because their model names clash (told to the model; a call by
    /// that name gets the reason as its error).
    fn withheld(&self) -> &[Withheld] {
        &[]
    }
    /// Calls `tool` of `server` (through the environment's hooks for `mcp:` matchers, if any):
    /// failures are error results, never errors of the run.
    async fn call(&self, server: &str, tool: &str, args: &Value) -> ToolExecution;
}

/// Servers none of which could be reached, each with why; `Unreachable::default()` is a run
/// without MCP servers.
#[derive(Debug, Default)]
pub struct Unreachable(pub Vec<(String, String)>);

impl Unreachable {
    /// Every server of `servers`, unreachable for the same reason.
    pub fn all(servers: &[McpServerSpec], why: &str) -> Self {
        Unreachable(
            servers
                .iter()
                .map(|s| (s.name.clone(), why.to_owned()))
                .collect(),
        )
    }
}

#[async_trait]
impl McpTools for Unreachable {
    fn tools(&self) -> &[McpToolDecl] {
        &[]
    }

    fn unavailable(&self) -> &[(String, String)] {
        &self.0
    }

    async fn call(&self, server: &str, _tool: &str, _args: &Value) -> ToolExecution {
        ToolExecution::error(format!("MCP server `{server}` is not connected"))
    }
}

/// What a model-facing function name refers to among `mcp`'s servers: `(server, tool)` of an
/// offered tool, or `(server, None)` for a withheld tool's name or a name that starts with an
/// unavailable server's prefix.
pub fn resolve<'a>(mcp: &'a dyn McpTools, name: &str) -> Option<(&'a str, Option<&'a str>)> {
    if let Some(t) = mcp.tools().iter().find(|t| t.model_name() == name) {
        return Some((&t.server, Some(&t.tool)));
    }
    if let Some(w) = mcp.withheld().iter().find(|w| w.model_name == name) {
        return Some((&w.server, None));
    }
    mcp.unavailable()
        .iter()
        .find(|(server, _)| name.starts_with(&model_name(server, "")))
        .map(|(server, _)| (server.as_str(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_header_values() {
        let spec = McpServerSpec {
            name: "docs".into(),
            url: "https://x/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer s3cret".into())],
            allowed_tools: None,
        };
        let shown = format!("{spec:?}");
        assert!(
            shown.contains("Authorization") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    fn decl(server: &str, tool: &str) -> McpToolDecl {
        McpToolDecl {
            server: server.into(),
            tool: tool.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    #[test]
    fn tools_whose_model_names_clash_are_withheld_never_shadowed() {
        let (offered, withheld) = withhold_clashes(vec![
            decl("docs", "a.b"),
            decl("docs", "search"),
            decl("docs", "a_b"),
            decl("docs", "a b"),
        ]);
        assert_eq!(offered, vec![decl("docs", "search")]);
        assert_eq!(
            withheld.iter().map(|w| w.tool.as_str()).collect::<Vec<_>>(),
            ["a.b", "a_b", "a b"]
        );
        assert!(withheld.iter().all(|w| w.model_name == "docs__a_b"));
        assert!(
            withheld[0]
                .why
                .contains("`a.b` of `docs` and `a_b` of `docs`")
        );
        // Long names clash once cut to 64 characters.
        let long = "x".repeat(70);
        let (offered, withheld) = withhold_clashes(vec![
            decl("s", &format!("{long}1")),
            decl("s", &format!("{long}2")),
        ]);
        assert!(offered.is_empty() && withheld.len() == 2);
    }

    #[test]
    fn model_names_are_safe_for_every_backend() {
        assert_eq!(model_name("docs", "search"), "docs__search");
        assert_eq!(model_name("my.srv", "a/b c"), "my_srv__a_b_c");
        assert_eq!(model_name(&"x".repeat(50), &"y".repeat(50)).len(), 64);
        assert_eq!(hook_name("docs", "search"), "mcp:docs/search");
    }
}
