//! The deliverer against a real SQLite store, the real webhook poster (egress's SSRF guard, with
//! 127.0.0.1/32 admitted as an operator would) and a real receiver on 127.0.0.1: a delivery is
//! signed with every live secret, a 503 is retried with the same id, a success resets the
//! webhook's failures, and an address the guard refuses never gets a request (a live receiver
//! there, which records every hit, proves it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hookbox_protocol::webhooks::{PING_EVENT, Webhook, WebhookState};
use hookbox_store::{
    DeliveryStatus, Page, SecretKey, SigningKey, SqliteOptions, SqliteStore, Store, WebhookRecord,
};
use hookbox_webhooks::{Deliverer, DeliveryOptions, signing};

const P: &str = "default";
const NOW: &str = "2026-12-04T10:00:00Z";

#[derive(Clone, Default)]
struct Receiver {
    /// Answers, in order; 200 once they run out.
    answers: Arc<Mutex<Vec<u16>>>,
    seen: Arc<Mutex<Vec<(HeaderMap, String)>>>,
}

async fn receiver(answers: Vec<u16>) -> (hookbox_test_support::TestServer, Receiver) {
    receiver_on("127.0.0.1:0", answers).await
}

async fn receiver_on(
    addr: &str,
    answers: Vec<u16>,
) -> (hookbox_test_support::TestServer, Receiver) {
    let r = Receiver {
        answers: Arc::new(Mutex::new(answers)),
        ..Receiver::default()
    };
    let router = axum::Router::new()
        .route(
            "/hook",
            post(
                |State(r): State<Receiver>, headers: HeaderMap, body: String| async move {
                    r.seen.lock().unwrap().push((headers, body));
                    let mut answers = r.answers.lock().unwrap();
                    let status = if answers.is_empty() {
                        200
                    } else {
                        answers.remove(0)
                    };
                    StatusCode::from_u16(status).unwrap()
                },
            ),
        )
        .with_state(r.clone());
    (hookbox_test_support::spawn_server_on(addr, router).await, r)
}

/// One POST straight to the server's `/hook`, not through the guard; the status line.
async fn post_directly(server: &hookbox_test_support::TestServer) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    s.write_all(
        b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    )
    .await
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.lines().next().unwrap_or_default().to_owned()
}

fn webhook(id: &str, uri: String) -> WebhookRecord {
    WebhookRecord {
        webhook: Webhook {
            id: id.into(),
            name: None,
            uri,
            subscribed_events: vec!["interaction.completed".into()],
            state: WebhookState::Enabled,
            create_time: NOW.into(),
            update_time: NOW.into(),
            signing_secrets: Vec::new(),
            new_signing_secret: None,
        },
        consecutive_failures: 0,
        last_error: None,
    }
}

fn deliverer(store: Arc<dyn Store>) -> Deliverer {
    let poster = hookbox_egress::EgressPoster::for_webhooks(
        vec!["127.0.0.1/32".parse().unwrap()],
        None,
        &[],
    )
    .unwrap();
    Deliverer::new(
        store,
        Arc::new(poster),
        DeliveryOptions {
            // The retry falls due at once, so the next round is the next attempt.
            retry_base: Duration::ZERO,
            timeout: Duration::from_secs(10),
            ..Default::default()
        },
    )
}

fn store(dir: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(
            &dir.join("hookbox.db"),
            SecretKey::from_bytes([7; 32]),
            &SqliteOptions::default(),
        )
        .unwrap(),
    )
}

