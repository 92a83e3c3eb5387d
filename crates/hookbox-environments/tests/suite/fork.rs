//! Forks: a copy that diverges without touching the original, frozen hooks kept frozen, and the
//! copy owned by the fork's own uid.

use std::os::unix::fs::MetadataExt;

use hookbox_environments::lifecycle::ToolResult;
use serde_json::json;

use super::common::*;

fn spec(value: serde_json::Value) -> hookbox_environments::source::EnvironmentSpec {
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn a_fork_diverges_without_touching_the_original() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let parent = create(
        &store,
        json!({"sources": [
            {"type": "inline", "target": "workspace/shared.txt", "content": "v1"},
            {"type": "inline", "target": "workspace/deep/a/b.txt", "content": "deep"},
        ], "env": {"GREETING": "hi"}}),
    );
    let parent_env = store.open_env(&parent.id).unwrap();
    bash_ok(&parent_env, "ln -s /workspace/shared.txt /workspace/link").await;
    let child = store
        .fork(&parent.id, &spec(json!({"env": {"GREETING": "hi"}})))
        .unwrap();
    assert_ne!(child.id, parent.id);
    assert_eq!(child.file_count, parent.file_count);
    let child_env = store.open_env(&child.id).unwrap();
    let seen = bash_ok(&child_env, "cat /workspace/shared.txt /workspace/deep/a/b.txt; readlink /workspace/link; echo $GREETING").await;
    assert_eq!(seen["stdout"], "v1deep/workspace/shared.txt\nhi\n");

    // Each side changes; the other does not see it.
    bash_ok(
        &child_env,
        "echo v2 > /workspace/shared.txt; touch /workspace/child-only",
    )
    .await;
    bash_ok(&parent_env, "rm /workspace/deep/a/b.txt").await;
    let parent_view = bash_ok(&parent_env, "cat /workspace/shared.txt; ls /workspace").await;
    assert_eq!(parent_view["stdout"], "v1deep\nlink\nshared.txt\n");
    let child_view = bash_ok(
        &child_env,
        "cat /workspace/shared.txt /workspace/deep/a/b.txt",
    )
    .await;
    assert_eq!(child_view["stdout"], "v2\ndeep");

    // The copy belongs to the fork's own uid, the original keeps its own.
    let tree = |id: &str| data.path().join("environments").join(id).join("root");
    if let (Some(p), Some(c)) = (
        store.show(&parent.id).unwrap().sandbox_uid,
        store.show(&child.id).unwrap().sandbox_uid,
    ) {
        assert_ne!(p, c);
        assert_eq!(
            std::fs::metadata(tree(&child.id).join("workspace/deep/a/b.txt"))
                .unwrap()
                .uid(),
            c
        );
        assert_eq!(
            std::fs::metadata(tree(&parent.id).join("workspace/shared.txt"))
                .unwrap()
                .uid(),
            p
        );
    }
}

#[tokio::test]
async fn forks_of_frozen_environments_keep_the_frozen_snapshot() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let parent = create(
        &store,
        json!({"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": fixture("hooks.json")},
            {"type": "inline", "target": ".agents/hooks-scripts/gate.py", "content": fixture("gate.py")},
        ], "freeze_hooks": true}),
    );
    let child = store.fork(&parent.id, &spec(json!({}))).unwrap();
    assert!(child.frozen_hooks);
    let env = store.open_env(&child.id).unwrap();
    // The gate still runs from the snapshot, and the snapshot is still read-only.
    let denied = env
        .call_tool(call(
            "code_execution",
            json!({"code": "rm -rf /tmp/x", "language": "bash"}),
        ))
        .await;
    assert!(
        matches!(denied.result, ToolResult::Denied { .. }),
        "{:?}",
        denied.result
    );
    let tamper = bash_ok(&env, "echo '{}' > /.agents/hooks.json; echo rc=$?").await;
    assert!(
        tamper["stdout"].as_str().unwrap().contains("rc=1"),
        "{tamper}"
    );
    let still = env
        .call_tool(call(
            "code_execution",
            json!({"code": "rm -rf /tmp/x", "language": "bash"}),
        ))
        .await;
    assert!(matches!(still.result, ToolResult::Denied { .. }));
}

#[tokio::test]
async fn a_fork_with_sources_or_of_a_missing_environment_is_refused_and_leaves_nothing() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let parent = create(&store, json!({"sources": []}));
    let with_sources =
        spec(json!({"sources": [{"type": "inline", "target": "workspace/x", "content": "x"}]}));
    assert!(store.fork(&parent.id, &with_sources).is_err());
    assert!(
        store
            .fork("env_doesnotexist0000", &spec(json!({})))
            .is_err()
    );
    assert_eq!(store.list().unwrap().len(), 1);
}

/// An environment keeps the runtime it was created with, whatever the store's default, and so
/// does its fork (only in the gVisor run of the suite, which has runsc).
#[tokio::test]
async fn an_environment_and_its_fork_keep_their_runtime() {
    use hookbox_sandbox::spec::RuntimeKind;
    if !gvisor() {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut namespaces_default = options();
    namespaces_default.runtime = RuntimeKind::Namespaces;
    let store = store_with(data.path(), namespaces_default);
    let parent = create(&store, json!({"runtime": "gvisor"}));
    assert_eq!(parent.runtime, RuntimeKind::Gvisor);
    let child = store.fork(&parent.id, &spec(json!({}))).unwrap();
    assert_eq!(child.runtime, RuntimeKind::Gvisor);
    let plain = create(&store, json!({}));
    assert_eq!(plain.runtime, RuntimeKind::Namespaces);
    for (id, kernel) in [(&child.id, "gVisor"), (&plain.id, "")] {
        let env = store.open_env(id).unwrap();
        let out = bash_ok(&env, "dmesg 2>/dev/null | head -1; true").await;
        let line = out["stdout"].as_str().unwrap();
        match kernel {
            "" => assert!(!line.contains("gVisor"), "{line}"),
            k => assert!(line.contains(k), "{line}"),
        }
    }
    // gVisor environments hold a range of host ids; a namespaces one never lands inside it.
    let span = u64::from(hookbox_sandbox::gvisor::ID_SPAN);
    for gv in [&parent, &child] {
        let start = u64::from(gv.sandbox_uid.unwrap());
        let other = u64::from(plain.sandbox_uid.unwrap());
        assert!(other < start || other >= start + span);
    }
}
