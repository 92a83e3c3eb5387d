//! Ephemeral auth tokens in PostgreSQL, keyed by their SHA-256 (the token itself is never
//! stored). Every replica reads these rows directly, so a deletion is seen everywhere at once.

use deadpool_postgres::GenericClient;

use super::documents::one;
use crate::auth_tokens::{AUTH_TOKEN_COLUMNS, AuthTokenRecord, auth_token_from_row};
use crate::error::{Result, inserted};

pub(super) async fn create(
    c: &impl GenericClient,
    token: &AuthTokenRecord,
    sha256: &[u8; 32],
) -> Result<()> {
    let n = c
        .execute(
            "INSERT INTO auth_tokens (id, project, interaction_id, sha256, expires_at, created)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            &[
                &token.id,
                &token.project,
                &token.interaction_id,
                &sha256.as_slice(),
                &token.expires_at,
                &token.created,
            ],
        )
        .await?;
    inserted(n > 0, "auth token", &token.id)
}

pub(super) async fn find(
    c: &impl GenericClient,
    sha256: &[u8; 32],
) -> Result<Option<AuthTokenRecord>> {
    one(
        c,
        &format!("SELECT {AUTH_TOKEN_COLUMNS} FROM auth_tokens WHERE sha256 = $1"),
        &[&sha256.as_slice()],
        auth_token_from_row,
    )
    .await
}

pub(super) async fn delete(
    c: &impl GenericClient,
    project: &str,
    interaction_id: &str,
    sha256: &[u8; 32],
) -> Result<Option<AuthTokenRecord>> {
    one(
        c,
        &format!(
            "DELETE FROM auth_tokens WHERE project = $1 AND interaction_id = $2 AND sha256 = $3
             RETURNING {AUTH_TOKEN_COLUMNS}"
        ),
        &[&project, &interaction_id, &sha256.as_slice()],
        auth_token_from_row,
    )
    .await
}

/// Deletes the tokens that expired before `cutoff`; how many. The timestamps are compared as
/// bytes (`COLLATE "C"`), as SQLite and [`AuthTokenRecord::is_live_at`] compare them, whatever
/// the database's collation.
pub(super) async fn purge_expired(c: &impl GenericClient, cutoff: &str) -> Result<u64> {
    Ok(c.execute(
        r#"DELETE FROM auth_tokens WHERE expires_at COLLATE "C" < $1"#,
        &[&cutoff],
    )
    .await?)
}
