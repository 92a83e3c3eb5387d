//! The Trigger resource (a scheduled agent interaction) and its executions, as the
//! `google-genai` SDK models them (`google/genai/_gaos/types/triggers/`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A trigger's status. `error`: paused by hookbox after `max_consecutive_failures`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerStatus {
    #[default]
    Active,
    Paused,
    Error,
}

impl TriggerStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            TriggerStatus::Active => "active",
            TriggerStatus::Paused => "paused",
            TriggerStatus::Error => "error",
        }
    }
}

/// The Trigger resource as returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trigger {
    pub id: String,
    /// The interaction to create at each run (the body of `interactions.create`).
    pub interaction: Value,
    /// Five-field cron (minute hour day-of-month month day-of-week).
    pub schedule: String,
    /// An IANA time zone (`Europe/Berlin`, `UTC`), which the schedule is read in.
    pub time_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_timeout_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_consecutive_failures: Option<u32>,
    pub status: TriggerStatus,
    #[serde(default)]
    pub consecutive_failure_count: u32,
    pub create_time: String,
    pub update_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pause_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_interaction_id: Option<String>,
}

/// `POST /triggers` body (the SDK's `TriggerCreateParams`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerCreate {
    pub interaction: Value,
    pub schedule: String,
    pub time_zone: String,
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub environment_id: Option<String>,
    #[serde(default)]
    pub execution_timeout_seconds: Option<u32>,
    #[serde(default)]
    pub max_consecutive_failures: Option<u32>,
}

/// `PATCH /triggers/{id}` body (the SDK's `TriggerUpdate`): pause and resume go through
/// `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerUpdate {
    #[serde(default)]
    pub display_name: Option<String>,
    #[serde(default)]
    pub status: Option<TriggerStatus>,
}

/// How one execution went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionStatus {
    InProgress,
    Completed,
    Failed,
    /// Not run: the previous execution was still running.
    Skipped,
    /// Cancelled at `execution_timeout_seconds`.
    TimedOut,
}

impl ExecutionStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::InProgress => "in_progress",
            ExecutionStatus::Completed => "completed",
            ExecutionStatus::Failed => "failed",
            ExecutionStatus::Skipped => "skipped",
            ExecutionStatus::TimedOut => "timed_out",
        }
    }
}

/// One run of a trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerExecution {
    pub id: String,
    pub trigger_id: String,
    pub status: ExecutionStatus,
    /// When the schedule said it should run (the time of `run` for a manual run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /triggers` answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListTriggersResponse {
    pub triggers: Vec<Trigger>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `GET /triggers/{id}/executions` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListTriggerExecutionsResponse {
    pub trigger_executions: Vec<TriggerExecution>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}
