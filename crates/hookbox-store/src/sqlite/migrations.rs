//! SQLite's schema: versioned migrations, applied in order at open, each in its transaction;
//! `PRAGMA user_version` records the last one applied. A file written by a newer hookbox is
//! refused, never downgraded.

use rusqlite::Connection;

use crate::error::{Error, Result};

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
    // Environment modes (a column, so `list(mode=)` filters in SQL; rows before it are
    // `on_demand`, the only mode there was) and ephemeral auth tokens, kept as their SHA-256.
    (
        6,
        r#"
ALTER TABLE environments ADD COLUMN mode TEXT NOT NULL DEFAULT 'on_demand';
CREATE INDEX environments_mode ON environments(project, mode);
CREATE TABLE auth_tokens (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    sha256 BLOB NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE INDEX auth_tokens_interaction ON auth_tokens(project, interaction_id);
"#,
    ),
    // The interaction hooks' trace (`pre`, `post`: JSON); rows before it have none.
    (
        7,
        r#"
ALTER TABLE interactions ADD COLUMN hooks_json TEXT;
"#,
    ),
    // The expiry sweep of auth tokens (`purge_expired_auth_tokens`) by index, not a full scan.
    (
        8,
        r#"
CREATE INDEX auth_tokens_expires ON auth_tokens(expires_at);
"#,
    ),
];

/// The latest schema version this build knows.
pub const SCHEMA_VERSION: i64 = 8;

/// Applies the migrations newer than the file's version.
pub(super) fn migrate(conn: &mut Connection) -> Result<()> {
    let current = version(conn)?;
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

/// The schema version recorded in the file.
pub(super) fn version(conn: &Connection) -> Result<i64> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}
