#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers in a test binary may panic
//! The snapshot manager on real environments and a `file://` store: changes left on disk are
//! uploaded at start-up, only uploaded copies are evicted (and never open ones), an evicted or
//! stale copy is restored from the store.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::DataDir;
use hookbox_sandbox::environment::TREE_DIR;
use hookbox_snapshot::{Manager, ManagerOptions, Snapshots, is_dirty};

fn env_with_file(store: &hookbox_sandbox::environment::Store, content: &str) -> String {
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
    assert!(manager.ensure_local(&uploaded).await.unwrap());
    envs.show(&uploaded).unwrap();
    let tree = envs.dir_of(&uploaded).unwrap().join(TREE_DIR);
    assert_eq!(
        std::fs::read_to_string(tree.join("workspace/f.txt")).unwrap(),
        "one"
    );
    assert!(
        !manager.ensure_local(&uploaded).await.unwrap(),
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
    assert!(on_b.ensure_local(&id).await.unwrap());
    let a_tree = a.dir_of(&id).unwrap().join(TREE_DIR);
    std::fs::write(a_tree.join("workspace/f.txt"), "v2").unwrap();
    a.mark_modified(&id).unwrap();
    on_a.checkpoint_now(&id).await.unwrap();
    assert!(
        on_b.ensure_local(&id).await.unwrap(),
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
        Box::pin(async move { flag.load(std::sync::atomic::Ordering::SeqCst) })
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
