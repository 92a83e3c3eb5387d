//! What a client's request says, checked before anything is created or stored: `input` as steps
//! ([`input_steps`]), `system_instruction` as text, the `function` tools the client runs and the
//! `mcp_server` tools hookbox connects to (names, URLs, header names and values), the same checks
//! for a request stored to run later ([`check_stored_request`]: a trigger's), and what is echoed
//! and stored of a request: `mcp_server` header values are secrets, shown and kept only as
//! [`REDACTED`].
//!
//! Pure functions of the request: this module reads no store and holds no state. Whether a
//! result step answers anything is a question about the interaction continued
//! ([`super::approvals`]).

use hookbox_agent::approval;
use hookbox_agent::mcp::McpServerSpec;
use hookbox_protocol::ToolName;
use hookbox_protocol::api::{Content, CreateInteractionRequest, Input, Step};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};

const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "document", "video"];

/// Normalises `input` into steps (spec §3.1): text and content items become one `user_input`;
/// step objects are kept.
pub(crate) fn input_steps(input: &Input) -> ApiResult<Vec<Step>> {
    let content_value = |v: &Value| -> ApiResult<Content> {
        let mut v = v.clone();
        if let Some(obj) = v.as_object_mut()
            && !obj.contains_key("type")
            && obj.contains_key("text")
        {
            obj.insert("type".into(), Value::String("text".into()));
        }
        serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("Invalid content in `input`: {e}.")))
    };
    match input {
        Input::Text(text) => Ok(vec![Step::user_text(text.clone())]),
        Input::Single(obj) => Ok(vec![Step::UserInput {
            content: Some(vec![content_value(&Value::Object(obj.clone()))?]),
        }]),
        Input::List(items) => {
            let mut steps = Vec::new();
            let mut pending: Vec<Content> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let ty = item.get("type").and_then(Value::as_str);
                let is_content = match ty {
                    Some(t) => CONTENT_TYPES.contains(&t),
                    None => item.get("text").is_some(),
                };
                if is_content {
                    pending.push(content_value(item)?);
                    continue;
                }
                if ty.is_none() {
                    return Err(ApiError::bad_request(format!(
                        "Invalid `input[{i}]`: expected a content object (`type` text, image, …) or a step (`type` user_input, function_result, …)."
                    )));
                }
                if !pending.is_empty() {
                    steps.push(Step::UserInput {
                        content: Some(std::mem::take(&mut pending)),
                    });
                }
                let step: Step = serde_json::from_value(item.clone())
                    .map_err(|e| ApiError::bad_request(format!("Invalid `input[{i}]`: {e}.")))?;
                steps.push(step);
            }
            if !pending.is_empty() {
                steps.push(Step::UserInput {
                    content: Some(pending),
                });
            }
            Ok(steps)
        }
    }
}

/// `system_instruction` as plain text (a string, a content object or a list of them).
pub(crate) fn instruction_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("text").and_then(Value::as_str).map(str::to_owned),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().filter_map(instruction_text).collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        _ => None,
    }
}

