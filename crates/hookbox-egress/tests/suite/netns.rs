//! The kernel, not proxy variables, keeps sandbox programs in: a network namespace the test
//! creates (loopback only) with the proxy's listener inside it. A program in the namespace gets
//! out through the proxy; one that ignores the proxy is refused at once.

use std::io::ErrorKind;
use std::net::TcpStream as StdTcpStream;
use std::os::fd::{AsFd as _, OwnedFd};
use std::process::Command;

use hookbox_egress::netns::listener_in_new_netns;
use nix::sched::{CloneFlags, setns};
use serde_json::json;
use std::os::unix::process::CommandExt as _;
use std::sync::Arc;

use super::support::*;

/// Runs `f` on a thread that has joined `ns`.
fn in_netns<T: Send + 'static>(ns: &OwnedFd, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.try_clone().unwrap();
    std::thread::spawn(move || {
        setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_proxy_leads_out_of_the_namespace() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let port = recv.addr.port();
    let env = EnvBuilder::new(json!({"allowlist": [{"domain": "recv.test"}]}), ca)
        .pin("recv.test")
        .build();
    let (ns, listener) = listener_in_new_netns("127.0.0.1:0".parse().unwrap()).unwrap();
    let proxy_addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(hookbox_egress::EgressProxy::new(env.egress.clone()).serve(listener));

    // The proxy's address is not reachable from the host namespace...
    let host_side = StdTcpStream::connect(proxy_addr);
    // ...unless something else happens to listen there; it must not be our proxy either way.
    if let Ok(mut s) = host_side {
        use std::io::{Read, Write};
        s.write_all(b"CONNECT recv.test:1 HTTP/1.1\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        assert!(!String::from_utf8_lossy(&buf[..n]).contains("hookbox"));
    }

    // The namespace has no interface but lo and no route: no path out, DNS included.
    let (dev, route, route6) = in_netns(&ns, || {
        (
            std::fs::read_to_string("/proc/thread-self/net/dev").unwrap(),
            std::fs::read_to_string("/proc/thread-self/net/route").unwrap(),
            std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default(),
        )
    });
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, vec!["lo"], "{dev}");
    assert_eq!(
        route.lines().count(),
        1,
        "IPv4 routes besides the header: {route}"
    );
    assert!(route6.lines().all(|l| l.ends_with("lo")), "{route6}");

    // Bypassing the proxy from inside: direct connections to the host's receiver fail at once.
    let target = recv.addr;
    let direct = in_netns(&ns, move || StdTcpStream::connect(target).map(|_| ()));
    assert_eq!(direct.unwrap_err().kind(), ErrorKind::ConnectionRefused);
    let v6 = in_netns(&ns, move || {
        StdTcpStream::connect(("::1", port)).map(|_| ())
    });
    assert!(v6.is_err());

    // Through the proxy, from inside the namespace: the allowed receiver answers.
    let got = in_netns(&ns, move || {
        use std::io::{Read, Write};
        let mut s = StdTcpStream::connect(proxy_addr).unwrap();
        write!(s, "GET http://recv.test:{port}/inside HTTP/1.1\r\nHost: recv.test\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    });
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(got.ends_with("hello from /inside"), "{got}");
    assert_eq!(recv.seen.lock().unwrap().len(), 1);
}

/// The same with real programs: curl in the namespace through the proxy, and curl ignoring the
/// proxy variables (`--noproxy '*'`), which is refused. Fails where curl is not installed
/// (unless HOOKBOX_TEST_ALLOW_SKIP=1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_in_the_namespace_cannot_bypass_the_proxy() {
    if !hookbox_test_require::program("curl", "a real program in the namespace") {
        return;
    }
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let port = recv.addr.port();
    let env = EnvBuilder::new(json!({"allowlist": [{"domain": "recv.test"}]}), ca)
        .pin("recv.test")
        .build();
    let (ns, listener) = listener_in_new_netns("127.0.0.1:0".parse().unwrap()).unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(hookbox_egress::EgressProxy::new(env.egress.clone()).serve(listener));

    let curl = |args: Vec<String>| {
        let ns = ns.try_clone().unwrap();
        let env_vars = hookbox_egress::env_vars::sandbox_env(&proxy_url, "/nonexistent.pem");
        tokio::task::spawn_blocking(move || {
            let mut cmd = Command::new("curl");
            cmd.args(["-sS", "--max-time", "10"])
                .args(args)
                .env_clear()
                .envs(env_vars);
            output_in_netns(&ns, cmd)
        })
    };
    let ok = curl(vec![format!("http://recv.test:{port}/via-proxy")])
        .await
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(ok.stdout, b"hello from /via-proxy");

    let denied = curl(vec![
        "-o".into(),
        "/dev/null".into(),
        "-w".into(),
        "%{http_code}".into(),
        format!("http://127.0.0.1:{port}/"),
    ])
    .await
    .unwrap();
    assert_eq!(denied.stdout, b"403");

    let bypass = curl(vec![
        "--noproxy".into(),
        "*".into(),
        format!("http://127.0.0.1:{port}/bypass"),
    ])
    .await
    .unwrap();
    // curl exit 7: failed to connect (ECONNREFUSED inside the namespace).
    assert_eq!(bypass.status.code(), Some(7), "{bypass:?}");
    let paths: Vec<String> = recv
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(paths, vec!["/via-proxy"]);
}

/// A real program in the namespace, configured only through the sandbox variables
/// (`HTTPS_PROXY`, `CURL_CA_BUNDLE`, ...), reaches an intercepted HTTPS host and the receiver
/// gets the injected credential, which the program never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_in_the_namespace_gets_credentials_injected_over_https() {
    if !hookbox_test_require::program("curl", "a real program in the namespace") {
        return;
    }
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let port = recv.addr.port();
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "credential": "telemetry"}]}),
        ca,
    )
    .pin("api.example.test")
    .build();
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("ca-certificates.crt");
    std::fs::write(&bundle, env.egress.sandbox_ca_bundle("").unwrap()).unwrap();
    let (ns, listener) = listener_in_new_netns("127.0.0.1:0".parse().unwrap()).unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    tokio::spawn(hookbox_egress::EgressProxy::new(env.egress.clone()).serve(listener));

    let env_vars = hookbox_egress::env_vars::sandbox_env(&proxy_url, bundle.to_str().unwrap());
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "10"])
            .arg(format!("https://api.example.test:{port}/secure"))
            .env_clear()
            .envs(env_vars);
        output_in_netns(&ns, cmd)
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, b"hello from /secure");
    let seen = recv.seen.lock().unwrap();
    assert_eq!(
        seen[0].header("authorization"),
        vec![format!("Bearer {SECRET}")]
    );
}

