//! Errors of snapshots.

use std::path::PathBuf;

/// Errors of snapshots.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot store `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("snapshot store `{url}`: {message}")]
    Store { url: String, message: String },
    #[error("environment `{env}` has no snapshot in the snapshot store")]
    NoSnapshot { env: String },
    #[error("environment `{env}`: snapshot object `{key}` is missing from the snapshot store")]
    Missing { env: String, key: String },
    #[error("environment `{env}`: snapshot object `{key}` is corrupt: {reason}")]
    Corrupt {
        env: String,
        key: String,
        reason: String,
    },
    #[error(
        "environment `{env}`: snapshot {seq} was written by another host meanwhile; the environment moved"
    )]
    Conflict { env: String, seq: u64 },
    /// The store holds snapshots newer than the one this host's copy is based on, written by
    /// another host: the copy here is stale, and uploading it would hide what that host wrote.
    #[error(
        "environment `{env}`: the snapshot store holds snapshot {latest}, newer than snapshot {local} this host's copy is based on (another host ran the environment meanwhile); the stale copy here is not uploaded and is replaced by the newest snapshot"
    )]
    Stale {
        env: String,
        local: u64,
        latest: u64,
    },
    #[error("environment `{env}` is held by another host, so this one may not write its snapshots")]
    NotHolder { env: String },
    #[error(
        "environment `{env}` has no disk image, so it cannot be snapshotted (snapshots need per-environment disk caps)"
    )]
    NoImage { env: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Internal(String),
}
