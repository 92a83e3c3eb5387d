//! The PostgreSQL backend of [`Store`](crate::Store), for several hookbox servers sharing one
//! database.
//!
//! Same schema and semantics as the SQLite backend: every trait method is one statement or one
//! transaction that has committed when it returns; credentials are sealed with the same key and
//! associated data; pages are ordered by an identity column. Migrations are versioned in
//! `hookbox_schema` and applied under a transaction-scoped advisory lock, so replicas starting
//! together apply each exactly once. Connections come from a `deadpool-postgres` pool over
//! `tokio-postgres`, with TLS as the URL's `sslmode` says ([`crate::pg_tls`]).
//!
//! Layout: this file connects (the pool, and for a replica its cluster state);
//! `migrations.rs` holds the schema; `store.rs` maps each [`Store`](crate::Store) method to the
//! function of the resource file that serves it (`interactions.rs`, `approvals.rs`,
//! `environments.rs`, `credentials.rs`, `webhooks.rs`, `deliveries.rs`, `triggers.rs`,
//! `projects.rs`; `documents.rs` for the tables of one JSON document per row, which is all
//! agents are). A replica's coordination is [`PostgresCluster`] (`cluster.rs`: heartbeats,
//! leases, reaping; `quota.rs`: quota places and request buckets) and its state, `replica.rs`
//! (the leases it holds, the fencing of its writes, LISTEN/NOTIFY of interaction changes). What both
//! backends decide alike (row mappings, pages, sealing, the rules of each resource) comes from
//! the crate's shared modules.
//!
//! Must not: log or return the connection URL (it may hold a password).

mod approvals;
mod auth_tokens;
mod cluster;
mod credentials;
mod deliveries;
mod documents;
mod environments;
mod interactions;
mod migrations;
mod projects;
mod quota;
mod replica;
mod store;
mod triggers;
mod webhooks;

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};

use crate::cluster::{Cluster, Replica};
use crate::crypto::SecretKey;
use crate::error::{Error, Result};
use replica::ClusterState;

pub use crate::cluster::{environment_of, environment_resource};
pub use cluster::PostgresCluster;

/// Options of [`PostgresStore::connect`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Connections kept at most.
    pub max_connections: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
        }
    }
}

/// PostgreSQL-backed [`Store`](crate::Store).
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    key: Arc<SecretKey>,
    /// Set when this store is one replica of several ([`PostgresStore::connect_replica`]).
    cluster: Option<Arc<ClusterState>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// Longest a request waits for a pooled connection, a new connection or a health check.
const POOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest [`PostgresStore::connect_replica`] waits for its notification connection.
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl PostgresStore {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`), checks the connection and
    /// runs pending migrations.
    pub async fn connect(url: &str, key: SecretKey, options: &PostgresOptions) -> Result<Self> {
        Self::connect_as(url, key, options, None).await
    }

    /// [`Self::connect`] as `replica`, one of several servers sharing the database: it records
    /// which interactions it runs, fences their writes by the leases it holds, and notifies the
    /// other replicas of every change. [`Self::cluster`] is its coordination.
    pub async fn connect_replica(
        url: &str,
        key: SecretKey,
        options: &PostgresOptions,
        replica: Replica,
    ) -> Result<Self> {
        Self::connect_as(url, key, options, Some(replica)).await
    }

    async fn connect_as(
        url: &str,
        key: SecretKey,
        options: &PostgresOptions,
        replica: Option<Replica>,
    ) -> Result<Self> {
        let crate::pg_tls::Connection { config, mode, tls } = crate::pg_tls::parse(url)?;
        if matches!(
            mode,
            crate::pg_tls::SslMode::Prefer | crate::pg_tls::SslMode::Require
        ) {
            tracing::debug!(sslmode = ?mode, "PostgreSQL TLS without a checked server certificate (add sslmode=verify-full&sslrootcert=FILE to check it)");
        }
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
        let cluster = replica
            .map(|replica| Arc::new(ClusterState::new(replica, config.clone(), tls.clone())));
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        // Bounded waits: while the database does not answer, requests fail within seconds
        // (503 with Retry-After) instead of hanging.
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(Error::pool)?;
        let store = Self {
            pool,
            key: Arc::new(key),
            cluster,
        };
        migrations::migrate(&mut store.client().await?).await?;
        if let Some(state) = &store.cluster {
            // A replica is connected once it listens: a change made by another replica right
            // after this returns must not be missed.
            let listening = replica::start_listening(Arc::clone(state));
            if tokio::time::timeout(LISTEN_WAIT, listening).await.is_err() {
                tracing::warn!(
                    "the PostgreSQL notification connection is not up yet; streams of other replicas' interactions fall back to re-reading every 2 s until it is"
                );
            }
        }
        Ok(store)
    }

    /// The coordination of this replica (`None` unless connected with
    /// [`Self::connect_replica`]).
    pub fn cluster(&self) -> Option<Arc<dyn Cluster>> {
        self.cluster.as_ref().map(|state| {
            Arc::new(PostgresCluster::new(self.pool.clone(), state.clone())) as Arc<dyn Cluster>
        })
    }

    /// The schema version recorded in the database.
    pub async fn schema_version(&self) -> Result<i64> {
        migrations::version(&self.client().await?).await
    }

    /// A pooled connection, within [`POOL_TIMEOUT`].
    async fn client(&self) -> Result<Object> {
        self.pool.get().await.map_err(Error::pool)
    }
}
