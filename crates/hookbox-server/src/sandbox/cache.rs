//! The environment cache: the environments this replica has open, behind [`SandboxBackend`].
//!
//! Opened environments are cached per id (they own per-environment state such as a network
//! namespace, an egress proxy task and a CA, released when the [`Environment`] is dropped). The
//! cache is bounded by [`CacheLimits`]: an environment idle for longer than the idle timeout is
//! dropped, and beyond the cap the least recently used are dropped first. An environment some
//! caller still holds (a running tool call, a file transfer) is never dropped: callers hold an
//! `Arc` while they work and only entries whose strong count shows the cache as sole owner are
//! evicted. Nothing is lost by evicting: everything lives on disk and the environment is reopened
//! on next use. Eviction runs on every access and from [`SandboxBackend::spawn_sweeper`].
//!
//! Among replicas ([`SandboxBackend::with_leases`]) an environment is opened only while this
//! replica holds its lease, and each open copy remembers the lease's fencing number. A copy
//! opened under a lease this replica no longer holds (the lease lapsed while the database was
//! out of reach, or another replica took it: a higher fence) is closed, its sandboxes ended and
//! its disk unmounted, before the environment is served again; reopening it under the new lease
//! restores the newest snapshot when the store holds one newer than the copy here
//! (`hookbox_snapshot::Manager::ensure_local`). [`SandboxBackend::spawn_lease_watch`] closes
//! such copies as soon as the lease is gone, and every access checks again.
//!
//! This module owns the open map and nothing else: it must not run tool calls or hooks (the
//! seams in `executor` hand those to the lifecycle) nor serve files.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use hookbox_agent::seams::ProviderError;
use hookbox_environments::environment::{Environment, Environments};
use hookbox_environments::slots::SlotRegistry;
use hookbox_rootfs::RootDir;
use tokio::sync::Mutex;

use super::errors::blocking;

/// Default of [`CacheLimits::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Default of [`CacheLimits::max_open`].
pub const DEFAULT_MAX_OPEN: usize = 256;

/// Bounds of the cache of opened environments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// An environment nobody used for this long is dropped (reopened from disk on next use).
    pub idle_timeout: Duration,
    /// Most environments kept open; beyond it the least recently used idle ones are dropped.
    /// Environments in use are never dropped, so the cache may exceed it while they are.
    pub max_open: usize,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_open: DEFAULT_MAX_OPEN,
        }
    }
}

/// Where the cache reads the time; injectable so tests move time without sleeping.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Instant + Send + Sync>);

impl Clock {
    /// The monotonic system clock.
    pub fn system() -> Self {
        Clock(Arc::new(Instant::now))
    }

    /// A clock reading `now`.
    pub fn from_fn(now: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        Clock(Arc::new(now))
    }

    fn now(&self) -> Instant {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// What [`SandboxBackend::shutdown`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Environments that were open.
    pub closed: usize,
    /// Environment disks unmounted.
    pub unmounted: usize,
    /// Checkpoints still not uploaded when the flush limit passed.
    pub unuploaded: usize,
}

/// An opened environment and when it was last seen in use.
#[derive(Debug)]
struct Cached {
    env: Arc<Environment>,
    last_used: Instant,
    /// The fencing number of the lease it was opened under (0 without replicas).
    fence: u64,
}

/// Open environments taken out of the cache: idle ones (closed and checkpointed), and copies
/// opened under a lease that was lost since (closed without a checkpoint).
#[derive(Debug, Default)]
struct Evicted {
    idle: Vec<Arc<Environment>>,
    lost: Vec<Arc<Environment>>,
}

impl Cached {
    /// Someone besides the cache holds the environment (a call or transfer is running).
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.env) > 1
    }
}

/// Real sandboxes and hooks behind the agent seams.
#[derive(Debug)]
pub struct SandboxBackend {
    pub(super) store: Environments,
    limits: CacheLimits,
    clock: Clock,
    open: Mutex<HashMap<String, Cached>>,
    /// Per-project limits on concurrently running sandboxed processes.
    slots: Option<Arc<SlotRegistry>>,
    /// Snapshots in object storage: restore before open, checkpoints after changes.
    pub(super) snapshots: Option<Arc<hookbox_snapshot::Manager>>,
    /// Limits of the agent's connections to remote MCP servers.
    pub(super) mcp: hookbox_mcp::client::ClientOptions,
    /// Among replicas: which environments' leases this replica holds, and under which fence.
    leases: Option<Arc<dyn hookbox_store::Cluster>>,
    /// Copies closed after their lease was lost that a running call still holds: the
    /// environment is not opened again here until they are gone.
    closing: std::sync::Mutex<HashMap<String, Weak<Environment>>>,
}

