//! Per-project quotas: how many environments a project keeps, how many of its interactions and
//! sandboxed processes run at once, how many requests per second it may send (a token bucket),
//! and how large each of its environments' disks is (enforced by the kernel, see
//! `hookbox_environments::disk`).
//!
//! Where the numbers come from, later wins: built-in defaults (which a single-user install never
//! hits), the config file's `[quotas]`, its `[projects.NAME.quotas]`, and the overrides stored
//! with a managed project (`hookbox project quota NAME key=value`), re-read at most every
//! [`OVERRIDE_TTL`]. Over a quota the API answers 429 `RESOURCE_EXHAUSTED` naming the quota,
//! with `Retry-After`; nothing stored is touched by a refusal. This module decides; it must not
//! run anything.
//!
//! Among replicas the counts are the cluster's, kept in PostgreSQL (`hookbox_store::Cluster`):
//! `running_interactions` and, per tool call, `sandbox_processes` are places held by live
//! replicas, and the request rate is one bucket per project. Each replica still counts its own
//! sandboxed processes (hooks included) against the same limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use hookbox_agent::execution::ToolExecution;
use hookbox_agent::seams::{OutputSink, ToolExecutor};
use hookbox_environments::RuntimeKind;
use hookbox_protocol::ToolCall;
use hookbox_store::{Cluster, Store};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// How long stored per-project overrides are cached.
pub const OVERRIDE_TTL: Duration = Duration::from_secs(2);

/// The effective quotas of one project.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quotas {
    /// Environments the project keeps (created, not yet deleted).
    pub environments: u64,
    /// Interactions running at once.
    pub running_interactions: u64,
    /// Sandboxed processes (tool calls and command hooks) running at once.
    pub sandbox_processes: u64,
    /// Sustained requests per second.
    pub requests_per_second: f64,
    /// Requests allowed in a burst above the sustained rate.
    pub burst: u64,
    /// The disk cap of each environment, in bytes (`0`: no cap).
    pub disk_bytes_per_environment: u64,
    /// An environment not used for this long expires: its files and snapshots are deleted and
    /// its metadata kept as `expired` (`0`: never).
    pub environment_ttl_seconds: u64,
    /// Live WebSockets (`/interactions/live`) open at once.
    pub live_sockets: u64,
    /// Frames a live socket may send per second (more get an `error` event and are dropped).
    pub live_frames_per_second: u64,
    /// Largest frame a live socket may send, in bytes (a larger one gets an `error` event).
    pub live_max_frame_bytes: u64,
    /// A live socket that sends nothing for this long while no turn runs is closed (the
    /// interaction is kept).
    pub live_idle_timeout_seconds: u64,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            environments: 1000,
            running_interactions: 256,
            sandbox_processes: 256,
            requests_per_second: 1000.0,
            burst: 2000,
            disk_bytes_per_environment: 10 << 30,
            environment_ttl_seconds: DEFAULT_ENVIRONMENT_TTL_SECONDS,
            live_sockets: 64,
            live_frames_per_second: 50,
            live_max_frame_bytes: 1 << 20,
            live_idle_timeout_seconds: 600,
        }
    }
}

/// Bounds of [`Quotas::live_max_frame_bytes`]: 1 KiB to 16 MiB.
pub const MIN_LIVE_FRAME_BYTES: u64 = 1 << 10;
pub const MAX_LIVE_FRAME_BYTES: u64 = 16 << 20;

/// Default of [`Quotas::environment_ttl_seconds`]: 30 days.
pub const DEFAULT_ENVIRONMENT_TTL_SECONDS: u64 = 30 * 24 * 3600;

/// The names of the quotas, as written in config files and on the command line.
pub const QUOTA_NAMES: &[&str] = &[
    "environments",
    "running_interactions",
    "sandbox_processes",
    "requests_per_second",
    "burst",
    "disk_bytes_per_environment",
    "environment_ttl_seconds",
    "live_sockets",
    "live_frames_per_second",
    "live_max_frame_bytes",
    "live_idle_timeout_seconds",
];

