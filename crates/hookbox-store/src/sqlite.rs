//! The SQLite backend of [`Store`]: one database file, WAL journal, versioned migrations.
//!
//! Durability: every trait method is one transaction that has committed when it returns. In WAL
//! mode a commit appends to the `-wal` file with `write()` before returning, so a SIGKILL of
//! hookbox cannot lose it: the bytes are in the kernel. `synchronous=NORMAL` (the default here)
//! skips the fsync per commit, so a *power loss* may drop the last commits (never corrupt the
//! file); `Synchronous::Full` fsyncs every commit and survives power loss too, at a throughput
//! cost. Calls run on tokio's blocking pool, one connection behind a mutex (SQLite serialises
//! writers anyway).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialStatus, CredentialType, CredentialUpdate,
    Interaction, InteractionError, InteractionStatus, Step, Usage,
};
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution};
use rusqlite::{Connection, OptionalExtension, params};

use crate::approvals::{self, ApprovalFilter, ApprovalRecord, ApprovalState, Settle, Settled};
use crate::crypto::SecretKey;
use crate::triggers::{self, RunStart, TriggerRecord};
use crate::webhooks::{
    self, AttemptOutcome, ClaimedDelivery, DeliveryRecord, DeliveryStatus, SigningKey,
    WebhookRecord,
};
use crate::{
    ApiKeyRecord, EnvironmentChange, EnvironmentRecord, Error, InteractionFilter, Page, Paged,
    ProjectRecord, ProjectUsage, Result, StatusUpdate, Store, apply_credential_update,
    credential_aad,
};
use serde_json::{Map, Value};

/// Database file name inside the data dir.
pub const DB_FILE: &str = "hookbox.db";

/// `PRAGMA synchronous` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Safe against process crashes (SIGKILL); the default.
    #[default]
    Normal,
    /// Also safe against power loss; one fsync per commit.
    Full,
}

/// Options of [`SqliteStore::open`].
#[derive(Debug, Clone, Default)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
}

/// Schema migrations, applied in order; `PRAGMA user_version` records the last one applied.
/// Never edit a released migration: append a new one.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r#"
CREATE TABLE interactions (
    id TEXT PRIMARY KEY,
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
CREATE TABLE steps (
    interaction_id TEXT NOT NULL REFERENCES interactions(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    step_json TEXT NOT NULL,
    PRIMARY KEY (interaction_id, idx)
) WITHOUT ROWID;
CREATE TABLE environments (
    id TEXT PRIMARY KEY,
    record_json TEXT NOT NULL
);
CREATE TABLE credentials (
    id TEXT PRIMARY KEY,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    create_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL
);
CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    agent_json TEXT NOT NULL
);
"#,
    ),
    // Projects: every resource gets one (existing rows: `default`); credentials, agents and
    // environments are keyed by (project, id), so two projects may use the same credential id.
    (
        2,
        r#"
ALTER TABLE interactions ADD COLUMN project TEXT NOT NULL DEFAULT 'default';
CREATE INDEX interactions_project ON interactions(project, status);
CREATE TABLE environments_v2 (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    record_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
INSERT INTO environments_v2 (project, id, record_json)
    SELECT 'default', id, record_json FROM environments ORDER BY rowid;
DROP TABLE environments;
ALTER TABLE environments_v2 RENAME TO environments;
CREATE TABLE credentials_v2 (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    create_time TEXT NOT NULL,
    update_time TEXT NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    PRIMARY KEY (project, id)
);
INSERT INTO credentials_v2 (project, id, type, status, create_time, update_time, nonce, ciphertext)
    SELECT 'default', id, type, status, create_time, update_time, nonce, ciphertext
    FROM credentials ORDER BY rowid;
DROP TABLE credentials;
ALTER TABLE credentials_v2 RENAME TO credentials;
CREATE TABLE agents_v2 (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    agent_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
INSERT INTO agents_v2 (project, id, agent_json)
    SELECT 'default', id, agent_json FROM agents ORDER BY rowid;
DROP TABLE agents;
ALTER TABLE agents_v2 RENAME TO agents;
CREATE TABLE projects (
    name TEXT PRIMARY KEY,
    created TEXT NOT NULL,
    quotas_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL REFERENCES projects(name) ON DELETE CASCADE,
    sha256 BLOB NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);
"#,
    ),
    // Webhooks (secrets sealed like credentials) and their outbox.
    (
        3,
        r#"
CREATE TABLE webhooks (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    state TEXT NOT NULL,
    record_json TEXT NOT NULL,
    nonce BLOB NOT NULL,
    ciphertext BLOB NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE TABLE webhook_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    project TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms INTEGER,
    last_status INTEGER,
    last_error TEXT,
    created TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_ms);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(project, webhook_id, seq);
"#,
    ),
    // Triggers (scheduled interactions) and their executions.
    (
        4,
        r#"
CREATE TABLE triggers (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    status TEXT NOT NULL,
    next_run_ms INTEGER,
    record_json TEXT NOT NULL,
    PRIMARY KEY (project, id)
);
CREATE INDEX triggers_due ON triggers(status, next_run_ms);
CREATE TABLE trigger_executions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
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
    // Calls paused for a reviewer: one record each, settled once (`state` leaves 'pending' by
    // a conditional update).
    (
        5,
        r#"
CREATE TABLE approvals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
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
    UNIQUE (project, interaction_id, id)
);
CREATE INDEX approvals_state ON approvals(project, state, seq);
"#,
    ),
];

/// The latest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 5;

/// SQLite-backed [`Store`].
#[derive(Debug, Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    key: Arc<SecretKey>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) `<data_dir>/hookbox.db` with the key from
    /// [`SecretKey::load_or_create`].
    pub fn open_in(data_dir: &Path, options: &SqliteOptions) -> Result<Self> {
        std::fs::create_dir_all(data_dir).map_err(|source| Error::Io {
            path: data_dir.display().to_string(),
            source,
        })?;
        let key = SecretKey::load_or_create(data_dir)?;
        Self::open(&data_dir.join(DB_FILE), key, options)
    }

    /// Opens the database file at `path` and runs pending migrations.
    pub fn open(path: &Path, key: SecretKey, options: &SqliteOptions) -> Result<Self> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(
            None,
            "synchronous",
            match options.synchronous {
                Synchronous::Normal => "NORMAL",
                Synchronous::Full => "FULL",
            },
        )?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            key: Arc::new(key),
            path: path.to_owned(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version recorded in the file.
    pub fn schema_version(&self) -> Result<i64> {
        let conn = self.conn.lock().map_err(|_| Error::Poisoned)?;
        Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    async fn with<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &SecretKey) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let key = Arc::clone(&self.key);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().map_err(|_| Error::Poisoned)?;
            f(&mut guard, &key)
        })
        .await
        .map_err(|e| Error::Join(e.to_string()))?
    }
}

