//! API keys and projects. With keys configured (static ones given to the server, or managed ones
//! in the store), every request must carry one in `x-goog-api-key`, `Authorization: Bearer …` or
//! the `key` query parameter, and acts in that key's project. With none at all the server is in
//! local mode: every request acts in the `default` project (the binary then listens on loopback
//! only, see [`crate::check_listen_addr`]; a server that was not started on loopback refuses
//! keyless requests even after the last managed key is revoked). Keys are never logged.
//!
//! An ephemeral auth token (`auth_tokens/…`, minted by `POST /interactions/{id}/auth_tokens`,
//! [`crate::auth_tokens`]) presented the same way authenticates a narrower principal: the
//! token's project, plus a [`TokenScope`] naming its one interaction. [`require_key`] lets such
//! a request through only to read or stream that interaction (`GET /interactions/{id}`), to
//! continue it (`POST /interactions`, whose handler checks `previous_interaction_id` with
//! [`TokenScope::check_continues`]) or to live-connect (`/interactions/live`, whose handler checks
//! [`may_access`] once the connect frame names the interaction); everything else is a 401, and
//! another interaction's id a 404, like a missing one. Tokens are looked up by SHA-256 in the
//! store on every request (no cache), so an expired or deleted token is refused at once by every
//! replica. Each use is logged, and written to the audit log, with the token's id (never its
//! value).

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

/// What an ephemeral token (`x-goog-api-key: auth_tokens/…`) may act on: one interaction of its
/// project. Put into the request's extensions beside its [`Project`] by [`require_key`]; absent
/// for an API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenScope {
    /// The token's public id (`atk_…`), for logs; never the token.
    pub token_id: String,
    pub interaction_id: String,
}

impl TokenScope {
    /// Whether a continuation (`POST /interactions`) with `previous_interaction_id` may proceed
    /// under this token: only its own interaction, and nothing else (a new conversation is a 401,
    /// another interaction's id a 404, as for a missing one).
    pub fn check_continues(&self, previous_interaction_id: Option<&str>) -> Result<(), ApiError> {
        match previous_interaction_id {
            Some(id) if id == self.interaction_id => Ok(()),
            Some(id) => Err(ApiError::not_found(format!(
                "Interaction `{id}` (previous_interaction_id) not found."
            ))),
            None => Err(token_refused()),
        }
    }
}

/// Whether the principal of a request (`scope`: its [`TokenScope`], `None` for an API key, which
/// may access every interaction of its project) may access interaction `interaction_id`. For
/// handlers that learn the interaction after authentication, as the live WebSocket does from its
/// first frame: refuse with [`not_found_for_token`] when this is `false`, so a token holder
/// learns nothing about other interactions.
pub fn may_access(scope: Option<&TokenScope>, interaction_id: &str) -> bool {
    scope.is_none_or(|s| s.interaction_id == interaction_id)
}

/// The answer to a token used on another interaction: the same 404 a missing one gets.
pub fn not_found_for_token(interaction_id: &str) -> ApiError {
    ApiError::not_found(format!("Interaction `{interaction_id}` not found."))
}

fn token_refused() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "An auth token (auth_tokens/...) may only read, stream, continue or live-connect the interaction it was created for; use an API key for anything else.",
    )
}

/// What a token may reach, decided on the request line alone (before any handler runs):
/// `GET /interactions/{its id}`, `POST /interactions` (the handler checks what it continues),
/// `GET /interactions/live`. Another interaction's id is a 404, anything else a 401.
fn token_allows(
    scope: &TokenScope,
    method: &axum::http::Method,
    path: &str,
) -> Result<(), ApiError> {
    use axum::http::Method;
    let mut parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if parts
        .first()
        .is_some_and(|v| crate::API_VERSIONS.contains(v))
    {
        parts.remove(0);
    }
    match (method, parts.as_slice()) {
        (&Method::POST, ["interactions"]) => Ok(()),
        (&Method::GET, ["interactions", "live"]) => Ok(()),
        (&Method::GET, ["interactions", id]) if *id == scope.interaction_id => Ok(()),
        (_, ["interactions", id, ..]) if *id != scope.interaction_id && *id != "live" => {
            Err(not_found_for_token(id))
        }
        _ => Err(token_refused()),
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

/// The project (and scope) of an ephemeral token, or why it authenticates nothing: unknown,
/// expired and deleted tokens get the same answer as a wrong key.
async fn resolve_token(
    state: &AppState,
    token: &str,
) -> Result<(Project, Option<TokenScope>), ApiError> {
    let record = state
        .inner
        .store
        .find_auth_token(&hookbox_store::keys::hash_key(token))
        .await
        .map_err(ApiError::from)?;
    match record {
        Some(r) if r.is_live_at(&hookbox_store::time::now_rfc3339()) => Ok((
            Project::new(&r.project),
            Some(TokenScope {
                token_id: r.id,
                interaction_id: r.interaction_id,
            }),
        )),
        _ => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "API key not valid.",
        )),
    }
}

