//! Credentials in PostgreSQL: metadata columns and the sealed configuration
//! ([`crate::credentials`] seals, opens and reads them).

use deadpool_postgres::{GenericClient, Object};
use hookbox_protocol::api::{Credential, CredentialConfig, CredentialUpdate};

use super::documents::{one, paged};
use crate::credentials::{self, COLUMNS, apply_credential_update};
use crate::crypto::SecretKey;
use crate::error::{Error, Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;

pub(super) async fn create(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    config: &CredentialConfig,
    now: &str,
) -> Result<Credential> {
    let (nonce, ct) = credentials::seal(key, project, config)?;
    let n = c
        .execute(
            "INSERT INTO credentials (project, id, type, status, create_time, update_time, nonce, ciphertext)
             VALUES ($1, $2, $3, 'active', $4, $4, $5, $6) ON CONFLICT (project, id) DO NOTHING",
            &[&project, &config.id(), &config.kind().as_str(), &now, &nonce, &ct],
        )
        .await?;
    inserted(n > 0, "credential", config.id())?;
    Ok(credentials::created(config, now))
}

/// Metadata only.
pub(super) async fn get(
    c: &impl GenericClient,
    project: &str,
    id: &str,
) -> Result<Option<Credential>> {
    one(
        c,
        &format!("SELECT {COLUMNS} FROM credentials WHERE project = $1 AND id = $2"),
        &[&project, &id],
        credentials::from_row,
    )
    .await
}

/// The decrypted configuration; with `lock`, its row is locked until the transaction ends.
pub(super) async fn secret(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
    lock: bool,
) -> Result<Option<CredentialConfig>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    one(
        c,
        &format!("SELECT nonce, ciphertext FROM credentials WHERE project = $1 AND id = $2{lock}"),
        &[&project, &id],
        |r| credentials::open(key, project, id, &r.bytes(0)?, &r.bytes(1)?),
    )
    .await
}

pub(super) async fn update(
    client: &mut Object,
    key: &SecretKey,
    project: &str,
    id: &str,
    update: &CredentialUpdate,
    now: &str,
) -> Result<Credential> {
    let tx = client.transaction().await?;
    // The row is locked for the read-modify-write, as SQLite's single writer does.
    let stored = secret(&tx, key, project, id, true)
        .await?
        .ok_or_else(|| Error::not_found("credential", id))?;
    let (nonce, ct) =
        credentials::seal(key, project, &apply_credential_update(id, stored, update)?)?;
    let row = tx
        .query_one(
            &format!(
                "UPDATE credentials SET nonce = $3, ciphertext = $4, update_time = $5 WHERE project = $1 AND id = $2
                 RETURNING {COLUMNS}"
            ),
            &[&project, &id, &nonce, &ct, &now],
        )
        .await?;
    let meta = credentials::from_row(&row)?;
    tx.commit().await?;
    Ok(meta)
}

pub(super) async fn list(
    c: &impl GenericClient,
    project: &str,
    page: &Page,
) -> Result<Paged<Credential>> {
    paged(
        c,
        &format!(
            "SELECT seq, {COLUMNS} FROM credentials WHERE seq > $1 AND project = $2 ORDER BY seq LIMIT $3"
        ),
        &[&page.after(), &project, &page.fetch()],
        page,
        |r| credentials::from_row(r),
    )
    .await
}

pub(super) async fn delete(c: &impl GenericClient, project: &str, id: &str) -> Result<bool> {
    Ok(c.execute(
        "DELETE FROM credentials WHERE project = $1 AND id = $2",
        &[&project, &id],
    )
    .await?
        > 0)
}
