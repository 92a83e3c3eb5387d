//! Ephemeral auth tokens (`POST /interactions/{id}/auth_tokens`): each lets its holder act on
//! one interaction of one project until it expires or is deleted. The store keeps only the
//! token's SHA-256 ([`crate::keys::hash_key`] of the whole `auth_tokens/…` string), never the
//! token, so a reader of the database cannot use one; every replica reads the same rows, so a
//! deletion is effective everywhere at once (nothing caches them). Expired rows are deleted in
//! bulk by [`crate::Store::purge_expired_auth_tokens`] (the server calls it from its periodic
//! expiry sweep, with a grace period; an index on `expires_at` serves it).
//!
//! An interaction has at most [`MAX_LIVE_AUTH_TOKENS`] live tokens: creating one more is
//! refused with [`crate::Error::TooManyAuthTokens`] until one is deleted or expires, so a
//! caller cannot grow the table (and every sweep) without bound. The count and the insert are
//! one atomic step on both backends (SQLite's single writer; a transaction-scoped advisory lock
//! per interaction on PostgreSQL, so replicas creating tokens at once do not overshoot).

use crate::error::Result;
use crate::row::Columns;

/// A token, without the token: its public id, scope and expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthTokenRecord {
    /// Public id (`atk_…`), shown in logs and the audit log instead of the token.
    pub id: String,
    pub project: String,
    /// The one interaction the token may act on.
    pub interaction_id: String,
    /// RFC 3339 UTC (`…Z`); the token authenticates nothing from this instant on.
    pub expires_at: String,
    pub created: String,
}

impl AuthTokenRecord {
    /// Whether the token still authenticates at `now` (RFC 3339 UTC, as [`crate::time`] writes).
    pub fn is_live_at(&self, now: &str) -> bool {
        now < self.expires_at.as_str()
    }
}

/// How many live (unexpired) auth tokens one interaction may have at once.
pub const MAX_LIVE_AUTH_TOKENS: u32 = 100;

pub(crate) const AUTH_TOKEN_COLUMNS: &str = "id, project, interaction_id, expires_at, created";

pub(crate) fn auth_token_from_row(r: &impl Columns) -> Result<AuthTokenRecord> {
    Ok(AuthTokenRecord {
        id: r.text(0)?,
        project: r.text(1)?,
        interaction_id: r.text(2)?,
        expires_at: r.text(3)?,
        created: r.text(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_live_strictly_before_its_expiry() {
        let t = AuthTokenRecord {
            id: "atk_1".into(),
            project: "p".into(),
            interaction_id: "int_1".into(),
            expires_at: "2026-12-05T11:00:00.000Z".into(),
            created: "2026-12-05T10:00:00.000Z".into(),
        };
        assert!(t.is_live_at("2026-12-05T10:59:59.999Z"));
        assert!(!t.is_live_at("2026-12-05T11:00:00.000Z"));
        assert!(!t.is_live_at("2026-12-05T11:00:00.001Z"));
    }
}
