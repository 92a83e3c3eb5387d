//! Errors of building a [`Policy`](crate::Policy) from the operator's flags and config.

/// Errors of building a [`Policy`](crate::Policy) from the operator's flags and config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "`{0}` is not a host name to allow: give NAME (any port) or NAME:PORT, e.g. hookbox.example.com or hookbox.example.com:8443, without a scheme or path"
    )]
    BadHost(String),
    #[error(
        "`{0}` is not an origin to allow: give SCHEME://HOST[:PORT], e.g. https://console.example.com, without a path (`*` and `null` are never allowed)"
    )]
    BadOrigin(String),
    #[error("`{0}` is not a URL with a host")]
    BadUrl(String),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
