//! The [`Model`] trait: given the conversation so far (as interaction steps), produce the next
//! turn: optional thought, text and/or tool calls. Backends translate steps to their own wire
//! format; they must not execute tools.

use async_trait::async_trait;
use hookbox_protocol::ToolName;
use hookbox_protocol::api::{Step, Usage};
use serde_json::Value;

/// One request to a model.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// Per-request model name (`agent_config.model`); the backend's default when `None`.
    pub model: Option<&'a str>,
    pub system_instruction: Option<&'a str>,
    /// The whole conversation: earlier turns, then this turn's steps so far.
    pub steps: &'a [Step],
    /// Tools the model may call.
    pub tools: &'a [ToolName],
    /// The client's own `function` tools (the interaction's `tools`): offered beside the
    /// sandbox tools; a call of one ends the turn `requires_action` for the client to answer.
    pub functions: &'a [FunctionDecl],
    /// The name of the tool-search function among `functions`, if the interaction has one
    /// ([`crate::tool_search`]).
    pub tool_search: Option<&'a str>,
}

/// A `function` tool of the interaction's `tools`, which the client runs itself.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionDecl {
    pub name: String,
    pub description: String,
    /// JSON schema of its arguments (`{"type": "object"}` when the client gave none).
    pub parameters: Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// Call id; the loop generates one when the backend has none.
    pub id: Option<String>,
    pub name: String,
    pub args: Value,
    /// Opaque thought signature to send back with the call (Gemini).
    pub signature: Option<String>,
}

/// The model's next turn. No calls means the model has answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelTurn {
    pub thought: Option<String>,
    pub text: Option<String>,
    pub calls: Vec<ModelCall>,
    pub usage: Usage,
}

/// A model backend.
#[async_trait]
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Backend name for logs (`offline`, `gemini`, `openai`).
    fn name(&self) -> &'static str;
    async fn turn(&self, request: &ModelRequest<'_>) -> crate::Result<ModelTurn>;
}

/// How context from hooks (`additional_context`, hookbox extension) begins where the model
/// sees it: each piece on its own line.
pub use hookbox_protocol::HOOK_CONTEXT_PREFIX;

/// `system` with `notes` after it, one line each (after a blank line); `system` as it is when
/// there are none.
pub fn with_notes(system: Option<&str>, notes: impl IntoIterator<Item = String>) -> Option<String> {
    let mut notes = notes.into_iter().peekable();
    if notes.peek().is_none() {
        return system.map(str::to_owned);
    }
    let mut text = system.map(|s| format!("{s}\n\n")).unwrap_or_default();
    for note in notes {
        text.push_str(&note);
        text.push('\n');
    }
    Some(text)
}

/// The index after the last `user_input` step: where the current turn's own steps start.
pub fn current_turn_start(steps: &[Step]) -> usize {
    steps
        .iter()
        .rposition(|s| matches!(s, Step::UserInput { .. }))
        .map_or(0, |i| i + 1)
}
