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

mod error;
pub mod location;
pub mod manager;
pub mod manifest;
pub mod scan;
mod snapshots;

pub use error::SnapshotError;
pub use manager::{Gate, Manager, ManagerOptions, StoreHealth};
pub use snapshots::{
    CheckpointStats, FROZEN_BLOB, IMAGE_BLOB, META_BLOB, RestoreStats, STATE_FILE, Snapshots,
    is_dirty, read_state,
};
