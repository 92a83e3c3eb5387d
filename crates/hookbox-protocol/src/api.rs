//! Wire types of the Interactions API as the `google-genai` SDK (3.3.0+) speaks it: interactions and
//! their steps, content, streamed events, environments, environment files, credentials, agents and
//! the Google-RPC error body. `shared/spec/interactions-api.md` is the authority for every name.
//!
//! Every SDK model accepts extra fields and every `type` union is open, so these types keep what
//! they do not know: unknown step, content and delta types land in an `Other(Value)` variant, and
//! request objects carry an `extra` map. This module is serde-only: no I/O, no validation beyond
//! what decoding does; the server decides what a request means.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object, used for open-ended parts of the wire format.
pub type Object = Map<String, Value>;

// ---------------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------------

/// One content item (`type` discriminator). Unknown types are kept as they came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Value>,
    },
    Image(Media),
    Audio(Media),
    Document(Media),
    Video(Media),
    #[serde(untagged)]
    Other(Value),
}

impl Content {
    /// A plain text item.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text {
            text: text.into(),
            annotations: None,
        }
    }

    /// The text of a `text` item.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// The body of `image`, `audio`, `document` and `video` items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Media {
    /// Base64 payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Interaction
// ---------------------------------------------------------------------------------------------

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
}

impl InteractionStatus {
    /// Every status.
    pub const ALL: [InteractionStatus; 9] = [
        InteractionStatus::Queued,
        InteractionStatus::InProgress,
        InteractionStatus::RequiresAction,
        InteractionStatus::RequiresContinuation,
        InteractionStatus::Completed,
        InteractionStatus::Failed,
        InteractionStatus::Cancelled,
        InteractionStatus::Incomplete,
        InteractionStatus::BudgetExceeded,
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

// ---------------------------------------------------------------------------------------------
// Streaming
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Environments
// ---------------------------------------------------------------------------------------------

/// int64 fields (`file_count`, `size_bytes`) as the API's JSON mapping writes them: a decimal
/// string, as in proto3 JSON. The Java SDK declares them `String` and refuses a number ("Cannot
/// deserialize value of type `java.lang.String` from Integer value"); the Python SDK takes
/// either. Reading takes a number too, so records stored before this are still read.
pub mod int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Number(u64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(n) => s.collect_str(n),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<Wire>::deserialize(d)? {
            None => Ok(None),
            Some(Wire::Number(n)) => Ok(Some(n)),
            Some(Wire::Text(t)) => t
                .parse()
                .map(Some)
                .map_err(|_| serde::de::Error::custom(format!("not an int64: {t:?}"))),
        }
    }
}

/// A source placed into an environment (spec §5.2). Every field is optional on the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// `inline`, `gcs`, `repository`, `skill_registry` (open; fixtures also use `INLINE`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Sandbox path; relative targets resolve against `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// E.g. `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// `gs://…` or a repository URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

/// One `network.allowlist` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllowlistEntry {
    pub domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// `{header: value}` or a list of such maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<Value>,
}

/// `allowlist`: `"disabled"` or a list of entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Allowlist {
    Mode(String),
    Entries(Vec<AllowlistEntry>),
}

/// `network`: the string `"disabled"` or `{allowlist}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Network {
    Mode(String),
    Rules { allowlist: Allowlist },
}

/// One value of the embedded environment's `env` map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    Plain(String),
    Ref {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<String>,
    },
}

/// The environment embedded in a create-interaction request (spec §5.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentSpec {
    /// Always `remote` from the SDK; curl may leave it out.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Map<String, Value>>,
    /// Update this existing environment instead of creating one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

/// `environment` in a create request: an existing id or an embedded spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvironmentRef {
    Id(String),
    Spec(Box<EnvironmentSpec>),
}

/// `POST /environments` body (spec §5.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateEnvironmentRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// `environments/{id}` or `{id}`: fork that environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_environment: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

/// Environment status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentStatus {
    Active,
    Expired,
}

/// The Environment resource (spec §5.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EnvironmentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accessed: Option<String>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_count: Option<u64>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

