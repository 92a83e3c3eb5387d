//! The snapshot format. A snapshot of an environment is a set of named blobs (its disk image,
//! its metadata, its frozen hooks), each cut into fixed-size chunks. A chunk is stored once per
//! environment under the BLAKE3 hash of its bytes (zstd-compressed), and a manifest maps each
//! blob's chunk indices to hashes. All-zero chunks (and holes of the sparse image) are not
//! stored: an index a blob does not list is zeros.
//!
//! Manifests form a chain: a full manifest lists every chunk; a delta lists only what changed
//! since its parent (`parent` = the previous sequence number). A restore reads back from the
//! newest manifest to the nearest full one and applies them in order. Every
//! [`COMPACT_AFTER`] deltas a checkpoint writes a full manifest instead (no chunk is uploaded
//! again: chunks are addressed by content), after which older manifests and chunks no longer
//! referenced are deleted.
//!
//! Among replicas a chain has one writer at a time, the holder of the environment's lease, and
//! every manifest records the lease's fencing number it was written under (`fence`; 0: no
//! leases, one host). A checkpoint only ever appends the successor of the newest manifest that
//! its local copy is based on, with a conditional create; a copy that the chain moved past
//! (another host wrote newer snapshots while this one held an old copy) is stale and is never
//! uploaded ([`crate::SnapshotError::Stale`]).
//!
//! Object layout under the store's prefix:
//! `envs/<env>/chunks/<hash>` and `envs/<env>/manifests/<seq, 16 hex digits>.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The format version this crate writes and reads.
pub const FORMAT: u32 = 1;

/// Chunk size of new snapshots: small enough that a change of one file re-uploads little more
/// than that file (ext4 scatters a write over data, inode and bitmap blocks and the journal),
/// large enough that a 1 GiB image is 8 192 chunks.
pub const CHUNK_SIZE: u64 = 128 * 1024;

/// Deltas after which a checkpoint writes a full manifest.
pub const COMPACT_AFTER: u32 = 16;

/// The largest manifest read (a full one of a 100 GiB image is about 60 MiB).
pub const MAX_MANIFEST_BYTES: usize = 256 << 20;

/// A blob's chunks: index → hex BLAKE3 hash of the chunk's bytes.
pub type ChunkMap = BTreeMap<u64, String>;

/// One blob as a manifest records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobEntry {
    /// The blob's length in bytes.
    pub size: u64,
    /// Full manifest: every non-zero chunk. Delta: the chunks that changed.
    #[serde(default)]
    pub chunks: ChunkMap,
    /// Delta only: chunks that were non-zero in the parent and are zeros (or past the end) now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zeroed: Vec<u64>,
}

/// One snapshot of one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub environment: String,
    /// 1, 2, 3, … in the order they were taken.
    pub seq: u64,
    /// The snapshot this one is a delta against; `None`: a full manifest.
    pub parent: Option<u64>,
    pub chunk_size: u64,
    /// Unix seconds.
    pub created: u64,
    /// The environment's modification generation the snapshot holds.
    pub generation: u64,
    /// The fencing number of the lease its writer held (0: written without leases, or before
    /// manifests recorded it).
    #[serde(default)]
    pub fence: u64,
    /// Blob name → entry. A delta lists only blobs that changed; a full manifest, all.
    pub blobs: BTreeMap<String, BlobEntry>,
}

/// What a snapshot holds, fully resolved: blob name → (size, every non-zero chunk).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub blobs: BTreeMap<String, BlobState>,
}

/// One blob, fully resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobState {
    pub size: u64,
    pub chunks: ChunkMap,
}

impl Resolved {
    /// Applies `manifest` (full or delta) on top.
    pub fn apply(&mut self, manifest: &Manifest) {
        if manifest.parent.is_none() {
            self.blobs.clear();
        }
        for (name, entry) in &manifest.blobs {
            let blob = self.blobs.entry(name.clone()).or_default();
            if manifest.parent.is_none() {
                blob.chunks.clear();
            }
            blob.size = entry.size;
            for index in &entry.zeroed {
                blob.chunks.remove(index);
            }
            blob.chunks
                .extend(entry.chunks.iter().map(|(i, h)| (*i, h.clone())));
            let end = entry.size.div_ceil(manifest.chunk_size.max(1));
            blob.chunks.retain(|i, _| *i < end);
        }
    }

    /// The delta from `self` (the parent) to `next`, per blob; blobs that did not change are
    /// left out.
    pub fn delta_to(&self, next: &Resolved) -> BTreeMap<String, BlobEntry> {
        let mut out = BTreeMap::new();
        let empty = BlobState::default();
        for (name, new) in &next.blobs {
            let old = self.blobs.get(name).unwrap_or(&empty);
            let chunks: ChunkMap = new
                .chunks
                .iter()
                .filter(|(i, h)| old.chunks.get(i) != Some(h))
                .map(|(i, h)| (*i, h.clone()))
                .collect();
            let zeroed: Vec<u64> = old
                .chunks
                .keys()
                .filter(|i| !new.chunks.contains_key(i))
                .copied()
                .collect();
            if !chunks.is_empty() || !zeroed.is_empty() || old.size != new.size {
                out.insert(
                    name.clone(),
                    BlobEntry {
                        size: new.size,
                        chunks,
                        zeroed,
                    },
                );
            }
        }
        out
    }

    /// Every entry, as a full manifest lists them.
    pub fn full(&self) -> BTreeMap<String, BlobEntry> {
        self.blobs
            .iter()
            .map(|(name, b)| {
                (
                    name.clone(),
                    BlobEntry {
                        size: b.size,
                        chunks: b.chunks.clone(),
                        zeroed: Vec::new(),
                    },
                )
            })
            .collect()
    }