/// Some quotas; the rest come from a lower layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaOverrides {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environments: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_interactions: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_processes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_bytes_per_environment: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_ttl_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_sockets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_frames_per_second: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_max_frame_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_idle_timeout_seconds: Option<u64>,
}

impl QuotaOverrides {
    /// `base` with these overrides applied.
    pub fn apply(&self, base: Quotas) -> Quotas {
        Quotas {
            environments: self.environments.unwrap_or(base.environments),
            running_interactions: self
                .running_interactions
                .unwrap_or(base.running_interactions),
            sandbox_processes: self.sandbox_processes.unwrap_or(base.sandbox_processes),
            requests_per_second: self.requests_per_second.unwrap_or(base.requests_per_second),
            burst: self.burst.unwrap_or(base.burst),
            disk_bytes_per_environment: self
                .disk_bytes_per_environment
                .unwrap_or(base.disk_bytes_per_environment),
            environment_ttl_seconds: self
                .environment_ttl_seconds
                .unwrap_or(base.environment_ttl_seconds),
            live_sockets: self.live_sockets.unwrap_or(base.live_sockets),
            live_frames_per_second: self
                .live_frames_per_second
                .unwrap_or(base.live_frames_per_second),
            live_max_frame_bytes: self
                .live_max_frame_bytes
                .unwrap_or(base.live_max_frame_bytes),
            live_idle_timeout_seconds: self
                .live_idle_timeout_seconds
                .unwrap_or(base.live_idle_timeout_seconds),
        }
    }

