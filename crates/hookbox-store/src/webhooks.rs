//! Webhooks as stored, and their outbox: what both backends share.
//!
//! A webhook's record holds the resource (without any secret) and its delivery bookkeeping; its
//! signing secrets are sealed like credentials, bound to the project and id. Every event is
//! written to `webhook_deliveries`, one row per subscribed webhook, **in the transaction that
//! made it happen** (an interaction's status change), so a crash can neither lose an event nor
//! send one for a change that did not commit. The deliverer claims due rows for a while (a
//! claim that is not finished, because its replica died, falls due again), which makes delivery
//! at-least-once; the row's id is the `webhook-id` receivers deduplicate on.

use hookbox_protocol::api::InteractionStatus;
use hookbox_protocol::webhooks::{
    PING_EVENT, SigningSecretInfo, Webhook, WebhookEvent, WebhookState, WebhookUpdate,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::crypto::{Sealed, SecretKey};
use crate::error::{Error, Result};
use crate::row::Columns;

/// A webhook as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookRecord {
    /// The resource as shown (`new_signing_secret` is never set here).
    pub webhook: Webhook,
    /// Failed delivery attempts since the last success; at the deliverer's limit the webhook is
    /// `disabled_due_to_failed_deliveries`.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The last failure, for operators (never a secret: the receiver's status or a transport
    /// error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// One signing secret in full. Lives only sealed in the store and in the deliverer's memory.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    pub secret: String,
    /// RFC 3339; `None` for the current secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_time: Option<String>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("secret", &"<redacted>")
            .field("expire_time", &self.expire_time)
            .finish()
    }
}

impl SigningKey {
    /// How the secret is shown: its prefix and first characters.
    pub fn info(&self) -> SigningSecretInfo {
        let shown: String = self.secret.chars().take(12).collect();
        SigningSecretInfo {
            truncated_secret: format!("{shown}…"),
            expire_time: self.expire_time.clone(),
        }
    }

    /// Whether it still signs at `now` (RFC 3339, same format as `expire_time`).
    pub fn live_at(&self, now: &str) -> bool {
        self.expire_time.as_deref().is_none_or(|t| t > now)
    }
}

/// The associated data that binds a webhook's sealed secrets to its project and id.
fn secrets_aad(project: &str, id: &str) -> String {
    format!("webhook:{project}/{id}")
}

/// A webhook's columns as written: its state, its record's JSON, and (when given) its keys
/// sealed anew, `(nonce, ciphertext)`.
pub(crate) fn columns(
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    keys: Option<&[SigningKey]>,
) -> Result<(&'static str, String, Option<Sealed>)> {
    let sealed = keys
        .map(|keys| seal_keys(key, project, &record.webhook.id, keys))
        .transpose()?;
    Ok((
        record.webhook.state.as_str(),
        serde_json::to_string(record)?,
        sealed,
    ))
}

/// Webhook `id`'s signing keys sealed for the store: `(nonce, ciphertext)`.
pub(crate) fn seal_keys(
    key: &SecretKey,
    project: &str,
    id: &str,
    keys: &[SigningKey],
) -> Result<Sealed> {
    key.seal(&secrets_aad(project, id), &serde_json::to_vec(keys)?)
}

/// A webhook's record and its signing keys (opened) from its row:
/// `record_json, nonce, ciphertext`.
pub(crate) fn opened_from_row(
    key: &SecretKey,
    project: &str,
    id: &str,
    r: &impl Columns,
) -> Result<(WebhookRecord, Vec<SigningKey>)> {
    let record: WebhookRecord = r.json(0)?;
    let plain = key
        .open(&secrets_aad(project, id), &r.bytes(1)?, &r.bytes(2)?)
        .map_err(|_| Error::Decrypt(format!("webhook {id}")))?;
    Ok((record, serde_json::from_slice(&plain)?))
}

/// A webhook as shown at `now` (its live secrets truncated) from its row:
/// `id, record_json, nonce, ciphertext`.
pub(crate) fn shown_from_row(
    key: &SecretKey,
    project: &str,
    r: &impl Columns,
    now: &str,
) -> Result<WebhookRecord> {
    let (mut record, keys) = opened_from_row(key, project, &r.text(0)?, &r.skip(1))?;
    show_secrets(&mut record, &keys, now);
    Ok(record)
}

