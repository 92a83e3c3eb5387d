//! The adapter between the agent seams ([`ToolExecutor`], [`EnvironmentProvider`]) and
//! `hookbox-sandbox`: API sources become sandbox sources, a tool call goes to
//! [`Environment::call_tool`] (where hooks → tool → hooks happen) and its outcome becomes a
//! [`ToolExecution`] with the hook trace, files go through the environment's confined tree.
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
//! This module translates only: it must not run hooks, resolve paths itself or re-implement any
//! part of the tool-call lifecycle.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hookbox_agent::seams::{
    EnvironmentProvider, EnvironmentSetup, EnvironmentUsage, ProviderError, ToolExecution,
    ToolExecutor,
};
use hookbox_protocol::ToolCall;
use hookbox_protocol::api::{EnvironmentFile, FileType, Source as ApiSource};
use hookbox_rootfs::{EntryKind, RootDir, RootFsError};
use hookbox_sandbox::environment::{EnvError, Environment, Store, ToolResult};
use hookbox_sandbox::slots::SlotRegistry;
use hookbox_sandbox::source::{self, Encoding, EnvValue, EnvironmentSpec, Source, SourceOrigin};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// Largest file served by a download.
pub const MAX_DOWNLOAD_BYTES: u64 = 1024 * 1024 * 1024;

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
    store: Store,
    limits: CacheLimits,
    clock: Clock,
    open: Mutex<HashMap<String, Cached>>,
    /// Per-project limits on concurrently running sandboxed processes.
    slots: Option<Arc<SlotRegistry>>,
    /// Snapshots in object storage: restore before open, checkpoints after changes.
    snapshots: Option<Arc<hookbox_snapshot::Manager>>,
    /// Limits of the agent's connections to remote MCP servers.
    mcp: hookbox_mcp::client::ClientOptions,
    /// Among replicas: which environments' leases this replica holds, and under which fence.
    leases: Option<Arc<dyn hookbox_store::Cluster>>,
    /// Copies closed after their lease was lost that a running call still holds: the
    /// environment is not opened again here until they are gone.
    closing: std::sync::Mutex<HashMap<String, Weak<Environment>>>,
}

impl SandboxBackend {
    /// A backend with the default [`CacheLimits`].
    pub fn new(store: Store) -> Self {
        Self::with_limits(store, CacheLimits::default(), Clock::system())
    }