/// Runs `cmd` inside `ns` and waits for it.
fn output_in_netns(ns: &OwnedFd, mut cmd: Command) -> std::process::Output {
    let ns = ns.try_clone().unwrap();
    // SAFETY: setns is async-signal-safe; the fd stays open until exec.
    unsafe {
        cmd.pre_exec(move || {
            setns(ns.as_fd(), CloneFlags::CLONE_NEWNET).map_err(std::io::Error::from)
        });
    }
    cmd.output().unwrap()
}

/// Node's fetch ignores proxy variables; in the namespace it is refused at once, it does not
/// hang. The same script run outside the namespace first reaches the receiver, so the refusal
/// is the namespace's doing, not a broken script. Fails where node is not installed (unless
/// HOOKBOX_TEST_ALLOW_SKIP=1; scripts/setup.sh installs Debian's nodejs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_fetch_ignoring_the_proxy_is_refused() {
    if !hookbox_test_require::program("node", "its fetch ignores proxy variables") {
        return;
    }
    let recv = receiver(None).await;
    let port = recv.addr.port();
    let (ns, _listener) = listener_in_new_netns("127.0.0.1:0".parse().unwrap()).unwrap();
    let script = |path: &str| {
        format!(
            "fetch('http://127.0.0.1:{port}/{path}', {{signal: AbortSignal.timeout(10000)}})\
             .then(r => {{ console.log(r.status); process.exit(0); }}, e => {{ console.log(e.cause ? e.cause.code : e.name); process.exit(3); }})"
        )
    };

    // Positive control: from the host's namespace the script reaches the receiver.
    let host = script("host");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node").arg("-e").arg(host).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "200");

    let inside = script("node");
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("node");
        cmd.arg("-e").arg(inside);
        output_in_netns(&ns, cmd)
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ECONNREFUSED");
    let paths: Vec<String> = recv
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(
        paths,
        vec!["/host"],
        "only the control reached the receiver"
    );
}
