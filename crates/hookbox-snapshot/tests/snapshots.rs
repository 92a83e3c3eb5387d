#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic
//! Snapshots of real environments (ext4 images, loop-mounted: needs root, as hookbox does)
//! against a real object store: a `file://` directory here, Garage in `scripts/test.sh`
//! (`HOOKBOX_TEST_SNAPSHOT_URL`).

use std::io::Write;
use std::path::{Path, PathBuf};

use hookbox_environments::environment::{Environments, TREE_DIR, read_meta};
use hookbox_snapshot::{SnapshotError, Snapshots, is_dirty};

mod common;

use common::DataDir;

fn store(data: &Path) -> Environments {
    common::store(data, 256 << 20)
}

fn create(store: &Environments, freeze: bool) -> String {
    common::create(
        store,
        serde_json::json!({
            "sources": [
                {"type": "inline", "target": "/workspace/hello.txt", "content": "hello"},
                {"type": "inline", "target": "/.agents/hooks.json", "content": "{\"hooks\":{}}"}
            ],
            "freeze_hooks": freeze,
        }),
    )
}

fn tree(store: &Environments, id: &str) -> PathBuf {
    store.dir_of(id).unwrap().join(TREE_DIR)
}

fn write_random(path: &Path, bytes: usize, seed: u64) {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let data: Vec<u8> = (0..bytes)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u8
        })
        .collect();
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&data).unwrap();
    f.sync_all().unwrap();
}

fn snapshot_url(dir: &Path) -> String {
    // Each test under a prefix of its own, inserted before the query.
    let sub = format!("/t{:016x}", rand::random::<u64>());
    match std::env::var("HOOKBOX_TEST_SNAPSHOT_URL") {
        Ok(base) => match base.split_once('?') {
            Some((path, query)) => format!("{path}{sub}?{query}"),
            None => format!("{base}{sub}"),
        },
        Err(_) => format!("file://{}/objects{sub}", dir.display()),
    }
}

