//! Environments over time: expiry and checkpoints.
//!
//! - **Expiry.** An environment unused for longer than its project's `environment_ttl_seconds`
//!   (see [`crate::quota`]) expires: its files and snapshots are deleted and its record is kept
//!   with `status: "expired"`. [`run_expiry`] is the sweeper; among replicas one runs it at a
//!   time, the holder of the lease [`SWEEPER_RESOURCE`]. An environment with a running
//!   interaction is skipped. The expiry itself is one atomic change of the record
//!   (`hookbox_store::EnvironmentChange::Expire`, conditional on `last_accessed`), so a request
//!   that touched the environment meanwhile keeps it; a request after it gets
//!   `400 FAILED_PRECONDITION` saying when it expired ([`active_record`]), never an empty tree.
//!   The files go where the environment is held: on a replica that holds its lease, the
//!   expiry is forwarded there ([`expire_here`]).
//! - **Expired auth tokens.** The same sweep deletes the rows of ephemeral auth tokens
//!   expired for longer than [`crate::auth_tokens::PURGE_GRACE_SECS`]
//!   ([`crate::auth_tokens::purge_expired`]).
//! - **Checkpoints.** After every interaction the environment is checkpointed (in the
//!   background, or before the interaction completes with `--checkpoint-wait`); the provider
//!   does nothing without a snapshot store. Among replicas only an environment's lease holder
//!   writes its snapshots, each under the lease's fencing number ([`checkpoint_gate`]).
//!
//! This module decides when; the provider deletes and uploads.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use hookbox_protocol::api::EnvironmentStatus;
use hookbox_store::{
    Claim, Cluster, EnvironmentChange, EnvironmentRecord, InteractionFilter, Page,
};

use crate::AppState;
use crate::cluster::{self, Placement};
use crate::error::{ApiError, ApiResult};
use crate::holder::{self, Needs, Received};

/// The lease naming the replica that runs the expiry sweeper.
pub const SWEEPER_RESOURCE: &str = "sweeper:expiry";

/// Default of [`Lifecycle::expiry_interval`].
pub const DEFAULT_EXPIRY_INTERVAL: Duration = Duration::from_secs(60);

/// Longest an interaction's completion waits for its checkpoint with `--checkpoint-wait`;
/// past it the interaction completes with a `checkpoint_failed` error (the upload goes on in
/// the background).
pub const CHECKPOINT_WAIT_LIMIT: Duration = Duration::from_secs(300);

/// How environments live and die on this server.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    /// Hold each interaction's completion until its checkpoint is uploaded.
    pub checkpoint_wait: bool,
    /// How often the expiry sweeper looks.
    pub expiry_interval: Duration,
    /// The snapshot store's manager, for `/readyz`.
    pub snapshots: Option<Arc<hookbox_snapshot::Manager>>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            checkpoint_wait: false,
            expiry_interval: DEFAULT_EXPIRY_INTERVAL,
            snapshots: None,
        }
    }
}

/// The snapshot manager's gate among replicas: an environment is checkpointed only by the
/// holder of its lease, under the lease's fencing number; `None` (no checkpoint here) when
/// another replica holds it or the lease cannot be read.
pub fn checkpoint_gate(cluster: Arc<dyn Cluster>) -> hookbox_snapshot::Gate {
    Arc::new(move |id: String| {
        let cluster = cluster.clone();
        Box::pin(async move {
            let resource = hookbox_store::postgres::environment_resource(&id);
            match cluster.claim(&resource).await {
                Ok(Claim::Held { fence }) => u64::try_from(fence).ok(),
                _ => None,
            }
        })
    })
}

/// The 400 `FAILED_PRECONDITION` for an expired environment.
pub fn expired_error(record: &EnvironmentRecord) -> ApiError {
    let env = &record.environment;
    ApiError::failed_precondition(format!(
        "Environment `{}` expired at {} (last used {}); its files were deleted. Create a new environment.",
        env.id,
        env.updated.as_deref().unwrap_or("an unknown time"),
        env.last_accessed.as_deref().unwrap_or("at an unknown time"),
    ))
}

