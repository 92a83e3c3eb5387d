//! An isolated sandbox's network: a namespace of its own (the launcher creates it after the
//! fork, while the init builds the root, and hands it over), owned by the sandbox's user
//! namespace, where only `lo` is up. The same for a cold launch and for every call of a warm
//! sandbox. A launch whose init fails reports the init's own failure, whatever the launcher was
//! doing beside it.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use hookbox_sandbox::{SandboxError, Stage};

use super::support::*;

const TIMEOUT: Duration = Duration::from_secs(120);
const LIMIT: usize = 64 * 1024;

/// Prints, one line each (or what went wrong there): the interfaces that are up, the inode of
/// the network namespace, whether that namespace's owner is the process's own user namespace
/// (`NS_GET_USERNS`), and an echo through a TCP connection to 127.0.0.1 (which needs `lo` up: a
/// down `lo` has no address to bind).
const PROBE: &str = r#"
import fcntl, os, socket, struct
def line(name, f):
    try:
        print(name, f())
    except OSError as e:
        print(name, 'failed:', e)
def up():
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    def flags(name):  # SIOCGIFFLAGS
        request = struct.pack('16sH', name.encode(), 0)
        return struct.unpack('16sH', fcntl.ioctl(probe, 0x8913, request))[1]
    return ' '.join(sorted(n for _, n in socket.if_nameindex() if flags(n) & 1))
def owner():
    user = fcntl.ioctl(os.open('/proc/self/ns/net', os.O_RDONLY), 0xb701)
    return os.fstat(user).st_ino == os.stat('/proc/self/ns/user').st_ino
def echo():
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=5)
    client.sendall(b'through lo')
    return server.accept()[0].recv(64).decode()
line('up', up)
line('netns', lambda: os.stat('/proc/self/ns/net').st_ino)
line('owned by own userns', owner)
line('echo', echo)
"#;

fn expected(host_netns: u64, stdout: &[u8]) {
    let out = text(stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0], "up lo", "{out}");
    let netns: u64 = lines[1]
        .strip_prefix("netns ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert_ne!(
        netns, host_netns,
        "the sandbox is in the host's network namespace"
    );
    assert_eq!(lines[2], "owned by own userns True", "{out}");
    assert_eq!(lines[3], "echo through lo", "{out}");
}

#[tokio::test]
async fn an_isolated_sandbox_has_its_own_network_namespace_with_only_lo_up() {
    let host_netns = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
    let t = tree(&["/usr/bin/python3", "-c", PROBE]);

    let out = cold(&t.spec, TIMEOUT, LIMIT).await.unwrap();
    expected(host_netns, &out.stdout);
    assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));

    let sandbox = warm(&t.spec).await.unwrap();
    for _ in 0..2 {
        let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
        expected(host_netns, &out.stdout);
        assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
    }
    stop(sandbox).await;
}

/// The init fails early (a file bound onto a directory) while the launcher makes the network
/// namespace beside it: every time, the one failure reported is the init's, of its own stage,
/// with no line of the launcher's beside it (the launcher, finding the init gone when it hands
/// the namespace over, says nothing).
#[tokio::test]
async fn an_init_failing_beside_the_launcher_reports_only_its_own_failure() {
    let mut t = tree(&["/bin/true"]);
    let source = t.dir.path().join("file");
    std::fs::write(&source, "x").unwrap();
    t.spec.files = vec![hookbox_sandbox::spec::FileBind {
        source,
        target: "/etc".into(),
    }];
    for n in 0..100 {
        let err = cold(&t.spec, TIMEOUT, LIMIT).await.unwrap_err();
        let SandboxError::Launch(failure) = err else {
            panic!("launch {n}: {err}");
        };
        assert_eq!(failure.stage, Stage::Prepare, "launch {n}: {failure:?}");
        assert!(
            !failure.message.trim().contains('\n'),
            "launch {n}: more than one failure: {failure:?}"
        );
    }
}
