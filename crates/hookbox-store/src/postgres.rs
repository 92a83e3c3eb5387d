//! The PostgreSQL backend of [`Store`], for several hookbox servers sharing one database.
//!
//! Same schema and semantics as the SQLite backend: every trait method is one statement or one
//! transaction that has committed when it returns; credentials are sealed with the same key and
//! associated data; pages are ordered by an identity column. Migrations are versioned in
//! `hookbox_schema` and applied under a transaction-scoped advisory lock, so replicas starting
//! together apply each exactly once. Connections come from a `deadpool-postgres` pool over
//! `tokio-postgres` (no TLS: reach the database over loopback or a private network).
//!
//! Must not: log or return the connection URL (it may hold a password).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialStatus, CredentialType, CredentialUpdate,
    Interaction, InteractionError, InteractionStatus, Step, Usage,
};
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tokio_postgres::Row;

use crate::approvals::{self, ApprovalFilter, ApprovalRecord, ApprovalState, Settle, Settled};
use crate::crypto::SecretKey;
use crate::triggers::{self, RunStart, TriggerRecord};
use crate::webhooks::{
    self, AttemptOutcome, ClaimedDelivery, DeliveryRecord, DeliveryStatus, SigningKey,
    WebhookRecord,
};
use crate::{
    ApiKeyRecord, Claim, Cluster, EnvironmentChange, EnvironmentRecord, Error, InteractionFilter,
    Page, Paged, ProjectRecord, ProjectUsage, Replica, Result, StatusUpdate, Store,
    apply_credential_update, credential_aad,
};

/// Schema migrations, applied in order and recorded in `hookbox_schema`. Numbered like the
/// SQLite backend's: this backend starts at the schema SQLite reached with version 2.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        2,
        r#"
