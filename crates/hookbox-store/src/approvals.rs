//! Calls paused for a reviewer (a pre hook's `"decision": "ask"`, hookbox extension) as stored:
//! one [`ApprovalRecord`] per paused call, and how it is settled once.
//!
//! A record is written by the run that paused the call, and by nothing else: it holds the
//! environment the hooks ran in and the exact arguments they saw (with a SHA-256 of their
//! canonical JSON), so the approved call runs there, with those, whatever a client sends.
//! Settling is a conditional update (`... WHERE state = 'pending'`): of any number of
//! continuations (stored, `store: false`, deleted later, concurrent, on any replica) and the
//! deadline's sweeper, exactly one moves a record out of `pending`; every other is refused
//! with who settled it and how. The records of one pause are settled together or not at all
//! ([`crate::Store::settle_approvals`]), and a continuation is stored in the transaction that
//! settles what it answers ([`crate::Store::create_interaction_settling`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::row::Columns;

/// Where a paused call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a reviewer.
    Pending,
    Approved,
    Denied,
    /// Nobody approved it before its deadline (the sweeper, or an approval that came late).
    TimedOut,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::TimedOut => "timed_out",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(ApprovalState::Pending),
            "approved" => Some(ApprovalState::Approved),
            "denied" => Some(ApprovalState::Denied),
            "timed_out" => Some(ApprovalState::TimedOut),
            _ => None,
        }
    }
}

impl std::fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who settles records when nobody answered by the deadline ([`ApprovalRecord::settled_by`]).
pub const SWEEPER: &str = "sweeper";

/// One call a hook asked a person about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// The approval request's id (`approval_<call_id>`): what a client's `function_result`
    /// answers. Unique within its interaction.
    pub id: String,
    /// The interaction that paused.
    pub interaction_id: String,
    /// The paused call's id.
    pub call_id: String,
    /// Where the hooks ran, and so where the call runs if approved.
    pub environment_id: String,
    pub tool: String,
    /// The arguments the hooks saw (after any `updated_args`): what runs if approved.
    pub args: Value,
    /// SHA-256 of [`canonical_json`] of `args`, hex.
    pub args_sha256: String,
    /// The hook's reason.
    pub reason: String,
    /// The hooks group whose handler asked.
    pub hook_group: String,
    /// RFC 3339: unanswered by then, the call is denied.
    pub expires_at: String,
    /// RFC 3339.
    pub created: String,
    pub state: ApprovalState,
    /// The interaction whose answer settled it, or [`SWEEPER`].
    #[serde(default)]
    pub settled_by: Option<String>,
    /// RFC 3339.
    #[serde(default)]
    pub settled_at: Option<String>,
    /// The reviewer's reason for a denial, if they gave one.
    #[serde(default)]
    pub reviewer_reason: Option<String>,
}

impl ApprovalRecord {
    /// Whether `args` still hash to `args_sha256` (what runs is what the hooks saw).
    pub fn args_intact(&self) -> bool {
        args_sha256(&self.args) == self.args_sha256
    }

    /// [`Error::AlreadyExists`] for this record: its interaction already has one of its id.
    pub(crate) fn taken(&self) -> Error {
        Error::AlreadyExists {
            what: "approval request",
            id: format!("{}/{}", self.interaction_id, self.id),
        }
    }
}

/// What one record becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The record's [`ApprovalRecord::id`].
    pub id: String,
    /// Never [`ApprovalState::Pending`].
    pub state: ApprovalState,
    pub reviewer_reason: Option<String>,
}

/// Settles records of one interaction, all or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    pub interaction_id: String,
    /// The continuation's interaction id, or [`SWEEPER`].
    pub by: String,
    pub settlements: Vec<Settlement>,
    /// RFC 3339.
    pub now: String,
}

/// How a settlement went.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// Every record moved from `pending` here: the records as settled.
    Won(Vec<ApprovalRecord>),
    /// At least one was not `pending` (or does not exist); nothing changed. The named records
    /// as they are (a missing one is absent).
    Refused(Vec<ApprovalRecord>),
}

/// Which records a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApprovalFilter {
    pub interaction_id: Option<String>,
    pub state: Option<ApprovalState>,
}

/// `value` as canonical JSON: object keys sorted (by their UTF-8 bytes) at every depth, no
/// whitespace, serde_json's number and string forms. Equal values give equal bytes whatever
/// order their keys were inserted in.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    if let Some(v) = map.get(key) {
                        write(v, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// SHA-256 of [`canonical_json`] of `args`, lowercase hex.
pub fn args_sha256(args: &Value) -> String {
    Sha256::digest(canonical_json(args).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The columns an [`ApprovalRecord`] is read from, in [`from_row`]'s order (both backends).
pub(crate) const COLUMNS: &str = "id, interaction_id, call_id, environment_id, tool, args_json, args_sha256, reason, hook_group, expires_at, created, state, settled_by, settled_at, reviewer_reason";

/// A record from its row ([`COLUMNS`]).
pub(crate) fn from_row(r: &impl Columns) -> Result<ApprovalRecord> {
    let state = r.text(11)?;
    Ok(ApprovalRecord {
        state: ApprovalState::parse(&state).ok_or_else(|| {
            Error::Json(serde::de::Error::custom(format!(
                "unknown approval state `{state}`"
            )))
        })?,
        args: r.json(5)?,
        id: r.text(0)?,
        interaction_id: r.text(1)?,
        call_id: r.text(2)?,
        environment_id: r.text(3)?,
        tool: r.text(4)?,
        args_sha256: r.text(6)?,
        reason: r.text(7)?,
        hook_group: r.text(8)?,
        expires_at: r.text(9)?,
        created: r.text(10)?,
        settled_by: r.opt_text(12)?,
        settled_at: r.opt_text(13)?,
        reviewer_reason: r.opt_text(14)?,
    })
}

/// The settlements of `settle` in a fixed order (by record id), so two transactions settling
/// overlapping sets lock their rows in the same order and cannot deadlock.
pub(crate) fn ordered(settle: &Settle) -> Vec<&Settlement> {
    let mut all: Vec<&Settlement> = settle.settlements.iter().collect();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order_and_keeps_everything_else() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": "é"}], "a": null}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": null, "b": [1, {"x": "é", "y": 2}]}"#).unwrap();
        assert_eq!(canonical_json(&a), r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#);
        assert_eq!(args_sha256(&a), args_sha256(&b));
        assert_ne!(args_sha256(&a), args_sha256(&json!({"a": null, "b": [1]})));
        assert_eq!(args_sha256(&a).len(), 64);
        // Array order matters; a key that needs escaping is escaped.
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
        assert_eq!(canonical_json(&json!({"\"": 1})), r#"{"\"":1}"#);
    }

    #[test]
    fn states_round_trip() {
        for s in [
            ApprovalState::Pending,
            ApprovalState::Approved,
            ApprovalState::Denied,
            ApprovalState::TimedOut,
        ] {
            assert_eq!(ApprovalState::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
        assert_eq!(ApprovalState::parse("maybe"), None);
    }
}
