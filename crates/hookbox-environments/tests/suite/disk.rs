//! The per-environment disk cap: the kernel refuses writes past it (ENOSPC), the rest of the
//! host and other environments are unaffected, nothing stored is damaged, and removing the
//! environment leaves no mount behind.

use hookbox_environments::lifecycle::ToolResult;
use serde_json::json;

use super::common::*;

const CAP: u64 = 32 << 20;

fn mounts_under(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|t| std::path::Path::new(t).starts_with(&dir))
        .collect()
}

/// Bytes allocated on the host's filesystem under `path` (images and anything else hookbox
/// wrote there), not crossing into mounted filesystems. Counted per tree rather than as the
/// filesystem's free space, which other processes on a shared machine change too.
fn allocated_on_host(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(path: &std::path::Path, dev: u64) -> u64 {
        let meta = std::fs::symlink_metadata(path).unwrap();
        if meta.dev() != dev {
            return 0;
        }
        let mut total = meta.blocks() * 512;
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).unwrap() {
                total += walk(&entry.unwrap().path(), dev);
            }
        }
        total
    }
    walk(path, std::fs::metadata(path).unwrap().dev())
}

#[tokio::test]
async fn dd_hits_enospc_at_the_cap_and_nothing_else_is_affected() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.disk_limit_bytes = Some(CAP);
    let store = store_with(data.path(), opts);
    let a = create(
        &store,
        json!({"sources": [{"type": "inline", "target": "workspace/keep.txt", "content": "precious"}]}),
    );
    let b = create(&store, json!({"sources": []}));
    assert_eq!(a.disk_limit_bytes, Some(CAP));
    assert_eq!(mounts_under(data.path()).len(), 2);
    let env_a = store.open_env(&a.id).unwrap();
    let env_b = store.open_env(&b.id).unwrap();
    let host_before = allocated_on_host(data.path());

    let filled = bash_ok(
        &env_a,
        "dd if=/dev/zero of=/workspace/fill bs=1M count=256 2>&1; echo \"dd=$?\"; df -B1 --output=size /workspace | tail -1",
    )
    .await;
    let stdout = filled["stdout"].as_str().unwrap();
    assert!(stdout.contains("No space left on device"), "{filled}");
    assert!(stdout.contains("dd=1"), "{filled}");
    let size: u64 = stdout.lines().last().unwrap().trim().parse().unwrap();
    assert!(size <= CAP, "the filesystem is {size} bytes, the cap {CAP}");
    let fill = std::fs::metadata(
        data.path()
            .join("environments")
            .join(&a.id)
            .join("root/workspace/fill"),
    )
    .unwrap()
    .len();
    assert!(fill > CAP / 2 && fill <= CAP, "fill {fill}");
    // The host lost at most the cap (the image is sparse) and other environments still write.
    let used = allocated_on_host(data.path()).saturating_sub(host_before);
    assert!(used <= CAP + (4 << 20), "the host lost {used} bytes");
    // Positive control: the measure sees the fill (in the image's blocks).
    assert!(
        used >= fill / 2,
        "the host lost {used} bytes for a {fill}-byte fill"
    );
    let other = bash_ok(
        &env_b,
        "head -c 4194304 /dev/zero > /workspace/x && echo ok",
    )
    .await;
    assert_eq!(other["stdout"], "ok\n", "{other}");

    // A file tool at the cap fails clearly and leaves the stored file whole.
    let write = env_a
        .call_tool(call(
            "write_to_file",
            json!({"path": "/workspace/keep.txt", "content": "x".repeat(1 << 20)}),
        ))
        .await;
    let ToolResult::Error { error } = &write.result else {
        panic!("{:?}", write.result)
    };
    assert!(error.contains("No space left"), "{error}");
    let kept = bash_ok(&env_a, "cat /workspace/keep.txt").await;
    assert_eq!(kept["stdout"], "precious");

    // Freed space comes back.
    let again = bash_ok(
        &env_a,
        "rm /workspace/fill && head -c 1048576 /dev/zero > /workspace/y && echo ok",
    )
    .await;
    assert_eq!(again["stdout"], "ok\n", "{again}");

    drop((env_a, env_b));
    store.remove(&a.id).unwrap();
    store.remove(&b.id).unwrap();
    assert!(mounts_under(data.path()).is_empty());
}

#[tokio::test]
async fn caps_survive_an_unmount_and_tiny_caps_are_refused() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.disk_limit_bytes = Some(CAP);
    let store = store_with(data.path(), opts);
    let a = create(
        &store,
        json!({"sources": [{"type": "inline", "target": "workspace/keep.txt", "content": "precious"}]}),
    );
    // As after a reboot: nothing mounted; opening mounts the image again with its files.
    let tree = data.path().join("environments").join(&a.id).join("root");
    hookbox_environments::disk::unmount(&tree).unwrap();
    assert!(!tree.join("workspace").exists());
    let env = store.open_env(&a.id).unwrap();
    assert_eq!(
        bash_ok(&env, "cat /workspace/keep.txt").await["stdout"],
        "precious"
    );
    drop(env);

    let spec: hookbox_environments::source::EnvironmentSpec =
        serde_json::from_value(json!({"disk_limit_bytes": 4096})).unwrap();
    let err = store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("too small"), "{err}");
    // Nothing of the refused environment is left.
    assert_eq!(store.list().unwrap().len(), 1);
}
