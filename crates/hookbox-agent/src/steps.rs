//! Tool calls as interaction steps: how a call and its result become steps ([`call_step`],
//! [`result_step`]), how the model backends read steps back as calls and results
//! ([`as_tool_step`], approval steps hidden), and the six built-in tools as the model sees them
//! (names, descriptions and JSON-schema parameters, for Gemini function declarations and OpenAI
//! tools alike). Argument names here are the contract with the environments' tools.

use hookbox_protocol::ToolName;
use hookbox_protocol::api::{CodeExecutionArguments, Step};
use serde_json::{Value, json};

/// Description and parameter schema of a tool.
pub fn declaration(tool: ToolName) -> (&'static str, Value) {
    let path =
        json!({"type": "string", "description": "Absolute sandbox path, e.g. /workspace/a.txt"});
    match tool {
        ToolName::CodeExecution => (
            "Run code in the sandbox (bash by default, or python) and return its output.",
            json!({"type": "object", "properties": {
                "code": {"type": "string", "description": "The program to run."},
                "language": {"type": "string", "enum": ["bash", "python"]}
            }, "required": ["code"]}),
        ),
        ToolName::ViewFile => (
            "Read a file in the sandbox.",
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        ),
        ToolName::WriteToFile => (
            "Create or overwrite a file in the sandbox with the given content.",
            json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}},
                   "required": ["path", "content"]}),
        ),
        ToolName::ReplaceFileContent => (
            "Replace old_content, which must occur exactly once, with new_content in a sandbox file.",
            json!({"type": "object", "properties": {"path": path, "old_content": {"type": "string"},
                   "new_content": {"type": "string"}}, "required": ["path", "old_content", "new_content"]}),
        ),
        ToolName::ListDir => (
            "List a directory in the sandbox.",
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        ),
        ToolName::DeleteFile => (
            "Delete a file in the sandbox.",
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        ),
    }
}

/// The call step for a tool call: `code_execution_call` for code execution, `function_call`
/// named after the tool otherwise (the SDK has no file-tool step types, spec §3.4).
pub fn call_step(id: &str, name: &str, args: &Value, signature: Option<String>) -> Step {
    if name == ToolName::CodeExecution.as_str() {
        Step::CodeExecutionCall {
            id: id.to_owned(),
            arguments: CodeExecutionArguments {
                code: args.get("code").and_then(Value::as_str).map(str::to_owned),
                language: Some(
                    args.get("language")
                        .and_then(Value::as_str)
                        .unwrap_or("bash")
                        .to_owned(),
                ),
            },
            signature,
        }
    } else {
        Step::FunctionCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: args.clone(),
            signature,
        }
    }
}

/// The result step answering [`call_step`]; `hooks` is the hook trace (an extra field).
pub fn result_step(
    call_id: &str,
    name: &str,
    output: Value,
    is_error: bool,
    hooks: Option<Value>,
) -> Step {
    if name == ToolName::CodeExecution.as_str() {
        Step::CodeExecutionResult {
            call_id: call_id.to_owned(),
            result: match output {
                Value::String(s) => Value::String(s),
                other => Value::String(other.to_string()),
            },
            is_error: Some(is_error),
            signature: None,
            hooks,
        }
    } else {
        Step::FunctionResult {
            call_id: call_id.to_owned(),
            result: output,
            name: Some(name.to_owned()),
            is_error: Some(is_error),
            hooks,
        }
    }
}

/// A call or result step seen generically, for the model backends.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolStep<'a> {
    Call {
        id: &'a str,
        /// The name the model called (for an MCP tool, its [`crate::mcp::model_name`]).
        name: std::borrow::Cow<'a, str>,
        args: Value,
        signature: Option<&'a str>,
    },
    Result {
        call_id: &'a str,
        name: Option<std::borrow::Cow<'a, str>>,
        output: &'a Value,
        is_error: bool,
    },
}

/// Views a step as a tool call or result, if it is one. Approval requests and their answers
/// ([`crate::approval::is_approval_step`]) are between the server and the client, not the
/// model's: `None`.
pub fn as_tool_step(step: &Step) -> Option<ToolStep<'_>> {
    if crate::approval::is_approval_step(step) {
        return None;
    }
    match step {
        Step::CodeExecutionCall {
            id,
            arguments,
            signature,
        } => Some(ToolStep::Call {
            id,
            name: ToolName::CodeExecution.as_str().into(),
            args: serde_json::to_value(arguments).unwrap_or(Value::Null),
            signature: signature.as_deref(),
        }),
        Step::FunctionCall {
            id,
            name,
            arguments,
            signature,
        } => Some(ToolStep::Call {
            id,
            name: name.as_str().into(),
            args: arguments.clone(),
            signature: signature.as_deref(),
        }),
        Step::McpServerToolCall {
            id,
            name,
            server_name,
            arguments,
        } => Some(ToolStep::Call {
            id,
            name: crate::mcp::model_name(server_name, name).into(),
            args: arguments.clone(),
            signature: None,
        }),
        Step::McpServerToolResult {
            call_id,
            result,
            name,
            server_name,
            is_error,
            ..
        } => Some(ToolStep::Result {
            call_id,
            name: match (server_name, name) {
                (Some(server), Some(tool)) => Some(crate::mcp::model_name(server, tool).into()),
                _ => name.as_deref().map(Into::into),
            },
            output: result,
            is_error: is_error.unwrap_or(false),
        }),
        Step::CodeExecutionResult {
            call_id,
            result,
            is_error,
            ..
        } => Some(ToolStep::Result {
            call_id,
            name: Some(ToolName::CodeExecution.as_str().into()),
            output: result,
            is_error: is_error.unwrap_or(false),
        }),
        Step::FunctionResult {
            call_id,
            result,
            name,
            is_error,
            ..
        } => Some(ToolStep::Result {
            call_id,
            name: name.as_deref().map(Into::into),
            output: result,
            is_error: is_error.unwrap_or(false),
        }),
        _ => None,
    }
}

/// A result value as text for the model.
pub fn output_as_text(output: &Value) -> String {
    match output {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