    pub fn with_limits(store: Store, limits: CacheLimits, clock: Clock) -> Self {
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
    fn fence_of(&self, id: &str) -> Result<u64, ProviderError> {
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
    async fn ensure_local(&self, id: &str, fence: u64) -> Result<(), ProviderError> {
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
    async fn env(&self, id: &str) -> Result<Arc<Environment>, ProviderError> {
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
        self.closed(evicted.idle);
        Ok(env)
    }

    /// Drops environments just closed; with snapshots, each is checkpointed if it changed.
    fn closed(&self, evicted: Vec<Arc<Environment>>) {
        let ids: Vec<String> = evicted.iter().map(|e| e.id().to_owned()).collect();
        drop(evicted);
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
        self.closed(evicted.idle);
        if let Some(manager) = &self.snapshots {
            manager.evict(&still_open).await;
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

    /// Runs `f` on the environment's tree on the blocking pool.
    async fn on_tree<T: Send + 'static>(
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

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, EnvError> + Send + 'static,
) -> Result<T, ProviderError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProviderError::Internal(e.to_string()))?
        .map_err(env_error)
}

fn env_error(err: EnvError) -> ProviderError {
    match err {
        EnvError::NotFound(id) | EnvError::BadId(id) => ProviderError::EnvironmentNotFound(id),
        EnvError::Source(e) => ProviderError::InvalidSource(e.to_string()),
        EnvError::Policy(e) => ProviderError::InvalidSource(format!("network: {e}")),
        EnvError::Fs(e) => fs_error(e),
        other => ProviderError::Internal(other.to_string()),
    }
}

fn fs_error(err: RootFsError) -> ProviderError {
    match err {
        RootFsError::NotFound { path } => ProviderError::FileNotFound(path),
        RootFsError::NotAFile { path } | RootFsError::IsADirectory { path } => {
            ProviderError::InvalidPath(format!("`{path}` is not a regular file"))
        }
        RootFsError::NotADirectory { path } => {
            ProviderError::InvalidPath(format!("`{path}`: a parent is not a directory"))
        }
        RootFsError::InvalidPath { path, reason } => {
            ProviderError::InvalidPath(format!("`{path}`: {reason}"))
        }
        RootFsError::TooLarge { path, limit } => {
            ProviderError::InvalidPath(format!("`{path}` is larger than {limit} bytes"))
        }
        other => ProviderError::Internal(other.to_string()),
    }
}

/// API sources (spec §5.2: `type` case-insensitive, default `inline`; relative targets resolve
/// against `/`) as sandbox sources.
pub fn sandbox_sources(sources: &[ApiSource]) -> Result<Vec<Source>, ProviderError> {
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bad = |m: String| ProviderError::InvalidSource(format!("sources[{i}]: {m}"));
            let kind = s.kind.as_deref().unwrap_or("inline").to_ascii_lowercase();
            let target = s.target.clone().filter(|t| !t.trim().is_empty());
            match kind.as_str() {
                "inline" => {
                    let target = target.ok_or_else(|| bad("`target` is required".into()))?;
                    let encoding = match s.encoding.as_deref().map(str::to_ascii_lowercase) {
                        None => Encoding::Utf8,
                        Some(e) if e.is_empty() || e == "utf-8" || e == "utf8" => Encoding::Utf8,
                        Some(e) if e == "base64" => Encoding::Base64,
                        Some(e) => {
                            return Err(bad(format!("unknown encoding `{e}` (expected base64)")));
                        }
                    };
                    Ok(Source::Inline {
                        target,
                        content: s.content.clone().unwrap_or_default(),
                        encoding,
                    })
                }
                "repository" => {
                    let url =
                        s.source.clone().filter(|u| !u.is_empty()).ok_or_else(|| {
                            bad("`source` (the repository URL) is required".into())
                        })?;
                    Ok(Source::Repository {
                        url,
                        target: target.unwrap_or_else(|| "/workspace".into()),
                        reference: None,
                    })
                }
                "gcs" => {
                    let url = s.source.as_deref().unwrap_or_default();
                    let rest = url.strip_prefix("gs://").ok_or_else(|| {
                        bad(format!("`source` must be gs://BUCKET/PREFIX, got `{url}`"))
                    })?;
                    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                    if bucket.is_empty() {
                        return Err(bad("`source` names no bucket".into()));
                    }
                    Ok(Source::Gcs {
                        bucket: bucket.to_owned(),
                        prefix: prefix.to_owned(),
                        target: target.unwrap_or_else(|| "/workspace".into()),
                    })
                }
                other => Err(bad(format!(
                    "type `{other}` is not supported (inline, repository or gcs)"
                ))),
            }
        })
        .collect()
}

/// The embedded environment's `env` map as sandbox variables.
fn sandbox_env(
    env: Option<&serde_json::Map<String, Value>>,
) -> Result<std::collections::BTreeMap<String, EnvValue>, ProviderError> {
    let mut out = std::collections::BTreeMap::new();
    for (name, value) in env.into_iter().flatten() {
        let plain = match value {
            Value::String(s) => s.clone(),
            Value::Object(o) if o.get("credential").is_some() => {
                return Err(ProviderError::InvalidSource(format!(
                    "env.{name}: credential references in `env` are not supported yet; use a network allowlist `credential` instead"
                )));
            }
            Value::Object(o) => match o.get("value") {
                Some(Value::String(s)) => s.clone(),
                _ => {
                    return Err(ProviderError::InvalidSource(format!(
                        "env.{name}: expected a string or {{\"value\": \"…\"}}"
                    )));
                }
            },
            _ => {
                return Err(ProviderError::InvalidSource(format!(
                    "env.{name}: expected a string or {{\"value\": \"…\"}}"
                )));
            }
        };
        out.insert(name.clone(), EnvValue::Plain(plain));
    }
    Ok(out)
}

fn spec(setup: &EnvironmentSetup) -> Result<EnvironmentSpec, ProviderError> {
    let network = setup
        .network
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|e| ProviderError::InvalidSource(format!("network: {e}")))?;
    Ok(EnvironmentSpec {
        sources: sandbox_sources(&setup.sources)?,
        env: sandbox_env(setup.env.as_ref())?,
        freeze_hooks: false,
        network,
        project: (!setup.project.is_empty()).then(|| setup.project.clone()),
        disk_limit_bytes: setup.disk_limit_bytes,
        // Absent: the server's `--runtime`; a fork keeps its parent's (Store::fork).
        runtime: setup
            .runtime
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(ProviderError::InvalidSource)?,
    })
}

/// What the model sees of a sandbox result. `code_execution` becomes text (stdout, stderr, a
/// note on a non-zero exit or a kill), and an error when it did not exit 0.
fn tool_output(tool: hookbox_protocol::ToolName, output: Value) -> (Value, bool) {
    if tool != hookbox_protocol::ToolName::CodeExecution {
        return (output, false);
    }
    let text = |k: &str| output.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut out = format!("{}{}", text("stdout"), text("stderr"));
    let failed = match output.get("exit_code").and_then(Value::as_i64) {
        Some(0) => false,
        Some(code) => {
            out.push_str(&format!("(exit status {code})"));
            true
        }
        None => {
            out.push_str(&format!("({})", text("termination")));
            true
        }
    };
    if output.get("truncated").and_then(Value::as_bool) == Some(true) {
        out.push_str("\n(output truncated)");
    }
    (Value::String(out), failed)
}

fn entry(path: &str, kind: EntryKind, size: u64) -> EnvironmentFile {
    let name = path.rsplit('/').next().unwrap_or_default();
    EnvironmentFile {
        name: (!name.is_empty()).then(|| name.to_owned()),
        path: Some(path.to_owned()),
        kind: Some(match kind {
            EntryKind::Dir => FileType::Directory,
            EntryKind::File | EntryKind::Symlink | EntryKind::Other => FileType::File,
        }),
        size_bytes: (kind == EntryKind::File).then_some(size),
        mime_type: None,
        created: None,
        modified: None,
    }
}

