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
    wait_for_no_mount(data.path());
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

/// An empty environment with the server's default cap (10 GiB) takes at most 1 MB of the
/// host's disk: its image is sparse and mkfs writes no blocks reserved for growing it (with
/// them it took 4.4 MB).
#[test]
fn an_empty_environment_takes_at_most_one_megabyte_of_disk() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.disk_limit_bytes = Some(10 << 30);
    let store = store_with(data.path(), opts);
    let empty = create(&store, json!({"sources": []}));
    let dir = data.path().join("environments").join(&empty.id);
    let image = dir.join(hookbox_environments::disk::IMAGE_FILE);
    // The control: the image is the whole cap long, so its size is not what is measured.
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 10 << 30);
    let used = allocated_on_host(&dir);
    assert!(used <= 1 << 20, "an empty environment takes {used} bytes");
    store.remove(&empty.id).unwrap();
}

/// The loop devices bound to `image` (`/sys/block/loopN/loop/backing_file`).
fn loop_devices_of(image: &std::path::Path) -> Vec<String> {
    let image = image.canonicalize().unwrap();
    std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("loop/backing_file"))
                .is_ok_and(|f| std::path::Path::new(f.trim()) == image)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits until `image` has no loop device (the kernel detaches an auto-clearing loop device
/// as its last user goes, which may finish just after the unmount returns). The bound is
/// only reached by a device that is never released.
/// A closed disk is unmounted at once, or by a short retry when a process being spawned still
/// shared its descriptors: waits for that, bounded.
fn wait_for_no_mount(root: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !mounts_under(root).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} still has mounts {:?}",
            root.display(),
            mounts_under(root)
        );
        std::thread::yield_now();
    }
}

fn wait_for_no_loop_device(image: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !loop_devices_of(image).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} still has loop devices {:?}",
            image.display(),
            loop_devices_of(image)
        );
        std::thread::yield_now();
    }
}

/// An environment closed by the last process that had it open holds no mount and no loop
/// device; opening it again mounts its disk with every file it had.
#[tokio::test]
async fn a_closed_environment_holds_no_mount_or_loop_device_and_reopens_with_its_files() {
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
    let dir = data.path().join("environments").join(&a.id);
    let image = dir.join(hookbox_environments::disk::IMAGE_FILE);
    let env = store.open_env(&a.id).unwrap();
    // The controls: while open, the disk is mounted on a loop device.
    assert_eq!(mounts_under(data.path()).len(), 1);
    assert_eq!(loop_devices_of(&image).len(), 1);
    bash_ok(&env, "echo written-inside > /workspace/new.txt").await;
    drop(env);
    wait_for_no_mount(data.path());
    wait_for_no_loop_device(&image);

    let env = store.open_env(&a.id).unwrap();
    assert_eq!(mounts_under(data.path()).len(), 1);
    let both = bash_ok(&env, "cat /workspace/keep.txt /workspace/new.txt").await;
    assert_eq!(both["stdout"], "preciouswritten-inside\n", "{both}");
    drop(env);
    wait_for_no_mount(data.path());
    wait_for_no_loop_device(&image);
}

/// Two opens of one environment (in one process or two) share its disk: closing one leaves it
/// mounted for the other, and the last close unmounts it.
#[tokio::test]
async fn the_disk_stays_mounted_until_the_last_open_closes() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.disk_limit_bytes = Some(CAP);
    let store = store_with(data.path(), opts);
    let a = create(&store, json!({"sources": []}));
    let first = store.open_env(&a.id).unwrap();
    let second = store.open_env(&a.id).unwrap();
    drop(first);
    assert_eq!(mounts_under(data.path()).len(), 1);
    let wrote = bash_ok(
        &second,
        "echo still-here > /workspace/x && cat /workspace/x",
    )
    .await;
    assert_eq!(wrote["stdout"], "still-here\n", "{wrote}");
    drop(second);
    wait_for_no_mount(data.path());
    // And its file was on the disk, not on the directory under it.
    let again = store.open_env(&a.id).unwrap();
    assert_eq!(
        bash_ok(&again, "cat /workspace/x").await["stdout"],
        "still-here\n"
    );
}

/// A disk left mounted on close (a one-shot `hookbox tool`) is unmounted by the idle sweep once
/// idle long enough, never while any open holds it, and never before it is idle; the cgroups
/// the one-shot close left go with it.
#[tokio::test]
async fn a_disk_kept_mounted_is_unmounted_when_idle_and_never_while_open() {
    if !hookbox_test_require::root("loop-mounted disk images") {
        return;
    }
    let data = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.disk_limit_bytes = Some(CAP);
    opts.unmount_when_closed = false;
    // As `hookbox tool` opens it: the close does not wait for the launcher's exit.
    opts.one_shot = true;
    let store = store_with(data.path(), opts);
    let a = create(&store, json!({"sources": []}));
    let image = data
        .path()
        .join("environments")
        .join(&a.id)
        .join(hookbox_environments::disk::IMAGE_FILE);
    let none = std::collections::HashSet::new();
    let env = store.open_env(&a.id).unwrap();
    let cgroups = env.runner().spec(vec!["/bin/true".into()]).unwrap().cgroups;
    bash_ok(&env, "echo kept > /workspace/k").await;
    // Held: the sweep leaves it, however idle it looks.
    assert_eq!(store.unmount_idle(std::time::Duration::ZERO, &none), 0);
    assert_eq!(mounts_under(data.path()).len(), 1);
    drop(env);
    // Closed, kept mounted; not idle for an hour yet.
    assert_eq!(mounts_under(data.path()).len(), 1);
    assert_eq!(
        store.unmount_idle(std::time::Duration::from_secs(3600), &none),
        0
    );
    assert_eq!(mounts_under(data.path()).len(), 1);
    // A one-shot close returns before its launcher has left the cgroups; once it has (waited
    // for, bounded), nothing holds them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while cgroups.iter().any(|d| {
        std::fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty())
    }) {
        assert!(
            std::time::Instant::now() < deadline,
            "the launcher never left {cgroups:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Idle past the limit: unmounted, its loop device released, its leftover cgroups removed,
    // its files kept.
    assert_eq!(store.unmount_idle(std::time::Duration::ZERO, &none), 1);
    wait_for_no_mount(data.path());
    wait_for_no_loop_device(&image);
    for dir in &cgroups {
        assert!(
            !dir.exists(),
            "{} is left after the idle sweep",
            dir.display()
        );
    }
    let env = store.open_env(&a.id).unwrap();
    assert_eq!(bash_ok(&env, "cat /workspace/k").await["stdout"], "kept\n");
}
