//! API-key authentication: with keys configured, every request must carry one in
//! `x-goog-api-key`, `Authorization: Bearer …` or the `key` query parameter. With none
//! configured the server is in local mode (the binary then refuses non-loopback addresses, see
//! [`crate::check_listen_addr`]) and this layer lets everything through. Keys are never logged.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented_key(req: &Request) -> Option<String> {
    let headers = req.headers();
    if let Some(v) = headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.to_owned());
    }
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(v.trim().to_owned());
    }
    req.uri().query().and_then(|q| {
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == "key")
            .map(|(_, v)| v.to_owned())
    })
}

/// The middleware.
pub async fn require_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let keys = &state.inner.api_keys;
    if keys.is_empty() {
        return next.run(req).await;
    }
    match presented_key(&req) {
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Missing API key: send it in the x-goog-api-key header.",
        )
        .into_response(),
        Some(k)
            if keys
                .iter()
                .any(|good| constant_time_eq(good.as_bytes(), k.as_bytes())) =>
        {
            next.run(req).await
        }
        Some(_) => {
            tracing::info!(path = %req.uri().path(), "request with an unknown API key");
            ApiError::new(StatusCode::UNAUTHORIZED, "API key not valid.").into_response()
        }
    }
}
