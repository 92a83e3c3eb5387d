//! Tool search (google-genai 3.4.0+): deferred tools (`function` and `mcp_server` tools with
//! `defer_loading: true`) are offered to the model by name and a short description only, in the
//! description of one search function, until a search loads them; from then on (the rest of the
//! conversation, which records the search) they are offered in full.
//!
//! - `execution: "server"` (the default): hookbox answers the search itself ([`search`]: names
//!   asked for in `function_names`, or a case-insensitive match of `query` on names and
//!   descriptions, at most [`MAX_RESULTS`]), recorded as a `tool_search_call` step and a
//!   `tool_search_result` step holding the full definitions, and the loop goes on.
//! - `execution: "client"`: the search is the client's function (its `name`, `description`,
//!   `parameters`); a call ends the turn `requires_action`, and the client's `function_result`
//!   whose `result` lists `function` definitions loads those (only deferred ones: nothing
//!   undeclared becomes callable).
//!
//! This module decides what the model sees ([`Search::offered`]) and answers server searches; the
//! loop (`agent_loop`) calls it. It does no I/O.

use std::collections::BTreeSet;

use hookbox_protocol::api::Step;
use serde_json::{Value, json};

use crate::model::FunctionDecl;

/// Most definitions one server-side search returns.
pub const MAX_RESULTS: usize = 5;
/// Longest `query` read (characters).
pub const MAX_QUERY_CHARS: usize = 256;
/// The search function's name when a `tool_search` tool gives none.
pub const DEFAULT_NAME: &str = "tool_search";
/// Longest summary of a deferred tool shown before it is loaded (characters).
pub const MAX_SUMMARY_CHARS: usize = 200;

/// Where a search is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Execution {
    Server,
    Client,
}

/// One deferred tool: its full declaration and what the model sees of it before it is loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    pub decl: FunctionDecl,
    /// `short_description` of a function; the first line of an MCP tool's description.
    pub summary: String,
}

/// The interaction's `tool_search` tool and its deferred tools.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub execution: Execution,
    /// The function the model calls to search.
    pub name: String,
    /// The client's description (client execution).
    pub description: Option<String>,
    /// The client's parameters (client execution).
    pub parameters: Option<Value>,
    /// Deferred client functions.
    pub functions: Vec<Deferred>,
    /// `mcp_server` tools with `defer_loading`, by server name: their tools are deferred.
    pub servers: Vec<String>,
}

/// Cuts `text` to its first line, at most [`MAX_SUMMARY_CHARS`] characters.
pub fn summary_of(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(MAX_SUMMARY_CHARS)
        .collect()
}

/// Names the conversation has loaded: the definitions of every `tool_search_result` step, and
/// of every `function_result` whose result lists `function` definitions (a client search).
pub fn loaded(conversation: &[Step]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut add = |list: Option<&Vec<Value>>| {
        for def in list.into_iter().flatten() {
            if let Some(name) = def.get("name").and_then(Value::as_str) {
                names.insert(name.to_owned());
            }
        }
    };
    for step in conversation {
        match step {
            Step::Other(v)
                if v.get("type").and_then(Value::as_str) == Some("tool_search_result") =>
            {
                add(v.get("result").and_then(Value::as_array));
            }
            Step::FunctionResult { result, .. } => add(result.as_array()),
            _ => {}
        }
    }
    names
}

impl Search {
    /// The deferred tools: client functions, and the tools of deferred MCP servers in `mcp`
    /// (the loop's offered MCP declarations, named `<server>__<tool>`).
    pub fn deferred(&self, mcp: &[FunctionDecl]) -> Vec<Deferred> {
        let mut all = self.functions.clone();
        for decl in mcp {
            if self.is_deferred_mcp(&decl.name) {
                all.push(Deferred {
                    summary: summary_of(&decl.description),
                    decl: decl.clone(),
                });
            }
        }
        all
    }

    /// Whether `model_name` (`<server>__<tool>`) is a tool of a deferred MCP server.
    pub fn is_deferred_mcp(&self, model_name: &str) -> bool {
        self.servers.iter().any(|s| {
            model_name
                .strip_prefix(s.as_str())
                .is_some_and(|r| r.starts_with("__"))
        })
    }