/// The `function` tools of `tools` (the client runs them): checked names, unique, never one of
/// the sandbox's own tools. Other tool types are echoed and otherwise ignored here.
pub(crate) fn function_tools(
    tools: Option<&[Value]>,
) -> ApiResult<Vec<hookbox_agent::model::FunctionDecl>> {
    let mut functions: Vec<hookbox_agent::model::FunctionDecl> = Vec::new();
    for (i, tool) in tools.unwrap_or_default().iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name` `{name}`: 1-64 letters, digits, `_`, `-` or `.`, starting with a letter or `_`."
            )));
        }
        if name.parse::<ToolName>().is_ok() {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is one of the sandbox's own tools; give the function another name."
            )));
        }
        if name == approval::APPROVAL_FUNCTION {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is reserved for hookbox's approval requests; give the function another name."
            )));
        }
        if functions.iter().any(|f| f.name == name) {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is declared twice."
            )));
        }
        let parameters = match tool.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object"}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid `tools[{i}].parameters`: expected a JSON schema object."
                )));
            }
        };
        functions.push(hookbox_agent::model::FunctionDecl {
            name: name.to_owned(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            parameters,
        });
    }
    Ok(functions)
}

/// Longest `short_description` kept for the model (characters); a longer one is cut.
const MAX_SHORT_DESCRIPTION: usize = 200;

/// The interaction's `tool_search` tool (google-genai 3.4.0+) with its deferred tools: the
/// `function` tools of `functions` and the `mcp_server` tools with `defer_loading: true`.
/// `None` without a `tool_search` tool; a deferred tool without one is a 400 (it could never be
/// loaded), as are two `tool_search` tools, an `execution` other than `server` or `client`, and
/// a client search named like another function.
pub(crate) fn tool_search(
    tools: Option<&[Value]>,
    functions: &[hookbox_agent::model::FunctionDecl],
) -> ApiResult<Option<hookbox_agent::tool_search::Search>> {
    use hookbox_agent::tool_search::{DEFAULT_NAME, Deferred, Execution, Search};
    let tools = tools.unwrap_or_default();
    let deferred = |t: &Value| t.get("defer_loading").and_then(Value::as_bool) == Some(true);
    let mut search: Option<(usize, Search)> = None;
    for (i, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("tool_search") {
            continue;
        }
        if search.is_some() {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}]`: only one `tool_search` tool may be given."
            )));
        }
        let execution = match tool.get("execution").and_then(Value::as_str) {
            None | Some("server") => Execution::Server,
            Some("client") => Execution::Client,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Invalid `tools[{i}].execution` `{other}`: `server` or `client`."
                )));
            }
        };
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_NAME)
            .to_owned();
        if functions.iter().any(|f| f.name == name) {
            return Err(ApiError::bad_request(format!(
                "Invalid `tools[{i}].name`: `{name}` is also a function's name."
            )));
        }
        search = Some((
            i,
            Search {
                execution,
                name,
                description: tool
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: tool.get("parameters").filter(|p| p.is_object()).cloned(),
                functions: Vec::new(),
                servers: Vec::new(),
            },
        ));
    }
    let Some((_, mut search)) = search else {
        if let Some(i) = tools.iter().position(deferred) {
            return Err(ApiError::bad_request(format!(
                "`tools[{i}]` has `defer_loading` but there is no `tool_search` tool to load it with; add `{{\"type\": \"tool_search\"}}`."
            )));
        }
        return Ok(None);
    };
    for tool in tools.iter().filter(|t| deferred(t)) {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {
                if let Some(decl) = functions.iter().find(|f| f.name == name) {
                    let summary = tool
                        .get("short_description")
                        .and_then(Value::as_str)
                        .map(|s| s.chars().take(MAX_SHORT_DESCRIPTION).collect())
                        .unwrap_or_default();
                    search.functions.push(Deferred {
                        decl: decl.clone(),
                        summary,
                    });
                }
            }
            Some("mcp_server") => search.servers.push(name.to_owned()),
            _ => {}
        }
    }
    Ok(Some(search))
}

/// The longest MCP server name (it is part of every name the model calls its tools by).
const MAX_MCP_SERVER_NAME: usize = 32;

