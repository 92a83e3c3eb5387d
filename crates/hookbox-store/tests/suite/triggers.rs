//! Triggers and their executions, on the selected backend: a due run is claimed once however
//! many claim it, a run while the previous one runs is skipped, executions end with their
//! interaction (even one that ended before it was linked), and failures pause the trigger.

use hookbox_protocol::api::{Interaction, InteractionStatus};
use hookbox_protocol::triggers::{ExecutionStatus, TriggerStatus, TriggerUpdate};
use hookbox_store::{Page, RunStart, StatusUpdate, Store, TriggerRecord};
use serde_json::json;

use super::{P, temp_store};

const NOW: &str = "2026-12-04T10:00:00Z";

fn record(id: &str, next: i64, max_failures: Option<u32>) -> TriggerRecord {
    let mut record = TriggerRecord {
        trigger: serde_json::from_value(json!({
            "id": id, "interaction": {"agent": "antigravity-preview-09-2026", "input": "run `true`"},
            "schedule": "*/5 * * * *", "time_zone": "Europe/Berlin", "status": "active",
            "create_time": NOW, "update_time": NOW, "max_consecutive_failures": max_failures
        }))
        .unwrap(),
        next_run_ms: None,
    };
    record.set_next_run(Some(next));
    record
}

async fn interaction(store: &dyn Store, id: &str) {
    let i: Interaction = serde_json::from_value(json!({
        "id": id, "status": "in_progress", "created": NOW, "updated": NOW
    }))
    .unwrap();
    store.create_interaction(P, &i).await.unwrap();
}

