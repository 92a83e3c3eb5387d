//! Ephemeral auth tokens in SQLite, keyed by their SHA-256 (the token itself is never stored).

use rusqlite::{Connection, params};

use super::documents::one;
use crate::auth_tokens::{
    AUTH_TOKEN_COLUMNS, AuthTokenRecord, MAX_LIVE_AUTH_TOKENS, auth_token_from_row,
};
use crate::error::{Error, Result, inserted};

/// Counts the tokens of `interaction_id` live at `now`.
const LIVE: &str = "SELECT count(*) FROM auth_tokens
     WHERE project = ?1 AND interaction_id = ?2 AND expires_at > ?3";

/// Stores `token` unless its interaction already has [`MAX_LIVE_AUTH_TOKENS`] live at its
/// creation: the count and the insert are one statement.
pub(super) fn create(conn: &Connection, token: &AuthTokenRecord, sha256: &[u8; 32]) -> Result<()> {
    let n = conn.execute(
        &format!(
            "INSERT OR IGNORE INTO auth_tokens (id, project, interaction_id, sha256, expires_at, created)
             SELECT ?4, ?1, ?2, ?5, ?6, ?3 WHERE ({LIVE}) < ?7"
        ),
        params![
            token.project,
            token.interaction_id,
            token.created,
            token.id,
            sha256.as_slice(),
            token.expires_at,
            MAX_LIVE_AUTH_TOKENS
        ],
    )?;
    if n == 0 {
        let live: i64 = conn.query_row(
            LIVE,
            params![token.project, token.interaction_id, token.created],
            |r| r.get(0),
        )?;
        if live >= i64::from(MAX_LIVE_AUTH_TOKENS) {
            return Err(Error::TooManyAuthTokens {
                interaction: token.interaction_id.clone(),
                limit: MAX_LIVE_AUTH_TOKENS,
            });
        }
    }
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
