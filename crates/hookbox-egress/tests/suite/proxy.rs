//! The proxy against real receivers on 127.0.0.1: tunnel, intercept with injection, plain
//! http, allowlist forms, refusals and their audit events.

use std::sync::Arc;

use serde_json::json;

use super::support::*;

#[tokio::test]
async fn tunnel_to_an_allowed_host_is_untouched() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test"}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let port = recv.addr.port();
    let tcp = connect_via(proxy, &format!("API.Example.test.:{port}"))
        .await
        .unwrap();
    // The receiver's own certificate reaches the client: it verifies against the test CA only,
    // which the environment's CA is not.
    let tls = tls(tcp, "api.example.test", client_trusting(&ca.pem))
        .await
        .unwrap();
    let got = send(
        tls,
        get(
            "/hello",
            "api.example.test",
            &[("authorization", "Bearer mine")],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(got.body, b"hello from /hello");
    let seen = recv.seen.lock().unwrap();
    assert_eq!(seen[0].header("authorization"), vec!["Bearer mine"]);
    assert!(env.audit.denied_rules().is_empty());
}

#[tokio::test]
async fn allowlist_forms_decide_which_hosts_connect() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["x"]))).await;
    let port = recv.addr.port();
    let cases: Vec<(serde_json::Value, &str, Result<(), &str>)> = vec![
        (
            json!({"allowlist": [{"domain": "*.example.test"}]}),
            "a.b.example.test",
            Ok(()),
        ),
        (
            json!({"allowlist": [{"domain": "*.example.test"}]}),
            "example.test",
            Err("not-allowlisted"),
        ),
        (
            json!({"allowlist": [{"domain": "*.example.test"}]}),
            "badexample.test",
            Err("not-allowlisted"),
        ),
        (
            json!({"allowlist": [{"domain": "*"}]}),
            "anything.test",
            Ok(()),
        ),
        (
            json!({"allowlist": [{"domain": "api.example.test"}]}),
            "other.example.test",
            Err("not-allowlisted"),
        ),
        (
            json!("disabled"),
            "api.example.test",
            Err("network-disabled"),
        ),
        (
            json!({"allowlist": "disabled"}),
            "api.example.test",
            Err("network-disabled"),
        ),
    ];
    for (policy, host, want) in cases {
        let env = EnvBuilder::new(policy.clone(), ca.clone())
            .pin("a.b.example.test")
            .pin("anything.test")
            .pin("example.test")
            .pin("badexample.test")
            .pin("api.example.test")
            .pin("other.example.test")
            .build();
        let proxy = start_proxy(env.egress.clone()).await;
        let got = connect_via(proxy, &format!("{host}:{port}")).await;
        match (want, got) {
            (Ok(()), Ok(_)) => assert!(env.audit.denied_rules().is_empty()),
            (Err(rule), Err(refused)) => {
                assert_eq!(refused.status, 403, "{policy} {host}");
                assert_eq!(refused.rule.as_deref(), Some(rule), "{policy} {host}");
                assert!(refused.body.contains(rule), "{}", refused.body);
                assert_eq!(env.audit.denied_rules(), vec![rule], "{policy} {host}");
            }
            (want, got) => panic!("{policy} {host}: want {want:?}, got {got:?}"),
        }
    }
}

#[tokio::test]
async fn intercepted_https_gets_credential_and_transform_headers() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{
            "domain": "api.example.test",
            "credential": "telemetry",
            "transform": [{"X-Team": "blue"}, {"X-Source": "hookbox"}],
        }]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let authority = format!("api.example.test:{}", recv.addr.port());
    let tcp = connect_via(proxy, &authority).await.unwrap();
    // The sandbox trusts the environment's CA, not the test CA.
    let tls = tls(
        tcp,
        "api.example.test",
        client_trusting(env.egress.ca_cert_pem().unwrap()),
    )
    .await
    .unwrap();
    let got = send(
        tls,
        get(
            "/v1/items",
            &authority,
            &[
                ("authorization", "Bearer sandbox-forgery"),
                ("x-team", "red"),
            ],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let seen = recv.seen.lock().unwrap();
    assert_eq!(seen[0].path, "/v1/items");
    assert_eq!(
        seen[0].header("authorization"),
        vec![format!("Bearer {SECRET}")]
    );
    assert_eq!(seen[0].header("x-team"), vec!["blue"]);
    assert_eq!(seen[0].header("x-source"), vec!["hookbox"]);
}

#[tokio::test]
async fn intercepted_requests_must_keep_their_host() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "credential": "telemetry"}, {"domain": "*"}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let tcp = connect_via(proxy, &format!("api.example.test:{}", recv.addr.port()))
        .await
        .unwrap();
    let tls = tls(
        tcp,
        "api.example.test",
        client_trusting(env.egress.ca_cert_pem().unwrap()),
    )
    .await
    .unwrap();
    let got = send(tls, get("/", "evil.test", &[])).await.unwrap();
    assert_eq!(got.status, 403);
    assert_eq!(got.rule.as_deref(), Some("host-mismatch"));
    assert!(recv.seen.lock().unwrap().is_empty());
    assert_eq!(env.audit.denied_rules(), vec!["host-mismatch"]);
}