/// What a rotation does to the secrets: `new` becomes current; the others expire at
/// `previous_expire` (`None`: at once, they are dropped). Expired ones are dropped too.
pub(crate) fn rotate(
    keys: Vec<SigningKey>,
    new: SigningKey,
    previous_expire: Option<&str>,
    now: &str,
) -> Vec<SigningKey> {
    let mut out = vec![new];
    if let Some(until) = previous_expire {
        for mut key in keys.into_iter().filter(|k| k.live_at(now)) {
            // An older secret already expiring sooner keeps its own time.
            if key.expire_time.as_deref().is_none_or(|t| t > until) {
                key.expire_time = Some(until.to_owned());
            }
            out.push(key);
        }
    }
    out
}

/// The record after `update` (validated by the caller) at `now`.
pub(crate) fn apply_update(record: &mut WebhookRecord, update: &WebhookUpdate, now: &str) {
    let webhook = &mut record.webhook;
    if let Some(name) = &update.name {
        webhook.name = Some(name.clone());
    }
    if let Some(uri) = &update.uri {
        webhook.uri = uri.clone();
    }
    if let Some(events) = &update.subscribed_events {
        webhook.subscribed_events = events.clone();
    }
    if let Some(state) = update.state {
        if state == WebhookState::Enabled {
            record.consecutive_failures = 0;
        }
        webhook.state = state;
    }
    webhook.update_time = now.to_owned();
}

/// The shown secrets of a record: its live keys at `now`.
pub(crate) fn show_secrets(record: &mut WebhookRecord, keys: &[SigningKey], now: &str) {
    record.webhook.signing_secrets = keys
        .iter()
        .filter(|k| k.live_at(now))
        .map(SigningKey::info)
        .collect();
}

/// Whether a delivery of `kind` goes to `record`: enabled and subscribed (a ping goes to the
/// one webhook it names, whatever it subscribed to).
fn wants(record: &WebhookRecord, kind: &str) -> bool {
    kind == PING_EVENT
        || (record.webhook.state == WebhookState::Enabled
            && record.webhook.subscribed_events.iter().any(|e| e == kind))
}

/// The event an interaction's change of status from `old` to `new` emits, if any.
pub fn interaction_event(
    old: Option<InteractionStatus>,
    new: InteractionStatus,
) -> Option<&'static str> {
    if old == Some(new) {
        return None;
    }
    match new {
        InteractionStatus::Completed => Some("interaction.completed"),
        InteractionStatus::Failed => Some("interaction.failed"),
        InteractionStatus::RequiresAction => Some("interaction.requires_action"),
        _ => None,
    }
}

/// The `data` of an interaction event.
pub fn interaction_data(
    interaction_id: &str,
    status: InteractionStatus,
    environment_id: Option<&str>,
) -> Value {
    let mut data = json!({"interaction_id": interaction_id, "status": status.as_str()});
    if let Some(env) = environment_id {
        data["environment_id"] = json!(env);
    }
    data
}

/// The event (kind and data) an interaction's change of status from `old` to `new` emits, if
/// any: written in the transaction that stores the change.
pub(crate) fn status_event(
    interaction_id: &str,
    old: Option<InteractionStatus>,
    new: InteractionStatus,
    environment_id: Option<&str>,
) -> Option<(&'static str, Value)> {
    interaction_event(old, new)
        .map(|kind| (kind, interaction_data(interaction_id, new, environment_id)))
}

/// The columns of a due delivery and its webhook that [`claimed_from_row`] reads, in its order
/// (`d` the delivery, `w` its webhook).
pub(crate) const CLAIMED_COLUMNS: &str = "d.id, d.project, d.webhook_id, d.event_type, d.payload_json, d.attempts, d.created_ms, w.record_json";

/// A claimed delivery from its row ([`CLAIMED_COLUMNS`]).
pub(crate) fn claimed_from_row(r: &impl Columns) -> Result<ClaimedDelivery> {
    let record: WebhookRecord = r.json(7)?;
    Ok(ClaimedDelivery {
        id: r.text(0)?,
        project: r.text(1)?,
        webhook_id: r.text(2)?,
        event_type: r.text(3)?,
        payload: r.text(4)?,
        attempts: count(r.int(5)?),
        created_ms: r.int(6)?,
        uri: record.webhook.uri,
    })
}

