//! Environments on disk, and an opened one ([`Environment`]) with what its tool calls use.
//!
//! Layout: `<data_dir>/environments/<env_id>/` holds `environment.json` (metadata, written
//! atomically: temp file then rename), `activity` (its generation and times as tool calls move
//! them, changed in place under a lock: [`activity`]; [`read_meta`] merges the two), `root/`
//! (the tree the sandbox sees), `mnt/` (the empty
//! mountpoint for the sandbox's root) and, when hooks are frozen, `frozen/` (the snapshot of
//! `/.agents` and `/workspace/.agents/hooks.json`). An environment is built under a temporary
//! name and renamed into place, so a failed creation leaves nothing behind.
//!
//! An opened [`Environment`] holds its sandbox runner, hook engine, hooks cache, network, its
//! share of the environment's cgroups (`cgroups`: removed by the last close) and of its disk; the
//! tool-call lifecycle that uses them is `crate::lifecycle`, and this module must not sequence
//! any part of a call itself. It must not parse hooks files or interpret handler output either
//! (that is `hookbox-hooks`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use hookbox_egress::EgressPoster;
use hookbox_egress::policy::{NetworkPolicy, PolicyError};
use hookbox_hooks::discover::{HooksCache, Loaded};
use hookbox_hooks::{Dispatch, HookEngine};
use hookbox_rootfs::{RootDir, RootFsError, Usage};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env_vars;
use crate::network::{self, EgressOptions, EnvNetwork, NetworkError};
use crate::runner::{SandboxLayout, SandboxOptions, SandboxRunner, UidRange};
use crate::source::{
    self, Buckets, EnvironmentSpec, GcsFromEnv, Materialiser, Source, SourceError, SourceOrigin,
};
use crate::tools;
use hookbox_sandbox::cgroup::{self, EnvCgroups};
use hookbox_sandbox::features::{self, Feature};
use hookbox_sandbox::spec::{Identity, Isolation, RuntimeKind};

pub mod activity;
pub use activity::ACTIVITY_FILE;
mod cgroups;
mod identity;
mod mounts;
use identity::{UID_ALLOCATION, give_to, id_range, id_span};

/// The metadata file in an environment's directory.
pub const META_FILE: &str = "environment.json";
/// The tree the sandbox sees (the disk image's mountpoint when the environment has one).
pub const TREE_DIR: &str = "root";
/// The empty mountpoint for the sandbox's root.
pub const MOUNT_DIR: &str = "mnt";
/// The snapshot of frozen hooks, outside the tree.
pub const FROZEN_DIR: &str = "frozen";
/// What stands at `/.agents` in the tree of a frozen environment: a file, so that nothing can be
/// written beneath it, and the sandbox sees the snapshot there instead.
const FROZEN_PLACEHOLDER: &str =
    "hooks are frozen in this environment; /.agents is served read-only from its snapshot\n";