/// The record of environment `id` for a request that uses it: touched (its `last_accessed`
/// is now), or a 400 `FAILED_PRECONDITION` when it expired, or 404.
pub async fn active_record(
    state: &AppState,
    project: &str,
    id: &str,
) -> ApiResult<EnvironmentRecord> {
    let now = hookbox_store::time::now_rfc3339();
    let record = state
        .inner
        .store
        .change_environment(project, id, &EnvironmentChange::Touch { now })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Environment `{id}` not found.")))?;
    if record.environment.status == Some(EnvironmentStatus::Expired) {
        return Err(expired_error(&record));
    }
    Ok(record)
}

/// Checkpoints the environment an interaction just ran in. With `--checkpoint-wait`, waits
/// (retrying with backoff) until it is uploaded or [`CHECKPOINT_WAIT_LIMIT`] passes; returns the
/// error to record on the interaction if it never was.
pub async fn after_interaction(state: &AppState, environment_id: &str) -> Option<String> {
    let provider = &state.inner.environments;
    if !state.inner.lifecycle.checkpoint_wait {
        if let Err(e) = provider.checkpoint(environment_id, false).await {
            tracing::warn!(environment_id, error = %e, "cannot schedule a checkpoint");
        }
        return None;
    }
    let deadline = tokio::time::Instant::now() + CHECKPOINT_WAIT_LIMIT;
    let mut backoff = Duration::from_millis(500);
    loop {
        match provider.checkpoint(environment_id, true).await {
            Ok(()) => return None,
            // Not the store's trouble: this replica may not upload this copy at all (its lease
            // moved, or another replica wrote newer snapshots meanwhile).
            Err(e @ hookbox_agent::seams::ProviderError::Internal(_)) => {
                tracing::warn!(environment_id, error = %e, "checkpoint before completion refused");
                return Some(format!(
                    "the environment's checkpoint cannot be uploaded: {e}"
                ));
            }
            Err(e) if tokio::time::Instant::now() + backoff >= deadline => {
                // The background worker keeps trying.
                let _ = provider.checkpoint(environment_id, false).await;
                return Some(format!(
                    "the environment's checkpoint was not uploaded within {} s: {e}",
                    CHECKPOINT_WAIT_LIMIT.as_secs()
                ));
            }
            Err(e) => {
                tracing::warn!(environment_id, error = %e, retry_in_ms = backoff.as_millis() as u64, "checkpoint before completion failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// Runs the expiry sweeper every `interval` until the process ends.
pub async fn run_expiry(state: AppState) {
    let interval = state
        .inner
        .lifecycle
        .expiry_interval
        .max(Duration::from_millis(100));
    loop {
        match sweep(&state).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(expired = n, "environments expired"),
            Err(e) => tracing::warn!(error = %e.message, "expiry sweep failed"),
        }
        tokio::time::sleep(interval).await;
    }
}

/// One pass over every project's environments; returns how many expired.
pub async fn sweep(state: &AppState) -> ApiResult<usize> {
    if let Some(config) = &state.inner.cluster
        && !matches!(
            config.cluster.claim(SWEEPER_RESOURCE).await?,
            hookbox_store::Claim::Held { .. }
        )
    {
        return Ok(0);
    }
    let now = hookbox_store::time::now_rfc3339();
    let now_secs = unix_now();
    // Expired auth tokens go in the same pass (the sweeper's lease holder does it); a failure
    // there does not stop the environments' expiry.
    if let Err(e) =
        crate::auth_tokens::purge_expired(state, i64::try_from(now_secs).unwrap_or(i64::MAX)).await
    {
        tracing::warn!(error = %e.message, "cannot purge expired auth tokens; trying again next sweep");
    }
    let mut page = Page {
        size: Some(500),
        token: None,
    };
    let mut expired = 0;
    loop {
        let batch = state.inner.store.list_all_environments(&page).await?;
        for (project, record) in batch.items {
            if record.environment.status == Some(EnvironmentStatus::Expired) {
                continue;
            }
            let ttl = state
                .inner
                .quotas
                .quotas(&project)
                .await
                .environment_ttl_seconds;
            if ttl == 0 {
                continue;
            }
            let cutoff = hookbox_store::time::format_unix(
                i64::try_from(now_secs.saturating_sub(ttl)).unwrap_or(0),
            );
            let id = record.environment.id.clone();
            let last = record
                .environment
                .last_accessed
                .as_deref()
                .or(record.environment.created.as_deref())
                .unwrap_or_default();
            if last >= cutoff.as_str() || running_in(state, &project, &id).await? {
                continue;
            }
            match expire(state, &project, &id, &cutoff, &now).await {
                Ok(true) => expired += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(environment_id = %id, project = %project, error = %e.message, "cannot expire an environment; trying again next sweep");
                }
            }
        }
        match batch.next_page_token {
            Some(token) => page.token = Some(token),
            None => break,
        }
    }
    Ok(expired)
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Whether an interaction of `project` is queued or running in environment `id`.
async fn running_in(state: &AppState, project: &str, id: &str) -> ApiResult<bool> {
    for status in ["in_progress", "queued"] {
        let filter = InteractionFilter {
            status: Some(status.to_owned()),
            environment_id: Some(id.to_owned()),
            ..InteractionFilter::default()
        };
        let page = Page {
            size: Some(1),
            token: None,
        };
        if !state
            .inner
            .store
            .list_interactions(project, &filter, &page)
            .await?
            .items
            .is_empty()
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Expires `id` where it is held: here, or forwarded to the replica holding its lease.
async fn expire(
    state: &AppState,
    project: &str,
    id: &str,
    cutoff: &str,
    now: &str,
) -> ApiResult<bool> {
    match holder::locate(state, Needs::Environment(id), false).await? {
        Placement::Here => expire_local(state, project, id, cutoff, now).await,
        Placement::There { replica, url } => {
            let uri: axum::http::Uri =
                format!("/v1beta/environments/{id}/expire?project={project}&cutoff={cutoff}")
                    .parse()
                    .map_err(|e| ApiError::internal(&e))?;
            let request = Received {
                method: axum::http::Method::POST,
                uri: &uri,
                headers: &HeaderMap::new(),
                body: bytes::Bytes::new(),
                forwarded: false,
            };
            let response = holder::send(state, (&replica, &url), request).await?;
            Ok(response.status().is_success())
        }
    }
}

/// Marks `id` expired if it still qualifies, then deletes its files and snapshots. `Ok(false)`:
/// it was used meanwhile (or is already expired).
async fn expire_local(
    state: &AppState,
    project: &str,
    id: &str,
    cutoff: &str,
    now: &str,
) -> ApiResult<bool> {
    let change = EnvironmentChange::Expire {
        cutoff: cutoff.to_owned(),
        now: now.to_owned(),
    };
    let Some(record) = state
        .inner
        .store
        .change_environment(project, id, &change)
        .await?
    else {
        return Ok(false);
    };
    if record.environment.status != Some(EnvironmentStatus::Expired)
        || record.environment.updated.as_deref() != Some(now)
    {
        return Ok(false);
    }
    match state.inner.environments.delete(id).await {
        Ok(()) | Err(hookbox_agent::seams::ProviderError::EnvironmentNotFound(_)) => {}
        Err(e) => {
            // The record says expired, so nothing will use the files; the next sweep cannot
            // see it again, so say so loudly.
            tracing::error!(environment_id = %id, project, error = %e, "an expired environment's files could not be deleted");
            return Err(e.into());
        }
    }
    tracing::info!(event = "environment.expired", environment_id = %id, project, last_accessed = record.environment.last_accessed.as_deref().unwrap_or(""), "environment expired");
    Ok(true)
}

/// Query of the replica-internal expiry request.
#[derive(Debug, serde::Deserialize)]
pub struct ExpireQuery {
    project: String,
    cutoff: String,
}

/// `POST /environments/{id}/expire` between replicas only (the cluster secret proves it): the
/// sweeper asks the replica holding an environment to expire it there.
pub async fn expire_here(
    State(state): State<AppState>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ExpireQuery>,
    headers: HeaderMap,
) -> Response {
    match cluster::forwarded(state.inner.cluster.as_ref(), &headers) {
        Ok(true) => {}
        // To a client this route does not exist.
        _ => {
            return ApiError::not_found(format!("Environment `{id}` has no such method."))
                .into_response();
        }
    }
    let now = hookbox_store::time::now_rfc3339();
    match expire_local(&state, &q.project, &id, &q.cutoff, &now).await {
        Ok(done) => axum::Json(serde_json::json!({ "expired": done })).into_response(),
        Err(e) => e.into_response(),
    }
}
