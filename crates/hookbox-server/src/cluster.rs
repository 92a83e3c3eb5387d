//! Replicas: several `hookbox serve` processes on one PostgreSQL database and one shared data
//! dir. Any replica answers any read; an environment runs on one replica at a time (the holder of
//! its lease, see `hookbox_store::Cluster`), and a request that needs it elsewhere is forwarded
//! there with the cluster secret. [`run`] keeps this replica's heartbeat and leases alive and
//! fails the interactions of replicas that stopped.
//!
//! This module holds the mechanisms: a lease taken or found ([`place`]), a request sent to a
//! peer and its answer relayed ([`forward`]), the proof that a request came from a peer
//! ([`forwarded`]). Which request goes where is `holder`'s; this module must not run
//! anything itself, nor know about draining.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hookbox_store::{Claim, Cluster};

use crate::error::{ApiError, ApiResult};

/// The header a forwarding replica names itself in.
pub const FORWARDED_BY: &str = "x-hookbox-forwarded-by";
/// The header carrying the cluster secret on forwarded requests.
pub const CLUSTER_SECRET: &str = "x-hookbox-cluster-secret";
/// The response header naming the replica that served a request (relayed from the replica a
/// request was forwarded to).
pub const SERVED_BY: &str = "x-hookbox-replica";

/// Middleware: names this replica on every API response that does not already name one.
pub async fn name_replica(
    axum::extract::State(state): axum::extract::State<crate::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = next.run(req).await;
    if let Some(config) = &state.inner.cluster
        && !response.headers().contains_key(SERVED_BY)
        && let Ok(value) = HeaderValue::from_str(&config.cluster.replica().id)
    {
        response.headers_mut().insert(SERVED_BY, value);
    }
    response
}

/// Headers that belong to one hop, never forwarded or relayed as they are.
const HOP_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    FORWARDED_BY,
    CLUSTER_SECRET,
];

