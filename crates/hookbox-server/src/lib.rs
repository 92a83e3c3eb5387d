//! The Interactions API over HTTP, wire-compatible with the `google-genai` SDK (spec:
//! `shared/spec/interactions-api.md`): interactions (blocking, background, SSE streaming, cancel,
//! function tools answered with `function_result`, remote `mcp_server` tools, calls paused by a
//! hook's `ask` with their records (`/approvals`) and sweeper ([`approvals`]), `pre_interaction`
//! / `post_interaction` hooks around each run), environments and their files (resumable
//! upload, [`uploads`]), credentials (secrets write-only), agents, webhooks (`webhooks`: the
//! resource; the deliverer is `hookbox-webhooks`) and triggers ([`triggers`]: the resource and
//! the scheduler), ephemeral auth tokens scoped to one interaction ([`auth_tokens`], checked in
//! [`auth`]), live interactions over WebSocket (`/interactions/live`, `interactions::live`),
//! guard health over a window for the console's Overview (`/stats`, [`stats`]),
//! under `/v1`, `/v1beta`, `/v1alpha` and unversioned paths, behind API-key auth.
//!
//! [`app`] builds the router from an [`AppState`] holding the seams: a [`Store`], a [`Model`], a
//! [`ToolExecutor`] and an [`EnvironmentProvider`]. This crate owns HTTP only: it must not run
//! tools itself, open databases or pick models; the binary wires those in. [`sandbox`] puts
//! `hookbox-environments` behind the two seams: the cache of open environments and the seam
//! implementations, which hand each tool call to the environments crate's lifecycle. Every
//! handler takes the [`AppState`] defined here (the crate's one hub: the run registry, quotas,
//! uploads, drain state), so this root is the one module the others import back.
//!
//! Whatever listens ([`serve`], [`metrics_app`]) is behind the browser guard
//! (`hookbox-browser-guard`, configured by [`browser_policy`]): every route, the console,
//! `/metrics`, `/healthz`, `/readyz` and the replicas' expire route answer only `Host` values
//! that are IP addresses, `localhost` or names the operator allowed, only pages of their own
//! origin or a listed one, and only JSON bodies (upload chunks: file bytes with the SDKs'
//! upload header), so no web page the user opens can drive a local server.

pub mod approvals;
pub mod audit;
pub mod auth;
pub mod auth_tokens;
pub mod cluster;
pub mod drain;
pub mod env_vars;
mod environments;
pub mod error;
mod holder;
mod interactions;
pub mod lifecycle;
pub mod metrics;
pub mod quota;
mod resources;
pub mod sandbox;
mod schedule;
pub mod stats;
pub mod triggers;
pub mod uploads;
mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::{get, post, put};
use hookbox_agent::LoopConfig;
use hookbox_agent::Model;
use hookbox_agent::seams::{EnvironmentProvider, ToolExecutor};
use hookbox_store::Store;

pub use auth::Project;
pub use error::{ApiError, ApiResult};
use hookbox_store::keys::StaticKey;

/// Agent names accepted in `agent` besides stored agents' ids (spec §3.1).
pub const BUILTIN_AGENTS: &[&str] = &[
    "antigravity-preview-09-2026",
    "antigravity-preview-05-2026",
    "deep-research-pro-preview-12-2025",
    "deep-research-preview-04-2026",
    "deep-research-max-preview-04-2026",
];

/// API versions served (plus unversioned paths).
pub const API_VERSIONS: &[&str] = &["v1", "v1beta", "v1alpha"];

/// Largest request body: inline sources and upload chunks (the SDK sends 8 MiB chunks).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Errors of building or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "no API keys are configured, so hookbox only listens on loopback (local mode); refusing {0}. Give a key (--api-key KEY or {keys}=KEY, or create one with `hookbox key create`) or listen on 127.0.0.1",
        keys = env_vars::HOOKBOX_API_KEYS
    )]
    NonLoopbackWithoutKeys(SocketAddr),
    #[error("server I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Refuses a non-loopback listen address when no API key (static or managed) is configured.
pub fn check_listen_addr(addr: SocketAddr, has_keys: bool) -> Result<()> {
    if !has_keys && !addr.ip().is_loopback() {
        return Err(Error::NonLoopbackWithoutKeys(addr));
    }
    Ok(())
}

