#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic
//! The snapshot manager on real environments and a `file://` store: changes left on disk are
//! uploaded at start-up, only uploaded copies are evicted (and never open ones), an evicted or
//! stale copy is restored from the store.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::DataDir;
use hookbox_environments::environment::TREE_DIR;
use hookbox_snapshot::{Manager, ManagerOptions, Snapshots, is_dirty};

fn env_with_file(store: &hookbox_environments::environment::Environments, content: &str) -> String {
    common::create(
        store,
        serde_json::json!({"sources": [{"type": "inline", "target": "/workspace/f.txt", "content": content}]}),
    )
}

/// Waits (bounded) until no checkpoint is pending.
async fn settled(manager: &Manager) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while manager.health().pending > 0 {
        assert!(
            Instant::now() < deadline,
            "checkpoints never finished: {:?}",
            manager.health()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn start_uploads_leftovers_eviction_keeps_unuploaded_and_open_copies() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let url = format!("file://{}/objects", objects.path().display());
    let data = DataDir::new();
    let envs = common::store(data.path(), 64 << 20);
    let uploaded = env_with_file(&envs, "one");
    let open = env_with_file(&envs, "two");
    let manager = Manager::new(
        Snapshots::open(&url).unwrap(),
        envs.clone(),
        // Any local copy is over the cache size.
        ManagerOptions {
            local_cache_bytes: Some(1),
        },
    );
    // Both were changed and never uploaded (as after a crash): start-up schedules them.
    assert_eq!(manager.start().unwrap(), 2);
    settled(&manager).await;
    assert_eq!(
        manager.health().consecutive_failures,
        0,
        "{:?}",
        manager.health()
    );
    assert!(!is_dirty(&envs.dir_of(&uploaded).unwrap()).unwrap());

    // A third one with changes not yet uploaded.
    let pending = env_with_file(&envs, "three");
    let evicted = manager.evict(&HashSet::from([open.clone()])).await;
    assert_eq!(
        evicted,
        vec![uploaded.clone()],
        "only the closed, uploaded copy goes"
    );
    assert!(!envs.is_local(&uploaded));
    assert!(envs.is_local(&open), "an open environment was evicted");
    assert!(
        envs.is_local(&pending),
        "an environment with changes not uploaded was evicted"
    );

    // Next use restores it.
    assert!(manager.ensure_local(&uploaded, 0).await.unwrap());
    envs.show(&uploaded).unwrap();
    let tree = envs.dir_of(&uploaded).unwrap().join(TREE_DIR);
    assert_eq!(
        std::fs::read_to_string(tree.join("workspace/f.txt")).unwrap(),
        "one"
    );
    assert!(
        !manager.ensure_local(&uploaded, 0).await.unwrap(),
        "a current copy is kept"
    );
}

#[tokio::test]
async fn a_copy_older_than_the_store_is_replaced_by_the_newest_snapshot() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let url = format!("file://{}/objects", objects.path().display());
    let (a_data, b_data) = (DataDir::new(), DataDir::new());
    let a = common::store(a_data.path(), 64 << 20);
    let b = common::store(b_data.path(), 64 << 20);
    let on_a = Manager::new(
        Snapshots::open(&url).unwrap(),
        a.clone(),
        ManagerOptions::default(),
    );
    let on_b = Manager::new(
        Snapshots::open(&url).unwrap(),
        b.clone(),
        ManagerOptions::default(),
    );
    let id = env_with_file(&a, "v1");
    on_a.checkpoint_now(&id).await.unwrap();
    // B takes it over, then A does again and changes it: B's copy is now stale.
    assert!(on_b.ensure_local(&id, 0).await.unwrap());
    let a_tree = a.dir_of(&id).unwrap().join(TREE_DIR);
    std::fs::write(a_tree.join("workspace/f.txt"), "v2").unwrap();
    a.mark_modified(&id).unwrap();
    on_a.checkpoint_now(&id).await.unwrap();
    assert!(
        on_b.ensure_local(&id, 0).await.unwrap(),
        "the stale copy was kept"
    );
    b.show(&id).unwrap();
    let b_tree = b.dir_of(&id).unwrap().join(TREE_DIR);
    assert_eq!(
        std::fs::read_to_string(b_tree.join("workspace/f.txt")).unwrap(),
        "v2"
    );
}

