//! Live interactions over WebSocket (`GET /{v}/interactions/live`, SDK 3.5+): the client's
//! events as the SDK sends them, one JSON object per text frame with an `event_type`, or a batch
//! `{"events": [...]}`. Server events reuse the SSE shapes ([`super::StreamEvent`]) for steps;
//! the others are small objects the server builds. The SDK sends mappings unvalidated, so every
//! field here is decoded leniently and checked by the server.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A client event's `event_type`.
pub mod client_event {
    pub const CONNECT: &str = "interaction.connect";
    pub const CREATE: &str = "interaction.create";
    pub const INPUT: &str = "input";
    pub const COMPLETE: &str = "interaction.complete";
    pub const CANCEL: &str = "interaction.cancel";
    pub const DISCONNECT: &str = "interaction.disconnect";
    /// Interactive worlds (not an agent's sandbox).
    pub const USER_ACTION: &str = "user_action";
    /// Interactive worlds (not an agent's sandbox).
    pub const WORLD_SETUP: &str = "world_setup";
}

/// `interaction.connect`: always the first frame; `id` names the interaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectEvent {
    pub id: String,
    /// In the SDK's type, never sent by `connect()`; read and ignored (a run always survives
    /// its socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
}

/// `interaction.create`: starts a new live interaction (no `agent`, `environment` or `input`:
/// those come from `previous_interaction_id` or are new).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_interaction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// A string or a content object (as in `POST /interactions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
}

/// `input`: one turn's content items (text, image, audio, document, video).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputEvent {
    pub content: Vec<Value>,
}

/// `google.rpc.Status`, the `status` of the live `interaction.completed` (not the
/// interaction's status string): `code` 0 is OK.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveStatus {
    pub code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
