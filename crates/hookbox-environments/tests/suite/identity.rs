//! Sandboxed root is not host root: it maps to an unprivileged host uid that owns the
//! environment's tree, so it holds no capability over host-owned files, even ones placed in
//! its own tree; hook commands run under the same mapping.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use hookbox_environments::lifecycle::ToolResult;
use serde_json::json;

use super::common::*;

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The host uid sandboxed root must map to in a raw test layout.
fn expected_host_uid() -> u32 {
    match test_identity() {
        Some(identity) => identity.uid,
        None => rustix::process::geteuid().as_raw(),
    }
}

#[tokio::test]
async fn sandboxed_root_maps_to_an_unprivileged_host_uid() {
    let env = env();
    if gvisor() {
        // gVisor's /proc shows its own id maps; the host's view of what root and uid 1000 write
        // is the mapping: the environment's uid, and the same plus 1000 (a range, see
        // hookbox_sandbox::gvisor::ID_SPAN).
        let out = sh(
            &env,
            "id -u; touch /workspace/by-root; touch /workspace/by-1000; chown 1000:1000 /workspace/by-1000",
        )
        .await;
        assert_eq!(text(&out.stdout), "0\n", "{}", text(&out.stderr));
        let owner = |name: &str| {
            let meta = std::fs::metadata(env.dir.path().join("root/workspace").join(name)).unwrap();
            (meta.uid(), meta.gid())
        };
        let host = expected_host_uid();
        assert_eq!(owner("by-root"), (host, host));
        assert_eq!(owner("by-1000"), (host + 1000, host + 1000));
        assert_ne!(host, 0, "sandboxed root must not be host root");
        return;
    }
    let out = sh(&env, "cat /proc/self/uid_map /proc/self/gid_map; id -u").await;
    let text = text(&out.stdout);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let host = expected_host_uid().to_string();
    assert_eq!(lines[0], ["0", host.as_str(), "1"], "{text}");
    assert_eq!(lines[1], ["0", host.as_str(), "1"], "{text}");
    assert_eq!(lines[2], ["0"], "root inside: {text}");
    if running_as_root() {
        assert_ne!(
            expected_host_uid(),
            0,
            "sandboxed root must not be host root"
        );
    }
}

#[tokio::test]
async fn a_root_owned_0600_file_in_the_tree_cannot_be_read_or_taken_over() {
    // Unprivileged hookbox: the sandbox is that uid, which owns what it writes anyway, so there
    // is nothing to prove there.
    if !hookbox_test_require::root("a root-owned file and a range of host uids") {
        return;
    }
    let env = env();
    let secret = env.dir.path().join("root/workspace/host-secret");
    std::fs::write(&secret, "host root's secret").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(std::fs::metadata(&secret).unwrap().uid(), 0);

    let out = sh(
        &env,
        "cat /workspace/host-secret; echo \"cat=$?\"; \
         chmod 644 /workspace/host-secret; echo \"chmod=$?\"; \
         chown 0:0 /workspace/host-secret; echo \"chown=$?\"; \
         cp /workspace/host-secret /tmp/copy; echo \"cp=$?\"",
    )
    .await;
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("secret"), "{stdout}");
    // gVisor answers chmod and chown from its own view of the file; the host file is unchanged
    // (checked below) and stays unreadable (cp, after them, fails).
    let ops: &[&str] = if gvisor() {
        &["cat", "cp"]
    } else {
        &["cat", "chmod", "chown", "cp"]
    };
    for op in ops {
        assert!(
            stdout.contains(&format!("{op}=1")),
            "{op} must fail: {stdout} / {}",
            text(&out.stderr)
        );
    }
    assert!(text(&out.stderr).contains("Permission denied"));
    // Nothing changed on the host.
    let meta = std::fs::metadata(&secret).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o600));
}

#[tokio::test]
async fn chown_to_host_meaningful_ids_fails() {
    let env = env();
    let out = sh(
        &env,
        "echo x > /workspace/mine; \
         chown 1000:1000 /workspace/mine; echo \"user=$?\"; \
         chown 65534 /workspace/mine; echo \"nobody=$?\"; \
         chown 0:0 /workspace/mine; echo \"own=$?\"",
    )
    .await;
    let stdout = text(&out.stdout);
    if gvisor() {
        // gVisor maps a range: ids 1000 and 65534 inside are the environment's uid plus 1000
        // and 65534 on the host, never the host's own 1000 or nobody (see the test above).
        assert!(
            stdout.contains("user=0") && stdout.contains("nobody=0"),
            "{stdout}"
        );
    } else {
        assert!(stdout.contains("user=1"), "{stdout}");
        assert!(stdout.contains("nobody=1"), "{stdout}");
        assert!(text(&out.stderr).contains("Invalid argument"));
    }
    assert!(stdout.contains("own=0"), "{stdout}");
    // On the host the file belongs to the sandbox's uid, nobody else.
    let meta = std::fs::metadata(env.dir.path().join("root/workspace/mine")).unwrap();
    assert_eq!(meta.uid(), expected_host_uid());
}

const UID_HOOK: &str = r#"{"who": {"pre_tool_execution": [{"matcher": ".*", "hooks": [
  {"type": "command", "command": "cat /proc/self/uid_map > /tmp/hook-uid-map; touch /workspace/from-hook"}]}]}}"#;

