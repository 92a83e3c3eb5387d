//! Checkpoint and restore of one environment directory against the snapshot store.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use hookbox_environments::disk;
use hookbox_environments::environment::{FROZEN_DIR, META_FILE, MOUNT_DIR, TREE_DIR, read_meta};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};

use crate::SnapshotError;
use crate::location::Location;
use crate::manifest::{
    BlobState, CHUNK_SIZE, COMPACT_AFTER, FORMAT, LocalState, MAX_MANIFEST_BYTES, Manifest,
    Resolved, chunk_key, manifest_key, parse_manifest_name,
};
use crate::scan::{self, ScanStats, Spool};

/// The local record of the newest snapshot, beside the environment.
pub const STATE_FILE: &str = "snapshot.json";

/// Blob names.
pub const IMAGE_BLOB: &str = "disk.img";
pub const META_BLOB: &str = "environment.json";
pub const FROZEN_BLOB: &str = "frozen.tar";

/// Largest metadata or frozen-hooks blob restored into memory.
const MAX_SMALL_BLOB: u64 = 64 << 20;

/// Chunk transfers in flight at once per checkpoint or restore.
const PARALLEL: usize = 8;

/// Longest a manifest chain may be (compaction keeps it under [`COMPACT_AFTER`]).
const MAX_CHAIN: usize = 1024;

/// zstd level of stored chunks.
const ZSTD_LEVEL: i32 = 3;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What one checkpoint did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckpointStats {
    /// The snapshot written; `None`: nothing changed since the last one.
    pub seq: Option<u64>,
    pub full: bool,
    /// Data regions read and hashed.
    pub read_bytes: u64,
    /// Chunks uploaded, and their bytes before and after compression.
    pub chunks_uploaded: u64,
    pub raw_bytes: u64,
    pub uploaded_bytes: u64,
    /// The manifest's bytes.
    pub manifest_bytes: u64,
    /// How long the filesystem was frozen.
    pub frozen_for: Duration,
}

/// What one restore did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreStats {
    pub seq: u64,
    pub chunks: u64,
    pub downloaded_bytes: u64,
}

/// An environment's snapshots in one object store.
#[derive(Debug, Clone)]
pub struct Snapshots {
    location: Arc<Location>,
}

impl Snapshots {
    /// Snapshots at `url` (see [`crate::location`]); nothing is contacted yet.
    pub fn open(url: &str) -> Result<Self, SnapshotError> {
        Ok(Snapshots {
            location: Arc::new(crate::location::parse(url)?),
        })
    }

    /// The store's URL without credentials.
    pub fn shown(&self) -> &str {
        &self.location.shown
    }

    fn store(&self) -> &dyn ObjectStore {
        self.location.store.as_ref()
    }

    fn key(&self, rest: &str) -> ObjectPath {
        let prefix = self.location.prefix.as_ref();
        if prefix.is_empty() {
            ObjectPath::from(rest)
        } else {
            ObjectPath::from(format!("{prefix}/{rest}"))
        }
    }

    fn failed(&self, what: &str, err: object_store::Error) -> SnapshotError {
        SnapshotError::Store {
            url: self.location.shown.clone(),
            message: format!("{what}: {}", object_error(&err)),
        }
    }

    /// Writes, reads and deletes a probe object, within `timeout`: the store is reachable and
    /// this key may write to it.
    pub async fn check(&self, timeout: Duration) -> Result<(), SnapshotError> {
        let probe = self.key(&format!("probe/{:016x}", rand::random::<u64>()));
        let work = async {
            self.store()
                .put(&probe, PutPayload::from_static(b"hookbox"))
                .await
                .map_err(|e| self.failed("writing a probe object", e))?;
            self.store()
                .get(&probe)
                .await
                .map_err(|e| self.failed("reading the probe object", e))?;
            self.store()
                .delete(&probe)
                .await
                .map_err(|e| self.failed("deleting the probe object", e))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| SnapshotError::Store {
                url: self.location.shown.clone(),
                message: format!("no answer within {} s", timeout.as_secs()),
            })?
    }

