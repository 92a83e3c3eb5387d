//! A warm sandbox's launcher started before its spec is known ([`hookbox_sandbox::early`]):
//! handed a spec, however long, it builds the sandbox the spec describes, whose calls run as in
//! one spawned with it; waiting, it holds only the descriptors it was given; not handed one (a
//! spec it cannot build, a slot dropped, another launcher asked for), it is killed and reaped,
//! and the sandbox is spawned as usual.
//!
//! Which launcher built the sandbox is seen from the host: the early launcher's process is
//! alive while its sandbox is (a launcher lives as long as its sandbox's init), and gone, reaped,
//! once it was not used (a process not reaped stays in `/proc` as a zombie).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hookbox_sandbox::early::EarlySlot;
use hookbox_sandbox::runtime::Launcher;
use hookbox_sandbox::spec::{Network, SPEC_FD, STATUS_FD, WARM_FD};
use hookbox_sandbox::warm::WarmSandbox;

use super::support::*;

const LIMIT: usize = 64 * 1024;
const TIMEOUT: Duration = Duration::from_secs(120);

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The warm sandbox of `spec` (joining `netns`), built by an early launcher, and that
/// launcher's pid.
async fn built_early(
    spec: &hookbox_sandbox::spec::LaunchSpec,
    netns: Option<Arc<std::os::fd::OwnedFd>>,
) -> (WarmSandbox, u32) {
    let (key, _) = spec.split_call();
    let (early, pid) = started();
    let sandbox = WarmSandbox::start_with(&launcher(), key, netns, Some(early))
        .await
        .unwrap();
    assert_eq!(
        sandbox.launcher_pid(),
        Some(pid),
        "built by the early launcher"
    );
    (sandbox, pid)
}

/// An early launcher of [`launcher`] from a slot, and its pid.
fn started() -> (hookbox_sandbox::early::EarlyLauncher, u32) {
    let slot = EarlySlot::default();
    slot.fill(&launcher());
    let early = slot
        .take(&launcher())
        .expect("the slot holds the early launcher");
    let pid = early.pid();
    (early, pid)
}

#[tokio::test]
async fn an_early_launcher_handed_its_spec_builds_the_sandbox_and_runs_its_calls() {
    let t = tree(&[
        "/bin/sh",
        "-c",
        "echo \"$0 ran\"; cat /proc/1/cmdline | tr '\\0' ' '",
    ]);
    let (sandbox, pid) = built_early(&t.spec, None).await;
    for _ in 0..2 {
        let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
        let stdout = text(&out.stdout);
        assert!(stdout.starts_with("/bin/sh ran\n"), "{stdout}");
        // The call's PID 1 is the warm init, a fork of the launcher.
        assert!(stdout.contains(LAUNCHER), "{stdout}");
    }
    stop(sandbox).await;
    assert!(
        !alive(pid),
        "the launcher exits (and is reaped) with its sandbox"
    );
}

#[tokio::test]
async fn a_long_spec_is_handed_whole() {
    let mut t = tree(&["/bin/sh", "-c", "echo built"]);
    // Entries under /etc that do not exist are skipped: they only lengthen the spec, far past
    // one message or a pipe's capacity.
    t.spec
        .etc_entries
        .extend((0..20_000).map(|i| format!("hookbox-test-absent-{i:05}-{}", "x".repeat(40))));
    assert!(serde_json::to_vec(&t.spec.split_call().0).unwrap().len() > 1 << 20);
    let (sandbox, _) = built_early(&t.spec, None).await;
    let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
    assert_eq!(text(&out.stdout), "built\n", "{}", text(&out.stderr));
    stop(sandbox).await;
}

#[tokio::test]
async fn a_spec_it_cannot_build_is_not_handed_and_the_launcher_is_spawned_instead() {
    let t = tree(&["/bin/sh", "-c", "echo spawned"]);
    let (key, _) = t.spec.split_call();
    // A cold spec: its launcher needs the program's stdio where an early one has /dev/null
    // (`hand`'s own test covers the other refusals).
    let mut cold = key.clone();
    cold.warm = false;
    let (early, pid) = started();
    assert!(
        WarmSandbox::start_with(&launcher(), cold, None, Some(early))
            .await
            .is_err(),
        "a warm sandbox needs a warm spec"
    );
    assert!(!alive(pid), "refused: killed and reaped");
}

#[tokio::test]
async fn a_network_namespace_to_join_comes_with_the_spec() {
    if !hookbox_test_require::root("a network namespace of the test's own (unshare as root)") {
        return;
    }
    let namespace = std::thread::spawn(|| {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        std::fs::File::open("/proc/thread-self/ns/net").unwrap()
    })
    .join()
    .unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&namespace.metadata().unwrap());
    let netns = Arc::new(std::os::fd::OwnedFd::from(namespace));
    let mut t = tree(&["/bin/sh", "-c", "readlink /proc/self/ns/net"]);
    t.spec.network = Network::Join;
    let (sandbox, _) = built_early(&t.spec, Some(netns)).await;
    let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("net:[{inode}]\n"),
        "{}",
        text(&out.stderr)
    );
    stop(sandbox).await;
}

#[test]
fn a_waiting_early_launcher_holds_only_its_agreed_descriptors() {
    // One of ours without close-on-exec (as a library might leave one) reaches the launcher's
    // exec, and must be closed before it waits.
    let null = std::fs::File::open("/dev/null").unwrap();
    // Above the agreed numbers, where spawning the launcher does not cover it.
    let stray = rustix::io::fcntl_dupfd_cloexec(&null, 100).unwrap();
    rustix::io::fcntl_setfd(&stray, rustix::io::FdFlags::empty()).unwrap();
    let stray_fd = std::os::fd::AsRawFd::as_raw_fd(&stray);
    let (early, pid) = started();
    drop(stray);
    // Once it waits for its spec (in recvmsg on fd 3), its descriptors are what it was given.
    let recvmsg = format!("{} 0x3 ", libc::SYS_recvmsg);
    wait_until_blocked_in(
        pid,
        &recvmsg,
        Duration::from_secs(30),
        "waiting for its spec",
    );
    let mut fds: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    fds.sort();
    assert_eq!(
        fds,
        [0, 1, 2, SPEC_FD, STATUS_FD, WARM_FD],
        "{stray_fd} was ours"
    );
    drop(early);
    assert!(!alive(pid));
}

#[test]
fn an_unused_early_launcher_is_killed_and_reaped() {
    // Dropped with its slot.
    let slot = EarlySlot::default();
    slot.fill(&launcher());
    let first = slot.pid().unwrap();
    assert!(alive(first));
    drop(slot);
    assert!(!alive(first), "dropped with its slot");
    // Replaced by another.
    let slot = EarlySlot::default();
    slot.fill(&launcher());
    let replaced = slot.pid().unwrap();
    slot.fill(&launcher());
    let second = slot.pid().unwrap();
    assert_ne!(replaced, second);
    assert!(!alive(replaced), "replaced");
    // Taken, then dropped.
    let taken = slot.take(&launcher()).unwrap();
    assert_eq!(taken.pid(), second);
    assert!(slot.pid().is_none(), "taken out of the slot");
    drop(taken);
    assert!(!alive(second), "taken and dropped");
    // Asked for by another launcher: the slot's is not that one's, and goes.
    slot.fill(&launcher());
    let other = slot.pid().unwrap();
    assert!(slot.take(&Launcher::standalone("/bin/true")).is_none());
    assert!(slot.pid().is_none(), "the slot was emptied");
    assert!(!alive(other), "not that launcher's: killed and reaped");
}