#[tokio::test]
async fn a_host_that_does_not_hold_an_environment_writes_no_snapshot_of_it() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let url = format!("file://{}/objects", objects.path().display());
    let data = DataDir::new();
    let envs = common::store(data.path(), 64 << 20);
    let id = env_with_file(&envs, "mine?");
    let manager = Manager::new(
        Snapshots::open(&url).unwrap(),
        envs.clone(),
        ManagerOptions::default(),
    );
    let held = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = held.clone();
    manager.set_gate(std::sync::Arc::new(move |_id: String| {
        let flag = flag.clone();
        Box::pin(async move { flag.load(std::sync::atomic::Ordering::SeqCst).then_some(1) })
    }));
    let err = manager.checkpoint_now(&id).await.unwrap_err();
    assert!(
        matches!(err, hookbox_snapshot::SnapshotError::NotHolder { .. }),
        "{err}"
    );
    // Scheduled ones are dropped too, not retried forever.
    manager.request(&id);
    settled(&manager).await;
    assert_eq!(manager.health().consecutive_failures, 0);
    assert_eq!(manager.snapshots().latest(&id).await.unwrap(), None);
    held.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(manager.checkpoint_now(&id).await.unwrap().seq, Some(1));
}

/// A gate that says this host holds every environment's lease under the fence in `fence`
/// (0: another host holds it).
fn gate(fence: &std::sync::Arc<std::sync::atomic::AtomicU64>) -> hookbox_snapshot::Gate {
    let fence = fence.clone();
    std::sync::Arc::new(move |_id: String| {
        let fence = fence.load(std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { (fence > 0).then_some(fence) })
    })
}

fn read_file(store: &hookbox_environments::environment::Environments, id: &str) -> String {
    std::fs::read_to_string(
        store
            .dir_of(id)
            .unwrap()
            .join(TREE_DIR)
            .join("workspace/f.txt"),
    )
    .unwrap()
}