/// The `mcp_server` tools of `tools`: a name (letters, digits, `_`, `-`; unique), an `http(s)`
/// URL, string headers, and `allowed_tools` (`[{"tools": [...]}]`).
pub(crate) fn mcp_servers(tools: Option<&[Value]>) -> ApiResult<Vec<McpServerSpec>> {
    let mut servers: Vec<McpServerSpec> = Vec::new();
    for (i, tool) in tools.unwrap_or_default().iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("mcp_server") {
            continue;
        }
        let bad = |field: &str, why: &str| {
            ApiError::bad_request(format!("Invalid `tools[{i}].{field}`: {why}."))
        };
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty()
            || name.len() > MAX_MCP_SERVER_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err(bad(
                "name",
                &format!("`{name}` must be 1-{MAX_MCP_SERVER_NAME} letters, digits, `_` or `-`"),
            ));
        }
        if servers.iter().any(|s| s.name == name) {
            return Err(bad("name", &format!("`{name}` is declared twice")));
        }
        let url = tool.get("url").and_then(Value::as_str).unwrap_or_default();
        match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            _ => return Err(bad("url", &format!("`{url}` is not an http(s) URL"))),
        }
        let headers = match tool.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => {
                let mut headers = Vec::new();
                for (k, v) in map {
                    let Some(v) = v.as_str() else {
                        return Err(bad(&format!("headers.{k}"), "expected a string"));
                    };
                    // Refused here, never silently left out of the connection later.
                    if let Err(why) = hookbox_egress::inject::check_header_name(k)
                        .and_then(|()| hookbox_egress::inject::check_header_value(v))
                    {
                        return Err(bad(&format!("headers.{k}"), why));
                    }
                    // What an echoed interaction shows instead of a value: resending it would
                    // send the marker to the server as if it were the secret.
                    if v == REDACTED {
                        return Err(bad(
                            &format!("headers.{k}"),
                            &format!(
                                "`{REDACTED}` is the placeholder hookbox echoes instead of a header value, not a value; send the real value, or leave the header out"
                            ),
                        ));
                    }
                    headers.push((k.clone(), v.to_owned()));
                }
                headers
            }
            Some(_) => return Err(bad("headers", "expected an object of strings")),
        };
        let allowed_tools = match tool.get("allowed_tools") {
            None | Some(Value::Null) => None,
            Some(Value::Array(entries)) => {
                let mut names = Vec::new();
                for (j, entry) in entries.iter().enumerate() {
                    match entry.get("tools") {
                        None | Some(Value::Null) => {}
                        Some(Value::Array(list)) => {
                            for t in list {
                                match t.as_str() {
                                    Some(t) => names.push(t.to_owned()),
                                    None => {
                                        return Err(bad(
                                            &format!("allowed_tools[{j}].tools"),
                                            "expected tool names (strings)",
                                        ));
                                    }
                                }
                            }
                        }
                        Some(_) => {
                            return Err(bad(
                                &format!("allowed_tools[{j}].tools"),
                                "expected a list of tool names",
                            ));
                        }
                    }
                }
                Some(names)
            }
            Some(_) => {
                return Err(bad(
                    "allowed_tools",
                    "expected a list of {\"tools\": [...]}",
                ));
            }
        };
        servers.push(McpServerSpec {
            name: name.to_owned(),
            url: url.to_owned(),
            headers,
            allowed_tools,
        });
    }
    if servers.len() > hookbox_agent::mcp::MAX_SERVERS {
        return Err(ApiError::bad_request(format!(
            "Invalid `tools`: {} mcp_server entries; hookbox connects to at most {} MCP servers per interaction.",
            servers.len(),
            hookbox_agent::mcp::MAX_SERVERS
        )));
    }
    // The model calls a tool `<server>__<tool>`: a server named after another's prefix could
    // list a tool whose name is the other's (`a` + `b__c` and `a__b` + `c`).
    for s in &servers {
        if let Some(other) = servers
            .iter()
            .find(|o| o.name != s.name && s.name.starts_with(&format!("{}__", o.name)))
        {
            return Err(ApiError::bad_request(format!(
                "Invalid mcp_server name `{}`: it starts with `{}__`, the prefix of MCP server `{}`'s tools, so their tools' names could clash; rename one.",
                s.name, other.name, other.name
            )));
        }
    }
    Ok(servers)
}

/// What stored and echoed `tools` show instead of an `mcp_server` header's value.
pub(crate) const REDACTED: &str = "[redacted]";

