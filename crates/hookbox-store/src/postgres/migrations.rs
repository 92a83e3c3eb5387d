//! PostgreSQL's schema: versioned migrations recorded in `hookbox_schema`, applied at connect
//! in one transaction under an advisory lock, so replicas starting together apply each exactly
//! once. A database migrated by a newer hookbox is refused, never downgraded.

use deadpool_postgres::{GenericClient, Object};

use crate::error::{Error, Result};

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
    // Environment modes and ephemeral auth tokens; SQLite's version 6.
    (
        8,
        r#"
ALTER TABLE environments ADD COLUMN mode TEXT NOT NULL DEFAULT 'on_demand';
CREATE INDEX environments_mode ON environments(project, mode);
CREATE TABLE auth_tokens (
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    sha256 BYTEA NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE INDEX auth_tokens_interaction ON auth_tokens(project, interaction_id);
"#,
    ),
    // The interaction hooks' trace; SQLite's version 7.
    (
        9,
        r#"
ALTER TABLE interactions ADD COLUMN hooks_json TEXT;
"#,
    ),
    // The expiry sweep of auth tokens by index; SQLite's version 8. In the byte order
    // (`COLLATE "C"`) the sweep compares in, whatever the database's collation.
    (
        10,
        r#"
CREATE INDEX auth_tokens_expires ON auth_tokens ((expires_at COLLATE "C"));
"#,
    ),
];

/// The advisory lock migrations run under (an arbitrary constant: "hookbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

/// Applies the migrations newer than the database's version.
pub(super) async fn migrate(client: &mut Object) -> Result<()> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS hookbox_schema (version BIGINT PRIMARY KEY, applied TEXT NOT NULL)",
    )
    .await?;
    let current = version(&tx).await?;
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
pub(super) async fn version(c: &impl GenericClient) -> Result<i64> {
    Ok(
        c.query_one("SELECT COALESCE(MAX(version), 0) FROM hookbox_schema", &[])
            .await?
            .get(0),
    )
}
