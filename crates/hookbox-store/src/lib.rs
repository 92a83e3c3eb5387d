//! Durable storage for hookbox: interactions with their steps, environment metadata, credentials
//! (secrets encrypted at rest), agents, and calls paused for a reviewer ([`approvals`]: settled
//! once, by a conditional update).
//!
//! The [`Store`] trait is the only thing the rest of hookbox sees. [`sqlite::SqliteStore`] is the
//! default backend (one file in the data dir, WAL); [`postgres::PostgresStore`] lets several
//! hookbox servers share one database, over TLS as libpq's `sslmode` says ([`pg_tls`]), and
//! coordinates them through the [`Cluster`] trait (leases, heartbeats, quota places, request
//! buckets). Both backends migrate their own schema, seal credentials the same way and pass the
//! same test suite. This crate owns persistence only: it does not run agents, touch sandboxes or
//! speak HTTP, and it never logs a secret value or a database URL.

pub mod approvals;
pub mod crypto;
pub mod keys;
pub mod pg_tls;
pub mod postgres;
pub mod sqlite;
pub mod time;
pub mod triggers;
pub mod webhooks;

use async_trait::async_trait;
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialUpdate, Environment, Interaction,
    InteractionError, InteractionStatus, Step, Usage,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use approvals::{ApprovalFilter, ApprovalRecord, ApprovalState, Settle, Settled, Settlement};
pub use crypto::SecretKey;
pub use postgres::{PostgresCluster, PostgresOptions, PostgresStore};
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use triggers::{RunStart, TriggerRecord};
pub use webhooks::{
    AttemptOutcome, ClaimedDelivery, DeliveryRecord, DeliveryStatus, SigningKey, WebhookRecord,
};

/// The associated data that binds a credential's ciphertext to its project and id. The default
/// project keeps the form used before projects existed, so rows sealed then stay readable.
pub(crate) fn credential_aad(project: &str, id: &str) -> String {
    if project == DEFAULT_PROJECT {
        id.to_owned()
    } else {
        format!("{project}/{id}")
    }
}

/// Opens the store hookbox serves from: `database` a `postgres://` or `postgresql://` URL for
/// PostgreSQL (the credential key from [`SecretKey::load_or_create`] in `data_dir`, which
/// replicas share), else SQLite's file in `data_dir`.
pub async fn open_store(
    data_dir: &std::path::Path,
    database: Option<&str>,
    sqlite: &SqliteOptions,
) -> Result<std::sync::Arc<dyn Store>> {
    match database.filter(|d| !d.is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            std::fs::create_dir_all(data_dir).map_err(|source| Error::Io {
                path: data_dir.display().to_string(),
                source,
            })?;
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

/// Environment variable names this crate reads.
pub mod env_vars {
    /// 32-byte key for credential encryption, base64 or 64 hex digits. Without it the key lives
    /// in `<data dir>/secret.key` (created 0600 on first use).
    pub const HOOKBOX_SECRET_KEY: &str = "HOOKBOX_SECRET_KEY";
    /// A `postgres://` URL: the store is that PostgreSQL database instead of SQLite's file.
    pub const HOOKBOX_DATABASE_URL: &str = "HOOKBOX_DATABASE_URL";
}

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("postgres: {}", postgres_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    #[error("postgres connection pool: {0}")]
    Pool(String),
    /// A setting of the store (its URL, TLS files) is wrong; never repeats the URL.
    #[error("{0}")]
    Config(String),
    #[error(
        "interaction `{interaction}`: environment `{environment}` is now run by another replica (fence {fence} is stale)"
    )]
    Fenced {
        interaction: String,
        environment: String,
        fence: i64,
    },
    #[error("stored JSON is invalid: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{what} `{id}` already exists")]
    AlreadyExists { what: &'static str, id: String },
    #[error("{what} `{id}` not found")]
    NotFound { what: &'static str, id: String },
    #[error("credential `{id}` is of type {stored}, the update is of type {update}")]
    CredentialTypeMismatch {
        id: String,
        stored: &'static str,
        update: &'static str,
    },
    #[error(
        "database schema version {found} is newer than this hookbox supports ({supported}); upgrade hookbox"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("secret key: {0}")]
    Key(String),
    #[error("I/O on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("credential `{0}` could not be decrypted (wrong HOOKBOX_SECRET_KEY or secret.key?)")]
    Decrypt(String),
    #[error("credential encryption failed")]
    Encrypt,
    #[error("the store's lock was poisoned by a panic")]
    Poisoned,
    #[error("background task failed: {0}")]
    Join(String),
}

impl Error {
    /// Whether the store did not answer (down, unreachable, out of connections, busy), as
    /// opposed to refusing the operation: the request may succeed if retried later.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Pool(_) => true,
            Error::Postgres(e) => {
                e.is_closed()
                    || e.as_db_error().is_none_or(|db| {
                        // Class 08 (connection exception), 53 (insufficient resources), 57P0x
                        // (shutdown / cannot connect now).
                        let code = db.code().code();
                        code.starts_with("08") || code.starts_with("53") || code.starts_with("57P0")
                    })
            }
            Error::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy
                    | rusqlite::ErrorCode::DatabaseLocked
                    | rusqlite::ErrorCode::CannotOpen
            ),
            _ => false,
        }
    }
}