/// The columns [`delivery_from_row`] reads, in its order.
pub(crate) const DELIVERY_COLUMNS: &str =
    "id, event_type, status, attempts, created, updated, last_status, last_error, next_attempt_ms";

/// A delivery of webhook `webhook_id` as listed, from its row ([`DELIVERY_COLUMNS`]).
pub(crate) fn delivery_from_row(r: &impl Columns, webhook_id: &str) -> Result<DeliveryRecord> {
    let status = DeliveryStatus::parse(&r.text(2)?)?;
    Ok(DeliveryRecord {
        id: r.text(0)?,
        webhook_id: webhook_id.to_owned(),
        event_type: r.text(1)?,
        status,
        attempts: count(r.int(3)?),
        created: r.text(4)?,
        updated: r.text(5)?,
        last_status: r.opt_int(6)?.and_then(|s| u16::try_from(s).ok()),
        last_error: r.opt_text(7)?,
        next_attempt_ms: r.opt_int(8)?.filter(|_| status == DeliveryStatus::Pending),
    })
}

/// An attempt counter as stored (never negative) as a count.
fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// What an attempt's end writes into its delivery's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptRow<'a> {
    /// `delivered`, `pending` (to retry) or `failed` (no attempts left).
    pub status: &'static str,
    /// When to try again, while pending.
    pub next_attempt_ms: Option<i64>,
    /// The receiver's HTTP status, if it answered.
    pub last_status: Option<u16>,
    pub last_error: Option<&'a str>,
}

impl AttemptOutcome {
    /// What this attempt's end writes into its delivery's row.
    pub(crate) fn row(&self) -> AttemptRow<'_> {
        match self {
            AttemptOutcome::Delivered { status } => AttemptRow {
                status: DeliveryStatus::Delivered.as_str(),
                next_attempt_ms: None,
                last_status: Some(*status),
                last_error: None,
            },
            AttemptOutcome::Failed {
                error,
                status,
                retry_at_ms,
                ..
            } => AttemptRow {
                status: if retry_at_ms.is_some() {
                    DeliveryStatus::Pending.as_str()
                } else {
                    DeliveryStatus::Failed.as_str()
                },
                next_attempt_ms: *retry_at_ms,
                last_status: *status,
                last_error: Some(error),
            },
        }
    }

    /// Counts this attempt for its webhook's `record` at `now`: a success clears the failures,
    /// a failure adds one (and disables the webhook at the limit). `true` when the record
    /// changed and must be written.
    pub(crate) fn count_for(&self, record: &mut WebhookRecord, now: &str) -> bool {
        match self {
            AttemptOutcome::Delivered { .. } => {
                let changed = record.consecutive_failures > 0 || record.last_error.is_some();
                record.consecutive_failures = 0;
                record.last_error = None;
                changed
            }
            AttemptOutcome::Failed {
                error,
                disable_after,
                ..
            } => {
                count_failure(record, error, *disable_after, now);
                true
            }
        }
    }
}

/// A delivery to write into the outbox, pending and due at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewDelivery {
    /// Its id (the `webhook-id` header and the body's `id`).
    pub id: String,
    pub webhook_id: String,
    /// The exact body to send.
    pub body: String,
    /// Unix milliseconds of the event: when it was created, and when it is first due.
    pub created_ms: i64,
}

/// The deliveries of one event of `kind` (with `data`, at `now`): one for each of `records`
/// that wants it ([`wants`]).
pub(crate) fn new_deliveries(
    records: &[WebhookRecord],
    kind: &str,
    data: &Value,
    now: &str,
) -> Result<Vec<NewDelivery>> {
    let created_ms = now_ms();
    records
        .iter()
        .filter(|r| wants(r, kind))
        .map(|record| {
            let id = format!("msg_{:032x}", rand::random::<u128>());
            Ok(NewDelivery {
                body: event_body(&id, kind, now, data)?,
                id,
                webhook_id: record.webhook.id.clone(),
                created_ms,
            })
        })
        .collect()
}

