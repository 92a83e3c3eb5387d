//! The scheduler on an injected clock: runs missed while no server was up fire once, not once
//! per missed run, and the next run is computed from the moment it fired; a run the project's
//! quotas refuse is a failed execution that says why.

use axum::http::{Method, StatusCode};
use hookbox_protocol::triggers::{TriggerStatus, TriggerUpdate};
use hookbox_server::quota::QuotaConfig;
use serde_json::{Value, json};

use super::Harness;

const MINUTE: i64 = 60_000;

async fn create(h: &Harness, body: Value) -> Value {
    let (status, trigger) = h.call(Method::POST, "/v1beta/triggers", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{trigger}");
    trigger
}

async fn executions(h: &Harness, id: &str) -> Vec<Value> {
    let (status, list) = h
        .call(
            Method::GET,
            &format!("/v1beta/triggers/{id}/executions"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    list["trigger_executions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Moves trigger `id`'s next run to `at_ms`, as if the servers had been down since.
async fn due_at(h: &Harness, id: &str, at_ms: i64) {
    let now = hookbox_store::time::now_rfc3339();
    for (status, next) in [
        (TriggerStatus::Paused, None),
        (TriggerStatus::Active, Some(at_ms)),
    ] {
        h.store
            .update_trigger(
                hookbox_store::DEFAULT_PROJECT,
                id,
                &TriggerUpdate {
                    status: Some(status),
                    display_name: None,
                },
                next,
                &now,
            )
            .await
            .unwrap()
            .unwrap();
    }
}

#[tokio::test]
async fn runs_missed_while_down_fire_once_and_the_schedule_goes_on_from_then() {
    let h = Harness::new();
    let trigger = create(
        &h,
        json!({"interaction": {"agent": "antigravity-preview-09-2026", "input": "run `true`"},
               "schedule": "* * * * *", "time_zone": "UTC"}),
    )
    .await;
    let id = trigger["id"].as_str().unwrap();
    let now = hookbox_store::webhooks::now_ms();
    // Due an hour ago: sixty runs were missed.
    let due = (now / MINUTE - 60) * MINUTE;
    due_at(&h, id, due).await;
    assert_eq!(
        hookbox_server::triggers::tick(&h.state, now).await.unwrap(),
        1
    );
    assert_eq!(
        hookbox_server::triggers::tick(&h.state, now).await.unwrap(),
        0
    );
    let record = h
        .store
        .get_trigger(hookbox_store::DEFAULT_PROJECT, id)
        .await
        .unwrap()
        .unwrap();
    let next = record.next_run_ms.unwrap();
    assert!(
        next > now && next <= now + MINUTE && next % MINUTE == 0,
        "{next} vs {now}"
    );
    let runs = executions(&h, id).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        runs[0]["scheduled_time"],
        hookbox_store::time::format_unix(due / 1000)
    );
    // Runs never overlap: once that one completed (polled, bounded), the next minute's tick
    // fires the next run, once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while executions(&h, id).await[0]["status"] != "completed" {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            executions(&h, id).await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        hookbox_server::triggers::tick(&h.state, next)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        hookbox_server::triggers::tick(&h.state, next)
            .await
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn a_run_the_quotas_refuse_is_a_failed_execution_saying_why() {
    let quotas: QuotaConfig = toml::from_str("[quotas]\nenvironments = 1\n").unwrap();
    quotas.validate().unwrap();
    let h = Harness::configured(tempfile::tempdir().unwrap(), vec![], quotas);
    let (status, env) = h
        .call(
            Method::POST,
            "/v1beta/environments",
            Some(json!({"sources": []})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{env}");
    // Its interaction would need a second environment.
    let trigger = create(
        &h,
        json!({"interaction": {"agent": "antigravity-preview-09-2026", "input": "run `true`",
                               "environment": {"type": "remote", "sources": []}},
               "schedule": "0 0 1 1 *", "time_zone": "UTC", "max_consecutive_failures": 1}),
    )
    .await;
    let id = trigger["id"].as_str().unwrap();
    let (status, run) = h
        .call(
            Method::POST,
            &format!("/v1beta/triggers/{id}/executions"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error"].as_str().unwrap_or_default();
    assert!(error.contains("environments"), "{error}");
    let (_, trigger) = h
        .call(Method::GET, &format!("/v1beta/triggers/{id}"), None)
        .await;
    assert_eq!(trigger["status"], "error", "{trigger}");
    assert_eq!(executions(&h, id).await[0]["error"], run["error"]);
}
