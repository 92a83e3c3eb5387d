//! A clean stop: draining instead of dropping work. After [`AppState::begin_drain`] the server
//! says it is not ready (`/readyz` 503), refuses new interactions with `503 UNAVAILABLE` and
//! `Retry-After` (a replica forwards them to a live peer instead), and lets the running ones
//! finish ([`AppState::wait_idle`]); whatever still runs when the grace period ends is stopped
//! and marked failed ([`AppState::stop_running`]). Everything else keeps being served, so
//! clients can follow and read what finishes.
//!
//! This module decides what a draining server answers (`refused`, and `placement`: where a
//! request about an environment goes instead, which `holder` applies); closing
//! sandboxes and unmounting disks is `sandbox::SandboxBackend::shutdown`'s, and the order of the
//! steps is the binary's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::AppState;
use crate::cluster::{ClusterConfig, Placement};
use crate::error::{ApiError, ApiResult, RETRY_AFTER_SECS};

/// The failure recorded on interactions still running when the grace period ends (the same as
/// after a crash, so clients handle both alike).
pub const STOPPED_REASON: &str = "hookbox stopped while this interaction was running";

/// The drain flags of one server.
#[derive(Debug, Default)]
pub(crate) struct DrainState {
    /// Set at the first stop signal: new interactions are turned away.
    draining: AtomicBool,
    /// Set when the grace period ended: interactions that still run end `failed`.
    stopping: AtomicBool,
    /// Notified whenever an interaction stops running here.
    idle: tokio::sync::Notify,
}

impl DrainState {
    pub(crate) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    pub(crate) fn ended_one(&self) {
        self.idle.notify_waiters();
    }
}

/// The answer to a new interaction on a draining server with no peer to take it.
pub(crate) fn refused() -> ApiError {
    ApiError::unavailable(
        "hookbox is shutting down and takes no new interactions here; retry (another replica, or this one once restarted, will take it).",
        RETRY_AFTER_SECS,
    )
}

/// Among replicas, as a drain begins: every environment this replica holds but runs nothing in
/// is handed over (closed here, its newest state uploaded, its lease released), so the other
/// replicas serve it at once instead of after the drain. One in use keeps its lease until the
/// end.
async fn hand_over_idle(state: AppState) {
    let Some(config) = state.inner.cluster.clone() else {
        return;
    };
    let mut handed = 0usize;
    for resource in config.cluster.held() {
        let Some(id) = hookbox_store::postgres::environment_of(&resource) else {
            continue;
        };
        if state.runs_in(id) {
            continue;
        }
        match state.inner.environments.hand_over(id).await {
            Ok(true) => match config.cluster.release(&resource).await {
                Ok(()) => handed += 1,
                Err(e) => {
                    tracing::warn!(environment_id = id, error = %e, "cannot release an idle environment's lease; it is released at the end of the drain")
                }
            },
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(environment_id = id, error = %e, "cannot hand an idle environment over; it is kept until the end of the drain")
            }
        }
    }
    if handed > 0 {
        tracing::info!(
            event = "cluster.handed_over",
            environments = handed,
            "draining: idle environments handed over"
        );
    }
}

/// Where a request about environment `id` goes on a draining replica: here while this replica
/// still holds it, to its holder, or (free, or no environment yet) to a live peer, which takes
/// it; never claimed here.
pub(crate) async fn placement(config: &ClusterConfig, id: Option<&str>) -> ApiResult<Placement> {
    let me = config.cluster.replica().id.clone();
    let holder = match id {
        Some(id) => {
            config
                .cluster
                .holder(&hookbox_store::postgres::environment_resource(id))
                .await?
        }
        None => None,
    };
    Ok(match holder {
        Some((replica, _)) if replica == me => Placement::Here,
        Some((replica, url)) => Placement::There { replica, url },
        None => match config.cluster.peers().await?.into_iter().next() {
            Some((replica, url)) => Placement::There { replica, url },
            // The last replica standing serves it.
            None => Placement::Here,
        },
    })
}

impl AppState {
    /// Starts draining: `/readyz` turns 503 and new interactions are turned away (or forwarded
    /// to a peer). Idempotent.
    pub fn begin_drain(&self) {
        if !self.inner.drain.draining.swap(true, Ordering::SeqCst) {
            tracing::info!(
                event = "server.draining",
                running = self.running_count(),
                "draining: no new interactions; waiting for the running ones"
            );
            if self.inner.cluster.is_some() {
                tokio::spawn(hand_over_idle(self.clone()));
            }
        }
    }

    /// Whether an interaction runs here in environment `id`.
    fn runs_in(&self, id: &str) -> bool {
        self.inner.running.runs_in(id)
    }

    /// Whether the server is draining.
    pub fn is_draining(&self) -> bool {
        self.inner.drain.draining.load(Ordering::SeqCst)
    }

    /// Waits until no interaction runs here, for at most `limit`; returns how many still run.
    pub async fn wait_idle(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let ended = self.inner.drain.idle.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let running = self.running_count();
            if running == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return self.running_count();
            }
        }
    }

    /// Stops every interaction still running here: each ends `failed` with [`STOPPED_REASON`]
    /// (its sandboxed processes are killed). Waits for them for at most `limit`; returns how
    /// many had to be stopped.
    pub async fn stop_running(&self, limit: Duration) -> usize {
        self.inner.drain.stopping.store(true, Ordering::SeqCst);
        let stopped = self.inner.running.cancel_all();
        if stopped > 0 {
            tracing::warn!(
                event = "server.stopping",
                stopped,
                "grace period over: stopping the interactions that still run"
            );
            let left = self.wait_idle(limit).await;
            if left > 0 {
                tracing::warn!(left, "interactions did not stop in time");
            }
        }
        stopped
    }

    /// At the very end of a clean stop, among replicas: releases this replica's leases and
    /// heartbeat, so the others take its environments at once.
    pub async fn leave_cluster(&self) {
        if let Some(config) = &self.inner.cluster {
            match config.cluster.leave().await {
                Ok(()) => tracing::info!(event = "cluster.left", "left the cluster"),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot release this replica's leases; they expire")
                }
            }
        }
    }
}