/// Errors of environment management.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("no environment `{0}`")]
    NotFound(String),
    #[error("`{0}` is not an environment id (env_ followed by lowercase letters and digits)")]
    BadId(String),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Fs(#[from] RootFsError),
    #[error("environment metadata {path}: {message}")]
    Meta { path: PathBuf, message: String },
    #[error(
        "this kernel lacks {0}, which hookbox's sandbox needs; enable it, or pass --insecure-no-isolation to run WITHOUT any isolation"
    )]
    MissingFeature(Feature),
    #[error(
        "cannot find a data directory: set {} or HOME",
        env_vars::HOOKBOX_DATA_DIR
    )]
    NoDataDir,
    #[error(
        "{} is set but empty; name a directory or unset it (an empty value would put the database, secret key and environments in the current directory)",
        env_vars::HOOKBOX_DATA_DIR
    )]
    EmptyDataDir,
    #[error("{0}")]
    Runner(#[from] crate::runner::RunError),
    /// The `network` of a spec (or of stored metadata) is invalid; names the JSON path.
    #[error("invalid {0}")]
    Policy(PolicyError),
    #[error("environment `{env_id}`: {source}")]
    Network {
        env_id: String,
        #[source]
        source: NetworkError,
    },
    #[error("environment disk: {0}")]
    Disk(#[from] crate::disk::DiskError),
    /// The environment's runtime cannot be used here (no usable `runsc`, not root, ...).
    #[error("runtime {runtime}: {message}")]
    Runtime {
        runtime: hookbox_sandbox::spec::RuntimeKind,
        message: String,
    },
}

pub type Result<T> = std::result::Result<T, EnvError>;

// Not `#[from]`: that would also make the policy error the source, printed twice in chains.
impl From<PolicyError> for EnvError {
    fn from(err: PolicyError) -> Self {
        EnvError::Policy(err)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EnvError {
    let path = path.to_path_buf();
    move |source| EnvError::Io { path, source }
}

/// Lifecycle state of an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvStatus {
    Ready,
}

/// What `environment.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentMeta {
    pub id: String,
    pub status: EnvStatus,
    /// Unix seconds.
    pub created_at: u64,
    pub updated_at: u64,
    pub last_accessed_at: u64,
    pub file_count: u64,
    pub size_bytes: u64,
    pub frozen_hooks: bool,
    /// Variables applied to every process of the environment.
    pub env: Vec<(String, String)>,
    /// One line per source, without content.
    pub sources: Vec<String>,
    /// The API's `network` value as given (absent: disabled). Shown with `transform` values
    /// redacted ([`network::redact_network`]); kept whole only on disk, outside the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Value>,
    /// The host uid (and gid) sandboxed root runs as and that owns the tree on the host; absent
    /// when hookbox runs unprivileged or without isolation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_uid: Option<u32>,
    /// The project the environment belongs to (see [`EnvironmentSpec::project`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The kernel-enforced size of the environment's tree ([`crate::disk`]); absent: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_limit_bytes: Option<u64>,
    /// Grows with every change of the tree (a write tool, an upload, added sources): what a
    /// snapshot records, so that "changed since the last snapshot" survives a restart.
    #[serde(default)]
    pub generation: u64,
    /// The kernel its programs run on, chosen at creation and kept (a fork keeps its parent's).
    #[serde(default)]
    pub runtime: RuntimeKind,
}

impl EnvironmentMeta {
    /// The metadata as it may be shown (CLI, API): `transform` header values redacted.
    pub fn redacted(mut self) -> Self {
        self.network = self.network.as_ref().map(network::redact_network);
        self
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn valid_id(id: &str) -> bool {
    id.strip_prefix("env_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    })
}

fn new_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let suffix: String = (0..16)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("env_{suffix}")
}

fn write_meta(dir: &Path, meta: &EnvironmentMeta) -> Result<()> {
    let path = dir.join(META_FILE);
    // Concurrent calls of one environment each write their own temporary file.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(".{META_FILE}.{}.{n}.tmp", std::process::id()));
    let bytes = serde_json::to_vec_pretty(meta).map_err(|e| EnvError::Meta {
        path: path.clone(),
        message: e.to_string(),
    })?;
    // Owner-only: the metadata holds the egress `transform` header values as given (often a
    // secret; only what is shown outside is redacted).
    write_private(&temp, &bytes)?;
    std::fs::rename(&temp, &path).map_err(io(&path))
}

/// Writes `bytes` to a new file at `path` that only its owner may read (mode 0600).
fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(io(path))
}

/// The metadata in environment directory `dir`, as stored (`transform` values included), with
/// the generation and times of its [`activity`] record.
pub fn read_meta(dir: &Path) -> Result<EnvironmentMeta> {
    let mut meta = read_meta_file(dir)?;
    let path = dir.join(activity::ACTIVITY_FILE);
    activity::merge(&mut meta, activity::read(dir).map_err(io(&path))?);
    Ok(meta)
}

/// `environment.json` alone. One written before it was kept owner-only (see [`write_meta`])
/// is made so when read (best effort: only its owner can).
fn read_meta_file(dir: &Path) -> Result<EnvironmentMeta> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(META_FILE);
    let mut file = std::fs::File::open(&path).map_err(io(&path))?;
    if let Ok(stat) = file.metadata()
        && stat.permissions().mode() & 0o077 != 0
    {
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| EnvError::Meta {
        path,
        message: e.to_string(),
    })
}

/// Records a use of environment directory `dir` now in its [`activity`] record (see
/// [`activity::record`]).
fn record_activity(dir: &Path, modified: bool) -> Result<()> {
    activity::record(dir, modified, now(), || read_meta_file(dir)).map_err(|e| match e {
        activity::RecordError::Io(source) => EnvError::Io {
            path: dir.join(activity::ACTIVITY_FILE),
            source,
        },
        activity::RecordError::Meta(err) => err,
    })
}

/// The default data directory: `$HOOKBOX_DATA_DIR`, else `$XDG_DATA_HOME/hookbox`, else
/// `~/.local/share/hookbox`.
pub fn default_data_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(env_vars::HOOKBOX_DATA_DIR) {
        if dir.is_empty() {
            return Err(EnvError::EmptyDataDir);
        }
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os(env_vars::XDG_DATA_HOME) {
        return Ok(PathBuf::from(dir).join("hookbox"));
    }
    std::env::var_os(env_vars::HOME)
        .map(|home| PathBuf::from(home).join(".local/share/hookbox"))
        .ok_or(EnvError::NoDataDir)
}

/// All environments under one data directory.
#[derive(Debug, Clone)]
pub struct Environments {
    root: PathBuf,
    options: Arc<SandboxOptions>,
    egress: EgressOptions,
    buckets: Arc<dyn Buckets>,
    /// Which other agent CLIs' hooks files environments read (`serve --hook-dialects`).
    hook_dialects: hookbox_hooks::dialect::DialectSet,
    /// Per project, over `hook_dialects` (the config file's `[projects.NAME] hook_dialects`).
    project_hook_dialects: std::collections::HashMap<String, hookbox_hooks::dialect::DialectSet>,
}

/// What a new environment is on the host: the uid owning its tree and the cap of its disk.
#[derive(Debug, Clone, Copy)]
struct HostSide {
    identity: Option<Identity>,
    disk_limit: Option<u64>,
    runtime: RuntimeKind,
}

impl Environments {
    /// Refuses `runtime` when it cannot run here (gVisor without a usable `runsc`, without
    /// root, or without isolation), naming what is missing.
    fn check_runtime(&self, runtime: RuntimeKind) -> Result<()> {
        match runtime {
            RuntimeKind::Namespaces => Ok(()),
            RuntimeKind::Gvisor => {
                let refuse = |message: String| EnvError::Runtime { runtime, message };
                if self.options.isolation != Isolation::Full {
                    return Err(refuse(
                        hookbox_sandbox::gvisor::GvisorError::NoIsolation.to_string(),
                    ));
                }
                self.options.gvisor.check().map(drop).map_err(refuse)
            }
        }
    }

    /// Opens (creating if needed) the store under `data_dir`. `egress` is the credential store
    /// and operator options every environment's network uses (sandbox traffic and http hooks).
    /// What it creates (`environments/`, and `data_dir` itself if missing) is owner-only (0700):
    /// the environments' disks and trees hold their files. Nothing but root needs to enter it:
    /// the launcher binds what a sandbox sees before it drops to the environment's uid.
    pub fn open(data_dir: &Path, options: SandboxOptions, egress: EgressOptions) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let root = data_dir.join("environments");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .map_err(io(&root))?;
        Ok(Self {
            root,
            options: Arc::new(options),
            egress,
            buckets: Arc::new(GcsFromEnv),
            hook_dialects: hookbox_hooks::dialect::DialectSet::NONE,
            project_hook_dialects: std::collections::HashMap::new(),
        })
    }

    /// Per-project dialects, over [`Self::with_hook_dialects`] for the projects named (an
    /// environment without a project is the `default` project's).
    pub fn with_project_hook_dialects(
        mut self,
        dialects: std::collections::HashMap<String, hookbox_hooks::dialect::DialectSet>,
    ) -> Self {
        self.project_hook_dialects = dialects;
        self
    }

    /// Which other agent CLIs' project hooks files (Claude Code, Gemini CLI, Codex, Cursor,
    /// Copilot) every environment reads besides `.agents/hooks.json`. Default: none, so an
    /// environment behaves exactly as without them even when its tree holds such files.
    pub fn with_hook_dialects(mut self, dialects: hookbox_hooks::dialect::DialectSet) -> Self {
        self.hook_dialects = dialects;
        self
    }

    /// Replaces where `gcs` sources are read from (tests use in-memory stores).
    pub fn with_buckets(mut self, buckets: Arc<dyn Buckets>) -> Self {
        self.buckets = buckets;
        self
    }

    fn dir(&self, id: &str) -> Result<PathBuf> {
        if !valid_id(id) {
            return Err(EnvError::BadId(id.to_owned()));
        }
        let dir = self.root.join(id);
        if !dir.join(META_FILE).exists() {
            return Err(EnvError::NotFound(id.to_owned()));
        }
        Ok(dir)
    }

    /// Where environments live on this host (`<data dir>/environments`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of environment `id` on this host, whether or not it is there now.
    pub fn dir_of(&self, id: &str) -> Result<PathBuf> {
        if !valid_id(id) {
            return Err(EnvError::BadId(id.to_owned()));
        }
        Ok(self.root.join(id))
    }

    /// Whether environment `id` is on this host's disk.
    pub fn is_local(&self, id: &str) -> bool {
        self.dir(id).is_ok()
    }

    /// The options every sandbox of this store is built with.
    pub fn options(&self) -> &SandboxOptions {
        &self.options
    }

    /// Puts the environment directory `staged` (a sibling of the environments, built by a
    /// restore) in place as `id`: one rename, so the environment appears whole or not at all.
    pub fn install(&self, id: &str, staged: &Path) -> Result<()> {
        let dir = self.dir_of(id)?;
        if let Ok(meta) = read_meta(staged)
            && let Some(uid) = meta.sandbox_uid
        {
            // Its ids were picked on another host: held here from now on too.
            crate::uids::Claims::new(&self.root)
                .enter(id_range(uid, meta.runtime))
                .map_err(io(&self.root))?;
        }
        std::fs::rename(staged, &dir).map_err(io(&dir))
    }

    /// Records a change of `id`'s tree made from outside its tool calls (the next snapshot
    /// includes it): its generation grows, its times move to now (never back).
    pub fn mark_modified(&self, id: &str) -> Result<()> {
        record_activity(&self.dir(id)?, true)
    }

    /// Ids of the environments on this host's disk.
    pub fn local_ids(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(io(&self.root))? {
            let entry = entry.map_err(io(&self.root))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_id(&name) && entry.path().join(META_FILE).exists() {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Creates an environment from `spec`, written by `origin` (which decides what repository
    /// URLs it may name). `progress` receives one line per source.
    pub fn create(
        &self,
        spec: &EnvironmentSpec,
        origin: SourceOrigin,
        progress: &mut dyn FnMut(&str),
        show_source_progress: bool,
    ) -> Result<EnvironmentMeta> {
        source::validate(spec, origin)?;
        let policy = network::validate_policy(spec.network.as_ref())?;
        let id = new_id();
        let staging = self.root.join(format!(".creating-{id}"));
        let runtime = spec.runtime.unwrap_or(self.options.runtime);
        self.check_runtime(runtime)?;
        // The claim holds the uid from here on (released if the creation fails), so other
        // creations need not wait for this one's disk and sources.
        let identity = {
            let _allocating = UID_ALLOCATION.lock().ok();
            self.options
                .identities()
                .map(|range| self.allocate_identity(range, id_span(runtime)))
                .transpose()?
        };
        let egress = self.egress.for_project(spec.project.as_deref());
        let disk_limit = match self.options.isolation {
            Isolation::Full => spec
                .disk_limit_bytes
                .or(self.options.disk_limit_bytes)
                .filter(|b| *b > 0),
            Isolation::InsecureNone => None,
        };
        let egress_ca = self.egress.operator.extra_ca_file.clone();
        let result = network::build_egress(&id, policy, &egress)
            .map_err(|source| EnvError::Network {
                env_id: id.clone(),
                source,
            })
            .and_then(|egress| {
                let materialiser = Materialiser {
                    origin,
                    buckets: self.buckets.clone(),
                    egress: Some(egress),
                    extra_ca_file: egress_ca.clone(),
                    limits: self.options.sources.clone(),
                    show_progress: show_source_progress,
                };
                self.build(
                    &id,
                    &staging,
                    spec,
                    &materialiser,
                    progress,
                    HostSide {
                        identity,
                        disk_limit,
                        runtime,
                    },
                )
            });
        match result {
            Ok(meta) => {
                let dir = self.root.join(&id);
                std::fs::rename(&staging, &dir).map_err(io(&dir))?;
                tracing::info!(env_id = %id, files = meta.file_count, bytes = meta.size_bytes, "environment created");
                Ok(meta.redacted())
            }
            Err(err) => {
                let _ = crate::disk::unmount(&staging.join(TREE_DIR));
                let _ = std::fs::remove_dir_all(&staging);
                if let Some(identity) = identity {
                    self.release_identity(identity, runtime);
                }
                Err(err)
            }
        }
    }

    fn build(
        &self,
        id: &str,
        dir: &Path,
        spec: &EnvironmentSpec,
        materialiser: &Materialiser,
        progress: &mut dyn FnMut(&str),
        host: HostSide,
    ) -> Result<EnvironmentMeta> {
        let HostSide {
            identity,
            disk_limit,
            ..
        } = host;
        let tree_path = dir.join(TREE_DIR);
        if let Some(bytes) = disk_limit {
            std::fs::create_dir_all(&tree_path).map_err(io(&tree_path))?;
            crate::disk::create(
                &dir.join(crate::disk::IMAGE_FILE),
                &tree_path,
                bytes,
                identity.map(|i| (i.uid, i.gid)),
            )?;
        }
        for sub in ["workspace", "tmp", ".agents"] {
            let path = tree_path.join(sub);
            std::fs::create_dir_all(&path).map_err(io(&path))?;
        }
        let mnt = dir.join(MOUNT_DIR);
        std::fs::create_dir_all(&mnt).map_err(io(&mnt))?;
        let tree = RootDir::open(&tree_path)?;
        let total = spec.sources.len();
        for (i, src) in spec.sources.iter().enumerate() {
            progress(&format!("[{}/{}] {}", i + 1, total, src.describe()));
            materialiser.materialise(&tree, src)?;
        }
        if spec.freeze_hooks {
            freeze(dir, &tree)?;
        }
        // Sources were written by hookbox (and git) as host root; the sandbox's uid owns them.
        // The frozen snapshot too: it is bound read-only, so owning it grants nothing.
        if let Some(identity) = identity {
            give_to(dir, spec.freeze_hooks, identity)?;
        }
        let usage = tree.usage()?;
        let t = now();
        let meta = EnvironmentMeta {
            id: id.to_owned(),
            status: EnvStatus::Ready,
            created_at: t,
            updated_at: t,
            last_accessed_at: t,
            file_count: usage.files,
            size_bytes: usage.bytes,
            frozen_hooks: spec.freeze_hooks,
            env: spec
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.value().to_owned()))
                .collect(),
            sources: spec.sources.iter().map(|s| s.describe()).collect(),
            network: spec.network.clone(),
            sandbox_uid: identity.map(|i| i.uid),
            project: spec.project.clone(),
            disk_limit_bytes: disk_limit,
            generation: 1,
            runtime: host.runtime,
        };
        write_meta(dir, &meta)?;
        Ok(meta)
    }

    /// A new environment made from `spec` (its network, variables, project and disk cap; its
    /// sources must be empty) holding a copy of environment `parent`'s files, frozen hooks
    /// included. The copy is copy-on-write where the filesystem allows (`cp --reflink=auto`:
    /// btrfs, XFS; a plain copy elsewhere and across disk images), never follows a symlink, and
    /// is given to the new environment's own uid. Nothing is left behind on failure; the parent
    /// is only read.
    pub fn fork(&self, parent: &str, spec: &EnvironmentSpec) -> Result<EnvironmentMeta> {
        if !spec.sources.is_empty() {
            return Err(EnvError::Source(SourceError::Target {
                target: "sources".into(),
                reason: "a fork copies its parent's files; give it no sources".into(),
            }));
        }
        let parent_dir = self.dir(parent)?;
        let parent_meta = read_meta(&parent_dir)?;
        let _parent_disk = crate::disk::Hold::new(
            &parent_dir,
            &parent_dir.join(TREE_DIR),
            self.options.unmount_when_closed,
        )?;
        let child_spec = EnvironmentSpec {
            freeze_hooks: false,
            runtime: Some(parent_meta.runtime),
            ..spec.clone()
        };
        let child = self.create(&child_spec, SourceOrigin::Operator, &mut |_| {}, false)?;
        let child_dir = self.root.join(&child.id);
        let copied = (|| -> Result<EnvironmentMeta> {
            let tree = child_dir.join(TREE_DIR);
            if parent_meta.frozen_hooks {
                // The parent's `/.agents` is the placeholder file; the snapshot comes along.
                let agents = tree.join(".agents");
                std::fs::remove_dir(&agents).map_err(io(&agents))?;
                copy_tree(&parent_dir.join(FROZEN_DIR), &child_dir.join(FROZEN_DIR))?;
            }
            copy_tree(&parent_dir.join(TREE_DIR), &tree)?;
            let mut meta = read_meta(&child_dir)?;
            meta.frozen_hooks = parent_meta.frozen_hooks;
            meta.sources = parent_meta.sources.clone();
            if let Some(uid) = meta.sandbox_uid {
                give_to(&child_dir, meta.frozen_hooks, Identity { uid, gid: uid })?;
            }
            let usage = RootDir::open(&tree)?.usage()?;
            meta.file_count = usage.files;
            meta.size_bytes = usage.bytes;
            write_meta(&child_dir, &meta)?;
            Ok(meta)
        })();
        match copied {
            Ok(meta) => {
                tracing::info!(env_id = %meta.id, parent = %parent, files = meta.file_count, "environment forked");
                Ok(meta.redacted())
            }
            Err(err) => {
                let _ = self.remove(&child.id);
                Err(err)
            }
        }
    }

    /// The metadata of `id` as stored, `transform` values included: what an operator's fork
    /// (`hookbox env fork`) copies. Never show it; [`Self::show`] is the displayable form.
    pub fn meta_for_fork(&self, id: &str) -> Result<EnvironmentMeta> {
        read_meta(&self.dir(id)?)
    }

    /// Every environment, oldest first.
    pub fn list(&self) -> Result<Vec<EnvironmentMeta>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.root).map_err(io(&self.root))? {
            let entry = entry.map_err(io(&self.root))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if valid_id(&name)
                && let Ok(meta) = read_meta(&entry.path())
            {
                out.push(meta.redacted());
            }
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// The metadata of `id`, with file count and size measured now (its disk mounted for that,
    /// and left mounted).
    pub fn show(&self, id: &str) -> Result<EnvironmentMeta> {
        let dir = self.dir(id)?;
        let mut meta = read_meta(&dir)?;
        // Left mounted: a show is usually followed by a use (the idle sweep unmounts it if not).
        let _disk = crate::disk::Hold::new(&dir, &dir.join(TREE_DIR), false)?;
        let Usage { files, bytes } = RootDir::open(&dir.join(TREE_DIR))?.usage()?;
        meta.file_count = files;
        meta.size_bytes = bytes;
        Ok(meta.redacted())
    }

    /// Removes `id` and everything in it.
    pub fn remove(&self, id: &str) -> Result<()> {
        let dir = self.dir(id)?;
        let held = read_meta(&dir)
            .ok()
            .and_then(|m| Some(id_range(m.sandbox_uid?, m.runtime)));
        cgroup::remove_for(id);
        crate::disk::unmount(&dir.join(TREE_DIR))?;
        // std's remove_dir_all does not follow symlinks, so links planted by sandboxed code
        // cannot redirect the deletion.
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
        if let Some(range) = held {
            crate::uids::Claims::new(&self.root).release(range);
        }
        Ok(())
    }

    /// Opens `id` for tool calls, refusing when the kernel lacks a sandbox feature (unless
    /// isolation is explicitly off). When its policy allows egress, the environment's network
    /// namespace and proxy are created on the first sandbox launch (inside a tokio runtime) and
    /// dropped with the returned [`Environment`].
    pub fn open_env(&self, id: &str) -> Result<Environment> {
        self.open_env_with(id, None)
    }

    /// [`Self::open_env`], with every sandboxed process of the environment counting against
    /// its project's slots in `slots` (the `sandbox_processes` quota).
    pub fn open_env_with(
        &self,
        id: &str,
        slots: Option<&crate::slots::SlotRegistry>,
    ) -> Result<Environment> {
        if self.options.isolation == Isolation::Full
            && let Some(feature) = features::missing().into_iter().next()
        {
            return Err(EnvError::MissingFeature(feature));
        }
        let dir = self.dir(id)?;
        let mut meta = read_meta(&dir)?;
        self.check_runtime(meta.runtime)?;
        let disk =
            crate::disk::Hold::new(&dir, &dir.join(TREE_DIR), self.options.unmount_when_closed)?;
        let identity = self.identity_of(&dir, &mut meta)?;
        let owner = identity.map(|i| (i.uid, i.gid));
        let policy = NetworkPolicy::from_json(meta.network.as_ref())?;
        let egress = self.egress.for_project(meta.project.as_deref());
        let network = Arc::new(
            EnvNetwork::new(
                id,
                &dir,
                policy,
                &egress,
                self.options.isolation == Isolation::Full,
            )
            .map_err(|source| EnvError::Network {
                env_id: id.to_owned(),
                source,
            })?,
        );
        let tree = RootDir::open(&dir.join(TREE_DIR))?.with_owner(owner);
        let frozen = if meta.frozen_hooks {
            Some(RootDir::open(&dir.join(FROZEN_DIR))?)
        } else {
            None
        };
        let limits = &self.options.limits;
        let cgroup_hold = match self.options.isolation {
            Isolation::Full => {
                let tasks = match meta.runtime {
                    RuntimeKind::Namespaces => limits.max_processes,
                    RuntimeKind::Gvisor => {
                        limits.max_processes + hookbox_sandbox::gvisor::HOST_TASKS
                    }
                };
                Some(cgroups::CgroupHold::new(
                    &dir,
                    id,
                    tasks,
                    limits.memory_bytes,
                    self.options.one_shot,
                )?)
            }
            Isolation::InsecureNone => None,
        };
        let cgroups: EnvCgroups = cgroup_hold
            .as_ref()
            .map(|h| h.cgroups().clone())
            .unwrap_or_default();
        if self.options.isolation == Isolation::Full
            && !cgroups.pids
            && rustix::process::geteuid().is_root()
        {
            return Err(EnvError::MissingFeature(Feature::PidsCgroup));
        }
        let layout = SandboxLayout {
            tree: dir.join(TREE_DIR),
            mountpoint: dir.join(MOUNT_DIR),
            frozen_agents: meta
                .frozen_hooks
                .then(|| dir.join(FROZEN_DIR).join(".agents")),
            env: meta.env.clone(),
            cgroups,
            netns: None,
            identity,
            runtime: meta.runtime,
            read_only: false,
        };
        let runner = SandboxRunner::new(self.options.clone(), layout)?
            .with_network(network.clone())
            .with_slots(slots.map(|r| r.for_project(meta.project.as_deref())));
        // http hooks leave through the same egress as sandbox traffic: same allowlist, same
        // always-on blocks, same injected headers. A refusal fails open with the rule traced.
        let http = Arc::new(crate::network::HookPoster(EgressPoster::new(
            network.egress().clone(),
        )));
        // What hooks say is scrubbed of what this egress injects (an upstream may echo it).
        let engine = HookEngine::new(Arc::new(runner.clone()), http)
            .with_args_validator(Arc::new(tools::validate_args))
            .with_secrets(Arc::new(InjectedValues(network.egress().clone())))
            .with_declared_env(meta.env.clone());
        let hook_dialects = self
            .project_hook_dialects
            .get(meta.project.as_deref().unwrap_or("default"))
            .copied()
            .unwrap_or(self.hook_dialects);
        Ok(Environment {
            dir,
            buckets: self.buckets.clone(),
            extra_ca_file: self.egress.operator.extra_ca_file.clone(),
            meta: meta.redacted(),
            network,
            tree,
            frozen,
            runner,
            engine,
            hooks: HooksCache::new(),
            linted: std::sync::Mutex::new(std::sync::Weak::new()),
            hook_dialects,
            _cgroups: cgroup_hold,
            _disk: disk,
        })
    }
}

/// The values an environment's egress injects, as the hooks engine scrubs them.
#[derive(Debug)]
struct InjectedValues(Arc<hookbox_egress::Egress>);

impl hookbox_hooks::scrub::Secrets for InjectedValues {
    fn values(&self) -> Vec<String> {
        self.0.injected_values()
    }
}

/// Copies the contents of directory `from` into directory `to` (created if missing) with
/// `cp -a --reflink=auto`: attributes kept, symlinks copied as symlinks (never followed), blocks
/// shared where the filesystem can. Bounded by [`COPY_TIMEOUT`].
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    let mut cp = std::process::Command::new("cp");
    cp.args(["-a", "--reflink=auto", "--"])
        .arg(from.join("."))
        .arg(to);
    hookbox_process::host::run(cp, COPY_TIMEOUT).map_err(|e| EnvError::Io {
        path: from.to_path_buf(),
        source: std::io::Error::other(format!("cp -a: {e}")),
    })
}

/// Longest a fork's copy may take.
const COPY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Moves `/.agents` out of the tree into `frozen/.agents` and copies the workspace hooks file
/// beside it, leaving a placeholder file at `/.agents`.
fn freeze(dir: &Path, tree: &RootDir) -> Result<()> {
    let frozen = dir.join(FROZEN_DIR);
    std::fs::create_dir_all(&frozen).map_err(io(&frozen))?;
    let tree_agents = tree.host_path().join(".agents");
    let snapshot = frozen.join(".agents");
    match std::fs::rename(&tree_agents, &snapshot) {
        Ok(()) => {}
        // The tree is its own disk image: copy the directory off it, then remove it.
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_tree(&tree_agents, &snapshot)?;
            std::fs::remove_dir_all(&tree_agents).map_err(io(&tree_agents))?;
        }
        Err(e) => return Err(io(&snapshot)(e)),
    }
    let snapshot_root = RootDir::open(&frozen)?;
    match tree.read_file(
        hookbox_hooks::discover::WORKDIR_HOOKS_FILE,
        hookbox_hooks::discover::MAX_HOOKS_FILE_SIZE,
    ) {
        Ok(bytes) => {
            snapshot_root.write_file(hookbox_hooks::discover::WORKDIR_HOOKS_FILE, &bytes, true)?
        }
        Err(RootFsError::NotFound { .. }) => {}
        Err(err) => return Err(err.into()),
    }
    tree.write_file("/.agents", FROZEN_PLACEHOLDER.as_bytes(), false)?;
    Ok(())
}

