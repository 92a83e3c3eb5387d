//! Interactions: their status, usage, error, the object itself, its input and the create
//! request with its agent config.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

use super::content::Object;
use super::environments::EnvironmentRef;
use super::steps::Step;

/// The status of an interaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InteractionStatus {
    Queued,
    InProgress,
    RequiresAction,
    RequiresContinuation,
    Completed,
    Failed,
    Cancelled,
    Incomplete,
    BudgetExceeded,
    /// A live interaction between turns (SDK 3.5+): it takes the next `input` on a socket.
    Idle,
}

impl InteractionStatus {
    /// Every status.
    pub const ALL: [InteractionStatus; 10] = [
        InteractionStatus::Queued,
        InteractionStatus::InProgress,
        InteractionStatus::RequiresAction,
        InteractionStatus::RequiresContinuation,
        InteractionStatus::Completed,
        InteractionStatus::Failed,
        InteractionStatus::Cancelled,
        InteractionStatus::Incomplete,
        InteractionStatus::BudgetExceeded,
        InteractionStatus::Idle,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            InteractionStatus::Queued => "queued",
            InteractionStatus::InProgress => "in_progress",
            InteractionStatus::RequiresAction => "requires_action",
            InteractionStatus::RequiresContinuation => "requires_continuation",
            InteractionStatus::Completed => "completed",
            InteractionStatus::Failed => "failed",
            InteractionStatus::Cancelled => "cancelled",
            InteractionStatus::Incomplete => "incomplete",
            InteractionStatus::BudgetExceeded => "budget_exceeded",
            InteractionStatus::Idle => "idle",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True while the agent may still add steps.
    pub const fn is_running(self) -> bool {
        matches!(
            self,
            InteractionStatus::Queued | InteractionStatus::InProgress
        )
    }
}

impl fmt::Display for InteractionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_input_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_thought_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tool_use_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
}

impl Usage {
    /// Adds another turn's counts to this one.
    pub fn add(&mut self, other: &Usage) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            if let Some(b) = b {
                *a = Some(a.unwrap_or(0).saturating_add(b));
            }
        }
        sum(&mut self.total_input_tokens, other.total_input_tokens);
        sum(&mut self.total_output_tokens, other.total_output_tokens);
        sum(&mut self.total_thought_tokens, other.total_thought_tokens);
        sum(&mut self.total_tool_use_tokens, other.total_tool_use_tokens);
        sum(&mut self.total_tokens, other.total_tokens);
    }
}

/// One entry of `Interaction.errors`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractionError {
    pub code: String,
    pub message: String,
}

/// The Interaction resource (spec §3.2). `output_text` is computed by the SDK and never sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    pub id: String,
    pub status: InteractionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<InteractionError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_interaction_id: Option<String>,
    /// Only with `include_input=true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// hookbox extension: the interaction hooks that ran around its turns, shaped like a tool
    /// call's trace (`{"pre": dispatch, "post": dispatch}`: `pre_interaction`,
    /// `post_interaction`, each with every handler's outcome, stderr and duration, and the
    /// `additional_context` they answered); absent when none ran. The SDKs keep unknown fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<Value>,
    /// Echoed request fields (`agent_config`, `environment`, `tools`, `system_instruction`, …).
    #[serde(flatten)]
    pub extra: Object,
}

impl Interaction {
    /// A bare interaction with the given id and status.
    pub fn new(id: impl Into<String>, status: InteractionStatus) -> Self {
        Interaction {
            id: id.into(),
            status,
            agent: None,
            environment_id: None,
            created: None,
            updated: None,
            steps: Vec::new(),
            usage: None,
            errors: Vec::new(),
            previous_interaction_id: None,
            input: None,
            hooks: None,
            extra: Object::new(),
        }
    }
}

/// The `input` of a create request (spec §3.1): a string, one content item, or a list of content
/// items and/or steps. Lists are kept as raw values; the server normalises them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    List(Vec<Value>),
    Single(Object),
}

/// `POST /interactions` body, agent form (spec §3.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateInteractionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Input>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_interaction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_config: Option<AgentConfig>,
    /// A string or a content object/list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    #[serde(flatten)]
    pub extra: Object,
}

/// `agent_config` (open: only the fields hookbox reads are typed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: Object,
}