    /// Checks the values a person could get wrong.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(bytes) = self.live_max_frame_bytes
            && !(MIN_LIVE_FRAME_BYTES..=MAX_LIVE_FRAME_BYTES).contains(&bytes)
        {
            return Err(format!(
                "live_max_frame_bytes must be between {MIN_LIVE_FRAME_BYTES} and {MAX_LIVE_FRAME_BYTES}, not {bytes}"
            ));
        }
        for (name, value) in [
            ("live_frames_per_second", self.live_frames_per_second),
            ("live_idle_timeout_seconds", self.live_idle_timeout_seconds),
        ] {
            if value == Some(0) {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if let Some(rps) = self.requests_per_second
            && !(rps.is_finite() && rps > 0.0)
        {
            return Err(format!(
                "requests_per_second must be a positive number, not {rps}"
            ));
        }
        if let Some(bytes) = self.disk_bytes_per_environment
            && bytes != 0
            && bytes < hookbox_environments::disk::MIN_BYTES
        {
            return Err(format!(
                "disk_bytes_per_environment must be 0 (no cap) or at least {} (16 MiB), not {bytes}",
                hookbox_environments::disk::MIN_BYTES
            ));
        }
        Ok(())
    }

    /// Parses the stored JSON form (unknown keys are an error, so a typo is not a silent no-op).
    pub fn from_json(map: &Map<String, Value>) -> Result<Self, String> {
        serde_json::from_value(Value::Object(map.clone())).map_err(|e| e.to_string())
    }

    pub fn to_json(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// Sets one quota from `name=value` text (the CLI's form); on error nothing changes.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let mut next = self.clone();
        next.assign(assignment)?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn assign(&mut self, assignment: &str) -> Result<(), String> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("`{assignment}` is not NAME=VALUE"))?;
        let (name, value) = (name.trim(), value.trim());
        let int = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{name}: `{value}`: {e}"))
        };
        match name {
            "environments" => self.environments = Some(int()?),
            "running_interactions" => self.running_interactions = Some(int()?),
            "sandbox_processes" => self.sandbox_processes = Some(int()?),
            "burst" => self.burst = Some(int()?),
            "disk_bytes_per_environment" => self.disk_bytes_per_environment = Some(int()?),
            "environment_ttl_seconds" => self.environment_ttl_seconds = Some(int()?),
            "live_sockets" => self.live_sockets = Some(int()?),
            "live_frames_per_second" => self.live_frames_per_second = Some(int()?),
            "live_max_frame_bytes" => self.live_max_frame_bytes = Some(int()?),
            "live_idle_timeout_seconds" => self.live_idle_timeout_seconds = Some(int()?),
            "requests_per_second" => {
                self.requests_per_second = Some(
                    value
                        .parse::<f64>()
                        .map_err(|e| format!("{name}: `{value}`: {e}"))?,
                )
            }
            other => {
                return Err(format!(
                    "unknown quota `{other}`; the quotas are {}",
                    QUOTA_NAMES.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// The config file (`--config`, TOML): quotas, and the runtime of new environments:
///
/// ```toml
/// [defaults]                    # every project
/// runtime = "gvisor"            # or "namespaces"; absent: `hookbox serve --runtime`
/// [quotas]                      # every project
/// environments = 100
/// [projects.team-a]             # one project
/// runtime = "namespaces"
/// [projects.team-a.quotas]
/// sandbox_processes = 8
/// [server]                      # what browsers may reach (added to --allow-host/--allow-origin)
/// allow_hosts = ["hookbox.example.com"]
/// allow_origins = ["https://console.example.com"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    #[serde(default)]
    pub defaults: DefaultsConfig,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub quotas: QuotaOverrides,
    #[serde(default)]
    pub projects: HashMap<String, ProjectConfig>,
}

/// `[defaults]` of the config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DefaultsConfig {
    /// The runtime of every project's new environments.
    #[serde(default)]
    pub runtime: Option<RuntimeKind>,
}

/// `[server]` of the config file: the names and origins besides the command line's
/// (`--allow-host`, `--allow-origin`) that the browser guard lets in (see
/// [`crate::browser_policy`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `Host` names (`NAME` on any port, or `NAME:PORT`) clients may reach the server by,
    /// besides IP addresses and `localhost`: the names a reverse proxy passes on.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Origins (`SCHEME://HOST[:PORT]`) of web pages other than the server's own that may use
    /// the API, with CORS headers.
    #[serde(default)]
    pub allow_origins: Vec<String>,
}

/// `[projects.NAME]` of the config file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    /// The runtime of this project's new environments (over `[defaults]`).
    #[serde(default)]
    pub runtime: Option<RuntimeKind>,
    /// Which other agent CLIs' hooks files this project's environments read (`"claude-code,
    /// gemini-cli"`, `"all"`, `"none"`), over `serve --hook-dialects`.
    #[serde(default)]
    pub hook_dialects: Option<String>,
    #[serde(default)]
    pub quotas: QuotaOverrides,
}

impl QuotaConfig {
    /// Checks every value and project name.
    pub fn validate(&self) -> Result<(), String> {
        self.quotas
            .validate()
            .map_err(|e| format!("[quotas]: {e}"))?;
        crate::browser_policy(&self.server, &[], &[], None)
            .map_err(|e| format!("[server]: {e}"))?;
        for (name, project) in &self.projects {
            if !hookbox_store::valid_project_name(name) {
                return Err(format!(
                    "[projects.{name}]: not a project name (1-63 lowercase letters, digits, `-`, `_`)"
                ));
            }
            project
                .quotas
                .validate()
                .map_err(|e| format!("[projects.{name}.quotas]: {e}"))?;
            if let Some(list) = &project.hook_dialects {
                list.parse::<hookbox_hooks::dialect::DialectSet>()
                    .map_err(|e| format!("[projects.{name}] hook_dialects: {e}"))?;
            }
        }
        Ok(())
    }

    /// The projects that set `hook_dialects`, with their set (checked by [`Self::validate`];
    /// an unparsable one is left out).
    pub fn project_hook_dialects(&self) -> HashMap<String, hookbox_hooks::dialect::DialectSet> {
        self.projects
            .iter()
            .filter_map(|(name, p)| {
                let set = p.hook_dialects.as_deref()?.parse().ok()?;
                Some((name.clone(), set))
            })
            .collect()
    }

