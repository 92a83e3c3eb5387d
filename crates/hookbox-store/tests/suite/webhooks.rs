//! Webhooks and their outbox, on the selected backend: the resource per project, secrets
//! sealed at rest and rotated with an overlap, one delivery per subscribed webhook written with
//! the status change that caused it, claims that hide a delivery until they lapse, and the
//! failure count that disables a webhook.

use hookbox_protocol::api::{Interaction, InteractionStatus};
use hookbox_protocol::webhooks::{PING_EVENT, Webhook, WebhookState, WebhookUpdate};
use hookbox_store::webhooks::now_ms;
use hookbox_store::{
    AttemptOutcome, DeliveryStatus, Page, SigningKey, StatusUpdate, Store, WebhookRecord,
};
use serde_json::json;

use super::{P, temp_store};

const NOW: &str = "2026-12-04T10:00:00Z";

fn record(id: &str, events: &[&str]) -> WebhookRecord {
    WebhookRecord {
        webhook: Webhook {
            id: id.into(),
            name: Some(format!("{id} name")),
            uri: format!("https://hooks.example/{id}"),
            subscribed_events: events.iter().map(|e| (*e).to_owned()).collect(),
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

fn key(secret: &str) -> SigningKey {
    SigningKey {
        secret: secret.into(),
        expire_time: None,
    }
}

async fn running_interaction(store: &dyn Store, project: &str, id: &str) {
    let interaction: Interaction = serde_json::from_value(json!({
        "id": id, "status": "in_progress", "environment_id": "env_1",
        "created": NOW, "updated": NOW
    }))
    .unwrap();
    store
        .create_interaction(project, &interaction)
        .await
        .unwrap();
}

async fn set_status(store: &dyn Store, id: &str, status: InteractionStatus) {
    store
        .update_status(
            id,
            &StatusUpdate {
                status,
                usage: None,
                errors: Vec::new(),
                updated: NOW.into(),
            },
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn webhooks_are_per_project_and_their_secrets_are_sealed_and_rotate() {
    let (place, store) = temp_store().await;
    store
        .create_webhook(
            P,
            &record("wh_1", &["interaction.completed"]),
            &key("whsec_FIRSTSECRETVALUE"),
        )
        .await
        .unwrap();
    let again = store
        .create_webhook(P, &record("wh_1", &[]), &key("whsec_other"))
        .await;
    assert!(matches!(
        again,
        Err(hookbox_store::Error::AlreadyExists { .. })
    ));
    // Another project sees nothing.
    assert!(
        store
            .get_webhook("other", "wh_1", NOW)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .list_webhooks("other", &Page::default(), NOW)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(!store.delete_webhook("other", "wh_1").await.unwrap());

    let got = store.get_webhook(P, "wh_1", NOW).await.unwrap().unwrap();
    assert_eq!(got.webhook.signing_secrets.len(), 1);
    assert!(
        got.webhook.signing_secrets[0]
            .truncated_secret
            .starts_with("whsec_FIRST")
    );
    assert!(
        !got.webhook.signing_secrets[0]
            .truncated_secret
            .contains("VALUE")
    );
    assert_eq!(
        store
            .list_webhooks(P, &Page::default(), NOW)
            .await
            .unwrap()
            .items,
        vec![got.clone()]
    );

    // The secret is nowhere in the database in the clear.
    if let Some(url) = &place.database_url() {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let dump: String = client
            .query_one("SELECT string_agg(w::text, ' ') FROM webhooks w", &[])
            .await
            .unwrap()
            .get(0);
        assert!(
            dump.contains("wh_1") && !dump.contains("FIRSTSECRET"),
            "{dump}"
        );
    } else {
        for entry in std::fs::read_dir(place.path()).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            assert!(!bytes.windows(11).any(|w| w == b"FIRSTSECRET"));
        }
    }

    // Rotation with an overlap: both sign until the old one expires.
    let rotated = store
        .rotate_webhook_secret(
            P,
            "wh_1",
            &key("whsec_SECOND"),
            Some("2026-12-05T10:00:00Z"),
            NOW,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.webhook.signing_secrets.len(), 2);
    let keys = store
        .webhook_signing_keys(P, "wh_1", NOW)
        .await
        .unwrap()
        .unwrap();
    let secrets: Vec<_> = keys.iter().map(|k| k.secret.as_str()).collect();
    assert_eq!(secrets, ["whsec_SECOND", "whsec_FIRSTSECRETVALUE"]);
    // After the overlap only the new one signs.
    let later = store
        .webhook_signing_keys(P, "wh_1", "2026-12-05T10:00:01Z")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(later[0].secret, "whsec_SECOND");
    // Immediately: the old ones go at once.
    store
        .rotate_webhook_secret(P, "wh_1", &key("whsec_THIRD"), None, NOW)
        .await
        .unwrap();
    let keys = store
        .webhook_signing_keys(P, "wh_1", NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].secret, "whsec_THIRD");

    let updated = store
        .update_webhook(
            P,
            "wh_1",
            &WebhookUpdate {
                name: Some("renamed".into()),
                state: Some(WebhookState::Disabled),
                ..Default::default()
            },
            "2026-12-04T11:00:00Z",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.webhook.name.as_deref(), Some("renamed"));
    assert_eq!(updated.webhook.state, WebhookState::Disabled);
    assert_eq!(updated.webhook.update_time, "2026-12-04T11:00:00Z");
    assert_eq!(updated.webhook.uri, got.webhook.uri);

    // A project holding a webhook is not empty (it cannot be removed with it left behind).
    assert_eq!(store.project_usage(P).await.unwrap().webhooks, 1);
    assert!(store.delete_webhook(P, "wh_1").await.unwrap());
    assert!(store.get_webhook(P, "wh_1", NOW).await.unwrap().is_none());
    assert_eq!(store.project_usage(P).await.unwrap().webhooks, 0);
}

#[tokio::test]
async fn a_status_change_writes_one_delivery_per_subscribed_webhook() {
    let (_place, store) = temp_store().await;
    let store = &*store;
    store
        .create_webhook(
            P,
            &record("wh_done", &["interaction.completed"]),
            &key("whsec_a"),
        )
        .await
        .unwrap();
    store
        .create_webhook(
            P,
            &record("wh_both", &["interaction.completed", "interaction.failed"]),
            &key("whsec_b"),
        )
        .await
        .unwrap();
    store
        .create_webhook(
            "other",
            &record("wh_other", &["interaction.completed"]),
            &key("whsec_c"),
        )
        .await
        .unwrap();
    running_interaction(store, P, "int_ok").await;
    running_interaction(store, P, "int_bad").await;
    set_status(store, "int_ok", InteractionStatus::Completed).await;
    // The same status again is no new event.
    set_status(store, "int_ok", InteractionStatus::Completed).await;
    set_status(store, "int_bad", InteractionStatus::Failed).await;

    let far = now_ms() + 60_000;
    let claimed = store
        .claim_webhook_deliveries(far, far + 30_000, 10)
        .await
        .unwrap();
    let mut seen: Vec<(String, String)> = claimed
        .iter()
        .map(|d| (d.webhook_id.clone(), d.event_type.clone()))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("wh_both".to_owned(), "interaction.completed".to_owned()),
            ("wh_both".to_owned(), "interaction.failed".to_owned()),
            ("wh_done".to_owned(), "interaction.completed".to_owned()),
        ]
    );
    for d in &claimed {
        let body: serde_json::Value = serde_json::from_str(&d.payload).unwrap();
        assert_eq!(body["id"], d.id.as_str());
        assert_eq!(body["type"], d.event_type.as_str());
        assert_eq!(body["data"]["environment_id"], "env_1");
        assert!(d.uri.ends_with(&d.webhook_id));
        assert_eq!(d.project, P);
    }
    // Claimed: hidden from another claim until the claim lapses, then due again.
    assert!(
        store
            .claim_webhook_deliveries(far, far + 30_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let lapsed = store
        .claim_webhook_deliveries(far + 30_000, far + 60_000, 10)
        .await
        .unwrap();
    assert_eq!(lapsed.len(), 3);
    assert_eq!(
        lapsed.iter().map(|d| &d.id).collect::<Vec<_>>().len(),
        claimed.len()
    );
}

#[tokio::test]
async fn failures_are_counted_until_the_webhook_is_disabled_and_a_success_resets_them() {
    let (_place, store) = temp_store().await;
    let store = &*store;
    store
        .create_webhook(P, &record("wh_1", &["interaction.failed"]), &key("whsec_a"))
        .await
        .unwrap();
    for i in 0..3 {
        running_interaction(store, P, &format!("int_{i}")).await;
        set_status(store, &format!("int_{i}"), InteractionStatus::Failed).await;
    }
    let far = now_ms() + 60_000;
    let claimed = store.claim_webhook_deliveries(far, far, 10).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let failed = |retry: Option<i64>| AttemptOutcome::Failed {
        error: "HTTP 503".into(),
        status: Some(503),
        retry_at_ms: retry,
        disable_after: 2,
    };
    store
        .finish_webhook_delivery(
            &claimed[0].id,
            &AttemptOutcome::Delivered { status: 200 },
            NOW,
        )
        .await
        .unwrap();
    store
        .finish_webhook_delivery(&claimed[1].id, &failed(Some(far)), NOW)
        .await
        .unwrap();
    let one = store.get_webhook(P, "wh_1", NOW).await.unwrap().unwrap();
    assert_eq!(
        (one.consecutive_failures, one.webhook.state),
        (1, WebhookState::Enabled)
    );
    store
        .finish_webhook_delivery(&claimed[2].id, &failed(None), NOW)
        .await
        .unwrap();
    let two = store.get_webhook(P, "wh_1", NOW).await.unwrap().unwrap();
    assert_eq!(two.consecutive_failures, 2);
    assert_eq!(
        two.webhook.state,
        WebhookState::DisabledDueToFailedDeliveries
    );

    let listed = store
        .list_webhook_deliveries(P, "wh_1", &Page::default())
        .await
        .unwrap()
        .items;
    let statuses: Vec<_> = listed
        .iter()
        .map(|d| (d.id.clone(), d.status, d.attempts))
        .collect();
    assert_eq!(
        statuses,
        [
            (claimed[2].id.clone(), DeliveryStatus::Failed, 1),
            (claimed[1].id.clone(), DeliveryStatus::Pending, 1),
            (claimed[0].id.clone(), DeliveryStatus::Delivered, 1),
        ]
    );
    assert!(
        store
            .list_webhook_deliveries("other", "wh_1", &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Disabled: its pending delivery is not handed out, and no new events are written; a ping
    // still goes.
    assert!(
        store
            .claim_webhook_deliveries(far + 1, far + 1, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.next_webhook_delivery_ms().await.unwrap(), None);
    let ping = store
        .enqueue_webhook_event(P, PING_EVENT, &json!({}), Some("wh_1"), NOW)
        .await
        .unwrap();
    assert_eq!(ping.len(), 1);
    let claimed = store
        .claim_webhook_deliveries(far + 1, far + 1, 10)
        .await
        .unwrap();
    assert_eq!(
        claimed.iter().map(|d| &d.id).collect::<Vec<_>>(),
        [&ping[0]]
    );
    store
        .finish_webhook_delivery(&ping[0], &AttemptOutcome::Delivered { status: 204 }, NOW)
        .await
        .unwrap();

    // Enabled again: the count starts over and the pending delivery goes out.
    let enabled = store
        .update_webhook(
            P,
            "wh_1",
            &WebhookUpdate {
                state: Some(WebhookState::Enabled),
                ..Default::default()
            },
            NOW,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(enabled.consecutive_failures, 0);
    let due = store
        .claim_webhook_deliveries(far + 1, far + 1, 10)
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|d| &d.id).collect::<Vec<_>>(),
        [&claimed_id(&statuses, 1)]
    );
    assert_eq!(due[0].attempts, 1);

    // Deleting the webhook deletes its deliveries.
    assert!(store.delete_webhook(P, "wh_1").await.unwrap());
    assert!(
        store
            .list_webhook_deliveries(P, "wh_1", &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    store
        .finish_webhook_delivery(&due[0].id, &AttemptOutcome::Delivered { status: 200 }, NOW)
        .await
        .unwrap();
}

fn claimed_id(statuses: &[(String, DeliveryStatus, u32)], i: usize) -> String {
    statuses[i].0.clone()
}

#[tokio::test]
async fn recovered_interactions_emit_interaction_failed() {
    let (_place, store) = temp_store().await;
    let store = &*store;
    store
        .create_webhook(P, &record("wh_1", &["interaction.failed"]), &key("whsec_a"))
        .await
        .unwrap();
    running_interaction(store, P, "int_crashed").await;
    let ids = store
        .recover_interrupted("the server stopped", NOW)
        .await
        .unwrap();
    assert_eq!(ids, ["int_crashed"]);
    let far = now_ms() + 60_000;
    let claimed = store.claim_webhook_deliveries(far, far, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&claimed[0].payload).unwrap();
    assert_eq!(body["type"], "interaction.failed");
    assert_eq!(body["data"]["interaction_id"], "int_crashed");
}