    /// Every hash referenced.
    pub fn hashes(&self) -> std::collections::BTreeSet<&str> {
        self.blobs
            .values()
            .flat_map(|b| b.chunks.values().map(String::as_str))
            .collect()
    }
}

/// What a host keeps beside an environment about its newest uploaded snapshot
/// (`<env dir>/snapshot.json`): enough to tell what changed since, without asking the store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalState {
    /// The newest snapshot uploaded from (or restored to) this host; 0: none.
    pub seq: u64,
    /// Deltas since the last full manifest.
    pub since_full: u32,
    pub chunk_size: u64,
    /// The environment's generation that snapshot holds.
    pub generation: u64,
    /// What it holds.
    pub resolved: Resolved,
    /// The fencing number of the lease under which this host last found its copy current (it
    /// restored it, uploaded it, or saw that the store held nothing newer); 0: no leases, or
    /// never checked.
    #[serde(default)]
    pub fence: u64,
    /// The store holds newer snapshots than the one this copy is based on, written by another
    /// host: the copy must never be used or uploaded again, only replaced by a restore.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

impl LocalState {
    /// Whether this copy is known to be current for a host that now holds the environment's
    /// lease with fencing number `held`, without asking the store: it was current under the
    /// same lease, or under the one just before it (a fencing number grows by one per new
    /// owner, so no other host held the lease in between: this host's previous process did).
    /// A copy never snapshotted (here or anywhere) is the only copy there is.
    pub fn current_under(&self, held: u64) -> bool {
        !self.stale
            && (self.seq == 0
                || held == self.fence
                || (self.fence > 0 && held == self.fence.saturating_add(1)))
    }
}

/// The object key of a manifest (sequence numbers sort as text).
pub fn manifest_key(env: &str, seq: u64) -> String {
    format!("envs/{env}/manifests/{seq:016x}.json")
}

/// The object key of a chunk.
pub fn chunk_key(env: &str, hash: &str) -> String {
    format!("envs/{env}/chunks/{hash}")
}

/// The sequence number in a manifest key's file name.
pub fn parse_manifest_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(".json")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(size: u64, chunks: &[(u64, &str)]) -> Resolved {
        let mut r = Resolved::default();
        r.blobs.insert(
            "disk.img".into(),
            BlobState {
                size,
                chunks: chunks.iter().map(|(i, h)| (*i, (*h).to_owned())).collect(),
            },
        );
        r
    }

    fn manifest(seq: u64, parent: Option<u64>, blobs: BTreeMap<String, BlobEntry>) -> Manifest {
        Manifest {
            format: FORMAT,
            environment: "env_a".into(),
            seq,
            parent,
            chunk_size: 4,
            created: 0,
            generation: seq,
            fence: 0,
            blobs,
        }
    }

    #[test]
    fn a_delta_chain_resolves_to_the_newest_state() {
        let a = state(16, &[(0, "h0"), (1, "h1"), (3, "h3")]);
        let b = state(16, &[(0, "h0"), (1, "x1"), (2, "h2")]);
        let c = state(8, &[(0, "h0"), (1, "x1")]);
        let chain = [
            manifest(1, None, a.full()),
            manifest(2, Some(1), a.delta_to(&b)),
            manifest(3, Some(2), b.delta_to(&c)),
        ];
        let delta = &chain[1].blobs["disk.img"];
        assert_eq!(delta.chunks.len(), 2, "only the changed chunks: {delta:?}");
        assert_eq!(delta.zeroed, vec![3]);
        let mut resolved = Resolved::default();
        for m in &chain {
            resolved.apply(m);
        }
        assert_eq!(resolved, c);
        assert!(c.delta_to(&c).is_empty(), "no change, no entry");
    }

    #[test]
    fn a_full_manifest_replaces_what_came_before() {
        let mut resolved = state(16, &[(0, "old"), (2, "old2")]);
        resolved.apply(&manifest(5, None, state(8, &[(1, "new")]).full()));
        assert_eq!(resolved, state(8, &[(1, "new")]));
    }

    #[test]
    fn a_copy_is_current_only_under_its_own_lease_or_the_next_one() {
        let copy = |seq, fence| LocalState {
            seq,
            fence,
            ..LocalState::default()
        };
        // Without leases every fence is 0.
        assert!(copy(3, 0).current_under(0));
        // Checked under fence 4: current under 4 and 5 (this host's next process), not once
        // another owner may have come between.
        assert!(copy(3, 4).current_under(4));
        assert!(copy(3, 4).current_under(5));
        assert!(!copy(3, 4).current_under(6));
        assert!(!copy(3, 4).current_under(3));
        // Never checked under a lease: unknown.
        assert!(!copy(3, 0).current_under(1));
        // Never snapshotted: the only copy there is.
        assert!(copy(0, 0).current_under(7));
        let stale = LocalState {
            stale: true,
            ..copy(3, 4)
        };
        assert!(!stale.current_under(4));
        // Records written before these fields existed read as unchecked and not stale.
        let old: LocalState = serde_json::from_str(
            r#"{"seq":2,"since_full":1,"chunk_size":4,"generation":9,"resolved":{"blobs":{}}}"#,
        )
        .unwrap();
        assert_eq!((old.fence, old.stale), (0, false));
    }

    #[test]
    fn manifest_names_round_trip_and_sort() {
        let k = manifest_key("env_a", 300);
        let name = k.rsplit('/').next().unwrap_or_default();
        assert_eq!(parse_manifest_name(name), Some(300));
        assert!(manifest_key("env_a", 9) < manifest_key("env_a", 10));
        assert_eq!(parse_manifest_name("zz.json"), None);
        assert_eq!(parse_manifest_name("000000000000000a.tmp"), None);
    }
}