#[tokio::test]
async fn tunnel_sni_must_equal_the_connect_host() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test", "evil.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test"}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let tcp = connect_via(proxy, &format!("api.example.test:{}", recv.addr.port()))
        .await
        .unwrap();
    let err = tls(tcp, "evil.test", client_trusting(&ca.pem)).await;
    assert!(err.is_err(), "handshake with a foreign SNI must fail");
    assert_eq!(env.audit.denied_rules(), vec!["sni-mismatch"]);
    assert!(recv.seen.lock().unwrap().is_empty());

    // Plain text through a tunnel is refused too.
    let mut tcp = connect_via(proxy, &format!("api.example.test:{}", recv.addr.port()))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    tcp.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    assert_eq!(env.audit.denied_rules(), vec!["sni-mismatch", "not-tls"]);
}

#[tokio::test]
async fn upstream_certificates_are_verified() {
    // Without the operator's extra CA the receiver's certificate is unknown: intercepted
    // requests get 502, nothing reaches the receiver.
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let mut b = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "transform": {"X-A": "1"}}]}),
        ca.clone(),
    )
    .pin("api.example.test");
    b.trust_test_ca = false;
    let env = b.build();
    let proxy = start_proxy(env.egress.clone()).await;
    let authority = format!("api.example.test:{}", recv.addr.port());
    let tcp = connect_via(proxy, &authority).await.unwrap();
    let tls = tls(
        tcp,
        "api.example.test",
        client_trusting(env.egress.ca_cert_pem().unwrap()),
    )
    .await
    .unwrap();
    let got = send(tls, get("/", &authority, &[])).await.unwrap();
    assert_eq!(got.status, 502);
    assert!(String::from_utf8_lossy(&got.body).contains("TLS"));
    assert!(recv.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn plain_http_gets_transforms_but_never_credentials() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [
            {"domain": "plain.test", "transform": {"X-Injected": "yes"}},
            {"domain": "secret.test", "credential": "telemetry"},
        ]}),
        ca.clone(),
    )
    .pin("plain.test")
    .pin("secret.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let port = recv.addr.port();

    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let url = format!("http://plain.test:{port}/p?q=1");
    let got = send(
        tcp,
        get(
            &url,
            "ignored.test",
            &[("x-injected", "no"), ("proxy-authorization", "x")],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    {
        let seen = recv.seen.lock().unwrap();
        assert_eq!(seen[0].path, "/p");
        assert_eq!(seen[0].header("x-injected"), vec!["yes"]);
        assert_eq!(seen[0].header("host"), vec![format!("plain.test:{port}")]);
        assert!(seen[0].header("proxy-authorization").is_empty());
    }

    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let url = format!("http://secret.test:{port}/");
    let got = send(tcp, get(&url, "secret.test", &[])).await.unwrap();
    assert_eq!(got.status, 403);
    assert_eq!(got.rule.as_deref(), Some("credential-needs-tls"));

    // Origin-form requests are not proxied.
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(tcp, get("/", "plain.test", &[])).await.unwrap();
    assert_eq!(got.status, 403);
    assert_eq!(got.rule.as_deref(), Some("bad-request"));
    assert_eq!(recv.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn missing_credentials_refuse_the_connect() {
    let ca = Arc::new(TestCa::new());
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "credential": "nope"}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let refused = connect_via(proxy, "api.example.test:443")
        .await
        .unwrap_err();
    assert_eq!(refused.status, 403);
    assert_eq!(refused.rule.as_deref(), Some("credential-unavailable"));
    assert!(refused.body.contains("nope"), "{}", refused.body);
}

#[tokio::test]
async fn unreachable_upstream_is_a_fast_502() {
    let ca = Arc::new(TestCa::new());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let env = EnvBuilder::new(json!({"allowlist": [{"domain": "*"}]}), ca)
        .pin("gone.test")
        .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let refused = connect_via(proxy, &format!("gone.test:{}", closed.port()))
        .await
        .unwrap_err();
    assert_eq!(refused.status, 502);
    let refused = connect_via(proxy, "unpinned.test:443").await.unwrap_err();
    assert_eq!(refused.status, 502);
    assert!(
        refused.body.contains("could not resolve"),
        "{}",
        refused.body
    );
}

#[tokio::test]
async fn intercepted_connections_redial_when_the_server_closes() {
    // Regression: the upstream closing its keep-alive connection must not turn the sandbox's
    // next request on the same intercepted connection into a 502.
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "transform": {"X-A": "1"}}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let authority = format!("api.example.test:{}", recv.addr.port());
    let tcp = connect_via(proxy, &authority).await.unwrap();
    let tls = tls(
        tcp,
        "api.example.test",
        client_trusting(env.egress.ca_cert_pem().unwrap()),
    )
    .await
    .unwrap();
    let mut sender = client(tls).await.unwrap();
    let first = send_on(&mut sender, get("/close", &authority, &[]))
        .await
        .unwrap();
    assert_eq!(first.status, 200);
    let second = send_on(&mut sender, get("/again", &authority, &[]))
        .await
        .unwrap();
    assert_eq!(
        second.status,
        200,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    let paths: Vec<String> = recv
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.path.clone())
        .collect();
    assert_eq!(paths, vec!["/close", "/again"]);
}

#[tokio::test]
async fn the_local_endpoint_serves_only_its_token_holder_and_applies_the_policy() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "plain.test", "transform": {"X-Injected": "yes"}}]}),
        ca.clone(),
    )
    .pin("plain.test")
    .pin("other.test")
    .build();
    let endpoint = hookbox_egress::EgressProxy::new(env.egress.clone())
        .local_endpoint()
        .await
        .unwrap();
    let proxy: std::net::SocketAddr = endpoint
        .url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let port = recv.addr.port();
    let auth = format!(
        "Basic {}",
        base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("{}:{}", hookbox_egress::LOCAL_PROXY_USER, endpoint.token())
        )
    );
    let url = format!("http://plain.test:{port}/mcp");
    // Without the token, or with a wrong one: 407, and nothing reaches the proxy or upstream.
    for header in [None, Some("Basic aG9va2JveDp3cm9uZw==")] {
        let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
        let headers: Vec<(&str, &str)> = header
            .map(|h| ("proxy-authorization", h))
            .into_iter()
            .collect();
        let got = send(tcp, get(&url, "plain.test", &headers)).await.unwrap();
        assert_eq!(got.status, 407);
    }
    assert!(recv.seen.lock().unwrap().is_empty());
    // With it: the proxy's policy applies (injection), and the token is not passed on.
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(
        tcp,
        get(&url, "plain.test", &[("proxy-authorization", &auth)]),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    {
        let seen = recv.seen.lock().unwrap();
        assert_eq!(seen[0].header("x-injected"), vec!["yes"]);
        assert!(seen[0].header("proxy-authorization").is_empty());
    }
    // A host the allowlist does not admit is refused by the proxy, as for the sandbox.
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(
        tcp,
        get(
            &format!("http://other.test:{port}/"),
            "other.test",
            &[("proxy-authorization", &auth)],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 403);
    assert_eq!(got.rule.as_deref(), Some("not-allowlisted"));
    // Dropping the endpoint closes it.
    drop(endpoint);
    tokio::task::yield_now().await;
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        loop {
            if tokio::net::TcpStream::connect(proxy).await.is_err() {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(closed.is_ok(), "the endpoint still accepts connections");
}

#[tokio::test]
async fn client_tls_trusts_the_operator_ca_for_tunnels_and_the_environment_ca_for_interception() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
    let port = recv.addr.port();
    // A tunnel: the upstream's certificate comes from the operator's CA (--egress-extra-ca).
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test"}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let tcp = connect_via(proxy, &format!("api.example.test:{port}"))
        .await
        .unwrap();
    let io = tls(tcp, "api.example.test", env.egress.client_tls().unwrap())
        .await
        .unwrap();
    let got = send(io, get("/t", "api.example.test", &[])).await.unwrap();
    assert_eq!(got.status, 200);
    // Interception (the entry injects a header): the environment's CA signs the certificate.
    let env = EnvBuilder::new(
        json!({"allowlist": [{"domain": "api.example.test", "transform": {"X-Injected": "yes"}}]}),
        ca.clone(),
    )
    .pin("api.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let tcp = connect_via(proxy, &format!("api.example.test:{port}"))
        .await
        .unwrap();
    let io = tls(tcp, "api.example.test", env.egress.client_tls().unwrap())
        .await
        .unwrap();
    let authority = format!("api.example.test:{port}");
    let got = send(io, get("/i", &authority, &[])).await.unwrap();
    assert_eq!(got.status, 200);
    assert_eq!(
        recv.seen.lock().unwrap()[1].header("x-injected"),
        vec!["yes"]
    );
    // The public roots alone trust neither.
    let tcp = connect_via(proxy, &format!("api.example.test:{port}"))
        .await
        .unwrap();
    let public_only = hookbox_egress::tls::upstream_client_config(None).unwrap();
    assert!(tls(tcp, "api.example.test", public_only).await.is_err());
}

/// Regression (issue 36, item 7): a 403 told the sandbox what an internal name resolves to
/// (`vm resolves to 127.0.0.1, in 127.0.0.0/8`). The refusal names the rule; only the
/// operator's audit event keeps the address.
#[tokio::test]
async fn a_refusal_names_the_rule_not_the_address_a_name_resolves_to() {
    let ca = Arc::new(TestCa::new());
    let mut b = EnvBuilder::new(json!({"allowlist": [{"domain": "*"}]}), ca);
    b.loopback_allowed = false;
    let env = b.pin("vm.internal.test").build();
    let proxy = start_proxy(env.egress.clone()).await;
    let refused = connect_via(proxy, "vm.internal.test:443")
        .await
        .unwrap_err();
    assert_eq!(refused.status, 403);
    assert_eq!(refused.rule.as_deref(), Some("loopback"));
    assert!(
        refused
            .body
            .contains("the address vm.internal.test resolves to is in a blocked range (loopback)"),
        "{}",
        refused.body
    );
    assert!(!refused.body.contains("127.0.0"), "{}", refused.body);
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(
        tcp,
        get("http://vm.internal.test:8080/", "vm.internal.test", &[]),
    )
    .await
    .unwrap();
    let body = String::from_utf8_lossy(&got.body);
    assert_eq!(got.status, 403);
    assert!(body.contains("blocked range (loopback)"), "{body}");
    assert!(!body.contains("127.0.0"), "{body}");
    // The operator's record says where the name pointed.
    let events = env.audit.0.lock().unwrap();
    let details: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.outcome {
            hookbox_egress::audit::Outcome::Denied { detail, .. } => Some(detail.as_str()),
            hookbox_egress::audit::Outcome::Allowed => None,
        })
        .collect();
    assert_eq!(details.len(), 2, "{details:?}");
    assert!(
        details
            .iter()
            .all(|d| d.contains("resolves to 127.0.0.1") && d.contains("127.0.0.0/8")),
        "{details:?}"
    );
}

#[tokio::test]
async fn what_an_upstream_echoes_of_an_injected_value_never_reaches_the_sandbox() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(Some(ca.server_config(&["echo.example.test"]))).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [{
            "domain": "echo.example.test",
            "credential": "telemetry",
            "transform": {"X-Api-Key": "team-key-55555"},
        }]}),
        ca.clone(),
    )
    .pin("echo.example.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let authority = format!("echo.example.test:{}", recv.addr.port());
    let tcp = connect_via(proxy, &authority).await.unwrap();
    let tls = tls(
        tcp,
        "echo.example.test",
        client_trusting(env.egress.ca_cert_pem().unwrap()),
    )
    .await
    .unwrap();
    let mut sender = client(tls).await.unwrap();
    let bearer = format!("Bearer {SECRET}");
    let masked = |text: &str| "*".repeat(text.len());

    // The whole echo in one frame, and again one byte per frame: masked either way, with every
    // length kept (hyper checks the body against Content-Length).
    for path in ["/echo", "/echo-trickle"] {
        let got = send_on(
            &mut sender,
            get(path, &authority, &[("accept-encoding", "gzip, br")]),
        )
        .await
        .unwrap();
        assert_eq!(got.status, 200, "{path}");
        let body = String::from_utf8(got.body).unwrap();
        assert!(!body.contains(SECRET), "{path}: {body}");
        assert!(!body.contains("team-key-55555"), "{path}: {body}");
        assert!(
            body.contains(&format!("authorization: {}\n", masked(&bearer))),
            "{path}: {body}"
        );
        assert!(
            body.contains(&format!("x-api-key: {}\n", masked("team-key-55555"))),
            "{path}: {body}"
        );
        assert_eq!(
            got.headers["x-echo-authorization"],
            masked(&bearer).as_str()
        );
    }
    {
        // The upstream got the real values, and was asked for a body it can be read in.
        let seen = recv.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        for s in seen.iter() {
            assert_eq!(s.header("authorization"), vec![bearer.as_str()]);
            assert_eq!(s.header("accept-encoding"), vec!["identity"]);
        }
    }

    // An error quoting the key in its status line: the reason phrase is masked too.
    let got = send_on(&mut sender, get("/echo-reason", &authority, &[]))
        .await
        .unwrap();
    assert_eq!(got.status, 401);
    assert_eq!(
        got.reason.as_deref(),
        Some(format!("invalid key {}", masked(&bearer)).as_str())
    );

    // The sandbox cannot have the echo cut into pieces too short to recognise: no Range goes
    // upstream with an injected secret.
    let got = send_on(
        &mut sender,
        get(
            "/echo",
            &authority,
            &[("range", "bytes=0-40"), ("if-range", "\"x\"")],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    {
        let seen = recv.seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert!(last.header("range").is_empty() && last.header("if-range").is_empty());
    }

    // A body encoded anyway cannot be read for the values: refused, not passed on, also when
    // the upstream names its coding as a hop-by-hop header.
    for path in ["/echo-gzip", "/echo-hidden-gzip"] {
        let got = send_on(&mut sender, get(path, &authority, &[]))
            .await
            .unwrap();
        assert_eq!(got.status, 502, "{path}");
        let body = String::from_utf8(got.body).unwrap();
        assert!(body.contains("encoded"), "{path}: {body}");
        assert!(!body.contains(SECRET) && !got.headers.contains_key("x-echo-authorization"));
    }
}

#[tokio::test]
async fn plain_http_echoes_of_a_transform_value_are_masked_and_other_hosts_untouched() {
    let ca = Arc::new(TestCa::new());
    let recv = receiver(None).await;
    let env = EnvBuilder::new(
        json!({"allowlist": [
            {"domain": "plain.test", "transform": {"X-Api-Key": "team-key-55555", "Accept": "application/json"}},
            {"domain": "open.test"},
        ]}),
        ca.clone(),
    )
    .pin("plain.test")
    .pin("open.test")
    .build();
    let proxy = start_proxy(env.egress.clone()).await;
    let port = recv.addr.port();

    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(
        tcp,
        get(&format!("http://plain.test:{port}/echo"), "plain.test", &[]),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    let body = String::from_utf8(got.body).unwrap();
    assert!(body.contains("x-api-key: **************\n"), "{body}");
    // A transform whose name says no secret is ordinary text, left as it is.
    assert!(body.contains("accept: application/json\n"), "{body}");

    // Nothing injected, nothing masked: the sandbox's own header comes back as it sent it,
    // and its Accept-Encoding goes upstream unchanged.
    let tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let got = send(
        tcp,
        get(
            &format!("http://open.test:{port}/echo"),
            "open.test",
            &[("x-api-key", "team-key-55555"), ("accept-encoding", "gzip")],
        ),
    )
    .await
    .unwrap();
    assert_eq!(got.status, 200);
    let body = String::from_utf8(got.body).unwrap();
    assert!(body.contains("x-api-key: team-key-55555\n"), "{body}");
    assert!(body.contains("accept-encoding: gzip\n"), "{body}");
}