    /// The search function as the model is offered it: the client's declaration (client
    /// execution) or hookbox's, its description listing every deferred tool not yet loaded by
    /// name and summary.
    pub fn declaration(&self, waiting: &[&Deferred]) -> FunctionDecl {
        let catalog: String = waiting
            .iter()
            .map(|d| format!("\n- {}: {}", d.decl.name, d.summary))
            .collect();
        let lead = match (self.execution, &self.description) {
            (Execution::Client, Some(d)) => d.clone(),
            _ => format!(
                "Search for tools and load their full definitions before calling them. Pass `function_names` (names from the list below) or a `query` matched against tool names and descriptions; at most {MAX_RESULTS} are returned."
            ),
        };
        let parameters = match (self.execution, &self.parameters) {
            (Execution::Client, Some(p)) => p.clone(),
            _ => json!({"type": "object", "properties": {
                "function_names": {"type": "array", "items": {"type": "string"}},
                "query": {"type": "string"}}}),
        };
        FunctionDecl {
            name: self.name.clone(),
            description: if catalog.is_empty() {
                lead
            } else {
                format!("{lead}\nTools you can load:{catalog}")
            },
            parameters,
        }
    }

    /// What the model is offered this turn, of `offered` (client functions and MCP tools): the
    /// tools not deferred, the deferred ones `conversation` loaded, then the search function.
    pub fn offered(&self, offered: &[FunctionDecl], conversation: &[Step]) -> Vec<FunctionDecl> {
        let loaded = loaded(conversation);
        let deferred = self.deferred(offered);
        let is_deferred = |name: &str| deferred.iter().any(|d| d.decl.name == name);
        let mut visible: Vec<FunctionDecl> = offered
            .iter()
            .filter(|f| !is_deferred(&f.name) || loaded.contains(&f.name))
            .cloned()
            .collect();
        let waiting: Vec<&Deferred> = deferred
            .iter()
            .filter(|d| !loaded.contains(&d.decl.name))
            .collect();
        visible.push(self.declaration(&waiting));
        visible
    }

    /// Whether the model may call `name` now: not a deferred tool `conversation` has not loaded.
    pub fn may_call(&self, offered: &[FunctionDecl], conversation: &[Step], name: &str) -> bool {
        let deferred = self.deferred(offered);
        !deferred.iter().any(|d| d.decl.name == name) || loaded(conversation).contains(name)
    }
}

/// A server-side search of `deferred` for `args` (`function_names`, `query`): the named tools
/// first, then those whose name or description contains the query (case-insensitive), each once,
/// at most [`MAX_RESULTS`].
pub fn search<'a>(deferred: &'a [Deferred], args: &Value) -> Vec<&'a Deferred> {
    let mut found: Vec<&Deferred> = Vec::new();
    let names = args
        .get("function_names")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for name in names {
        if let Some(d) = deferred.iter().find(|d| d.decl.name == name)
            && !found.iter().any(|f| f.decl.name == d.decl.name)
        {
            found.push(d);
        }
    }
    if let Some(query) = args.get("query").and_then(Value::as_str) {
        let query: String = query
            .chars()
            .take(MAX_QUERY_CHARS)
            .collect::<String>()
            .to_lowercase();
        let words: Vec<&str> = query.split_whitespace().collect();
        for d in deferred {
            let hay =
                format!("{} {} {}", d.decl.name, d.summary, d.decl.description).to_lowercase();
            if !words.is_empty()
                && words.iter().all(|w| hay.contains(w))
                && !found.iter().any(|f| f.decl.name == d.decl.name)
            {
                found.push(d);
            }
        }
    }
    found.truncate(MAX_RESULTS);
    found
}

/// The `tool_search_call` step of a server search, as the SDK types it (`arguments` keeps the
/// `query`, an extra field the SDK keeps).
pub fn call_step(id: &str, args: &Value) -> Step {
    let mut arguments = serde_json::Map::new();
    for key in ["function_names", "query"] {
        if let Some(v) = args.get(key) {
            arguments.insert(key.to_owned(), v.clone());
        }
    }
    Step::Other(json!({"type": "tool_search_call", "id": id, "arguments": arguments}))
}

