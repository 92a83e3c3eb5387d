//! The middleware: [`Policy::protect`] puts the decision in front of every route (and the
//! fallback) of a router, answers refusals in the API's JSON error shape and listed origins'
//! preflights, and names listed origins in the answers they get.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hookbox_protocol::api::{ErrorBody, RpcStatus};
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, CONTENT_TYPE, VARY,
};
use http::{HeaderValue, StatusCode};

use crate::{Decision, Policy, Refusal};

/// The log event of a refusal (a web page probing the server, or a client to reconfigure),
/// logged at INFO with target `hookbox_browser_guard::layer` and fields `event` (this),
/// `reason` (one of [`Refusal::REASONS`]), `status`, `method` and `path`. A server counts
/// refusals from it (hookbox's `hookbox_browser_guard_refusals_total{reason}`), so this crate
/// needs no metrics dependency.
pub const REFUSED_EVENT: &str = "browser_guard.refused";

/// Methods a listed origin may use (everything the API routes take).
const ALLOW_METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE";

/// Request headers a listed origin's page may send, each because an SDK or the console sends
/// it: the body type (JSON is not CORS-safelisted), the API key (`x-goog-api-key`, or a bearer
/// `authorization`), the SDKs' client identification and options (`x-goog-api-client`,
/// `x-goog-user-project`, `x-server-timeout`, `api-revision`), the resumable upload's protocol
/// headers, and `last-event-id` for resuming a stream.
const ALLOW_HEADERS: &str = "content-type, x-goog-api-key, authorization, x-goog-api-client, x-goog-user-project, x-server-timeout, api-revision, x-goog-upload-protocol, x-goog-upload-command, x-goog-upload-offset, x-goog-upload-header-content-length, x-goog-upload-header-content-type, x-goog-upload-file-name, last-event-id";

/// Answer headers a listed origin's page may read beyond the safelisted ones: where an upload
/// goes on and its state (the SDKs read both), which replica answered, and how long to wait.
const EXPOSE_HEADERS: &str =
    "x-goog-upload-url, x-goog-upload-status, x-hookbox-replica, retry-after";

/// How long a browser may reuse a preflight's answer, in seconds.
const PREFLIGHT_MAX_AGE: &str = "600";

impl Policy {
    /// `router` behind this policy: every route and the fallback.
    pub fn protect<S>(&self, router: Router<S>) -> Router<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        router.layer(axum::middleware::from_fn_with_state(
            Arc::new(self.clone()),
            guard,
        ))
    }

    /// The answer to a refused request.
    pub fn refusal_response(&self, refusal: &Refusal) -> Response {
        let status = refusal.status();
        let body = ErrorBody {
            error: RpcStatus {
                code: status.as_u16(),
                message: refusal.message(self),
                status: refusal.rpc_status().to_owned(),
            },
        };
        (status, axum::Json(body)).into_response()
    }
}

async fn guard(State(policy): State<Arc<Policy>>, request: Request, next: Next) -> Response {
    let decision = policy.decide(
        request.method(),
        request.uri(),
        request.version(),
        request.headers(),
    );
    match decision {
        Decision::Pass { cors: None } => next.run(request).await,
        Decision::Pass { cors: Some(origin) } => {
            let mut response = next.run(request).await;
            let headers = response.headers_mut();
            headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            headers.insert(
                ACCESS_CONTROL_EXPOSE_HEADERS,
                HeaderValue::from_static(EXPOSE_HEADERS),
            );
            headers.append(VARY, HeaderValue::from_static("origin"));
            response
        }
        Decision::Preflight { origin } => preflight(origin),
        Decision::Refuse(refusal) => {
            tracing::info!(
                event = REFUSED_EVENT,
                reason = refusal.reason(),
                status = refusal.status().as_u16(),
                method = %request.method(),
                path = request.uri().path(),
                "refused a request that a web page may have sent"
            );
            policy.refusal_response(&refusal)
        }
    }
}

/// 204 with what a listed origin may send.
fn preflight(origin: HeaderValue) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOW_METHODS),
    );
    headers.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    headers.insert(
        ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(PREFLIGHT_MAX_AGE),
    );
    headers.insert(
        VARY,
        HeaderValue::from_static(
            "origin, access-control-request-method, access-control-request-headers",
        ),
    );
    headers.remove(CONTENT_TYPE);
    response
}
