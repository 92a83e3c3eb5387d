//! `/webhooks`: the SDK's `client.webhooks` (create, list, get, update, delete, `:ping`,
//! `:rotateSigningSecret`) and hookbox's `GET /webhooks/{id}/deliveries`. Thin over the store;
//! the signing secret is shown once, in the answer to a create (and a rotation's new one in
//! its answer), and only truncated afterwards.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, Query, State};
use hookbox_protocol::webhooks::{
    PING_EVENT, RevocationBehavior, RotateSigningSecretRequest, RotateSigningSecretResponse,
    SUBSCRIBABLE_EVENTS, Webhook, WebhookInput, WebhookListResponse, WebhookState, WebhookUpdate,
};
use hookbox_store::{DeliveryRecord, SigningKey, WebhookRecord};
use serde::Serialize;
use serde_json::{Value, json};

use crate::environments::PageQuery;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, Project, UpdateQuery, new_id, parse_json};

/// How long previous secrets keep signing after a rotation, by default.
const ROTATION_OVERLAP_SECS: i64 = 24 * 3600;
/// The longest `uri` accepted.
const MAX_URI_LEN: usize = 2048;
/// The longest `name` accepted.
const MAX_NAME_LEN: usize = 256;

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Webhook `{id}` not found."))
}

/// Checks `uri`: an absolute http or https URL with a host and no user info. Where it may
/// connect is the SSRF guard's to say, at each delivery (a name may resolve anywhere later).
fn check_uri(uri: &str) -> ApiResult<()> {
    let bad = |why: &str| ApiError::bad_request(format!("Invalid `uri`: {why}."));
    if uri.len() > MAX_URI_LEN {
        return Err(bad(&format!("longer than {MAX_URI_LEN} bytes")));
    }
    let parsed: axum::http::Uri = uri.parse().map_err(|_| bad("not a URL"))?;
    match parsed.scheme_str() {
        Some("https" | "http") => {}
        _ => return Err(bad("use an http:// or https:// URL")),
    }
    let authority = parsed.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("user info (`user@`) is not allowed"));
    }
    if authority.host().is_empty() {
        return Err(bad("no host"));
    }
    Ok(())
}

/// A 400 when the deliverer's SSRF guard would refuse `uri` whatever it resolves to.
fn refused_by_guard(state: &AppState, uri: &str) -> ApiResult<()> {
    match state.webhook_uri_refusal(uri) {
        Some(why) => Err(ApiError::bad_request(format!(
            "Invalid `uri`: deliveries to it would be refused by hookbox's SSRF guard ({why}); an operator can admit a range with --egress-allow-cidr."
        ))),
        None => Ok(()),
    }
}

fn check_events(events: &[String]) -> ApiResult<()> {
    if events.is_empty() {
        return Err(ApiError::bad_request(
            "Invalid `subscribed_events`: subscribe to at least one event.",
        ));
    }
    for (i, event) in events.iter().enumerate() {
        if !SUBSCRIBABLE_EVENTS.contains(&event.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Invalid `subscribed_events[{i}]`: `{event}` is not an event (expected one of: {}).",
                SUBSCRIBABLE_EVENTS.join(", ")
            )));
        }
    }
    Ok(())
}

fn check_name(name: Option<&str>) -> ApiResult<()> {
    match name {
        Some(n) if n.chars().count() > MAX_NAME_LEN => Err(ApiError::bad_request(format!(
            "Invalid `name`: longer than {MAX_NAME_LEN} characters."
        ))),
        _ => Ok(()),
    }
}

fn now_plus(secs: i64) -> String {
    let now = hookbox_store::webhooks::now_ms() / 1000;
    hookbox_store::time::format_unix(now.saturating_add(secs))
}

