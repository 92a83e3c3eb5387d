//! Every SSRF form, through the real proxy (CONNECT and absolute-form) with an allowlist of `*`
//! and no operator CIDR: each must be refused before any connection is attempted.
//!
//! The whole test runs inside a network namespace it creates, where the private, link-local
//! and metadata addresses it names live on the namespace's own interface with a listener on
//! each: a broken
//! guard would connect to one of those (and fail the test), never send a packet off this
//! machine.

use std::net::IpAddr;
use std::process::Command;
use std::sync::Arc;

use nix::sched::{CloneFlags, unshare};
use serde_json::json;

use super::support::*;

/// The non-loopback addresses the test names; each gets a sentinel listener in the namespace.
const SENTINELS: &[&str] = &[
    "10.0.0.1",
    "172.16.5.4",
    "192.168.0.1",
    "100.64.1.1",
    "169.254.169.254",
    "93.184.216.34",
    "fd00::1",
];

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `f` on a thread in a new network namespace with `lo` up and [`SENTINELS`] on it (processes started from that thread, like `ip`, are in it too).
fn in_private_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        unshare(CloneFlags::CLONE_NEWNET)
            .expect("this test creates a network namespace (needs root or CAP_NET_ADMIN)");
        ip(&["link", "set", "lo", "up"]);
        // On the namespace's own loopback: this works on kernels without the dummy driver,
        // and nothing on it can leave the namespace.
        for addr in SENTINELS {
            if addr.contains(':') {
                // `nodad`: an IPv6 address is unusable ("tentative", EADDRNOTAVAIL on bind)
                // until duplicate address detection has run, a race the test would lose now
                // and then.
                ip(&["addr", "add", &format!("{addr}/128"), "dev", "lo", "nodad"]);
            } else {
                ip(&["addr", "add", &format!("{addr}/32"), "dev", "lo"]);
            }
        }
        f()
    })
    .join()
    .unwrap()
}

#[test]
fn every_ssrf_form_is_denied() {
    in_private_netns(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(every_ssrf_form_is_denied_here());
    });
}

async fn every_ssrf_form_is_denied_here() {
    let ca = Arc::new(TestCa::new());
    // A live loopback receiver: if any form slipped through, it would be reached.
    let recv = receiver(None).await;
    let port = recv.addr.port();
    // The same port on every other address named here: reaching any of them is a failure.
    // (A connection the kernel completed waits in a listener's backlog, so a non-blocking
    // accept at the end finds it.)
    let mut sentinels = Vec::new();
    for addr in SENTINELS {
        let ip: IpAddr = addr.parse().unwrap();
        let listener = std::net::TcpListener::bind((ip, port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        sentinels.push(listener);
    }
    let mut b = EnvBuilder::new(json!({"allowlist": [{"domain": "*"}]}), ca);
    b.loopback_allowed = false;
    let mut env = b.build();
    // A name resolving to a public and a private address, and one resolving to loopback.
    let mut resolver = hookbox_egress::StaticResolver::default();
    resolver.pins.insert(
        "rebind.test".into(),
        vec![
            "93.184.216.34".parse().unwrap(),
            "10.0.0.1".parse().unwrap(),
        ],
    );
    resolver
        .pins
        .insert("loop.test".into(), vec!["127.0.0.1".parse().unwrap()]);
    resolver.pins.insert(
        "meta.test".into(),
        vec!["::ffff:169.254.169.254".parse().unwrap()],
    );
    let policy = hookbox_egress::policy::NetworkPolicy::from_json(Some(
        &json!({"allowlist": [{"domain": "*"}]}),
    ))
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let store =
        Arc::new(hookbox_egress::credentials::FileCredentialStore::open(data.path()).unwrap());
    let mut cfg = hookbox_egress::EgressConfig::new("env_ssrf", policy, store);
    cfg.resolver = Arc::new(resolver);
    cfg.audit = env.audit.clone();
    env.egress = Arc::new(hookbox_egress::Egress::new(cfg).unwrap());
    let proxy = start_proxy(env.egress.clone()).await;

    let hosts = [
        ("127.0.0.1", "loopback"),
        ("127.1", "loopback"),
        ("2130706433", "loopback"),
        ("0x7f000001", "loopback"),
        ("0x7f.1", "loopback"),
        ("0177.0.0.1", "loopback"),
        ("017700000001", "loopback"),
        ("localhost", "localhost"),
        ("LOCALHOST.", "localhost"),
        ("foo.localhost", "localhost"),
        ("[::1]", "loopback"),
        ("[::]", "unspecified"),
        ("0.0.0.0", "this-network"),
        ("0", "this-network"),
        ("[::ffff:127.0.0.1]", "loopback"),
        ("[::ffff:7f00:1]", "loopback"),
        ("[::127.0.0.1]", "ipv4-compatible"),
        ("[64:ff9b::127.0.0.1]", "loopback"),
        ("[2002:7f00:1::1]", "loopback"),
        ("[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "teredo"),
        ("10.0.0.1", "rfc1918"),
        ("172.16.5.4", "rfc1918"),
        ("192.168.0.1", "rfc1918"),
        ("100.64.1.1", "cgnat"),
        ("169.254.169.254", "link-local"),
        ("0xa9fea9fe", "link-local"),
        ("[::ffff:169.254.169.254]", "link-local"),
        ("[fd00::1]", "ula"),
        ("[fe80::1]", "link-local"),
        ("224.0.0.1", "multicast"),
        ("[ff02::1]", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("rebind.test", "rfc1918"),
        ("loop.test", "loopback"),
        ("meta.test", "link-local"),
        ("256.1.1.1", "invalid-host"),
    ];
    for (host, rule) in hosts {
        let refused = connect_via(proxy, &format!("{host}:{port}"))
            .await
            .unwrap_err();
        assert_eq!(refused.status, 403, "CONNECT {host}");
        assert_eq!(
            refused.rule.as_deref(),
            Some(rule),
            "CONNECT {host}: {}",
            refused.body
        );

        let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let url = format!("http://{host}:{port}/");
        let got = send(tcp, get(&url, "x", &[])).await.unwrap();
        assert_eq!(got.status, 403, "GET {url}");
        assert_eq!(got.rule.as_deref(), Some(rule), "GET {url}");
    }
    assert!(recv.seen.lock().unwrap().is_empty());
    for (sentinel, addr) in sentinels.iter().zip(SENTINELS) {
        let accepted = sentinel.accept();
        assert!(
            matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the proxy connected to {addr}: {accepted:?}"
        );
    }
    assert_eq!(env.audit.denied_rules().len(), 2 * hosts.len());
}
