//! Durable storage for hookbox: interactions with their steps, environment metadata, credentials
//! (secrets encrypted at rest), agents, calls paused for a reviewer ([`approvals`]: settled
//! once, by a conditional update), and ephemeral auth tokens ([`AuthTokenRecord`]: kept as
//! their SHA-256 only, at most [`MAX_LIVE_AUTH_TOKENS`] live per interaction, purged by
//! [`Store::purge_expired_auth_tokens`] once expired).
//!
//! The [`Store`] trait is the only thing the rest of hookbox sees. [`sqlite::SqliteStore`] is the
//! default backend (one file in the data dir, WAL, one thread owning the connection that runs
//! the writes queued together in one transaction, and reads without taking the write lock); [`postgres::PostgresStore`] lets several
//! hookbox servers share one database, over TLS as libpq's `sslmode` says ([`pg_tls`]), and
//! coordinates them through the [`Cluster`] trait (leases, heartbeats, quota places, request
//! buckets). Both backends migrate their own schema, seal credentials the same way and pass the
//! same test suite. This crate owns persistence only: it does not run agents, touch sandboxes or
//! speak HTTP, and it never logs a secret value or a database URL.
//!
//! # Layout
//!
//! What the backends share is written once, by resource, at the top: the records and the rules
//! that change them (`interactions`, `environments`, `credentials`, `projects`, `auth_tokens`, [`approvals`],
//! [`webhooks`], [`triggers`]), pages (`page`), how a row of either database is read (`row`),
//! errors (`error`), the [`Store`] trait (`store`) and the [`Cluster`] trait (`cluster`). Each
//! backend is a folder with a file per resource holding that resource's SQL, its migrations in a
//! file of their own, and its `Store` implementation (`store.rs`) naming which function serves
//! each method; PostgreSQL's `Cluster` implementation lives beside it (`postgres/cluster.rs`,
//! `postgres/quota.rs`, and `postgres/replica.rs` for what a replica's store remembers). Nothing
//! here imports from the crate root, and the shared modules never import a backend. [`data_dir`]
//! keeps the data directory and SQLite's files owner-only (0700 and 0600).

pub mod approvals;
mod auth_tokens;
mod cluster;
mod credentials;
pub mod crypto;
pub mod data_dir;
mod documents;
pub mod env_vars;
mod environments;
mod error;
mod interactions;
pub mod keys;
mod page;
pub mod pg_tls;
pub mod postgres;
mod projects;
mod row;
pub mod sqlite;
mod store;
pub mod time;
pub mod triggers;
pub mod webhooks;

pub use approvals::{ApprovalFilter, ApprovalRecord, ApprovalState, Settle, Settled, Settlement};
pub use auth_tokens::{AuthTokenRecord, MAX_LIVE_AUTH_TOKENS};
pub use cluster::{Claim, Cluster, Replica, TokenGrant};
pub use credentials::apply_credential_update;
pub use crypto::SecretKey;
pub use environments::{EnvironmentChange, EnvironmentRecord, apply_environment_change};
pub use error::{Error, Result};
pub use interactions::{InteractionFilter, StatusUpdate};
pub use page::{Page, Paged};
pub use postgres::{PostgresCluster, PostgresOptions, PostgresStore};
pub use projects::{
    ApiKeyRecord, DEFAULT_PROJECT, ProjectRecord, ProjectUsage, valid_project_name,
};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use store::Store;
pub use triggers::{RunStart, TriggerRecord};
pub use webhooks::{
    AttemptOutcome, ClaimedDelivery, DeliveryRecord, DeliveryStatus, SigningKey, WebhookRecord,
};

/// Opens the store hookbox serves from: `database` a `postgres://` or `postgresql://` URL for
/// PostgreSQL (the credential key from [`SecretKey::load_or_create`] in `data_dir`, which
/// replicas share), else SQLite's file in `data_dir`. `data_dir` is created or kept owner-only
/// ([`data_dir::prepare`]).
pub async fn open_store(
    data_dir: &std::path::Path,
    database: Option<&str>,
    sqlite: &SqliteOptions,
) -> Result<std::sync::Arc<dyn Store>> {
    match database.filter(|d| !d.is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            data_dir::prepare(data_dir)?;
            let key = SecretKey::load_or_create(data_dir)?;
            Ok(std::sync::Arc::new(
                PostgresStore::connect(url, key, &PostgresOptions::default()).await?,
            ))
        }
        Some(_) => Err(Error::Config(
            "the database must be a postgres:// or postgresql:// URL (or none, for SQLite)".into(),
        )),
        None => Ok(std::sync::Arc::new(SqliteStore::open_in(data_dir, sqlite)?)),
    }
}