fn join(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// A file path for upload: absolute, normalised, not the root, not a host-provided directory.
fn upload_path(path: &str) -> Result<String, ProviderError> {
    source::normalise_target(path).map_err(|e| ProviderError::InvalidPath(e.to_string()))
}

#[async_trait]
impl ToolExecutor for SandboxBackend {
    async fn execute(&self, environment_id: &str, call: &ToolCall) -> ToolExecution {
        self.run_call(environment_id, call, None).await
    }

    async fn execute_streaming(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: hookbox_agent::OutputSink,
    ) -> ToolExecution {
        self.run_call(environment_id, call, Some(utf8_tap(output)))
            .await
    }

    async fn execute_approved(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<hookbox_agent::OutputSink>,
    ) -> ToolExecution {
        self.run_call_as(environment_id, call, output.map(utf8_tap), Gate::Approved)
            .await
    }

    async fn mcp_session(
        &self,
        environment_id: &str,
        servers: &[hookbox_agent::mcp::McpServerSpec],
    ) -> Arc<dyn hookbox_agent::mcp::McpTools> {
        match self.env(environment_id).await {
            Ok(env) => {
                Arc::new(hookbox_mcp::client::McpSession::connect(env, servers, self.mcp).await)
            }
            Err(err) => {
                tracing::warn!(environment_id, error = %err, "cannot open the environment for its MCP connections");
                Arc::new(hookbox_agent::mcp::Unreachable::all(
                    servers,
                    "the environment could not be opened",
                ))
            }
        }
    }

    async fn interaction_hooks(
        &self,
        environment_id: &str,
        payload: &hookbox_protocol::InteractionHookPayload,
    ) -> hookbox_agent::InteractionHooks {
        let env = match self.env(environment_id).await {
            Ok(env) => env,
            Err(ProviderError::Unavailable(reason)) => {
                // The hooks may exist but cannot be read here now (the lease moved, the store
                // is down): the turn must not run without them.
                tracing::warn!(environment_id, error = %reason, event = %payload.hook_event_name, "the environment is unavailable for its interaction hooks; the turn is refused");
                return hookbox_agent::InteractionHooks {
                    denied: Some(format!(
                        "the environment's interaction hooks could not run: {reason}"
                    )),
                    context: Vec::new(),
                };
            }
            Err(err) => {
                // No environment, no hooks file to read: nothing can have been configured.
                tracing::warn!(environment_id, error = %err, event = %payload.hook_event_name, "cannot open the environment for its interaction hooks");
                return hookbox_agent::InteractionHooks::default();
            }
        };
        let dispatch = env.interaction_hooks(payload).await;
        if dispatch.trace.is_empty() {
            return hookbox_agent::InteractionHooks::default();
        }
        tracing::info!(
            environment_id,
            event = %payload.hook_event_name,
            decision = dispatch.decision.label(),
            handlers = dispatch.trace.len(),
            duration_ms = dispatch.duration_ms,
            "interaction hooks ran"
        );
        hookbox_agent::InteractionHooks {
            denied: match &dispatch.decision {
                hookbox_hooks::Decision::Deny { reason, .. } => Some(reason.clone()),
                hookbox_hooks::Decision::Allow | hookbox_hooks::Decision::Ask { .. } => None,
            },
            context: dispatch.additional_context,
        }
    }
}

/// Whether a call goes through its pre hooks or was approved by a person after one asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    PreHooks,
    Approved,
}

/// Turns stdout bytes into text pieces for `sink`, holding back an incomplete UTF-8 sequence at
/// the end of a chunk so every piece is whole characters and the pieces concatenate to
/// `String::from_utf8_lossy` of the whole (which is how the result step's text begins).
fn utf8_tap(sink: hookbox_agent::OutputSink) -> hookbox_sandbox::runner::StdoutTap {
    let pending = std::sync::Mutex::new(Vec::<u8>::new());
    Arc::new(move |bytes: &[u8]| {
        let mut buf = pending.lock().unwrap_or_else(|p| p.into_inner());
        buf.extend_from_slice(bytes);
        let whole = match std::str::from_utf8(&buf) {
            Ok(_) => buf.len(),
            // An error with no length is a sequence cut off at the end: keep it for later.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => buf.len(),
        };
        if whole == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&buf[..whole]).into_owned();
        buf.drain(..whole);
        drop(buf);
        sink(&text);
    })
}

impl SandboxBackend {
    async fn run_call(
        &self,
        environment_id: &str,
        call: &ToolCall,
        tap: Option<hookbox_sandbox::runner::StdoutTap>,
    ) -> ToolExecution {
        self.run_call_as(environment_id, call, tap, Gate::PreHooks)
            .await
    }

