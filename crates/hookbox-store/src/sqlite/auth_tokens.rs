//! Ephemeral auth tokens in SQLite, keyed by their SHA-256 (the token itself is never stored).

use rusqlite::{Connection, params};

use super::documents::one;
use crate::auth_tokens::{AUTH_TOKEN_COLUMNS, AuthTokenRecord, auth_token_from_row};
use crate::error::{Result, inserted};

pub(super) fn create(conn: &Connection, token: &AuthTokenRecord, sha256: &[u8; 32]) -> Result<()> {
    let n = conn.execute(
        "INSERT OR IGNORE INTO auth_tokens (id, project, interaction_id, sha256, expires_at, created)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            token.id,
            token.project,
            token.interaction_id,
            sha256.as_slice(),
            token.expires_at,
            token.created
        ],
    )?;
    inserted(n > 0, "auth token", &token.id)
}

pub(super) fn find(conn: &Connection, sha256: &[u8; 32]) -> Result<Option<AuthTokenRecord>> {
    one(
        conn,
        &format!("SELECT {AUTH_TOKEN_COLUMNS} FROM auth_tokens WHERE sha256 = ?1"),
        params![sha256.as_slice()],
        |r| auth_token_from_row(r),
    )
}

pub(super) fn delete(
    conn: &Connection,
    project: &str,
    interaction_id: &str,
    sha256: &[u8; 32],
) -> Result<Option<AuthTokenRecord>> {
    one(
        conn,
        &format!(
            "DELETE FROM auth_tokens WHERE project = ?1 AND interaction_id = ?2 AND sha256 = ?3
             RETURNING {AUTH_TOKEN_COLUMNS}"
        ),
        params![project, interaction_id, sha256.as_slice()],
        |r| auth_token_from_row(r),
    )
}

/// Deletes the tokens that expired before `cutoff`; how many.
pub(super) fn purge_expired(conn: &Connection, cutoff: &str) -> Result<u64> {
    let n = conn.execute(
        "DELETE FROM auth_tokens WHERE expires_at < ?1",
        params![cutoff],
    )?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}