/// `POST /webhooks`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    body: Bytes,
) -> ApiResult<Json<Webhook>> {
    let input: WebhookInput = parse_json(&body, "webhook")?;
    check_uri(&input.uri)?;
    refused_by_guard(&state, &input.uri)?;
    check_events(&input.subscribed_events)?;
    check_name(input.name.as_deref())?;
    let now = hookbox_store::time::now_rfc3339();
    let secret = hookbox_webhooks::signing::new_secret();
    let key = SigningKey {
        secret: secret.clone(),
        expire_time: None,
    };
    let mut record = WebhookRecord {
        webhook: Webhook {
            id: new_id("wh"),
            name: input.name,
            uri: input.uri,
            subscribed_events: input.subscribed_events,
            state: WebhookState::Enabled,
            create_time: now.clone(),
            update_time: now,
            signing_secrets: Vec::new(),
            new_signing_secret: None,
        },
        consecutive_failures: 0,
        last_error: None,
    };
    state
        .inner
        .store
        .create_webhook(&project, &record, &key)
        .await?;
    tracing::info!(webhook_id = %record.webhook.id, "webhook created");
    record.webhook.signing_secrets = vec![key.info()];
    record.webhook.new_signing_secret = Some(secret);
    Ok(Json(record.webhook))
}

/// `GET /webhooks`.
pub async fn list(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<WebhookListResponse>> {
    let page = state
        .inner
        .store
        .list_webhooks(&project, &q.page(), &hookbox_store::time::now_rfc3339())
        .await?;
    Ok(Json(WebhookListResponse {
        webhooks: page.items.into_iter().map(|r| r.webhook).collect(),
        next_page_token: page.next_page_token,
    }))
}

/// `GET /webhooks/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Webhook>> {
    state
        .inner
        .store
        .get_webhook(&project, &id, &hookbox_store::time::now_rfc3339())
        .await?
        .map(|r| Json(r.webhook))
        .ok_or_else(|| not_found(&id))
}

/// `PATCH /webhooks/{id}[?update_mask=a,b]`: the fields present (and named by the mask, when
/// there is one) are applied.
pub async fn update(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    Query(q): Query<UpdateQuery>,
    body: Bytes,
) -> ApiResult<Json<Webhook>> {
    let mut update: WebhookUpdate = parse_json(&body, "webhook update")?;
    let applies = q.applies(&["name", "state", "subscribed_events", "uri"])?;
    if !applies("name") {
        update.name = None;
    }
    if !applies("state") {
        update.state = None;
    }
    if !applies("subscribed_events") {
        update.subscribed_events = None;
    }
    if !applies("uri") {
        update.uri = None;
    }
    if let Some(uri) = &update.uri {
        check_uri(uri)?;
        refused_by_guard(&state, uri)?;
    }
    if let Some(events) = &update.subscribed_events {
        check_events(events)?;
    }
    check_name(update.name.as_deref())?;
    if update.state == Some(WebhookState::DisabledDueToFailedDeliveries) {
        return Err(ApiError::bad_request(
            "Invalid `state`: `disabled_due_to_failed_deliveries` is set by hookbox; use `enabled` or `disabled`.",
        ));
    }
    let record = state
        .inner
        .store
        .update_webhook(&project, &id, &update, &hookbox_store::time::now_rfc3339())
        .await?
        .ok_or_else(|| not_found(&id))?;
    if record.webhook.state == WebhookState::Enabled {
        // Deliveries held while it was disabled go out now.
        state.wake_webhooks();
    }
    Ok(Json(record.webhook))
}

/// `DELETE /webhooks/{id}` (its pending deliveries go with it).
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !state.inner.store.delete_webhook(&project, &id).await? {
        return Err(not_found(&id));
    }
    Ok(Json(json!({})))
}

