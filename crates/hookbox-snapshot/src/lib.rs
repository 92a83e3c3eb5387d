//! Environments in object storage: incremental, block-level snapshots of an environment's disk
//! image, and restore anywhere with every block's hash checked.
//!
//! An environment directory (`hookbox_environments::environment`) is its ext4 image plus a little
//! metadata. [`Snapshots::checkpoint`] freezes the filesystem (`FIFREEZE`) while it reads the
//! image's data regions in [`manifest::CHUNK_SIZE`] chunks, thaws it, uploads the chunks whose
//! content is new (zstd, under their BLAKE3 hash) and writes a manifest: a delta against the
//! previous snapshot, or, every [`manifest::COMPACT_AFTER`] deltas, a full one after which the
//! older ones are deleted. [`Snapshots::restore`] rebuilds the directory elsewhere and refuses a
//! missing or corrupt object with an error that names the environment. [`manager`] decides when
//! (after changes, when closed, with retries and backoff) and evicts clean copies from the local
//! disk.
//!
//! This crate owns the snapshot format and its store. It must not run sandboxes or hooks, speak
//! the HTTP API or decide leases: the caller makes sure only the environment's lease holder
//! checkpoints it, and says which lease (its fencing number) it holds. A checkpoint appends only
//! to the chain its copy is based on, so a host that held an old copy cannot make it the newest
//! snapshot ([`SnapshotError::Stale`]).

pub mod location;
pub mod manager;
pub mod manifest;
pub mod scan;
mod snapshots;

use std::path::PathBuf;

pub use manager::{Gate, Manager, ManagerOptions, StoreHealth};
pub use snapshots::{
    CheckpointStats, FROZEN_BLOB, IMAGE_BLOB, META_BLOB, RestoreStats, STATE_FILE, Snapshots,
    is_dirty, read_state,
};

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