    /// The runtime `project`'s new environments get from the file (`None`: the server's).
    pub fn runtime(&self, project: &str) -> Option<RuntimeKind> {
        self.projects
            .get(project)
            .and_then(|p| p.runtime)
            .or(self.defaults.runtime)
    }

    /// Whether any project's environments run under `runtime` by this file.
    pub fn names_runtime(&self, runtime: RuntimeKind) -> bool {
        self.defaults.runtime == Some(runtime)
            || self.projects.values().any(|p| p.runtime == Some(runtime))
    }

    /// The quotas of `project` before stored overrides.
    pub fn configured(&self, project: &str) -> Quotas {
        let base = self.quotas.apply(Quotas::default());
        match self.projects.get(project) {
            Some(p) => p.quotas.apply(base),
            None => base,
        }
    }
}

/// A 429 naming the quota, with `Retry-After: retry_after` (seconds).
pub fn exceeded(quota: &str, detail: &str, project: &str, retry_after: u32) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "Quota exceeded: {quota} ({detail}) for project `{project}`. Nothing was changed; retry later or ask the operator to raise the quota."
        ),
    )
    .retry_after(retry_after)
}

/// The share of a project's burst a replica takes from the shared bucket at once.
const SHARED_BATCH: f64 = 0.02;
/// The most tokens a replica takes at once.
const MAX_SHARED_BATCH: f64 = 50.0;

/// What a client over `running_interactions` is told to wait (interactions end at any time).
const RUNNING_RETRY_AFTER_SECS: u32 = 2;
/// What a client over `environments` is told to wait (only a deletion makes room).
const ENVIRONMENTS_RETRY_AFTER_SECS: u32 = 60;

/// Whole seconds until a bucket holding `tokens` refills to one at `rate` per second.
fn seconds_until_token(tokens: f64, rate: f64) -> u32 {
    retry_seconds((1.0 - tokens).max(0.0) / rate.max(f64::MIN_POSITIVE))
}

/// A wait in seconds as `Retry-After`: whole seconds, at least 1, bounded so that a tiny rate
/// does not make the header absurd.
fn retry_seconds(wait: f64) -> u32 {
    wait.ceil().clamp(1.0, 3600.0) as u32
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

#[derive(Debug, Clone)]
struct CachedOverrides {
    overrides: QuotaOverrides,
    read: Instant,
}

/// One quota of a project as the console's Overview shows it: its limit and what is held now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaUse {
    /// The quota's name, as in the config file and a 429's message.
    pub quota: &'static str,
    pub limit: u64,
    pub used: u64,
    /// Where `used` is counted: `project` (in the store, so every replica's), or `replica`
    /// (this server's own count; each replica enforces the limit on its own too).
    pub scope: &'static str,
}

/// The quotas in force and the counters they are checked against.
#[derive(Debug)]
pub struct QuotaBook {
    config: QuotaConfig,
    store: Arc<dyn Store>,
    stored: Mutex<HashMap<String, CachedOverrides>>,
    buckets: Mutex<HashMap<String, Bucket>>,
    running: Mutex<HashMap<String, u64>>,
    /// Live sockets open on this replica, per project.
    sockets: Mutex<HashMap<String, u64>>,
    /// Serialises count-then-create of environments per project.
    creating: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The per-project sandbox process limits, when the backend enforces them.
    slots: Option<Arc<hookbox_environments::slots::SlotRegistry>>,
    /// Among replicas: where the cluster-wide counts are kept.
    cluster: Option<Arc<dyn Cluster>>,
    /// Among replicas: request tokens this replica took from the shared bucket, not yet spent.
    reserve: Mutex<HashMap<String, f64>>,
}

/// One running interaction counted against its project; dropping it frees the place.
#[derive(Debug)]
pub struct RunningGuard {
    book: Arc<QuotaBook>,
    project: String,
    /// Held for as long as the guard (given back on drop).
    _cluster: Option<ClusterHold>,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut running = self.book.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = running.get_mut(&self.project) {
            *n = n.saturating_sub(1);
        }
    }
}