    /// Sequence numbers of `env`'s manifests, ascending.
    pub async fn manifests(&self, env: &str) -> Result<Vec<u64>, SnapshotError> {
        let prefix = self.key(&format!("envs/{env}/manifests"));
        let objects: Vec<_> = self
            .store()
            .list(Some(&prefix))
            .try_collect()
            .await
            .map_err(|e| self.failed("listing snapshots", e))?;
        let mut seqs: Vec<u64> = objects
            .iter()
            .filter_map(|o| o.location.filename().and_then(parse_manifest_name))
            .collect();
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// The newest snapshot of `env`, if any.
    pub async fn latest(&self, env: &str) -> Result<Option<u64>, SnapshotError> {
        Ok(self.manifests(env).await?.last().copied())
    }

    async fn get_manifest(&self, env: &str, seq: u64) -> Result<Manifest, SnapshotError> {
        let key = manifest_key(env, seq);
        let bytes = self.get(env, &key, MAX_MANIFEST_BYTES).await?;
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| SnapshotError::Corrupt {
                env: env.to_owned(),
                key: key.clone(),
                reason: format!("the manifest is not valid: {e}"),
            })?;
        let corrupt = |reason: String| SnapshotError::Corrupt {
            env: env.to_owned(),
            key: key.clone(),
            reason,
        };
        if manifest.format != FORMAT {
            return Err(corrupt(format!(
                "format {} (this hookbox reads {FORMAT})",
                manifest.format
            )));
        }
        if manifest.environment != env || manifest.seq != seq {
            return Err(corrupt(format!(
                "it is snapshot {} of `{}`",
                manifest.seq, manifest.environment
            )));
        }
        if manifest.chunk_size == 0 || manifest.chunk_size > 64 << 20 {
            return Err(corrupt(format!("chunk size {}", manifest.chunk_size)));
        }
        Ok(manifest)
    }

    async fn get(&self, env: &str, key: &str, limit: usize) -> Result<Bytes, SnapshotError> {
        let path = self.key(key);
        let result = self.store().get(&path).await.map_err(|e| match e {
            object_store::Error::NotFound { .. } => SnapshotError::Missing {
                env: env.to_owned(),
                key: key.to_owned(),
            },
            other => self.failed(&format!("reading {key}"), other),
        })?;
        if result.meta.size > limit as u64 {
            return Err(SnapshotError::Corrupt {
                env: env.to_owned(),
                key: key.to_owned(),
                reason: format!("{} bytes, more than {limit}", result.meta.size),
            });
        }
        result
            .bytes()
            .await
            .map_err(|e| self.failed(&format!("reading {key}"), e))
    }

    /// The newest snapshot of `env`, resolved through its chain.
    async fn resolve(&self, env: &str) -> Result<(Manifest, Resolved, u32), SnapshotError> {
        let latest = self
            .latest(env)
            .await?
            .ok_or_else(|| SnapshotError::NoSnapshot {
                env: env.to_owned(),
            })?;
        let mut chain = vec![self.get_manifest(env, latest).await?];
        while let Some(parent) = chain.last().and_then(|m| m.parent) {
            if chain.len() >= MAX_CHAIN {
                return Err(SnapshotError::Corrupt {
                    env: env.to_owned(),
                    key: manifest_key(env, latest),
                    reason: format!("its chain is longer than {MAX_CHAIN}"),
                });
            }
            chain.push(self.get_manifest(env, parent).await?);
        }
        let chunk_size = chain[0].chunk_size;
        if chain.iter().any(|m| m.chunk_size != chunk_size) {
            return Err(SnapshotError::Corrupt {
                env: env.to_owned(),
                key: manifest_key(env, latest),
                reason: "its chain mixes chunk sizes".into(),
            });
        }
        let mut resolved = Resolved::default();
        for manifest in chain.iter().rev() {
            resolved.apply(manifest);
        }
        let deltas = u32::try_from(chain.len() - 1).unwrap_or(u32::MAX);
        let newest = chain.swap_remove(0);
        Ok((newest, resolved, deltas))
    }

    /// [`Self::checkpoint_under`] for a host that is the environment's only writer (no leases:
    /// fencing number 0).
    pub async fn checkpoint(
        &self,
        env: &str,
        dir: &Path,
    ) -> Result<CheckpointStats, SnapshotError> {
        self.checkpoint_under(env, dir, 0).await
    }

