//! HTTP errors in the Google RPC shape the SDK turns into its exceptions (spec §8):
//! `{"error":{"code":404,"message":"…","status":"NOT_FOUND"}}`. Messages say what was wrong in
//! the request; internal failures are logged with their cause and answered with a generic message,
//! so no internals (paths, SQL, secrets) reach a client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hookbox_agent::seams::ProviderError;
use hookbox_protocol::api::{ErrorBody, RpcStatus};

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// The RPC status name when it is not the HTTP status's usual one
    /// (`FAILED_PRECONDITION` is a 400, like `INVALID_ARGUMENT`).
    pub rpc: Option<&'static str>,
    /// Seconds the client should wait before retrying (`Retry-After`), on 429 and 503.
    pub retry_after: Option<u32>,
}

/// Result alias of handlers.
pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// What a client told to retry (503 `UNAVAILABLE`: a draining server, a peer that took or
/// holds an environment) waits before it does: a peer, or this server once restarted, takes
/// the request by then.
pub const RETRY_AFTER_SECS: u32 = 2;

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            rpc: None,
            retry_after: None,
        }
    }

    /// The same error, telling the client to retry after `seconds` (at least 1).
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    /// 503 `UNAVAILABLE` with `Retry-After`: a dependency (the store, a peer) does not answer
    /// now; the SDKs retry it.
    pub fn unavailable(message: impl Into<String>, retry_after: u32) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message).retry_after(retry_after)
    }

    /// 400 `FAILED_PRECONDITION`: the request is well formed but the resource is not in a state
    /// that allows it (an expired environment).
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        ApiError {
            rpc: Some("FAILED_PRECONDITION"),
            ..Self::new(StatusCode::BAD_REQUEST, message)
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// Logs `cause` and answers a generic 500.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error; see the hookbox server log.",
        )
    }

    /// The Google RPC status name for an HTTP status.
    pub fn rpc_status(status: StatusCode) -> &'static str {
        match status.as_u16() {
            400 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            405 => "UNIMPLEMENTED",
            409 => "ALREADY_EXISTS",
            413 => "INVALID_ARGUMENT",
            429 => "RESOURCE_EXHAUSTED",
            501 => "UNIMPLEMENTED",
            503 => "UNAVAILABLE",
            500..=599 => "INTERNAL",
            _ => "UNKNOWN",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: RpcStatus {
                code: self.status.as_u16(),
                message: self.message,
                status: self
                    .rpc
                    .unwrap_or_else(|| Self::rpc_status(self.status))
                    .to_owned(),
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}

impl From<hookbox_store::Error> for ApiError {
    fn from(e: hookbox_store::Error) -> Self {
        use hookbox_store::Error as E;
        match e {
            E::NotFound { what, id } => {
                ApiError::not_found(format!("{} `{id}` not found.", capitalize(what)))
            }
            // 409 would make the SDK retry five times (spec §1.3), so a taken id is a 400.
            E::AlreadyExists { what, id } => {
                ApiError::bad_request(format!("{} `{id}` already exists.", capitalize(what)))
            }
            E::CredentialTypeMismatch { id, stored, update } => ApiError::bad_request(format!(
                "Credential `{id}` is of type `{stored}`; the update has type `{update}`."
            )),
            // A bound, not an outage: room comes only when a token is deleted or expires, so the
            // Retry-After every 429 carries is long (as for the environments quota).
            e @ E::TooManyAuthTokens { .. } => {
                ApiError::new(axum::http::StatusCode::TOO_MANY_REQUESTS, format!("{e}."))
                    .retry_after(AUTH_TOKEN_CAP_RETRY_AFTER_SECS)
            }
            other if other.is_unavailable() => {
                tracing::warn!(error = %other, "the store does not answer");
                ApiError::unavailable(
                    "The store does not answer; retry shortly. Nothing was changed.",
                    STORE_RETRY_AFTER_SECS,
                )
            }
            other => ApiError::internal(&other),
        }
    }
}

/// What a client is told to wait while the store does not answer.
pub const STORE_RETRY_AFTER_SECS: u32 = 2;

/// What a client is told to wait when its interaction holds its cap of live auth tokens.
pub const AUTH_TOKEN_CAP_RETRY_AFTER_SECS: u32 = 60;

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        match e {
            ProviderError::EnvironmentNotFound(id) => {
                ApiError::not_found(format!("Environment `{id}` not found."))
            }
            ProviderError::FileNotFound(p) => {
                ApiError::not_found(format!("File `{p}` not found in the environment."))
            }
            ProviderError::FileExists(p) => ApiError::bad_request(format!(
                "File `{p}` already exists; upload with overwrite=true to replace it."
            )),
            ProviderError::InvalidSource(m) => {
                ApiError::bad_request(format!("Invalid source: {m}"))
            }
            ProviderError::InvalidPath(m) => ApiError::bad_request(format!("Invalid path: {m}")),
            ProviderError::Unavailable(m) => ApiError::unavailable(m, STORE_RETRY_AFTER_SECS),
            ProviderError::Unrestorable(m) => {
                ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, m)
            }
            ProviderError::Internal(m) => ApiError::internal(&m),
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Review: a stopped store was answered 503 with Retry-After, so the SDKs retried a request
    // that could never succeed; it is an internal error.
    #[test]
    fn a_stopped_store_is_an_internal_error_not_a_retry() {
        let e = ApiError::from(hookbox_store::Error::Stopped);
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.retry_after, None);
        let e = ApiError::from(hookbox_store::Error::Pool("no connection".into()));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.retry_after.is_some());
    }

    // Review: the token cap's 429 had no Retry-After though every other 429 carries one, so an
    // SDK retried at once and failed again.
    #[test]
    fn the_token_caps_429_carries_a_long_retry_after() {
        let e = ApiError::from(hookbox_store::Error::TooManyAuthTokens {
            interaction: "i".into(),
            limit: hookbox_store::MAX_LIVE_AUTH_TOKENS,
        });
        assert_eq!(e.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.retry_after, Some(AUTH_TOKEN_CAP_RETRY_AFTER_SECS));
    }
}
