//! Streamed events (SSE): deltas, the event union and a stream's error.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::interactions::{Interaction, InteractionStatus, Usage};
use super::steps::{CodeExecutionArguments, Step};

/// A partial step delivered by `step.delta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    Text {
        text: String,
    },
    CodeExecutionCall {
        arguments: CodeExecutionArguments,
    },
    CodeExecutionResult {
        result: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    ArgumentsDelta {
        arguments: String,
    },
    #[serde(untagged)]
    Other(Value),
}

/// The `error` of a streamed `error` event; `code` is a string here (spec §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamError {
    pub code: String,
    pub message: String,
}

/// One server-sent event's `data:` payload (spec §4). The SDK reads the type only from
/// `event_type`; `event_id` lets a client resume with `last_event_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event_type")]
pub enum StreamEvent {
    #[serde(rename = "interaction.created")]
    InteractionCreated {
        interaction: Interaction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "interaction.status_update")]
    StatusUpdate {
        interaction_id: String,
        status: InteractionStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "step.start")]
    StepStart {
        index: usize,
        step: Step,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "step.delta")]
    StepDelta {
        index: usize,
        delta: Delta,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "step.stop")]
    StepStop {
        index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "interaction.completed")]
    InteractionCompleted {
        interaction: Interaction,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
    #[serde(rename = "error")]
    Error {
        error: StreamError,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<String>,
    },
}

impl StreamEvent {
    /// Sets the event's `event_id`.
    pub fn with_event_id(mut self, id: String) -> Self {
        match &mut self {
            StreamEvent::InteractionCreated { event_id, .. }
            | StreamEvent::StatusUpdate { event_id, .. }
            | StreamEvent::StepStart { event_id, .. }
            | StreamEvent::StepDelta { event_id, .. }
            | StreamEvent::StepStop { event_id, .. }
            | StreamEvent::InteractionCompleted { event_id, .. }
            | StreamEvent::Error { event_id, .. } => *event_id = Some(id),
        }
        self
    }
}