/// Checks, when it is stored, what a stored request (a trigger's `interaction`) sends at every
/// run, as `POST /interactions` checks it: its `tools` (`at`: where the request is in the
/// body) and its embedded environment's `network` (`environment_at`: where that environment
/// is). A bad header name or value is refused here, naming the field, never silently dropped
/// at run time.
pub(crate) fn check_stored_request(
    tools: Option<&[Value]>,
    environment: Option<&Value>,
    at: &str,
    environment_at: &str,
) -> ApiResult<()> {
    let within = |e: ApiError| ApiError {
        message: format!("In `{at}`: {}", e.message),
        ..e
    };
    let functions = function_tools(tools).map_err(within)?;
    let servers = mcp_servers(tools).map_err(within)?;
    check_function_names(&functions, &servers).map_err(within)?;
    check_environment_network(environment, environment_at)
}

/// Refuses an embedded environment spec (JSON, at `at` in the body) whose `network` could not
/// be enforced as written.
pub(crate) fn check_environment_network(environment: Option<&Value>, at: &str) -> ApiResult<()> {
    if let Some(network) = environment.and_then(|e| e.get("network"))
        && let Err(e) = hookbox_environments::network::validate_policy(Some(network))
    {
        return Err(ApiError::bad_request(format!(
            "Invalid `{at}.network{}`: {}.",
            e.path, e.message
        )));
    }
    Ok(())
}

/// Refuses a client function whose name an MCP server's tools could take (`<server>__...`):
/// the model's call would be ambiguous.
pub(crate) fn check_function_names(
    functions: &[hookbox_agent::model::FunctionDecl],
    servers: &[McpServerSpec],
) -> ApiResult<()> {
    for f in functions {
        if let Some(s) = servers.iter().find(|s| {
            f.name
                .starts_with(&hookbox_agent::mcp::model_name(&s.name, ""))
        }) {
            return Err(ApiError::bad_request(format!(
                "Invalid function name `{}`: it starts with `{}__`, the prefix of MCP server `{}`'s tools, so it could clash with one of them; rename it.",
                f.name, s.name, s.name
            )));
        }
    }
    Ok(())
}

/// `tools` as stored and echoed: `mcp_server` headers' values are secrets, never kept.
pub(crate) fn redacted_tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            if tool.get("type").and_then(Value::as_str) == Some("mcp_server")
                && let Some(Value::Object(headers)) = tool.get_mut("headers")
            {
                for value in headers.values_mut() {
                    *value = Value::String(REDACTED.into());
                }
            }
            tool
        })
        .collect()
}

/// Stored `tools` with the redacted `mcp_server` header values left out (the servers are then
/// reached without them).
pub(crate) fn without_redacted_headers(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut tool = tool.clone();
            if let Some(Value::Object(headers)) = tool.get_mut("headers") {
                headers.retain(|_, v| v.as_str() != Some(REDACTED));
            }
            tool
        })
        .collect()
}

/// A result step of a client's input: its type and the call it answers (if it names one).
pub(crate) fn result_of(step: &Step) -> Option<(&str, Option<&str>)> {
    match step {
        Step::FunctionResult { call_id, .. }
        | Step::CodeExecutionResult { call_id, .. }
        | Step::McpServerToolResult { call_id, .. } => {
            Some((step.type_name(), Some(call_id.as_str())))
        }
        Step::Other(v) => {
            let ty = v.get("type").and_then(Value::as_str)?;
            ty.ends_with("_result")
                .then(|| (ty, v.get("call_id").and_then(Value::as_str)))
        }
        _ => None,
    }
}

/// Request fields echoed on the Interaction.
pub(crate) fn echoes(req: &CreateInteractionRequest) -> Map<String, Value> {
    let mut extra = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            extra.insert(k.to_owned(), v);
        }
    };
    put(
        "agent_config",
        req.agent_config
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
    );
    put(
        "tools",
        req.tools
            .as_deref()
            .map(|tools| Value::Array(redacted_tools(tools))),
    );
    put("system_instruction", req.system_instruction.clone());
    for key in ["labels", "service_tier", "webhook_config"] {
        put(key, req.extra.get(key).cloned());
    }
    extra
}