/// One open live socket counted against its project; dropping it frees the place.
#[derive(Debug)]
pub struct SocketGuard {
    book: Arc<QuotaBook>,
    project: String,
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        let mut sockets = self.book.sockets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = sockets.get_mut(&self.project) {
            *n = n.saturating_sub(1);
        }
    }
}

/// A place held across the cluster; dropping it gives the place back (in the background).
#[derive(Debug)]
pub struct ClusterHold {
    cluster: Arc<dyn Cluster>,
    id: String,
}

impl Drop for ClusterHold {
    fn drop(&mut self) {
        let cluster = self.cluster.clone();
        let id = std::mem::take(&mut self.id);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(e) = cluster.unhold(&id).await {
                    // Freed anyway once this replica stops heartbeating.
                    tracing::warn!(hold = %id, error = %e, "cannot give a quota place back");
                }
            });
        }
    }
}

impl QuotaBook {
    pub fn new(
        config: QuotaConfig,
        store: Arc<dyn Store>,
        slots: Option<Arc<hookbox_environments::slots::SlotRegistry>>,
        cluster: Option<Arc<dyn Cluster>>,
    ) -> Arc<Self> {
        Arc::new(QuotaBook {
            config,
            store,
            stored: Mutex::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
            sockets: Mutex::new(HashMap::new()),
            creating: Mutex::new(HashMap::new()),
            slots,
            cluster,
            reserve: Mutex::new(HashMap::new()),
        })
    }

    /// The effective quotas of `project`.
    pub async fn quotas(&self, project: &str) -> Quotas {
        let base = self.config.configured(project);
        let cached = self
            .stored
            .lock()
            .ok()
            .and_then(|m| m.get(project).cloned())
            .filter(|c| c.read.elapsed() < OVERRIDE_TTL);
        match cached {
            Some(c) => c.overrides.apply(base),
            None => {
                let overrides = match self.store.get_project(project).await {
                    Ok(Some(record)) => QuotaOverrides::from_json(&record.quotas)
                        .unwrap_or_else(|e| {
                            tracing::warn!(project, error = %e, "ignoring invalid stored quota overrides");
                            QuotaOverrides::default()
                        }),
                    Ok(None) => QuotaOverrides::default(),
                    Err(e) => {
                        tracing::warn!(project, error = %e, "cannot read stored quota overrides");
                        QuotaOverrides::default()
                    }
                };
                if let Ok(mut m) = self.stored.lock() {
                    m.insert(
                        project.to_owned(),
                        CachedOverrides {
                            overrides: overrides.clone(),
                            read: Instant::now(),
                        },
                    );
                }
                let quotas = overrides.apply(base);
                // The limit can only have changed when the overrides were read again.
                if let Some(slots) = &self.slots {
                    slots.set_limit(project, quotas.sandbox_processes);
                }
                quotas
            }
        }
    }

    /// `project`'s counted quotas (environments, running interactions, sandboxed processes,
    /// live sockets) with their limits and what is held now, for `GET /stats`. Reads counters
    /// and the store; takes and frees nothing.
    pub async fn usage(&self, project: &str) -> Result<Vec<QuotaUse>, hookbox_store::Error> {
        let q = self.quotas(project).await;
        let environments = self.store.count_environments(project).await?;
        let running = self.store.count_running_interactions(project).await?;
        let local = |map: &Mutex<HashMap<String, u64>>| {
            map.lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(project)
                .copied()
                .unwrap_or(0)
        };
        // Without a registry (a backend that does not count processes) nothing is held here.
        let processes = self
            .slots
            .as_ref()
            .map_or(0, |s| s.for_project(Some(project)).in_use());
        let quota = |quota, limit, used, scope| QuotaUse {
            quota,
            limit,
            used,
            scope,
        };
        Ok(vec![
            quota("environments", q.environments, environments, "project"),
            quota(
                "running_interactions",
                q.running_interactions,
                running,
                "project",
            ),
            quota(
                "sandbox_processes",
                q.sandbox_processes,
                processes,
                "replica",
            ),
            quota(
                "live_sockets",
                q.live_sockets,
                local(&self.sockets),
                "replica",
            ),
        ])
    }

