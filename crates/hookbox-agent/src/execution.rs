//! What one tool call produced, as the loop reads it: [`ToolExecution`] (what the model sees,
//! the error flag, a pre hook's deny reason, the hook trace) and, when a pre hook asked a person,
//! the [`ApprovalRequest`]. Every seam that runs a call answers with it: the built-in tools'
//! [`crate::seams::ToolExecutor`] and remote MCP servers' [`crate::mcp::McpTools`]. Values
//! only: this module runs nothing.

use serde_json::Value;

/// What running one tool call in an environment produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolExecution {
    /// What the model sees: a string (command output, file content) or JSON. When the call was
    /// denied, the deny reason.
    pub output: Value,
    /// The tool failed or was denied.
    pub is_error: bool,
    /// `Some(reason)` when a pre hook denied the call; the tool did not run.
    pub denied_reason: Option<String>,
    /// Hooks that ran and what they decided, for logs and audits (free-form).
    pub trace: Value,
    /// `Some` when a pre hook asked a person to decide (hookbox extension): the tool did not
    /// run, and the loop pauses the call for a reviewer.
    pub approval: Option<ApprovalRequest>,
}

/// What a pre hook's `ask` needs a reviewer to decide.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The hook's reason, shown to the reviewer.
    pub reason: String,
    /// The hooks group whose handler asked.
    pub group: String,
    /// The arguments the tool would run with (after any pre hook's `updated_args`).
    pub args: Value,
}

impl ToolExecution {
    /// A successful result.
    pub fn ok(output: impl Into<Value>) -> Self {
        ToolExecution {
            output: output.into(),
            is_error: false,
            denied_reason: None,
            trace: Value::Null,
            approval: None,
        }
    }

    /// A call a pre hook asked a person about: it did not run and waits for a reviewer.
    pub fn ask(request: ApprovalRequest) -> Self {
        ToolExecution {
            output: Value::String(request.reason.clone()),
            is_error: false,
            denied_reason: None,
            trace: Value::Null,
            approval: Some(request),
        }
    }

    /// A failed result.
    pub fn error(message: impl Into<String>) -> Self {
        ToolExecution {
            output: Value::String(message.into()),
            is_error: true,
            denied_reason: None,
            trace: Value::Null,
            approval: None,
        }
    }

    /// A call a pre hook denied: the reason goes back to the model as an error result.
    pub fn denied(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        ToolExecution {
            output: Value::String(reason.clone()),
            is_error: true,
            denied_reason: Some(reason),
            trace: Value::Null,
            approval: None,
        }
    }
}
