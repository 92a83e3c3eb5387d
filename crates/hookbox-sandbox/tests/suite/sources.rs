//! Sources that come from elsewhere: GCS buckets (through object_store's in-memory backend).

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use serde_json::json;

use super::common::*;

#[derive(Debug)]
struct OneBucket(Arc<InMemory>);

impl hookbox_sandbox::source::Buckets for OneBucket {
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
    let bad: hookbox_sandbox::source::EnvironmentSpec = serde_json::from_value(
        json!({"sources": [{"type": "gcs", "bucket": "other", "target": "workspace/x"}]}),
    )
    .unwrap();
    let err = store
        .create(
            &bad,
            hookbox_sandbox::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("no bucket other"), "{err}");
}