#[tokio::test]
async fn an_environment_moves_to_another_host_and_only_changes_are_uploaded() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let snapshots = Snapshots::open(&snapshot_url(objects.path())).unwrap();
    snapshots
        .check(std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let a_data = DataDir::new();
    let a = store(a_data.path());
    let id = create(&a, true);
    let dir = a.dir_of(&id).unwrap();
    write_random(&tree(&a, &id).join("workspace/big.bin"), 8 << 20, 1);
    a.mark_modified(&id).unwrap();
    assert!(is_dirty(&dir).unwrap());

    let first = snapshots.checkpoint(&id, &dir).await.unwrap();
    assert_eq!(first.seq, Some(1));
    assert!(first.full);
    assert!(first.uploaded_bytes >= 8 << 20, "{first:?}");
    assert!(!is_dirty(&dir).unwrap());
    let unchanged = snapshots.checkpoint(&id, &dir).await.unwrap();
    assert_eq!(
        unchanged.seq, None,
        "nothing changed, nothing written: {unchanged:?}"
    );

    // Change 1 MiB: about 1 MiB goes up, not the 8 MiB file or the image.
    write_random(&tree(&a, &id).join("workspace/small.bin"), 1 << 20, 2);
    a.mark_modified(&id).unwrap();
    let second = snapshots.checkpoint(&id, &dir).await.unwrap();
    assert_eq!(second.seq, Some(2));
    assert!(!second.full);
    assert!(
        second.uploaded_bytes + second.manifest_bytes <= 2 << 20,
        "a 1 MiB change uploaded {} bytes",
        second.uploaded_bytes + second.manifest_bytes
    );

    // Another host restores it whole, frozen hooks included.
    let b_data = DataDir::new();
    let b = store(b_data.path());
    let staging = b.root().join(".restoring-test");
    let restored = snapshots.restore(&id, &staging).await.unwrap();
    assert_eq!(restored.seq, 2);
    b.install(&id, &staging).unwrap();
    let meta = b.show(&id).unwrap();
    assert!(meta.frozen_hooks);
    assert_eq!(
        std::fs::read(tree(&b, &id).join("workspace/big.bin")).unwrap(),
        std::fs::read(tree(&a, &id).join("workspace/big.bin")).unwrap()
    );
    assert_eq!(
        std::fs::read(tree(&b, &id).join("workspace/small.bin")).unwrap(),
        std::fs::read(tree(&a, &id).join("workspace/small.bin")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(tree(&b, &id).join("workspace/hello.txt")).unwrap(),
        "hello"
    );
    let frozen = b.dir_of(&id).unwrap().join("frozen/.agents/hooks.json");
    assert_eq!(std::fs::read_to_string(frozen).unwrap(), "{\"hooks\":{}}");
    assert!(
        !is_dirty(&b.dir_of(&id).unwrap()).unwrap(),
        "a restored copy is clean"
    );

    // B carries on incrementally from the restored state.
    std::fs::write(tree(&b, &id).join("workspace/from-b.txt"), "b").unwrap();
    b.mark_modified(&id).unwrap();
    let third = snapshots
        .checkpoint(&id, &b.dir_of(&id).unwrap())
        .await
        .unwrap();
    assert_eq!(third.seq, Some(3));
    assert!(third.uploaded_bytes < 1 << 20, "{third:?}");

    snapshots.delete(&id).await.unwrap();
    assert_eq!(snapshots.latest(&id).await.unwrap(), None);
    a.remove(&id).unwrap();
    b.remove(&id).unwrap();
}

#[tokio::test]
async fn a_corrupt_or_missing_object_is_refused_naming_the_environment() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    // The file store, so that the test can reach behind the API and damage an object.
    let snapshots =
        Snapshots::open(&format!("file://{}/objects", objects.path().display())).unwrap();
    let data = DataDir::new();
    let a = store(data.path());
    let id = create(&a, false);
    write_random(&tree(&a, &id).join("workspace/data.bin"), 1 << 20, 3);
    a.mark_modified(&id).unwrap();
    snapshots
        .checkpoint(&id, &a.dir_of(&id).unwrap())
        .await
        .unwrap();
    let chunks = objects.path().join(format!("objects/envs/{id}/chunks"));
    let mut names: Vec<PathBuf> = std::fs::read_dir(&chunks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();

    // One flipped byte in one block: the hash check refuses it.
    let victim = &names[names.len() / 2];
    let original = std::fs::read(victim).unwrap();
    let mut bad = original.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(victim, &bad).unwrap();
    let b_data = DataDir::new();
    let b = store(b_data.path());
    let staging = b.root().join(".restoring-corrupt");
    let err = snapshots.restore(&id, &staging).await.unwrap_err();
    assert!(matches!(err, SnapshotError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains(&id), "{err}");
    assert!(!staging.exists(), "a failed restore leaves nothing behind");
    assert!(!b.is_local(&id));

    // A missing block.
    std::fs::write(victim, &original).unwrap();
    std::fs::remove_file(victim).unwrap();
    let err = snapshots.restore(&id, &staging).await.unwrap_err();
    assert!(matches!(err, SnapshotError::Missing { .. }), "{err}");
    assert!(err.to_string().contains(&id), "{err}");

    // No snapshot at all.
    let err = snapshots
        .restore("env_nothing", &staging)
        .await
        .unwrap_err();
    assert!(matches!(err, SnapshotError::NoSnapshot { .. }), "{err}");
    a.remove(&id).unwrap();
}

#[tokio::test]
async fn long_chains_are_compacted_and_still_restore() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let snapshots = Snapshots::open(&snapshot_url(objects.path())).unwrap();
    let data = DataDir::new();
    let a = store(data.path());
    let id = create(&a, false);
    let rounds = hookbox_snapshot::manifest::COMPACT_AFTER as u64 + 3;
    for i in 0..rounds {
        std::fs::write(tree(&a, &id).join("workspace/counter.txt"), i.to_string()).unwrap();
        write_random(
            &tree(&a, &id).join(format!("workspace/f{i}.bin")),
            200 << 10,
            i,
        );
        a.mark_modified(&id).unwrap();
        snapshots
            .checkpoint(&id, &a.dir_of(&id).unwrap())
            .await
            .unwrap();
    }
    let manifests = snapshots.manifests(&id).await.unwrap();
    assert_eq!(manifests.last().copied(), Some(rounds));
    assert!(
        manifests.len() < hookbox_snapshot::manifest::COMPACT_AFTER as usize,
        "old manifests were not cleaned up: {manifests:?}"
    );
    let b_data = DataDir::new();
    let b = store(b_data.path());
    let staging = b.root().join(".restoring-chain");
    snapshots.restore(&id, &staging).await.unwrap();
    b.install(&id, &staging).unwrap();
    b.show(&id).unwrap(); // mounts the restored image, as opening it does
    assert_eq!(
        std::fs::read_to_string(tree(&b, &id).join("workspace/counter.txt")).unwrap(),
        (rounds - 1).to_string()
    );
    for i in 0..rounds {
        assert_eq!(
            std::fs::read(tree(&b, &id).join(format!("workspace/f{i}.bin"))).unwrap(),
            std::fs::read(tree(&a, &id).join(format!("workspace/f{i}.bin"))).unwrap()
        );
    }
    snapshots.delete(&id).await.unwrap();
    a.remove(&id).unwrap();
    b.remove(&id).unwrap();
}

fn read_tree(store: &Environments, id: &str, path: &str) -> String {
    std::fs::read_to_string(tree(store, id).join(path)).unwrap()
}

// Regression (issue 36): a host that held an old copy of an environment while another host wrote
// newer snapshots could upload that old copy as the newest snapshot (a conflicting sequence
// number was answered with a full snapshot of whatever the host had), hiding the other host's
// writes from every later restore.
#[tokio::test]
async fn a_stale_copy_is_never_uploaded_over_a_newer_snapshot() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let snapshots = Snapshots::open(&snapshot_url(objects.path())).unwrap();
    let (a_data, b_data, c_data) = (DataDir::new(), DataDir::new(), DataDir::new());
    let (a, b, c) = (
        store(a_data.path()),
        store(b_data.path()),
        store(c_data.path()),
    );
    // A holds the lease with fence 1 and uploads v1.
    let id = create(&a, false);
    std::fs::write(tree(&a, &id).join("workspace/state.txt"), "v1\n").unwrap();
    a.mark_modified(&id).unwrap();
    let first = snapshots
        .checkpoint_under(&id, &a.dir_of(&id).unwrap(), 1)
        .await
        .unwrap();
    assert_eq!(first.seq, Some(1));
    // B takes the lease over (fence 2), restores it and uploads its own write.
    let staging = b.root().join(".restoring-b");
    snapshots.restore_under(&id, &staging, 2).await.unwrap();
    b.install(&id, &staging).unwrap();
    b.show(&id).unwrap();
    std::fs::write(tree(&b, &id).join("workspace/state.txt"), "v1\nfrom-B\n").unwrap();
    b.mark_modified(&id).unwrap();
    let second = snapshots
        .checkpoint_under(&id, &b.dir_of(&id).unwrap(), 2)
        .await
        .unwrap();
    assert_eq!(second.seq, Some(2));

    // A, still holding its copy of snapshot 1 (changed since), gets the lease back (fence 3):
    // its copy is refused, under the old lease and the new one alike, and nothing is written.
    std::fs::write(tree(&a, &id).join("workspace/state.txt"), "stale\n").unwrap();
    a.mark_modified(&id).unwrap();
    for fence in [3, 1] {
        let err = snapshots
            .checkpoint_under(&id, &a.dir_of(&id).unwrap(), fence)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                SnapshotError::Stale {
                    local: 1,
                    latest: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains(&id), "{err}");
    }
    assert_eq!(snapshots.manifests(&id).await.unwrap(), vec![1, 2]);
    // Any host restoring it finds B's write.
    let staging = c.root().join(".restoring-c");
    assert_eq!(
        snapshots.restore_under(&id, &staging, 3).await.unwrap().seq,
        2
    );
    c.install(&id, &staging).unwrap();
    c.show(&id).unwrap();
    assert_eq!(read_tree(&c, &id, "workspace/state.txt"), "v1\nfrom-B\n");
    for s in [&a, &b, &c] {
        s.remove(&id).unwrap();
    }
    snapshots.delete(&id).await.unwrap();
}

