//! Ephemeral auth tokens in PostgreSQL, keyed by their SHA-256 (the token itself is never
//! stored). Every replica reads these rows directly, so a deletion is seen everywhere at once.

use deadpool_postgres::{GenericClient, Object};

use super::documents::one;
use crate::auth_tokens::{
    AUTH_TOKEN_COLUMNS, AuthTokenRecord, MAX_LIVE_AUTH_TOKENS, auth_token_from_row,
};
use crate::error::{Error, Result, inserted};

/// Stores `token` unless its interaction already has [`MAX_LIVE_AUTH_TOKENS`] live at its
/// creation. The count and the insert run in one transaction holding an advisory lock on the
/// interaction, so replicas creating its tokens at once take turns and cannot overshoot.
pub(super) async fn create(
    client: &mut Object,
    token: &AuthTokenRecord,
    sha256: &[u8; 32],
) -> Result<()> {
    // READ COMMITTED whatever the database's default: the count must see the rows committed
    // while this waited for the lock (a snapshot taken before the wait would undercount).
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await?;
    let key = format!(
        "hookbox auth_tokens {} {}",
        token.project, token.interaction_id
    );
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
        &[&key],
    )
    .await?;
    let live: i64 = tx
        .query_one(
            r#"SELECT count(*) FROM auth_tokens
               WHERE project = $1 AND interaction_id = $2 AND expires_at COLLATE "C" > $3"#,
            &[&token.project, &token.interaction_id, &token.created],
        )
        .await?
        .get(0);
    if live >= i64::from(MAX_LIVE_AUTH_TOKENS) {
        return Err(Error::TooManyAuthTokens {
            interaction: token.interaction_id.clone(),
            limit: MAX_LIVE_AUTH_TOKENS,
        });
    }
    let n = tx
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
    tx.commit().await?;
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
