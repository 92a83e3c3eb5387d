//! Credentials in SQLite: metadata columns and the sealed configuration
//! ([`crate::credentials`] seals, opens and reads them).

use hookbox_protocol::api::{Credential, CredentialConfig, CredentialUpdate};
use rusqlite::{Connection, params};

use super::documents::{one, paged};
use crate::credentials::{self, COLUMNS, apply_credential_update};
use crate::crypto::SecretKey;
use crate::error::{Error, Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;

pub(super) fn create(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    config: &CredentialConfig,
    now: &str,
) -> Result<Credential> {
    let (nonce, ct) = credentials::seal(key, project, config)?;
    let n = conn.execute(
        "INSERT OR IGNORE INTO credentials (project, id, type, status, create_time, update_time, nonce, ciphertext)
         VALUES (?1, ?2, ?3, 'active', ?4, ?4, ?5, ?6)",
        params![project, config.id(), config.kind().as_str(), now, nonce, ct],
    )?;
    inserted(n > 0, "credential", config.id())?;
    Ok(credentials::created(config, now))
}

/// Metadata only.
pub(super) fn get(conn: &Connection, project: &str, id: &str) -> Result<Option<Credential>> {
    one(
        conn,
        &format!("SELECT {COLUMNS} FROM credentials WHERE project = ?1 AND id = ?2"),
        params![project, id],
        |r| credentials::from_row(r),
    )
}

/// The decrypted configuration.
pub(super) fn secret(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
) -> Result<Option<CredentialConfig>> {
    one(
        conn,
        "SELECT nonce, ciphertext FROM credentials WHERE project = ?1 AND id = ?2",
        params![project, id],
        |r| credentials::open(key, project, id, &r.bytes(0)?, &r.bytes(1)?),
    )
}

pub(super) fn update(
    conn: &mut Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
    update: &CredentialUpdate,
    now: &str,
) -> Result<Credential> {
    let tx = conn.savepoint()?;
    let stored =
        secret(&tx, key, project, id)?.ok_or_else(|| Error::not_found("credential", id))?;
    let (nonce, ct) =
        credentials::seal(key, project, &apply_credential_update(id, stored, update)?)?;
    tx.execute(
        "UPDATE credentials SET nonce = ?3, ciphertext = ?4, update_time = ?5 WHERE project = ?1 AND id = ?2",
        params![project, id, nonce, ct, now],
    )?;
    let meta = get(&tx, project, id)?.ok_or_else(|| Error::not_found("credential", id))?;
    tx.commit()?;
    Ok(meta)
}

pub(super) fn list(conn: &Connection, project: &str, page: &Page) -> Result<Paged<Credential>> {
    paged(
        conn,
        &format!(
            "SELECT rowid, {COLUMNS} FROM credentials WHERE rowid > ?1 AND project = ?2 ORDER BY rowid LIMIT ?3"
        ),
        params![page.after(), project, page.fetch()],
        page,
        |r| credentials::from_row(r),
    )
}

pub(super) fn delete(conn: &Connection, project: &str, id: &str) -> Result<bool> {
    Ok(conn.execute(
        "DELETE FROM credentials WHERE project = ?1 AND id = ?2",
        params![project, id],
    )? > 0)
}