// A snapshot this host wrote under the lease it still holds, whose local record was lost (a
// crash between the manifest and the record): the copy continues from it, with a full manifest;
// the same situation under another lease is a stale copy.
#[tokio::test]
async fn a_lost_local_record_continues_under_the_same_lease_only() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let snapshots = Snapshots::open(&snapshot_url(objects.path())).unwrap();
    let data = DataDir::new();
    let a = store(data.path());
    let id = create(&a, false);
    let dir = a.dir_of(&id).unwrap();
    std::fs::write(tree(&a, &id).join("workspace/one.txt"), "1").unwrap();
    a.mark_modified(&id).unwrap();
    snapshots.checkpoint_under(&id, &dir, 7).await.unwrap();
    let record = std::fs::read(dir.join(hookbox_snapshot::STATE_FILE)).unwrap();
    std::fs::write(tree(&a, &id).join("workspace/two.txt"), "2").unwrap();
    a.mark_modified(&id).unwrap();
    assert_eq!(
        snapshots.checkpoint_under(&id, &dir, 7).await.unwrap().seq,
        Some(2)
    );
    // The record of snapshot 2 is lost; more changes follow.
    std::fs::write(dir.join(hookbox_snapshot::STATE_FILE), &record).unwrap();
    std::fs::write(tree(&a, &id).join("workspace/three.txt"), "3").unwrap();
    a.mark_modified(&id).unwrap();
    let err = snapshots.checkpoint_under(&id, &dir, 8).await.unwrap_err();
    assert!(matches!(err, SnapshotError::Stale { .. }), "{err}");
    assert_eq!(snapshots.manifests(&id).await.unwrap(), vec![1, 2]);
    let third = snapshots.checkpoint_under(&id, &dir, 7).await.unwrap();
    assert_eq!(third.seq, Some(3));
    assert!(third.full, "{third:?}");
    let b_data = DataDir::new();
    let b = store(b_data.path());
    let staging = b.root().join(".restoring-b");
    snapshots.restore(&id, &staging).await.unwrap();
    b.install(&id, &staging).unwrap();
    b.show(&id).unwrap();
    for (file, content) in [("one", "1"), ("two", "2"), ("three", "3")] {
        assert_eq!(
            read_tree(&b, &id, &format!("workspace/{file}.txt")),
            content
        );
    }
    a.remove(&id).unwrap();
    b.remove(&id).unwrap();
    snapshots.delete(&id).await.unwrap();
}