/// What the server is built from.
#[derive(Debug)]
pub struct Services {
    pub store: Arc<dyn Store>,
    pub model: Arc<dyn Model>,
    pub executor: Arc<dyn ToolExecutor>,
    pub environments: Arc<dyn EnvironmentProvider>,
    /// API keys given to the server, each with its project. Managed keys live in the store.
    pub api_keys: Vec<StaticKey>,
    /// Keyless requests (local mode, project `default`) are accepted while no key exists at all.
    /// Only for a server that listens on loopback only.
    pub allow_keyless: bool,
    pub loop_config: LoopConfig,
    /// Quotas from the config file (defaults if none).
    pub quotas: quota::QuotaConfig,
    /// The per-project sandbox process limits of the backend, set from the quotas.
    pub sandbox_slots: Option<Arc<hookbox_environments::slots::SlotRegistry>>,
    /// Expiry and checkpoints.
    pub lifecycle: lifecycle::Lifecycle,
    /// Where unfinished uploads are spooled and how far they may go.
    pub uploads: uploads::UploadOptions,
}

/// Shared state of all handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    model: Arc<dyn Model>,
    executor: Arc<dyn ToolExecutor>,
    environments: Arc<dyn EnvironmentProvider>,
    api_keys: Vec<StaticKey>,
    allow_keyless: bool,
    loop_config: LoopConfig,
    quotas: Arc<quota::QuotaBook>,
    running: interactions::run::Runs,
    uploads: uploads::Uploads,
    /// Set when this server is one replica of several.
    cluster: Option<cluster::ClusterConfig>,
    lifecycle: lifecycle::Lifecycle,
    drain: drain::DrainState,
    /// Wakes the webhook deliverer after an event was written (see [`AppState::deliver_webhooks_with`]).
    webhooks: std::sync::OnceLock<Arc<tokio::sync::Notify>>,
    /// Why a webhook `uri` can never be delivered to (see [`AppState::check_webhook_uris_with`]).
    webhook_uri_check: std::sync::OnceLock<WebhookUriCheck>,
}

/// The function behind [`WebhookUriCheck`].
pub type UriRefusal = dyn Fn(&str) -> Option<String> + Send + Sync;

/// Says why a webhook `uri` can never be delivered to (`None`: it may be).
#[derive(Clone)]
pub struct WebhookUriCheck(pub Arc<UriRefusal>);

impl std::fmt::Debug for WebhookUriCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookUriCheck")
    }
}

impl Inner {
    fn wake_webhooks(&self) {
        if let Some(waker) = self.webhooks.get() {
            waker.notify_one();
        }
    }
}

impl AppState {
    pub fn new(services: Services) -> Self {
        Self::replica(services, None)
    }

