//! Snapshot benchmark: what a checkpoint uploads and how long it and a restore take, against
//! `tar | zstd` of the same tree uploaded to (and downloaded from, then extracted) the same
//! store, measured in the same run.
//!
//! A 1 GiB environment (1 024 files of 1 MiB, half random, half text) on its ext4 image:
//! the first checkpoint, then one after changing 1 file, 1 % of the files and all of them;
//! restores of a 100 MiB and the 1 GiB environment on another "host" (data dir).
//!
//! Run as root (loop-mounted images): `cargo bench -p hookbox-snapshot --bench snapshot`.
//! The store is `HOOKBOX_BENCH_SNAPSHOT_URL` (e.g. `scripts/objectstore.sh start` for Garage),
//! else a `file://` directory. `-- --mib N` changes the size (default 1024).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hookbox_environments::environment::{Environments, TREE_DIR};
use hookbox_snapshot::Snapshots;
use object_store::{ObjectStore, PutPayload};

const MIB: u64 = 1 << 20;

#[path = "../tests/common/mod.rs"]
mod common;

use common::{DataDir, store};

fn create(store: &Environments) -> String {
    common::create(store, serde_json::json!({"sources": []}))
}

/// 1 MiB: half pseudo-random bytes, half repeated text (source trees compress; data does not).
fn file_bytes(seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(MIB as usize);
    while out.len() < (MIB / 2) as usize {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    let line = format!("fn item_{seed}() -> usize {{ {seed} }} // generated line\n");
    while out.len() < MIB as usize {
        out.extend_from_slice(line.as_bytes());
    }
    out.truncate(MIB as usize);
    out
}

fn write_files(tree: &Path, range: std::ops::Range<u64>, round: u64) {
    let dir = tree.join("workspace/data");
    std::fs::create_dir_all(&dir).unwrap();
    for i in range {
        let mut f = std::fs::File::create(dir.join(format!("f{i:05}.bin"))).unwrap();
        f.write_all(&file_bytes(i * 1_000 + round)).unwrap();
    }
    Command::new("sync").status().unwrap();
}

/// `tar -C tree -c . | zstd -3 -T0` into memory; (bytes, time).
fn tar_zstd(tree: &Path) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut tar = Command::new("tar")
        .args(["-C"])
        .arg(tree)
        .args(["-cf", "-", "."])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Command::new("zstd")
        .args(["-3", "-T0", "-q", "-c"])
        .stdin(tar.stdout.take().unwrap())
        .output()
        .unwrap();
    tar.wait().unwrap();
    (out.stdout, started.elapsed())
}