    /// Uploads what changed in the environment directory `dir` (id `env`) since its last
    /// snapshot and writes a new manifest, recording `fence`. Only the lease holder of `env` may
    /// call it, with the fencing number of the lease it holds. The tree's filesystem is frozen
    /// while its image is read (not while uploading).
    ///
    /// The new manifest is always the successor of the newest one in the store, and only if the
    /// local copy is based on that one: when the store holds a newer snapshot written under
    /// another lease (another host ran the environment since this copy was restored or last
    /// uploaded), nothing is written and the answer is [`SnapshotError::Stale`]. A newer
    /// snapshot written under `fence` itself is this host's own (its local record was lost):
    /// the copy continues from it with a full manifest.
    pub async fn checkpoint_under(
        &self,
        env: &str,
        dir: &Path,
        fence: u64,
    ) -> Result<CheckpointStats, SnapshotError> {
        let known = read_state(dir)?;
        if known.stale {
            return Err(SnapshotError::Stale {
                env: env.to_owned(),
                local: known.seq,
                latest: self.latest(env).await.ok().flatten().unwrap_or(known.seq),
            });
        }
        let dir_owned = dir.to_path_buf();
        let scanned = tokio::task::spawn_blocking(move || scan_env(&dir_owned))
            .await
            .map_err(|e| SnapshotError::Internal(e.to_string()))??;
        let Some(scanned) = scanned else {
            return Ok(CheckpointStats::default());
        };
        let Scanned {
            state,
            generation,
            resolved,
            spool,
            read,
            frozen_for,
        } = scanned;
        let mut stats = CheckpointStats {
            read_bytes: read.read_bytes,
            frozen_for,
            raw_bytes: spool.bytes(),
            ..CheckpointStats::default()
        };
        // The chain this copy continues: it must not have moved past the copy's snapshot.
        let latest = self.latest(env).await?.unwrap_or(0);
        let mut base = state.seq;
        if latest > state.seq {
            let head = self.get_manifest(env, latest).await?;
            if head.fence != fence {
                return Err(SnapshotError::Stale {
                    env: env.to_owned(),
                    local: state.seq,
                    latest,
                });
            }
            // This host wrote it under the lease it still holds, and lost its local record (a
            // crash between the two): the copy here is at least that snapshot.
            tracing::warn!(
                environment_id = env,
                local = state.seq,
                latest,
                "snapshot sequence behind the store, under this host's own lease; writing a full snapshot"
            );
            base = latest;
        }
        // A chain with nothing at or after the copy's snapshot (its snapshots were deleted):
        // a delta would name a parent that is gone.
        let parent_gone = latest < state.seq;
        let delta = state.resolved.delta_to(&resolved);
        if state.seq > 0 && base == state.seq && !parent_gone && delta.is_empty() {
            // Only the generation moved (a write that changed nothing, say).
            let state = LocalState {
                generation,
                ..state
            };
            write_state(dir, &state)?;
            return Ok(stats);
        }
        let spool = Arc::new(spool);
        let uploads = (0..spool.entries.len()).map(|i| {
            let spool = spool.clone();
            async move {
                let (hash, raw) = tokio::task::spawn_blocking(move || {
                    let raw = spool.read(i)?;
                    let packed = zstd::bulk::compress(&raw, ZSTD_LEVEL)?;
                    Ok::<_, std::io::Error>((spool.entries[i].0.clone(), packed))
                })
                .await
                .map_err(|e| SnapshotError::Internal(e.to_string()))?
                .map_err(|e| SnapshotError::Io {
                    path: PathBuf::from("<spool>"),
                    source: e,
                })?;
                let len = raw.len() as u64;
                self.store()
                    .put(&self.key(&chunk_key(env, &hash)), PutPayload::from(raw))
                    .await
                    .map_err(|e| self.failed("uploading a chunk", e))?;
                Ok::<u64, SnapshotError>(len)
            }
        });
        let sizes: Vec<u64> = futures::stream::iter(uploads)
            .buffer_unordered(PARALLEL)
            .try_collect()
            .await?;
        stats.chunks_uploaded = sizes.len() as u64;
        stats.uploaded_bytes = sizes.iter().sum();

        let full = state.seq == 0
            || base != state.seq
            || parent_gone
            || state.since_full + 1 >= COMPACT_AFTER;
        let manifest = Manifest {
            format: FORMAT,
            environment: env.to_owned(),
            seq: base + 1,
            parent: (!full).then_some(base),
            chunk_size: CHUNK_SIZE,
            created: now(),
            generation,
            fence,
            blobs: if full { resolved.full() } else { delta },
        };
        let written = match self.put_manifest(&manifest).await {
            // Another host wrote that snapshot since the chain was read: this copy is stale.
            Err(SnapshotError::Conflict { .. }) => {
                return Err(SnapshotError::Stale {
                    env: env.to_owned(),
                    local: state.seq,
                    latest: self.latest(env).await?.unwrap_or(manifest.seq),
                });
            }
            other => other?,
        };
        stats.manifest_bytes = written;
        stats.seq = Some(manifest.seq);
        stats.full = manifest.parent.is_none();
        let new_state = LocalState {
            seq: manifest.seq,
            since_full: if stats.full { 0 } else { state.since_full + 1 },
            chunk_size: CHUNK_SIZE,
            generation,
            resolved,
            fence,
            stale: false,
        };
        write_state(dir, &new_state)?;
        if stats.full && state.seq > 0 {
            self.collect_garbage(env, &new_state).await;
        }
        Ok(stats)
    }