/// `GET /environments` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListEnvironmentsResponse {
    pub environments: Vec<Environment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `file` or `directory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    File,
    Directory,
}

/// One entry of an environment file listing (spec §5.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentFile {
    /// Base name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Path from the sandbox root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FileType>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

/// `GET /environments/{env}/files/{path}` response, and the final upload reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListFilesResponse {
    pub files: Vec<EnvironmentFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------------------------

/// A write-only secret: it deserialises from the request and serialises (for encrypted storage),
/// but its `Debug` never shows the value, so it cannot reach a log by accident.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where an `environment_variable` credential is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectionLocation {
    Header,
    Query,
    Body,
}

/// One location or a list of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InjectionLocations {
    One(InjectionLocation),
    Many(Vec<InjectionLocation>),
}

/// `POST /credentials` body (spec §6). The client picks `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CredentialConfig {
    BearerToken {
        id: String,
        token: Secret,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    EnvironmentVariable {
        id: String,
        value: Secret,
        injection_location: InjectionLocations,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trusted_domains: Option<Vec<String>>,
    },
    #[serde(rename = "oauth2")]
    OAuth2 {
        id: String,
        client_id: String,
        client_secret: Secret,
        refresh_token: Secret,
        token_url: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scopes: Option<Vec<String>>,
    },
}

impl CredentialConfig {
    /// The client-chosen id.
    pub fn id(&self) -> &str {
        match self {
            CredentialConfig::BearerToken { id, .. }
            | CredentialConfig::EnvironmentVariable { id, .. }
            | CredentialConfig::OAuth2 { id, .. } => id,
        }
    }

    /// The wire `type`.
    pub fn kind(&self) -> CredentialType {
        match self {
            CredentialConfig::BearerToken { .. } => CredentialType::BearerToken,
            CredentialConfig::EnvironmentVariable { .. } => CredentialType::EnvironmentVariable,
            CredentialConfig::OAuth2 { .. } => CredentialType::OAuth2,
        }
    }
}

/// `PATCH /credentials/{id}` body: the create shapes with every field optional but `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CredentialUpdate {
    BearerToken {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        header_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    EnvironmentVariable {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        injection_location: Option<InjectionLocations>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trusted_domains: Option<Vec<String>>,
    },
    #[serde(rename = "oauth2")]
    OAuth2 {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refresh_token: Option<Secret>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_url: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scopes: Option<Vec<String>>,
    },
}

/// Credential `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialType {
    BearerToken,
    EnvironmentVariable,
    #[serde(rename = "oauth2")]
    OAuth2,
}

impl CredentialType {
    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            CredentialType::BearerToken => "bearer_token",
            CredentialType::EnvironmentVariable => "environment_variable",
            CredentialType::OAuth2 => "oauth2",
        }
    }
}

/// `active` or `revoked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialStatus {
    Active,
    Revoked,
}

/// The Credential resource as returned: metadata only, never a secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credential {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: CredentialType,
    pub status: CredentialStatus,
    pub create_time: String,
    pub update_time: String,
}

/// `GET /credentials` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListCredentialsResponse {
    pub credentials: Vec<Credential>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Agents
// ---------------------------------------------------------------------------------------------

/// The Agent resource (request and response alike, spec §7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_config: Option<AgentConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_environment: Option<EnvironmentRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    #[serde(flatten)]
    pub extra: Object,
}

/// `GET /agents` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListAgentsResponse {
    pub agents: Vec<Agent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// The Google RPC error body: `{"error":{"code":404,"message":"…","status":"NOT_FOUND"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: RpcStatus,
}