CREATE TABLE interactions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    status TEXT NOT NULL,
    agent TEXT,
    environment_id TEXT,
    previous_interaction_id TEXT,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    usage_json TEXT,
    errors_json TEXT NOT NULL DEFAULT '[]',
    body_json TEXT NOT NULL
);
CREATE INDEX interactions_status ON interactions(status);
CREATE INDEX interactions_project ON interactions(project, status);
CREATE TABLE steps (
    interaction_id TEXT NOT NULL REFERENCES interactions(id) ON DELETE CASCADE,
    idx BIGINT NOT NULL,
    step_json TEXT NOT NULL,
    PRIMARY KEY (interaction_id, idx)
);
CREATE TABLE environments (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    record_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE TABLE credentials (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    create_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    nonce BYTEA NOT NULL,
    ciphertext BYTEA NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE TABLE agents (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    agent_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE TABLE projects (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    name TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    quotas_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE api_keys (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
    sha256 BYTEA NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);
"#,
    ),
    // Replicas: who runs each interaction, heartbeats, and leases with fencing numbers.
    (
        3,
        r#"
ALTER TABLE interactions ADD COLUMN replica TEXT;
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    url TEXT NOT NULL,
    started TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE leases (
    resource TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    owner_url TEXT NOT NULL,
    fence BIGINT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
"#,
    ),
    // Cluster-wide quotas: places held by live replicas, and one request bucket per project.
    (
        4,
        r#"
CREATE TABLE quota_holds (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    quota TEXT NOT NULL,
    replica TEXT NOT NULL,
    created TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX quota_holds_project ON quota_holds(project, quota);
CREATE TABLE rate_buckets (
    project TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    updated TIMESTAMPTZ NOT NULL
);
"#,
    ),
    // Webhooks (secrets sealed like credentials) and their outbox; SQLite's version 3.
    (
        5,
        r#"
CREATE TABLE webhooks (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,
    record_json TEXT NOT NULL,
    nonce BYTEA NOT NULL,
    ciphertext BYTEA NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE TABLE webhook_deliveries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT,
    last_status INTEGER,
    last_error TEXT,
    created TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_ms);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(project, webhook_id, seq);
"#,
    ),
    // Triggers (scheduled interactions) and their executions; SQLite's version 4.
    (
        6,
        r#"
CREATE TABLE triggers (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    next_run_ms BIGINT,
    record_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX triggers_due ON triggers(status, next_run_ms);
CREATE TABLE trigger_executions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    trigger_id TEXT NOT NULL,
    status TEXT NOT NULL,
    interaction_id TEXT,
    record_json TEXT NOT NULL
);
CREATE INDEX trigger_executions_trigger ON trigger_executions(project, trigger_id, seq);
CREATE INDEX trigger_executions_interaction ON trigger_executions(interaction_id);
"#,
    ),
    // Calls paused for a reviewer, settled once by a conditional update; SQLite's version 5.
    (
        7,
        r#"
CREATE TABLE approvals (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args_json TEXT NOT NULL,
    args_sha256 TEXT NOT NULL,
    reason TEXT NOT NULL,
    hook_group TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    created TEXT NOT NULL,
    state TEXT NOT NULL,
    settled_by TEXT,
    settled_at TEXT,
    reviewer_reason TEXT,
    PRIMARY KEY (project, interaction_id, id)
);
CREATE INDEX approvals_state ON approvals(project, state, seq);
"#,
    ),
];

/// The advisory lock migrations run under (an arbitrary constant: "hookbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

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

/// PostgreSQL-backed [`Store`].
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    key: std::sync::Arc<SecretKey>,
    /// Set when this store is one replica of several ([`PostgresStore::connect_replica`]).
    cluster: Option<Arc<ClusterState>>,
}

/// The notification channel interaction changes go out on.
const CHANGES_CHANNEL: &str = "hookbox_interactions";

/// What a replica's store keeps about the cluster.
struct ClusterState {
    replica: Replica,
    /// Where to LISTEN from (a connection of its own, outside the pool).
    config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// Leases held here, by resource.
    held: Mutex<HashMap<String, HeldLease>>,
    /// When the last heartbeat that went through was sent: the replica row lives until then
    /// plus the TTL at least, and no longer once the database stops answering.
    alive_since: Mutex<Option<std::time::Instant>>,
    /// The environment of each interaction created here (the lease its writes are fenced by).
    environments: Mutex<HashMap<String, String>>,
    changes: broadcast::Sender<String>,
    /// Projects whose request bucket row is known to exist.
    buckets: Mutex<std::collections::HashSet<String>>,
}

/// A lease this replica holds, as far as it knows.
#[derive(Debug, Clone, Copy)]
struct HeldLease {
    fence: i64,
    /// When the statement that last took or renewed it was sent (the database set its expiry
    /// later than that, never earlier).
    renewed: std::time::Instant,
}

impl ClusterState {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lease name of an environment.
pub fn environment_resource(environment_id: &str) -> String {
    format!("{ENVIRONMENT_LEASE}{environment_id}")
}

/// The environment a lease name (from [`environment_resource`]) is for.
pub fn environment_of(resource: &str) -> Option<&str> {
    resource.strip_prefix(ENVIRONMENT_LEASE)
}

const ENVIRONMENT_LEASE: &str = "env:";

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may hold a password.
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}

/// `text` as an SQL string literal (for the one statement sent by the simple query protocol,
/// which takes no parameters).
fn sql_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn pool_err(e: impl std::error::Error) -> Error {
    Error::Pool(crate::error_chain(&e))
}

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
        let cluster = replica.map(|replica| {
            Arc::new(ClusterState {
                replica,
                config: config.clone(),
                tls: tls.clone(),
                held: Mutex::default(),
                alive_since: Mutex::default(),
                environments: Mutex::default(),
                changes: broadcast::channel(1024).0,
                buckets: Mutex::default(),
            })
        });
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
            .map_err(pool_err)?;
        let store = Self {
            pool,
            key: Arc::new(key),
            cluster,
        };
        store.migrate().await?;
        if store.cluster.is_some() {
            // A replica is connected once it listens: a change made by another replica right
            // after this returns must not be missed.
            let listening = store.start_listening();
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
            Arc::new(PostgresCluster {
                pool: self.pool.clone(),
                state: state.clone(),
            }) as Arc<dyn Cluster>
        })
    }

    /// LISTENs for interaction changes on a connection of its own, feeding the cluster's change
    /// channel; reconnects (after a second) when the connection drops.
    /// The returned receiver fires once the first LISTEN is in place.
    fn start_listening(&self) -> tokio::sync::oneshot::Receiver<()> {
        let (first, listening) = tokio::sync::oneshot::channel();
        let Some(state) = self.cluster.clone() else {
            let _ = first.send(());
            return listening;
        };
        tokio::spawn(async move {
            let mut first = Some(first);
            loop {
                if let Err(e) = listen(&state, &mut first).await {
                    tracing::warn!(error = %e, "lost the PostgreSQL notification connection; reconnecting");
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
        listening
    }

    /// Tells every replica that `interaction` changed (no-op outside a cluster).
    async fn notify(&self, client: &impl GenericClient, interaction: &str) -> Result<()> {
        if self.cluster.is_some() {
            client
                .execute(
                    "SELECT pg_notify($1, $2)",
                    &[&CHANGES_CHANNEL, &interaction],
                )
                .await?;
        }
        Ok(())
    }

    /// Refuses a write of `interaction` if its environment's lease has moved to a newer owner.
    async fn check_fence(&self, client: &impl GenericClient, interaction: &str) -> Result<()> {
        let Some((resource, fence)) = self.cluster.as_ref().and_then(|c| c.fence_of(interaction))
        else {
            return Ok(());
        };
        let current = client
            .query_opt(
                "SELECT fence FROM leases WHERE resource = $1 FOR SHARE",
                &[&resource],
            )
            .await?
            .map(|r| r.get::<_, i64>(0));
        if current == Some(fence) {
            return Ok(());
        }
        if let Some(cluster) = &self.cluster {
            cluster.forget(&resource, fence);
        }
        Err(Error::Fenced {
            interaction: interaction.to_owned(),
            environment: resource.trim_start_matches("env:").to_owned(),
            fence,
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.pool.get().await.map_err(pool_err)
    }

    async fn migrate(&self) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS hookbox_schema (version BIGINT PRIMARY KEY, applied TEXT NOT NULL)",
        )
        .await?;
        let current: i64 = tx
            .query_one("SELECT COALESCE(MAX(version), 0) FROM hookbox_schema", &[])
            .await?
            .get(0);
        let supported = MIGRATIONS.last().map_or(0, |(v, _)| *v);
        if current > supported {
            return Err(Error::SchemaTooNew {
                found: current,
                supported,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
            tx.batch_execute(sql).await?;
            tx.execute(
                "INSERT INTO hookbox_schema (version, applied) VALUES ($1, $2)",
                &[version, &crate::time::now_rfc3339()],
            )
            .await?;
            tracing::info!(version, backend = "postgres", "applied store migration");
        }
        tx.commit().await?;
        Ok(())
    }

    /// The schema version recorded in the database.
    pub async fn schema_version(&self) -> Result<i64> {
        Ok(self
            .client()
            .await?
            .query_one("SELECT COALESCE(MAX(version), 0) FROM hookbox_schema", &[])
            .await?
            .get(0))
    }
}

/// An interaction to insert, serialised before a connection is taken.
struct NewInteraction {
    body: Interaction,
    body_json: String,
    usage: Option<String>,
    errors: String,
    steps: Vec<String>,
    now: String,
}

impl NewInteraction {
    fn of(interaction: &Interaction) -> Result<Self> {
        let mut body = interaction.clone();
        let steps = std::mem::take(&mut body.steps);
        Ok(NewInteraction {
            body_json: serde_json::to_string(&body)?,
            usage: body.usage.as_ref().map(serde_json::to_string).transpose()?,
            errors: serde_json::to_string(&body.errors)?,
            steps: steps
                .iter()
                .map(serde_json::to_string)
                .collect::<std::result::Result<Vec<_>, _>>()?,
            body,
            now: crate::time::now_rfc3339(),
        })
    }
}

impl PostgresStore {
    /// Inserts `row` and its steps in `tx` (and notifies streams); [`Error::AlreadyExists`] on
    /// a taken id.
    async fn insert_interaction(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        project: &str,
        row: &NewInteraction,
    ) -> Result<()> {
        let body = &row.body;
        let inserted = tx
            .execute(
                "INSERT INTO interactions (id, status, agent, environment_id, previous_interaction_id, created, updated, usage_json, errors_json, body_json, project, replica)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING",
                &[
                    &body.id,
                    &body.status.as_str(),
                    &body.agent,
                    &body.environment_id,
                    &body.previous_interaction_id,
                    &body.created.clone().unwrap_or_else(|| row.now.clone()),
                    &body.updated.clone().unwrap_or_else(|| row.now.clone()),
                    &row.usage,
                    &row.errors,
                    &row.body_json,
                    &project,
                    &self.cluster.as_ref().map(|c| c.replica.id.clone()),
                ],
            )
            .await?;
        if inserted == 0 {
            return Err(Error::AlreadyExists {
                what: "interaction",
                id: body.id.clone(),
            });
        }
        for (idx, step) in row.steps.iter().enumerate() {
            tx.execute(
                "INSERT INTO steps (interaction_id, idx, step_json) VALUES ($1, $2, $3)",
                &[&body.id, &(idx as i64), step],
            )
            .await?;
        }
        self.notify(tx, &body.id).await
    }

    /// Remembers the environment of an interaction created here (its writes are fenced by
    /// that environment's lease).
    fn remember_environment(&self, body: &Interaction) {
        if let (Some(cluster), Some(env)) = (&self.cluster, &body.environment_id) {
            lock(&cluster.environments).insert(body.id.clone(), env.clone());
        }
    }
}

/// Moves every record `settle` names from `pending` to its state, in `tx`: the records as
/// settled, or `None` as soon as one does not move (the caller rolls back, so none does). A
/// concurrent settlement of the same row waits for this one's commit and then finds it no
/// longer pending (READ COMMITTED re-checks the condition), so exactly one wins.
async fn settle_in(
    tx: &deadpool_postgres::Transaction<'_>,
    project: &str,
    settle: &Settle,
) -> Result<Option<Vec<ApprovalRecord>>> {
    let update = tx
        .prepare_cached(&format!(
            "UPDATE approvals SET state = $1, settled_by = $2, settled_at = $3, reviewer_reason = $4
             WHERE project = $5 AND interaction_id = $6 AND id = $7 AND state = 'pending'
             RETURNING {}",
            approvals::COLUMNS
        ))
        .await?;
    let mut won = Vec::new();
    for s in approvals::ordered(settle) {
        if s.state == ApprovalState::Pending {
            return Ok(None);
        }
        let Some(row) = tx
            .query_opt(
                &update,
                &[
                    &s.state.as_str(),
                    &settle.by,
                    &settle.now,
                    &s.reviewer_reason,
                    &project,
                    &settle.interaction_id,
                    &s.id,
                ],
            )
            .await?
        else {
            return Ok(None);
        };
        won.push(approval_row(&row, 0).record()?);
    }
    Ok(Some(won))
}

/// The records `settle` names, as they are now (missing ones left out).
async fn approvals_named(
    client: &impl GenericClient,
    project: &str,
    settle: &Settle,
) -> Result<Vec<ApprovalRecord>> {
    let query = format!(
        "SELECT {} FROM approvals WHERE project = $1 AND interaction_id = $2 AND id = $3",
        approvals::COLUMNS
    );
    let mut out = Vec::new();
    for s in approvals::ordered(settle) {
        if let Some(row) = client
            .query_opt(&query, &[&project, &settle.interaction_id, &s.id])
            .await?
        {
            out.push(approval_row(&row, 0).record()?);
        }
    }
    Ok(out)
}

/// An approval record's columns ([`approvals::COLUMNS`]) starting at column `at`.
fn approval_row(r: &Row, at: usize) -> approvals::Row {
    approvals::Row {
        id: r.get(at),
        interaction_id: r.get(at + 1),
        call_id: r.get(at + 2),
        environment_id: r.get(at + 3),
        tool: r.get(at + 4),
        args_json: r.get(at + 5),
        args_sha256: r.get(at + 6),
        reason: r.get(at + 7),
        hook_group: r.get(at + 8),
        expires_at: r.get(at + 9),
        created: r.get(at + 10),
        state: r.get(at + 11),
        settled_by: r.get(at + 12),
        settled_at: r.get(at + 13),
        reviewer_reason: r.get(at + 14),
    }
}

fn page_bounds(page: &Page) -> (i64, i64) {
    (crate::page_after(page), i64::from(page.limit()))
}

fn finish_page<T>(mut rows: Vec<(i64, T)>, limit: i64) -> Paged<T> {
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next_page_token = if more {
        rows.last().map(|(seq, _)| seq.to_string())
    } else {
        None
    };
    Paged {
        items: rows.into_iter().map(|(_, item)| item).collect(),
        next_page_token,
    }
}

/// A table holding one JSON document per (project, id). Names are constants of this module,
/// never input, so formatting them into SQL is safe.
#[derive(Debug, Clone, Copy)]
struct DocTable {
    table: &'static str,
    column: &'static str,
}

const ENVIRONMENTS: DocTable = DocTable {
    table: "environments",
    column: "record_json",
};
const AGENTS: DocTable = DocTable {
    table: "agents",
    column: "agent_json",
};
/// Read and listed as documents; written by [`write_trigger`] (its status and next run are
/// columns too, for the scheduler's query).
const TRIGGERS: DocTable = DocTable {
    table: "triggers",
    column: "record_json",
};

impl DocTable {
    async fn put(self, c: &impl GenericClient, project: &str, id: &str, json: &str) -> Result<()> {
        let DocTable { table, column } = self;
        c.execute(
            &format!(
                "INSERT INTO {table} (project, id, {column}) VALUES ($1, $2, $3)
                 ON CONFLICT (project, id) DO UPDATE SET {column} = excluded.{column}"
            ),
            &[&project, &id, &json],
        )
        .await?;
        Ok(())
    }

    async fn get<T: serde::de::DeserializeOwned>(
        self,
        c: &impl GenericClient,
        project: &str,
        id: &str,
    ) -> Result<Option<T>> {
        let DocTable { table, column } = self;
        let row = c
            .query_opt(
                &format!("SELECT {column} FROM {table} WHERE project = $1 AND id = $2"),
                &[&project, &id],
            )
            .await?;
        Ok(row
            .map(|r| serde_json::from_str(r.get::<_, &str>(0)))
            .transpose()?)
    }

    async fn list<T: serde::de::DeserializeOwned>(
        self,
        c: &impl GenericClient,
        project: &str,
        page: &Page,
    ) -> Result<Paged<T>> {
        let DocTable { table, column } = self;
        let (after, limit) = page_bounds(page);
        let rows = c
            .query(
                &format!(
                    "SELECT seq, {column} FROM {table} WHERE seq > $1 AND project = $3 ORDER BY seq LIMIT $2"
                ),
                &[&after, &(limit + 1), &project],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| {
                Ok((
                    r.get::<_, i64>(0),
                    serde_json::from_str(r.get::<_, &str>(1))?,
                ))
            })
            .collect::<Result<Vec<(i64, T)>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn delete(self, c: &impl GenericClient, project: &str, id: &str) -> Result<bool> {
        let DocTable { table, .. } = self;
        Ok(c.execute(
            &format!("DELETE FROM {table} WHERE project = $1 AND id = $2"),
            &[&project, &id],
        )
        .await?
            > 0)
    }
}

/// Rows of `table` in `project`. `table` is a constant of this module, never input.
async fn count_in_project(
    c: &impl GenericClient,
    table: &'static str,
    project: &str,
) -> Result<u64> {
    let n: i64 = c
        .query_one(
            &format!("SELECT COUNT(*) FROM {table} WHERE project = $1"),
            &[&project],
        )
        .await?
        .get(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

fn credential_meta(r: &Row) -> Result<Credential> {
    let kind: CredentialType = serde_json::from_value(Value::String(r.get(1)))?;
    let status: CredentialStatus = serde_json::from_value(Value::String(r.get(2)))?;
    Ok(Credential {
        id: r.get(0),
        kind,
        status,
        create_time: r.get(3),
        update_time: r.get(4),
    })
}

async fn read_secret(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
) -> Result<Option<CredentialConfig>> {
    let Some(row) = c
        .query_opt(
            "SELECT nonce, ciphertext FROM credentials WHERE project = $1 AND id = $2",
            &[&project, &id],
        )
        .await?
    else {
        return Ok(None);
    };
    let (nonce, ct): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
    let plain = key.open(&credential_aad(project, id), &nonce, &ct)?;
    Ok(Some(serde_json::from_slice(&plain)?))
}

fn project_record(r: &Row) -> Result<ProjectRecord> {
    Ok(ProjectRecord {
        name: r.get(0),
        created: r.get(1),
        quotas: serde_json::from_str(r.get::<_, &str>(2))?,
    })
}

fn api_key_record(r: &Row) -> ApiKeyRecord {
    ApiKeyRecord {
        id: r.get(0),
        project: r.get(1),
        prefix: r.get(2),
        created: r.get(3),
        revoked: r.get(4),
    }
}

const ACTIVE: &str = "status IN ('queued', 'in_progress')";

/// An interaction's replica has stopped heartbeating (or it never had one).
const DEAD_REPLICA: &str =
    "replica IS NULL OR replica NOT IN (SELECT id FROM replicas WHERE expires_at > now())";

/// Longest a request waits for a pooled connection, a new connection or a health check.
const POOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest [`PostgresStore::connect_replica`] waits for its notification connection.
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

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

/// A released lease: free for anyone (no owner, expired) with its fencing number kept, so the
/// next owner's is higher than every earlier owner's (a deleted row would start again at 1, and
/// a fence could no longer tell an old owner from a new one).
const FREED: &str = "owner = '', owner_url = '', expires_at = '-infinity'";

/// The coordination of one replica ([`PostgresStore::cluster`]).
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
    fn ttl_ms(&self) -> f64 {
        self.state.replica.lease_ttl.as_secs_f64() * 1000.0
    }
}

#[async_trait]
impl Cluster for PostgresCluster {
    fn replica(&self) -> &Replica {
        &self.state.replica
    }

    async fn heartbeat(&self) -> Result<()> {
        let client = self.pool.get().await.map_err(pool_err)?;
        let replica = &self.state.replica;
        let ttl = self.ttl_ms();
        let sent = std::time::Instant::now();
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
        let client = self.pool.get().await.map_err(pool_err)?;
        let replica = &self.state.replica;
        let sent = std::time::Instant::now();
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
        let errors = serde_json::to_string(&[InteractionError {
            code: "replica_stopped".into(),
            message: reason.to_owned(),
        }])?;
        let mut client = self.pool.get().await.map_err(pool_err)?;
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
            let data = crate::webhooks::interaction_data(
                id,
                InteractionStatus::Failed,
                environment.as_deref(),
            );
            enqueue_in(&tx, project, "interaction.failed", &data, None, now).await?;
            end_executions_of(&tx, id, InteractionStatus::Failed, now).await?;
        }
        tx.commit().await?;
        let ids: Vec<String> = reaped.into_iter().map(|(id, _, _)| id).collect();
        for id in &ids {
            client
                .execute("SELECT pg_notify($1, $2)", &[&CHANGES_CHANNEL, id])
                .await?;
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
        let client = self.pool.get().await.map_err(pool_err)?;
        Ok(client
            .query_opt(
                "SELECT url FROM replicas WHERE id = $1 AND expires_at > now()",
                &[&id],
            )
            .await?
            .map(|row| row.get(0)))
    }

    async fn holder(&self, resource: &str) -> Result<Option<(String, String)>> {
        let client = self.pool.get().await.map_err(pool_err)?;
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
        let client = self.pool.get().await.map_err(pool_err)?;
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
        let client = self.pool.get().await.map_err(pool_err)?;
        let id = format!("hold_{:016x}", rand::random::<u64>());
        let (quota, project, replica) = (
            sql_literal(quota),
            sql_literal(project),
            sql_literal(&self.state.replica.id),
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // One round trip: under a lock per (quota, project), count the places live replicas
        // hold and take one if there is room (a stopped replica's places do not count).
        let sent = client
            .simple_query(&format!(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(hashtextextended('quota:' || {quota} || ':' || {project}, 0));
                 INSERT INTO quota_holds (id, project, quota, replica)
                 SELECT '{id}', {project}, {quota}, {replica}
                 WHERE (SELECT count(*) FROM quota_holds h JOIN replicas r ON r.id = h.replica
                        WHERE h.project = {project} AND h.quota = {quota} AND r.expires_at > now()) < {limit}
                 RETURNING id;
                 COMMIT;"
            ))
            .await;
        let messages = match sent {
            Ok(messages) => messages,
            Err(e) => {
                // The pooled connection must not stay inside the failed transaction.
                let _ = client.batch_execute("ROLLBACK").await;
                return Err(e.into());
            }
        };
        // The INSERT's row, if any, is the id (the lock's SELECT returns a row too).
        let taken = messages.iter().any(|m| {
            matches!(m, tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some(id.as_str()))
        });
        Ok(taken.then_some(id))
    }

    async fn unhold(&self, hold: &str) -> Result<()> {
        let client = self.pool.get().await.map_err(pool_err)?;
        client
            .execute("DELETE FROM quota_holds WHERE id = $1", &[&hold])
            .await?;
        Ok(())
    }

    async fn take_tokens(
        &self,
        project: &str,
        rate: f64,
        burst: f64,
        want: f64,
    ) -> Result<crate::TokenGrant> {
        let client = self.pool.get().await.map_err(pool_err)?;
        let burst = burst.max(1.0);
        if !lock(&self.state.buckets).contains(project) {
            client
                .execute(
                    "INSERT INTO rate_buckets (project, tokens, updated) VALUES ($1, $2::float8, now())
                     ON CONFLICT (project) DO NOTHING",
                    &[&project, &burst],
                )
                .await?;
            lock(&self.state.buckets).insert(project.to_owned());
        }
        // One statement: refill by the time since the last take, then take up to `want` whole
        // tokens if there is at least one (the row lock serialises replicas).
        // The bucket refilled by the time since the last take ($2: rate, $3: burst).
        const REFILLED: &str = "LEAST($3::float8, tokens + EXTRACT(EPOCH FROM (now() - updated))::float8 * $2::float8)";
        let taken = client
            .query_opt(
                &format!(
                    "UPDATE rate_buckets b SET tokens = r.refilled - r.take, updated = now()
                     FROM (SELECT refilled, LEAST($4::float8, floor(refilled)) AS take FROM (
                             SELECT {REFILLED} AS refilled
                             FROM rate_buckets WHERE project = $1 FOR UPDATE) f) r
                     WHERE b.project = $1 AND r.take >= 1
                     RETURNING r.take"
                ),
                &[&project, &rate, &burst, &want.max(1.0)],
            )
            .await?;
        if let Some(row) = taken {
            return Ok(crate::TokenGrant::Granted(row.get(0)));
        }
        let tokens: f64 = client
            .query_opt(
                &format!("SELECT {REFILLED} FROM rate_buckets WHERE project = $1"),
                &[&project, &rate, &burst],
            )
            .await?
            .map_or(0.0, |row| row.get(0));
        Ok(crate::TokenGrant::Wait(
            (1.0 - tokens).max(0.0) / rate.max(f64::MIN_POSITIVE),
        ))
    }

    fn fence(&self, resource: &str) -> Option<i64> {
        let held = *lock(&self.state.held).get(resource)?;
        let alive = (*lock(&self.state.alive_since))?;
        let ttl = self.state.replica.lease_ttl;
        let now = std::time::Instant::now();
        // Another replica may take the lease once it expires, or once this replica's heartbeat
        // row does, whichever comes first.
        (now < held.renewed + ttl && now < alive + ttl).then_some(held.fence)
    }

    fn held(&self) -> Vec<String> {
        lock(&self.state.held).keys().cloned().collect()
    }

    async fn release(&self, resource: &str) -> Result<()> {
        let client = self.pool.get().await.map_err(pool_err)?;
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
        let mut client = self.pool.get().await.map_err(pool_err)?;
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
        let client = self.pool.get().await.map_err(pool_err)?;
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

/// A webhook's record with its sealed keys opened (`FOR UPDATE` when `lock`).
async fn read_webhook(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
    lock: bool,
) -> Result<Option<(WebhookRecord, Vec<SigningKey>)>> {
    let sql = if lock {
        "SELECT record_json, nonce, ciphertext FROM webhooks WHERE project = $1 AND id = $2 FOR UPDATE"
    } else {
        "SELECT record_json, nonce, ciphertext FROM webhooks WHERE project = $1 AND id = $2"
    };
    c.query_opt(sql, &[&project, &id])
        .await?
        .map(|row| webhooks::open_row(key, project, id, row.get(0), row.get(1), row.get(2)))
        .transpose()
}

/// Writes a webhook's record (and, when given, its keys sealed anew).
async fn write_webhook(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    keys: Option<&[SigningKey]>,
) -> Result<()> {
    let id = &record.webhook.id;
    let json = serde_json::to_string(record)?;
    let state = record.webhook.state.as_str();
    match keys {
        Some(keys) => {
            let (nonce, ct) = webhooks::seal_keys(key, project, id, keys)?;
            c.execute(
                "UPDATE webhooks SET state = $3, record_json = $4, nonce = $5, ciphertext = $6 WHERE project = $1 AND id = $2",
                &[&project, id, &state, &json, &nonce, &ct],
            )
            .await?;
        }
        None => {
            c.execute(
                "UPDATE webhooks SET state = $3, record_json = $4 WHERE project = $1 AND id = $2",
                &[&project, id, &state, &json],
            )
            .await?;
        }
    }
    Ok(())
}

/// Writes one pending delivery of `kind` for each webhook of `project` that wants it (only
/// `only`, when given), in `c`'s transaction; their ids.
async fn enqueue_in(
    c: &impl GenericClient,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let rows = c
        .query(
            "SELECT record_json FROM webhooks WHERE project = $1 AND ($2::TEXT IS NULL OR id = $2) ORDER BY seq",
            &[&project, &only],
        )
        .await?;
    let now_ms = webhooks::now_ms();
    let mut ids = Vec::new();
    for row in rows {
        let record: WebhookRecord = serde_json::from_str(row.get::<_, &str>(0))?;
        if !webhooks::wants(&record, kind) {
            continue;
        }
        let id = webhooks::new_delivery_id();
        let body = webhooks::event_body(&id, kind, now, data)?;
        c.execute(
            "INSERT INTO webhook_deliveries (id, project, webhook_id, event_type, payload_json, status, next_attempt_ms, created, created_ms, updated)
             VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $6, $7)",
            &[&id, &project, &record.webhook.id, &kind, &body, &now_ms, &now],
        )
        .await?;
        ids.push(id);
    }
    Ok(ids)
}

async fn read_trigger(
    c: &impl GenericClient,
    project: &str,
    id: &str,
    lock: bool,
) -> Result<Option<TriggerRecord>> {
    if !lock {
        return TRIGGERS.get(c, project, id).await;
    }
    Ok(c.query_opt(
        "SELECT record_json FROM triggers WHERE project = $1 AND id = $2 FOR UPDATE",
        &[&project, &id],
    )
    .await?
    .map(|r| serde_json::from_str(r.get::<_, &str>(0)))
    .transpose()?)
}

async fn write_trigger(
    c: &impl GenericClient,
    project: &str,
    record: &TriggerRecord,
) -> Result<()> {
    c.execute(
        "UPDATE triggers SET status = $3, next_run_ms = $4, record_json = $5 WHERE project = $1 AND id = $2",
        &[
            &project,
            &record.trigger.id,
            &record.trigger.status.as_str(),
            &record.next_run_ms,
            &serde_json::to_string(record)?,
        ],
    )
    .await?;
    Ok(())
}

async fn read_execution(
    c: &impl GenericClient,
    project: &str,
    id: &str,
) -> Result<Option<TriggerExecution>> {
    Ok(c.query_opt(
        "SELECT record_json FROM trigger_executions WHERE project = $1 AND id = $2 FOR UPDATE",
        &[&project, &id],
    )
    .await?
    .map(|r| serde_json::from_str(r.get::<_, &str>(0)))
    .transpose()?)
}

async fn write_execution(c: &impl GenericClient, execution: &TriggerExecution) -> Result<()> {
    c.execute(
        "UPDATE trigger_executions SET status = $2, interaction_id = $3, record_json = $4 WHERE id = $1",
        &[
            &execution.id,
            &execution.status.as_str(),
            &execution.interaction_id,
            &serde_json::to_string(execution)?,
        ],
    )
    .await?;
    Ok(())
}

/// Ends `execution` of `project` (and counts it for its trigger), in `c`'s transaction.
async fn end_execution_in(
    c: &impl GenericClient,
    project: &str,
    mut execution: TriggerExecution,
    status: ExecutionStatus,
    error: Option<String>,
    now: &str,
) -> Result<bool> {
    let mut trigger = read_trigger(c, project, &execution.trigger_id, true).await?;
    if !triggers::end_execution(trigger.as_mut(), &mut execution, status, error, now) {
        return Ok(false);
    }
    write_execution(c, &execution).await?;
    if let Some(trigger) = &trigger {
        write_trigger(c, project, trigger).await?;
    }
    Ok(true)
}

/// Ends the running executions that created interaction `id`, now that it ended `status`.
async fn end_executions_of(
    c: &impl GenericClient,
    interaction_id: &str,
    status: InteractionStatus,
    now: &str,
) -> Result<()> {
    let Some((end, error)) = triggers::execution_end(status) else {
        return Ok(());
    };
    let rows = c
        .query(
            "SELECT project, record_json FROM trigger_executions WHERE interaction_id = $1 AND status = 'in_progress' FOR UPDATE",
            &[&interaction_id],
        )
        .await?;
    for row in rows {
        let project: String = row.get(0);
        let execution: TriggerExecution = serde_json::from_str(row.get::<_, &str>(1))?;
        end_execution_in(c, &project, execution, end, error.clone(), now).await?;
    }
    Ok(())
}

#[async_trait]
impl Store for PostgresStore {
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()> {
        let row = NewInteraction::of(interaction)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        self.insert_interaction(&tx, project, &row).await?;
        tx.commit().await?;
        self.remember_environment(&row.body);
        Ok(())
    }

    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled> {
        let row = NewInteraction::of(interaction)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(won) = settle_in(&tx, project, settle).await? else {
            tx.rollback().await?;
            return Ok(Settled::Refused(
                approvals_named(&client, project, settle).await?,
            ));
        };
        self.insert_interaction(&tx, project, &row).await?;
        tx.commit().await?;
        self.remember_environment(&row.body);
        Ok(Settled::Won(won))
    }

    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(won) = settle_in(&tx, project, settle).await? else {
            tx.rollback().await?;
            return Ok(Settled::Refused(
                approvals_named(&client, project, settle).await?,
            ));
        };
        tx.commit().await?;
        Ok(Settled::Won(won))
    }

    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()> {
        let args = serde_json::to_string(&record.args)?;
        let n = self
            .client()
            .await?
            .execute(
                "INSERT INTO approvals (project, id, interaction_id, call_id, environment_id, tool, args_json, args_sha256, reason, hook_group, expires_at, created, state, settled_by, settled_at, reviewer_reason)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                 ON CONFLICT (project, interaction_id, id) DO NOTHING",
                &[
                    &project,
                    &record.id,
                    &record.interaction_id,
                    &record.call_id,
                    &record.environment_id,
                    &record.tool,
                    &args,
                    &record.args_sha256,
                    &record.reason,
                    &record.hook_group,
                    &record.expires_at,
                    &record.created,
                    &record.state.as_str(),
                    &record.settled_by,
                    &record.settled_at,
                    &record.reviewer_reason,
                ],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "approval request",
                id: format!("{}/{}", record.interaction_id, record.id),
            });
        }
        Ok(())
    }

    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>> {
        let (after, limit) = page_bounds(page);
        let state = filter.state.map(ApprovalState::as_str);
        let rows = self
            .client()
            .await?
            .query(
                &format!(
                    "SELECT seq, {} FROM approvals WHERE project = $1 AND seq > $2
                       AND ($3::text IS NULL OR interaction_id = $3) AND ($4::text IS NULL OR state = $4)
                     ORDER BY seq LIMIT $5",
                    approvals::COLUMNS
                ),
                &[&project, &after, &filter.interaction_id, &state, &(limit + 1)],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.get::<_, i64>(0), approval_row(r, 1).record()?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64> {
        Ok(self
            .client()
            .await?
            .execute(
                "DELETE FROM approvals WHERE project = $1 AND interaction_id = $2 AND state = 'pending'",
                &[&project, &interaction_id],
            )
            .await?)
    }

    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()> {
        let json = serde_json::to_string(step)?;
        let idx = i64::try_from(index).unwrap_or(i64::MAX);
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        self.check_fence(&tx, interaction_id).await?;
        // The step goes in only if its interaction exists.
        let n = tx
            .execute(
                "INSERT INTO steps (interaction_id, idx, step_json)
                 SELECT id, $2, $3 FROM interactions WHERE id = $1
                 ON CONFLICT (interaction_id, idx) DO UPDATE SET step_json = excluded.step_json",
                &[&interaction_id, &idx, &json],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound {
                what: "interaction",
                id: interaction_id.to_owned(),
            });
        }
        self.notify(&tx, interaction_id).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()> {
        let usage = update
            .usage
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let errors = serde_json::to_string(&update.errors)?;
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        self.check_fence(&tx, interaction_id).await?;
        let Some(row) = tx
            .query_opt(
                "SELECT status, project, environment_id FROM interactions WHERE id = $1 FOR UPDATE",
                &[&interaction_id],
            )
            .await?
        else {
            return Err(Error::NotFound {
                what: "interaction",
                id: interaction_id.to_owned(),
            });
        };
        let (old, project, environment): (String, String, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        tx.execute(
            "UPDATE interactions SET status = $2, usage_json = COALESCE($3, usage_json), errors_json = $4, updated = $5 WHERE id = $1",
            &[&interaction_id, &update.status.as_str(), &usage, &errors, &update.updated],
        )
        .await?;
        if let Some(kind) =
            crate::webhooks::interaction_event(InteractionStatus::parse(&old), update.status)
        {
            let data = crate::webhooks::interaction_data(
                interaction_id,
                update.status,
                environment.as_deref(),
            );
            enqueue_in(&tx, &project, kind, &data, None, &update.updated).await?;
        }
        end_executions_of(&tx, interaction_id, update.status, &update.updated).await?;
        self.notify(&tx, interaction_id).await?;
        tx.commit().await?;
        if let Some(cluster) = &self.cluster
            && !update.status.is_running()
        {
            lock(&cluster.environments).remove(interaction_id);
        }
        Ok(())
    }

    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>> {
        let client = self.client().await?;
        let Some(row) = client
            .query_opt(
                "SELECT status, updated, usage_json, errors_json, body_json FROM interactions WHERE id = $1 AND project = $2",
                &[&id, &project],
            )
            .await?
        else {
            return Ok(None);
        };
        let mut interaction: Interaction = serde_json::from_str(row.get::<_, &str>(4))?;
        interaction.status =
            InteractionStatus::parse(row.get::<_, &str>(0)).unwrap_or(InteractionStatus::Failed);
        interaction.updated = Some(row.get(1));
        interaction.usage = row
            .get::<_, Option<&str>>(2)
            .map(serde_json::from_str::<Usage>)
            .transpose()?;
        interaction.errors = serde_json::from_str::<Vec<InteractionError>>(row.get::<_, &str>(3))?;
        interaction.steps = client
            .query(
                "SELECT step_json FROM steps WHERE interaction_id = $1 ORDER BY idx",
                &[&id],
            )
            .await?
            .iter()
            .map(|r| Ok(serde_json::from_str::<Step>(r.get::<_, &str>(0))?))
            .collect::<Result<Vec<Step>>>()?;
        Ok(Some(interaction))
    }

    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool> {
        // Steps go with it (ON DELETE CASCADE); its approval records here.
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM interactions WHERE id = $1 AND project = $2",
                &[&id, &project],
            )
            .await?;
        if n > 0 {
            tx.execute(
                "DELETE FROM approvals WHERE project = $1 AND interaction_id = $2",
                &[&project, &id],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>> {
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        let rows = self
            .client()
            .await?
            .query(
                "SELECT seq, status, updated, usage_json, errors_json, body_json FROM interactions
                 WHERE project = $1 AND seq < $2
                   AND ($3::text IS NULL OR status = $3) AND ($4::text IS NULL OR agent = $4)
                   AND ($5::text IS NULL OR environment_id = $5)
                   AND ($6::text IS NULL OR created >= $6) AND ($7::text IS NULL OR created < $7)
                 ORDER BY seq DESC LIMIT $8",
                &[
                    &project,
                    &before,
                    &filter.status,
                    &filter.agent,
                    &filter.environment_id,
                    &filter.created_after,
                    &filter.created_before,
                    &(limit + 1),
                ],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| {
                Ok((
                    r.get::<_, i64>(0),
                    crate::listed_interaction(r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn count_running_interactions(&self, project: &str) -> Result<u64> {
        let n: i64 = self
            .client()
            .await?
            .query_one(
                &format!("SELECT COUNT(*) FROM interactions WHERE project = $1 AND {ACTIVE}"),
                &[&project],
            )
            .await?
            .get(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>> {
        let errors = serde_json::to_string(&[InteractionError {
            code: "interrupted".into(),
            message: reason.to_owned(),
        }])?;
        // A replica recovers only what no live replica runs (its own earlier runs included:
        // a restart is a new replica); a lone server recovers everything.
        let only_dead = match &self.cluster {
            Some(_) => format!(" AND ({DEAD_REPLICA})"),
            None => String::new(),
        };
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let mut rows = tx
            .query(
                &format!(
                    "UPDATE interactions SET status = 'failed', errors_json = $1, updated = $2 WHERE {ACTIVE}{only_dead} RETURNING seq, id, project, environment_id"
                ),
                &[&errors, &now],
            )
            .await?
            .iter()
            .map(|r| {
                (
                    r.get::<_, i64>(0),
                    r.get::<_, String>(1),
                    r.get::<_, String>(2),
                    r.get::<_, Option<String>>(3),
                )
            })
            .collect::<Vec<_>>();
        rows.sort();
        for (_, id, project, environment) in &rows {
            let data = crate::webhooks::interaction_data(
                id,
                InteractionStatus::Failed,
                environment.as_deref(),
            );
            enqueue_in(&tx, project, "interaction.failed", &data, None, now).await?;
            end_executions_of(&tx, id, InteractionStatus::Failed, now).await?;
        }
        tx.commit().await?;
        Ok(rows.into_iter().map(|(_, id, _, _)| id).collect())
    }

    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()> {
        let json = serde_json::to_string(env)?;
        ENVIRONMENTS
            .put(&self.client().await?, project, &env.environment.id, &json)
            .await
    }

    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>> {
        ENVIRONMENTS.get(&self.client().await?, project, id).await
    }

    async fn list_environments(
        &self,
        project: &str,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>> {
        ENVIRONMENTS
            .list(&self.client().await?, project, page)
            .await
    }

    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool> {
        ENVIRONMENTS
            .delete(&self.client().await?, project, id)
            .await
    }

    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT record_json FROM environments WHERE project = $1 AND id = $2 FOR UPDATE",
                &[&project, &id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut record: EnvironmentRecord = serde_json::from_str(row.get::<_, &str>(0))?;
        if crate::apply_environment_change(&mut record, change) {
            tx.execute(
                "UPDATE environments SET record_json = $3 WHERE project = $1 AND id = $2",
                &[&project, &id, &serde_json::to_string(&record)?],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Some(record))
    }

    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>> {
        let (after, limit) = page_bounds(page);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT seq, project, record_json FROM environments WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&after, &(limit + 1)],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| {
                Ok((
                    r.get::<_, i64>(0),
                    (
                        r.get::<_, String>(1),
                        serde_json::from_str(r.get::<_, &str>(2))?,
                    ),
                ))
            })
            .collect::<Result<Vec<(i64, (String, EnvironmentRecord))>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn count_environments(&self, project: &str) -> Result<u64> {
        count_in_project(&self.client().await?, ENVIRONMENTS.table, project).await
    }

    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential> {
        let id = config.id().to_owned();
        let plaintext = serde_json::to_vec(config)?;
        let (nonce, ct) = self.key.seal(&credential_aad(project, &id), &plaintext)?;
        let n = self
            .client()
            .await?
            .execute(
                "INSERT INTO credentials (project, id, type, status, create_time, update_time, nonce, ciphertext)
                 VALUES ($1, $2, $3, 'active', $4, $4, $5, $6) ON CONFLICT (project, id) DO NOTHING",
                &[&project, &id, &config.kind().as_str(), &now, &nonce, &ct],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "credential",
                id,
            });
        }
        Ok(Credential {
            id,
            kind: config.kind(),
            status: CredentialStatus::Active,
            create_time: now.to_owned(),
            update_time: now.to_owned(),
        })
    }

    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>> {
        self.client()
            .await?
            .query_opt(
                "SELECT id, type, status, create_time, update_time FROM credentials WHERE project = $1 AND id = $2",
                &[&project, &id],
            )
            .await?
            .as_ref()
            .map(credential_meta)
            .transpose()
    }

    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>> {
        read_secret(&self.client().await?, &self.key, project, id).await
    }

    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // Lock the row for the read-modify-write, as SQLite's single writer does.
        tx.execute(
            "SELECT 1 FROM credentials WHERE project = $1 AND id = $2 FOR UPDATE",
            &[&project, &id],
        )
        .await?;
        let stored = read_secret(&tx, &self.key, project, id)
            .await?
            .ok_or_else(|| Error::NotFound {
                what: "credential",
                id: id.to_owned(),
            })?;
        let updated = apply_credential_update(id, stored, update)?;
        let (nonce, ct) = self
            .key
            .seal(&credential_aad(project, id), &serde_json::to_vec(&updated)?)?;
        let row = tx
            .query_one(
                "UPDATE credentials SET nonce = $3, ciphertext = $4, update_time = $5 WHERE project = $1 AND id = $2
                 RETURNING id, type, status, create_time, update_time",
                &[&project, &id, &nonce, &ct, &now],
            )
            .await?;
        let meta = credential_meta(&row)?;
        tx.commit().await?;
        Ok(meta)
    }

    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>> {
        let (after, limit) = page_bounds(page);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT id, type, status, create_time, update_time, seq FROM credentials WHERE seq > $1 AND project = $3 ORDER BY seq LIMIT $2",
                &[&after, &(limit + 1), &project],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| Ok((r.get::<_, i64>(5), credential_meta(r)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool> {
        Ok(self
            .client()
            .await?
            .execute(
                "DELETE FROM credentials WHERE project = $1 AND id = $2",
                &[&project, &id],
            )
            .await?
            > 0)
    }

    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()> {
        let id = agent.id.clone().ok_or_else(|| Error::NotFound {
            what: "agent",
            id: String::new(),
        })?;
        let json = serde_json::to_string(agent)?;
        AGENTS.put(&self.client().await?, project, &id, &json).await
    }

    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>> {
        AGENTS.get(&self.client().await?, project, id).await
    }

    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>> {
        AGENTS.list(&self.client().await?, project, page).await
    }

    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool> {
        AGENTS.delete(&self.client().await?, project, id).await
    }

    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()> {
        let id = &record.webhook.id;
        let (nonce, ct) = webhooks::seal_keys(&self.key, project, id, std::slice::from_ref(key))?;
        let n = self
            .client()
            .await?
            .execute(
                "INSERT INTO webhooks (project, id, state, record_json, nonce, ciphertext) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (project, id) DO NOTHING",
                &[
                    &project,
                    id,
                    &record.webhook.state.as_str(),
                    &serde_json::to_string(record)?,
                    &nonce,
                    &ct,
                ],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "webhook",
                id: id.clone(),
            });
        }
        Ok(())
    }

    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let client = self.client().await?;
        Ok(read_webhook(&client, &self.key, project, id, false)
            .await?
            .map(|(mut record, keys)| {
                webhooks::show_secrets(&mut record, &keys, now);
                record
            }))
    }

    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>> {
        let (after, limit) = page_bounds(page);
        let rows = self
            .client()
            .await?
            .query(
                "SELECT seq, id, record_json, nonce, ciphertext FROM webhooks WHERE seq > $1 AND project = $3 ORDER BY seq LIMIT $2",
                &[&after, &(limit + 1), &project],
            )
            .await?
            .iter()
            .map(|r| {
                let (mut record, keys) =
                    webhooks::open_row(&self.key, project, r.get(1), r.get(2), r.get(3), r.get(4))?;
                webhooks::show_secrets(&mut record, &keys, now);
                Ok((r.get::<_, i64>(0), record))
            })
            .collect::<Result<Vec<_>>>()?;
        let page = finish_page(rows, limit);
        let items = page.items;
        Ok(Paged {
            items,
            next_page_token: page.next_page_token,
        })
    }

    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::webhooks::WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some((mut record, keys)) = read_webhook(&tx, &self.key, project, id, true).await?
        else {
            return Ok(None);
        };
        webhooks::apply_update(&mut record, update, now);
        write_webhook(&tx, &self.key, project, &record, None).await?;
        tx.commit().await?;
        webhooks::show_secrets(&mut record, &keys, now);
        Ok(Some(record))
    }

    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some((mut record, keys)) = read_webhook(&tx, &self.key, project, id, true).await?
        else {
            return Ok(None);
        };
        let keys = webhooks::rotate(keys, new.clone(), previous_expire, now);
        record.webhook.update_time = now.to_owned();
        write_webhook(&tx, &self.key, project, &record, Some(&keys)).await?;
        tx.commit().await?;
        webhooks::show_secrets(&mut record, &keys, now);
        Ok(Some(record))
    }

    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM webhooks WHERE project = $1 AND id = $2",
                &[&project, &id],
            )
            .await?;
        tx.execute(
            "DELETE FROM webhook_deliveries WHERE project = $1 AND webhook_id = $2",
            &[&project, &id],
        )
        .await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>> {
        let client = self.client().await?;
        Ok(read_webhook(&client, &self.key, project, id, false)
            .await?
            .map(|(_, keys)| keys.into_iter().filter(|k| k.live_at(now)).collect()))
    }

    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let ids = enqueue_in(&tx, project, kind, data, only, now).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        let rows = self
            .client()
            .await?
            .query(
                "UPDATE webhook_deliveries d SET next_attempt_ms = $2
                 FROM webhooks w
                 WHERE d.id IN (
                     SELECT d2.id FROM webhook_deliveries d2
                     JOIN webhooks w2 ON w2.project = d2.project AND w2.id = d2.webhook_id
                     WHERE d2.status = 'pending' AND d2.next_attempt_ms <= $1
                       AND (w2.state = 'enabled' OR d2.event_type = $4)
                     ORDER BY d2.next_attempt_ms, d2.seq LIMIT $3
                     FOR UPDATE OF d2 SKIP LOCKED)
                   AND w.project = d.project AND w.id = d.webhook_id
                 RETURNING d.id, d.project, d.webhook_id, d.event_type, d.payload_json, d.attempts, d.created_ms, w.record_json, d.seq",
                &[
                    &now_ms,
                    &lease_until_ms,
                    &i64::from(limit),
                    &hookbox_protocol::webhooks::PING_EVENT,
                ],
            )
            .await?;
        // RETURNING has no order; hand them out oldest first, as SQLite does.
        let mut rows = rows;
        rows.sort_by_key(|r| r.get::<_, i64>(8));
        rows.iter()
            .map(|r| {
                let record: WebhookRecord = serde_json::from_str(r.get::<_, &str>(7))?;
                Ok(ClaimedDelivery {
                    id: r.get(0),
                    project: r.get(1),
                    webhook_id: r.get(2),
                    event_type: r.get(3),
                    payload: r.get(4),
                    attempts: u32::try_from(r.get::<_, i32>(5)).unwrap_or(0),
                    created_ms: r.get(6),
                    uri: record.webhook.uri,
                })
            })
            .collect()
    }

    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(row) = tx
            .query_opt(
                "SELECT project, webhook_id FROM webhook_deliveries WHERE id = $1",
                &[&id],
            )
            .await?
        else {
            // Deleted with its webhook meanwhile.
            return Ok(());
        };
        let (project, webhook_id): (String, String) = (row.get(0), row.get(1));
        let webhook = read_webhook(&tx, &self.key, &project, &webhook_id, true).await?;
        match outcome {
            AttemptOutcome::Delivered { status } => {
                tx.execute(
                    "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, next_attempt_ms = NULL, last_status = $2, last_error = NULL, updated = $3 WHERE id = $1",
                    &[&id, &i32::from(*status), &now],
                )
                .await?;
                if let Some((mut record, _)) = webhook
                    && (record.consecutive_failures > 0 || record.last_error.is_some())
                {
                    record.consecutive_failures = 0;
                    record.last_error = None;
                    write_webhook(&tx, &self.key, &project, &record, None).await?;
                }
            }
            AttemptOutcome::Failed {
                error,
                status,
                retry_at_ms,
                disable_after,
            } => {
                let state = if retry_at_ms.is_some() {
                    "pending"
                } else {
                    "failed"
                };
                tx.execute(
                    "UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1, next_attempt_ms = $3, last_status = $4, last_error = $5, updated = $6 WHERE id = $1",
                    &[&id, &state, retry_at_ms, &status.map(i32::from), error, &now],
                )
                .await?;
                if let Some((mut record, _)) = webhook {
                    webhooks::count_failure(&mut record, error, *disable_after, now);
                    write_webhook(&tx, &self.key, &project, &record, None).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>> {
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        let rows = self
            .client()
            .await?
            .query(
                "SELECT seq, id, event_type, status, attempts, created, updated, last_status, last_error, next_attempt_ms
                 FROM webhook_deliveries WHERE project = $1 AND webhook_id = $2 AND seq < $3
                 ORDER BY seq DESC LIMIT $4",
                &[&project, &webhook_id, &before, &(limit + 1)],
            )
            .await?;
        let rows = rows
            .iter()
            .map(|r| {
                let status = DeliveryStatus::parse(r.get::<_, &str>(3))?;
                Ok((
                    r.get::<_, i64>(0),
                    DeliveryRecord {
                        id: r.get(1),
                        webhook_id: webhook_id.to_owned(),
                        event_type: r.get(2),
                        status,
                        attempts: u32::try_from(r.get::<_, i32>(4)).unwrap_or(0),
                        created: r.get(5),
                        updated: r.get(6),
                        last_status: r
                            .get::<_, Option<i32>>(7)
                            .and_then(|s| u16::try_from(s).ok()),
                        last_error: r.get(8),
                        next_attempt_ms: r
                            .get::<_, Option<i64>>(9)
                            .filter(|_| status == DeliveryStatus::Pending),
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let page = finish_page(rows, limit);
        Ok(Paged {
            items: page.items,
            next_page_token: page.next_page_token,
        })
    }

    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>> {
        Ok(self
            .client()
            .await?
            .query_one(
                "SELECT MIN(d.next_attempt_ms) FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
                 WHERE d.status = 'pending' AND (w.state = 'enabled' OR d.event_type = $1)",
                &[&hookbox_protocol::webhooks::PING_EVENT],
            )
            .await?
            .get::<_, Option<i64>>(0))
    }

    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()> {
        let n = self
            .client()
            .await?
            .execute(
                "INSERT INTO triggers (project, id, status, next_run_ms, record_json) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (project, id) DO NOTHING",
                &[
                    &project,
                    &record.trigger.id,
                    &record.trigger.status.as_str(),
                    &record.next_run_ms,
                    &serde_json::to_string(record)?,
                ],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "trigger",
                id: record.trigger.id.clone(),
            });
        }
        Ok(())
    }

    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
        read_trigger(&self.client().await?, project, id, false).await
    }

    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>> {
        TRIGGERS.list(&self.client().await?, project, page).await
    }

    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::triggers::TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(mut record) = read_trigger(&tx, project, id, true).await? else {
            return Ok(None);
        };
        triggers::apply_update(&mut record, update, resume_next_ms, now);
        write_trigger(&tx, project, &record).await?;
        tx.commit().await?;
        Ok(Some(record))
    }

    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let n = tx
            .execute(
                "DELETE FROM triggers WHERE project = $1 AND id = $2",
                &[&project, &id],
            )
            .await?;
        tx.execute(
            "DELETE FROM trigger_executions WHERE project = $1 AND trigger_id = $2",
            &[&project, &id],
        )
        .await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>> {
        self.client()
            .await?
            .query(
                "SELECT project, record_json FROM triggers WHERE status = 'active' AND next_run_ms <= $1 ORDER BY next_run_ms LIMIT $2",
                &[&now_ms, &i64::from(limit)],
            )
            .await?
            .iter()
            .map(|r| Ok((r.get(0), serde_json::from_str(r.get::<_, &str>(1))?)))
            .collect()
    }

    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        // FOR UPDATE: two replicas claiming the same run take turns here; the second then sees
        // the moved next_run_ms and loses.
        let Some(mut record) = read_trigger(&tx, project, id, true).await? else {
            return Ok(RunStart::Lost);
        };
        if let Some((expected, next)) = claim {
            if record.next_run_ms != Some(expected)
                || record.trigger.status != hookbox_protocol::triggers::TriggerStatus::Active
            {
                return Ok(RunStart::Lost);
            }
            record.set_next_run(next);
        }
        let busy = tx
            .query_opt(
                "SELECT 1 FROM trigger_executions WHERE project = $1 AND trigger_id = $2 AND status = 'in_progress' LIMIT 1",
                &[&project, &id],
            )
            .await?
            .is_some();
        let mut execution = TriggerExecution {
            id: triggers::new_execution_id(),
            trigger_id: id.to_owned(),
            status: ExecutionStatus::InProgress,
            scheduled_time: Some(scheduled.to_owned()),
            start_time: Some(now.to_owned()),
            end_time: None,
            interaction_id: None,
            environment_id: record.trigger.environment_id.clone(),
            error: None,
        };
        if busy {
            execution.status = ExecutionStatus::Skipped;
            execution.end_time = Some(now.to_owned());
            execution.error = Some("the previous execution was still running".into());
        } else {
            record.trigger.last_run_time = Some(now.to_owned());
        }
        tx.execute(
            "INSERT INTO trigger_executions (id, project, trigger_id, status, record_json) VALUES ($1, $2, $3, $4, $5)",
            &[
                &execution.id,
                &project,
                &id,
                &execution.status.as_str(),
                &serde_json::to_string(&execution)?,
            ],
        )
        .await?;
        write_trigger(&tx, project, &record).await?;
        tx.commit().await?;
        Ok(if busy {
            RunStart::Skipped(execution)
        } else {
            RunStart::Run(execution)
        })
    }

    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(mut execution) = read_execution(&tx, project, execution_id).await? else {
            return Ok(());
        };
        execution.interaction_id = Some(interaction_id.to_owned());
        if let Some(env) = environment_id {
            execution.environment_id = Some(env.to_owned());
        }
        write_execution(&tx, &execution).await?;
        if let Some(mut trigger) = read_trigger(&tx, project, &execution.trigger_id, true).await? {
            trigger.trigger.previous_interaction_id = Some(interaction_id.to_owned());
            write_trigger(&tx, project, &trigger).await?;
        }
        // It may have ended before it was linked.
        let status = tx
            .query_opt(
                "SELECT status FROM interactions WHERE id = $1",
                &[&interaction_id],
            )
            .await?
            .and_then(|r| InteractionStatus::parse(r.get::<_, &str>(0)));
        if let Some(status) = status {
            end_executions_of(&tx, interaction_id, status, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn end_trigger_execution(
        &self,
        project: &str,
        execution_id: &str,
        status: ExecutionStatus,
        error: Option<&str>,
        now: &str,
    ) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(execution) = read_execution(&tx, project, execution_id).await? else {
            return Ok(false);
        };
        let ended = end_execution_in(
            &tx,
            project,
            execution,
            status,
            error.map(str::to_owned),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(ended)
    }

    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<TriggerExecution>> {
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        let rows = self
            .client()
            .await?
            .query(
                "SELECT seq, record_json FROM trigger_executions WHERE project = $1 AND trigger_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
                &[&project, &trigger_id, &before, &(limit + 1)],
            )
            .await?
            .iter()
            .map(|r| Ok((r.get::<_, i64>(0), serde_json::from_str(r.get::<_, &str>(1))?)))
            .collect::<Result<Vec<(i64, TriggerExecution)>>>()?;
        Ok(finish_page(rows, limit))
    }

    async fn create_project(&self, project: &ProjectRecord) -> Result<()> {
        let quotas = serde_json::to_string(&project.quotas)?;
        let n = self
            .client()
            .await?
            .execute(
                "INSERT INTO projects (name, created, quotas_json) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                &[&project.name, &project.created, &quotas],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "project",
                id: project.name.clone(),
            });
        }
        Ok(())
    }

    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>> {
        self.client()
            .await?
            .query_opt(
                "SELECT name, created, quotas_json FROM projects WHERE name = $1",
                &[&name],
            )
            .await?
            .as_ref()
            .map(project_record)
            .transpose()
    }

    async fn list_projects(&self) -> Result<Vec<ProjectRecord>> {
        self.client()
            .await?
            .query(
                "SELECT name, created, quotas_json FROM projects ORDER BY seq",
                &[],
            )
            .await?
            .iter()
            .map(project_record)
            .collect()
    }

    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()> {
        let quotas = serde_json::to_string(quotas)?;
        let n = self
            .client()
            .await?
            .execute(
                "UPDATE projects SET quotas_json = $2 WHERE name = $1",
                &[&name, &quotas],
            )
            .await?;
        if n == 0 {
            return Err(Error::NotFound {
                what: "project",
                id: name.to_owned(),
            });
        }
        Ok(())
    }

    async fn project_usage(&self, name: &str) -> Result<ProjectUsage> {
        let client = self.client().await?;
        Ok(ProjectUsage {
            interactions: count_in_project(&client, "interactions", name).await?,
            environments: count_in_project(&client, "environments", name).await?,
            credentials: count_in_project(&client, "credentials", name).await?,
            agents: count_in_project(&client, "agents", name).await?,
            webhooks: count_in_project(&client, "webhooks", name).await?,
            triggers: count_in_project(&client, "triggers", name).await?,
        })
    }

    async fn delete_project(&self, name: &str) -> Result<bool> {
        // Its keys go with it (ON DELETE CASCADE).
        Ok(self
            .client()
            .await?
            .execute("DELETE FROM projects WHERE name = $1", &[&name])
            .await?
            > 0)
    }

    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let exists = tx
            .query_opt("SELECT 1 FROM projects WHERE name = $1", &[&key.project])
            .await?
            .is_some();
        if !exists {
            return Err(Error::NotFound {
                what: "project",
                id: key.project.clone(),
            });
        }
        let n = tx
            .execute(
                "INSERT INTO api_keys (id, project, sha256, prefix, created, revoked) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT DO NOTHING",
                &[&key.id, &key.project, &sha256.as_slice(), &key.prefix, &key.created, &key.revoked],
            )
            .await?;
        if n == 0 {
            return Err(Error::AlreadyExists {
                what: "API key",
                id: key.id.clone(),
            });
        }
        tx.commit().await?;
        Ok(())
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>> {
        Ok(self
            .client()
            .await?
            .query(
                "SELECT id, project, prefix, created, revoked FROM api_keys ORDER BY seq",
                &[],
            )
            .await?
            .iter()
            .map(api_key_record)
            .collect())
    }

    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool> {
        Ok(self
            .client()
            .await?
            .execute(
                "UPDATE api_keys SET revoked = $2 WHERE id = $1 AND revoked IS NULL",
                &[&id, &now],
            )
            .await?
            > 0)
    }

    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>> {
        Ok(self
            .client()
            .await?
            .query_opt(
                "SELECT id, project, prefix, created, revoked FROM api_keys WHERE sha256 = $1 AND revoked IS NULL",
                &[&sha256.as_slice()],
            )
            .await?
            .as_ref()
            .map(api_key_record))
    }

    async fn has_api_keys(&self) -> Result<bool> {
        Ok(self
            .client()
            .await?
            .query_opt("SELECT 1 FROM api_keys LIMIT 1", &[])
            .await?
            .is_some())
    }
}