/// An opened environment, ready for tool calls.
#[derive(Debug)]
pub struct Environment {
    dir: PathBuf,
    /// For sources added after creation ([`Environment::add_sources`]).
    buckets: Arc<dyn Buckets>,
    extra_ca_file: Option<PathBuf>,
    meta: EnvironmentMeta,
    tree: RootDir,
    frozen: Option<RootDir>,
    runner: SandboxRunner,
    engine: HookEngine,
    hooks: HooksCache,
    /// The hooks configuration whose handlers were last linted (see [`Self::load_hooks`]).
    linted: std::sync::Mutex<std::sync::Weak<Loaded>>,
    /// The vendor dialects whose hooks files this environment reads.
    hook_dialects: hookbox_hooks::dialect::DialectSet,
    /// Egress for hooks and sandboxes; its namespace and proxy go when the environment does.
    network: Arc<EnvNetwork>,
    /// This open's share of the environment's cgroups (none without isolation), after the
    /// runner and engine: their sandboxes end before the last close removes the cgroups.
    _cgroups: Option<cgroups::CgroupHold>,
    /// This open's hold on the mounted disk (none without a disk cap). Last, so that it is
    /// released after everything above that has the tree open (a mounted filesystem with an
    /// open file cannot be unmounted).
    _disk: Option<crate::disk::Hold>,
}