    /// Takes one request token of `project`'s bucket, or answers how long to wait.
    pub async fn admit_request(&self, project: &str) -> Result<(), ApiError> {
        let q = self.quotas(project).await;
        if let Some(cluster) = &self.cluster {
            match self.take_shared(cluster.as_ref(), project, &q).await {
                Ok(None) => return Ok(()),
                Ok(Some(wait)) => {
                    return Err(exceeded(
                        "requests_per_second",
                        &format!(
                            "{} per second, bursts of {}, across replicas",
                            q.requests_per_second, q.burst
                        ),
                        project,
                        retry_seconds(wait),
                    ));
                }
                // The store is down: this replica's own bucket still limits.
                Err(e) => tracing::warn!(error = %e, "cannot reach the cluster's request bucket"),
            }
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let capacity = q.burst.max(1) as f64;
        let bucket = buckets.entry(project.to_owned()).or_insert(Bucket {
            tokens: capacity,
            last: now,
        });
        let refill =
            now.saturating_duration_since(bucket.last).as_secs_f64() * q.requests_per_second;
        bucket.tokens = (bucket.tokens + refill).min(capacity);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        Err(exceeded(
            "requests_per_second",
            &format!(
                "{} per second, bursts of {}",
                q.requests_per_second, q.burst
            ),
            project,
            seconds_until_token(bucket.tokens, q.requests_per_second),
        ))
    }

    /// One token of `project`'s cluster-wide bucket: from the tokens this replica took
    /// earlier, else a batch of [`SHARED_BATCH`]'s share of the burst from PostgreSQL (so the
    /// database sees one request in many). `Ok(Some(wait))` when the bucket is empty. Tokens a
    /// replica holds are spent from the shared bucket, so the cluster never admits more than it.
    async fn take_shared(
        &self,
        cluster: &dyn Cluster,
        project: &str,
        q: &Quotas,
    ) -> Result<Option<f64>, hookbox_store::Error> {
        {
            let mut reserve = self.reserve.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tokens) = reserve.get_mut(project).filter(|t| **t >= 1.0) {
                *tokens -= 1.0;
                return Ok(None);
            }
        }
        let burst = q.burst.max(1) as f64;
        let want = (burst * SHARED_BATCH).floor().clamp(1.0, MAX_SHARED_BATCH);
        match cluster
            .take_tokens(project, q.requests_per_second, burst, want)
            .await?
        {
            hookbox_store::TokenGrant::Granted(n) => {
                let mut reserve = self.reserve.lock().unwrap_or_else(|p| p.into_inner());
                *reserve.entry(project.to_owned()).or_insert(0.0) += n - 1.0;
                Ok(None)
            }
            hookbox_store::TokenGrant::Wait(seconds) => Ok(Some(seconds)),
        }
    }

    /// A place for one more running interaction of `project`, or the 429.
    pub async fn start_interaction(
        self: &Arc<Self>,
        project: &str,
    ) -> Result<RunningGuard, ApiError> {
        let limit = self.quotas(project).await.running_interactions;
        let mut guard = {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            let n = running.entry(project.to_owned()).or_insert(0);
            if *n >= limit {
                return Err(exceeded(
                    "running_interactions",
                    &format!("{limit} at once"),
                    project,
                    RUNNING_RETRY_AFTER_SECS,
                ));
            }
            *n += 1;
            RunningGuard {
                book: Arc::clone(self),
                project: project.to_owned(),
                _cluster: None,
            }
        };
        // Dropping `guard` on refusal gives the local place back.
        guard._cluster = self
            .hold_in_cluster("running_interactions", project, limit, "at once")
            .await?;
        Ok(guard)
    }

