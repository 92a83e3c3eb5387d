//! A replica's coordination through PostgreSQL ([`PostgresCluster`], the [`Cluster`] trait):
//! its heartbeat, leases with fencing numbers (taken, renewed, released, and counted as its own
//! only while renewed within the TTL), reaping the interactions of replicas that stopped, and
//! leaving at a clean stop. Quota places and request buckets are in `quota.rs`; the state it
//! shares with its store (held leases, the change feed) in `replica.rs`.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use tokio::sync::broadcast;

use super::interactions::{self, ACTIVE};
use super::quota;
use super::replica::{self, ClusterState, HeldLease, lock};
use crate::cluster::{Claim, Cluster, Replica, TokenGrant};
use crate::error::{Error, Result};

/// A released lease: free for anyone (no owner, expired) with its fencing number kept, so the
/// next owner's is higher than every earlier owner's (a deleted row would start again at 1, and
/// a fence could no longer tell an old owner from a new one).
const FREED: &str = "owner = '', owner_url = '', expires_at = '-infinity'";

/// The coordination of one replica ([`PostgresStore::cluster`](super::PostgresStore::cluster)).
pub struct PostgresCluster {
    pool: Pool,
    state: Arc<ClusterState>,
}

impl std::fmt::Debug for PostgresCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCluster")
            .field("replica", &self.state.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresCluster {
    pub(super) fn new(pool: Pool, state: Arc<ClusterState>) -> Self {
        PostgresCluster { pool, state }
    }

    fn ttl_ms(&self) -> f64 {
        self.state.replica.lease_ttl.as_secs_f64() * 1000.0
    }

    async fn client(&self) -> Result<Object> {
        self.pool.get().await.map_err(Error::pool)
    }
}

#[async_trait]
impl Cluster for PostgresCluster {
    fn replica(&self) -> &Replica {
        &self.state.replica
    }

    async fn heartbeat(&self) -> Result<()> {
        let client = self.client().await?;
        let replica = &self.state.replica;
        let ttl = self.ttl_ms();
        let sent = Instant::now();
        // A lease is free once it expires or its owner's heartbeat does (see `claim`).
        let renewed: Vec<String> = client
            .query(
                "UPDATE leases SET expires_at = now() + $2 * interval '1 millisecond' WHERE owner = $1 RETURNING resource",
                &[&replica.id, &ttl],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        // A lease someone else took meanwhile is forgotten.
        lock(&self.state.held).retain(|resource, held| {
            let kept = renewed.contains(resource);
            if kept {
                held.renewed = held.renewed.max(sent);
            }
            kept
        });
        client
            .execute(
                "INSERT INTO replicas (id, url, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url, expires_at = excluded.expires_at",
                &[&replica.id, &replica.url, &ttl],
            )
            .await?;
        let mut alive = lock(&self.state.alive_since);
        *alive = Some(alive.map_or(sent, |a| a.max(sent)));
        Ok(())
    }

    async fn claim(&self, resource: &str) -> Result<Claim> {
        let client = self.client().await?;
        let replica = &self.state.replica;
        let sent = Instant::now();
        let taken = client
            .query_opt(
                "INSERT INTO leases (resource, owner, owner_url, fence, expires_at)
                 VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond')
                 ON CONFLICT (resource) DO UPDATE SET owner = excluded.owner, owner_url = excluded.owner_url,
                     fence = CASE WHEN leases.owner = excluded.owner THEN leases.fence ELSE leases.fence + 1 END,
                     expires_at = excluded.expires_at
                 WHERE leases.owner = excluded.owner OR leases.expires_at < now()
                    OR leases.owner NOT IN (SELECT id FROM replicas WHERE expires_at > now())
                 RETURNING fence",
                &[&resource, &replica.id, &replica.url, &self.ttl_ms()],
            )
            .await?;
        if let Some(row) = taken {
            let fence: i64 = row.get(0);
            lock(&self.state.held).insert(
                resource.to_owned(),
                HeldLease {
                    fence,
                    renewed: sent,
                },
            );
            return Ok(Claim::Held { fence });
        }
        lock(&self.state.held).remove(resource);
        match client
            .query_opt(
                "SELECT owner, owner_url FROM leases WHERE resource = $1",
                &[&resource],
            )
            .await?
        {
            Some(row) => Ok(Claim::Elsewhere {
                replica: row.get(0),
                url: row.get(1),
            }),
            // Released between the two statements: try once more.
            None => Box::pin(self.claim(resource)).await,
        }
    }

    async fn reap(&self, reason: &str, now: &str) -> Result<Vec<String>> {
        let errors = crate::interactions::failure("replica_stopped", reason)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let reaped: Vec<(String, String, Option<String>)> = tx
            .query(
                &format!(
                    "UPDATE interactions SET status = 'failed', errors_json = $1, updated = $2
                     WHERE {ACTIVE} AND replica IS NOT NULL AND replica <> $3
                       AND replica NOT IN (SELECT id FROM replicas WHERE expires_at > now())
                     RETURNING id, project, environment_id"
                ),
                &[&errors, &now, &self.state.replica.id],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        for (id, project, environment) in &reaped {
            interactions::failed(&tx, (id, project, environment.as_deref()), now).await?;
        }
        tx.commit().await?;
        let ids: Vec<String> = reaped.into_iter().map(|(id, _, _)| id).collect();
        for id in &ids {
            replica::notify(Some(&self.state), &client, id).await?;
        }
        // Quota places of stopped replicas (they are not counted, only kept until here).
        client
            .execute(
                "DELETE FROM quota_holds WHERE replica NOT IN (SELECT id FROM replicas WHERE expires_at > now())",
                &[],
            )
            .await?;
        Ok(ids)
    }

    fn changes(&self) -> broadcast::Receiver<String> {
        self.state.changes.subscribe()
    }

    async fn replica_url(&self, id: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        Ok(client
            .query_opt(
                "SELECT url FROM replicas WHERE id = $1 AND expires_at > now()",
                &[&id],
            )
            .await?
            .map(|row| row.get(0)))
    }

    async fn holder(&self, resource: &str) -> Result<Option<(String, String)>> {
        let client = self.client().await?;
        Ok(client
            .query_opt(
                "SELECT l.owner, l.owner_url FROM leases l JOIN replicas r ON r.id = l.owner
                 WHERE l.resource = $1 AND l.expires_at > now() AND r.expires_at > now()",
                &[&resource],
            )
            .await?
            .map(|row| (row.get(0), row.get(1))))
    }

    async fn peers(&self) -> Result<Vec<(String, String)>> {
        let client = self.client().await?;
        Ok(client
            .query(
                "SELECT id, url FROM replicas WHERE expires_at > now() AND id <> $1 ORDER BY expires_at DESC",
                &[&self.state.replica.id],
            )
            .await?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect())
    }

    async fn hold(&self, quota: &str, project: &str, limit: u64) -> Result<Option<String>> {
        let client = self.client().await?;
        quota::hold(&client, &self.state.replica.id, quota, project, limit).await
    }

    async fn unhold(&self, hold: &str) -> Result<()> {
        quota::unhold(&self.client().await?, hold).await
    }

    async fn take_tokens(
        &self,
        project: &str,
        rate: f64,
        burst: f64,
        want: f64,
    ) -> Result<TokenGrant> {
        let client = self.client().await?;
        quota::take_tokens(&client, &self.state, project, rate, burst, want).await
    }

    fn fence(&self, resource: &str) -> Option<i64> {
        let held = *lock(&self.state.held).get(resource)?;
        let alive = (*lock(&self.state.alive_since))?;
        let ttl = self.state.replica.lease_ttl;
        let now = Instant::now();
        // Another replica may take the lease once it expires, or once this replica's heartbeat
        // row does, whichever comes first.
        (now < held.renewed + ttl && now < alive + ttl).then_some(held.fence)
    }

    fn held(&self) -> Vec<String> {
        lock(&self.state.held).keys().cloned().collect()
    }

    async fn release(&self, resource: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                &format!("UPDATE leases SET {FREED} WHERE resource = $1 AND owner = $2"),
                &[&resource, &self.state.replica.id],
            )
            .await?;
        lock(&self.state.held).remove(resource);
        Ok(())
    }

    async fn leave(&self) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let id = &self.state.replica.id;
        tx.execute(
            &format!("UPDATE leases SET {FREED} WHERE owner = $1"),
            &[id],
        )
        .await?;
        tx.execute("DELETE FROM quota_holds WHERE replica = $1", &[id])
            .await?;
        tx.execute("DELETE FROM replicas WHERE id = $1", &[id])
            .await?;
        tx.commit().await?;
        lock(&self.state.held).clear();
        Ok(())
    }

    async fn runner_of(&self, id: &str) -> Result<Option<(String, String)>> {
        let client = self.client().await?;
        Ok(client
            .query_opt(
                &format!(
                    "SELECT r.id, r.url FROM interactions i JOIN replicas r ON r.id = i.replica
                     WHERE i.id = $1 AND i.{ACTIVE} AND r.expires_at > now() AND r.id <> $2"
                ),
                &[&id, &self.state.replica.id],
            )
            .await?
            .map(|row| (row.get(0), row.get(1))))
    }
}