    /// A server that is one replica of several sharing `cluster`'s database (see [`cluster`]);
    /// `None`: the only one.
    pub fn replica(services: Services, cluster: Option<cluster::ClusterConfig>) -> Self {
        AppState {
            inner: Arc::new(Inner {
                quotas: quota::QuotaBook::new(
                    services.quotas,
                    services.store.clone(),
                    services.sandbox_slots,
                    cluster.as_ref().map(|c| c.cluster.clone()),
                ),
                store: services.store,
                model: services.model,
                executor: services.executor,
                environments: services.environments,
                api_keys: services.api_keys,
                allow_keyless: services.allow_keyless,
                loop_config: services.loop_config,
                running: interactions::run::Runs::default(),
                uploads: uploads::Uploads::new(services.uploads),
                cluster,
                lifecycle: services.lifecycle,
                drain: drain::DrainState::default(),
                webhooks: std::sync::OnceLock::new(),
                webhook_uri_check: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Marks interactions left running by a previous process as failed. Call once at start-up.
    pub async fn recover(&self) -> std::result::Result<Vec<String>, hookbox_store::Error> {
        let ids = self
            .inner
            .store
            .recover_interrupted(drain::STOPPED_REASON, &hookbox_store::time::now_rfc3339())
            .await?;
        if !ids.is_empty() {
            tracing::warn!(
                count = ids.len(),
                "marked interrupted interactions as failed"
            );
        }
        Ok(ids)
    }

    /// Tells the server that a webhook deliverer runs, woken by `waker` when this server wrote
    /// an event (an interaction ended, a ping), so it goes out at once rather than at the next
    /// poll. Without one, events still wait in the store.
    pub fn deliver_webhooks_with(&self, waker: Arc<tokio::sync::Notify>) {
        let _ = self.inner.webhooks.set(waker);
    }

    /// Refuses, at create and update, webhook `uri`s that `check` says can never be delivered
    /// to (the deliverer's own SSRF guard, so the answer is the same as at delivery).
    pub fn check_webhook_uris_with(&self, check: WebhookUriCheck) {
        let _ = self.inner.webhook_uri_check.set(check);
    }

    /// Why `uri` can never be delivered to, when a check is set.
    pub(crate) fn webhook_uri_refusal(&self, uri: &str) -> Option<String> {
        self.inner
            .webhook_uri_check
            .get()
            .and_then(|check| (check.0)(uri))
    }

    pub(crate) fn wake_webhooks(&self) {
        self.inner.wake_webhooks();
    }

    /// Number of interactions currently running.
    pub fn running_count(&self) -> usize {
        self.inner.running.count()
    }
}

fn api_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/interactions",
            post(interactions::create).get(interactions::list),
        )
        .route(
            "/interactions/{id}",
            get(interactions::get).delete(interactions::delete),
        )
        .route("/interactions/{id}/cancel", post(interactions::cancel))
        .route("/interactions/live", get(interactions::live::upgrade))
        .route("/interactions/{id}/auth_tokens", post(auth_tokens::create))
        .route(
            "/interactions/{id}/auth_tokens/{token}",
            axum::routing::delete(auth_tokens::delete),
        )
        .route("/approvals", get(approvals::list))
        .route("/stats", get(stats::stats))
        .route(
            "/environments",
            post(environments::create).get(environments::list),
        )
        .route(
            "/environments/{id}",
            get(environments::get).delete(environments::delete),
        )
        .route("/environments/{id}/hooks", get(environments::hooks))
        .route("/environments/{id}/files", get(environments::files_root))
        .route("/environments/{id}/files/", get(environments::files_root))
        .route("/environments/{id}/files/{*path}", get(environments::files))
        .route(
            "/credentials",
            post(resources::create_credential).get(resources::list_credentials),
        )
        .route(
            "/credentials/{id}",
            get(resources::get_credential)
                .patch(resources::update_credential)
                .delete(resources::delete_credential),
        )
        .route(
            "/agents",
            post(resources::create_agent).get(resources::list_agents),
        )
        .route(
            "/agents/{id}",
            get(resources::get_agent).delete(resources::delete_agent),
        )
        .route("/webhooks", post(webhooks::create).get(webhooks::list))
        .route(
            "/webhooks/{id}",
            get(webhooks::get)
                .patch(webhooks::update)
                .delete(webhooks::delete)
                .post(webhooks::action),
        )
        .route("/webhooks/{id}/deliveries", get(webhooks::deliveries))
        .route("/triggers", post(triggers::create).get(triggers::list))
        .route(
            "/triggers/{id}",
            get(triggers::get)
                .patch(triggers::update)
                .delete(triggers::delete),
        )
        .route(
            "/triggers/{id}/executions",
            get(triggers::list_executions).post(triggers::run),
        )
}

fn upload_routes() -> Router<AppState> {
    Router::new()
        .route(
            "/environments/{id}/files/{*path}",
            put(uploads::upload_start),
        )
        .route("/sessions/{session}", post(uploads::upload_chunk))
}

/// Whether `path` is a resumable upload's chunk (`/upload[/{v}]/sessions/{session}`), whose
/// body is the file's bytes, not JSON.
pub fn is_upload_chunk(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["upload", "sessions", session] => !session.is_empty(),
        ["upload", version, "sessions", session] => {
            API_VERSIONS.contains(version) && !session.is_empty()
        }
        _ => false,
    }
}

/// The browser guard of everything `hookbox serve` listens on: the names and origins of the
/// config file's `[server]` and of `--allow-host` / `--allow-origin`, the host of this
/// replica's `--replica-url` (so requests forwarded by the other replicas pass), upload chunks
/// as file bytes; refusals name the flags and the config keys.
pub fn browser_policy(
    config: &quota::ServerConfig,
    allow_hosts: &[String],
    allow_origins: &[String],
    replica_url: Option<&str>,
) -> std::result::Result<hookbox_browser_guard::Policy, hookbox_browser_guard::Error> {
    let mut policy = hookbox_browser_guard::Policy::new();
    policy.mention_config_file().file_bytes_at(is_upload_chunk);
    for host in config.allow_hosts.iter().chain(allow_hosts) {
        policy.allow_host(host)?;
    }
    for origin in config.allow_origins.iter().chain(allow_origins) {
        policy.allow_origin(origin)?;
    }
    if let Some(url) = replica_url {
        policy.allow_url_host(url)?;
    }
    Ok(policy)
}

/// The whole API, without the browser guard: for tests that call it in process. [`serve`]
/// puts it behind the guard.
pub fn app(state: AppState) -> Router {
    let mut router = Router::new().merge(api_routes());
    for v in API_VERSIONS {
        router = router
            .nest(&format!("/{v}"), api_routes())
            .nest(&format!("/upload/{v}"), upload_routes());
    }
    let api = router
        .nest("/upload", upload_routes())
        .fallback(fallback)
        // Inside auth: only authenticated requests are forwarded to another replica.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            holder::follow_environments,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_key,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            cluster::name_replica,
        ))
        .with_state(state.clone());
    // For load balancers: no key, no rate limit, nothing about any project.
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(local_metrics))
        .route("/console", get(console))
        // #31 item 8: `/` was a JSON 404 and the favicon another; `/` leads to the console.
        .route(
            "/",
            get(|| async { axum::response::Redirect::to("/console") }),
        )
        .route("/favicon.ico", get(favicon))
        // Between replicas only (the cluster secret is checked inside); outside auth, since the
        // sweeper has no client key to forward.
        .route(
            "/v1beta/environments/{id}/expire",
            post(lifecycle::expire_here),
        )
        .with_state(state)
        .merge(api)
}

