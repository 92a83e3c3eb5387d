//! API keys and projects. With keys configured (static ones given to the server, or managed ones
//! in the store), every request must carry one in `x-goog-api-key`, `Authorization: Bearer …` or
//! the `key` query parameter, and acts in that key's project. With none at all the server is in
//! local mode: every request acts in the `default` project (the binary then listens on loopback
//! only, see [`crate::check_listen_addr`]; a server that was not started on loopback refuses
//! keyless requests even after the last managed key is revoked). Keys are never logged.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hookbox_store::DEFAULT_PROJECT;

use crate::AppState;
use crate::error::ApiError;

/// The project a request acts in, put into the request's extensions by [`require_key`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Project(pub Arc<str>);

impl Project {
    pub fn new(name: &str) -> Self {
        Project(Arc::from(name))
    }
}

impl std::ops::Deref for Project {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Project {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

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

/// The project `presented` authenticates, or the error to answer.
async fn resolve(state: &AppState, presented: Option<&str>) -> Result<Project, ApiError> {
    let inner = &state.inner;
    if let Some(key) = presented {
        // Every static key is compared, so the time taken does not tell which one matched.
        let mut found = None;
        for candidate in &inner.api_keys {
            if constant_time_eq(candidate.key.as_bytes(), key.as_bytes()) && found.is_none() {
                found = Some(Project::new(&candidate.project));
            }
        }
        if let Some(project) = found {
            return Ok(project);
        }
        // Managed keys are looked up by hash: the database never holds a comparable key.
        if let Some(record) = inner
            .store
            .find_api_key(&hookbox_store::keys::hash_key(key))
            .await
            .map_err(ApiError::from)?
        {
            return Ok(Project::new(&record.project));
        }
    }
    let keyless =
        inner.api_keys.is_empty() && !inner.store.has_api_keys().await.map_err(ApiError::from)?;
    if keyless {
        if inner.allow_keyless {
            return Ok(Project::new(DEFAULT_PROJECT));
        }
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "No API key is configured and this server does not listen on loopback only, so it refuses every request. Create a key with `hookbox key create`.",
        ));
    }
    Err(match presented {
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Missing API key: send it in the x-goog-api-key header.",
        ),
        Some(_) => ApiError::new(StatusCode::UNAUTHORIZED, "API key not valid."),
    })
}

/// The middleware: authenticates and records the request's [`Project`].
pub async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let presented = presented_key(&req);
    match resolve(&state, presented.as_deref()).await {
        Ok(project) => {
            if let Err(err) = state.inner.quotas.admit_request(&project).await {
                return err.into_response();
            }
            req.extensions_mut().insert(project);
            next.run(req).await
        }
        Err(err) => {
            if presented.is_some() && err.status == StatusCode::UNAUTHORIZED {
                tracing::info!(path = %req.uri().path(), "request with an unknown API key");
            }
            err.into_response()
        }
    }
}