/// A PostgreSQL error with the server's message when there is one (tokio-postgres's own Display
/// says only "db error").
fn postgres_message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error_chain(e),
    }
}

/// `e` and its causes, each said once ("error performing TLS handshake: invalid peer
/// certificate: UnknownIssuer"): tokio-postgres and deadpool keep the useful part in the causes.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A page request: `size` items after `token` (an opaque token from the previous page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    pub size: Option<u32>,
    pub token: Option<String>,
}

impl Page {
    /// Default page size.
    pub const DEFAULT_SIZE: u32 = 50;
    /// Largest page served.
    pub const MAX_SIZE: u32 = 1000;

    /// The effective page size.
    pub fn limit(&self) -> u32 {
        self.size
            .filter(|s| *s > 0)
            .unwrap_or(Self::DEFAULT_SIZE)
            .min(Self::MAX_SIZE)
    }
}

/// One page of results and the token for the next one.
#[derive(Debug, Clone, PartialEq)]
pub struct Paged<T> {
    pub items: Vec<T>,
    pub next_page_token: Option<String>,
}

/// An environment as stored: the API resource plus what only the runtime needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentRecord {
    pub environment: Environment,
    /// The embedded environment's `env` map (values or credential references), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Map<String, Value>>,
}

/// A change of one environment's record that must not race another (applied in one
/// transaction by [`Store::change_environment`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvironmentChange {
    /// Sets `last_accessed` to `now`, unless the environment has expired.
    Touch { now: String },
    /// Marks the environment `expired` at `now`, if it is active and was last accessed before
    /// `cutoff` (RFC 3339). A touch that won the race keeps it active.
    Expire { cutoff: String, now: String },
}

/// Applies `change` to `record`; `true` when the record changed and must be written.
pub fn apply_environment_change(
    record: &mut EnvironmentRecord,
    change: &EnvironmentChange,
) -> bool {
    use hookbox_protocol::api::EnvironmentStatus;
    let env = &mut record.environment;
    let expired = env.status == Some(EnvironmentStatus::Expired);
    match change {
        EnvironmentChange::Touch { now } => {
            if expired {
                return false;
            }
            env.last_accessed = Some(now.clone());
            true
        }
        EnvironmentChange::Expire { cutoff, now } => {
            let last = env
                .last_accessed
                .as_deref()
                .or(env.updated.as_deref())
                .or(env.created.as_deref())
                .unwrap_or_default();
            if expired || last >= cutoff.as_str() {
                return false;
            }
            env.status = Some(EnvironmentStatus::Expired);
            env.updated = Some(now.clone());
            true
        }
    }
}

/// Which interactions a listing returns (all given conditions hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InteractionFilter {
    pub status: Option<String>,
    pub agent: Option<String>,
    pub environment_id: Option<String>,
    /// RFC 3339; created at or after.
    pub created_after: Option<String>,
    /// RFC 3339; created before.
    pub created_before: Option<String>,
}

