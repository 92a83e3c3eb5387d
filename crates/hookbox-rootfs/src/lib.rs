//! Path operations confined to one directory tree that hostile code may have shaped.
//!
//! An environment's tree on the host is written by code running in the sandbox, so any name in it
//! may be a symlink to `/etc/passwd`, a `..` chain, a FIFO that blocks `open`, or a gigabyte file.
//! Every lookup here goes through `openat2(2)` with `RESOLVE_IN_ROOT`, so the kernel resolves
//! `..` and symlinks (absolute ones included) as if the tree's top were `/`, and refuses magic
//! links such as `/proc/self/root`. Nothing here follows a path with plain `open`.
//!
//! This crate owns confinement only. It must not know about hooks, tools or sandboxes.

mod ops;
mod root;

pub use ops::{DirEntry, EntryKind, Metadata, Usage};
pub use root::{Result, RootDir, RootFsError};