fn migrate(conn: &mut Connection) -> Result<()> {
    let current: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(Error::SchemaTooNew {
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::info!(version, "applied store migration");
    }
    Ok(())
}

fn page_bounds(page: &Page) -> (i64, i64) {
    (crate::page_after(page), i64::from(page.limit()))
}

/// Runs a rowid-paged query of one project returning `(rowid, json)` rows.
fn paged_json(
    conn: &Connection,
    sql: &str,
    project: &str,
    page: &Page,
) -> Result<Paged<(i64, String)>> {
    let (after, limit) = page_bounds(page);
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt
        .query_map(params![after, limit + 1, project], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<rusqlite::Result<Vec<(i64, String)>>>()?;
    Ok(finish_page(rows, limit))
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
    fn put(self, conn: &Connection, project: &str, id: &str, json: &str) -> Result<()> {
        let DocTable { table, column } = self;
        conn.prepare_cached(&format!(
            "INSERT INTO {table} (project, id, {column}) VALUES (?1, ?2, ?3)
             ON CONFLICT(project, id) DO UPDATE SET {column} = excluded.{column}"
        ))?
        .execute(params![project, id, json])?;
        Ok(())
    }

    fn get<T: serde::de::DeserializeOwned>(
        self,
        conn: &Connection,
        project: &str,
        id: &str,
    ) -> Result<Option<T>> {
        let DocTable { table, column } = self;
        let json: Option<String> = conn
            .prepare_cached(&format!(
                "SELECT {column} FROM {table} WHERE project = ?1 AND id = ?2"
            ))?
            .query_row(params![project, id], |r| r.get(0))
            .optional()?;
        Ok(json.map(|j| serde_json::from_str(&j)).transpose()?)
    }

    fn list<T: serde::de::DeserializeOwned>(
        self,
        conn: &Connection,
        project: &str,
        page: &Page,
    ) -> Result<Paged<T>> {
        let DocTable { table, column } = self;
        let rows = paged_json(
            conn,
            &format!(
                "SELECT rowid, {column} FROM {table} WHERE rowid > ?1 AND project = ?3 ORDER BY rowid LIMIT ?2"
            ),
            project,
            page,
        )?;
        Ok(Paged {
            items: rows
                .items
                .into_iter()
                .map(|(_, j)| serde_json::from_str(&j))
                .collect::<std::result::Result<_, _>>()?,
            next_page_token: rows.next_page_token,
        })
    }

    fn delete(self, conn: &Connection, project: &str, id: &str) -> Result<bool> {
        let DocTable { table, .. } = self;
        Ok(conn.execute(
            &format!("DELETE FROM {table} WHERE project = ?1 AND id = ?2"),
            params![project, id],
        )? > 0)
    }

    fn count(self, conn: &Connection, project: &str) -> Result<u64> {
        count_in_project(conn, self.table, project)
    }
}

/// Rows of `table` in `project`. `table` is a constant of this module, never input.
fn count_in_project(conn: &Connection, table: &'static str, project: &str) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM {table} WHERE project = ?1"))?
        .query_row(params![project], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// An interaction to insert, serialised outside the connection's lock.
struct NewInteraction {
    project: String,
    body: Interaction,
    body_json: String,
    usage: Option<String>,
    errors: String,
    steps: Vec<String>,
    now: String,
}

impl NewInteraction {
    fn of(project: &str, interaction: &Interaction) -> Result<Self> {
        let mut body = interaction.clone();
        let steps = std::mem::take(&mut body.steps);
        Ok(NewInteraction {
            project: project.to_owned(),
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

    /// Inserts it and its steps in `tx`; [`Error::AlreadyExists`] on a taken id.
    fn insert(&self, tx: &rusqlite::Transaction<'_>) -> Result<()> {
        let body = &self.body;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO interactions (id, status, agent, environment_id, previous_interaction_id, created, updated, usage_json, errors_json, body_json, project)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                body.id,
                body.status.as_str(),
                body.agent,
                body.environment_id,
                body.previous_interaction_id,
                body.created.clone().unwrap_or_else(|| self.now.clone()),
                body.updated.clone().unwrap_or_else(|| self.now.clone()),
                self.usage,
                self.errors,
                self.body_json,
                self.project
            ],
        )?;
        if inserted == 0 {
            return Err(Error::AlreadyExists {
                what: "interaction",
                id: body.id.clone(),
            });
        }
        for (idx, step) in self.steps.iter().enumerate() {
            tx.execute(
                "INSERT INTO steps (interaction_id, idx, step_json) VALUES (?1, ?2, ?3)",
                params![body.id, idx as i64, step],
            )?;
        }
        Ok(())
    }
}

/// Moves every record `settle` names from `pending` to its state, in `tx`; `false` as soon as
/// one does not move (the caller then rolls back, so none does).
fn settle_in(tx: &rusqlite::Transaction<'_>, project: &str, settle: &Settle) -> Result<bool> {
    let mut update = tx.prepare_cached(
        "UPDATE approvals SET state = ?1, settled_by = ?2, settled_at = ?3, reviewer_reason = ?4
         WHERE project = ?5 AND interaction_id = ?6 AND id = ?7 AND state = 'pending'",
    )?;
    for s in approvals::ordered(settle) {
        if s.state == ApprovalState::Pending {
            return Ok(false);
        }
        let n = update.execute(params![
            s.state.as_str(),
            settle.by,
            settle.now,
            s.reviewer_reason,
            project,
            settle.interaction_id,
            s.id
        ])?;
        if n != 1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The records `settle` names, as they are now (missing ones left out).
fn approvals_named(
    conn: &Connection,
    project: &str,
    settle: &Settle,
) -> Result<Vec<ApprovalRecord>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {} FROM approvals WHERE project = ?1 AND interaction_id = ?2 AND id = ?3",
        approvals::COLUMNS
    ))?;
    let mut out = Vec::new();
    for s in approvals::ordered(settle) {
        if let Some(row) = stmt
            .query_row(params![project, settle.interaction_id, s.id], |r| {
                approval_row(r, 0)
            })
            .optional()?
        {
            out.push(row.record()?);
        }
    }
    Ok(out)
}

/// An approval record's columns ([`approvals::COLUMNS`]) starting at column `at`.
fn approval_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<approvals::Row> {
    Ok(approvals::Row {
        id: r.get(at)?,
        interaction_id: r.get(at + 1)?,
        call_id: r.get(at + 2)?,
        environment_id: r.get(at + 3)?,
        tool: r.get(at + 4)?,
        args_json: r.get(at + 5)?,
        args_sha256: r.get(at + 6)?,
        reason: r.get(at + 7)?,
        hook_group: r.get(at + 8)?,
        expires_at: r.get(at + 9)?,
        created: r.get(at + 10)?,
        state: r.get(at + 11)?,
        settled_by: r.get(at + 12)?,
        settled_at: r.get(at + 13)?,
        reviewer_reason: r.get(at + 14)?,
    })
}

fn finish_page<T>(mut rows: Vec<(i64, T)>, limit: i64) -> Paged<(i64, T)> {
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let next_page_token = if more {
        rows.last().map(|(rowid, _)| rowid.to_string())
    } else {
        None
    };
    Paged {
        items: rows,
        next_page_token,
    }
}

fn credential_from_row(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn credential_meta(
    (id, kind, status, create_time, update_time): (String, String, String, String, String),
) -> Result<Credential> {
    let kind: CredentialType = serde_json::from_value(serde_json::Value::String(kind))?;
    let status: CredentialStatus = serde_json::from_value(serde_json::Value::String(status))?;
    Ok(Credential {
        id,
        kind,
        status,
        create_time,
        update_time,
    })
}

fn read_interaction(conn: &Connection, project: &str, id: &str) -> Result<Option<Interaction>> {
    let row = conn
        .prepare_cached(
            "SELECT status, updated, usage_json, errors_json, body_json FROM interactions WHERE id = ?1 AND project = ?2",
        )?
        .query_row(params![id, project], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })
        .optional()?;
    let Some((status, updated, usage, errors, body)) = row else {
        return Ok(None);
    };
    let mut interaction: Interaction = serde_json::from_str(&body)?;
    interaction.status = InteractionStatus::parse(&status).unwrap_or(InteractionStatus::Failed);
    interaction.updated = Some(updated);
    interaction.usage = usage
        .map(|u| serde_json::from_str::<Usage>(&u))
        .transpose()?;
    interaction.errors = serde_json::from_str::<Vec<InteractionError>>(&errors)?;
    let mut stmt =
        conn.prepare_cached("SELECT step_json FROM steps WHERE interaction_id = ?1 ORDER BY idx")?;
    interaction.steps = stmt
        .query_map(params![id], |r| r.get::<_, String>(0))?
        .map(|s| Ok(serde_json::from_str::<Step>(&s?)?))
        .collect::<Result<Vec<Step>>>()?;
    Ok(Some(interaction))
}

/// A webhook's record with its sealed keys opened, read inside `conn`'s transaction.
fn read_webhook(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
) -> Result<Option<(WebhookRecord, Vec<SigningKey>)>> {
    let row = conn
        .prepare_cached(
            "SELECT record_json, nonce, ciphertext FROM webhooks WHERE project = ?1 AND id = ?2",
        )?
        .query_row(params![project, id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .optional()?;
    row.map(|(json, nonce, ct)| webhooks::open_row(key, project, id, &json, &nonce, &ct))
        .transpose()
}

/// Writes a webhook's record (and, when given, its keys sealed anew).
fn write_webhook(
    conn: &Connection,
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
            conn.prepare_cached(
                "UPDATE webhooks SET state = ?3, record_json = ?4, nonce = ?5, ciphertext = ?6 WHERE project = ?1 AND id = ?2",
            )?
            .execute(params![project, id, state, json, nonce, ct])?;
        }
        None => {
            conn.prepare_cached(
                "UPDATE webhooks SET state = ?3, record_json = ?4 WHERE project = ?1 AND id = ?2",
            )?
            .execute(params![project, id, state, json])?;
        }
    }
    Ok(())
}

/// Writes one pending delivery of `kind` for each webhook of `project` that wants it (only
/// `only`, when given), inside `conn`'s transaction; their ids.
fn enqueue_in(
    conn: &Connection,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let records = conn
        .prepare_cached(
            "SELECT record_json FROM webhooks WHERE project = ?1 AND (?2 IS NULL OR id = ?2) ORDER BY rowid",
        )?
        .query_map(params![project, only], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let now_ms = webhooks::now_ms();
    let mut ids = Vec::new();
    for json in records {
        let record: WebhookRecord = serde_json::from_str(&json)?;
        if !webhooks::wants(&record, kind) {
            continue;
        }
        let id = webhooks::new_delivery_id();
        let body = webhooks::event_body(&id, kind, now, data)?;
        conn.prepare_cached(
            "INSERT INTO webhook_deliveries (id, project, webhook_id, event_type, payload_json, status, next_attempt_ms, created, created_ms, updated)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?6, ?7)",
        )?
        .execute(params![id, project, record.webhook.id, kind, body, now_ms, now])?;
        ids.push(id);
    }
    Ok(ids)
}

fn read_trigger(conn: &Connection, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
    TRIGGERS.get(conn, project, id)
}

fn write_trigger(conn: &Connection, project: &str, record: &TriggerRecord) -> Result<()> {
    conn.prepare_cached(
        "UPDATE triggers SET status = ?3, next_run_ms = ?4, record_json = ?5 WHERE project = ?1 AND id = ?2",
    )?
    .execute(params![
        project,
        record.trigger.id,
        record.trigger.status.as_str(),
        record.next_run_ms,
        serde_json::to_string(record)?
    ])?;
    Ok(())
}

fn read_execution(conn: &Connection, project: &str, id: &str) -> Result<Option<TriggerExecution>> {
    let json: Option<String> = conn
        .prepare_cached(
            "SELECT record_json FROM trigger_executions WHERE project = ?1 AND id = ?2",
        )?
        .query_row(params![project, id], |r| r.get(0))
        .optional()?;
    Ok(json.map(|j| serde_json::from_str(&j)).transpose()?)
}

fn write_execution(conn: &Connection, execution: &TriggerExecution) -> Result<()> {
    conn.prepare_cached(
        "UPDATE trigger_executions SET status = ?2, interaction_id = ?3, record_json = ?4 WHERE id = ?1",
    )?
    .execute(params![
        execution.id,
        execution.status.as_str(),
        execution.interaction_id,
        serde_json::to_string(execution)?
    ])?;
    Ok(())
}

/// Ends `execution` of `project` (and counts it for its trigger), inside `conn`'s transaction.
fn end_execution_in(
    conn: &Connection,
    project: &str,
    mut execution: TriggerExecution,
    status: ExecutionStatus,
    error: Option<String>,
    now: &str,
) -> Result<bool> {
    let mut trigger = read_trigger(conn, project, &execution.trigger_id)?;
    if !triggers::end_execution(trigger.as_mut(), &mut execution, status, error, now) {
        return Ok(false);
    }
    write_execution(conn, &execution)?;
    if let Some(trigger) = &trigger {
        write_trigger(conn, project, trigger)?;
    }
    Ok(true)
}

/// Ends the running executions that created interaction `id`, now that it ended `status`.
fn end_executions_of(
    conn: &Connection,
    interaction_id: &str,
    status: InteractionStatus,
    now: &str,
) -> Result<()> {
    let Some((end, error)) = triggers::execution_end(status) else {
        return Ok(());
    };
    let rows = conn
        .prepare_cached(
            "SELECT project, record_json FROM trigger_executions WHERE interaction_id = ?1 AND status = 'in_progress'",
        )?
        .query_map(params![interaction_id], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    for (project, json) in rows {
        end_execution_in(
            conn,
            &project,
            serde_json::from_str(&json)?,
            end,
            error.clone(),
            now,
        )?;
    }
    Ok(())
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()> {
        let row = NewInteraction::of(project, interaction)?;
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            row.insert(&tx)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled> {
        let row = NewInteraction::of(project, interaction)?;
        let (project, settle) = (project.to_owned(), settle.clone());
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            if !settle_in(&tx, &project, &settle)? {
                drop(tx);
                return Ok(Settled::Refused(approvals_named(conn, &project, &settle)?));
            }
            row.insert(&tx)?;
            let won = approvals_named(&tx, &project, &settle)?;
            tx.commit()?;
            Ok(Settled::Won(won))
        })
        .await
    }

    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled> {
        let (project, settle) = (project.to_owned(), settle.clone());
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            if !settle_in(&tx, &project, &settle)? {
                drop(tx);
                return Ok(Settled::Refused(approvals_named(conn, &project, &settle)?));
            }
            let won = approvals_named(&tx, &project, &settle)?;
            tx.commit()?;
            Ok(Settled::Won(won))
        })
        .await
    }

    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()> {
        let (project, record) = (project.to_owned(), record.clone());
        let args = serde_json::to_string(&record.args)?;
        self.with(move |conn, _| {
            let n = conn
                .prepare_cached(
                    "INSERT OR IGNORE INTO approvals (project, id, interaction_id, call_id, environment_id, tool, args_json, args_sha256, reason, hook_group, expires_at, created, state, settled_by, settled_at, reviewer_reason)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                )?
                .execute(params![
                    project,
                    record.id,
                    record.interaction_id,
                    record.call_id,
                    record.environment_id,
                    record.tool,
                    args,
                    record.args_sha256,
                    record.reason,
                    record.hook_group,
                    record.expires_at,
                    record.created,
                    record.state.as_str(),
                    record.settled_by,
                    record.settled_at,
                    record.reviewer_reason
                ])?;
            if n == 0 {
                return Err(Error::AlreadyExists {
                    what: "approval request",
                    id: format!("{}/{}", record.interaction_id, record.id),
                });
            }
            Ok(())
        })
        .await
    }

    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>> {
        let project = project.to_owned();
        let interaction = filter.interaction_id.clone();
        let state = filter.state.map(ApprovalState::as_str);
        let (after, limit) = page_bounds(page);
        self.with(move |conn, _| {
            let rows = conn
                .prepare_cached(&format!(
                    "SELECT seq, {} FROM approvals WHERE project = ?1 AND seq > ?2
                       AND (?3 IS NULL OR interaction_id = ?3) AND (?4 IS NULL OR state = ?4)
                     ORDER BY seq LIMIT ?5",
                    approvals::COLUMNS
                ))?
                .query_map(
                    params![project, after, interaction, state, limit + 1],
                    |r| Ok((r.get::<_, i64>(0)?, approval_row(r, 1)?)),
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let page = finish_page(rows, limit);
            Ok(Paged {
                items: page
                    .items
                    .into_iter()
                    .map(|(_, row)| row.record())
                    .collect::<Result<_>>()?,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64> {
        let (project, interaction_id) = (project.to_owned(), interaction_id.to_owned());
        self.with(move |conn, _| {
            Ok(conn.execute(
                "DELETE FROM approvals WHERE project = ?1 AND interaction_id = ?2 AND state = 'pending'",
                params![project, interaction_id],
            )? as u64)
        })
        .await
    }

    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()> {
        let id = interaction_id.to_owned();
        let json = serde_json::to_string(step)?;
        let idx = i64::try_from(index).unwrap_or(i64::MAX);
        self.with(move |conn, _| {
            let exists = conn
                .prepare_cached("SELECT 1 FROM interactions WHERE id = ?1")?
                .exists(params![id])?;
            if !exists {
                return Err(Error::NotFound {
                    what: "interaction",
                    id,
                });
            }
            conn.prepare_cached(
                "INSERT OR REPLACE INTO steps (interaction_id, idx, step_json) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![id, idx, json])?;
            Ok(())
        })
        .await
    }

    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()> {
        let id = interaction_id.to_owned();
        let usage = update
            .usage
            .as_ref()
            .map(serde_json::to_string)
            .transpose()?;
        let errors = serde_json::to_string(&update.errors)?;
        let status = update.status.as_str();
        let updated = update.updated.clone();
        let new_status = update.status;
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some((old, project, environment)) = tx
                .prepare_cached(
                    "SELECT status, project, environment_id FROM interactions WHERE id = ?1",
                )?
                .query_row(params![id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                })
                .optional()?
            else {
                return Err(Error::NotFound { what: "interaction", id });
            };
            tx.prepare_cached(
                "UPDATE interactions SET status = ?2, usage_json = COALESCE(?3, usage_json), errors_json = ?4, updated = ?5 WHERE id = ?1",
            )?
            .execute(params![id, status, usage, errors, updated])?;
            if let Some(kind) =
                crate::webhooks::interaction_event(InteractionStatus::parse(&old), new_status)
            {
                let data =
                    crate::webhooks::interaction_data(&id, new_status, environment.as_deref());
                enqueue_in(&tx, &project, kind, &data, None, &updated)?;
            }
            end_executions_of(&tx, &id, new_status, &updated)?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| read_interaction(conn, &project, &id))
            .await
    }

    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let n = tx.execute(
                "DELETE FROM interactions WHERE id = ?1 AND project = ?2",
                params![id, project],
            )?;
            if n > 0 {
                tx.execute("DELETE FROM steps WHERE interaction_id = ?1", params![id])?;
                tx.execute(
                    "DELETE FROM approvals WHERE project = ?1 AND interaction_id = ?2",
                    params![project, id],
                )?;
            }
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>> {
        let (project, filter) = (project.to_owned(), filter.clone());
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        self.with(move |conn, _| {
            let rows = conn
                .prepare_cached(
                    "SELECT rowid, status, updated, usage_json, errors_json, body_json FROM interactions
                     WHERE project = ?1 AND rowid < ?2
                       AND (?3 IS NULL OR status = ?3) AND (?4 IS NULL OR agent = ?4)
                       AND (?5 IS NULL OR environment_id = ?5)
                       AND (?6 IS NULL OR created >= ?6) AND (?7 IS NULL OR created < ?7)
                     ORDER BY rowid DESC LIMIT ?8",
                )?
                .query_map(
                    params![
                        project,
                        before,
                        filter.status,
                        filter.agent,
                        filter.environment_id,
                        filter.created_after,
                        filter.created_before,
                        limit + 1
                    ],
                    |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            (
                                r.get::<_, String>(1)?,
                                r.get::<_, String>(2)?,
                                r.get::<_, Option<String>>(3)?,
                                r.get::<_, String>(4)?,
                                r.get::<_, String>(5)?,
                            ),
                        ))
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let page = finish_page(rows, limit);
            Ok(Paged {
                items: page
                    .items
                    .into_iter()
                    .map(|(_, (status, updated, usage, errors, body))| {
                        crate::listed_interaction(&status, updated, usage.as_deref(), &errors, &body)
                    })
                    .collect::<Result<_>>()?,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn count_running_interactions(&self, project: &str) -> Result<u64> {
        let project = project.to_owned();
        self.with(move |conn, _| {
            let n: i64 = conn
                .prepare_cached(
                    "SELECT COUNT(*) FROM interactions WHERE project = ?1 AND status IN ('queued', 'in_progress')",
                )?
                .query_row(params![project], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>> {
        let errors = serde_json::to_string(&[InteractionError {
            code: "interrupted".into(),
            message: reason.to_owned(),
        }])?;
        let now = now.to_owned();
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let rows = tx
                .prepare("SELECT id, project, environment_id FROM interactions WHERE status IN ('queued', 'in_progress') ORDER BY rowid")?
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            tx.execute(
                "UPDATE interactions SET status = 'failed', errors_json = ?1, updated = ?2 WHERE status IN ('queued', 'in_progress')",
                params![errors, now],
            )?;
            for (id, project, environment) in &rows {
                let data = crate::webhooks::interaction_data(
                    id,
                    InteractionStatus::Failed,
                    environment.as_deref(),
                );
                enqueue_in(&tx, project, "interaction.failed", &data, None, &now)?;
                end_executions_of(&tx, id, InteractionStatus::Failed, &now)?;
            }
            tx.commit()?;
            Ok(rows.into_iter().map(|(id, _, _)| id).collect())
        })
        .await
    }

    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()> {
        let (project, id) = (project.to_owned(), env.environment.id.clone());
        let json = serde_json::to_string(env)?;
        self.with(move |conn, _| ENVIRONMENTS.put(conn, &project, &id, &json))
            .await
    }

    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| ENVIRONMENTS.get(conn, &project, &id))
            .await
    }

    async fn list_environments(
        &self,
        project: &str,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.with(move |conn, _| ENVIRONMENTS.list(conn, &project, &page))
            .await
    }

    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| ENVIRONMENTS.delete(conn, &project, &id))
            .await
    }

    async fn count_environments(&self, project: &str) -> Result<u64> {
        let project = project.to_owned();
        self.with(move |conn, _| ENVIRONMENTS.count(conn, &project))
            .await
    }

    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>> {
        let (project, id, change) = (project.to_owned(), id.to_owned(), change.clone());
        // One connection behind a lock: the read and the write cannot interleave with another.
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(mut record) = ENVIRONMENTS.get::<EnvironmentRecord>(&tx, &project, &id)?
            else {
                return Ok(None);
            };
            if crate::apply_environment_change(&mut record, &change) {
                ENVIRONMENTS.put(&tx, &project, &id, &serde_json::to_string(&record)?)?;
            }
            tx.commit()?;
            Ok(Some(record))
        })
        .await
    }

    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>> {
        let page = page.clone();
        self.with(move |conn, _| {
            let after = crate::page_after(&page);
            let limit = i64::from(page.limit());
            let rows = conn
                .prepare_cached(
                    "SELECT rowid, project, record_json FROM environments WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
                )?
                .query_map(params![after, limit + 1], |r| {
                    Ok((r.get::<_, i64>(0)?, (r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let rows = rows
                .into_iter()
                .map(|(seq, (project, json))| Ok((seq, (project, serde_json::from_str(&json)?))))
                .collect::<Result<Vec<(i64, (String, EnvironmentRecord))>>>()?;
            let page = finish_page(rows, limit);
            Ok(Paged {
                items: page.items.into_iter().map(|(_, item)| item).collect(),
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential> {
        let config = config.clone();
        let (project, now) = (project.to_owned(), now.to_owned());
        self.with(move |conn, key| {
            let id = config.id().to_owned();
            let plaintext = serde_json::to_vec(&config)?;
            let (nonce, ct) = key.seal(&credential_aad(&project, &id), &plaintext)?;
            let kind = config.kind().as_str();
            let n = conn.execute(
                "INSERT OR IGNORE INTO credentials (project, id, type, status, create_time, update_time, nonce, ciphertext)
                 VALUES (?6, ?1, ?2, 'active', ?3, ?3, ?4, ?5)",
                params![id, kind, now, nonce, ct, project],
            )?;
            if n == 0 {
                return Err(Error::AlreadyExists { what: "credential", id });
            }
            Ok(Credential {
                id,
                kind: config.kind(),
                status: CredentialStatus::Active,
                create_time: now.clone(),
                update_time: now,
            })
        })
        .await
    }

    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| {
            conn.prepare_cached(
                "SELECT id, type, status, create_time, update_time FROM credentials WHERE project = ?1 AND id = ?2",
            )?
            .query_row(params![project, id], credential_from_row)
            .optional()?
            .map(credential_meta)
            .transpose()
        })
        .await
    }

    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, key| read_secret(conn, key, &project, &id))
            .await
    }

    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential> {
        let (project, id) = (project.to_owned(), id.to_owned());
        let update = update.clone();
        let now = now.to_owned();
        self.with(move |conn, key| {
            let tx = conn.transaction()?;
            let stored = read_secret(&tx, key, &project, &id)?.ok_or_else(|| Error::NotFound {
                what: "credential",
                id: id.clone(),
            })?;
            let updated = apply_credential_update(&id, stored, &update)?;
            let (nonce, ct) = key.seal(
                &credential_aad(&project, &id),
                &serde_json::to_vec(&updated)?,
            )?;
            tx.execute(
                "UPDATE credentials SET nonce = ?2, ciphertext = ?3, update_time = ?4 WHERE id = ?1 AND project = ?5",
                params![id, nonce, ct, now, project],
            )?;
            let meta = tx
                .query_row(
                    "SELECT id, type, status, create_time, update_time FROM credentials WHERE id = ?1 AND project = ?2",
                    params![id, project],
                    credential_from_row,
                )
                .map_err(Error::from)
                .and_then(credential_meta)?;
            tx.commit()?;
            Ok(meta)
        })
        .await
    }

    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.with(move |conn, _| {
            let (after, limit) = page_bounds(&page);
            let rows = conn
                .prepare_cached(
                    "SELECT rowid, id, type, status, create_time, update_time FROM credentials WHERE rowid > ?1 AND project = ?3 ORDER BY rowid LIMIT ?2",
                )?
                .query_map(params![after, limit + 1, project], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let page = finish_page(rows, limit);
            Ok(Paged {
                items: page
                    .items
                    .into_iter()
                    .map(|(_, row)| credential_meta(row))
                    .collect::<Result<_>>()?,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| {
            Ok(conn.execute(
                "DELETE FROM credentials WHERE project = ?1 AND id = ?2",
                params![project, id],
            )? > 0)
        })
        .await
    }

    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()> {
        let id = agent.id.clone().ok_or_else(|| Error::NotFound {
            what: "agent",
            id: String::new(),
        })?;
        let project = project.to_owned();
        let json = serde_json::to_string(agent)?;
        self.with(move |conn, _| AGENTS.put(conn, &project, &id, &json))
            .await
    }

    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| AGENTS.get(conn, &project, &id))
            .await
    }

    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.with(move |conn, _| AGENTS.list(conn, &project, &page))
            .await
    }

    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| AGENTS.delete(conn, &project, &id))
            .await
    }

    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()> {
        let (project, record, signing) = (project.to_owned(), record.clone(), key.clone());
        self.with(move |conn, key| {
            let id = record.webhook.id.clone();
            let (nonce, ct) = webhooks::seal_keys(key, &project, &id, &[signing])?;
            let n = conn.execute(
                "INSERT OR IGNORE INTO webhooks (project, id, state, record_json, nonce, ciphertext) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    project,
                    id,
                    record.webhook.state.as_str(),
                    serde_json::to_string(&record)?,
                    nonce,
                    ct
                ],
            )?;
            if n == 0 {
                return Err(Error::AlreadyExists { what: "webhook", id });
            }
            Ok(())
        })
        .await
    }

    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id, now) = (project.to_owned(), id.to_owned(), now.to_owned());
        self.with(move |conn, key| {
            Ok(
                read_webhook(conn, key, &project, &id)?.map(|(mut record, keys)| {
                    webhooks::show_secrets(&mut record, &keys, &now);
                    record
                }),
            )
        })
        .await
    }

    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>> {
        let (project, page, now) = (project.to_owned(), page.clone(), now.to_owned());
        self.with(move |conn, key| {
            let (after, limit) = page_bounds(&page);
            let rows = conn
                .prepare_cached(
                    "SELECT rowid, id, record_json, nonce, ciphertext FROM webhooks WHERE rowid > ?1 AND project = ?3 ORDER BY rowid LIMIT ?2",
                )?
                .query_map(params![after, limit + 1, project], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        (
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, Vec<u8>>(3)?,
                            r.get::<_, Vec<u8>>(4)?,
                        ),
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let rows = finish_page(rows, limit);
            let mut items = Vec::new();
            for (_, (id, json, nonce, ct)) in rows.items {
                let (mut record, keys) = webhooks::open_row(key, &project, &id, &json, &nonce, &ct)?;
                webhooks::show_secrets(&mut record, &keys, &now);
                items.push(record);
            }
            Ok(Paged {
                items,
                next_page_token: rows.next_page_token,
            })
        })
        .await
    }

    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::webhooks::WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id, update, now) = (
            project.to_owned(),
            id.to_owned(),
            update.clone(),
            now.to_owned(),
        );
        self.with(move |conn, key| {
            let tx = conn.transaction()?;
            let Some((mut record, keys)) = read_webhook(&tx, key, &project, &id)? else {
                return Ok(None);
            };
            webhooks::apply_update(&mut record, &update, &now);
            write_webhook(&tx, key, &project, &record, None)?;
            tx.commit()?;
            webhooks::show_secrets(&mut record, &keys, &now);
            Ok(Some(record))
        })
        .await
    }

    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id, new, previous_expire, now) = (
            project.to_owned(),
            id.to_owned(),
            new.clone(),
            previous_expire.map(str::to_owned),
            now.to_owned(),
        );
        self.with(move |conn, key| {
            let tx = conn.transaction()?;
            let Some((mut record, keys)) = read_webhook(&tx, key, &project, &id)? else {
                return Ok(None);
            };
            let keys = webhooks::rotate(keys, new, previous_expire.as_deref(), &now);
            record.webhook.update_time = now.clone();
            write_webhook(&tx, key, &project, &record, Some(&keys))?;
            tx.commit()?;
            webhooks::show_secrets(&mut record, &keys, &now);
            Ok(Some(record))
        })
        .await
    }

    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let n = tx.execute(
                "DELETE FROM webhooks WHERE project = ?1 AND id = ?2",
                params![project, id],
            )?;
            tx.execute(
                "DELETE FROM webhook_deliveries WHERE project = ?1 AND webhook_id = ?2",
                params![project, id],
            )?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>> {
        let (project, id, now) = (project.to_owned(), id.to_owned(), now.to_owned());
        self.with(move |conn, key| {
            Ok(read_webhook(conn, key, &project, &id)?
                .map(|(_, keys)| keys.into_iter().filter(|k| k.live_at(&now)).collect()))
        })
        .await
    }

    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>> {
        let (project, kind, data, only, now) = (
            project.to_owned(),
            kind.to_owned(),
            data.clone(),
            only.map(str::to_owned),
            now.to_owned(),
        );
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let ids = enqueue_in(&tx, &project, &kind, &data, only.as_deref(), &now)?;
            tx.commit()?;
            Ok(ids)
        })
        .await
    }

    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let rows = tx
                .prepare_cached(
                    "SELECT d.id, d.project, d.webhook_id, d.event_type, d.payload_json, d.attempts, d.created_ms, w.record_json
                     FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
                     WHERE d.status = 'pending' AND d.next_attempt_ms <= ?1
                       AND (w.state = 'enabled' OR d.event_type = ?3)
                     ORDER BY d.next_attempt_ms, d.seq LIMIT ?2",
                )?
                .query_map(
                    params![now_ms, i64::from(limit), hookbox_protocol::webhooks::PING_EVENT],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, i64>(5)?,
                            r.get::<_, i64>(6)?,
                            r.get::<_, String>(7)?,
                        ))
                    },
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut claimed = Vec::new();
            for (id, project, webhook_id, event_type, payload, attempts, created_ms, record) in rows
            {
                tx.prepare_cached(
                    "UPDATE webhook_deliveries SET next_attempt_ms = ?2 WHERE id = ?1",
                )?
                .execute(params![id, lease_until_ms])?;
                let record: WebhookRecord = serde_json::from_str(&record)?;
                claimed.push(ClaimedDelivery {
                    id,
                    project,
                    webhook_id,
                    event_type,
                    uri: record.webhook.uri,
                    payload,
                    attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                    created_ms,
                });
            }
            tx.commit()?;
            Ok(claimed)
        })
        .await
    }

    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()> {
        let (id, outcome, now) = (id.to_owned(), outcome.clone(), now.to_owned());
        self.with(move |conn, key| {
            let tx = conn.transaction()?;
            let Some((project, webhook_id)) = tx
                .prepare_cached("SELECT project, webhook_id FROM webhook_deliveries WHERE id = ?1")?
                .query_row(params![id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
                .optional()?
            else {
                // Deleted with its webhook meanwhile.
                return Ok(());
            };
            let webhook = read_webhook(&tx, key, &project, &webhook_id)?;
            match &outcome {
                AttemptOutcome::Delivered { status } => {
                    tx.prepare_cached(
                        "UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, next_attempt_ms = NULL, last_status = ?2, last_error = NULL, updated = ?3 WHERE id = ?1",
                    )?
                    .execute(params![id, status, now])?;
                    if let Some((mut record, _)) = webhook
                        && (record.consecutive_failures > 0 || record.last_error.is_some())
                    {
                        record.consecutive_failures = 0;
                        record.last_error = None;
                        write_webhook(&tx, key, &project, &record, None)?;
                    }
                }
                AttemptOutcome::Failed {
                    error,
                    status,
                    retry_at_ms,
                    disable_after,
                } => {
                    let state = if retry_at_ms.is_some() { "pending" } else { "failed" };
                    tx.prepare_cached(
                        "UPDATE webhook_deliveries SET status = ?2, attempts = attempts + 1, next_attempt_ms = ?3, last_status = ?4, last_error = ?5, updated = ?6 WHERE id = ?1",
                    )?
                    .execute(params![id, state, retry_at_ms, status, error, now])?;
                    if let Some((mut record, _)) = webhook {
                        webhooks::count_failure(&mut record, error, *disable_after, &now);
                        write_webhook(&tx, key, &project, &record, None)?;
                    }
                }
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>> {
        let (project, webhook_id) = (project.to_owned(), webhook_id.to_owned());
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        self.with(move |conn, _| {
            let rows = conn
                .prepare_cached(
                    "SELECT seq, id, event_type, status, attempts, created, updated, last_status, last_error, next_attempt_ms
                     FROM webhook_deliveries WHERE project = ?1 AND webhook_id = ?2 AND seq < ?3
                     ORDER BY seq DESC LIMIT ?4",
                )?
                .query_map(params![project, webhook_id, before, limit + 1], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        (
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, i64>(4)?,
                            r.get::<_, String>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, Option<i64>>(7)?,
                            r.get::<_, Option<String>>(8)?,
                            r.get::<_, Option<i64>>(9)?,
                        ),
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let page = finish_page(rows, limit);
            let items = page
                .items
                .into_iter()
                .map(
                    |(_, (id, event_type, status, attempts, created, updated, last_status, last_error, next))| {
                        let status = DeliveryStatus::parse(&status)?;
                        Ok(DeliveryRecord {
                            id,
                            webhook_id: webhook_id.clone(),
                            event_type,
                            status,
                            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
                            created,
                            updated,
                            last_status: last_status.and_then(|s| u16::try_from(s).ok()),
                            last_error,
                            next_attempt_ms: next.filter(|_| status == DeliveryStatus::Pending),
                        })
                    },
                )
                .collect::<Result<Vec<_>>>()?;
            Ok(Paged {
                items,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>> {
        self.with(move |conn, _| {
            Ok(conn
                .prepare_cached(
                    "SELECT MIN(d.next_attempt_ms) FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
                     WHERE d.status = 'pending' AND (w.state = 'enabled' OR d.event_type = ?1)",
                )?
                .query_row(params![hookbox_protocol::webhooks::PING_EVENT], |r| {
                    r.get::<_, Option<i64>>(0)
                })?)
        })
        .await
    }

    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()> {
        let (project, record) = (project.to_owned(), record.clone());
        self.with(move |conn, _| {
            let id = record.trigger.id.clone();
            let n = conn.execute(
                "INSERT OR IGNORE INTO triggers (project, id, status, next_run_ms, record_json) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    project,
                    id,
                    record.trigger.status.as_str(),
                    record.next_run_ms,
                    serde_json::to_string(&record)?
                ],
            )?;
            if n == 0 {
                return Err(Error::AlreadyExists { what: "trigger", id });
            }
            Ok(())
        })
        .await
    }

    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| read_trigger(conn, &project, &id))
            .await
    }

    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.with(move |conn, _| TRIGGERS.list(conn, &project, &page))
            .await
    }

    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::triggers::TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>> {
        let (project, id, update, now) = (
            project.to_owned(),
            id.to_owned(),
            update.clone(),
            now.to_owned(),
        );
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(mut record) = read_trigger(&tx, &project, &id)? else {
                return Ok(None);
            };
            triggers::apply_update(&mut record, &update, resume_next_ms, &now);
            write_trigger(&tx, &project, &record)?;
            tx.commit()?;
            Ok(Some(record))
        })
        .await
    }

    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let n = tx.execute(
                "DELETE FROM triggers WHERE project = ?1 AND id = ?2",
                params![project, id],
            )?;
            tx.execute(
                "DELETE FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2",
                params![project, id],
            )?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>> {
        self.with(move |conn, _| {
            conn.prepare_cached(
                "SELECT project, record_json FROM triggers WHERE status = 'active' AND next_run_ms <= ?1 ORDER BY next_run_ms LIMIT ?2",
            )?
            .query_map(params![now_ms, i64::from(limit)], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .map(|row| {
                let (project, json) = row?;
                Ok((project, serde_json::from_str(&json)?))
            })
            .collect()
        })
        .await
    }

    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart> {
        let (project, id, scheduled, now) = (
            project.to_owned(),
            id.to_owned(),
            scheduled.to_owned(),
            now.to_owned(),
        );
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(mut record) = read_trigger(&tx, &project, &id)? else {
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
                .prepare_cached(
                    "SELECT 1 FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2 AND status = 'in_progress'",
                )?
                .exists(params![project, id])?;
            let mut execution = TriggerExecution {
                id: triggers::new_execution_id(),
                trigger_id: id.clone(),
                status: ExecutionStatus::InProgress,
                scheduled_time: Some(scheduled),
                start_time: Some(now.clone()),
                end_time: None,
                interaction_id: None,
                environment_id: record.trigger.environment_id.clone(),
                error: None,
            };
            if busy {
                execution.status = ExecutionStatus::Skipped;
                execution.end_time = Some(now.clone());
                execution.error = Some("the previous execution was still running".into());
            } else {
                record.trigger.last_run_time = Some(now.clone());
            }
            tx.prepare_cached(
                "INSERT INTO trigger_executions (id, project, trigger_id, status, record_json) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![
                execution.id,
                project,
                id,
                execution.status.as_str(),
                serde_json::to_string(&execution)?
            ])?;
            write_trigger(&tx, &project, &record)?;
            tx.commit()?;
            Ok(if busy {
                RunStart::Skipped(execution)
            } else {
                RunStart::Run(execution)
            })
        })
        .await
    }

    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()> {
        let (project, execution_id, interaction_id, environment_id, now) = (
            project.to_owned(),
            execution_id.to_owned(),
            interaction_id.to_owned(),
            environment_id.map(str::to_owned),
            now.to_owned(),
        );
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(mut execution) = read_execution(&tx, &project, &execution_id)? else {
                return Ok(());
            };
            execution.interaction_id = Some(interaction_id.clone());
            if environment_id.is_some() {
                execution.environment_id = environment_id;
            }
            write_execution(&tx, &execution)?;
            if let Some(mut trigger) = read_trigger(&tx, &project, &execution.trigger_id)? {
                trigger.trigger.previous_interaction_id = Some(interaction_id.clone());
                write_trigger(&tx, &project, &trigger)?;
            }
            // It may have ended before it was linked.
            let status: Option<String> = tx
                .prepare_cached("SELECT status FROM interactions WHERE id = ?1")?
                .query_row(params![interaction_id], |r| r.get(0))
                .optional()?;
            if let Some(status) = status.as_deref().and_then(InteractionStatus::parse) {
                end_executions_of(&tx, &interaction_id, status, &now)?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn end_trigger_execution(
        &self,
        project: &str,
        execution_id: &str,
        status: ExecutionStatus,
        error: Option<&str>,
        now: &str,
    ) -> Result<bool> {
        let (project, execution_id, error, now) = (
            project.to_owned(),
            execution_id.to_owned(),
            error.map(str::to_owned),
            now.to_owned(),
        );
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            let Some(execution) = read_execution(&tx, &project, &execution_id)? else {
                return Ok(false);
            };
            let ended = end_execution_in(&tx, &project, execution, status, error, &now)?;
            tx.commit()?;
            Ok(ended)
        })
        .await
    }

    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<TriggerExecution>> {
        let (project, trigger_id) = (project.to_owned(), trigger_id.to_owned());
        let before = crate::page_before(page);
        let limit = i64::from(page.limit());
        self.with(move |conn, _| {
            let rows = conn
                .prepare_cached(
                    "SELECT seq, record_json FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
                )?
                .query_map(params![project, trigger_id, before, limit + 1], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let page = finish_page(rows, limit);
            Ok(Paged {
                items: page
                    .items
                    .into_iter()
                    .map(|(_, j)| serde_json::from_str(&j))
                    .collect::<std::result::Result<_, _>>()?,
                next_page_token: page.next_page_token,
            })
        })
        .await
    }

    async fn create_project(&self, project: &ProjectRecord) -> Result<()> {
        let name = project.name.clone();
        let created = project.created.clone();
        let quotas = serde_json::to_string(&project.quotas)?;
        self.with(move |conn, _| {
            let n = conn.execute(
                "INSERT OR IGNORE INTO projects (name, created, quotas_json) VALUES (?1, ?2, ?3)",
                params![name, created, quotas],
            )?;
            if n == 0 {
                return Err(Error::AlreadyExists {
                    what: "project",
                    id: name,
                });
            }
            Ok(())
        })
        .await
    }

    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>> {
        let name = name.to_owned();
        self.with(move |conn, _| {
            conn.prepare_cached("SELECT name, created, quotas_json FROM projects WHERE name = ?1")?
                .query_row(params![name], project_from_row)
                .optional()?
                .map(project_record)
                .transpose()
        })
        .await
    }

    async fn list_projects(&self) -> Result<Vec<ProjectRecord>> {
        self.with(move |conn, _| {
            conn.prepare_cached("SELECT name, created, quotas_json FROM projects ORDER BY rowid")?
                .query_map([], project_from_row)?
                .map(|row| project_record(row?))
                .collect()
        })
        .await
    }

    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()> {
        let name = name.to_owned();
        let quotas = serde_json::to_string(quotas)?;
        self.with(move |conn, _| {
            let n = conn.execute(
                "UPDATE projects SET quotas_json = ?2 WHERE name = ?1",
                params![name, quotas],
            )?;
            if n == 0 {
                return Err(Error::NotFound {
                    what: "project",
                    id: name,
                });
            }
            Ok(())
        })
        .await
    }

    async fn project_usage(&self, name: &str) -> Result<ProjectUsage> {
        let name = name.to_owned();
        self.with(move |conn, _| {
            let count = |table| count_in_project(conn, table, &name);
            Ok(ProjectUsage {
                interactions: count("interactions")?,
                environments: count("environments")?,
                credentials: count("credentials")?,
                agents: count("agents")?,
                webhooks: count("webhooks")?,
                triggers: count("triggers")?,
            })
        })
        .await
    }

    async fn delete_project(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.with(move |conn, _| {
            let tx = conn.transaction()?;
            tx.execute("DELETE FROM api_keys WHERE project = ?1", params![name])?;
            let n = tx.execute("DELETE FROM projects WHERE name = ?1", params![name])?;
            tx.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()> {
        let key = key.clone();
        let hash = sha256.to_vec();
        self.with(move |conn, _| {
            let exists = conn
                .prepare_cached("SELECT 1 FROM projects WHERE name = ?1")?
                .exists(params![key.project])?;
            if !exists {
                return Err(Error::NotFound {
                    what: "project",
                    id: key.project,
                });
            }
            let n = conn.execute(
                "INSERT OR IGNORE INTO api_keys (id, project, sha256, prefix, created, revoked) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![key.id, key.project, hash, key.prefix, key.created, key.revoked],
            )?;
            if n == 0 {
                return Err(Error::AlreadyExists {
                    what: "API key",
                    id: key.id,
                });
            }
            Ok(())
        })
        .await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>> {
        self.with(move |conn, _| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, project, prefix, created, revoked FROM api_keys ORDER BY rowid",
                )?
                .query_map([], api_key_from_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool> {
        let (id, now) = (id.to_owned(), now.to_owned());
        self.with(move |conn, _| {
            Ok(conn.execute(
                "UPDATE api_keys SET revoked = ?2 WHERE id = ?1 AND revoked IS NULL",
                params![id, now],
            )? > 0)
        })
        .await
    }

    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>> {
        let hash = sha256.to_vec();
        self.with(move |conn, _| {
            Ok(conn
                .prepare_cached(
                    "SELECT id, project, prefix, created, revoked FROM api_keys WHERE sha256 = ?1 AND revoked IS NULL",
                )?
                .query_row(params![hash], api_key_from_row)
                .optional()?)
        })
        .await
    }

    async fn has_api_keys(&self) -> Result<bool> {
        self.with(move |conn, _| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM api_keys LIMIT 1")?
                .exists([])?)
        })
        .await
    }
}

fn project_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn project_record((name, created, quotas): (String, String, String)) -> Result<ProjectRecord> {
    Ok(ProjectRecord {
        name,
        created,
        quotas: serde_json::from_str(&quotas)?,
    })
}

fn api_key_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiKeyRecord> {
    Ok(ApiKeyRecord {
        id: r.get(0)?,
        project: r.get(1)?,
        prefix: r.get(2)?,
        created: r.get(3)?,
        revoked: r.get(4)?,
    })
}

fn read_secret(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
) -> Result<Option<CredentialConfig>> {
    let row: Option<(Vec<u8>, Vec<u8>)> = conn
        .prepare_cached("SELECT nonce, ciphertext FROM credentials WHERE project = ?1 AND id = ?2")?
        .query_row(params![project, id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((nonce, ct)) = row else {
        return Ok(None);
    };
    let plain = key.open(&credential_aad(project, id), &nonce, &ct)?;
    Ok(Some(serde_json::from_slice(&plain)?))
}