#[tokio::test]
async fn deliveries_are_signed_retried_with_their_id_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let (server, rx) = receiver(vec![503]).await;
    let (old, new) = (signing::new_secret(), signing::new_secret());
    store
        .create_webhook(
            P,
            &webhook("wh_1", format!("{}/hook", server.url())),
            &SigningKey {
                secret: old.clone(),
                expire_time: None,
            },
        )
        .await
        .unwrap();
    store
        .rotate_webhook_secret(
            P,
            "wh_1",
            &SigningKey {
                secret: new.clone(),
                expire_time: None,
            },
            Some("2999-01-01T00:00:00Z"),
            NOW,
        )
        .await
        .unwrap();
    let ids = store
        .enqueue_webhook_event(
            P,
            PING_EVENT,
            &serde_json::json!({"hello": 1}),
            Some("wh_1"),
            NOW,
        )
        .await
        .unwrap();
    let deliverer = deliverer(store.clone());

    // First attempt: 503, recorded and due again.
    assert_eq!(deliverer.deliver_due().await.unwrap(), 1);
    let after_first = store.get_webhook(P, "wh_1", NOW).await.unwrap().unwrap();
    assert_eq!(after_first.consecutive_failures, 1);
    assert!(after_first.last_error.as_deref().unwrap().contains("503"));
    // Second: delivered; the failures start over.
    assert_eq!(deliverer.deliver_due().await.unwrap(), 1);
    assert_eq!(deliverer.deliver_due().await.unwrap(), 0);
    let listed = store
        .list_webhook_deliveries(P, "wh_1", &Page::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        (listed[0].status, listed[0].attempts, listed[0].last_status),
        (DeliveryStatus::Delivered, 2, Some(200))
    );
    assert_eq!(
        store
            .get_webhook(P, "wh_1", NOW)
            .await
            .unwrap()
            .unwrap()
            .consecutive_failures,
        0
    );

    let seen = rx.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (headers, body) in &seen {
        let id = headers["webhook-id"].to_str().unwrap();
        assert_eq!(id, ids[0], "the same id on every attempt");
        let timestamp: i64 = headers["webhook-timestamp"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let signatures: Vec<&str> = headers["webhook-signature"]
            .to_str()
            .unwrap()
            .split(' ')
            .collect();
        // Both live secrets sign, current first.
        assert_eq!(
            signatures,
            [
                signing::sign(&new, id, timestamp, body.as_bytes()).unwrap(),
                signing::sign(&old, id, timestamp, body.as_bytes()).unwrap()
            ]
        );
        let event: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (event["id"].as_str(), event["type"].as_str()),
            (Some(id), Some(PING_EVENT))
        );
        assert_eq!(headers["content-type"], "application/json");
    }
}

#[tokio::test]
async fn an_address_the_guard_refuses_gets_no_request_and_gives_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    // A live receiver on 127.0.0.2 (loopback, outside the admitted 127.0.0.1/32): a guard that
    // let the delivery through would reach it, and it records every request.
    let (server, rx) = receiver_on("127.0.0.2:0", vec![]).await;
    let port = server.addr.port();
    // Positive controls: it answers a request sent straight to it...
    assert_eq!(post_directly(&server).await, "HTTP/1.1 200 OK");
    assert_eq!(rx.seen.lock().unwrap().len(), 1);
    // ...and this deliverer delivers to an admitted address.
    let (admitted, admitted_rx) = receiver(vec![]).await;
    store
        .create_webhook(
            P,
            &webhook("wh_ok", format!("{}/hook", admitted.url())),
            &SigningKey {
                secret: signing::new_secret(),
                expire_time: None,
            },
        )
        .await
        .unwrap();
    store
        .create_webhook(
            P,
            &webhook("wh_1", format!("http://127.0.0.2:{port}/hook")),
            &SigningKey {
                secret: signing::new_secret(),
                expire_time: None,
            },
        )
        .await
        .unwrap();
    let poster = hookbox_egress::EgressPoster::for_webhooks(
        vec!["127.0.0.1/32".parse().unwrap()],
        None,
        &[],
    )
    .unwrap();
    let deliverer = Deliverer::new(
        store.clone(),
        Arc::new(poster),
        DeliveryOptions {
            max_attempts: 2,
            retry_base: Duration::ZERO,
            disable_after: 2,
            ..Default::default()
        },
    );
    store
        .enqueue_webhook_event(P, PING_EVENT, &serde_json::json!({}), Some("wh_ok"), NOW)
        .await
        .unwrap();
    assert_eq!(deliverer.deliver_due().await.unwrap(), 1);
    assert_eq!(admitted_rx.seen.lock().unwrap().len(), 1);

    store
        .enqueue_webhook_event(P, PING_EVENT, &serde_json::json!({}), Some("wh_1"), NOW)
        .await
        .unwrap();
    assert_eq!(deliverer.deliver_due().await.unwrap(), 1);
    assert_eq!(deliverer.deliver_due().await.unwrap(), 1);
    assert_eq!(deliverer.deliver_due().await.unwrap(), 0);
    let listed = store
        .list_webhook_deliveries(P, "wh_1", &Page::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        (listed[0].status, listed[0].attempts),
        (DeliveryStatus::Failed, 2)
    );
    assert!(
        listed[0].last_error.as_deref().unwrap().contains("SSRF"),
        "{:?}",
        listed[0]
    );
    let record = store.get_webhook(P, "wh_1", NOW).await.unwrap().unwrap();
    assert_eq!(
        record.webhook.state,
        WebhookState::DisabledDueToFailedDeliveries
    );
    assert_eq!(
        rx.seen.lock().unwrap().len(),
        1,
        "the refused receiver got a delivery besides the control"
    );
}
