//! Sources that come from elsewhere: GCS buckets, through object_store's in-memory backend and,
//! when scripts/test.sh runs the ignored test, a real GCS-compatible server.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use serde_json::json;

use super::common::*;

#[derive(Debug)]
struct OneBucket(Arc<InMemory>);

impl hookbox_environments::source::Buckets for OneBucket {
    fn bucket(&self, name: &str) -> Result<Arc<dyn ObjectStore>, String> {
        if name == "corp-data" {
            Ok(self.0.clone())
        } else {
            Err(format!("no bucket {name}"))
        }
    }
}

#[tokio::test]
async fn gcs_objects_under_the_prefix_are_copied_under_the_target() {
    let bucket = Arc::new(InMemory::new());
    for (key, body) in [
        ("exports/a.json", "{\"a\":1}"),
        ("exports/nested/b.txt", "bee"),
        ("private/secret.txt", "not exported"),
    ] {
        bucket
            .put(&ObjectPath::from(key), body.as_bytes().to_vec().into())
            .await
            .unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let guard = store_with(data.path(), options());
    let store = guard.0.clone().with_buckets(Arc::new(OneBucket(bucket)));
    let spec = json!({"sources": [{"type": "gcs", "bucket": "corp-data", "prefix": "exports/", "target": "workspace/data"}]});
    let meta = tokio::task::spawn_blocking({
        let store = store.clone();
        move || create(&store, spec)
    })
    .await
    .unwrap();
    let tree = data
        .path()
        .join("environments")
        .join(&meta.id)
        .join("root/workspace/data");
    assert_eq!(
        std::fs::read_to_string(tree.join("a.json")).unwrap(),
        "{\"a\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.join("nested/b.txt")).unwrap(),
        "bee"
    );
    assert!(!tree.join("secret.txt").exists() && !tree.join("private").exists());
    assert_eq!(meta.file_count, 2);

    // An unknown bucket fails the whole creation.
    let bad: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(
        json!({"sources": [{"type": "gcs", "bucket": "other", "target": "workspace/x"}]}),
    )
    .unwrap();
    let err = store
        .create(
            &bad,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("no bucket other"), "{err}");
}

/// A bucket on a real GCS-compatible server, as `gcs` sources read it in production: the
/// default [`hookbox_environments::source::GcsFromEnv`] (object_store's GCS client configured from
/// the `GOOGLE_*` variables), against fake-gcs-server from `scripts/objectstore.sh start --gcs`.
#[tokio::test]
#[ignore = "needs a GCS-compatible server: GOOGLE_SERVICE_ACCOUNT, GOOGLE_ALLOW_HTTP and HOOKBOX_TEST_GCS_BUCKET (scripts/test.sh starts one with scripts/objectstore.sh start --gcs)"]
async fn gcs_sources_are_read_from_a_gcs_server() {
    let bucket_name = std::env::var("HOOKBOX_TEST_GCS_BUCKET").expect(
        "HOOKBOX_TEST_GCS_BUCKET (and GOOGLE_SERVICE_ACCOUNT from scripts/objectstore.sh start --gcs)",
    );
    let bucket = object_store::gcp::GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(&bucket_name)
        .build()
        .unwrap();
    // A prefix of this run's own, so runs sharing the server never see each other's objects.
    let prefix = format!("sources-{:016x}", rand::random::<u64>());
    let binary: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    for (key, body) in [
        ("exports/a.json", b"{\"a\":1}".to_vec()),
        ("exports/nested/deeper/b.txt", b"bee".to_vec()),
        ("exports/blob.bin", binary.clone()),
        ("private/secret.txt", b"not exported".to_vec()),
    ] {
        bucket
            .put(&ObjectPath::from(format!("{prefix}/{key}")), body.into())
            .await
            .unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let spec = json!({"sources": [{"type": "gcs", "bucket": bucket_name, "prefix": format!("{prefix}/exports/"), "target": "workspace/data"}]});
    let meta = tokio::task::spawn_blocking({
        let store = store.0.clone();
        move || create(&store, spec)
    })
    .await
    .unwrap();
    let tree = data
        .path()
        .join("environments")
        .join(&meta.id)
        .join("root/workspace/data");
    assert_eq!(
        std::fs::read_to_string(tree.join("a.json")).unwrap(),
        "{\"a\":1}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.join("nested/deeper/b.txt")).unwrap(),
        "bee"
    );
    assert_eq!(std::fs::read(tree.join("blob.bin")).unwrap(), binary);
    assert!(!tree.join("secret.txt").exists() && !tree.join("private").exists());
    assert_eq!(meta.file_count, 3);

    // A bucket the server does not have fails the whole creation, naming it.
    let missing = format!("{bucket_name}-missing-{:08x}", rand::random::<u32>());
    let bad: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(
        json!({"sources": [{"type": "gcs", "bucket": missing, "prefix": "x/", "target": "workspace/x"}]}),
    )
    .unwrap();
    let err = tokio::task::spawn_blocking({
        let store = store.0.clone();
        move || {
            store.create(
                &bad,
                hookbox_environments::source::SourceOrigin::Operator,
                &mut |_| {},
                false,
            )
        }
    })
    .await
    .unwrap()
    .unwrap_err();
    assert!(
        err.to_string().contains(&format!("gcs gs://{missing}/x/")),
        "{err}"
    );
}