impl SandboxBackend {
    /// A backend with the default [`CacheLimits`].
    pub fn new(store: Environments) -> Self {
        Self::with_limits(store, CacheLimits::default(), Clock::system())
    }

    pub fn with_limits(store: Environments, limits: CacheLimits, clock: Clock) -> Self {
        SandboxBackend {
            store,
            limits,
            clock,
            open: Mutex::new(HashMap::new()),
            slots: None,
            snapshots: None,
            mcp: hookbox_mcp::client::ClientOptions::default(),
            leases: None,
            closing: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// One replica among several: environments are opened only under a lease this replica
    /// holds in `cluster`, and a copy opened under a lease lost since is closed before the
    /// environment is served again.
    pub fn with_leases(mut self, cluster: Arc<dyn hookbox_store::Cluster>) -> Self {
        self.leases = Some(cluster);
        self
    }

    /// The fencing number of `id`'s lease while this replica holds it (by its own reckoning,
    /// see `Cluster::fence`); 0 without replicas.
    fn held_fence(&self, id: &str) -> Option<u64> {
        match &self.leases {
            None => Some(0),
            Some(cluster) => cluster
                .fence(&hookbox_store::postgres::environment_resource(id))
                .and_then(|fence| u64::try_from(fence).ok()),
        }
    }

    /// [`Self::held_fence`], or 503 when the lease is not (or no longer) held here.
    pub(super) fn fence_of(&self, id: &str) -> Result<u64, ProviderError> {
        self.held_fence(id).ok_or_else(|| {
            ProviderError::Unavailable(format!(
                "Environment `{id}` is not held by this replica any more (its lease lapsed or moved to another replica); retry."
            ))
        })
    }

    /// Whether a copy opened under `fence` may still be used: its lease is held under the same
    /// fence, and the snapshot manager did not find it stale.
    fn still_current(&self, id: &str, fence: u64) -> bool {
        self.held_fence(id) == Some(fence)
            && !self.snapshots.as_ref().is_some_and(|m| m.is_stale(id))
    }

    /// Environments are snapshotted to (and restored from) `manager`'s object store.
    pub fn with_snapshots(mut self, manager: Arc<hookbox_snapshot::Manager>) -> Self {
        self.snapshots = Some(manager);
        self
    }

    /// The snapshot manager, when snapshots are on.
    pub fn snapshots(&self) -> Option<&Arc<hookbox_snapshot::Manager>> {
        self.snapshots.as_ref()
    }

    /// Brings `id` onto this host's disk from its newest snapshot when it is not here (or is
    /// older than the store's, or stale) for a replica holding its lease under `fence`; nothing
    /// without snapshots.
    pub(super) async fn ensure_local(&self, id: &str, fence: u64) -> Result<(), ProviderError> {
        let Some(manager) = &self.snapshots else {
            return Ok(());
        };
        manager.ensure_local(id, fence).await.map(|_| ()).map_err(|e| {
            use hookbox_snapshot::SnapshotError as S;
            match e {
                S::Store { .. } => {
                    // The store's error names its URL: for the log, not for clients.
                    tracing::warn!(environment_id = id, error = %e, "cannot open the environment without the snapshot store");
                    ProviderError::Unavailable(format!(
                        "Environment `{id}` needs the snapshot store to be opened here (it is not on this host, or another replica may have changed it since this copy was current), and the store does not answer; retry."
                    ))
                }
                S::NoSnapshot { .. } => ProviderError::Unrestorable(format!(
                    "Environment `{id}` is not on this host and has no snapshot (its host stopped before its first checkpoint)."
                )),
                S::Missing { .. } | S::Corrupt { .. } => {
                    tracing::error!(environment_id = id, error = %e, "environment snapshot cannot be restored");
                    ProviderError::Unrestorable(format!("Cannot restore environment `{id}`: {e}"))
                }
                other => ProviderError::Internal(other.to_string()),
            }
        })
    }

    /// Limits of the agent's connections to remote MCP servers (`mcp_server` tools).
    pub fn with_mcp_options(mut self, options: hookbox_mcp::client::ClientOptions) -> Self {
        self.mcp = options;
        self
    }

    /// Every sandboxed process of an environment counts against its project's slots in
    /// `slots` (the server sets their limits from the `sandbox_processes` quota).
    pub fn with_slots(mut self, slots: Arc<SlotRegistry>) -> Self {
        self.slots = Some(slots);
        self
    }

    /// The cached environment `id`, opened on first use. Opens are serialised so that one
    /// environment is never opened twice. The caller keeps it from eviction while it holds the
    /// returned `Arc`.
    pub(super) async fn env(&self, id: &str) -> Result<Arc<Environment>, ProviderError> {
        let fence = self.fence_of(id)?;
        let mut open = self.open.lock().await;
        let now = self.clock.now();
        let cached = match open.get_mut(id) {
            Some(cached) if cached.fence == fence && self.still_current(id, fence) => {
                cached.last_used = now;
                Some(cached.env.clone())
            }
            Some(_) => {
                // Opened under a lease this replica lost since: closed before anything uses
                // the environment again, then reopened under the lease held now.
                // (Not unmounted: the reopen below mounts it again, or replaces it.)
                let lost: Vec<Arc<Environment>> =
                    open.remove(id).map(|c| c.env).into_iter().collect();
                self.close_lost(lost, false).await;
                None
            }
            None => None,
        };
        let env = match cached {
            Some(env) => env,
            None => {
                self.not_closing(id)?;
                self.ensure_local(id, fence).await?;
                let store = self.store.clone();
                let owned = id.to_owned();
                let slots = self.slots.clone();
                let env = Arc::new(
                    blocking(move || store.open_env_with(&owned, slots.as_deref())).await?,
                );
                tracing::debug!(environment_id = id, fence, "environment opened");
                open.insert(
                    id.to_owned(),
                    Cached {
                        env: env.clone(),
                        last_used: now,
                        fence,
                    },
                );
                env
            }
        };
        let evicted = self.evict(&mut open, now);
        tracing::debug!(name: hookbox_protocol::events::OPEN_ENVIRONMENTS, open_environments = open.len() as u64, "open environments");
        // Under the lock, so that no open of the same environment races the unmount.
        self.close_lost(evicted.lost, true).await;
        drop(open);
        // Released (namespace, proxy task, CA bundle dir) outside the lock.
        self.closed(evicted.idle).await;
        Ok(env)
    }

    /// Drops environments just closed; with snapshots, each is checkpointed if it changed.
    /// The drop (a warm sandbox's end, the disk's unmount) runs on the blocking pool.
    async fn closed(&self, evicted: Vec<Arc<Environment>>) {
        let ids: Vec<String> = evicted.iter().map(|e| e.id().to_owned()).collect();
        close_off_runtime(evicted).await;
        if let Some(manager) = &self.snapshots {
            for id in ids {
                manager.request(&id);
            }
        }
    }

    /// Closes copies opened under a lease this replica no longer holds: their sandboxes end and
    /// (with snapshots, where each replica has its own disk) their disks are unmounted. Nothing
    /// is checkpointed: another replica may have written newer snapshots meanwhile. A copy a
    /// running call still holds closes when that call lets go; until then the environment is
    /// not opened here again. `unmount`: also unmount the disks of those closed now. Called
    /// with the cache locked, so that no open of the same environment races the unmount.
    async fn close_lost(&self, lost: Vec<Arc<Environment>>, unmount: bool) {
        let mut closed = Vec::new();
        for env in lost {
            let id = env.id().to_owned();
            tracing::warn!(
                event = "environment.lease_lost",
                environment_id = %id,
                "closing the environment's copy: it was opened under a lease this replica no longer holds"
            );
            if Arc::strong_count(&env) > 1 {
                self.closing_lock().insert(id, Arc::downgrade(&env));
            } else {
                closed.push(env);
            }
        }
        let ids: Vec<String> = closed.iter().map(|e| e.id().to_owned()).collect();
        close_off_runtime(closed).await;
        if unmount {
            for id in ids {
                self.unmount_lost(&id).await;
            }
        }
    }

    fn closing_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<Environment>>> {
        self.closing.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// 503 while a copy of `id` closed after a lost lease is still held by a running call.
    fn not_closing(&self, id: &str) -> Result<(), ProviderError> {
        let mut closing = self.closing_lock();
        match closing.get(id) {
            Some(old) if old.strong_count() > 0 => Err(ProviderError::Unavailable(format!(
                "Environment `{id}` is still closing on this replica (a call started under a lease this replica lost is still running); retry."
            ))),
            Some(_) => {
                closing.remove(id);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Unmounts the disk of a copy closed after a lost lease (with snapshots only: without
    /// them replicas share one data dir, and the disk is the new holder's too).
    async fn unmount_lost(&self, id: &str) {
        let Some(manager) = &self.snapshots else {
            return;
        };
        match manager.unmount(id).await {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(environment_id = id, error = %e, "cannot unmount the disk of a copy closed after a lost lease");
            }
        }
    }

    /// Closes every open copy whose lease this replica lost, and unmounts those that running
    /// calls held until now. Returns how many copies were closed.
    pub async fn close_lost_leases(&self) -> usize {
        if self.leases.is_none() {
            return 0;
        }
        let mut open = self.open.lock().await;
        let ids: Vec<String> = open
            .iter()
            .filter(|(id, cached)| !self.still_current(id, cached.fence))
            .map(|(id, _)| id.clone())
            .collect();
        let lost: Vec<Arc<Environment>> = ids
            .iter()
            .filter_map(|id| open.remove(id).map(|c| c.env))
            .collect();
        let count = lost.len();
        self.close_lost(lost, true).await;
        let released: Vec<String> = {
            let mut closing = self.closing_lock();
            let gone: Vec<String> = closing
                .iter()
                .filter(|(_, old)| old.strong_count() == 0)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &gone {
                closing.remove(id);
            }
            gone
        };
        for id in released {
            if !open.contains_key(&id) {
                self.unmount_lost(&id).await;
            }
        }
        count
    }

    /// Runs [`Self::close_lost_leases`] every `period` (a fraction of the lease TTL) until the
    /// backend is dropped or the task is aborted; nothing to do without replicas.
    pub fn spawn_lease_watch(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let backend: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period.max(Duration::from_millis(100)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(backend) = backend.upgrade() else {
                    return;
                };
                if backend.leases.is_none() {
                    return;
                }
                backend.close_lost_leases().await;
            }
        })
    }

    /// Drops every cached environment that is idle past the timeout, then the least recently
    /// used idle ones beyond the cap. Returns how many were dropped.
    pub async fn evict_idle(&self) -> usize {
        let mut open = self.open.lock().await;
        let evicted = self.evict(&mut open, self.clock.now());
        tracing::debug!(name: hookbox_protocol::events::OPEN_ENVIRONMENTS, open_environments = open.len() as u64, "open environments");
        // Copies closed after a lost lease that a call still holds are in use too.
        let still_open: std::collections::HashSet<String> = open
            .keys()
            .cloned()
            .chain(
                self.closing_lock()
                    .iter()
                    .filter(|(_, old)| old.strong_count() > 0)
                    .map(|(id, _)| id.clone()),
            )
            .collect();
        let count = evicted.idle.len() + evicted.lost.len();
        self.close_lost(evicted.lost, true).await;
        drop(open);
        self.closed(evicted.idle).await;
        if let Some(manager) = &self.snapshots {
            manager.evict(&still_open).await;
        }
        // Disks left mounted by others (a one-shot `hookbox tool`, a creation not followed by
        // a use, a process that died) and idle as long as an open environment may be.
        let store = self.store.clone();
        let idle = self.limits.idle_timeout;
        let unmounted = blocking(move || Ok(store.unmount_idle(idle, &still_open)))
            .await
            .unwrap_or(0);
        if unmounted > 0 {
            tracing::info!(unmounted, "idle environment disks unmounted");
        }
        count
    }

    /// Removes the evictable entries from `open`, and copies opened under a lease lost since;
    /// the caller closes the lost ones before unlocking, the idle ones after.
    fn evict(&self, open: &mut HashMap<String, Cached>, now: Instant) -> Evicted {
        let mut lost = Vec::new();
        if self.leases.is_some() {
            open.retain(|id, cached| {
                let current = self.still_current(id, cached.fence);
                if !current {
                    lost.push(cached.env.clone());
                }
                current
            });
        }
        let mut evicted = Vec::new();
        open.retain(|id, cached| {
            if cached.in_use() {
                // In use counts as use: the idle time starts when the last holder lets go.
                cached.last_used = now;
                return true;
            }
            let idle = now.saturating_duration_since(cached.last_used);
            if idle < self.limits.idle_timeout {
                return true;
            }
            tracing::debug!(environment_id = %id, idle_secs = idle.as_secs(), "evicting idle environment");
            evicted.push(cached.env.clone());
            false
        });
        if open.len() > self.limits.max_open {
            let mut idle: Vec<(Instant, String)> = open
                .iter()
                .filter(|(_, c)| !c.in_use())
                .map(|(id, c)| (c.last_used, id.clone()))
                .collect();
            idle.sort();
            let excess = open.len() - self.limits.max_open;
            for (_, id) in idle.into_iter().take(excess) {
                if let Some(cached) = open.remove(&id) {
                    tracing::debug!(environment_id = %id, max_open = self.limits.max_open, "evicting least recently used environment");
                    evicted.push(cached.env);
                }
            }
            if open.len() > self.limits.max_open {
                tracing::warn!(
                    open = open.len(),
                    max_open = self.limits.max_open,
                    "more environments in use than --max-open-environments; none can be evicted"
                );
            }
        }
        Evicted {
            idle: evicted,
            lost,
        }
    }

    /// At a clean stop, once no interaction runs: closes every open environment (namespaces,
    /// proxies, warm sandboxes), waits up to `flush_limit` for their checkpoints to upload (with
    /// snapshots), then unmounts every environment disk, so the stop leaves no mount, loop
    /// device or sandbox process behind.
    pub async fn shutdown(&self, flush_limit: Duration) -> ShutdownReport {
        let (open, still_held) = {
            let mut open = self.open.lock().await;
            let still_held = open.values().filter(|cached| cached.in_use()).count();
            let envs: Vec<Arc<Environment>> = open.drain().map(|(_, cached)| cached.env).collect();
            (envs, still_held)
        };
        let closed = open.len();
        if still_held > 0 {
            tracing::warn!(
                still_held,
                "environments still in use at stop; they close when their last call ends"
            );
        }
        let ids: Vec<String> = open.iter().map(|e| e.id().to_owned()).collect();
        close_off_runtime(open).await;
        let mut unuploaded = 0;
        if let Some(manager) = &self.snapshots {
            for id in &ids {
                manager.request(id);
            }
            unuploaded = manager.flush(flush_limit).await;
            if unuploaded > 0 {
                tracing::warn!(
                    unuploaded,
                    "checkpoints not uploaded before the stop; they are uploaded at the next start"
                );
            }
        }
        let store = self.store.clone();
        let unmounted = blocking(move || store.unmount_all())
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot list the environments to unmount");
                0
            });
        ShutdownReport {
            closed,
            unmounted,
            unuploaded,
        }
    }

    /// Runs [`SandboxBackend::evict_idle`] every `period` until the backend is dropped or the
    /// returned task is aborted (the server aborts it at shutdown).
    pub fn spawn_sweeper(self: &Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        let backend: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(backend) = backend.upgrade() else {
                    return;
                };
                let evicted = backend.evict_idle().await;
                if evicted > 0 {
                    tracing::info!(evicted, "idle environments closed");
                }
            }
        })
    }

    /// How often [`SandboxBackend::spawn_sweeper`] should run for these limits: often enough
    /// that an idle environment outlives its timeout by at most a fraction of it.
    pub fn sweep_period(&self) -> Duration {
        (self.limits.idle_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))
    }

    /// Drops `id` from the cache (it is being deleted); a caller still holding it keeps its
    /// copy until it lets go.
    pub(super) async fn forget(&self, id: &str) {
        self.open.lock().await.remove(id);
    }

    /// Closes `id` here unless a caller holds it (a call or transfer is running): whether it is
    /// closed now (or was not open).
    pub(super) async fn close_unless_in_use(&self, id: &str) -> bool {
        let closed = {
            let mut open = self.open.lock().await;
            match open.get(id) {
                Some(cached) if cached.in_use() => return false,
                Some(_) => open.remove(id).map(|c| c.env),
                None => None,
            }
        };
        close_off_runtime(closed.into_iter().collect()).await;
        true
    }

    /// Runs `f` on the environment's tree on the blocking pool.
    pub(super) async fn on_tree<T: Send + 'static>(
        &self,
        id: &str,
        f: impl FnOnce(&RootDir) -> Result<T, ProviderError> + Send + 'static,
    ) -> Result<T, ProviderError> {
        let env = self.env(id).await?;
        tokio::task::spawn_blocking(move || f(env.tree()))
            .await
            .map_err(|e| ProviderError::Internal(e.to_string()))?
    }
}

/// Drops `envs` on the blocking pool: closing a warm sandbox waits for its processes, which
/// must not hold up a runtime thread.
async fn close_off_runtime(envs: Vec<Arc<Environment>>) {
    if envs.is_empty() {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || drop(envs)).await;
}

#[cfg(test)]
pub(super) mod tests;