    async fn run_call_as(
        &self,
        environment_id: &str,
        call: &ToolCall,
        tap: Option<hookbox_sandbox::runner::StdoutTap>,
        gate: Gate,
    ) -> ToolExecution {
        let env = match self.env(environment_id).await {
            Ok(env) => env,
            Err(ProviderError::EnvironmentNotFound(id)) => {
                return ToolExecution::error(format!("environment `{id}` not found"));
            }
            Err(err) => {
                tracing::error!(environment_id, error = %err, "cannot open the environment's sandbox");
                return ToolExecution::error(
                    "the sandbox could not be opened; see the hookbox server log",
                );
            }
        };
        let started = std::time::Instant::now();
        // The call's span (its hook handlers' spans beneath it); never arguments or output.
        let span = tracing::info_span!(
            "tool_call",
            tool = %call.name,
            environment_id,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty
        );
        let run = async {
            match gate {
                Gate::PreHooks => env.call_tool_streaming(call.clone(), tap).await,
                Gate::Approved => env.call_tool_approved(call.clone(), tap).await,
            }
        };
        let outcome = tracing::Instrument::instrument(run, span.clone()).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let mut trace = json!({
            "files": outcome.hooks.files,
            "diagnostics": outcome.hooks.diagnostics,
            "pre": outcome.pre,
            "post": outcome.post,
        });
        // A pre hook rewrote the arguments (hookbox extension): the step keeps the model's
        // call, the trace says what actually ran.
        if outcome.original_args.is_some()
            && let Some(map) = trace.as_object_mut()
        {
            map.insert("ran_with_args".into(), outcome.call.args.clone());
        }
        let result = match &outcome.result {
            ToolResult::Ok { .. } => "ok",
            ToolResult::Error { .. } => "error",
            ToolResult::Denied { .. } => "denied",
            ToolResult::NeedsApproval { .. } => "ask",
        };
        span.record("outcome", result);
        span.record("duration_ms", duration_ms);
        tracing::info!(
            name: hookbox_protocol::events::TOOL_FINISHED,
            environment_id,
            tool = %call.name,
            outcome = result,
            duration_ms,
            pre_handlers = outcome.pre.trace.len(),
            post_handlers = outcome.post.as_ref().map_or(0, |p| p.trace.len()),
            pre_decision = outcome.pre.decision.label(),
            args_rewritten = outcome.original_args.is_some(),
            "tool call finished"
        );
        let context = outcome.context_lines();
        let mut execution = match outcome.result {
            ToolResult::Ok { output } => {
                let (output, is_error) = tool_output(call.name, output);
                ToolExecution {
                    is_error,
                    ..ToolExecution::ok(output)
                }
            }
            ToolResult::Error { error } => ToolExecution::error(error),
            ToolResult::Denied { reason } => ToolExecution::denied(reason),
            ToolResult::NeedsApproval { reason, group } => {
                ToolExecution::ask(hookbox_agent::ApprovalRequest {
                    reason,
                    group,
                    args: outcome.call.args.clone(),
                })
            }
        };
        // Hooks that answered `additional_context` (hookbox extension): the model sees it with
        // the result. Without one, the result is exactly the tool's.
        if !context.is_empty() {
            execution.output = with_context(std::mem::take(&mut execution.output), &context);
        }
        execution.trace = trace;
        execution
    }
}

/// A tool result with the hooks' `additional_context` lines: appended to a text result, as an
/// `additional_context` list in a JSON one.
fn with_context(output: Value, context: &[String]) -> Value {
    match output {
        Value::String(mut text) => {
            for line in context {
                text.push('\n');
                text.push_str(line);
            }
            Value::String(text)
        }
        Value::Object(mut map) => {
            map.insert("additional_context".into(), json!(context));
            Value::Object(map)
        }
        other => json!({"result": other, "additional_context": context}),
    }
}

#[async_trait]
impl EnvironmentProvider for SandboxBackend {
    async fn create(&self, setup: &EnvironmentSetup) -> Result<String, ProviderError> {
        let spec = spec(setup)?;
        let store = self.store.clone();
        let meta =
            blocking(move || store.create(&spec, SourceOrigin::Client, &mut |_| {}, false)).await?;
        Ok(meta.id)
    }

    async fn update(&self, id: &str, setup: &EnvironmentSetup) -> Result<(), ProviderError> {
        if setup.network.is_some() || setup.env.is_some() {
            return Err(ProviderError::InvalidSource(
                "`network` and `env` of an existing environment cannot be changed; create a new environment (or fork this one) instead".into(),
            ));
        }
        let sources = sandbox_sources(&setup.sources)?;
        // API clients are untrusted: https repositories only, cloned through the environment's
        // egress, bounded like at creation.
        source::validate_sources(&sources, SourceOrigin::Client)
            .map_err(|e| ProviderError::InvalidSource(e.to_string()))?;
        let env = self.env(id).await?;
        blocking(move || env.add_sources(&sources, SourceOrigin::Client)).await
    }

    async fn fork(&self, from: &str, setup: &EnvironmentSetup) -> Result<String, ProviderError> {
        // The parent's metadata shows `transform` values redacted, so network and env come from
        // the caller's record. Frozen hooks are copied as frozen (the snapshot comes along).
        let spec = EnvironmentSpec {
            sources: Vec::new(),
            ..spec(setup)?
        };
        // The parent may live only in the snapshot store (its host stopped): restore it here.
        let fence = self.fence_of(from)?;
        self.ensure_local(from, fence).await?;
        let store = self.store.clone();
        let from = from.to_owned();
        let child = blocking(move || store.fork(&from, &spec)).await?;
        if let Some(manager) = &self.snapshots {
            manager.request(&child.id);
        }
        Ok(child.id)
    }

    async fn delete(&self, id: &str) -> Result<(), ProviderError> {
        self.open.lock().await.remove(id);
        let store = self.store.clone();
        let owned = id.to_owned();
        match blocking(move || store.remove(&owned)).await {
            Ok(()) | Err(ProviderError::EnvironmentNotFound(_)) if self.snapshots.is_some() => {}
            other => return other,
        }
        if let Some(manager) = &self.snapshots {
            manager.delete(id).await.map_err(|e| {
                ProviderError::Unavailable(format!(
                    "Environment `{id}`'s files are deleted here, but its snapshots could not be deleted ({e}); retry the deletion."
                ))
            })?;
        }
        Ok(())
    }

