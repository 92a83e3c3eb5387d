//! The Webhook resource and the events delivered to it, as the `google-genai` SDK models them
//! (`google/genai/_gaos/types/webhooks/`): `subscribed_events`, `uri`, `name`, `state`,
//! `signing_secrets` (truncated, with their `expire_time`) and `new_signing_secret` (only in
//! the answer to a create).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The events a webhook may subscribe to (the SDK's `WebhookSubscribedEvent`). hookbox emits
/// the three `interaction.*` ones; the others are accepted (an SDK user may list them) and never
/// fire, since hookbox has no batches or videos.
pub const SUBSCRIBABLE_EVENTS: &[&str] = &[
    "batch.succeeded",
    "batch.expired",
    "batch.failed",
    "interaction.requires_action",
    "interaction.completed",
    "interaction.failed",
    "video.generated",
];

/// The type of the test event `ping` sends (delivered whatever the subscription).
pub const PING_EVENT: &str = "webhook.ping";

/// The state of a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookState {
    #[default]
    Enabled,
    Disabled,
    /// Set by hookbox after too many failed delivery attempts in a row; `update` with
    /// `state: enabled` turns it back on (pending deliveries then go out).
    DisabledDueToFailedDeliveries,
}

impl WebhookState {
    pub const fn as_str(self) -> &'static str {
        match self {
            WebhookState::Enabled => "enabled",
            WebhookState::Disabled => "disabled",
            WebhookState::DisabledDueToFailedDeliveries => "disabled_due_to_failed_deliveries",
        }
    }
}

/// A signing secret as shown: its first characters, and when it stops being used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningSecretInfo {
    pub truncated_secret: String,
    /// RFC 3339; absent for the current secret (it does not expire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_time: Option<String>,
}

/// The Webhook resource as returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub uri: String,
    pub subscribed_events: Vec<String>,
    pub state: WebhookState,
    pub create_time: String,
    pub update_time: String,
    #[serde(default)]
    pub signing_secrets: Vec<SigningSecretInfo>,
    /// Only in the answer to a create: the secret to verify deliveries with. Never stored in
    /// this form, never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_signing_secret: Option<String>,
}

/// `POST /webhooks` body (the SDK's `WebhookInput`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    #[serde(default)]
    pub name: Option<String>,
    pub uri: String,
    pub subscribed_events: Vec<String>,
}

/// `PATCH /webhooks/{id}` body (the SDK's `WebhookUpdate`); absent fields are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub state: Option<WebhookState>,
    #[serde(default)]
    pub subscribed_events: Option<Vec<String>>,
    #[serde(default)]
    pub uri: Option<String>,
}

/// `GET /webhooks` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookListResponse {
    pub webhooks: Vec<Webhook>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// What previous secrets become at a rotation (the SDK's `RevocationBehavior`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevocationBehavior {
    /// They keep verifying for 24 hours (deliveries are signed with every live secret).
    #[default]
    RevokePreviousSecretsAfterH24,
    RevokePreviousSecretsImmediately,
}

/// `POST /webhooks/{id}:rotateSigningSecret` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateSigningSecretRequest {
    #[serde(default)]
    pub revocation_behavior: Option<RevocationBehavior>,
}

/// `POST /webhooks/{id}:rotateSigningSecret` answer: the new secret, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotateSigningSecretResponse {
    pub secret: String,
}

/// The body of one delivery (a Standard Webhooks message): `id` equals the `webhook-id`
/// header and stays the same across retries, so receivers can drop duplicates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookEvent {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// RFC 3339: when the event happened.
    pub timestamp: String,
    pub data: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_bodies_use_the_sdk_names() {
        assert_eq!(
            serde_json::to_value(WebhookState::DisabledDueToFailedDeliveries).unwrap(),
            "disabled_due_to_failed_deliveries"
        );
        let rotate: RotateSigningSecretRequest = serde_json::from_str(
            r#"{"revocation_behavior": "revoke_previous_secrets_immediately"}"#,
        )
        .unwrap();
        assert_eq!(
            rotate.revocation_behavior,
            Some(RevocationBehavior::RevokePreviousSecretsImmediately)
        );
        assert!(
            serde_json::from_str::<WebhookInput>(
                r#"{"uri": "x", "subscribed_events": [], "secret": "s"}"#
            )
            .is_err()
        );
    }
}
