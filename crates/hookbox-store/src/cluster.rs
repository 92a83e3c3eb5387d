//! The coordination of replicas sharing one database ([`Cluster`]): who they are, who runs
//! each environment (leases with fencing numbers), and the cluster-wide quotas. Only the
//! PostgreSQL backend implements it (`crate::postgres::PostgresCluster`); this module holds the
//! trait, its values and the lease names of environments, so the rest of hookbox never needs
//! the backend to name them.

use async_trait::async_trait;

use crate::error::Result;

/// The lease name of an environment.
pub fn environment_resource(environment_id: &str) -> String {
    format!("{ENVIRONMENT_LEASE}{environment_id}")
}

/// The environment a lease name (from [`environment_resource`]) is for.
pub fn environment_of(resource: &str) -> Option<&str> {
    resource.strip_prefix(ENVIRONMENT_LEASE)
}

const ENVIRONMENT_LEASE: &str = "env:";

/// One `hookbox serve` process among replicas sharing a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// Unique per process lifetime (a restart is a new replica).
    pub id: String,
    /// Where the other replicas reach it (`http://host:port`).
    pub url: String,
    /// How long its heartbeat and leases last without renewal.
    pub lease_ttl: std::time::Duration,
}

/// Who runs a resource (an environment) now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This replica holds the lease, with this fencing number (it grows with every new owner,
    /// and never goes back, not even after a release; writes made under an older one are
    /// refused).
    Held { fence: i64 },
    /// Another replica holds an unexpired lease.
    Elsewhere { replica: String, url: String },
}

/// What [`Cluster::take_tokens`] got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TokenGrant {
    /// This many tokens (at least one) are this replica's to spend.
    Granted(f64),
    /// The bucket is empty; a token is there again in this many seconds.
    Wait(f64),
}

/// Coordination of replicas through the database: heartbeats, leases with fencing numbers,
/// interactions of dead replicas, and change notifications for streams.
#[async_trait]
pub trait Cluster: Send + Sync + std::fmt::Debug {
    fn replica(&self) -> &Replica;
    /// Renews this replica's heartbeat and every lease it holds.
    async fn heartbeat(&self) -> Result<()>;
    /// Takes `resource` if it is free or its lease expired, keeps it if held here, else says
    /// who holds it.
    async fn claim(&self, resource: &str) -> Result<Claim>;
    /// The fencing number of `resource`'s lease while this replica holds it by its own
    /// reckoning, without asking the database: `None` once it learnt that another replica took
    /// it (a heartbeat that no longer renews it, a claim answered `Elsewhere`, a write refused
    /// as `Fenced`), or once neither the lease nor this replica's heartbeat was renewed within
    /// the lease TTL, counted from when the renewal was sent (a replica cut off from the
    /// database must assume its leases lapsed: another may take them from then on).
    fn fence(&self, resource: &str) -> Option<i64>;
    /// Marks `failed` (with `reason`) every running interaction whose replica stopped
    /// heartbeating; returns their ids.
    async fn reap(&self, reason: &str, now: &str) -> Result<Vec<String>>;
    /// Ids of interactions whose steps or status changed on any replica, as they change.
    fn changes(&self) -> tokio::sync::broadcast::Receiver<String>;
    /// The live replica (id, url) running interaction `id`, if another one is.
    async fn runner_of(&self, id: &str) -> Result<Option<(String, String)>>;
    /// Where replica `id` is reached, while it heartbeats.
    async fn replica_url(&self, id: &str) -> Result<Option<String>>;
    /// The live replica (id, url) holding an unexpired lease on `resource`, without taking it.
    async fn holder(&self, resource: &str) -> Result<Option<(String, String)>>;
    /// The other live replicas (id, url), most recently renewed first.
    async fn peers(&self) -> Result<Vec<(String, String)>>;
    /// Takes one of `limit` places of `quota` for `project` across the cluster (a running
    /// interaction, a running tool call): the id of the hold, or `None` when live replicas hold
    /// them all. Holds of replicas that stopped are freed by the next attempt.
    async fn hold(&self, quota: &str, project: &str, limit: u64) -> Result<Option<String>>;
    /// Gives a place back.
    async fn unhold(&self, hold: &str) -> Result<()>;
    /// Takes up to `want` whole tokens (at least one) from `project`'s request bucket, shared
    /// by every replica (`rate` per second, up to `burst`).
    async fn take_tokens(
        &self,
        project: &str,
        rate: f64,
        burst: f64,
        want: f64,
    ) -> Result<TokenGrant>;
    /// The resources this replica holds leases on, as far as it knows.
    fn held(&self) -> Vec<String>;
    /// Gives up this replica's lease on `resource` (a draining replica handing an idle
    /// environment over); nothing if another replica holds it. The lease's fencing number is
    /// kept, so the next owner's is higher than every earlier owner's.
    async fn release(&self, resource: &str) -> Result<()>;
    /// Leaves the cluster at a clean stop: releases every lease this replica holds (their
    /// fencing numbers kept) and removes its heartbeat, so the others take its environments at
    /// once instead of after the TTL.
    async fn leave(&self) -> Result<()>;
}
