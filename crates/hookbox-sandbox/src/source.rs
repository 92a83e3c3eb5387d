//! Environment sources: what an environment is created with (hooks.md §1), and materialising
//! each into a fresh tree.
//!
//! Targets are sandbox paths; a relative target is relative to `/`. A target that climbs above
//! `/`, names a top-level directory the sandbox takes from the host (`/usr`, `/etc`, ...), or
//! passes through a symlink is refused before anything is written. Writes go through
//! `hookbox-rootfs`. This module must not run sandboxes or hooks.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use std::sync::Arc;

use base64::Engine;
use futures::StreamExt;
use hookbox_rootfs::{EntryKind, RootDir, RootFsError};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde::{Deserialize, Serialize};

use crate::runner::RESERVED_TOP_LEVEL;

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
    /// A git repository cloned at `target` (a local path, `file://` or `https://` URL).
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
    #[error("repository {url}: {message}")]
    Git { url: String, message: String },
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

/// Validates every source and variable without writing anything.
pub fn validate(spec: &EnvironmentSpec) -> Result<(), SourceError> {
    for source in &spec.sources {
        normalise_target(source.target())?;
        if let Source::Inline {
            target,
            content,
            encoding: Encoding::Base64,
        } = source
        {
            decode_base64(target, content)?;
        }
    }
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

fn decode_base64(target: &str, content: &str) -> Result<Vec<u8>, SourceError> {
    base64::engine::general_purpose::STANDARD
        .decode(content.trim())
        .map_err(|e| SourceError::Base64 {
            target: target.to_owned(),
            message: e.to_string(),
        })
}

/// Writes one source into the tree. `scratch` is a host directory outside the tree.
pub fn materialise(
    tree: &RootDir,
    source: &Source,
    buckets: &dyn Buckets,
    show_progress: bool,
) -> Result<(), SourceError> {
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
            let parent = Path::new(&target)
                .parent()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|| "/".into());
            tree.create_dir_all(&parent).map_err(fs)?;
            if tree.symlink_metadata(&target).is_ok()
                && !tree.list_dir(&target).map_err(fs)?.is_empty()
            {
                return Err(SourceError::Target {
                    target: original.to_owned(),
                    reason: "already exists and is not empty".into(),
                });
            }
            // The tree is not yet visible to any sandbox and every prefix was checked to be a
            // real directory, so git may write at the host path directly.
            let dest = tree.host_path().join(target.trim_start_matches('/'));
            clone(url, reference.as_deref(), &dest, show_progress)
        }
        Source::Gcs { bucket, prefix, .. } => {
            let store = buckets.bucket(bucket).map_err(|message| SourceError::Gcs {
                bucket: bucket.clone(),
                prefix: prefix.clone(),
                message,
            })?;
            copy_objects(tree, store, bucket, prefix, &target)
        }
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

fn clone(
    url: &str,
    reference: Option<&str>,
    dest: &Path,
    show_progress: bool,
) -> Result<(), SourceError> {
    let mut cmd = std::process::Command::new("git");
    cmd.args(["-c", "protocol.ext.allow=never", "clone", "--quiet"]);
    if show_progress {
        cmd.arg("--progress");
    }
    if !url.starts_with('/') && !url.starts_with("file://") {
        cmd.args(["--depth", "1"]);
    }
    if let Some(reference) = reference {
        cmd.args(["--branch", reference]);
    }
    cmd.arg("--").arg(url).arg(dest);
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if show_progress {
            Stdio::inherit()
        } else {
            Stdio::piped()
        });
    let out = cmd.output().map_err(|e| SourceError::Git {
        url: url.to_owned(),
        message: format!("cannot run git: {e}"),
    })?;
    if !out.status.success() {
        return Err(SourceError::Git {
            url: url.to_owned(),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(())
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
        validate(&spec).unwrap();
        let bad = EnvironmentSpec {
            env: BTreeMap::from([("1X".into(), EnvValue::Plain(String::new()))]),
            ..Default::default()
        };
        assert!(matches!(validate(&bad), Err(SourceError::EnvName(_))));
    }
}