/// The `tool_search_result` step: the full `function` definitions found.
pub fn result_step(call_id: &str, found: &[&Deferred]) -> Step {
    let result: Vec<Value> = found
        .iter()
        .map(|d| {
            json!({"type": "function", "name": d.decl.name, "description": d.decl.description,
                   "parameters": d.decl.parameters})
        })
        .collect();
    Step::Other(json!({"type": "tool_search_result", "call_id": call_id, "result": result}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, description: &str) -> FunctionDecl {
        FunctionDecl {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object"}),
        }
    }

    fn search_tool() -> Search {
        Search {
            execution: Execution::Server,
            name: DEFAULT_NAME.into(),
            description: None,
            parameters: None,
            functions: vec![Deferred {
                decl: decl("get_weather", "Full weather description."),
                summary: "Weather now.".into(),
            }],
            servers: vec!["crm".into()],
        }
    }

    #[test]
    fn deferred_tools_are_offered_by_name_until_a_search_loads_them() {
        let s = search_tool();
        let offered = vec![
            decl("plain", "always there"),
            decl("get_weather", "Full weather description."),
            decl("crm__find_customer", "Finds a customer by name.\nMore."),
        ];
        let names = |v: &[FunctionDecl]| v.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        let first = s.offered(&offered, &[]);
        assert_eq!(names(&first), ["plain", "tool_search"]);
        let catalog = &first[1].description;
        assert!(catalog.contains("- get_weather: Weather now."), "{catalog}");
        assert!(
            catalog.contains("- crm__find_customer: Finds a customer by name."),
            "{catalog}"
        );
        assert!(!catalog.contains("Full weather description"), "{catalog}");
        assert!(!s.may_call(&offered, &[], "get_weather"));

        let deferred = s.deferred(&offered);
        let found = search(&deferred, &json!({"query": "CUSTOMER"}));
        let conversation = vec![
            call_step("ts_1", &json!({"query": "customer"})),
            result_step("ts_1", &found),
        ];
        let after = s.offered(&offered, &conversation);
        assert_eq!(
            names(&after),
            ["plain", "crm__find_customer", "tool_search"]
        );
        assert!(s.may_call(&offered, &conversation, "crm__find_customer"));
        assert!(!s.may_call(&offered, &conversation, "get_weather"));
    }

    #[test]
    fn a_server_search_is_bounded_and_names_come_first() {
        let deferred: Vec<Deferred> = (0..9)
            .map(|i| Deferred {
                decl: decl(&format!("tool_{i}"), "does things"),
                summary: String::new(),
            })
            .collect();
        let found = search(
            &deferred,
            &json!({"function_names": ["tool_8", "nope"], "query": "things"}),
        );
        let names: Vec<&str> = found.iter().map(|d| d.decl.name.as_str()).collect();
        assert_eq!(names, ["tool_8", "tool_0", "tool_1", "tool_2", "tool_3"]);
        assert!(search(&deferred, &json!({"query": "   "})).is_empty());
        assert!(search(&deferred, &json!({})).is_empty());
    }

    /// What the two real adapters send: a deferred tool's name and summary only (inside the
    /// search function's description) until a search loaded it, then its whole declaration.
    #[test]
    fn both_real_adapters_declare_only_what_the_model_may_see() {
        let s = search_tool();
        let offered = vec![
            decl("plain", "always there"),
            decl("get_weather", "Full weather description."),
        ];
        let steps_before = vec![Step::user_text("weather?")];
        let deferred = s.deferred(&offered);
        let found = search(&deferred, &json!({"function_names": ["get_weather"]}));
        let mut steps_after = steps_before.clone();
        steps_after.push(call_step(
            "ts_1",
            &json!({"function_names": ["get_weather"]}),
        ));
        steps_after.push(result_step("ts_1", &found));
        let openai = crate::openai::OpenAiModel::new("http://127.0.0.1:9/v1", "m", None);
        for (steps, loaded) in [(&steps_before, false), (&steps_after, true)] {
            let functions = s.offered(&offered, steps);
            let request = crate::model::ModelRequest {
                model: None,
                system_instruction: None,
                steps,
                tools: &[],
                functions: &functions,
                tool_search: Some(&s.name),
            };
            let gemini = crate::gemini::GeminiModel::body(&request);
            let gemini_names: Vec<&str> = gemini["tools"][0]["functionDeclarations"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["name"].as_str().unwrap())
                .collect();
            let openai_body = openai.body(&request);
            let openai_names: Vec<&str> = openai_body["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["function"]["name"].as_str().unwrap())
                .collect();
            let want: &[&str] = if loaded {
                &["plain", "get_weather", "tool_search"]
            } else {
                &["plain", "tool_search"]
            };
            assert_eq!(gemini_names, want);
            assert_eq!(openai_names, want);
            for body in [gemini.to_string(), openai_body.to_string()] {
                assert_eq!(body.contains("Full weather description."), loaded, "{body}");
                assert_eq!(
                    body.contains("get_weather: Weather now."),
                    !loaded,
                    "{body}"
                );
            }
        }
    }

    #[test]
    fn a_client_search_result_loads_only_what_it_lists() {
        let conversation = vec![Step::FunctionResult {
            call_id: "c".into(),
            result: json!([{"type": "function", "name": "get_weather"}]),
            name: Some("my_search".into()),
            is_error: None,
            hooks: None,
        }];
        assert_eq!(
            loaded(&conversation).into_iter().collect::<Vec<_>>(),
            ["get_weather"]
        );
    }
}
