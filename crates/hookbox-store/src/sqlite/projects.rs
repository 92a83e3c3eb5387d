//! Managed projects and their API keys in SQLite (a key stored only as its SHA-256).

use rusqlite::{Connection, params};
use serde_json::{Map, Value};

use super::documents::{count_in_project, one};
use crate::error::{Error, Result, inserted};
use crate::projects::{
    API_KEY_COLUMNS, ApiKeyRecord, PROJECT_COLUMNS, ProjectRecord, ProjectUsage, USAGE_TABLES,
    api_key_from_row, project_from_row,
};

pub(super) fn create(conn: &Connection, project: &ProjectRecord) -> Result<()> {
    let n = conn.execute(
        "INSERT OR IGNORE INTO projects (name, created, quotas_json) VALUES (?1, ?2, ?3)",
        params![
            project.name,
            project.created,
            serde_json::to_string(&project.quotas)?
        ],
    )?;
    inserted(n > 0, "project", &project.name)
}

pub(super) fn get(conn: &Connection, name: &str) -> Result<Option<ProjectRecord>> {
    one(
        conn,
        &format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE name = ?1"),
        params![name],
        |r| project_from_row(r),
    )
}

pub(super) fn list(conn: &Connection) -> Result<Vec<ProjectRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {PROJECT_COLUMNS} FROM projects ORDER BY rowid"
    ))?
    .query_and_then([], |r| project_from_row(r))?
    .collect()
}

pub(super) fn set_quotas(conn: &Connection, name: &str, quotas: &Map<String, Value>) -> Result<()> {
    let n = conn.execute(
        "UPDATE projects SET quotas_json = ?2 WHERE name = ?1",
        params![name, serde_json::to_string(quotas)?],
    )?;
    if n == 0 {
        return Err(Error::not_found("project", name));
    }
    Ok(())
}

pub(super) fn usage(conn: &Connection, name: &str) -> Result<ProjectUsage> {
    let mut counts = [0; USAGE_TABLES.len()];
    for (count, table) in counts.iter_mut().zip(USAGE_TABLES) {
        *count = count_in_project(conn, table, name)?;
    }
    Ok(ProjectUsage::from_counts(counts))
}

/// The project and its keys.
pub(super) fn delete(conn: &mut Connection, name: &str) -> Result<bool> {
    let tx = conn.savepoint()?;
    tx.execute("DELETE FROM api_keys WHERE project = ?1", params![name])?;
    let n = tx.execute("DELETE FROM projects WHERE name = ?1", params![name])?;
    tx.commit()?;
    Ok(n > 0)
}

pub(super) fn create_api_key(
    conn: &Connection,
    key: &ApiKeyRecord,
    sha256: &[u8; 32],
) -> Result<()> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM projects WHERE name = ?1")?
        .exists(params![key.project])?;
    if !exists {
        return Err(Error::not_found("project", &key.project));
    }
    let n = conn.execute(
        "INSERT OR IGNORE INTO api_keys (id, project, sha256, prefix, created, revoked) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![key.id, key.project, sha256.as_slice(), key.prefix, key.created, key.revoked],
    )?;
    inserted(n > 0, "API key", &key.id)
}

/// Every key, revoked ones included, oldest first.
pub(super) fn list_api_keys(conn: &Connection) -> Result<Vec<ApiKeyRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY rowid"
    ))?
    .query_and_then([], |r| api_key_from_row(r))?
    .collect()
}

pub(super) fn revoke_api_key(conn: &Connection, id: &str, now: &str) -> Result<bool> {
    Ok(conn.execute(
        "UPDATE api_keys SET revoked = ?2 WHERE id = ?1 AND revoked IS NULL",
        params![id, now],
    )? > 0)
}

/// The unrevoked key with this SHA-256.
pub(super) fn find_api_key(conn: &Connection, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>> {
    one(
        conn,
        &format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE sha256 = ?1 AND revoked IS NULL"),
        params![sha256.as_slice()],
        |r| api_key_from_row(r),
    )
}

pub(super) fn has_api_keys(conn: &Connection) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM api_keys LIMIT 1")?
        .exists([])?)
}