/// `POST /webhooks/{id}:ping` and `POST /webhooks/{id}:rotateSigningSecret` (one path segment,
/// as the SDK sends them).
pub async fn action(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(target): Path<String>,
    body: Bytes,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let (id, verb) = target.rsplit_once(':').ok_or_else(|| {
        ApiError::not_found(format!(
            "No such endpoint: POST webhooks/{target} (use webhooks/{{id}}:ping or webhooks/{{id}}:rotateSigningSecret)."
        ))
    })?;
    let now = hookbox_store::time::now_rfc3339();
    match verb {
        "ping" => {
            let data = json!({"webhook_id": id, "message": "a test event sent by ping"});
            // A ping goes to the webhook whatever it subscribed to: no delivery, no webhook.
            let ids = state
                .inner
                .store
                .enqueue_webhook_event(&project, PING_EVENT, &data, Some(id), &now)
                .await?;
            if ids.is_empty() {
                return Err(not_found(id));
            }
            state.wake_webhooks();
            tracing::info!(webhook_id = %id, delivery_id = ?ids.first(), "webhook ping queued");
            Ok(Json(json!({})).into_response())
        }
        "rotateSigningSecret" => {
            let request: RotateSigningSecretRequest = if body.iter().all(u8::is_ascii_whitespace) {
                RotateSigningSecretRequest::default()
            } else {
                parse_json(&body, "rotation request")?
            };
            let previous_expire = match request.revocation_behavior.unwrap_or_default() {
                RevocationBehavior::RevokePreviousSecretsAfterH24 => {
                    Some(now_plus(ROTATION_OVERLAP_SECS))
                }
                RevocationBehavior::RevokePreviousSecretsImmediately => None,
            };
            let secret = hookbox_webhooks::signing::new_secret();
            let key = SigningKey {
                secret: secret.clone(),
                expire_time: None,
            };
            state
                .inner
                .store
                .rotate_webhook_secret(&project, id, &key, previous_expire.as_deref(), &now)
                .await?
                .ok_or_else(|| not_found(id))?;
            tracing::info!(webhook_id = %id, previous_expire = ?previous_expire, "webhook signing secret rotated");
            Ok(Json(RotateSigningSecretResponse { secret }).into_response())
        }
        other => Err(ApiError::not_found(format!(
            "No such endpoint: POST webhooks/{id}:{other} (use :ping or :rotateSigningSecret)."
        ))),
    }
}

/// `GET /webhooks/{id}/deliveries` answer (a hookbox extension).
#[derive(Debug, Serialize)]
pub struct DeliveryList {
    pub deliveries: Vec<DeliveryRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `GET /webhooks/{id}/deliveries`: newest first, with each one's status, attempts and last
/// error (a hookbox extension, for operators and the console).
pub async fn deliveries(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<DeliveryList>> {
    let now = hookbox_store::time::now_rfc3339();
    if state
        .inner
        .store
        .get_webhook(&project, &id, &now)
        .await?
        .is_none()
    {
        return Err(not_found(&id));
    }
    let page = state
        .inner
        .store
        .list_webhook_deliveries(&project, &id, &q.page())
        .await?;
    Ok(Json(DeliveryList {
        deliveries: page.items,
        next_page_token: page.next_page_token,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_must_be_http_urls_with_a_host_and_no_user() {
        for ok in ["https://hooks.example/x?y=1", "http://127.0.0.1:9/path"] {
            assert!(check_uri(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://hooks.example/",
            "hooks.example/x",
            "https://user:pw@hooks.example/",
            "",
        ] {
            assert!(check_uri(bad).is_err(), "{bad}");
        }
        assert!(check_uri(&format!("https://h/{}", "a".repeat(MAX_URI_LEN))).is_err());
    }

    #[test]
    fn an_update_mask_names_only_updatable_fields() {
        let q = UpdateQuery {
            update_mask: Some("name, state".into()),
        };
        let applies = q.applies(&["name", "state", "uri"]).unwrap();
        assert!(applies("name") && applies("state") && !applies("uri"));
        assert!(UpdateQuery::default().applies(&["name"]).unwrap()("name"));
        let bad = UpdateQuery {
            update_mask: Some("secret".into()),
        }
        .applies(&["name"])
        .err()
        .unwrap();
        assert!(bad.message.contains("`secret`"), "{bad:?}");
    }

    #[test]
    fn unknown_events_are_named_with_their_index() {
        let err =
            check_events(&["interaction.completed".into(), "interaction.done".into()]).unwrap_err();
        assert!(err.message.contains("subscribed_events[1]"), "{err:?}");
        assert!(check_events(&[]).is_err());
    }
}