/// How an interaction ended (or changed state).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    pub status: InteractionStatus,
    pub usage: Option<Usage>,
    pub errors: Vec<InteractionError>,
    /// RFC 3339.
    pub updated: String,
}

/// The row position a page token continues after (0: the first page).
pub(crate) fn page_after(page: &Page) -> i64 {
    page.token
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(0)
}

/// The row position a newest-first page token continues before (`i64::MAX`: the first page).
pub(crate) fn page_before(page: &Page) -> i64 {
    page.token
        .as_deref()
        .and_then(|t| t.parse::<i64>().ok())
        .unwrap_or(i64::MAX)
}

/// An interaction row as listed: its stored body with the columns that change over its life.
pub(crate) fn listed_interaction(
    status: &str,
    updated: String,
    usage: Option<&str>,
    errors: &str,
    body: &str,
) -> Result<Interaction> {
    let mut interaction: Interaction = serde_json::from_str(body)?;
    interaction.status = InteractionStatus::parse(status).unwrap_or(InteractionStatus::Failed);
    interaction.updated = Some(updated);
    interaction.usage = usage.map(serde_json::from_str::<Usage>).transpose()?;
    interaction.errors = serde_json::from_str::<Vec<InteractionError>>(errors)?;
    interaction.input = None;
    Ok(interaction)
}

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

/// The project of local mode, and of everything stored before projects existed.
pub const DEFAULT_PROJECT: &str = "default";

/// Whether `name` may name a project: 1-63 lowercase letters, digits, `-` and `_`, starting
/// with a letter or digit.
pub fn valid_project_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// A managed project.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectRecord {
    pub name: String,
    /// RFC 3339.
    pub created: String,
    /// Quota overrides for this project (a JSON object; absent keys use the server's defaults).
    pub quotas: Map<String, Value>,
}

/// A managed API key, without the key: the store keeps only its SHA-256.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyRecord {
    pub id: String,
    pub project: String,
    /// The key's first characters, to tell keys apart in listings.
    pub prefix: String,
    pub created: String,
    /// RFC 3339 of the revocation; a revoked key authenticates nothing.
    pub revoked: Option<String>,
}

/// What a project still holds (a project is removed only when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProjectUsage {
    pub interactions: u64,
    pub environments: u64,
    pub credentials: u64,
    pub agents: u64,
    pub webhooks: u64,
    pub triggers: u64,
}

impl ProjectUsage {
    pub fn is_empty(&self) -> bool {
        *self == ProjectUsage::default()
    }
}