#[tokio::test]
async fn environments_own_their_tree_and_hooks_run_under_the_same_mapping() {
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"sources": [
            {"type": "inline", "target": ".agents/hooks.json", "content": UID_HOOK},
            {"type": "inline", "target": "workspace/deep/dir/file.txt", "content": "hi"},
        ]}),
    );
    let tree = data.path().join("environments").join(&meta.id).join("root");
    let expected = if running_as_root() {
        let uid = meta
            .sandbox_uid
            .expect("root hookbox gives environments a uid");
        assert_ne!(uid, 0);
        uid
    } else {
        assert_eq!(meta.sandbox_uid, None);
        rustix::process::geteuid().as_raw()
    };
    // Sources (and the directories created for them) belong to the sandbox's uid.
    for path in [
        "",
        "workspace",
        "workspace/deep/dir",
        "workspace/deep/dir/file.txt",
        ".agents/hooks.json",
    ] {
        assert_eq!(
            std::fs::metadata(tree.join(path)).unwrap().uid(),
            expected,
            "{path}"
        );
    }

    let env = store.open_env(&meta.id).unwrap();
    let outcome = env
        .call_tool(call(
            "write_to_file",
            json!({"path": "/workspace/new/by-tool.txt", "content": "x"}),
        ))
        .await;
    assert!(
        matches!(outcome.result, ToolResult::Ok { .. }),
        "{:?}",
        outcome.result
    );
    for path in [
        "workspace/new",
        "workspace/new/by-tool.txt",
        "workspace/from-hook",
    ] {
        assert_eq!(
            std::fs::metadata(tree.join(path)).unwrap().uid(),
            expected,
            "{path}"
        );
    }
    // The file the tool wrote on the host is the sandbox's own: it can append to it.
    let appended = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo more >> /workspace/new/by-tool.txt && cat /workspace/new/by-tool.txt", "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &appended.result else {
        panic!("{:?}", appended.result)
    };
    let output = output.json();
    assert_eq!(output["exit_code"], 0, "{output}");

    // (Under gVisor /proc shows gVisor's own map; the owner of `from-hook` above is the check.)
    if !gvisor() {
        let map = std::fs::read_to_string(tree.join("tmp/hook-uid-map")).unwrap();
        let fields: Vec<&str> = map.split_whitespace().collect();
        assert_eq!(fields, ["0", expected.to_string().as_str(), "1"], "{map}");
    }
}

#[tokio::test]
async fn environments_get_distinct_uids() {
    if !hookbox_test_require::root("a range of host uids") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let uids: std::collections::HashSet<u32> = (0..8)
        .map(|_| create(&store, json!({"sources": []})).sandbox_uid.unwrap())
        .collect();
    assert_eq!(uids.len(), 8);
}

#[tokio::test]
async fn an_environment_from_before_uid_mapping_gets_a_uid_on_first_open() {
    if !hookbox_test_require::root("a range of host uids") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut old_options = options();
    old_options.identities = None;
    let old = store_with(data.path(), old_options);
    let meta = create(
        &old,
        json!({"sources": [{"type": "inline", "target": "workspace/old.txt", "content": "kept"}]}),
    );
    assert_eq!(meta.sandbox_uid, None);
    let tree = data.path().join("environments").join(&meta.id).join("root");
    assert_eq!(
        std::fs::metadata(tree.join("workspace/old.txt"))
            .unwrap()
            .uid(),
        0
    );
    // Forget the old store without removing its environment.
    std::mem::forget(old);

    let store = store_with(data.path(), options());
    let env = store.open_env(&meta.id).unwrap();
    let uid = store
        .show(&meta.id)
        .unwrap()
        .sandbox_uid
        .expect("recorded on open");
    assert_ne!(uid, 0);
    assert_eq!(
        std::fs::metadata(tree.join("workspace/old.txt"))
            .unwrap()
            .uid(),
        uid
    );
    let out = env
        .call_tool(call(
            "code_execution",
            json!({"code": "echo more >> /workspace/old.txt && cat /workspace/old.txt", "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &out.result else {
        panic!("{:?}", out.result)
    };
    let output = output.json();
    assert_eq!(output["stdout"], "keptmore\n", "{output}");
    // Reopening keeps the same uid.
    drop(env);
    store.open_env(&meta.id).unwrap();
    assert_eq!(store.show(&meta.id).unwrap().sandbox_uid, Some(uid));
}

/// Environments made before the uid claim files existed keep their uids to themselves: the
/// claims are entered from their metadata before a new uid is picked, and removing an
/// environment frees its uid.
#[tokio::test]
async fn environments_made_before_uid_claims_keep_their_uids_to_themselves() {
    if !hookbox_test_require::root("a range of host uids") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    // Room for exactly one environment of the runtime under test.
    let mut one_uid = options();
    one_uid.identities = Some(hookbox_environments::runner::UidRange {
        first: 1_050_000_000,
        count: if gvisor() {
            hookbox_sandbox::gvisor::ID_SPAN
        } else {
            1
        },
    });
    let store = store_with(data.path(), one_uid);
    let first = create(&store, json!({"sources": []}));
    assert_eq!(first.sandbox_uid, Some(1_050_000_000));
    // As a data dir from before the claim files.
    std::fs::remove_dir_all(data.path().join("environments/.uids")).unwrap();
    let spec: hookbox_environments::source::EnvironmentSpec =
        serde_json::from_value(json!({"sources": []})).unwrap();
    let err = store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("no free sandbox uid"), "{err}");
    store.remove(&first.id).unwrap();
    assert_eq!(
        create(&store, json!({"sources": []})).sandbox_uid,
        Some(1_050_000_000)
    );
}