// Regression (issue 36): a host whose copy the chain moved past must neither upload it nor use
// it again; the newest snapshot replaces it when the host holds the environment again.
#[tokio::test]
async fn a_copy_the_chain_moved_past_is_marked_stale_and_replaced() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let url = format!("file://{}/objects", objects.path().display());
    let (a_data, b_data) = (DataDir::new(), DataDir::new());
    let a = common::store(a_data.path(), 64 << 20);
    let b = common::store(b_data.path(), 64 << 20);
    let on_a = Manager::new(
        Snapshots::open(&url).unwrap(),
        a.clone(),
        ManagerOptions::default(),
    );
    let on_b = Manager::new(
        Snapshots::open(&url).unwrap(),
        b.clone(),
        ManagerOptions::default(),
    );
    let (fence_a, fence_b) = (
        std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
        std::sync::Arc::new(std::sync::atomic::AtomicU64::new(2)),
    );
    on_a.set_gate(gate(&fence_a));
    on_b.set_gate(gate(&fence_b));
    let id = env_with_file(&a, "v1");
    assert_eq!(on_a.checkpoint_now(&id).await.unwrap().seq, Some(1));
    // B holds it (fence 2), restores it and uploads a change.
    assert!(on_b.ensure_local(&id, 2).await.unwrap());
    b.show(&id).unwrap(); // mounts the restored image, as opening it does
    std::fs::write(
        b.dir_of(&id)
            .unwrap()
            .join(TREE_DIR)
            .join("workspace/f.txt"),
        "from-B",
    )
    .unwrap();
    b.mark_modified(&id).unwrap();
    assert_eq!(on_b.checkpoint_now(&id).await.unwrap().seq, Some(2));

    // A holds it again (fence 3) with its old copy, changed since: refused, marked stale, not
    // retried.
    fence_a.store(3, std::sync::atomic::Ordering::SeqCst);
    std::fs::write(
        a.dir_of(&id)
            .unwrap()
            .join(TREE_DIR)
            .join("workspace/f.txt"),
        "stale",
    )
    .unwrap();
    a.mark_modified(&id).unwrap();
    let err = on_a.checkpoint_now(&id).await.unwrap_err();
    assert!(
        matches!(err, hookbox_snapshot::SnapshotError::Stale { .. }),
        "{err}"
    );
    assert!(on_a.is_stale(&id));
    assert!(
        hookbox_snapshot::read_state(&a.dir_of(&id).unwrap())
            .unwrap()
            .stale
    );
    on_a.request(&id);
    settled(&on_a).await;
    assert_eq!(on_a.health().consecutive_failures, 0, "{:?}", on_a.health());
    assert_eq!(on_a.snapshots().latest(&id).await.unwrap(), Some(2));
    // The next open replaces it with the newest snapshot, which A then continues.
    assert!(on_a.ensure_local(&id, 3).await.unwrap());
    assert!(!on_a.is_stale(&id));
    a.show(&id).unwrap();
    assert_eq!(read_file(&a, &id), "from-B");
    std::fs::write(
        a.dir_of(&id)
            .unwrap()
            .join(TREE_DIR)
            .join("workspace/f.txt"),
        "from-A",
    )
    .unwrap();
    a.mark_modified(&id).unwrap();
    assert_eq!(on_a.checkpoint_now(&id).await.unwrap().seq, Some(3));
    // B, which lost the lease meanwhile, cannot upload its copy over A's either.
    std::fs::write(
        b.dir_of(&id)
            .unwrap()
            .join(TREE_DIR)
            .join("workspace/f.txt"),
        "late-B",
    )
    .unwrap();
    b.mark_modified(&id).unwrap();
    fence_b.store(4, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(
        on_b.checkpoint_now(&id).await.unwrap_err(),
        hookbox_snapshot::SnapshotError::Stale { .. }
    ));
    assert_eq!(on_b.snapshots().latest(&id).await.unwrap(), Some(3));
}

// With the store out of reach, a local copy is used only when it is known current under the
// lease held now: the same lease, or the next one (this host's own next process); after any
// other owner it may be older than what that owner wrote, and the store's error stands.
#[tokio::test]
async fn with_the_store_down_only_a_copy_current_under_the_lease_is_used() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let objects = tempfile::tempdir().unwrap();
    let url = format!("file://{}/objects", objects.path().display());
    let data = DataDir::new();
    let envs = common::store(data.path(), 64 << 20);
    let up = Manager::new(
        Snapshots::open(&url).unwrap(),
        envs.clone(),
        ManagerOptions::default(),
    );
    up.set_gate(gate(&std::sync::Arc::new(
        std::sync::atomic::AtomicU64::new(4),
    )));
    let id = env_with_file(&envs, "mine");
    assert_eq!(up.checkpoint_now(&id).await.unwrap().seq, Some(1));
    // Nothing listens on port 1 of loopback: every request fails at once.
    let down = Manager::new(
        Snapshots::open(
            "s3://b/p?endpoint=http://127.0.0.1:1&region=r&access_key_id=k&secret_access_key=s",
        )
        .unwrap(),
        envs.clone(),
        ManagerOptions::default(),
    );
    assert!(!down.ensure_local(&id, 4).await.unwrap());
    assert!(!down.ensure_local(&id, 5).await.unwrap());
    for fence in [6, 3] {
        let err = down.ensure_local(&id, fence).await.unwrap_err();
        assert!(
            matches!(err, hookbox_snapshot::SnapshotError::Store { .. }),
            "{fence}: {err}"
        );
    }
    assert_eq!(
        read_file(&envs, &id),
        "mine",
        "the copy is kept for when the store is back"
    );
    // Back under the store, the copy is current under fence 6 and recorded so.
    assert!(!up.ensure_local(&id, 6).await.unwrap());
    assert!(!down.ensure_local(&id, 7).await.unwrap());
}
