//! Environments as stored ([`EnvironmentRecord`]: the API resource and what only the runtime
//! needs, one JSON document per row) and the changes of one record that must not race another
//! ([`EnvironmentChange`]), decided here for both backends.

use hookbox_protocol::api::Environment;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An environment as stored: the API resource plus what only the runtime needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentRecord {
    pub environment: Environment,
    /// The embedded environment's `env` map (values or credential references), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Map<String, Value>>,
}

impl EnvironmentRecord {
    /// The mode column written beside the document: the resource's `mode`, `on_demand` if none.
    pub fn mode(&self) -> &str {
        self.environment
            .mode
            .as_deref()
            .unwrap_or(hookbox_protocol::api::EnvironmentMode::ON_DEMAND)
    }
}

/// A change of one environment's record that must not race another (applied in one
/// transaction by [`Store::change_environment`](crate::Store::change_environment)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvironmentChange {
    /// Sets `last_accessed` to `now`, unless the environment has expired.
    Touch { now: String },
    /// Marks the environment `expired` at `now`, if it is active and was last accessed before
    /// `cutoff` (RFC 3339). A touch that won the race keeps it active.
    Expire { cutoff: String, now: String },
}

/// Applies `change` to `record`; `true` when the record changed and must be written.
pub fn apply_environment_change(
    record: &mut EnvironmentRecord,
    change: &EnvironmentChange,
) -> bool {
    use hookbox_protocol::api::EnvironmentStatus;
    let env = &mut record.environment;
    let expired = env.status == Some(EnvironmentStatus::Expired);
    match change {
        EnvironmentChange::Touch { now } => {
            if expired {
                return false;
            }
            env.last_accessed = Some(now.clone());
            true
        }
        EnvironmentChange::Expire { cutoff, now } => {
            let last = env
                .last_accessed
                .as_deref()
                .or(env.updated.as_deref())
                .or(env.created.as_deref())
                .unwrap_or_default();
            if expired || last >= cutoff.as_str() {
                return false;
            }
            env.status = Some(EnvironmentStatus::Expired);
            env.updated = Some(now.clone());
            true
        }
    }
}
