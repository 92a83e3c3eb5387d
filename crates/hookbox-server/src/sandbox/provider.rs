//! [`EnvironmentProvider`] for [`SandboxBackend`]: API sources and `env` become a sandbox
//! [`EnvironmentSpec`], environments are created, forked and deleted on disk, and
//! files are read and written through the opened environment's confined tree
//! (`hookbox-rootfs`), off the async executor. It must not resolve paths itself.

use async_trait::async_trait;
use hookbox_agent::seams::{
    EnvironmentProvider, EnvironmentSetup, EnvironmentUsage, ProviderError,
};
use hookbox_environments::source::{
    self, Encoding, EnvValue, EnvironmentSpec, Source, SourceOrigin,
};
use hookbox_protocol::api::{EnvironmentFile, FileType, Source as ApiSource};
use hookbox_rootfs::{EntryKind, RootFsError};
use serde_json::Value;

use super::cache::SandboxBackend;
use super::errors::{blocking, fs_error};

/// Largest file served by a download.
pub const MAX_DOWNLOAD_BYTES: u64 = 1024 * 1024 * 1024;

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
        self.forget(id).await;
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
        if !self.close_unless_in_use(id).await {
            return Ok(false);
        }
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
    use serde_json::json;

    use super::*;
    use crate::sandbox::cache::tests::unisolated_store;

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
