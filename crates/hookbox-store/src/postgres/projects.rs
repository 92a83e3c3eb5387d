//! Managed projects and their API keys in PostgreSQL (a key stored only as its SHA-256).

use deadpool_postgres::{GenericClient, Object};
use serde_json::{Map, Value};

use super::documents::{count_in_project, one};
use crate::error::{Error, Result, inserted};
use crate::projects::{
    API_KEY_COLUMNS, ApiKeyRecord, PROJECT_COLUMNS, ProjectRecord, ProjectUsage, USAGE_TABLES,
    api_key_from_row, project_from_row,
};

pub(super) async fn create(c: &impl GenericClient, project: &ProjectRecord) -> Result<()> {
    let n = c
        .execute(
            "INSERT INTO projects (name, created, quotas_json) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
            &[
                &project.name,
                &project.created,
                &serde_json::to_string(&project.quotas)?,
            ],
        )
        .await?;
    inserted(n > 0, "project", &project.name)
}

pub(super) async fn get(c: &impl GenericClient, name: &str) -> Result<Option<ProjectRecord>> {
    one(
        c,
        &format!("SELECT {PROJECT_COLUMNS} FROM projects WHERE name = $1"),
        &[&name],
        project_from_row,
    )
    .await
}

pub(super) async fn list(c: &impl GenericClient) -> Result<Vec<ProjectRecord>> {
    c.query(
        &format!("SELECT {PROJECT_COLUMNS} FROM projects ORDER BY seq"),
        &[],
    )
    .await?
    .iter()
    .map(project_from_row)
    .collect()
}

pub(super) async fn set_quotas(
    c: &impl GenericClient,
    name: &str,
    quotas: &Map<String, Value>,
) -> Result<()> {
    let n = c
        .execute(
            "UPDATE projects SET quotas_json = $2 WHERE name = $1",
            &[&name, &serde_json::to_string(quotas)?],
        )
        .await?;
    if n == 0 {
        return Err(Error::not_found("project", name));
    }
    Ok(())
}

pub(super) async fn usage(c: &impl GenericClient, name: &str) -> Result<ProjectUsage> {
    let mut counts = [0; USAGE_TABLES.len()];
    for (count, table) in counts.iter_mut().zip(USAGE_TABLES) {
        *count = count_in_project(c, table, name).await?;
    }
    Ok(ProjectUsage::from_counts(counts))
}

/// The project and its keys (`ON DELETE CASCADE`).
pub(super) async fn delete(c: &impl GenericClient, name: &str) -> Result<bool> {
    Ok(c.execute("DELETE FROM projects WHERE name = $1", &[&name])
        .await?
        > 0)
}

pub(super) async fn create_api_key(
    client: &mut Object,
    key: &ApiKeyRecord,
    sha256: &[u8; 32],
) -> Result<()> {
    let tx = client.transaction().await?;
    let exists = tx
        .query_opt("SELECT 1 FROM projects WHERE name = $1", &[&key.project])
        .await?
        .is_some();
    if !exists {
        return Err(Error::not_found("project", &key.project));
    }
    let n = tx
        .execute(
            "INSERT INTO api_keys (id, project, sha256, prefix, created, revoked) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT DO NOTHING",
            &[&key.id, &key.project, &sha256.as_slice(), &key.prefix, &key.created, &key.revoked],
        )
        .await?;
    inserted(n > 0, "API key", &key.id)?;
    tx.commit().await?;
    Ok(())
}

/// Every key, revoked ones included, oldest first.
pub(super) async fn list_api_keys(c: &impl GenericClient) -> Result<Vec<ApiKeyRecord>> {
    c.query(
        &format!("SELECT {API_KEY_COLUMNS} FROM api_keys ORDER BY seq"),
        &[],
    )
    .await?
    .iter()
    .map(api_key_from_row)
    .collect()
}

pub(super) async fn revoke_api_key(c: &impl GenericClient, id: &str, now: &str) -> Result<bool> {
    Ok(c.execute(
        "UPDATE api_keys SET revoked = $2 WHERE id = $1 AND revoked IS NULL",
        &[&id, &now],
    )
    .await?
        > 0)
}

/// The unrevoked key with this SHA-256.
pub(super) async fn find_api_key(
    c: &impl GenericClient,
    sha256: &[u8; 32],
) -> Result<Option<ApiKeyRecord>> {
    one(
        c,
        &format!("SELECT {API_KEY_COLUMNS} FROM api_keys WHERE sha256 = $1 AND revoked IS NULL"),
        &[&sha256.as_slice()],
        api_key_from_row,
    )
    .await
}

pub(super) async fn has_api_keys(c: &impl GenericClient) -> Result<bool> {
    Ok(c.query_opt("SELECT 1 FROM api_keys LIMIT 1", &[])
        .await?
        .is_some())
}