    async fn checkpoint(&self, id: &str, wait: bool) -> Result<(), ProviderError> {
        let Some(manager) = &self.snapshots else {
            return Ok(());
        };
        if !wait {
            manager.request(id);
            return Ok(());
        }
        manager.checkpoint_now(id).await.map(|_| ()).map_err(|e| {
            use hookbox_snapshot::SnapshotError as S;
            match e {
                // Final: another replica holds the environment, or ran it since this copy was
                // current; retrying cannot upload this copy.
                S::Stale { .. } | S::NotHolder { .. } => ProviderError::Internal(e.to_string()),
                other => ProviderError::Unavailable(other.to_string()),
            }
        })
    }

    async fn hand_over(&self, id: &str) -> Result<bool, ProviderError> {
        let closed = {
            let mut open = self.open.lock().await;
            match open.get(id) {
                Some(cached) if cached.in_use() => return Ok(false),
                Some(_) => open.remove(id).map(|c| c.env),
                None => None,
            }
        };
        close_off_runtime(closed.into_iter().collect()).await;
        if self.store.is_local(id) {
            self.checkpoint(id, true).await?;
        }
        Ok(true)
    }

    async fn hooks_report(&self, id: &str) -> Result<Value, ProviderError> {
        let env = self.env(id).await?;
        let (loaded, frozen) = blocking(move || Ok(env.hooks_report())).await?;
        let mut report =
            serde_json::to_value(&loaded).map_err(|e| ProviderError::Internal(e.to_string()))?;
        if let Some(map) = report.as_object_mut() {
            map.insert("frozen".into(), Value::Bool(frozen));
        }
        Ok(report)
    }

    async fn list_files(
        &self,
        id: &str,
        path: &str,
        recursive: bool,
    ) -> Result<Vec<EnvironmentFile>, ProviderError> {
        let path = format!("/{}", path.trim_matches('/'));
        self.on_tree(id, move |tree| {
            if path != "/" {
                let meta = tree.symlink_metadata(&path).map_err(fs_error)?;
                if meta.kind != EntryKind::Dir {
                    return Ok(vec![entry(&path, meta.kind, meta.size)]);
                }
            }
            let mut out = Vec::new();
            let mut pending = vec![path];
            while let Some(dir) = pending.pop() {
                for e in tree.list_dir(&dir).map_err(fs_error)? {
                    let child = join(&dir, &e.name);
                    if recursive && e.kind == EntryKind::Dir {
                        pending.push(child.clone());
                    }
                    out.push(entry(&child, e.kind, e.size));
                }
            }
            out.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(out)
        })
        .await
    }

    async fn read_file(&self, id: &str, path: &str) -> Result<Vec<u8>, ProviderError> {
        let path = path.to_owned();
        self.on_tree(id, move |tree| {
            tree.read_file(&path, MAX_DOWNLOAD_BYTES)
                .map_err(|e| match e {
                    RootFsError::NotAFile { path } | RootFsError::IsADirectory { path } => {
                        ProviderError::FileNotFound(path)
                    }
                    other => fs_error(other),
                })
        })
        .await
    }

