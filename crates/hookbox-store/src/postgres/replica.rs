//! What one replica's store keeps about the cluster ([`ClusterState`]): the leases it holds as
//! far as it knows, the environment each of its interactions is fenced by, and the feed of
//! interaction changes (LISTEN/NOTIFY on [`CHANGES_CHANNEL`]). Outside a cluster (`None`) every
//! function here does nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use deadpool_postgres::GenericClient;
use hookbox_protocol::api::Interaction;
use tokio::sync::broadcast;

use crate::cluster::{Replica, environment_of, environment_resource};
use crate::error::{Error, Result};

/// The notification channel interaction changes go out on.
pub(super) const CHANGES_CHANNEL: &str = "hookbox_interactions";

/// What a replica's store keeps about the cluster.
pub(super) struct ClusterState {
    pub replica: Replica,
    /// Where to LISTEN from (a connection of its own, outside the pool).
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// Leases held here, by resource.
    pub held: Mutex<HashMap<String, HeldLease>>,
    /// When the last heartbeat that went through was sent: the replica row lives until then
    /// plus the TTL at least, and no longer once the database stops answering.
    pub alive_since: Mutex<Option<Instant>>,
    /// The environment of each interaction created here (the lease its writes are fenced by).
    environments: Mutex<HashMap<String, String>>,
    pub changes: broadcast::Sender<String>,
    /// Projects whose request bucket row is known to exist.
    pub buckets: Mutex<HashSet<String>>,
}

/// A lease this replica holds, as far as it knows.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeldLease {
    pub fence: i64,
    /// When the statement that last took or renewed it was sent (the database set its expiry
    /// later than that, never earlier).
    pub renewed: Instant,
}

/// Locks `m`, a poisoned lock included: every critical section here leaves its map whole.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pause before the LISTEN connection is made again after it dropped.
const RECONNECT_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl ClusterState {
    pub(super) fn new(
        replica: Replica,
        config: tokio_postgres::Config,
        tls: tokio_postgres_rustls::MakeRustlsConnect,
    ) -> Self {
        ClusterState {
            replica,
            config,
            tls,
            held: Mutex::default(),
            alive_since: Mutex::default(),
            environments: Mutex::default(),
            changes: broadcast::channel(1024).0,
            buckets: Mutex::default(),
        }
    }

    /// The lease resource and fencing number `interaction`'s writes must match, if any.
    fn fence_of(&self, interaction: &str) -> Option<(String, i64)> {
        let env = lock(&self.environments).get(interaction)?.clone();
        let resource = environment_resource(&env);
        let fence = lock(&self.held).get(&resource)?.fence;
        Some((resource, fence))
    }

    /// A write under `fence` was refused: the lease moved on, so it is no longer held here.
    fn forget(&self, resource: &str, fence: i64) {
        let mut held = lock(&self.held);
        if held.get(resource).is_some_and(|h| h.fence == fence) {
            held.remove(resource);
        }
    }
}

/// Tells every replica that `interaction` changed.
pub(super) async fn notify(
    cluster: Option<&ClusterState>,
    c: &impl GenericClient,
    interaction: &str,
) -> Result<()> {
    if cluster.is_some() {
        c.execute(
            "SELECT pg_notify($1, $2)",
            &[&CHANGES_CHANNEL, &interaction],
        )
        .await?;
    }
    Ok(())
}

/// Refuses a write of `interaction` if its environment's lease has moved to a newer owner.
pub(super) async fn check_fence(
    cluster: Option<&ClusterState>,
    c: &impl GenericClient,
    interaction: &str,
) -> Result<()> {
    let Some(cluster) = cluster else {
        return Ok(());
    };
    let Some((resource, fence)) = cluster.fence_of(interaction) else {
        return Ok(());
    };
    let current = c
        .query_opt(
            "SELECT fence FROM leases WHERE resource = $1 FOR SHARE",
            &[&resource],
        )
        .await?
        .map(|r| r.get::<_, i64>(0));
    if current == Some(fence) {
        return Ok(());
    }
    cluster.forget(&resource, fence);
    Err(Error::Fenced {
        interaction: interaction.to_owned(),
        environment: environment_of(&resource).unwrap_or(&resource).to_owned(),
        fence,
    })
}

/// Remembers the environment of an interaction created here (its writes are fenced by that
/// environment's lease).
pub(super) fn remember_environment(cluster: Option<&ClusterState>, body: &Interaction) {
    if let (Some(cluster), Some(env)) = (cluster, &body.environment_id) {
        lock(&cluster.environments).insert(body.id.clone(), env.clone());
    }
}

/// Forgets the environment of an interaction that stopped running here.
pub(super) fn forget_environment(cluster: Option<&ClusterState>, interaction: &str) {
    if let Some(cluster) = cluster {
        lock(&cluster.environments).remove(interaction);
    }
}

/// LISTENs for interaction changes on a connection of its own, feeding the cluster's change
/// channel; reconnects (after a second) when the connection drops. The returned receiver fires
/// once the first LISTEN is in place.
pub(super) fn start_listening(state: Arc<ClusterState>) -> tokio::sync::oneshot::Receiver<()> {
    let (first, listening) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut first = Some(first);
        loop {
            if let Err(e) = listen(&state, &mut first).await {
                tracing::warn!(error = %e, "lost the PostgreSQL notification connection; reconnecting");
            }
            tokio::time::sleep(RECONNECT_AFTER).await;
        }
    });
    listening
}

/// Feeds `state`'s change channel from LISTEN until the connection fails; `first` is told once
/// the LISTEN is in place.
async fn listen(
    state: &ClusterState,
    first: &mut Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<()> {
    use futures::StreamExt as _;
    let (client, mut connection) = state.config.connect(state.tls.clone()).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let pump = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    let _ = tx.send(Ok(n.payload().to_owned()));
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))
        .await?;
    if let Some(first) = first.take() {
        let _ = first.send(());
    }
    let result = loop {
        match rx.recv().await {
            Some(Ok(id)) => {
                let _ = state.changes.send(id);
            }
            Some(Err(e)) => break Err(e.into()),
            None => break Err(Error::Pool("notification connection closed".into())),
        }
    };
    pump.abort();
    result
}
