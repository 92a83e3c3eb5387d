//! Environment variable names this crate reads (the only place they are spelled).

/// 32-byte key for credential encryption, base64 or 64 hex digits. Without it the key lives
/// in `<data dir>/secret.key` (created 0600 on first use).
pub const HOOKBOX_SECRET_KEY: &str = "HOOKBOX_SECRET_KEY";
/// A `postgres://` URL: the store is that PostgreSQL database instead of SQLite's file.
pub const HOOKBOX_DATABASE_URL: &str = "HOOKBOX_DATABASE_URL";