/// The storage seam. Every method is durable when it returns `Ok`: a crash right after cannot
/// lose what it wrote (see [`sqlite`] for what that means per backend).
///
/// Every resource belongs to one project, and every method that names a resource takes the
/// project it is asked from: a resource of another project is [`Error::NotFound`] / `None` /
/// absent from lists, exactly as if it did not exist. (Steps and status updates are written only
/// by the run that owns the interaction, so they go by its globally unique id.)
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Inserts a new interaction (its `steps` are inserted too) into `project`.
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()>;
    /// Appends one step at `index` (the step's position in `steps`).
    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()>;
    /// Sets status, usage, errors and `updated`.
    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()>;
    /// The interaction with all its steps.
    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>>;
    /// Deletes the interaction, its steps and its approval records; `false` if it did not
    /// exist.
    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool>;
    /// Interactions of `project` matching `filter`, newest first, without their steps.
    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>>;
    /// Interactions of `project` that are `queued` or `in_progress`.
    async fn count_running_interactions(&self, project: &str) -> Result<u64>;
    /// Marks every `queued`/`in_progress` interaction `failed` with `reason` (run at start-up:
    /// nothing can still be running them). Returns their ids.
    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>>;

    /// Records a call paused for a reviewer (state `pending`), written by the run that paused
    /// it. [`Error::AlreadyExists`] when its interaction already has a record of that id.
    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()>;
    /// Approval records of `project` matching `filter`, oldest first.
    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>>;
    /// Settles records of one interaction, all or none, each by a conditional update from
    /// `pending`: [`Settled::Refused`] (and nothing changed) when any of them is not pending or
    /// does not exist. Whatever races it (another settlement, on any replica), one wins.
    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled>;
    /// [`Store::create_interaction`] and [`Store::settle_approvals`] in one transaction: the
    /// interaction (the continuation that answers the records) is stored only if the settlement
    /// won, so no stored continuation claims a settlement it lost, and none is lost after a win.
    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled>;
    /// Deletes the `pending` records of an interaction whose run ended without waiting for
    /// them (failed, cancelled): nobody can answer them any more. How many.
    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64>;

    /// Inserts or replaces an environment of `project`.
    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()>;
    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>>;
    async fn list_environments(
        &self,
        project: &str,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>>;
    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool>;
    async fn count_environments(&self, project: &str) -> Result<u64>;
    /// Applies `change` atomically; the record afterwards (changed or not), `None` if there is
    /// none.
    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>>;
    /// Environments of every project with their project, in storage order (for the expiry
    /// sweeper).
    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>>;

    /// Stores a new credential, its secrets encrypted. [`Error::AlreadyExists`] on an id taken
    /// in `project` (other projects may use the same id).
    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential>;
    /// Metadata only.
    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>>;
    /// The decrypted configuration, for the egress proxy. Never return this to a client.
    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>>;
    /// Applies a partial update. [`Error::NotFound`], [`Error::CredentialTypeMismatch`].
    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential>;
    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>>;
    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool>;

    /// Inserts or replaces an agent (its `id` must be set) of `project`.
    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()>;
    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>>;
    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>>;
    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool>;

    /// Stores a new webhook of `project` with its first signing secret (sealed).
    /// [`Error::AlreadyExists`] on a taken id.
    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()>;
    /// The webhook, its live secrets shown truncated.
    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>>;
    /// Applies a (validated) partial update; the record after it, `None` if there is none.
    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::webhooks::WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    /// Makes `new` the current secret; the previous ones expire at `previous_expire` (`None`:
    /// now). The record after it, `None` if there is none.
    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    /// Deletes the webhook and every delivery of it; `false` if it did not exist.
    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool>;
    /// The secrets a delivery is signed with at `now`, in full. Only for the deliverer: never
    /// return them to a client.
    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>>;
    /// Writes one delivery of event `kind` (with `data`) for every webhook of `project` that
    /// wants it, or only for webhook `only` (a ping); their ids. Interaction events are written
    /// by [`Store::update_status`] and the recoveries themselves, in their transaction.
    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>>;
    /// Claims up to `limit` pending deliveries due at `now_ms` (of enabled webhooks; pings
    /// always) until `lease_until_ms`: another claim skips them until then, so a claimer that
    /// dies only delays them.
    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>>;
    /// Records how an attempt of delivery `id` ended, and counts it for its webhook.
    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()>;
    /// Deliveries of one webhook, newest first.
    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>>;
    /// When the next pending delivery of an enabled webhook falls due (unix ms), if any.
    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>>;

    /// Stores a new trigger of `project`. [`Error::AlreadyExists`] on a taken id.
    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()>;
    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>>;
    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>>;
    /// Applies a (validated) update; `resume_next_ms` is the next run if it resumes. The record
    /// after it, `None` if there is none.
    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::triggers::TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>>;
    /// Deletes the trigger and its executions; `false` if it did not exist.
    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool>;
    /// Active triggers of every project whose next run is due at `now_ms`, oldest due first.
    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>>;
    /// Starts a run of trigger `id`, recorded as an execution scheduled at `scheduled`.
    /// `claim`: for a scheduled run, the `next_run_ms` the caller read and the one after it;
    /// the run is [`RunStart::Lost`] unless the stored one is still the first (another replica
    /// took it), and the trigger then moves on to the second. `None`: a manual run (`run`).
    /// Recorded `skipped` while an earlier execution of the trigger still runs.
    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart>;
    /// Links a started execution to the interaction it created (and ends it at once if that
    /// interaction already ended).
    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()>;
    /// Ends a running execution (a time-out, an interaction that could not be created) and
    /// counts it for its trigger; `false` if it had ended already.
    async fn end_trigger_execution(
        &self,
        project: &str,
        execution_id: &str,
        status: hookbox_protocol::triggers::ExecutionStatus,
        error: Option<&str>,
        now: &str,
    ) -> Result<bool>;
    /// Executions of one trigger, newest first.
    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<hookbox_protocol::triggers::TriggerExecution>>;

    /// Creates a managed project. [`Error::AlreadyExists`] on a taken name.
    async fn create_project(&self, project: &ProjectRecord) -> Result<()>;
    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>>;
    async fn list_projects(&self) -> Result<Vec<ProjectRecord>>;
    /// Replaces the project's quota overrides. [`Error::NotFound`].
    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()>;
    /// What the project still holds.
    async fn project_usage(&self, name: &str) -> Result<ProjectUsage>;
    /// Removes a managed project and its keys; `false` if there was none. The caller checks
    /// [`Store::project_usage`] first.
    async fn delete_project(&self, name: &str) -> Result<bool>;

    /// Stores a managed key by the SHA-256 of its value. [`Error::NotFound`] for an unknown
    /// project.
    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()>;
    /// Every managed key (revoked ones included), oldest first.
    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>>;
    /// Revokes a key by id; `false` if there was no such unrevoked key.
    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool>;
    /// The unrevoked key with this SHA-256, if any.
    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>>;
    /// Whether any managed key was ever created and not removed with its project, revoked ones
    /// included: then the server is not in local mode (revoking the last key must not turn
    /// every request, the revoked key's too, into a keyless local-mode request).
    async fn has_api_keys(&self) -> Result<bool>;
}

