//! Environment sources: what an environment is created with (hooks.md §1), and materialising
//! each into a fresh tree.
//!
//! Targets are sandbox paths; a relative target is relative to `/`. A target that climbs above
//! `/`, names a top-level directory the sandbox takes from the host (`/usr`, `/etc`, ...), or
//! passes through a symlink is refused before anything is written. Writes go through
//! `hookbox-rootfs`. This module must not run sandboxes or hooks.
//!
//! Repositories are cloned by `git` on the host, so what a spec may name depends on who wrote it
//! ([`SourceOrigin`]): API clients get `https://` only; the operator (the CLI) also local paths
//! and `file://`. Every `https://` clone goes through an [`EgressProxy`] over the environment's
//! own [`Egress`] (same allowlist, SSRF rules and operator options as its sandboxes), on a
//! loopback listener that lives only for the clone. git runs with a clean environment and config
//! (no user or system gitconfig, no credential helpers, no prompts), only the allowed protocols,
//! no submodules, under a wall-clock timeout that kills its whole process group, and the tree is
//! measured afterwards against [`SourceLimits::max_tree_bytes`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use hookbox_egress::{Egress, EgressError, EgressProxy};
use hookbox_process::{Termination, supervise};
use hookbox_rootfs::{EntryKind, RootDir, RootFsError};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};

/// Top-level names of the sandbox that come from the host or the launcher, never from the
/// environment's tree: no source may target them, and the runner binds none of the tree's.
pub const RESERVED_TOP_LEVEL: &[&str] = &[
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc", "dev", "sys",
];

/// Who wrote a spec, which decides what its repository sources may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceOrigin {
    /// The operator (the CLI): local paths, `file://` and `https://` repositories.
    Operator,
    /// An API client (untrusted): `https://` repositories only, through the egress policy.
    Client,
}

/// Bounds on materialising sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLimits {
    /// Wall-clock limit of one `git clone`; on expiry git's whole process group is killed.
    pub clone_timeout: Duration,
    /// Largest tree (bytes of regular files) a repository clone may leave behind.
    pub max_tree_bytes: u64,
}

impl Default for SourceLimits {
    fn default() -> Self {
        Self {
            clone_timeout: Duration::from_secs(300),
            max_tree_bytes: 1 << 30,
        }
    }
}

/// Cap on git's captured stdout/stderr.
const GIT_OUTPUT_LIMIT: usize = 64 << 10;

/// How a repository URL is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepoKind {
    /// A local path or `file://` URL (operator only).
    Local,
    /// `https://`, through the environment's egress proxy.
    Https,
}

/// What `url` is, or why `origin` may not name it.
fn repo_kind(url: &str, origin: SourceOrigin) -> Result<RepoKind, String> {
    let allowed = match origin {
        SourceOrigin::Client => "only https:// URLs are accepted from API clients",
        SourceOrigin::Operator => "use an https:// URL, a file:// URL or a local path",
    };
    let kind = if url.starts_with("https://") {
        RepoKind::Https
    } else if url.starts_with("file://") {
        RepoKind::Local
    } else if url.contains("://") || url.contains("::") || url.starts_with('-') {
        // Other schemes (http, ssh, git, ...), git's `<transport>::<address>` helpers (`ext::`),
        // and option-looking strings.
        return Err(format!("repository URL `{url}` is not allowed: {allowed}"));
    } else if url
        .split('/')
        .next()
        .is_some_and(|first| first.contains(':'))
    {
        // scp-like `host:path` is ssh.
        return Err(format!(
            "repository URL `{url}` (ssh) is not allowed: {allowed}"
        ));
    } else {
        RepoKind::Local
    };
    match (origin, kind) {
        (SourceOrigin::Operator, RepoKind::Local | RepoKind::Https)
        | (SourceOrigin::Client, RepoKind::Https) => Ok(kind),
        (SourceOrigin::Client, RepoKind::Local) => Err(format!(
            "repository URL `{url}` names the server's filesystem: {allowed}"
        )),
    }
}

/// `host` and `port` of an `https://` URL, for the policy check before cloning (the proxy
/// enforces the policy on the actual connections whatever this finds).
fn https_authority(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("https://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        None | Some("") => 443,
        Some(p) => p.parse().ok()?,
    };
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// How inline content is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    #[default]
    Utf8,
    Base64,
}