/// The inner object of [`ErrorBody`]; `code` is the HTTP status as an integer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcStatus {
    pub code: u16,
    pub message: String,
    pub status: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_step_and_content_types_are_kept_verbatim() {
        let raw = json!({"type": "google_search_call", "id": "c1", "arguments": {"q": "x"}});
        let step: Step = serde_json::from_value(raw.clone()).unwrap();
        assert!(matches!(step, Step::Other(_)));
        assert_eq!(step.type_name(), "google_search_call");
        assert_eq!(serde_json::to_value(&step).unwrap(), raw);

        let raw = json!({"type": "hologram", "data": "x"});
        let c: Content = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&c).unwrap(), raw);
    }

    #[test]
    fn output_text_follows_the_sdk_algorithm() {
        let steps: Vec<Step> = serde_json::from_value(json!([
            {"type":"user_input","content":[{"type":"text","text":"Run"}]},
            {"type":"model_output","content":[{"type":"text","text":"ignored "}]},
            {"type":"thought","signature":"c2ln","summary":[{"type":"text","text":"Thinking"}]},
            {"type":"code_execution_call","id":"call_1","arguments":{"code":"rm -rf /tmp/forbidden","language":"bash"}},
            {"type":"code_execution_result","call_id":"call_1","is_error":true,"result":"blocked"},
            {"type":"model_output","content":[{"type":"text","text":"The command was "}]},
            {"type":"thought"},
            {"type":"model_output","content":[{"type":"text","text":"blocked by the hook."}]}
        ]))
        .unwrap();
        assert_eq!(output_text(&steps), "The command was blocked by the hook.");
        assert_eq!(output_text(&steps[..1]), "");
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c: CredentialConfig = serde_json::from_value(
            json!({"id": "cred_bearer", "token": "s3cr3t", "type": "bearer_token"}),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }

    // The Java SDK refused `"file_count": 1` (it declares int64 fields `String`).
    #[test]
    fn int64_fields_are_strings_on_the_wire_and_read_either_way() {
        let env = Environment {
            id: "env_1".into(),
            status: None,
            created: None,
            updated: None,
            last_accessed: None,
            file_count: Some(3),
            size_bytes: Some(1 << 40),
            sources: None,
            network: None,
        };
        let wire = serde_json::to_value(&env).unwrap();
        assert_eq!(
            wire,
            json!({"id": "env_1", "file_count": "3", "size_bytes": "1099511627776"})
        );
        assert_eq!(serde_json::from_value::<Environment>(wire).unwrap(), env);
        let old: Environment = serde_json::from_value(
            json!({"id": "env_1", "file_count": 3, "size_bytes": 1099511627776_u64}),
        )
        .unwrap();
        assert_eq!(old, env);
        assert!(
            serde_json::from_value::<Environment>(json!({"id": "e", "file_count": "x"})).is_err()
        );
        let file: EnvironmentFile =
            serde_json::from_value(json!({"path": "/a", "size_bytes": "2"})).unwrap();
        assert_eq!(file.size_bytes, Some(2));
        assert_eq!(serde_json::to_value(&file).unwrap()["size_bytes"], "2");
    }

    #[test]
    fn error_body_has_integer_code() {
        let body = ErrorBody {
            error: RpcStatus {
                code: 404,
                message: "Interaction not found.".into(),
                status: "NOT_FOUND".into(),
            },
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"error":{"code":404,"message":"Interaction not found.","status":"NOT_FOUND"}}"#
        );
    }
}

/// Round trips of the request bodies the real SDK sent (`shared/spec/captured-requests.jsonl`).
#[cfg(test)]
mod captured {
    use super::*;
    use serde::de::DeserializeOwned;
    use serde_json::json;

    const CAPTURED: &str = include_str!("../fixtures/captured-requests.jsonl");

