//! `/interactions/{id}/auth_tokens`: ephemeral auth tokens (google-genai 3.5.0+
//! `client.interactions.auth_tokens.create/delete`). A token lets its holder read, stream,
//! continue and live-connect one interaction, until `expire_time` (at most [`MAX_LIFETIME_SECS`]
//! ahead; [`DEFAULT_LIFETIME_SECS`] when left out) or until it is deleted. Only an API key may
//! create or delete one (a token cannot mint tokens). The token is returned once, by create;
//! the store keeps its SHA-256 and a public id (`atk_…`, what logs and the audit log show), so
//! a deletion is effective on every replica at once. What a token may reach is decided in
//! [`crate::auth`]. A token's row is deleted by [`purge_expired`], from the periodic expiry
//! sweep ([`crate::lifecycle::sweep`]), once it has been expired for [`PURGE_GRACE_SECS`].

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, NaiveDateTime, Utc};
use hookbox_store::AuthTokenRecord;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};
use crate::{AppState, Project, parse_json};

/// What every token starts with (the SDK strips it before a delete and sends it on use).
pub const TOKEN_PREFIX: &str = "auth_tokens/";
/// A token's lifetime when `expire_time` is left out: 30 minutes.
pub const DEFAULT_LIFETIME_SECS: i64 = 30 * 60;
/// The latest `expire_time` accepted: 24 hours ahead. A later one is capped (the response's
/// `expires_at` says when the token really expires).
pub const MAX_LIFETIME_SECS: i64 = 24 * 60 * 60;

/// How long after its expiry a token's row is kept before [`purge_expired`] deletes it: an
/// hour, so a replica whose clock runs behind never finds a row gone that it still takes for
/// live (an expired token is refused either way: the row is gone or its `expires_at` passed).
pub const PURGE_GRACE_SECS: i64 = 60 * 60;

/// Deletes the tokens that expired more than [`PURGE_GRACE_SECS`] before `now` (Unix seconds);
/// how many. A token authenticates nothing from its `expires_at` on (and a deleted one never
/// again), so no token that could still be used is deleted.
pub async fn purge_expired(state: &AppState, now: i64) -> ApiResult<u64> {
    let cutoff = hookbox_store::time::format_unix(now.saturating_sub(PURGE_GRACE_SECS));
    let purged = state.inner.store.purge_expired_auth_tokens(&cutoff).await?;
    if purged > 0 {
        tracing::info!(
            purged,
            expired_before = %cutoff,
            "expired auth tokens purged"
        );
    }
    Ok(purged)
}

/// `POST /interactions/{id}/auth_tokens` body.
#[derive(Debug, Default, Deserialize)]
struct CreateTokenRequest {
    #[serde(default)]
    expire_time: Option<String>,
}

/// `expire_time` as the SDK sends it: RFC 3339 with `Z` or an offset, or a naive date-time
/// (a naive `datetime` in Python), taken as UTC.
fn parse_expire_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc())
}

/// When a token asked to expire at `requested` (`None`: the default) and created at `now`
/// expires: whole seconds, never later than [`MAX_LIFETIME_SECS`] after `now`, cut down to the
/// second (so a token never outlives what was asked). An instant not after `now` is a 400.
fn expiry(now: DateTime<Utc>, requested: Option<&str>) -> ApiResult<DateTime<Utc>> {
    let cap = now + chrono::Duration::seconds(MAX_LIFETIME_SECS);
    let wanted = match requested.filter(|t| !t.is_empty()) {
        None => now + chrono::Duration::seconds(DEFAULT_LIFETIME_SECS),
        Some(text) => parse_expire_time(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid `expire_time` `{text}`: expected an RFC 3339 date-time such as 2026-12-05T11:00:00Z."
            ))
        })?,
    };
    let at = wanted.min(cap);
    let whole = DateTime::<Utc>::from_timestamp(at.timestamp(), 0).unwrap_or(at);
    if whole <= now {
        return Err(ApiError::bad_request(
            "`expire_time` must be in the future (at least a second ahead).",
        ));
    }
    Ok(whole)
}