/// One source of an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Source {
    /// A file with the given content.
    Inline {
        target: String,
        content: String,
        #[serde(default)]
        encoding: Encoding,
    },
    /// A git repository cloned at `target`: an `https://` URL (through the environment's egress),
    /// or, for the operator only, a local path or `file://` URL (see [`SourceOrigin`]).
    Repository {
        url: String,
        target: String,
        /// Branch or tag to check out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reference: Option<String>,
    },
    /// Objects of a GCS bucket path copied under `target`.
    Gcs {
        bucket: String,
        #[serde(default)]
        prefix: String,
        target: String,
    },
}

impl Source {
    pub fn target(&self) -> &str {
        match self {
            Source::Inline { target, .. }
            | Source::Repository { target, .. }
            | Source::Gcs { target, .. } => target,
        }
    }

    /// A one-line description for progress output and metadata (never the content).
    pub fn describe(&self) -> String {
        match self {
            Source::Inline {
                target, content, ..
            } => format!("inline {} ({} bytes)", target, content.len()),
            Source::Repository { url, target, .. } => format!("repository {url} -> {target}"),
            Source::Gcs {
                bucket,
                prefix,
                target,
            } => format!("gcs gs://{bucket}/{prefix} -> {target}"),
        }
    }
}

/// An environment variable's value: a string or `{"value": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    Plain(String),
    Object { value: String },
}

impl EnvValue {
    pub fn value(&self) -> &str {
        match self {
            EnvValue::Plain(v) | EnvValue::Object { value: v } => v,
        }
    }
}

/// What an environment is created from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    #[serde(default)]
    pub sources: Vec<Source>,
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// Snapshot hooks at creation; `/.agents` read-only inside the sandbox.
    #[serde(default)]
    pub freeze_hooks: bool,
    /// The API's `network` (`"disabled"` or `{"allowlist": [...]}`), checked at creation with
    /// `hookbox_egress::policy::NetworkPolicy::from_json`. Absent: disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<serde_json::Value>,
    /// The project the environment belongs to: its allowlist's credentials resolve there only.
    /// Absent: the credential store's own scope (the CLI's `default` project).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The environment's disk cap in bytes (`0`: none). Absent: [`SandboxOptions`]'s default.
    ///
    /// [`SandboxOptions`]: crate::runner::SandboxOptions
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_limit_bytes: Option<u64>,
    /// The kernel the environment's programs run on. Absent: [`SandboxOptions`]'s default.
    ///
    /// [`SandboxOptions`]: crate::runner::SandboxOptions
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<hookbox_sandbox::spec::RuntimeKind>,
}

/// Why a source could not be materialised.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("source target `{target}`: {reason}")]
    Target { target: String, reason: String },
    #[error("source target `{target}`: {source}")]
    Fs {
        target: String,
        #[source]
        source: RootFsError,
    },
    #[error("inline source `{target}`: invalid base64: {message}")]
    Base64 { target: String, message: String },
    #[error("sources[{index}]: {message}")]
    NotAllowed { index: usize, message: String },
    #[error("repository {url}: {message}")]
    Git { url: String, message: String },
    #[error(
        "repository {url}: refused by the environment's network policy (rule `{rule}`): {detail}"
    )]
    Egress {
        url: String,
        rule: String,
        detail: String,
    },
    #[error(
        "repository {url}: the environment's tree is {bytes} bytes after cloning, over the limit of {limit}; the clone was removed"
    )]
    TooLarge { url: String, bytes: u64, limit: u64 },
    #[error("gcs gs://{bucket}/{prefix}: {message}")]
    Gcs {
        bucket: String,
        prefix: String,
        message: String,
    },
    #[error(
        "environment variable name `{0}` is invalid (letters, digits and `_`, not starting with a digit)"
    )]
    EnvName(String),
}