/// Applies a partial credential update to a stored configuration.
pub fn apply_credential_update(
    id: &str,
    stored: CredentialConfig,
    update: &CredentialUpdate,
) -> Result<CredentialConfig> {
    fn set<T: Clone>(slot: &mut T, v: &Option<T>) {
        if let Some(v) = v {
            *slot = v.clone();
        }
    }
    fn set_opt<T: Clone>(slot: &mut Option<T>, v: &Option<T>) {
        if v.is_some() {
            slot.clone_from(v);
        }
    }
    let mut cfg = stored;
    match (&mut cfg, update) {
        (
            CredentialConfig::BearerToken {
                token,
                header_name,
                prefix,
                ..
            },
            CredentialUpdate::BearerToken {
                token: t,
                header_name: h,
                prefix: p,
            },
        ) => {
            set(token, t);
            set_opt(header_name, h);
            set_opt(prefix, p);
        }
        (
            CredentialConfig::EnvironmentVariable {
                value,
                injection_location,
                trusted_domains,
                ..
            },
            CredentialUpdate::EnvironmentVariable {
                value: v,
                injection_location: l,
                trusted_domains: d,
            },
        ) => {
            set(value, v);
            set(injection_location, l);
            set_opt(trusted_domains, d);
        }
        (
            CredentialConfig::OAuth2 {
                client_id,
                client_secret,
                refresh_token,
                token_url,
                scopes,
                ..
            },
            CredentialUpdate::OAuth2 {
                client_id: ci,
                client_secret: cs,
                refresh_token: rt,
                token_url: tu,
                scopes: sc,
            },
        ) => {
            set(client_id, ci);
            set(client_secret, cs);
            set(refresh_token, rt);
            set(token_url, tu);
            set_opt(scopes, sc);
        }
        (stored, update) => {
            return Err(Error::CredentialTypeMismatch {
                id: id.to_owned(),
                stored: stored.kind().as_str(),
                update: update_kind(update),
            });
        }
    }
    Ok(cfg)
}

fn update_kind(update: &CredentialUpdate) -> &'static str {
    match update {
        CredentialUpdate::BearerToken { .. } => "bearer_token",
        CredentialUpdate::EnvironmentVariable { .. } => "environment_variable",
        CredentialUpdate::OAuth2 { .. } => "oauth2",
    }
}