    async fn put_manifest(&self, manifest: &Manifest) -> Result<u64, SnapshotError> {
        let bytes =
            serde_json::to_vec(manifest).map_err(|e| SnapshotError::Internal(e.to_string()))?;
        let len = bytes.len() as u64;
        let key = self.key(&manifest_key(&manifest.environment, manifest.seq));
        let create = PutOptions::from(PutMode::Create);
        match self
            .store()
            .put_opts(&key, PutPayload::from(bytes.clone()), create)
            .await
        {
            Ok(_) => Ok(len),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Err(SnapshotError::Conflict {
                env: manifest.environment.clone(),
                seq: manifest.seq,
            }),
            // A store without conditional writes: leases keep writers apart.
            Err(object_store::Error::NotImplemented) => {
                self.store()
                    .put(&key, PutPayload::from(bytes))
                    .await
                    .map_err(|e| self.failed("writing a manifest", e))?;
                Ok(len)
            }
            Err(e) => Err(self.failed("writing a manifest", e)),
        }
    }

    /// After a full manifest: deletes older manifests and chunks it no longer references.
    /// Best effort; what is left is deleted by the next compaction or with the environment.
    async fn collect_garbage(&self, env: &str, state: &LocalState) {
        let keep: BTreeSet<&str> = state.resolved.hashes();
        let mut doomed: Vec<ObjectPath> = Vec::new();
        match self.manifests(env).await {
            Ok(seqs) => doomed.extend(
                seqs.into_iter()
                    .filter(|s| *s < state.seq)
                    .map(|s| self.key(&manifest_key(env, s))),
            ),
            Err(e) => {
                tracing::warn!(environment_id = env, error = %e, "snapshot clean-up: cannot list manifests")
            }
        }
        let chunks = self.key(&format!("envs/{env}/chunks"));
        match self
            .store()
            .list(Some(&chunks))
            .try_collect::<Vec<_>>()
            .await
        {
            Ok(objects) => doomed.extend(
                objects
                    .into_iter()
                    .filter(|o| o.location.filename().is_some_and(|h| !keep.contains(h)))
                    .map(|o| o.location),
            ),
            Err(e) => {
                tracing::warn!(environment_id = env, error = %object_error(&e), "snapshot clean-up: cannot list chunks")
            }
        }
        let count = doomed.len();
        let deleted = self.delete_all(doomed).await;
        tracing::debug!(
            environment_id = env,
            count,
            deleted,
            "old snapshots cleaned up"
        );
    }

    async fn delete_all(&self, keys: Vec<ObjectPath>) -> usize {
        let stream = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
        self.store()
            .delete_stream(stream)
            .filter(|r| futures::future::ready(r.is_ok()))
            .count()
            .await
    }

    /// Deletes every snapshot and chunk of `env`.
    pub async fn delete(&self, env: &str) -> Result<(), SnapshotError> {
        let prefix = self.key(&format!("envs/{env}"));
        let objects: Vec<ObjectPath> = self
            .store()
            .list(Some(&prefix))
            .map_ok(|o| o.location)
            .try_collect()
            .await
            .map_err(|e| self.failed("listing snapshots to delete", e))?;
        let count = objects.len();
        let deleted = self.delete_all(objects).await;
        if deleted < count {
            return Err(SnapshotError::Store {
                url: self.location.shown.clone(),
                message: format!("deleted {deleted} of {count} snapshot objects of `{env}`"),
            });
        }
        Ok(())
    }

