//! An isolated sandbox's network: a namespace of its own (the launcher creates it after the
//! fork, while the init builds the root, and hands it over), owned by the sandbox's user
//! namespace, holding only `lo`, which is up. The same for a cold launch and for every call of
//! a warm sandbox.

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use super::support::*;

const TIMEOUT: Duration = Duration::from_secs(120);
const LIMIT: usize = 64 * 1024;

/// Prints the interfaces, the inode of the network namespace, whether that namespace's owner is
/// the process's own user namespace (`NS_GET_USERNS`), and an echo through a TCP connection to
/// 127.0.0.1 (which needs `lo` up: a down `lo` has no address to bind).
const PROBE: &str = r#"
import fcntl, os, socket
names = sorted(line.split(':')[0].strip() for line in open('/proc/net/dev').readlines()[2:])
print('interfaces', ' '.join(names))
print('netns', os.stat('/proc/self/ns/net').st_ino)
owner = fcntl.ioctl(os.open('/proc/self/ns/net', os.O_RDONLY), 0xb701)
print('owned by own userns', os.fstat(owner).st_ino == os.stat('/proc/self/ns/user').st_ino)
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen(1)
client = socket.create_connection(server.getsockname(), timeout=5)
client.sendall(b'through lo')
print('echo', server.accept()[0].recv(64).decode())
"#;

fn expected(host_netns: u64, stdout: &[u8]) {
    let out = text(stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0], "interfaces lo", "{out}");
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
    assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
    expected(host_netns, &out.stdout);

    let sandbox = warm(&t.spec).await.unwrap();
    for _ in 0..2 {
        let out = warm_call(&sandbox, &t.spec, TIMEOUT, LIMIT).await.unwrap();
        assert!(out.success(), "{:?} {}", out.termination, text(&out.stderr));
        expected(host_netns, &out.stdout);
    }
    stop(sandbox).await;
}