impl Environment {
    pub fn id(&self) -> &str {
        &self.meta.id
    }

    /// The metadata as at open, with `transform` values redacted.
    pub fn meta(&self) -> &EnvironmentMeta {
        &self.meta
    }

    /// The environment's network (its egress, and the sandbox namespace once created).
    pub fn network(&self) -> &EnvNetwork {
        &self.network
    }

    /// The runner for this environment's sandbox (also what command hooks use).
    pub fn runner(&self) -> &SandboxRunner {
        &self.runner
    }

    /// The tree on the host.
    pub fn tree(&self) -> &RootDir {
        &self.tree
    }

    /// The frozen hooks snapshot, when hooks are frozen (it serves reads under `/.agents`).
    pub(crate) fn frozen(&self) -> Option<&RootDir> {
        self.frozen.as_ref()
    }

    /// The engine that runs this environment's hooks (commands in its sandbox, http through its
    /// egress).
    pub(crate) fn engine(&self) -> &HookEngine {
        &self.engine
    }

    /// The hooks files the next tool call reads (the frozen snapshot's when frozen) and their
    /// diagnostics, as `hooks check --root` reports them: with the handlers whose program or
    /// script cannot run in the sandbox ([`Self::hooks_lint`]).
    pub fn hooks_report(&self) -> (Loaded, bool) {
        let loaded = self.load_hooks();
        let mut report = (*loaded).clone();
        report.diagnostics.extend(self.hooks_lint(&loaded));
        (report, self.frozen.is_some())
    }