/// `POST /interactions/{id}/auth_tokens`.
pub async fn create(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let req: CreateTokenRequest = if body.iter().all(u8::is_ascii_whitespace) {
        CreateTokenRequest::default()
    } else {
        parse_json(&body, "auth token request")?
    };
    if state
        .inner
        .store
        .get_interaction(&project, &id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found(format!(
            "Interaction `{id}` not found."
        )));
    }
    let now = Utc::now();
    let expires = expiry(now, req.expire_time.as_deref())?;
    let secret: [u8; 32] = rand::random();
    let token = format!(
        "{TOKEN_PREFIX}{}",
        secret
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let sha256 = hookbox_store::keys::hash_key(&token);
    let record = AuthTokenRecord {
        id: format!(
            "atk_{}",
            sha256[..6]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
        project: project.to_string(),
        interaction_id: id.clone(),
        expires_at: hookbox_store::time::format_unix(expires.timestamp()),
        created: hookbox_store::time::format_unix(now.timestamp()),
    };
    state
        .inner
        .store
        .create_auth_token(&record, &sha256)
        .await?;
    tracing::info!(
        name: hookbox_protocol::events::AUTH_TOKEN_CHANGED,
        project = %project,
        token_id = %record.id,
        token_interaction = %id,
        action = "created",
        expires_at = %record.expires_at,
        "auth token created"
    );
    Ok((
        StatusCode::OK,
        Json(json!({"auth_token": token, "expires_at": record.expires_at})),
    )
        .into_response())
}

/// `DELETE /interactions/{id}/auth_tokens/{token}` (the token without `auth_tokens/`, as the
/// SDK sends it; with it works too).
pub async fn delete(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Path((id, token)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let token = token.strip_prefix(TOKEN_PREFIX).unwrap_or(&token);
    let sha256 = hookbox_store::keys::hash_key(&format!("{TOKEN_PREFIX}{token}"));
    let Some(record) = state
        .inner
        .store
        .delete_auth_token(&project, &id, &sha256)
        .await?
    else {
        return Err(ApiError::not_found(format!(
            "No such auth token for interaction `{id}`."
        )));
    };
    tracing::info!(
        name: hookbox_protocol::events::AUTH_TOKEN_CHANGED,
        project = %project,
        token_id = %record.id,
        token_interaction = %id,
        action = "deleted",
        expires_at = %record.expires_at,
        "auth token deleted"
    );
    Ok(Json(Value::Object(Map::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        parse_expire_time(text).unwrap()
    }

    #[test]
    fn expire_time_is_read_as_the_sdk_writes_it() {
        let utc = at("2026-12-05T11:00:00Z");
        assert_eq!(
            at("2026-12-05T11:00:00.123456Z").timestamp(),
            utc.timestamp()
        );
        assert_eq!(at("2026-12-05T12:00:00+01:00"), utc);
        // A naive datetime from Python has no zone: UTC.
        assert_eq!(at("2026-12-05T11:00:00"), utc);
        assert!(parse_expire_time("tomorrow").is_none());
    }

    #[test]
    fn expiry_defaults_caps_and_refuses_the_past() {
        let now = at("2026-12-05T10:00:00.5Z");
        assert_eq!(expiry(now, None).unwrap(), at("2026-12-05T10:30:00Z"));
        assert_eq!(
            expiry(now, Some("2026-12-05T10:05:00.9Z")).unwrap(),
            at("2026-12-05T10:05:00Z")
        );
        // Capped at 24 hours ahead.
        assert_eq!(
            expiry(now, Some("2027-01-01T00:00:00Z")).unwrap(),
            at("2026-12-06T10:00:00Z")
        );
        for past in [
            "2026-12-05T10:00:00Z",
            "2026-12-05T09:00:00Z",
            "2026-12-05T10:00:00.9Z",
        ] {
            assert_eq!(
                expiry(now, Some(past)).unwrap_err().status,
                StatusCode::BAD_REQUEST,
                "{past}"
            );
        }
        assert_eq!(
            expiry(now, Some("x")).unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }
}
