//! When environments are checkpointed, restored and evicted from the local disk.
//!
//! - [`Manager::request`] schedules a checkpoint in the background; requests for one
//!   environment coalesce, and one environment is never checkpointed twice at once. A failed
//!   checkpoint is retried with exponential backoff (1 s doubling to 60 s) until it succeeds;
//!   nothing local is deleted meanwhile. [`Manager::health`] says how the store is doing.
//! - [`Manager::checkpoint_now`] runs one at once (for a caller that waits for it).
//! - [`Manager::ensure_local`] puts an environment on this host's disk before it is opened:
//!   restored from its newest snapshot when it is missing here, or when the store holds a newer
//!   snapshot than the local copy (another host ran it since). With the store unreachable, a
//!   local copy is used only if it is known current under the lease this host holds now
//!   ([`crate::manifest::LocalState::current_under`]).
//! - A checkpoint of a copy the chain moved past is refused ([`SnapshotError::Stale`]): the copy
//!   is marked stale (on disk and in [`Manager::is_stale`]), never uploaded or opened again, and
//!   replaced by the newest snapshot the next time it is needed.
//! - [`Manager::evict`] removes closed, fully uploaded environments from the local disk, least
//!   recently used first, while the local copies exceed the cache size.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_environments::environment::{Environments, read_meta};

use crate::{CheckpointStats, SnapshotError, Snapshots, is_dirty, read_state};

/// First retry delay of a failed checkpoint; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Checkpoints running at once (each reads an image and uploads in parallel itself).
const CONCURRENT_CHECKPOINTS: usize = 2;

/// How the manager behaves.
#[derive(Debug, Clone, Default)]
pub struct ManagerOptions {
    /// Closed, uploaded environments are evicted from the local disk while the local copies
    /// take more than this many bytes (allocated, not apparent). `None`: never evicted.
    pub local_cache_bytes: Option<u64>,
}

/// How the snapshot store is doing, as `/readyz` and `/metrics` show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// Environments with a checkpoint scheduled or running.
    pub pending: usize,
    /// Checkpoints that failed in a row (0: the last one succeeded).
    pub consecutive_failures: u64,
    /// The last failure, while failures continue.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Book {
    /// Scheduled or running, by environment.
    pending: HashSet<String>,
    /// Asked again while running: run once more after.
    again: HashSet<String>,
    /// Local copies found stale (the store holds newer snapshots written by another host).
    stale: HashSet<String>,
    health: StoreHealth,
}

/// Whether this host may checkpoint environment `id` now, and under which lease. Among
/// replicas: `Some(fencing number)` of the environment's lease when this host holds it (only the
/// holder may write its snapshots), `None` when another does. Without a gate every checkpoint
/// runs under fencing number 0 (one host, no leases).
pub type Gate = Arc<
    dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<u64>> + Send>>
        + Send
        + Sync,
>;

/// Tells the metrics how many checkpoints are pending (a gauge, by the event's stable name).
fn report_pending(pending: usize) {
    tracing::debug!(
        name: hookbox_protocol::events::PENDING_CHECKPOINTS,
        pending_checkpoints = pending as u64,
        "pending checkpoints"
    );
}