    /// `hooks check --root`'s lint of this environment: an error for each command handler whose
    /// program or script is missing (or not executable) in the sandbox. Report only: such a
    /// handler still runs (and fails, open unless its `on_failure` says deny) exactly as the
    /// reference would run it; nothing here blocks a call.
    pub fn hooks_lint(&self, loaded: &Loaded) -> Vec<hookbox_hooks::diagnostic::Diagnostic> {
        // A handle of its own (the view keeps it); the lint only reads metadata.
        match RootDir::open(self.tree.host_path()) {
            Ok(tree) => hookbox_hooks::lint::handler_programs(
                &loaded.config,
                &crate::runner::SandboxView::new(tree),
            ),
            Err(err) => {
                tracing::warn!(env_id = %self.meta.id, %err, "cannot open the tree to lint its hooks");
                Vec::new()
            }
        }
    }

    /// Materialises more sources into the tree, written by `origin`, with the same rules and
    /// bounds as at creation: `https://` clones go through this environment's egress. Blocking
    /// (clones run git); call it off the async executor.
    pub fn add_sources(&self, sources: &[Source], origin: SourceOrigin) -> Result<()> {
        source::validate_sources(sources, origin)?;
        let materialiser = Materialiser {
            origin,
            buckets: self.buckets.clone(),
            egress: Some(self.network.egress().clone()),
            extra_ca_file: self.extra_ca_file.clone(),
            limits: self.runner.options().sources.clone(),
            show_progress: false,
        };
        for source in sources {
            materialiser.materialise(&self.tree, source)?;
        }
        // Inline and bucket files were created owned; a clone was written by git as host root.
        if let Some((uid, gid)) = self.tree.owner() {
            self.tree.chown_tree(uid, gid)?;
        }
        self.touch(true);
        Ok(())
    }