/// `GET /console`: the operator's web console, one static page built into the binary (no CDN).
/// It asks for an API key and reads everything through the API with it, so it sees exactly
/// what that key's project may see. Everything it shows is put in as text, never as markup.
async fn console() -> impl axum::response::IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                axum::http::header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'",
            ),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        include_str!("console.html"),
    )
}

/// `GET /favicon.ico`: the console's icon (an SVG; browsers take it whatever the name says).
async fn favicon() -> impl axum::response::IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "image/svg+xml"),
            (axum::http::header::CACHE_CONTROL, "max-age=86400"),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="1" y="3" width="14" height="11" rx="2" fill="#3b5bdb"/><path d="M4 3V1h8v2" stroke="#3b5bdb" stroke-width="2" fill="none"/><path d="M5 8.5l2 2 4-4" stroke="#fff" stroke-width="1.6" fill="none"/></svg>"##,
    )
}

/// `GET /metrics` on the API: metrics describe every project, so only a server in local mode
/// (no key at all, loopback only) answers; a keyed server exposes them on `--metrics-listen`
/// ([`metrics_app`]).
async fn local_metrics(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let local = state.inner.allow_keyless
        && state.inner.api_keys.is_empty()
        && matches!(state.inner.store.has_api_keys().await, Ok(false));
    if !local {
        return ApiError::not_found(
            "Metrics are served on --metrics-listen when API keys are in use.",
        )
        .into_response();
    }
    metrics_text().await.into_response()
}

/// The operator's metrics endpoint on an address of its own: `GET /metrics` only, behind the
/// browser guard `guard`.
pub fn metrics_app(guard: &hookbox_browser_guard::Policy) -> Router {
    guard.protect(Router::new().route("/metrics", get(metrics_text)))
}

async fn metrics_text() -> impl axum::response::IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::Metrics::global().render(),
    )
}

/// `GET /healthz`: the process answers.
async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// `GET /readyz`: the store answers too (503 while it does not, and from the moment a stop
/// begins, so load balancers send new work elsewhere).
async fn readyz(
    axum::extract::State(state): axum::extract::State<AppState>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if state.is_draining() {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({
                "status": "draining",
                "reason": "hookbox is shutting down",
                "running_interactions": state.running_count(),
            })),
        )
            .into_response();
    }
    match state.inner.store.has_api_keys().await {
        Ok(_) => {
            let mut body = serde_json::json!({"status": "ready"});
            // A failing snapshot store degrades, it does not stop: environments keep working
            // where they are, and nothing local is deleted until its upload is confirmed.
            if let Some(manager) = &state.inner.lifecycle.snapshots {
                let health = manager.health();
                body["snapshots"] = serde_json::json!({
                    "store": manager.snapshots().shown(),
                    "pending_checkpoints": health.pending,
                    "consecutive_failures": health.consecutive_failures,
                    "last_error": health.last_error,
                });
                if health.consecutive_failures > 0 {
                    body["status"] = serde_json::json!("degraded");
                }
            }
            axum::Json(body).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "readiness check: the store does not answer");
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(serde_json::json!({"status": "unavailable", "reason": "the store does not answer"})),
            )
                .into_response()
        }
    }
}