async fn end(store: &dyn Store, id: &str, status: InteractionStatus) {
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

fn started(start: RunStart) -> hookbox_protocol::triggers::TriggerExecution {
    match start {
        RunStart::Run(e) => e,
        other => panic!("expected a run, got {other:?}"),
    }
}

#[tokio::test]
async fn a_due_run_is_claimed_once_and_the_trigger_moves_on() {
    let (_place, store) = temp_store().await;
    store
        .create_trigger(P, &record("trg_1", 1_000, None))
        .await
        .unwrap();
    assert!(matches!(
        store.create_trigger(P, &record("trg_1", 1_000, None)).await,
        Err(hookbox_store::Error::AlreadyExists { .. })
    ));
    assert!(store.get_trigger("other", "trg_1").await.unwrap().is_none());
    assert!(store.due_triggers(999, 10).await.unwrap().is_empty());
    let due = store.due_triggers(1_000, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].0, P);

    // Eight claims of the same run at once: exactly one runs it.
    let claims = (0..8).map(|_| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .start_trigger_execution(P, "trg_1", Some((1_000, Some(301_000))), NOW, NOW)
                .await
                .unwrap()
        })
    });
    let mut runs = 0;
    for claim in claims {
        match claim.await.unwrap() {
            RunStart::Run(_) => runs += 1,
            RunStart::Lost => {}
            RunStart::Skipped(e) => panic!("skipped: {e:?}"),
        }
    }
    assert_eq!(runs, 1);
    let after = store.get_trigger(P, "trg_1").await.unwrap().unwrap();
    assert_eq!(after.next_run_ms, Some(301_000));
    assert_eq!(
        after.trigger.next_run_time.as_deref(),
        Some("1970-01-01T00:05:01Z")
    );
    assert_eq!(after.trigger.last_run_time.as_deref(), Some(NOW));
    assert!(store.due_triggers(300_999, 10).await.unwrap().is_empty());

    // While it runs, the next run is skipped (and recorded).
    let skipped = store
        .start_trigger_execution(P, "trg_1", Some((301_000, Some(601_000))), NOW, NOW)
        .await
        .unwrap();
    assert!(matches!(skipped, RunStart::Skipped(ref e) if e.status == ExecutionStatus::Skipped));
    let listed = store
        .list_trigger_executions(P, "trg_1", &Page::default())
        .await
        .unwrap()
        .items;
    assert_eq!(
        listed.iter().map(|e| e.status).collect::<Vec<_>>(),
        [ExecutionStatus::Skipped, ExecutionStatus::InProgress]
    );
    assert!(
        store
            .list_trigger_executions("other", "trg_1", &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(store.delete_trigger(P, "trg_1").await.unwrap());
    assert!(
        store
            .list_trigger_executions(P, "trg_1", &Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

#[tokio::test]
async fn executions_end_with_their_interaction_and_failures_pause_the_trigger() {
    let (_place, store) = temp_store().await;
    let store = &*store;
    store
        .create_trigger(P, &record("trg_1", 1_000, Some(2)))
        .await
        .unwrap();

    // A run whose interaction completes.
    let e1 = started(
        store
            .start_trigger_execution(P, "trg_1", None, NOW, NOW)
            .await
            .unwrap(),
    );
    interaction(store, "int_1").await;
    store
        .attach_trigger_interaction(P, &e1.id, "int_1", Some("env_1"), NOW)
        .await
        .unwrap();
    end(store, "int_1", InteractionStatus::Completed).await;
    let t = store.get_trigger(P, "trg_1").await.unwrap().unwrap();
    assert_eq!(t.trigger.previous_interaction_id.as_deref(), Some("int_1"));
    assert_eq!(t.trigger.consecutive_failure_count, 0);

    // One whose interaction failed before it was even linked.
    let e2 = started(
        store
            .start_trigger_execution(P, "trg_1", None, NOW, NOW)
            .await
            .unwrap(),
    );
    interaction(store, "int_2").await;
    end(store, "int_2", InteractionStatus::Failed).await;
    store
        .attach_trigger_interaction(P, &e2.id, "int_2", None, NOW)
        .await
        .unwrap();
    let t = store.get_trigger(P, "trg_1").await.unwrap().unwrap();
    assert_eq!(
        (t.trigger.consecutive_failure_count, t.trigger.status),
        (1, TriggerStatus::Active)
    );

    // A time-out is the second failure in a row: the trigger stops (status error).
    let e3 = started(
        store
            .start_trigger_execution(P, "trg_1", None, NOW, NOW)
            .await
            .unwrap(),
    );
    assert!(
        store
            .end_trigger_execution(
                P,
                &e3.id,
                ExecutionStatus::TimedOut,
                Some("timed out after 1 s"),
                NOW
            )
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_trigger_execution(P, &e3.id, ExecutionStatus::Failed, None, NOW)
            .await
            .unwrap()
    );
    let t = store.get_trigger(P, "trg_1").await.unwrap().unwrap();
    assert_eq!(t.trigger.status, TriggerStatus::Error);
    assert_eq!(t.next_run_ms, None);
    assert!(store.due_triggers(i64::MAX, 10).await.unwrap().is_empty());

    let listed = store
        .list_trigger_executions(P, "trg_1", &Page::default())
        .await
        .unwrap()
        .items;
    let shown: Vec<_> = listed
        .iter()
        .map(|e| (e.status, e.interaction_id.as_deref(), e.error.is_some()))
        .collect();
    assert_eq!(
        shown,
        [
            (ExecutionStatus::TimedOut, None, true),
            (ExecutionStatus::Failed, Some("int_2"), true),
            (ExecutionStatus::Completed, Some("int_1"), false),
        ]
    );
    assert_eq!(listed[2].environment_id.as_deref(), Some("env_1"));

    // Resumed: active again, failures cleared, the next run set; paused: no next run.
    let resumed = store
        .update_trigger(
            P,
            "trg_1",
            &TriggerUpdate {
                status: Some(TriggerStatus::Active),
                ..Default::default()
            },
            Some(5_000),
            NOW,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (resumed.trigger.status, resumed.next_run_ms),
        (TriggerStatus::Active, Some(5_000))
    );
    assert_eq!(resumed.trigger.consecutive_failure_count, 0);
    let paused = store
        .update_trigger(
            P,
            "trg_1",
            &TriggerUpdate {
                status: Some(TriggerStatus::Paused),
                display_name: Some("nightly".into()),
            },
            None,
            NOW,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (paused.trigger.status, paused.next_run_ms),
        (TriggerStatus::Paused, None)
    );
    assert_eq!(paused.trigger.display_name.as_deref(), Some("nightly"));
    // A paused trigger's scheduled claim is lost.
    assert_eq!(
        store
            .start_trigger_execution(P, "trg_1", Some((5_000, Some(6_000))), NOW, NOW)
            .await
            .unwrap(),
        RunStart::Lost
    );
    assert_eq!(
        store
            .list_triggers(P, &Page::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}