fn end_to_end(name: &str) -> bool {
    !HOP_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Whether a request header goes on to the replica a request is forwarded to: end to end, and
/// not about the browser that sent it. This replica's browser guard already judged `Origin`
/// and `Sec-Fetch-*`; the receiving replica sees a request from a peer, whose `Host` is the
/// peer's `--replica-url`.
fn forwarded_on(name: &str) -> bool {
    end_to_end(name)
        && !hookbox_browser_guard::headers::BROWSER_CONTEXT
            .iter()
            .any(|h| name.eq_ignore_ascii_case(h))
}

/// The headers a request forwarded to a peer carries: this replica's name and the cluster
/// secret, then the client's that go on ([`forwarded_on`]), less `skip`'s.
pub(crate) fn forwarding_headers(
    config: &ClusterConfig,
    headers: &HeaderMap,
    skip: impl Fn(&str) -> bool,
) -> Vec<(String, HeaderValue)> {
    let mut out = Vec::new();
    if let (Ok(by), Ok(secret)) = (
        HeaderValue::from_str(&config.cluster.replica().id),
        HeaderValue::from_str(&config.secret),
    ) {
        out.push((FORWARDED_BY.to_owned(), by));
        out.push((CLUSTER_SECRET.to_owned(), secret));
    }
    for (name, value) in headers {
        if forwarded_on(name.as_str()) && !skip(name.as_str()) {
            out.push((name.as_str().to_owned(), value.clone()));
        }
    }
    out
}

/// This replica's place in a cluster.
#[derive(Clone)]
pub struct ClusterConfig {
    pub cluster: Arc<dyn Cluster>,
    /// Shared by all replicas; proves a forwarded request came from one.
    pub secret: String,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("ClusterConfig")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// Where a request that needs an environment runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    Here,
    There { replica: String, url: String },
}

/// Whether `headers` are those of a request forwarded by another replica: `Ok(true)` only with
/// the right secret; a forwarding header without it is refused (it would let a client make a
/// replica run an environment it does not hold).
pub fn forwarded(config: Option<&ClusterConfig>, headers: &HeaderMap) -> ApiResult<bool> {
    if !headers.contains_key(FORWARDED_BY) {
        return Ok(false);
    }
    let given = headers
        .get(CLUSTER_SECRET)
        .map(HeaderValue::as_bytes)
        .unwrap_or_default();
    match config {
        Some(config) if constant_time_eq(given, config.secret.as_bytes()) => Ok(true),
        _ => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "A forwarded request needs the cluster secret.",
        )),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where environment `id` runs: here (taking its lease if it is free), or on the replica that
/// holds it. A forwarded request that finds the environment elsewhere is refused, so requests
/// never bounce between replicas.
pub async fn place(
    config: Option<&ClusterConfig>,
    environment_id: &str,
    forwarded: bool,
) -> ApiResult<Placement> {
    let Some(config) = config else {
        return Ok(Placement::Here);
    };
    let resource = hookbox_store::postgres::environment_resource(environment_id);
    match config.cluster.claim(&resource).await? {
        Claim::Held { .. } => Ok(Placement::Here),
        Claim::Elsewhere { replica, .. } if forwarded => Err(unavailable(format!(
            "Environment `{environment_id}` moved to replica `{replica}` meanwhile; retry."
        ))),
        Claim::Elsewhere { replica, url } => Ok(Placement::There { replica, url }),
    }
}

fn unavailable(message: String) -> ApiError {
    ApiError::unavailable(message, crate::error::RETRY_AFTER_SECS)
}

/// Sends the request (`method`, `path_and_query`, the kept `headers`, `body`) to the replica at
/// `url` and relays its answer as it comes (streams included).
pub async fn forward(
    config: &ClusterConfig,
    (replica, url): (&str, &str),
    method: Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str());
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| ApiError::internal(&e))?;
    let mut request = client
        .request(
            method,
            format!("{}{path_and_query}", url.trim_end_matches('/')),
        )
        .header(FORWARDED_BY, config.cluster.replica().id.as_str())
        .header(CLUSTER_SECRET, config.secret.as_str())
        .body(body);
    for (name, value) in headers {
        if forwarded_on(name.as_str()) {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    tracing::debug!(%replica, path = path_and_query, "forwarding to the replica that runs the environment");
    let response = request.send().await.map_err(|e| {
        tracing::warn!(%replica, error = %e, "the replica running the environment does not answer");
        unavailable(format!(
            "The environment is run by replica `{replica}`, which does not answer; retry once its lease expires (within {} s).",
            config.cluster.replica().lease_ttl.as_secs().max(1)
        ))
    })?;
    let status = StatusCode::from_u16(response.status().as_u16())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let streaming = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"text/event-stream"));
    let mut out = Response::builder().status(status);
    for (name, value) in response.headers() {
        if end_to_end(name.as_str()) {
            out = out.header(name.as_str(), value.as_bytes());
        }
    }
    // A stream is relayed as it comes; anything else whole, as the replica sent it.
    let body =
        if streaming {
            Body::from_stream(response.bytes_stream())
        } else {
            Body::from(response.bytes().await.map_err(|e| {
                unavailable(format!("Replica `{replica}` broke off its answer: {e}"))
            })?)
        };
    out.body(body)
        .map_err(|e| ApiError::internal(&e))
        .map(IntoResponse::into_response)
}

/// Renews this replica's heartbeat and leases every third of the lease TTL and fails the
/// interactions of replicas that stopped; runs until the process ends.
pub async fn run(cluster: Arc<dyn Cluster>) {
    let period = (cluster.replica().lease_ttl / 3).max(Duration::from_millis(100));
    loop {
        if let Err(e) = cluster.heartbeat().await {
            tracing::warn!(error = %e, "replica heartbeat failed");
        }
        let reason = "the replica running this interaction stopped before it finished";
        match cluster
            .reap(reason, &hookbox_store::time::now_rfc3339())
            .await
        {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(
                    count = ids.len(),
                    ?ids,
                    "failed the interactions of stopped replicas"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reaping stopped replicas' interactions failed"),
        }
        tokio::time::sleep(period).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_request_keeps_its_end_to_end_headers_but_not_the_browsers() {
        for kept in [
            "content-type",
            "x-goog-api-key",
            "X-Goog-Upload-Command",
            "accept",
        ] {
            assert!(forwarded_on(kept), "{kept}");
        }
        for dropped in [
            "Origin",
            "referer",
            "sec-fetch-site",
            "Sec-Fetch-Mode",
            "sec-fetch-dest",
            "sec-fetch-user",
            "host",
            "content-length",
            FORWARDED_BY,
            CLUSTER_SECRET,
        ] {
            assert!(!forwarded_on(dropped), "{dropped}");
        }
    }
}