/// The body of delivery `id`.
fn event_body(id: &str, kind: &str, timestamp: &str, data: &Value) -> Result<String> {
    Ok(serde_json::to_string(&WebhookEvent {
        id: id.to_owned(),
        kind: kind.to_owned(),
        timestamp: timestamp.to_owned(),
        data: data.clone(),
    })?)
}

/// A delivery the deliverer claimed: what it needs to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    pub id: String,
    pub project: String,
    pub webhook_id: String,
    pub event_type: String,
    pub uri: String,
    /// The exact body to send (and sign).
    pub payload: String,
    /// Attempts made before this one.
    pub attempts: u32,
    /// Unix seconds of the event (the body's timestamp), for the signature's timestamp on the
    /// first attempt; later attempts sign with their own time.
    pub created_ms: i64,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The receiver answered 2xx.
    Delivered { status: u16 },
    /// It did not; `retry_at_ms` is when to try again (`None`: no attempts left, the delivery
    /// is `failed`). At `disable_after` failures in a row the webhook is disabled.
    Failed {
        error: String,
        status: Option<u16>,
        retry_at_ms: Option<i64>,
        disable_after: u32,
    },
}

/// The status of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "pending" => Ok(DeliveryStatus::Pending),
            "delivered" => Ok(DeliveryStatus::Delivered),
            "failed" => Ok(DeliveryStatus::Failed),
            other => Err(Error::Config(format!("unknown delivery status `{other}`"))),
        }
    }
}

/// A delivery as listed (hookbox's own extension: `GET /webhooks/{id}/deliveries`, the console).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    pub id: String,
    pub webhook_id: String,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub created: String,
    pub updated: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Unix milliseconds of the next attempt, while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_ms: Option<i64>,
}

/// The record after a failed attempt: one more failure, and disabled at the limit.
fn count_failure(record: &mut WebhookRecord, error: &str, disable_after: u32, now: &str) {
    record.consecutive_failures = record.consecutive_failures.saturating_add(1);
    record.last_error = Some(error.to_owned());
    if disable_after > 0
        && record.consecutive_failures >= disable_after
        && record.webhook.state == WebhookState::Enabled
    {
        record.webhook.state = WebhookState::DisabledDueToFailedDeliveries;
        record.webhook.update_time = now.to_owned();
        tracing::warn!(
            webhook_id = %record.webhook.id,
            failures = record.consecutive_failures,
            "webhook disabled after failed deliveries"
        );
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str, expire: Option<&str>) -> SigningKey {
        SigningKey {
            secret: secret.into(),
            expire_time: expire.map(Into::into),
        }
    }

    #[test]
    fn a_rotation_keeps_live_secrets_until_the_overlap_ends() {
        let now = "2026-12-04T10:00:00Z";
        let keys = vec![
            key("whsec_current", None),
            key("whsec_older", Some("2026-12-04T12:00:00Z")),
            key("whsec_gone", Some("2026-12-04T09:00:00Z")),
        ];
        let rotated = rotate(
            keys.clone(),
            key("whsec_new", None),
            Some("2026-12-05T10:00:00Z"),
            now,
        );
        let shown: Vec<_> = rotated
            .iter()
            .map(|k| (k.secret.as_str(), k.expire_time.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("whsec_new", None),
                ("whsec_current", Some("2026-12-05T10:00:00Z")),
                ("whsec_older", Some("2026-12-04T12:00:00Z")),
            ]
        );
        let immediate = rotate(keys, key("whsec_new", None), None, now);
        assert_eq!(immediate.len(), 1);
        assert!(!format!("{immediate:?}").contains("whsec_new"));
    }

    #[test]
    fn only_changes_into_an_end_state_emit_events() {
        use InteractionStatus::*;
        assert_eq!(
            interaction_event(Some(InProgress), Completed),
            Some("interaction.completed")
        );
        assert_eq!(interaction_event(None, Failed), Some("interaction.failed"));
        assert_eq!(
            interaction_event(Some(InProgress), RequiresAction),
            Some("interaction.requires_action")
        );
        assert_eq!(interaction_event(Some(Completed), Completed), None);
        assert_eq!(interaction_event(Some(InProgress), Cancelled), None);
        assert_eq!(interaction_event(Some(Queued), InProgress), None);
    }
}