    fn bodies(prefix: &str) -> Vec<(String, Value)> {
        CAPTURED
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| {
                let call = l["call"].as_str().unwrap();
                call.contains(prefix) && l["body"].is_object()
            })
            .map(|l| (l["call"].as_str().unwrap().to_owned(), l["body"].clone()))
            .collect()
    }

    fn round_trip<T: DeserializeOwned + Serialize>(prefix: &str) -> Vec<T> {
        let all = bodies(prefix);
        assert!(!all.is_empty(), "no captured request for {prefix}");
        all.into_iter()
            .map(|(call, body)| {
                let typed: T =
                    serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{call}: {e}"));
                assert_eq!(serde_json::to_value(&typed).unwrap(), body, "{call}");
                typed
            })
            .collect()
    }

    #[test]
    fn interaction_create_bodies_round_trip() {
        let reqs: Vec<CreateInteractionRequest> = round_trip("interactions.create");
        assert!(reqs.len() >= 6);
        let seed = &reqs[0];
        assert_eq!(seed.agent.as_deref(), Some("antigravity-preview-09-2026"));
        let Some(EnvironmentRef::Spec(env)) = &seed.environment else {
            panic!("seed environment is an object")
        };
        assert_eq!(
            env.sources.as_ref().unwrap()[0].target.as_deref(),
            Some(".agents/hooks.json")
        );
        assert!(matches!(&reqs[1].environment, Some(EnvironmentRef::Id(id)) if id == "env_xyz789"));
        assert!(matches!(reqs[2].input, Some(Input::List(_))));
        let Some(EnvironmentRef::Spec(env)) = &reqs[2].environment else {
            panic!()
        };
        assert!(matches!(&env.network, Some(Network::Mode(m)) if m == "disabled"));
        let Some(EnvironmentRef::Spec(env)) = &reqs[3].environment else {
            panic!()
        };
        let Some(Network::Rules {
            allowlist: Allowlist::Entries(entries),
        }) = &env.network
        else {
            panic!("allowlist entries")
        };
        assert_eq!(entries[1].credential.as_deref(), Some("cred_1"));
        assert_eq!(reqs[4].stream, Some(true));
        // extra_body fields survive.
        let extra = round_trip::<CreateInteractionRequest>("extra_body");
        assert_eq!(extra[0].extra["hooks"], json!({"a": 1}));
    }

    #[test]
    fn environment_create_bodies_round_trip() {
        let reqs: Vec<CreateEnvironmentRequest> = round_trip("environments.create");
        assert_eq!(
            reqs[0].sources.as_ref().unwrap()[0].content.as_deref(),
            Some("hi")
        );
        assert_eq!(
            reqs[1].from_environment.as_deref(),
            Some("environments/env_1")
        );
    }

    #[test]
    fn credential_bodies_round_trip() {
        let reqs: Vec<CredentialConfig> = round_trip("credentials.create");
        let kinds: Vec<_> = reqs.iter().map(CredentialConfig::kind).collect();
        assert_eq!(
            kinds,
            [
                CredentialType::BearerToken,
                CredentialType::EnvironmentVariable,
                CredentialType::OAuth2
            ]
        );
        let ups: Vec<CredentialUpdate> = round_trip("credentials.update");
        assert!(
            matches!(&ups[0], CredentialUpdate::BearerToken { token: Some(t), .. } if t.0 == "new")
        );
    }

    #[test]
    fn agent_bodies_round_trip() {
        let reqs: Vec<Agent> = round_trip("agents.create");
        assert_eq!(reqs[0].id.as_deref(), Some("agent_1"));
    }

    #[test]
    fn spec_example_interaction_round_trips_and_gives_output_text() {
        let raw = json!({"id":"int_abc123","status":"completed","agent":"antigravity-preview-09-2026","environment_id":"env_xyz789",
         "created":"2026-05-20T10:00:00Z","updated":"2026-05-20T10:00:00Z",
         "steps":[
          {"type":"user_input","content":[{"type":"text","text":"Run `rm -rf /tmp/forbidden` ..."}]},
          {"type":"thought","signature":"c2ln","summary":[{"type":"text","text":"Thinking"}]},
          {"type":"code_execution_call","id":"call_1","arguments":{"code":"rm -rf /tmp/forbidden","language":"bash"}},
          {"type":"code_execution_result","call_id":"call_1","is_error":true,"result":"Destructive command blocked by security gate."},
          {"type":"model_output","content":[{"type":"text","text":"The command was "},{"type":"text","text":"blocked by the hook."}]}],
         "usage":{"total_input_tokens":10,"total_output_tokens":5,"total_tokens":15}});
        let i: Interaction = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&i).unwrap(), raw);
        assert_eq!(
            output_text(&i.steps),
            "The command was blocked by the hook."
        );
    }

    #[test]
    fn spec_stream_events_parse() {
        let lines = [
            r#"{"event_type":"interaction.created","event_id":"e1","interaction":{"id":"int_1","status":"in_progress","environment_id":"env_1"}}"#,
            r#"{"event_type":"step.start","index":1,"step":{"type":"code_execution_call","id":"call_1","arguments":{"code":"ls","language":"bash"}}}"#,
            r#"{"event_type":"step.delta","index":2,"delta":{"type":"code_execution_result","result":"a.txt\n"}}"#,
            r#"{"event_type":"step.delta","index":3,"delta":{"type":"text","text":"Hello"}}"#,
            r#"{"event_type":"step.stop","index":3}"#,
            r#"{"event_type":"interaction.completed","interaction":{"id":"int_1","status":"completed","environment_id":"env_1"}}"#,
            r#"{"event_type":"error","error":{"code":"internal","message":"boom"}}"#,
        ];
        for line in lines {
            let raw: Value = serde_json::from_str(line).unwrap();
            let ev: StreamEvent = serde_json::from_value(raw.clone()).unwrap();
            assert_eq!(serde_json::to_value(&ev).unwrap(), raw, "{line}");
        }
    }
}
