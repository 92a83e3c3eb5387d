//! Every SSRF form, through the real proxy (CONNECT and absolute-form) with an allowlist of `*`
//! and no operator CIDR: each must be refused before any connection is attempted.

use std::sync::Arc;

use serde_json::json;

use super::support::*;

#[tokio::test]
async fn every_ssrf_form_is_denied() {
    let ca = Arc::new(TestCa::new());
    // A live loopback receiver: if any form slipped through, it would be reached.
    let recv = receiver(None).await;
    let port = recv.addr.port();
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
    assert_eq!(env.audit.denied_rules().len(), 2 * hosts.len());
}