// Issue 35: a change is recorded in the environment's activity record, not in
// `environment.json`: the snapshot still sees it, uploads metadata holding it, and a restored
// copy carries that generation in its own `environment.json` (clean, with no record of its own).
#[tokio::test]
async fn a_change_recorded_after_a_snapshot_is_in_the_next_one() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let snapshots = Snapshots::open(&snapshot_url(objects.path())).unwrap();
    let a_data = DataDir::new();
    let a = store(a_data.path());
    let id = create(&a, false);
    let dir = a.dir_of(&id).unwrap();
    let first = snapshots.checkpoint(&id, &dir).await.unwrap();
    assert_eq!(first.seq, Some(1));
    assert!(!is_dirty(&dir).unwrap());

    let meta_file = dir.join(hookbox_environments::environment::META_FILE);
    let stored = std::fs::read(&meta_file).unwrap();
    std::fs::write(tree(&a, &id).join("workspace/later.txt"), "later").unwrap();
    a.mark_modified(&id).unwrap();
    assert_eq!(std::fs::read(&meta_file).unwrap(), stored);
    assert!(is_dirty(&dir).unwrap(), "the change is seen");
    let second = snapshots.checkpoint(&id, &dir).await.unwrap();
    assert_eq!(second.seq, Some(2));
    assert!(!is_dirty(&dir).unwrap());
    let generation = read_meta(&dir).unwrap().generation;

    let b_data = DataDir::new();
    let b = store(b_data.path());
    let staging = b.root().join(".restoring-test");
    snapshots.restore(&id, &staging).await.unwrap();
    assert!(
        !staging
            .join(hookbox_environments::environment::ACTIVITY_FILE)
            .exists()
    );
    let restored: serde_json::Value =
        serde_json::from_slice(&std::fs::read(staging.join("environment.json")).unwrap()).unwrap();
    assert_eq!(restored["generation"].as_u64().unwrap(), generation);
    b.install(&id, &staging).unwrap();
    let b_dir = b.dir_of(&id).unwrap();
    assert!(!is_dirty(&b_dir).unwrap(), "a restored copy is clean");
    assert_eq!(b.show(&id).unwrap().generation, generation);
    assert_eq!(
        std::fs::read_to_string(tree(&b, &id).join("workspace/later.txt")).unwrap(),
        "later"
    );
    b.mark_modified(&id).unwrap();
    assert!(is_dirty(&b_dir).unwrap());
    snapshots.delete(&id).await.unwrap();
    a.remove(&id).unwrap();
    b.remove(&id).unwrap();
}