    async fn write_file(
        &self,
        id: &str,
        path: &str,
        bytes: &[u8],
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError> {
        let bytes = bytes.to_vec();
        self.write_from(id, path, Box::new(std::io::Cursor::new(bytes)), overwrite)
            .await
    }

    async fn write_file_from(
        &self,
        id: &str,
        path: &str,
        mut source: std::fs::File,
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError> {
        use std::io::Seek as _;
        source
            .rewind()
            .map_err(|e| ProviderError::Internal(format!("reading an upload's spool: {e}")))?;
        self.write_from(id, path, Box::new(source), overwrite).await
    }

    async fn usage(&self, id: &str) -> Result<EnvironmentUsage, ProviderError> {
        self.on_tree(id, |tree| {
            let usage = tree.usage().map_err(fs_error)?;
            Ok(EnvironmentUsage {
                file_count: usage.files,
                size_bytes: usage.bytes,
            })
        })
        .await
    }
}

impl SandboxBackend {
    /// Writes `source` to `path` of environment `id` through the tree's path-safe atomic write
    /// (off the async executor), and asks for a checkpoint.
    async fn write_from(
        &self,
        id: &str,
        path: &str,
        mut source: Box<dyn std::io::Read + Send>,
        overwrite: bool,
    ) -> Result<EnvironmentFile, ProviderError> {
        let path = upload_path(path)?;
        let env = self.env(id).await?;
        let file = tokio::task::spawn_blocking(move || {
            let tree = env.tree();
            match tree.symlink_metadata(&path) {
                Ok(_) if !overwrite => return Err(ProviderError::FileExists(path)),
                Ok(_) | Err(RootFsError::NotFound { .. }) => {}
                Err(e) => return Err(fs_error(e)),
            }
            tree.write_file_from(&path, &mut source, true)
                .map_err(fs_error)?;
            env.record_write();
            let meta = tree.symlink_metadata(&path).map_err(fs_error)?;
            Ok(entry(&path, meta.kind, meta.size))
        })
        .await
        .map_err(|e| ProviderError::Internal(e.to_string()))??;
        if let Some(manager) = &self.snapshots {
            manager.request(id);
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(kind: &str, target: Option<&str>, source: Option<&str>) -> ApiSource {
        ApiSource {
            kind: Some(kind.into()),
            target: target.map(Into::into),
            content: Some("aGk=".into()),
            encoding: Some("BASE64".into()),
            source: source.map(Into::into),
            ..ApiSource::default()
        }
    }

    #[test]
    fn api_sources_map_to_sandbox_sources() {
        let got = sandbox_sources(&[
            src("INLINE", Some(".agents/hooks.json"), None),
            src("repository", None, Some("https://example.com/r.git")),
            src(
                "gcs",
                Some("/workspace/data"),
                Some("gs://bucket/some/prefix"),
            ),
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                Source::Inline {
                    target: ".agents/hooks.json".into(),
                    content: "aGk=".into(),
                    encoding: Encoding::Base64
                },
                Source::Repository {
                    url: "https://example.com/r.git".into(),
                    target: "/workspace".into(),
                    reference: None
                },
                Source::Gcs {
                    bucket: "bucket".into(),
                    prefix: "some/prefix".into(),
                    target: "/workspace/data".into()
                },
            ]
        );
    }

    /// A store without isolation in `data` (file tools only; no launcher is needed).
    fn unisolated_store(data: &std::path::Path) -> Store {
        let credentials =
            Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data).unwrap());
        let launcher = hookbox_sandbox::runner::Launcher::standalone("/nonexistent");
        let mut options = hookbox_sandbox::runner::SandboxOptions::new(launcher);
        options.isolation = hookbox_isolation::spec::Isolation::InsecureNone;
        Store::open(
            data,
            options,
            hookbox_sandbox::EgressOptions::new(credentials),
        )
        .unwrap()
    }

    /// A backend whose clock only moves when the returned `advance` is called.
    fn backend_with_clock(
        data: &std::path::Path,
        limits: CacheLimits,
    ) -> (SandboxBackend, impl Fn(Duration)) {
        let start = Instant::now();
        let offset = Arc::new(std::sync::Mutex::new(Duration::ZERO));
        let read = offset.clone();
        let clock = Clock::from_fn(move || start + *read.lock().unwrap());
        let backend = SandboxBackend::with_limits(unisolated_store(data), limits, clock);
        (backend, move |by| *offset.lock().unwrap() += by)
    }

    /// The cache's current `Arc` for `id`, if open.
    async fn cached(backend: &SandboxBackend, id: &str) -> Option<Arc<Environment>> {
        backend.open.lock().await.get(id).map(|c| c.env.clone())
    }

    #[tokio::test]
    async fn idle_environment_is_dropped_busy_one_kept_and_files_survive_reopening() {
        let data = tempfile::tempdir().unwrap();
        let limits = CacheLimits {
            idle_timeout: Duration::from_secs(600),
            max_open: 256,
        };
        let (backend, advance) = backend_with_clock(data.path(), limits);
        let idle = backend.create(&EnvironmentSetup::default()).await.unwrap();
        let busy = backend.create(&EnvironmentSetup::default()).await.unwrap();
        backend
            .write_file(&idle, "/workspace/kept.txt", b"before eviction", false)
            .await
            .unwrap();
        let idle_weak = Arc::downgrade(&backend.env(&idle).await.unwrap());
        // Held as `execute` holds it during a running tool call.
        let busy_env = backend.env(&busy).await.unwrap();

        advance(Duration::from_secs(599));
        assert_eq!(backend.evict_idle().await, 0, "not idle long enough yet");
        assert!(idle_weak.upgrade().is_some());

        advance(Duration::from_secs(2));
        assert_eq!(backend.evict_idle().await, 1);
        assert!(
            idle_weak.upgrade().is_none(),
            "the idle environment must be released"
        );
        assert!(cached(&backend, &idle).await.is_none());
        let still = cached(&backend, &busy).await.unwrap();
        assert!(
            Arc::ptr_eq(&still, &busy_env),
            "the busy environment is kept"
        );
        drop(still);

        // Reopened from disk on next use, with what was written before.
        let call = ToolCall {
            name: hookbox_protocol::ToolName::ViewFile,
            args: json!({"path": "/workspace/kept.txt"}),
        };
        let result = backend.execute(&idle, &call).await;
        assert!(!result.is_error, "{result:?}");
        assert!(
            result.output.to_string().contains("before eviction"),
            "{result:?}"
        );
        assert!(cached(&backend, &idle).await.is_some());

        // Once its holder lets go, the busy one idles from then on, like any other.
        drop(busy_env);
        let busy_weak = Arc::downgrade(&cached(&backend, &busy).await.unwrap());
        advance(Duration::from_secs(601));
        assert_eq!(backend.evict_idle().await, 2);
        assert!(busy_weak.upgrade().is_none());
    }

    #[tokio::test]
    async fn over_the_cap_least_recently_used_idle_environment_goes_first() {
        let data = tempfile::tempdir().unwrap();
        let limits = CacheLimits {
            idle_timeout: Duration::from_secs(3600),
            max_open: 2,
        };
        let (backend, advance) = backend_with_clock(data.path(), limits);
        let mut ids = Vec::new();
        for _ in 0..3 {
            ids.push(backend.create(&EnvironmentSetup::default()).await.unwrap());
        }
        let (a, b, c) = (&ids[0], &ids[1], &ids[2]);
        let weak = |env: Arc<Environment>| Arc::downgrade(&env);
        let a_weak = weak(backend.env(a).await.unwrap());
        advance(Duration::from_secs(1));
        let b_weak = weak(backend.env(b).await.unwrap());
        advance(Duration::from_secs(1));
        backend.usage(a).await.unwrap(); // `a` is now more recent than `b`.
        advance(Duration::from_secs(1));
        let c_env = backend.env(c).await.unwrap();
        assert!(b_weak.upgrade().is_none(), "`b` was least recently used");
        assert!(a_weak.upgrade().is_some());
        assert_eq!(backend.open.lock().await.len(), 2);

        // Environments in use are never evicted, even over the cap.
        let a_env = backend.env(a).await.unwrap();
        let b_env = backend.env(b).await.unwrap();
        assert_eq!(backend.open.lock().await.len(), 3);
        for env in [&a_env, &b_env, &c_env] {
            assert!(Arc::ptr_eq(&cached(&backend, env.id()).await.unwrap(), env));
        }
        drop((a_env, b_env, c_env));
        // Once released, the excess goes. (All three were last used at the same instant, so
        // which one is not specified; the LRU order itself is checked above.)
        assert_eq!(backend.evict_idle().await, 1);
        assert_eq!(backend.open.lock().await.len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn sweeper_evicts_on_its_own_and_stops_with_the_backend() {
        let data = tempfile::tempdir().unwrap();
        let (backend, advance) = backend_with_clock(data.path(), CacheLimits::default());
        let backend = Arc::new(backend);
        let id = backend.create(&EnvironmentSetup::default()).await.unwrap();
        let env_weak = Arc::downgrade(&backend.env(&id).await.unwrap());
        advance(DEFAULT_IDLE_TIMEOUT);
        let sweeper = backend.spawn_sweeper(Duration::from_secs(60));
        // Paused tokio time: each sleep lets the sweeper run one tick, with no real waiting.
        for _ in 0..2 {
            if env_weak.upgrade().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        assert!(env_weak.upgrade().is_none(), "the sweeper must evict it");
        drop(backend);
        tokio::time::timeout(Duration::from_secs(600), sweeper)
            .await
            .unwrap()
            .unwrap();
    }

    /// The leases of one replica as a test sets them: only `fence` is asked by the backend.
    #[derive(Debug)]
    struct Leases {
        fence: std::sync::Mutex<Option<i64>>,
        replica: hookbox_store::Replica,
    }

    impl Leases {
        fn new() -> Self {
            Leases {
                fence: std::sync::Mutex::new(None),
                replica: hookbox_store::Replica {
                    id: "r_test".into(),
                    url: "http://127.0.0.1:1".into(),
                    lease_ttl: Duration::from_secs(10),
                },
            }
        }

        fn set(&self, fence: Option<i64>) {
            *self.fence.lock().unwrap() = fence;
        }
    }

    #[async_trait]
    impl hookbox_store::Cluster for Leases {
        fn replica(&self) -> &hookbox_store::Replica {
            &self.replica
        }
        fn fence(&self, _resource: &str) -> Option<i64> {
            *self.fence.lock().unwrap()
        }
        async fn heartbeat(&self) -> hookbox_store::Result<()> {
            unreachable!()
        }
        async fn claim(&self, _: &str) -> hookbox_store::Result<hookbox_store::Claim> {
            unreachable!()
        }
        async fn reap(&self, _: &str, _: &str) -> hookbox_store::Result<Vec<String>> {
            unreachable!()
        }
        fn changes(&self) -> tokio::sync::broadcast::Receiver<String> {
            unreachable!()
        }
        async fn runner_of(&self, _: &str) -> hookbox_store::Result<Option<(String, String)>> {
            unreachable!()
        }
        async fn replica_url(&self, _: &str) -> hookbox_store::Result<Option<String>> {
            unreachable!()
        }
        async fn holder(&self, _: &str) -> hookbox_store::Result<Option<(String, String)>> {
            unreachable!()
        }
        async fn peers(&self) -> hookbox_store::Result<Vec<(String, String)>> {
            unreachable!()
        }
        async fn hold(&self, _: &str, _: &str, _: u64) -> hookbox_store::Result<Option<String>> {
            unreachable!()
        }
        async fn unhold(&self, _: &str) -> hookbox_store::Result<()> {
            unreachable!()
        }
        async fn take_tokens(
            &self,
            _: &str,
            _: f64,
            _: f64,
            _: f64,
        ) -> hookbox_store::Result<hookbox_store::TokenGrant> {
            unreachable!()
        }
        fn held(&self) -> Vec<String> {
            unreachable!()
        }
        async fn release(&self, _: &str) -> hookbox_store::Result<()> {
            unreachable!()
        }
        async fn leave(&self) -> hookbox_store::Result<()> {
            unreachable!()
        }
    }

    fn unavailable(result: Result<Arc<Environment>, ProviderError>) -> String {
        match result {
            Err(ProviderError::Unavailable(message)) => message,
            other => panic!("expected 503, got {other:?}"),
        }
    }

    // Regression (issue 36): a replica that lost an environment's lease kept serving the copy it
    // had open before, once it held the lease again.
    #[tokio::test]
    async fn a_copy_opened_under_a_lost_lease_is_closed_before_it_is_served_again() {
        let data = tempfile::tempdir().unwrap();
        let (backend, _advance) = backend_with_clock(data.path(), CacheLimits::default());
        let leases = Arc::new(Leases::new());
        let backend = backend.with_leases(leases.clone());
        let id = backend.create(&EnvironmentSetup::default()).await.unwrap();
        leases.set(Some(1));
        let first = backend.env(&id).await.unwrap();
        let first_weak = Arc::downgrade(&first);
        drop(first);
        // The lease lapses (no renewal within the TTL): not served, and the watch closes it.
        leases.set(None);
        assert!(unavailable(backend.env(&id).await).contains("not held by this replica"));
        // A turn whose interaction hooks cannot be read now is refused, not run without them.
        let payload = hookbox_protocol::InteractionHookPayload {
            interaction_id: "int_1".into(),
            environment_id: id.clone(),
            agent: "antigravity-preview-09-2026".into(),
            input: None,
            input_text: Some("hi".into()),
            status: None,
            output: None,
            errors: None,
            hook_event_name: hookbox_protocol::HookEvent::PreInteraction,
        };
        let hooks = backend.interaction_hooks(&id, &payload).await;
        assert!(
            hooks
                .denied
                .as_deref()
                .is_some_and(|r| r.contains("not held by this replica")),
            "{hooks:?}"
        );
        assert_eq!(backend.close_lost_leases().await, 1);
        assert!(first_weak.upgrade().is_none(), "the lost copy stays open");
        // Held again, under a higher fence: a fresh copy.
        leases.set(Some(3));
        let second = backend.env(&id).await.unwrap();
        // Lost again while a call holds the copy, then held again: the environment is not
        // opened twice; it waits (503) until the call lets go.
        leases.set(Some(4));
        let again = backend.env(&id).await;
        assert!(unavailable(again).contains("still closing"));
        assert!(cached(&backend, &id).await.is_none());
        let second_weak = Arc::downgrade(&second);
        drop(second);
        assert!(second_weak.upgrade().is_none());
        let third = backend.env(&id).await.unwrap();
        assert!(Arc::ptr_eq(&cached(&backend, &id).await.unwrap(), &third));
        // Still held under the same fence: the same copy, and the watch leaves it be.
        assert!(Arc::ptr_eq(&backend.env(&id).await.unwrap(), &third));
        assert_eq!(backend.close_lost_leases().await, 0);
    }

    // Regression: repository sources from API clients were cloned by git on the host, so a
    // client could copy any repository on the server's filesystem into its environment.
    #[tokio::test]
    async fn client_repository_sources_must_be_https_on_create_and_update() {
        let data = tempfile::tempdir().unwrap();
        let backend = SandboxBackend::new(unisolated_store(data.path()));
        let repo = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("git")
            .args(["init", "--quiet"])
            .arg(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let local = repo.path().display().to_string();
        let setup = |url: &str| EnvironmentSetup {
            sources: vec![src("repository", Some("workspace/r"), Some(url))],
            ..EnvironmentSetup::default()
        };
        let id = backend.create(&EnvironmentSetup::default()).await.unwrap();
        for url in [local.clone(), format!("file://{local}")] {
            for err in [
                backend.create(&setup(&url)).await.unwrap_err(),
                backend.update(&id, &setup(&url)).await.unwrap_err(),
            ] {
                let ProviderError::InvalidSource(message) = err else {
                    panic!("{url}: {err:?}");
                };
                assert!(
                    message.contains("sources[0]") && message.contains("only https:// URLs"),
                    "{message}"
                );
            }
        }
        assert_eq!(backend.store.show(&id).unwrap().file_count, 0);
        assert_eq!(backend.store.list().unwrap().len(), 1);
    }

    #[test]
    fn unsupported_sources_name_their_index() {
        for (bad, needle) in [
            (
                src("skill_registry", Some("a"), None),
                "sources[0]: type `skill_registry`",
            ),
            (src("inline", None, None), "`target` is required"),
            (src("gcs", Some("a"), Some("s3://x")), "gs://BUCKET/PREFIX"),
            (src("repository", Some("a"), None), "repository URL"),
        ] {
            let err = sandbox_sources(&[bad]).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        let mut odd = src("inline", Some("a"), None);
        odd.encoding = Some("rot13".into());
        assert!(sandbox_sources(&[odd]).is_err());
    }

    #[test]
    fn code_execution_output_is_text_and_non_zero_exit_is_an_error() {
        let code = hookbox_protocol::ToolName::CodeExecution;
        let ok = json!({"stdout": "a\n", "stderr": "", "exit_code": 0, "termination": "exited 0", "truncated": false});
        assert_eq!(tool_output(code, ok), (json!("a\n"), false));
        let bad = json!({"stdout": "", "stderr": "no\n", "exit_code": 2, "termination": "exited 2", "truncated": false});
        assert_eq!(tool_output(code, bad), (json!("no\n(exit status 2)"), true));
        let file = json!({"path": "/w", "content": "x"});
        assert_eq!(
            tool_output(hookbox_protocol::ToolName::ViewFile, file.clone()),
            (file, false)
        );
    }

    #[test]
    fn env_values_and_credential_references() {
        let map: serde_json::Map<String, Value> =
            serde_json::from_value(json!({"A": "1", "B": {"value": "2"}})).unwrap();
        let env = sandbox_env(Some(&map)).unwrap();
        assert_eq!(env["A"].value(), "1");
        assert_eq!(env["B"].value(), "2");
        let map: serde_json::Map<String, Value> =
            serde_json::from_value(json!({"T": {"credential": "tok"}})).unwrap();
        assert!(sandbox_env(Some(&map)).is_err());
    }
}
