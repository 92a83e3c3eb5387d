//! A secret must never reach logs: run an intercepted request and a hook post with every
//! tracing event captured at TRACE level, then look for the secret in the output.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_egress::EgressPoster;
use hookbox_protocol::post::HttpRequest;
use serde_json::json;

use super::support::*;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn secrets_never_appear_in_logs() {
    let capture = Capture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // A current-thread runtime, so every task runs where the subscriber is installed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ca = Arc::new(TestCa::new());
        let recv = receiver(Some(ca.server_config(&["api.example.test"]))).await;
        let mut b = EnvBuilder::new(
            json!({"allowlist": [{"domain": "api.example.test", "credential": "telemetry"}]}),
            ca.clone(),
        )
        .pin("api.example.test");
        // The default audit sink writes tracing events; use it here.
        b.audit_to_tracing = true;
        let env = b.build();
        let egress = env.egress.clone();
        let proxy = start_proxy(egress.clone()).await;
        let authority = format!("api.example.test:{}", recv.addr.port());
        let tcp = connect_via(proxy, &authority).await.unwrap();
        let tls = tls(
            tcp,
            "api.example.test",
            client_trusting(egress.ca_cert_pem().unwrap()),
        )
        .await
        .unwrap();
        let got = send(tls, get("/x", &authority, &[])).await.unwrap();
        assert_eq!(got.status, 200);
        let resp = EgressPoster::new(egress.clone())
            .post(HttpRequest {
                url: format!("https://{authority}/ingest"),
                headers: vec![],
                body: b"{}".to_vec(),
                timeout: Duration::from_secs(5),
                response_limit: 1024,
            })
            .await
            .unwrap();
        assert_eq!(resp.status, 200);
        let seen = recv.seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert!(
            seen.iter()
                .all(|s| s.header("authorization") == vec![format!("Bearer {SECRET}")])
        );
        // Debug output of the egress (policy, store) does not carry it either.
        assert!(!format!("{egress:?}").contains(SECRET));
    });
    let out = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    // The capture worked: it holds the proxy's own events.
    assert!(out.contains("hookbox_egress"), "nothing captured:\n{out}");
    assert!(!out.contains(SECRET), "secret leaked into logs:\n{out}");
}