async fn fallback(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "No such endpoint: {method} {}. hookbox serves /v1, /v1beta and /v1alpha paths (interactions, environments, credentials, agents, webhooks, triggers).",
        uri.path()
    ))
}

/// Serves [`app`] behind the browser guard `guard` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    guard: &hookbox_browser_guard::Policy,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    axum::serve(listener, guard.protect(app(state)))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// A new random id with `prefix` (`int`, `env`, `agent`, `upl`).
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

/// Parses a JSON body into `T` with messages that say what was wrong.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(format!(
            "The request body is empty; expected a JSON {what}."
        )));
    }
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("Invalid JSON payload received: {e}.")))?;
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("Invalid {what}: {e}.")))
}

/// `?update_mask=a,b` of a `PATCH` (webhooks, triggers).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct UpdateQuery {
    #[serde(default)]
    pub update_mask: Option<String>,
}

impl UpdateQuery {
    /// Whether field `name` is to be applied: always without a mask, else when the mask names
    /// it. A mask naming a field outside `allowed` is a 400.
    pub(crate) fn applies(&self, allowed: &[&str]) -> ApiResult<impl Fn(&str) -> bool + use<>> {
        let fields: Option<Vec<String>> = self
            .update_mask
            .as_deref()
            .filter(|m| !m.trim().is_empty())
            .map(|m| m.split(',').map(|f| f.trim().to_owned()).collect());
        if let Some(bad) = fields
            .iter()
            .flatten()
            .find(|f| !allowed.contains(&f.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "Invalid `update_mask`: `{bad}` cannot be updated ({} can).",
                allowed.join(", ")
            )));
        }
        Ok(move |name: &str| fields.as_ref().is_none_or(|f| f.iter().any(|x| x == name)))
    }
}

/// `environments/{id}` or `{id}` → `{id}`.
pub(crate) fn strip_resource_prefix<'a>(id: &'a str, prefix: &str) -> &'a str {
    id.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_chunks_are_recognised_by_their_path_only() {
        for chunk in [
            "/upload/sessions/upl_1",
            "/upload/v1beta/sessions/upl_1",
            "/upload/v1/sessions/r_1.upl_2",
        ] {
            assert!(is_upload_chunk(chunk), "{chunk}");
        }
        for other in [
            "/upload/v1beta/environments/env_1/files/a.txt",
            "/upload/v9/sessions/upl_1",
            "/upload/v1beta/sessions/",
            "/v1beta/sessions/upl_1",
            "/upload/v1beta/sessions/upl_1/x",
            "/v1beta/interactions",
        ] {
            assert!(!is_upload_chunk(other), "{other}");
        }
    }

    #[test]
    fn the_browser_policy_joins_the_config_the_flags_and_the_replica_url() {
        let config = quota::ServerConfig {
            allow_hosts: vec!["proxy.example".into()],
            allow_origins: vec!["https://console.example".into()],
        };
        let policy = browser_policy(
            &config,
            &["flag.example:8443".into()],
            &["http://app.example:3000".into()],
            Some("http://replica-1.internal:8080"),
        )
        .unwrap();
        let hosts: Vec<String> = policy.hosts().iter().map(|h| h.to_string()).collect();
        assert_eq!(
            hosts,
            ["proxy.example", "flag.example:8443", "replica-1.internal"]
        );
        let origins: Vec<String> = policy.origins().iter().map(|o| o.to_string()).collect();
        assert_eq!(
            origins,
            ["https://console.example", "http://app.example:3000"]
        );
        let bad = quota::ServerConfig {
            allow_origins: vec!["*".into()],
            ..Default::default()
        };
        assert!(browser_policy(&bad, &[], &[], None).is_err());
    }
}