/// Normalises a target to an absolute sandbox path, refusing any that climbs above `/` or lands
/// in a host-provided top-level directory.
pub fn normalise_target(target: &str) -> Result<String, SourceError> {
    let refuse = |reason: &str| SourceError::Target {
        target: target.to_owned(),
        reason: reason.to_owned(),
    };
    if target.contains('\0') {
        return Err(refuse("contains a NUL byte"));
    }
    let mut parts: Vec<&str> = Vec::new();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(refuse("escapes the sandbox root with `..`"));
                }
            }
            name => parts.push(name),
        }
    }
    let Some(first) = parts.first() else {
        return Err(refuse("names the sandbox root itself"));
    };
    if RESERVED_TOP_LEVEL.contains(first) {
        return Err(refuse(&format!(
            "/{first} comes from the host inside the sandbox; choose another directory"
        )));
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Refuses a target any existing prefix of which is a symlink (or a non-directory).
fn check_no_symlinks(tree: &RootDir, target: &str, original: &str) -> Result<(), SourceError> {
    let mut prefix = String::new();
    let components: Vec<&str> = target.split('/').filter(|c| !c.is_empty()).collect();
    for (i, component) in components.iter().enumerate() {
        prefix.push('/');
        prefix.push_str(component);
        match tree.symlink_metadata(&prefix) {
            Ok(meta) => match meta.kind {
                EntryKind::Symlink => {
                    return Err(SourceError::Target {
                        target: original.to_owned(),
                        reason: format!(
                            "{prefix} is a symbolic link; refusing to write through it"
                        ),
                    });
                }
                EntryKind::Dir => {}
                EntryKind::File | EntryKind::Other if i + 1 == components.len() => {}
                EntryKind::File | EntryKind::Other => {
                    return Err(SourceError::Target {
                        target: original.to_owned(),
                        reason: format!("{prefix} is not a directory"),
                    });
                }
            },
            Err(RootFsError::NotFound { .. }) => return Ok(()),
            Err(source) => {
                return Err(SourceError::Fs {
                    target: original.to_owned(),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Validates every source and variable without writing anything; repository URLs must be
/// allowed for `origin`.
pub fn validate(spec: &EnvironmentSpec, origin: SourceOrigin) -> Result<(), SourceError> {
    validate_sources(&spec.sources, origin)?;
    for name in spec.env.keys() {
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(SourceError::EnvName(name.clone()));
        }
    }
    Ok(())
}

/// Validates sources without writing anything; repository URLs must be allowed for `origin`.
pub fn validate_sources(sources: &[Source], origin: SourceOrigin) -> Result<(), SourceError> {
    for (index, source) in sources.iter().enumerate() {
        normalise_target(source.target())?;
        if let Source::Repository { url, .. } = source {
            repo_kind(url, origin).map_err(|message| SourceError::NotAllowed { index, message })?;
        }
        if let Source::Inline {
            target,
            content,
            encoding: Encoding::Base64,
        } = source
        {
            decode_base64(target, content)?;
        }
    }
    Ok(())
}

fn decode_base64(target: &str, content: &str) -> Result<Vec<u8>, SourceError> {
    base64::engine::general_purpose::STANDARD
        .decode(content.trim())
        .map_err(|e| SourceError::Base64 {
            target: target.to_owned(),
            message: e.to_string(),
        })
}

/// Everything materialising a source needs besides the tree.
#[derive(Debug, Clone)]
pub struct Materialiser {
    /// Who wrote the sources (checked again here, whatever `validate` said).
    pub origin: SourceOrigin,
    pub buckets: Arc<dyn Buckets>,
    /// The environment's egress: every `https://` clone goes through a proxy over it. `None`
    /// refuses `https://` clones.
    pub egress: Option<Arc<Egress>>,
    /// The operator's extra roots, trusted by git besides the system roots (tunnelled TLS is
    /// verified by git itself).
    pub extra_ca_file: Option<PathBuf>,
    pub limits: SourceLimits,
    /// Pass git's progress output on to stderr (the CLI) once the clone is done.
    pub show_progress: bool,
}

impl Materialiser {
    /// Writes one source into the tree.
    pub fn materialise(&self, tree: &RootDir, source: &Source) -> Result<(), SourceError> {
        let original = source.target();
        let target = normalise_target(original)?;
        check_no_symlinks(tree, &target, original)?;
        let fs = |source: RootFsError| SourceError::Fs {
            target: original.to_owned(),
            source,
        };
        match source {
            Source::Inline {
                content, encoding, ..
            } => {
                let bytes = match encoding {
                    Encoding::Utf8 => content.as_bytes().to_vec(),
                    Encoding::Base64 => decode_base64(original, content)?,
                };
                tree.write_file(&target, &bytes, true).map_err(fs)
            }
            Source::Repository { url, reference, .. } => {
                let kind = repo_kind(url, self.origin).map_err(|message| SourceError::Git {
                    url: url.clone(),
                    message,
                })?;
                let parent = Path::new(&target)
                    .parent()
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "/".into());
                tree.create_dir_all(&parent).map_err(fs)?;
                let existed = tree.symlink_metadata(&target).is_ok();
                if existed && !tree.list_dir(&target).map_err(fs)?.is_empty() {
                    return Err(SourceError::Target {
                        target: original.to_owned(),
                        reason: "already exists and is not empty".into(),
                    });
                }
                // Every prefix was checked to be a real directory, so git may write at the host
                // path directly.
                let dest = tree.host_path().join(target.trim_start_matches('/'));
                let result = self
                    .clone_repo(kind, url, reference.as_deref(), &dest)
                    .and_then(|()| {
                        let bytes = tree.usage().map_err(fs)?.bytes;
                        let limit = self.limits.max_tree_bytes;
                        if bytes > limit {
                            return Err(SourceError::TooLarge {
                                url: url.clone(),
                                bytes,
                                limit,
                            });
                        }
                        Ok(())
                    });
                if result.is_err() {
                    // A killed or refused clone may leave a partial tree behind.
                    let _ = std::fs::remove_dir_all(&dest);
                    if existed {
                        let _ = std::fs::create_dir(&dest);
                    }
                }
                result
            }
            Source::Gcs { bucket, prefix, .. } => {
                let store = self
                    .buckets
                    .bucket(bucket)
                    .map_err(|message| SourceError::Gcs {
                        bucket: bucket.clone(),
                        prefix: prefix.clone(),
                        message,
                    })?;
                copy_objects(tree, store, bucket, prefix, &target)
            }
        }
    }

    /// Runs `git clone` bounded, on its own thread with its own runtime (which also serves the
    /// egress proxy for `https://`), so that it works from sync and async callers alike.
    fn clone_repo(
        &self,
        kind: RepoKind,
        url: &str,
        reference: Option<&str>,
        dest: &Path,
    ) -> Result<(), SourceError> {
        let fail = |message: String| SourceError::Git {
            url: url.to_owned(),
            message,
        };
        let work = || -> Result<(), SourceError> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| fail(format!("cannot start a runtime: {e}")))?;
            runtime.block_on(self.clone_async(kind, url, reference, dest))
        };
        std::thread::scope(|scope| {
            scope
                .spawn(work)
                .join()
                .unwrap_or_else(|_| Err(fail("clone thread panicked".into())))
        })
    }

    async fn clone_async(
        &self,
        kind: RepoKind,
        url: &str,
        reference: Option<&str>,
        dest: &Path,
    ) -> Result<(), SourceError> {
        let fail = |message: String| SourceError::Git {
            url: url.to_owned(),
            message,
        };
        // HOME for git: empty, so no user config, credentials or templates apply.
        let home = tempfile::Builder::new()
            .prefix("hookbox-git-")
            .tempdir()
            .map_err(|e| fail(format!("cannot create a temporary directory: {e}")))?;
        let mut config: Vec<String> = vec![
            "protocol.allow=never".into(),
            "credential.helper=".into(),
            "core.hooksPath=/dev/null".into(),
            "core.askPass=".into(),
        ];
        let mut proxy_task = None;
        match kind {
            RepoKind::Local => config.push("protocol.file.allow=always".into()),
            RepoKind::Https => {
                let egress = self.egress.clone().ok_or_else(|| {
                    fail("https clones need the environment's egress, which is not set up".into())
                })?;
                self.precheck(&egress, url).await?;
                let bundle = home.path().join("ca-bundle.crt");
                let mut roots = crate::network::system_bundle();
                if let Some(extra) = &self.extra_ca_file {
                    let pem = std::fs::read_to_string(extra).map_err(|e| {
                        fail(format!(
                            "cannot read the extra CA file {}: {e}",
                            extra.display()
                        ))
                    })?;
                    roots.push('\n');
                    roots.push_str(&pem);
                }
                let bundle_pem = egress
                    .sandbox_ca_bundle(&roots)
                    .map_err(|e| fail(format!("the environment's egress CA: {e}")))?;
                std::fs::write(&bundle, bundle_pem)
                    .map_err(|e| fail(format!("cannot write the CA bundle: {e}")))?;
                let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                    .await
                    .map_err(|e| fail(format!("cannot bind the egress proxy: {e}")))?;
                let addr = listener
                    .local_addr()
                    .map_err(|e| fail(format!("cannot bind the egress proxy: {e}")))?;
                let task = tokio::spawn(async move {
                    if let Err(error) = EgressProxy::new(egress).serve(listener).await {
                        tracing::error!(%error, "clone egress proxy stopped");
                    }
                });
                proxy_task = Some(AbortOnDrop(task));
                config.extend([
                    "protocol.https.allow=always".into(),
                    format!("http.proxy=http://{addr}"),
                    format!("http.sslCAInfo={}", bundle.display()),
                    "http.sslVerify=true".into(),
                ]);
            }
        }
        let mut cmd = tokio::process::Command::new("git");
        for entry in &config {
            cmd.arg("-c").arg(entry);
        }
        cmd.args(["clone", "--quiet", "--no-recurse-submodules"]);
        if self.show_progress {
            cmd.arg("--progress");
        }
        if kind == RepoKind::Https {
            cmd.args(["--depth", "1"]);
        }
        if let Some(reference) = reference {
            cmd.args(["--branch", reference]);
        }
        cmd.arg("--").arg(url).arg(dest);
        cmd.env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", home.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .current_dir(home.path());
        let timeout = self.limits.clone_timeout;
        tracing::info!(%url, ?kind, timeout_s = timeout.as_secs(), "cloning repository source");
        let out = supervise(cmd, Vec::new(), timeout, GIT_OUTPUT_LIMIT)
            .await
            .map_err(|e| fail(format!("cannot run git: {e}")))?;
        drop(proxy_task);
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        match out.termination {
            Termination::Exited(0) => {
                if self.show_progress && !stderr.is_empty() {
                    use std::io::Write as _;
                    let _ = writeln!(std::io::stderr(), "{stderr}");
                }
                Ok(())
            }
            Termination::TimedOut => {
                tracing::warn!(%url, timeout_s = timeout.as_secs(), "git clone timed out; killed");
                Err(fail(format!(
                    "git clone timed out after {}s and was killed",
                    timeout.as_secs()
                )))
            }
            Termination::OutputLimit => Err(fail("git wrote too much output; killed".into())),
            Termination::Exited(_) | Termination::Signaled(_) => Err(fail(if stderr.is_empty() {
                format!("git clone {}", out.termination)
            } else {
                stderr
            })),
        }
    }

    /// Checks the URL's host against the policy and the SSRF rules before starting git, so that
    /// a refusal names the rule (git would only say the proxy answered 403).
    async fn precheck(&self, egress: &Egress, url: &str) -> Result<(), SourceError> {
        let (host, port) = https_authority(url).ok_or_else(|| SourceError::Git {
            url: url.to_owned(),
            message: "cannot read the host of the URL".into(),
        })?;
        let refused = |rule: &str, detail: String| {
            tracing::warn!(%url, rule, "repository clone refused by egress");
            SourceError::Egress {
                url: url.to_owned(),
                rule: rule.to_owned(),
                detail,
            }
        };
        let target = egress
            .authorize(&host, port)
            .map_err(|d| refused(d.rule.name(), d.detail))?;
        match egress.resolve_checked(&target).await {
            Ok(_) => Ok(()),
            Err(EgressError::Denied(d)) => Err(refused(d.rule.name(), d.detail)),
            Err(
                other @ (EgressError::Resolve { .. }
                | EgressError::Connect { .. }
                | EgressError::Timeout(_)
                | EgressError::Tls { .. }
                | EgressError::Upstream(_)
                | EgressError::Config(_)),
            ) => Err(SourceError::Git {
                url: url.to_owned(),
                message: other.to_string(),
            }),
        }
    }
}

/// Aborts the proxy task when the clone is over, however it ended.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Opens object stores by bucket name. Production uses GCS configured from the environment
/// ([`GcsFromEnv`]); tests pass in-memory or local stores.
pub trait Buckets: Send + Sync + std::fmt::Debug {
    fn bucket(&self, name: &str) -> Result<Arc<dyn ObjectStore>, String>;
}

/// GCS through `object_store`, credentials from `GOOGLE_SERVICE_ACCOUNT` / application default
/// credentials as `GoogleCloudStorageBuilder::from_env` reads them.
#[derive(Debug, Clone, Copy, Default)]
pub struct GcsFromEnv;

impl Buckets for GcsFromEnv {
    fn bucket(&self, name: &str) -> Result<Arc<dyn ObjectStore>, String> {
        object_store::gcp::GoogleCloudStorageBuilder::from_env()
            .with_bucket_name(name)
            .build()
            .map(|store| Arc::new(store) as Arc<dyn ObjectStore>)
            .map_err(|e| e.to_string())
    }
}

/// Copies every object under `prefix` to `target/<key relative to prefix>`. Runs on its own
/// thread with its own runtime so that it works from sync and async callers alike.
fn copy_objects(
    tree: &RootDir,
    store: Arc<dyn ObjectStore>,
    bucket: &str,
    prefix: &str,
    target: &str,
) -> Result<(), SourceError> {
    let fail = |message: String| SourceError::Gcs {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
        message,
    };
    let work = || -> Result<(), SourceError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(e.to_string()))?;
        runtime.block_on(async {
            let list_prefix = ObjectPath::from(prefix.trim_end_matches('/'));
            let mut listing = store.list((!prefix.is_empty()).then_some(&list_prefix));
            while let Some(meta) = listing.next().await {
                let meta = meta.map_err(|e| fail(e.to_string()))?;
                let key = meta.location.as_ref();
                let relative = key
                    .strip_prefix(list_prefix.as_ref())
                    .unwrap_or(key)
                    .trim_start_matches('/');
                if relative.is_empty() {
                    continue;
                }
                let path = normalise_target(&format!("{target}/{relative}"))?;
                if !path.starts_with(&format!("{target}/")) {
                    return Err(fail(format!("object `{key}` would land outside {target}")));
                }
                check_no_symlinks(tree, &path, key)?;
                let bytes = store
                    .get(&meta.location)
                    .await
                    .map_err(|e| fail(e.to_string()))?
                    .bytes()
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                tree.write_file(&path, &bytes, true)
                    .map_err(|source| SourceError::Fs {
                        target: key.to_owned(),
                        source,
                    })?;
            }
            Ok(())
        })
    };
    std::thread::scope(|scope| {
        scope
            .spawn(work)
            .join()
            .unwrap_or_else(|_| Err(fail("copy thread panicked".into())))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_rooted_and_escapes_refused() {
        assert_eq!(
            normalise_target(".agents/hooks.json").unwrap(),
            "/.agents/hooks.json"
        );
        assert_eq!(
            normalise_target("workspace/private/../x").unwrap(),
            "/workspace/x"
        );
        for bad in [
            "../x",
            "/workspace/../../x",
            "",
            "/",
            "etc/passwd",
            "/usr/bin/x",
            "proc/1",
        ] {
            assert!(normalise_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_spec_parses_string_and_object_values() {
        let spec: EnvironmentSpec = serde_json::from_value(serde_json::json!({
            "sources": [{"type": "inline", "target": "a", "content": "aGk=", "encoding": "base64"}],
            "env": {"A": "1", "B": {"value": "2"}}
        }))
        .unwrap();
        assert_eq!(spec.env["A"].value(), "1");
        assert_eq!(spec.env["B"].value(), "2");
        validate(&spec, SourceOrigin::Client).unwrap();
        let bad = EnvironmentSpec {
            env: BTreeMap::from([("1X".into(), EnvValue::Plain(String::new()))]),
            ..Default::default()
        };
        assert!(matches!(
            validate(&bad, SourceOrigin::Operator),
            Err(SourceError::EnvName(_))
        ));
    }
}