/// Checkpoints, restores and local eviction of one host's environments.
pub struct Manager {
    snapshots: Snapshots,
    envs: Environments,
    options: ManagerOptions,
    book: Mutex<Book>,
    /// One operation (checkpoint, restore, eviction) per environment at a time.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    permits: tokio::sync::Semaphore,
    gate: Mutex<Option<Gate>>,
    /// Notified whenever an environment leaves `pending`.
    settled: tokio::sync::Notify,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("snapshots", &self.snapshots)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Manager {
    pub fn new(snapshots: Snapshots, envs: Environments, options: ManagerOptions) -> Arc<Self> {
        Arc::new(Manager {
            snapshots,
            envs,
            options,
            book: Mutex::new(Book::default()),
            locks: Mutex::new(HashMap::new()),
            permits: tokio::sync::Semaphore::new(CONCURRENT_CHECKPOINTS),
            gate: Mutex::new(None),
            settled: tokio::sync::Notify::new(),
        })
    }

    /// Checkpoints run only while `gate` says this host may write the environment's snapshots;
    /// otherwise they are dropped (another host holds it, and its copy is the current one).
    pub fn set_gate(&self, gate: Gate) {
        *self.gate.lock().unwrap_or_else(|p| p.into_inner()) = Some(gate);
    }

    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    fn lock_of(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(id.to_owned()).or_default().clone()
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How the store is doing.
    pub fn health(&self) -> StoreHealth {
        let book = self.book();
        StoreHealth {
            pending: book.pending.len(),
            ..book.health.clone()
        }
    }

    /// At start-up: thaws disks a crashed process left frozen and schedules a checkpoint of
    /// every local environment with changes its newest snapshot lacks (a crash between an
    /// interaction and its checkpoint loses nothing that is still on this disk).
    pub fn start(self: &Arc<Self>) -> Result<usize, SnapshotError> {
        let ids = self
            .envs
            .local_ids()
            .map_err(|e| SnapshotError::Internal(e.to_string()))?;
        let mut scheduled = 0;
        for id in ids {
            let Ok(dir) = self.envs.dir_of(&id) else {
                continue;
            };
            hookbox_environments::disk::thaw_if_frozen(
                &dir.join(hookbox_environments::environment::TREE_DIR),
            );
            if read_state(&dir).is_ok_and(|state| state.stale) {
                // Nothing to upload; replaced by the newest snapshot when next needed.
                self.book().stale.insert(id);
                continue;
            }
            if is_dirty(&dir).unwrap_or(true) {
                self.request(&id);
                scheduled += 1;
            }
        }
        Ok(scheduled)
    }

    /// `id` has no checkpoint scheduled or running any more (`book` is the locked book).
    fn settle(&self, mut book: std::sync::MutexGuard<'_, Book>, id: &str) {
        book.pending.remove(id);
        let pending = book.pending.len();
        drop(book);
        report_pending(pending);
        self.settled.notify_waiters();
    }

    /// Waits until no checkpoint is scheduled or running, for at most `limit` (at a clean stop:
    /// what the interactions changed is uploaded before the host lets go of its environments).
    /// Returns how many are still pending.
    pub async fn flush(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            let pending = self.book().pending.len();
            if pending == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, settled).await.is_err() {
                return self.book().pending.len();
            }
        }
    }