    /// A place for one more live socket of `project` on this replica (`live_sockets`), or the
    /// 429 (answered before the upgrade).
    pub async fn open_socket(self: &Arc<Self>, project: &str) -> Result<SocketGuard, ApiError> {
        let limit = self.quotas(project).await.live_sockets;
        let mut sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
        let n = sockets.entry(project.to_owned()).or_insert(0);
        if *n >= limit {
            return Err(exceeded(
                "live_sockets",
                &format!("{limit} open at once"),
                project,
                RUNNING_RETRY_AFTER_SECS,
            ));
        }
        *n += 1;
        Ok(SocketGuard {
            book: Arc::clone(self),
            project: project.to_owned(),
        })
    }

    /// Among replicas, one of `limit` places of `quota` across the cluster (`None` for a lone
    /// server), or the 429.
    pub async fn hold_in_cluster(
        &self,
        quota: &str,
        project: &str,
        limit: u64,
        what: &str,
    ) -> Result<Option<ClusterHold>, ApiError> {
        let Some(cluster) = &self.cluster else {
            return Ok(None);
        };
        match cluster.hold(quota, project, limit).await? {
            Some(id) => Ok(Some(ClusterHold {
                cluster: cluster.clone(),
                id,
            })),
            None => Err(exceeded(
                quota,
                &format!("{limit} {what}, across replicas"),
                project,
                RUNNING_RETRY_AFTER_SECS,
            )),
        }
    }

    /// Holds `project`'s environment-creation lock and checks there is room for one more
    /// environment; the caller creates it while holding the returned guard. Also returns the
    /// disk cap the new environment gets.
    /// The runtime the config file gives `project`'s new environments.
    pub fn runtime(&self, project: &str) -> Option<RuntimeKind> {
        self.config.runtime(project)
    }

    pub async fn create_environment(
        &self,
        project: &str,
    ) -> Result<(tokio::sync::OwnedMutexGuard<()>, u64), ApiError> {
        let lock = {
            let mut creating = self.creating.lock().unwrap_or_else(|p| p.into_inner());
            creating
                .entry(project.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        let guard = lock.lock_owned().await;
        let q = self.quotas(project).await;
        let have = self
            .store
            .count_environments(project)
            .await
            .map_err(ApiError::from)?;
        if have >= q.environments {
            return Err(exceeded(
                "environments",
                &format!("{have} of {}", q.environments),
                project,
                ENVIRONMENTS_RETRY_AFTER_SECS,
            ));
        }
        Ok((guard, q.disk_bytes_per_environment))
    }
}

/// Among replicas: every tool call of `project` holds one of its `sandbox_processes` places
/// across the cluster while it runs (its hooks included); over the limit the model gets the
/// refusal as the tool's error, as it does from a replica's own slots.
#[derive(Debug)]
pub(crate) struct ClusterSlots<'a> {
    pub inner: &'a dyn ToolExecutor,
    pub book: &'a QuotaBook,
    pub project: &'a str,
}

impl ClusterSlots<'_> {
    async fn hold(&self) -> Result<Option<ClusterHold>, ToolExecution> {
        let limit = self.book.quotas(self.project).await.sandbox_processes;
        self.book
            .hold_in_cluster(
                "sandbox_processes",
                self.project,
                limit,
                "sandboxed tool calls at once",
            )
            .await
            .map_err(|e| {
                ToolExecution::error(format!("{} Wait for running calls to finish.", e.message))
            })
    }
}

