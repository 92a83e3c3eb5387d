//! Environment variable names this crate defines (the only place they are spelled).

/// Comma-separated API keys (`KEY` or `PROJECT:KEY`); none (and no managed key) = local
/// mode (loopback only).
pub const HOOKBOX_API_KEYS: &str = "HOOKBOX_API_KEYS";