    /// The hooks files as the next call reads them: re-read on every call so that edits take
    /// effect; a frozen environment reads its snapshot, which nothing in the sandbox can write.
    pub(crate) fn load_hooks(&self) -> Arc<Loaded> {
        // Vendor files (off unless enabled) are the project's: read from the tree.
        let loaded = self.hooks.load_split(
            self.frozen.as_ref().unwrap_or(&self.tree),
            &self.tree,
            self.hook_dialects,
        );
        self.lint_once(&loaded);
        loaded
    }

    /// Once per change of the hooks files (as the cache's own parse errors are logged): a
    /// handler that cannot run in the sandbox fails open on every call, so the operator hears
    /// of it, as a broken file (`hooks.file_broken`, counted in metrics). Logged only.
    fn lint_once(&self, loaded: &Arc<Loaded>) {
        {
            let mut linted = self.linted.lock().unwrap_or_else(|p| p.into_inner());
            if std::sync::Weak::ptr_eq(&linted, &Arc::downgrade(loaded)) {
                return;
            }
            *linted = Arc::downgrade(loaded);
        }
        for d in self
            .hooks_lint(loaded)
            .iter()
            .filter(|d| d.severity == hookbox_hooks::diagnostic::Severity::Error)
        {
            tracing::warn!(
                name: hookbox_protocol::events::HOOKS_FILE_BROKEN,
                env_id = %self.meta.id,
                file = %d.file,
                path = %d.path,
                error = %d.message,
                "hooks file names a handler that cannot run in the sandbox; it fails on every call"
            );
        }
    }

    /// Runs the `pre_interaction` or `post_interaction` hooks of the environment's hooks files
    /// (hookbox extension): command handlers in its sandbox, http handlers through its egress,
    /// exactly as tool hooks run.
    pub async fn interaction_hooks(
        &self,
        payload: &hookbox_protocol::InteractionHookPayload,
    ) -> Dispatch {
        let hooks = self.load_hooks();
        self.engine.interaction(&hooks.config, payload).await
    }

    /// Records that the tree was changed from outside a tool call (an upload through the API):
    /// a later snapshot must include it.
    pub fn record_write(&self) {
        self.touch(true);
    }

    /// Records the access (and modification) time; best effort, a failure is only logged.
    /// Nothing rewrites `environment.json`: the [`activity`] record is changed in place under a
    /// lock, and a call that changed nothing in a second already recorded (times are whole
    /// seconds) writes nothing at all. A change always writes: its `generation` is what tells a
    /// snapshot the tree changed.
    pub(crate) fn touch(&self, modified: bool) {
        if let Err(err) = record_activity(&self.dir, modified) {
            tracing::warn!(env_id = %self.meta.id, %err, "cannot update metadata");
        }
    }
}
