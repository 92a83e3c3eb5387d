//! Wire shapes shared by every hookbox crate: the six built-in tool names, a tool call, the
//! JSON payload that hook handlers receive, and one bounded POST ([`post`]: what http hooks and
//! webhook deliveries send through egress).
//!
//! This crate is serde-only. It must not do I/O, spawn processes or know about sandboxes, hooks
//! configuration files or the HTTP API; those live in the crates that depend on it.

pub mod api;
pub mod events;
pub mod post;
pub mod triggers;
pub mod webhooks;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How each text a hook answered as `additional_context` (hookbox extension) begins where the
/// model sees it (beside a tool's result, or with the system instruction): each piece on its own
/// line. The one spelling of it.
pub const HOOK_CONTEXT_PREFIX: &str = "[context from hooks] ";

/// Injected secret values shorter than this are neither masked in what the egress relays nor
/// scrubbed from what hook handlers say: they cannot be told apart from ordinary text (and are
/// no secret worth the name). One bound for both, so that they agree on what is a secret.
pub const MIN_SECRET_LEN: usize = 8;

/// The built-in sandbox tools that hooks can gate. Hooks never fire for other tools
/// (client-side `function` calls, MCP tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolName {
    CodeExecution,
    ViewFile,
    WriteToFile,
    ReplaceFileContent,
    ListDir,
    DeleteFile,
}

impl ToolName {
    /// Every tool, in the order the reference documentation lists them.
    pub const ALL: [ToolName; 6] = [
        ToolName::CodeExecution,
        ToolName::ViewFile,
        ToolName::WriteToFile,
        ToolName::ReplaceFileContent,
        ToolName::ListDir,
        ToolName::DeleteFile,
    ];

    /// The name as the model, the hooks matcher and the payload see it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolName::CodeExecution => "code_execution",
            ToolName::ViewFile => "view_file",
            ToolName::WriteToFile => "write_to_file",
            ToolName::ReplaceFileContent => "replace_file_content",
            ToolName::ListDir => "list_dir",
            ToolName::DeleteFile => "delete_file",
        }
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of the six built-in tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown tool `{0}` (expected one of: code_execution, view_file, write_to_file, replace_file_content, list_dir, delete_file)"
)]
pub struct UnknownTool(pub String);

impl FromStr for ToolName {
    type Err = UnknownTool;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolName::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownTool(s.to_owned()))
    }
}

/// The lifecycle events hooks can attach to: the reference's two around a tool call, and
/// hookbox's two around an interaction (extensions, active only when a file names them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Just before the tool runs; handlers may deny.
    PreToolExecution,
    /// Right after the tool ran; output is ignored.
    PostToolExecution,
    /// Before the agent works on an interaction's input; handlers may deny the turn or add
    /// context for the model (hookbox extension).
    PreInteraction,
    /// After the interaction's turn ended, with its status and output; output is ignored
    /// (hookbox extension).
    PostInteraction,
}

impl HookEvent {
    /// Every event, in the order a group lists them.
    pub const ALL: [HookEvent; 4] = [
        HookEvent::PreToolExecution,
        HookEvent::PostToolExecution,
        HookEvent::PreInteraction,
        HookEvent::PostInteraction,
    ];

    /// The key of this event in a hooks group.
    pub const fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolExecution => "pre_tool_execution",
            HookEvent::PostToolExecution => "post_tool_execution",
            HookEvent::PreInteraction => "pre_interaction",
            HookEvent::PostInteraction => "post_interaction",
        }
    }

    /// Whether handlers of this event decide (may deny) rather than observe.
    pub const fn decides(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolExecution | HookEvent::PreInteraction
        )
    }

    /// Whether this event is about a tool call (its matcher matches tool names) rather than
    /// an interaction (its matcher matches the agent's name).
    pub const fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolExecution | HookEvent::PostToolExecution
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One call of a built-in tool, as the model made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: ToolName,
    /// The tool's arguments exactly as the model sent them.
    pub args: serde_json::Value,
}

/// The JSON document a hook handler receives on stdin (command) or as the POST body (http).
///
/// Field order matters to people reading it, so it follows the reference documentation:
/// `tool_call`, `environment_id`, then `error` (post hooks only, and only when there was an
/// error), then hookbox's own addition `hook_event_name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookPayload {
    pub tool_call: ToolCall,
    pub environment_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub hook_event_name: HookEvent,
}

/// What an interaction hook (`pre_interaction`, `post_interaction`; hookbox extension)
/// receives. There is no `tool_call`; the matcher is matched against `agent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InteractionHookPayload {
    pub interaction_id: String,
    pub environment_id: String,
    /// The agent the interaction runs (`antigravity-preview-09-2026` or an agent's id).
    pub agent: String,
    /// pre: the steps this interaction was given (the user's input, function results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<serde_json::Value>,
    /// pre: the text of that input, for handlers that only want the words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_text: Option<String>,
    /// post: how the turn ended (`completed`, `failed`, `requires_action`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// post: the model's final text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// post: the errors the interaction ended with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<serde_json::Value>,
    pub hook_event_name: HookEvent,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_round_trip() {
        for tool in ToolName::ALL {
            assert_eq!(tool.as_str().parse::<ToolName>(), Ok(tool));
            let json = serde_json::to_string(&tool).unwrap();
            assert_eq!(json, format!("\"{}\"", tool.as_str()));
        }
        assert!("read_file".parse::<ToolName>().is_err());
    }

    #[test]
    fn payload_matches_reference_shape_and_omits_absent_error() {
        let payload = HookPayload {
            tool_call: ToolCall {
                name: ToolName::CodeExecution,
                args: serde_json::json!({"code": "rm -rf /tmp/forbidden", "language": "bash"}),
            },
            environment_id: "env_xyz789".into(),
            error: None,
            hook_event_name: HookEvent::PreToolExecution,
        };
        let json = serde_json::to_string(&payload).unwrap();
        assert_eq!(
            json,
            r#"{"tool_call":{"name":"code_execution","args":{"code":"rm -rf /tmp/forbidden","language":"bash"}},"environment_id":"env_xyz789","hook_event_name":"pre_tool_execution"}"#
        );
        let with_error = HookPayload {
            error: Some("boom".into()),
            hook_event_name: HookEvent::PostToolExecution,
            ..payload
        };
        let value: serde_json::Value = serde_json::to_value(&with_error).unwrap();
        assert_eq!(value["error"], "boom");
    }
}