fn untar_zstd(bytes: &[u8], into: &Path) -> Duration {
    std::fs::create_dir_all(into).unwrap();
    let started = Instant::now();
    let mut zstd = Command::new("zstd")
        .args(["-d", "-q", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = zstd.stdin.take().unwrap();
    let data = bytes.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&data));
    let status = Command::new("tar")
        .args(["-C"])
        .arg(into)
        .args(["-xf", "-"])
        .stdin(zstd.stdout.take().unwrap())
        .status()
        .unwrap();
    feeder.join().unwrap().unwrap();
    zstd.wait().unwrap();
    assert!(status.success());
    Command::new("sync").status().unwrap();
    started.elapsed()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: u64 = args
        .iter()
        .position(|a| a == "--mib")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    let scratch = tempfile::tempdir().unwrap();
    let url = std::env::var("HOOKBOX_BENCH_SNAPSHOT_URL")
        .unwrap_or_else(|_| format!("file://{}/objects", scratch.path().display()));
    let snapshots = Snapshots::open(&url).unwrap();
    let loc = hookbox_snapshot::location::parse(&url).unwrap();
    println!(
        "snapshot bench: {mib} MiB environment, store {}",
        snapshots.shown()
    );

    let a_data = DataDir::new();
    let a = store(a_data.path(), (mib * 2 + 256) * MIB);
    let id = create(&a);
    let dir = a.dir_of(&id).unwrap();
    let tree = dir.join(TREE_DIR);
    write_files(&tree, 0..mib, 0);
    a.mark_modified(&id).unwrap();

    let baseline_key = object_store::path::Path::from(format!("{}/bench/{id}.tar.zst", loc.prefix));
    let upload_tar = |bytes: Vec<u8>| {
        let store = loc.store.clone();
        let key = baseline_key.clone();
        async move {
            let started = Instant::now();
            store.put(&key, PutPayload::from(bytes)).await.unwrap();
            started.elapsed()
        }
    };

    println!();
    println!(
        "| checkpoint of a {mib} MiB environment | changed | uploaded | time | tar+zstd+upload bytes | its time | bytes ratio | time ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let row = |what: &str,
               changed: u64,
               stats: &hookbox_snapshot::CheckpointStats,
               took: Duration,
               base: (usize, Duration)| {
        let up = stats.uploaded_bytes + stats.manifest_bytes;
        println!(
            "| {what} | {:.1} MiB | {:.2} MiB ({:.2}x changed) | {:.0} ms (frozen {:.0} ms) | {:.2} MiB | {:.0} ms | {:.3} | {:.2} |",
            changed as f64 / MIB as f64,
            up as f64 / MIB as f64,
            up as f64 / changed.max(1) as f64,
            ms(took),
            ms(stats.frozen_for),
            base.0 as f64 / MIB as f64,
            ms(base.1),
            up as f64 / base.0 as f64,
            took.as_secs_f64() / base.1.as_secs_f64(),
        );
    };
    let measure_baseline = |tree: PathBuf| async move {
        let (bytes, packed) = tar_zstd(&tree);
        let len = bytes.len();
        let uploaded = upload_tar(bytes).await;
        (len, packed + uploaded)
    };

    let started = Instant::now();
    let first = snapshots.checkpoint(&id, &dir).await.unwrap();
    let took = started.elapsed();
    let base = measure_baseline(tree.clone()).await;
    row("first (full)", mib * MIB, &first, took, base);

    for (what, count, round) in [
        ("1 file", 1u64, 1u64),
        ("1 % of the files", (mib / 100).max(1), 2),
        ("all files", mib, 3),
    ] {
        write_files(&tree, 0..count, round);
        a.mark_modified(&id).unwrap();
        let started = Instant::now();
        let stats = snapshots.checkpoint(&id, &dir).await.unwrap();
        let took = started.elapsed();
        let base = measure_baseline(tree.clone()).await;
        row(what, count * MIB, &stats, took, base);
    }

    // Restores on another host, for a 100 MiB environment and the whole one.
    println!();
    println!(
        "| restore on another host | snapshot restore | download + zstd -d + tar -x | ratio |"
    );
    println!("|---|---|---|---|");
    let small = create(&a);
    let small_dir = a.dir_of(&small).unwrap();
    write_files(&small_dir.join(TREE_DIR), 0..(mib / 10).max(1), 0);
    a.mark_modified(&small).unwrap();
    snapshots.checkpoint(&small, &small_dir).await.unwrap();
    for (label, env) in [
        (format!("{} MiB", (mib / 10).max(1)), &small),
        (format!("{mib} MiB"), &id),
    ] {
        let b_data = DataDir::new();
        let b = store(b_data.path(), (mib * 2 + 256) * MIB);
        let staging = b.root().join(".restoring-bench");
        let started = Instant::now();
        snapshots.restore(env, &staging).await.unwrap();
        b.install(env, &staging).unwrap();
        b.show(env).unwrap(); // mounted and usable, as an open does
        let restore = started.elapsed();
        let (bytes, _) = tar_zstd(&a.dir_of(env).unwrap().join(TREE_DIR));
        upload_tar(bytes).await;
        let started = Instant::now();
        let fetched = loc
            .store
            .get(&baseline_key)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let extract = untar_zstd(&fetched, &b_data.path().join("untarred"));
        let baseline = started.elapsed().max(extract);
        println!(
            "| {label} | {:.0} ms | {:.0} ms | {:.2} |",
            ms(restore),
            ms(baseline),
            restore.as_secs_f64() / baseline.as_secs_f64()
        );
        b.remove(env).unwrap();
    }
    let _ = loc.store.delete(&baseline_key).await;
    snapshots.delete(&id).await.unwrap();
    snapshots.delete(&small).await.unwrap();
    a.remove(&id).unwrap();
    a.remove(&small).unwrap();
}