/// The project `presented` authenticates, or the error to answer.
async fn resolve(
    state: &AppState,
    presented: Option<&str>,
) -> Result<(Project, Option<TokenScope>), ApiError> {
    if let Some(token) = presented.filter(|k| k.starts_with(crate::auth_tokens::TOKEN_PREFIX)) {
        return resolve_token(state, token).await;
    }
    resolve_key(state, presented)
        .await
        .map(|project| (project, None))
}

/// The project the API key `presented` authenticates, or the error to answer.
async fn resolve_key(state: &AppState, presented: Option<&str>) -> Result<Project, ApiError> {
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
        Ok((project, scope)) => {
            if let Some(scope) = &scope {
                let allowed = token_allows(scope, req.method(), req.uri().path());
                tracing::info!(
                    name: hookbox_protocol::events::AUTH_TOKEN_USED,
                    project = %project,
                    token_id = %scope.token_id,
                    token_interaction = %scope.interaction_id,
                    method = %req.method(),
                    path = %req.uri().path(),
                    allowed = allowed.is_ok(),
                    "request with an auth token"
                );
                if let Err(err) = allowed {
                    return err.into_response();
                }
            }
            if let Err(err) = state.inner.quotas.admit_request(&project).await {
                return err.into_response();
            }
            req.extensions_mut().insert(project);
            if let Some(scope) = scope {
                req.extensions_mut().insert(scope);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn scope() -> TokenScope {
        TokenScope {
            token_id: "atk_1".into(),
            interaction_id: "int_mine".into(),
        }
    }

    #[test]
    fn a_token_reaches_only_its_interaction() {
        let s = scope();
        for (method, path) in [
            (Method::GET, "/v1beta/interactions/int_mine"),
            (Method::GET, "/interactions/int_mine"),
            (Method::GET, "/v1/interactions/int_mine"),
            (Method::POST, "/v1beta/interactions"),
            (Method::GET, "/v1beta/interactions/live"),
        ] {
            assert_eq!(token_allows(&s, &method, path), Ok(()), "{method} {path}");
        }
        for (method, path, status) in [
            (
                Method::GET,
                "/v1beta/interactions/int_other",
                StatusCode::NOT_FOUND,
            ),
            (
                Method::POST,
                "/v1beta/interactions/int_other/cancel",
                StatusCode::NOT_FOUND,
            ),
            (
                Method::POST,
                "/v1beta/interactions/int_mine/cancel",
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::DELETE,
                "/v1beta/interactions/int_mine",
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::POST,
                "/v1beta/interactions/int_mine/auth_tokens",
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::GET,
                "/v1beta/interactions",
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::GET,
                "/v1beta/environments",
                StatusCode::UNAUTHORIZED,
            ),
            (Method::GET, "/v1beta/approvals", StatusCode::UNAUTHORIZED),
            (
                Method::GET,
                "/v1beta/environments/env_1/files/a",
                StatusCode::UNAUTHORIZED,
            ),
            (
                Method::PUT,
                "/upload/v1beta/environments/env_1/files/a",
                StatusCode::UNAUTHORIZED,
            ),
        ] {
            let err = token_allows(&s, &method, path).unwrap_err();
            assert_eq!(err.status, status, "{method} {path}");
            assert!(
                !err.message.contains("int_mine") || path.contains("int_mine"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn a_token_continues_only_its_interaction() {
        let s = scope();
        assert!(s.check_continues(Some("int_mine")).is_ok());
        assert_eq!(
            s.check_continues(Some("int_other")).unwrap_err().status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            s.check_continues(None).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert!(may_access(None, "int_any"));
        assert!(may_access(Some(&s), "int_mine"));
        assert!(!may_access(Some(&s), "int_other"));
    }
}