    /// Schedules a checkpoint of `id` in the background.
    pub fn request(self: &Arc<Self>, id: &str) {
        {
            let mut book = self.book();
            if !book.pending.insert(id.to_owned()) {
                book.again.insert(id.to_owned());
                return;
            }
            report_pending(book.pending.len());
        }
        let this = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move { this.work(id).await });
    }

    async fn work(self: Arc<Self>, id: String) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            self.book().again.remove(&id);
            match self.checkpoint_now(&id).await {
                Ok(_) => {
                    backoff = FIRST_BACKOFF;
                    let mut book = self.book();
                    book.health.consecutive_failures = 0;
                    book.health.last_error = None;
                    if !book.again.remove(&id) {
                        self.settle(book, &id);
                        return;
                    }
                }
                Err(
                    SnapshotError::NoSnapshot { .. }
                    | SnapshotError::NoImage { .. }
                    | SnapshotError::NotHolder { .. }
                    | SnapshotError::Stale { .. },
                ) => {
                    self.settle(self.book(), &id);
                    return;
                }
                Err(err) if !self.envs.is_local(&id) => {
                    // Deleted or evicted meanwhile: nothing is left to upload.
                    tracing::debug!(environment_id = %id, error = %err, "checkpoint of an environment that is gone dropped");
                    self.settle(self.book(), &id);
                    return;
                }
                Err(err) => {
                    let failures = {
                        let mut book = self.book();
                        book.health.consecutive_failures += 1;
                        book.health.last_error = Some(err.to_string());
                        book.health.consecutive_failures
                    };
                    tracing::warn!(event = "snapshot.failed", environment_id = %id, error = %err, retry_in_s = backoff.as_secs(), failures, "checkpoint failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Checkpoints `id` now (waiting for any checkpoint of it already running).
    pub async fn checkpoint_now(&self, id: &str) -> Result<CheckpointStats, SnapshotError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| SnapshotError::Internal(e.to_string()))?;
        let lock = self.lock_of(id);
        let _held = lock.lock().await;
        let dir = self
            .envs
            .dir_of(id)
            .map_err(|e| SnapshotError::Internal(e.to_string()))?;
        if !self.envs.is_local(id) {
            return Err(SnapshotError::Internal(format!(
                "environment `{id}` is not on this host"
            )));
        }
        let gate = self.gate.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let fence = match gate {
            Some(gate) => match gate(id.to_owned()).await {
                Some(fence) => fence,
                None => {
                    tracing::info!(environment_id = %id, "checkpoint dropped: another host holds the environment");
                    return Err(SnapshotError::NotHolder { env: id.to_owned() });
                }
            },
            None => 0,
        };
        let started = std::time::Instant::now();
        let stats = match self.snapshots.checkpoint_under(id, &dir, fence).await {
            Err(err @ SnapshotError::Stale { .. }) => {
                self.mark_stale(id, &dir);
                tracing::error!(event = "snapshot.stale", environment_id = %id, fence, error = %err, "checkpoint refused: the local copy is stale");
                return Err(err);
            }
            other => other?,
        };
        if let Some(seq) = stats.seq {
            tracing::info!(
                event = "snapshot.checkpoint",
                environment_id = %id,
                seq,
                full = stats.full,
                chunks = stats.chunks_uploaded,
                uploaded_bytes = stats.uploaded_bytes,
                read_bytes = stats.read_bytes,
                frozen_ms = stats.frozen_for.as_millis() as u64,
                duration_ms = started.elapsed().as_millis() as u64,
                "environment checkpointed"
            );
        }
        Ok(stats)
    }

    /// Whether the local copy of `id` was found stale (it must not be opened; the next
    /// [`Self::ensure_local`] replaces it).
    pub fn is_stale(&self, id: &str) -> bool {
        self.book().stale.contains(id)
    }

    fn mark_stale(&self, id: &str, dir: &std::path::Path) {
        self.book().stale.insert(id.to_owned());
        if let Err(err) = crate::snapshots::mark_stale(dir) {
            tracing::warn!(environment_id = %id, error = %err, "cannot record that the local copy is stale");
        }
    }

    /// Makes sure `id` is on this host's disk and current for a host that holds its lease with
    /// fencing number `fence` (0: no leases), restoring the newest snapshot when the copy is
    /// missing, stale, or older than the store's newest. `Ok(true)`: restored now. With the
    /// store unreachable, a local copy is used only when it is known current under `fence`
    /// ([`crate::manifest::LocalState::current_under`]); otherwise the store's error is
    /// returned (the copy may be older than what another host wrote while it held the lease).
    pub async fn ensure_local(&self, id: &str, fence: u64) -> Result<bool, SnapshotError> {
        let lock = self.lock_of(id);
        let _held = lock.lock().await;
        let dir = self
            .envs
            .dir_of(id)
            .map_err(|e| SnapshotError::Internal(e.to_string()))?;
        if self.envs.is_local(id) {
            let state = read_state(&dir)?;
            let local = state.seq;
            let latest = match self.snapshots.latest(id).await {
                Ok(latest) => latest.unwrap_or(0),
                Err(err) if state.current_under(fence) => {
                    tracing::warn!(environment_id = %id, error = %err, "snapshot store unreachable; using the local copy, current under this lease");
                    return Ok(false);
                }
                Err(err) => {
                    tracing::warn!(environment_id = %id, local, copy_fence = state.fence, fence, stale = state.stale, error = %err, "snapshot store unreachable, and the local copy may be stale (another host may have held the environment since)");
                    return Err(err);
                }
            };
            if !state.stale && latest <= local {
                crate::snapshots::record_fence(&dir, fence)?;
                return Ok(false);
            }
            if !state.stale && is_dirty(&dir).unwrap_or(true) {
                tracing::warn!(environment_id = %id, local, latest, "the local copy has changes that were never uploaded, and another host wrote newer snapshots since; the newer snapshot wins");
            }
            tracing::info!(environment_id = %id, local, latest, stale = state.stale, "local copy is stale; restoring the newest snapshot");
            self.remove_local(id)?;
            self.book().stale.remove(id);
        }
        let staging = self
            .envs
            .root()
            .join(format!(".restoring-{id}-{:08x}", rand::random::<u32>()));
        let started = std::time::Instant::now();
        let stats = self.snapshots.restore_under(id, &staging, fence).await?;
        self.envs
            .install(id, &staging)
            .map_err(|e| SnapshotError::Internal(e.to_string()))
            .inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&staging);
            })?;
        tracing::info!(
            event = "snapshot.restore",
            environment_id = %id,
            seq = stats.seq,
            chunks = stats.chunks,
            downloaded_bytes = stats.downloaded_bytes,
            duration_ms = started.elapsed().as_millis() as u64,
            "environment restored from its snapshot"
        );
        Ok(true)
    }

    /// Unmounts `id`'s disk on this host (its copy was closed after the lease was lost; the
    /// next open mounts it again). Waits for a checkpoint of it that is running. `Ok(false)`:
    /// it was not mounted.
    pub async fn unmount(&self, id: &str) -> Result<bool, SnapshotError> {
        let lock = self.lock_of(id);
        let _held = lock.lock().await;
        let dir = self
            .envs
            .dir_of(id)
            .map_err(|e| SnapshotError::Internal(e.to_string()))?;
        let tree = dir.join(hookbox_environments::environment::TREE_DIR);
        tokio::task::spawn_blocking(move || hookbox_environments::disk::unmount_now(&tree))
            .await
            .map_err(|e| SnapshotError::Internal(e.to_string()))?
            .map_err(|e| SnapshotError::Internal(e.to_string()))
    }

    fn remove_local(&self, id: &str) -> Result<(), SnapshotError> {
        self.envs
            .remove(id)
            .map_err(|e| SnapshotError::Internal(e.to_string()))
    }

    /// Deletes every snapshot of `id` (the environment was deleted or expired).
    pub async fn delete(&self, id: &str) -> Result<(), SnapshotError> {
        let lock = self.lock_of(id);
        let _held = lock.lock().await;
        self.book().stale.remove(id);
        self.snapshots.delete(id).await
    }

    /// Evicts closed (not in `open`), fully uploaded environments from the local disk, least
    /// recently used first, while the local copies exceed the cache size. Returns the ids
    /// evicted. An environment with changes not yet uploaded is never evicted.
    pub async fn evict(&self, open: &HashSet<String>) -> Vec<String> {
        let Some(limit) = self.options.local_cache_bytes else {
            return Vec::new();
        };
        let Ok(ids) = self.envs.local_ids() else {
            return Vec::new();
        };
        let mut local: Vec<(u64, String, u64)> = Vec::new();
        let mut total = 0u64;
        for id in ids {
            let Ok(dir) = self.envs.dir_of(&id) else {
                continue;
            };
            let bytes = allocated_bytes(&dir);
            total += bytes;
            let Ok(meta) = read_meta(&dir) else { continue };
            local.push((meta.last_accessed_at, id, bytes));
        }
        local.sort();
        let mut evicted = Vec::new();
        for (_, id, bytes) in local {
            if total <= limit {
                break;
            }
            if open.contains(&id) || self.book().pending.contains(&id) {
                continue;
            }
            let lock = self.lock_of(&id);
            let Ok(_held) = lock.try_lock() else { continue };
            let Ok(dir) = self.envs.dir_of(&id) else {
                continue;
            };
            // A stale copy holds nothing worth uploading.
            let stale = read_state(&dir).is_ok_and(|state| state.stale);
            if !stale && is_dirty(&dir).unwrap_or(true) {
                continue;
            }
            match self.remove_local(&id) {
                Ok(()) => {
                    self.book().stale.remove(&id);
                    total = total.saturating_sub(bytes);
                    tracing::info!(event = "snapshot.evict", environment_id = %id, bytes, "evicted an uploaded environment from the local disk");
                    evicted.push(id);
                }
                Err(err) => {
                    tracing::warn!(environment_id = %id, error = %err, "cannot evict an environment from the local disk");
                }
            }
        }
        evicted
    }
}

/// Bytes the files of `dir` take on disk (a sparse image counts what it holds).
fn allocated_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.blocks() * 512)
        .sum()
}