    /// [`Self::restore_under`] for a host that is the environment's only writer (no leases).
    pub async fn restore(&self, env: &str, staging: &Path) -> Result<RestoreStats, SnapshotError> {
        self.restore_under(env, staging, 0).await
    }

    /// Restores the newest snapshot of `env` into `staging` (a new directory, created here):
    /// the disk image (every chunk's hash checked), the metadata, the frozen hooks and the
    /// local snapshot record (current under the lease with fencing number `fence`). The caller
    /// puts `staging` in place; on error it is removed.
    pub async fn restore_under(
        &self,
        env: &str,
        staging: &Path,
        fence: u64,
    ) -> Result<RestoreStats, SnapshotError> {
        let result = self.restore_into(env, staging, fence).await;
        if result.is_err() {
            let _ = std::fs::remove_dir_all(staging);
        }
        result
    }

    async fn restore_into(
        &self,
        env: &str,
        staging: &Path,
        fence: u64,
    ) -> Result<RestoreStats, SnapshotError> {
        let (manifest, resolved, deltas) = self.resolve(env).await?;
        let chunk_size = manifest.chunk_size;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SnapshotError::Io { path, source }
        };
        std::fs::create_dir(staging).map_err(io(staging))?;
        for sub in [TREE_DIR, MOUNT_DIR] {
            let path = staging.join(sub);
            std::fs::create_dir(&path).map_err(io(&path))?;
        }
        let mut stats = RestoreStats {
            seq: manifest.seq,
            ..RestoreStats::default()
        };
        for (name, blob) in &resolved.blobs {
            match name.as_str() {
                IMAGE_BLOB => {
                    let path = staging.join(disk::IMAGE_FILE);
                    let file = std::fs::File::create_new(&path).map_err(io(&path))?;
                    file.set_len(blob.size).map_err(io(&path))?;
                    let file = Arc::new(file);
                    let chunks: Vec<(u64, String)> =
                        blob.chunks.iter().map(|(i, h)| (*i, h.clone())).collect();
                    let writes = chunks.into_iter().map(|(index, hash)| {
                        let file = file.clone();
                        let path = path.clone();
                        self.restore_chunk(env.to_owned(), hash, index, chunk_size, file, path)
                    });
                    let sizes: Vec<u64> = futures::stream::iter(writes)
                        .buffer_unordered(PARALLEL)
                        .try_collect()
                        .await?;
                    stats.chunks += sizes.len() as u64;
                    stats.downloaded_bytes += sizes.iter().sum::<u64>();
                    file.sync_all().map_err(io(&path))?;
                }
                META_BLOB | FROZEN_BLOB => {
                    let bytes = self.fetch_small(env, blob, chunk_size).await?;
                    stats.chunks += blob.chunks.len() as u64;
                    stats.downloaded_bytes += bytes.len() as u64;
                    if name == META_BLOB {
                        let path = staging.join(META_FILE);
                        // Owner-only, as hookbox writes it: it holds `transform` header values.
                        std::fs::OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .mode(0o600)
                            .open(&path)
                            .and_then(|mut file| std::io::Write::write_all(&mut file, &bytes))
                            .map_err(io(&path))?;
                    } else {
                        let path = staging.join(FROZEN_DIR);
                        std::fs::create_dir(&path).map_err(io(&path))?;
                        let mut archive = tar::Archive::new(bytes.as_slice());
                        archive.set_preserve_permissions(true);
                        archive.set_preserve_ownerships(true);
                        archive.set_overwrite(false);
                        archive.unpack(&path).map_err(io(&path))?;
                    }
                }
                other => {
                    return Err(SnapshotError::Corrupt {
                        env: env.to_owned(),
                        key: manifest_key(env, manifest.seq),
                        reason: format!("unknown blob `{other}`"),
                    });
                }
            }
        }
        if !staging.join(META_FILE).exists() {
            return Err(SnapshotError::Corrupt {
                env: env.to_owned(),
                key: manifest_key(env, manifest.seq),
                reason: "it holds no environment metadata".into(),
            });
        }
        let state = LocalState {
            seq: manifest.seq,
            since_full: deltas,
            chunk_size,
            generation: manifest.generation,
            resolved,
            fence,
            stale: false,
        };
        write_state(staging, &state)?;
        Ok(stats)
    }

    /// Fetches, checks and writes one chunk of the image at its offset; its length.
    async fn restore_chunk(
        &self,
        env: String,
        hash: String,
        index: u64,
        chunk_size: u64,
        file: Arc<std::fs::File>,
        path: PathBuf,
    ) -> Result<u64, SnapshotError> {
        let bytes = self.fetch_chunk(&env, &hash, chunk_size).await?;
        let len = bytes.len() as u64;
        let offset = index * chunk_size;
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::FileExt;
            file.write_all_at(&bytes, offset)
                .map_err(|source| SnapshotError::Io { path, source })
        })
        .await
        .map_err(|e| SnapshotError::Internal(e.to_string()))??;
        Ok(len)
    }

    async fn fetch_chunk(
        &self,
        env: &str,
        hash: &str,
        chunk_size: u64,
    ) -> Result<Vec<u8>, SnapshotError> {
        let key = chunk_key(env, hash);
        let packed = self
            .get(env, &key, (chunk_size as usize) * 2 + 4096)
            .await?;
        let corrupt = |reason: String| SnapshotError::Corrupt {
            env: env.to_owned(),
            key: key.clone(),
            reason,
        };
        let bytes = zstd::bulk::decompress(&packed, chunk_size as usize)
            .map_err(|e| corrupt(format!("it does not decompress: {e}")))?;
        let actual = scan::hash(&bytes);
        if actual != hash {
            return Err(corrupt(format!("its content hashes to {actual}")));
        }
        Ok(bytes)
    }

    async fn fetch_small(
        &self,
        env: &str,
        blob: &BlobState,
        chunk_size: u64,
    ) -> Result<Vec<u8>, SnapshotError> {
        if blob.size > MAX_SMALL_BLOB {
            return Err(SnapshotError::Corrupt {
                env: env.to_owned(),
                key: format!("envs/{env}"),
                reason: format!("a metadata blob of {} bytes", blob.size),
            });
        }
        let mut out = vec![0u8; blob.size as usize];
        for (index, hash) in &blob.chunks {
            let bytes = self.fetch_chunk(env, hash, chunk_size).await?;
            let start = (index * chunk_size) as usize;
            let end = (start + bytes.len()).min(out.len());
            if let Some(slot) = out.get_mut(start..end) {
                slot.copy_from_slice(&bytes[..end - start]);
            }
        }
        Ok(out)
    }
}