#[async_trait::async_trait]
impl ToolExecutor for ClusterSlots<'_> {
    async fn execute(&self, environment_id: &str, call: &ToolCall) -> ToolExecution {
        let _hold = match self.hold().await {
            Ok(hold) => hold,
            Err(refused) => return refused,
        };
        self.inner.execute(environment_id, call).await
    }

    async fn execute_streaming(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: OutputSink,
    ) -> ToolExecution {
        let _hold = match self.hold().await {
            Ok(hold) => hold,
            Err(refused) => return refused,
        };
        self.inner
            .execute_streaming(environment_id, call, output)
            .await
    }

    async fn execute_in(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<OutputSink>,
        context: &hookbox_agent::seams::CallContext,
    ) -> ToolExecution {
        let _hold = match self.hold().await {
            Ok(hold) => hold,
            Err(refused) => return refused,
        };
        self.inner
            .execute_in(environment_id, call, output, context)
            .await
    }

    async fn interaction_hooks(
        &self,
        environment_id: &str,
        payload: &hookbox_protocol::InteractionHookPayload,
    ) -> hookbox_agent::InteractionHooks {
        self.inner.interaction_hooks(environment_id, payload).await
    }

    async fn mcp_session(
        &self,
        environment_id: &str,
        servers: &[hookbox_agent::mcp::McpServerSpec],
    ) -> Arc<dyn hookbox_agent::mcp::McpTools> {
        self.inner.mcp_session(environment_id, servers).await
    }

    async fn execute_approved(
        &self,
        environment_id: &str,
        call: &ToolCall,
        output: Option<OutputSink>,
    ) -> ToolExecution {
        let _hold = match self.hold().await {
            Ok(hold) => hold,
            Err(refused) => return refused,
        };
        self.inner
            .execute_approved(environment_id, call, output)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order_and_bad_values_are_refused() {
        let config: QuotaConfig = toml_like(
            r#"{"quotas": {"environments": 5}, "projects": {"team-a": {"quotas": {"environments": 2, "burst": 3}}}}"#,
        );
        config.validate().unwrap();
        assert_eq!(config.configured("other").environments, 5);
        assert_eq!(config.configured("team-a").environments, 2);
        assert_eq!(config.configured("team-a").burst, 3);
        assert_eq!(
            config.configured("team-a").running_interactions,
            Quotas::default().running_interactions
        );
        let mut o = QuotaOverrides::default();
        o.set("environments=1").unwrap();
        assert_eq!(o.apply(config.configured("team-a")).environments, 1);
        assert!(
            o.set("enviroments=1")
                .unwrap_err()
                .contains("unknown quota")
        );
        assert!(o.set("requests_per_second=0").is_err());
        assert!(o.set("disk_bytes_per_environment=4096").is_err());
        o.set("disk_bytes_per_environment=0").unwrap();
        assert_eq!(QuotaOverrides::from_json(&o.to_json()).unwrap(), o);
        // The environment TTL: whole seconds, 0 for never; nothing else.
        assert_eq!(
            Quotas::default().environment_ttl_seconds,
            30 * 24 * 3600,
            "the default is 30 days"
        );
        for bad in ["-1", "soon", "1.5", ""] {
            let err = o
                .set(&format!("environment_ttl_seconds={bad}"))
                .unwrap_err();
            assert!(err.contains("environment_ttl_seconds"), "{bad}: {err}");
        }
        o.set("environment_ttl_seconds=0").unwrap();
        assert_eq!(o.apply(Quotas::default()).environment_ttl_seconds, 0);
        assert_eq!(QuotaOverrides::from_json(&o.to_json()).unwrap(), o);
    }

    #[test]
    fn retry_after_is_when_the_bucket_has_a_token_again() {
        assert_eq!(seconds_until_token(0.0, 1.0), 1);
        assert_eq!(seconds_until_token(0.0, 0.25), 4);
        assert_eq!(seconds_until_token(0.5, 0.1), 5);
        assert_eq!(seconds_until_token(0.0, 1e-9), 3600, "bounded");
        assert_eq!(seconds_until_token(0.0, 100.0), 1, "at least a second");
    }

    fn toml_like(json: &str) -> QuotaConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn project_hook_dialects_are_checked_and_listed() {
        let config: QuotaConfig = toml::from_str(
            "[projects.team]\nhook_dialects = \"claude-code,cursor\"\n[projects.other]\n",
        )
        .unwrap();
        config.validate().unwrap();
        let map = config.project_hook_dialects();
        assert_eq!(map.len(), 1);
        assert_eq!(map["team"].to_string(), "claude-code,cursor");
        let bad: QuotaConfig =
            toml::from_str("[projects.team]\nhook_dialects = \"nope\"\n").unwrap();
        let err = bad.validate().unwrap_err();
        assert!(err.contains("[projects.team] hook_dialects"), "{err}");
    }
}
