//! Steps: an interaction's history, as the SDK reads it (calls, results, model output, and
//! unknown step types kept verbatim), and the SDK's `output_text` over them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::content::Content;

/// Arguments of a `code_execution_call` step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CodeExecutionArguments {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `python` or `bash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

/// One step of an interaction (`type` discriminator, spec §3.4). The six sandbox file tools have
/// no step type of their own in the SDK: they are `function_call` / `function_result` steps whose
/// `name` is the tool name. Unknown step types are kept as `Other`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Step {
    UserInput {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<Content>>,
    },
    ModelOutput {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<Content>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    },
    Thought {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<Vec<Content>>,
    },
    CodeExecutionCall {
        id: String,
        arguments: CodeExecutionArguments,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    CodeExecutionResult {
        call_id: String,
        /// A string or a content list.
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// hookbox extension: the hooks that ran around the call (files, diagnostics, pre and
        /// post dispatch). The SDK keeps unknown fields.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hooks: Option<Value>,
    },
    FunctionCall {
        id: String,
        name: String,
        arguments: Value,
        /// The model's thought signature (Gemini returns one with function calls and wants it
        /// back); an extra field the SDK keeps.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    FunctionResult {
        call_id: String,
        /// An object, a content list or a string.
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        /// hookbox extension: the hooks that ran around the call, as in `code_execution_result`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hooks: Option<Value>,
    },
    /// A call of a remote MCP server's tool (an `mcp_server` tool of the request).
    McpServerToolCall {
        id: String,
        /// The tool's name on its server.
        name: String,
        server_name: String,
        arguments: Value,
    },
    McpServerToolResult {
        call_id: String,
        /// The tool's output (text), or why the call failed.
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_name: Option<String>,
        /// hookbox extension, as on function results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        /// hookbox extension: the hooks that ran around the call (only with `mcp:` matchers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hooks: Option<Value>,
    },
    #[serde(untagged)]
    Other(Value),
}

impl Step {
    /// A `user_input` step holding one text item.
    pub fn user_text(text: impl Into<String>) -> Self {
        Step::UserInput {
            content: Some(vec![Content::text(text)]),
        }
    }

    /// A `model_output` step holding one text item.
    pub fn model_text(text: impl Into<String>) -> Self {
        Step::ModelOutput {
            content: Some(vec![Content::text(text)]),
            error: None,
        }
    }

    /// The `type` discriminator as sent on the wire.
    pub fn type_name(&self) -> &str {
        match self {
            Step::UserInput { .. } => "user_input",
            Step::ModelOutput { .. } => "model_output",
            Step::Thought { .. } => "thought",
            Step::CodeExecutionCall { .. } => "code_execution_call",
            Step::CodeExecutionResult { .. } => "code_execution_result",
            Step::FunctionCall { .. } => "function_call",
            Step::FunctionResult { .. } => "function_result",
            Step::McpServerToolCall { .. } => "mcp_server_tool_call",
            Step::McpServerToolResult { .. } => "mcp_server_tool_result",
            Step::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    /// The concatenated text items of a `user_input` or `model_output` step.
    pub fn text(&self) -> Option<String> {
        match self {
            Step::UserInput { content } | Step::ModelOutput { content, .. } => Some(
                content
                    .iter()
                    .flatten()
                    .filter_map(Content::as_text)
                    .collect::<String>(),
            ),
            _ => None,
        }
    }
}

/// `output_text` exactly as the SDK derives it from `steps` (spec §3.3). The server never sends
/// it; this exists so tests can assert on what an SDK user will see.
pub fn output_text(steps: &[Step]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    'steps: for step in steps.iter().rev() {
        match step {
            Step::UserInput { .. } => break,
            Step::Thought { .. } => continue,
            Step::ModelOutput { content, .. } => {
                let Some(content) = content else { continue };
                for item in content.iter().rev() {
                    match item.as_text() {
                        Some(t) => parts.push(t),
                        None if !parts.is_empty() => break 'steps,
                        None => {}
                    }
                }
            }
            _ if parts.is_empty() => continue,
            _ => break,
        }
    }
    parts.reverse();
    parts.concat()
}