/// object_store's errors name the path and the store, never credentials; keep the chain short.
fn object_error(err: &object_store::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// The local snapshot record of environment directory `dir` (default: none yet).
pub fn read_state(dir: &Path) -> Result<LocalState, SnapshotError> {
    let path = dir.join(STATE_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| SnapshotError::Io {
            path,
            source: std::io::Error::other(e),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LocalState::default()),
        Err(source) => Err(SnapshotError::Io { path, source }),
    }
}

/// Records in `dir`'s local snapshot record that its copy was found current under the lease
/// with fencing number `fence` (nothing to write when it says so already).
pub(crate) fn record_fence(dir: &Path, fence: u64) -> Result<(), SnapshotError> {
    let state = read_state(dir)?;
    if state.fence == fence || state.stale {
        return Ok(());
    }
    write_state(dir, &LocalState { fence, ..state })
}

/// Marks `dir`'s copy stale: never used or uploaded again, only replaced by a restore.
pub(crate) fn mark_stale(dir: &Path) -> Result<(), SnapshotError> {
    let state = read_state(dir)?;
    if state.stale {
        return Ok(());
    }
    write_state(
        dir,
        &LocalState {
            stale: true,
            ..state
        },
    )
}

fn write_state(dir: &Path, state: &LocalState) -> Result<(), SnapshotError> {
    let path = dir.join(STATE_FILE);
    let temp = dir.join(format!(".{STATE_FILE}.tmp"));
    let bytes = serde_json::to_vec(state).map_err(|e| SnapshotError::Internal(e.to_string()))?;
    let io = |source| SnapshotError::Io {
        path: path.clone(),
        source,
    };
    std::fs::write(&temp, bytes).map_err(io)?;
    std::fs::File::open(&temp)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&temp, &path).map_err(io)
}

