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
    /// Sets `last_accessed` to `now`, unless the environment has expired or was already
    /// touched at `now` or later (RFC 3339 to the second, compared as strings like
    /// [`EnvironmentChange::Expire`]'s cutoff): then nothing is written. A server touches an
    /// environment at the start and the end of every interaction, so at load most touches
    /// fall in a second already recorded; and a touch never moves the time back (a replica
    /// whose clock lags another's).
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
            if expired || env.last_accessed.as_deref() >= Some(now.as_str()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_protocol::api::{Environment, EnvironmentStatus};

    fn record(last_accessed: Option<&str>) -> EnvironmentRecord {
        EnvironmentRecord {
            environment: Environment {
                id: "env_a".into(),
                status: Some(EnvironmentStatus::Active),
                last_accessed: last_accessed.map(str::to_owned),
                ..Environment::default()
            },
            env: None,
        }
    }

    fn touch(now: &str) -> EnvironmentChange {
        EnvironmentChange::Touch { now: now.into() }
    }

    #[test]
    fn touch_moves_last_accessed_forward() {
        let mut r = record(None);
        assert!(apply_environment_change(
            &mut r,
            &touch("2026-12-05T10:00:00Z")
        ));
        assert_eq!(
            r.environment.last_accessed.as_deref(),
            Some("2026-12-05T10:00:00Z")
        );
        assert!(apply_environment_change(
            &mut r,
            &touch("2026-12-05T10:00:01Z")
        ));
        assert_eq!(
            r.environment.last_accessed.as_deref(),
            Some("2026-12-05T10:00:01Z")
        );
    }

    // Issue 35: every touch rewrote the record, though the start and end of an interaction
    // (and concurrent interactions) mostly fall in the same second.
    #[test]
    fn touch_in_a_second_already_recorded_writes_nothing() {
        let mut r = record(Some("2026-12-05T10:00:00Z"));
        assert!(!apply_environment_change(
            &mut r,
            &touch("2026-12-05T10:00:00Z")
        ));
        assert_eq!(r, record(Some("2026-12-05T10:00:00Z")));
    }

    #[test]
    fn touch_never_moves_last_accessed_back() {
        let mut r = record(Some("2026-12-05T10:00:05Z"));
        assert!(!apply_environment_change(
            &mut r,
            &touch("2026-12-05T10:00:04Z")
        ));
        assert_eq!(
            r.environment.last_accessed.as_deref(),
            Some("2026-12-05T10:00:05Z")
        );
    }
}