/// Whether environment directory `dir` has changes its newest snapshot lacks (or none yet): its
/// generation (`environment.json`'s, raised by its activity record's) is not the snapshot's.
pub fn is_dirty(dir: &Path) -> Result<bool, SnapshotError> {
    let state = read_state(dir)?;
    let meta = read_meta(dir).map_err(|e| SnapshotError::Internal(e.to_string()))?;
    Ok(state.seq == 0 || state.generation != meta.generation)
}

struct Scanned {
    state: LocalState,
    generation: u64,
    resolved: Resolved,
    spool: Spool,
    read: ScanStats,
    frozen_for: Duration,
}

/// Reads the environment's blobs into chunks (`None`: its generation is the snapshot's).
fn scan_env(dir: &Path) -> Result<Option<Scanned>, SnapshotError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SnapshotError::Io { path, source }
    };
    let state = read_state(dir)?;
    // Read before freezing: a change after this point bumps the generation again. Stored with
    // the generation and times of the environment's activity record folded in, so that a
    // restored copy's `environment.json` holds them (it has no record of its own).
    let meta = read_meta(dir).map_err(|e| SnapshotError::Io {
        path: dir.join(META_FILE),
        source: std::io::Error::other(e.to_string()),
    })?;
    let meta_bytes = serde_json::to_vec_pretty(&meta).map_err(|e| SnapshotError::Io {
        path: dir.join(META_FILE),
        source: std::io::Error::other(e),
    })?;
    if state.seq > 0 && state.generation == meta.generation {
        return Ok(None);
    }
    let image = dir.join(disk::IMAGE_FILE);
    if !image.exists() {
        return Err(SnapshotError::NoImage {
            env: meta.id.clone(),
        });
    }
    let known: BTreeSet<String> = state
        .resolved
        .hashes()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut spool = Spool::new_in(dir).map_err(io(dir))?;
    let mut read = ScanStats::default();
    let mut blobs = BTreeMap::new();
    let tree = dir.join(TREE_DIR);
    let file = std::fs::File::open(&image).map_err(io(&image))?;
    let started = Instant::now();
    // Nobody mounts or unmounts the disk while it is read: mounted, it is frozen; not mounted
    // (an idle environment), it is read as it is, and an open waits for the read to end.
    let mounting =
        disk::MountLock::acquire(dir).map_err(|e| SnapshotError::Internal(e.to_string()))?;
    let frozen = if disk::is_mountpoint(&tree) {
        Some(disk::Frozen::freeze(&tree).map_err(|e| SnapshotError::Internal(e.to_string()))?)
    } else {
        None
    };
    let size = file.metadata().map_err(io(&image))?.len();
    let scanned = scan::scan_file(&file, size, CHUNK_SIZE, &known, &mut spool, &mut read);
    drop(frozen);
    drop(mounting);
    let frozen_for = started.elapsed();
    blobs.insert(IMAGE_BLOB.to_owned(), scanned.map_err(io(&image))?);
    blobs.insert(
        META_BLOB.to_owned(),
        scan::scan_bytes(&meta_bytes, CHUNK_SIZE, &known, &mut spool).map_err(io(dir))?,
    );
    let frozen_dir = dir.join(FROZEN_DIR);
    if frozen_dir.is_dir() {
        let tar = tar_dir(&frozen_dir).map_err(io(&frozen_dir))?;
        blobs.insert(
            FROZEN_BLOB.to_owned(),
            scan::scan_bytes(&tar, CHUNK_SIZE, &known, &mut spool).map_err(io(dir))?,
        );
    }
    Ok(Some(Scanned {
        state,
        generation: meta.generation,
        resolved: Resolved { blobs },
        spool,
        read,
        frozen_for,
    }))
}

/// A tar of the frozen hooks snapshot (written by hookbox at creation, never by the sandbox):
/// symlinks kept as symlinks, bounded to [`MAX_SMALL_BLOB`].
fn tar_dir(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Complete);
    builder.append_dir_all(".", dir)?;
    let bytes = builder.into_inner()?;
    if bytes.len() as u64 > MAX_SMALL_BLOB {
        return Err(std::io::Error::other(format!(
            "the frozen hooks snapshot is larger than {MAX_SMALL_BLOB} bytes"
        )));
    }
    Ok(bytes)
}
