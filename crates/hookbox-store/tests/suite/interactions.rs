use super::P;
use hookbox_protocol::api::{Interaction, InteractionError, InteractionStatus, Step, Usage};
use hookbox_store::StatusUpdate;

use super::{open, temp_store};

fn interaction(id: &str) -> Interaction {
    let mut i = Interaction::new(id, InteractionStatus::InProgress);
    i.agent = Some("antigravity-preview-09-2026".into());
    i.environment_id = Some("env_1".into());
    i.created = Some("2026-05-20T10:00:00Z".into());
    i.updated = Some("2026-05-20T10:00:00Z".into());
    i.steps = vec![Step::user_text("hello")];
    i.extra.insert(
        "tools".into(),
        serde_json::json!([{"type": "code_execution"}]),
    );
    i
}

#[tokio::test]
async fn steps_are_appended_in_order_and_survive_reopen() {
    let (dir, store) = temp_store().await;
    store
        .create_interaction(P, &interaction("int_1"))
        .await
        .unwrap();
    store
        .append_step("int_1", 1, &Step::model_text("A"))
        .await
        .unwrap();
    store
        .append_step("int_1", 2, &Step::model_text("B"))
        .await
        .unwrap();
    store
        .update_status(
            "int_1",
            &StatusUpdate {
                status: InteractionStatus::Completed,
                usage: Some(Usage {
                    total_tokens: Some(3),
                    ..Usage::default()
                }),
                errors: vec![],
                updated: "2026-05-20T10:00:05Z".into(),
            },
        )
        .await
        .unwrap();
    drop(store);

    let store = open(&dir).await;
    let got = store.get_interaction(P, "int_1").await.unwrap().unwrap();
    assert_eq!(got.status, InteractionStatus::Completed);
    assert_eq!(got.steps.len(), 3);
    assert_eq!(hookbox_protocol::api::output_text(&got.steps), "AB");
    assert_eq!(got.updated.as_deref(), Some("2026-05-20T10:00:05Z"));
    assert_eq!(got.usage.unwrap().total_tokens, Some(3));
    assert_eq!(got.extra["tools"][0]["type"], "code_execution");
}

#[tokio::test]
async fn duplicate_ids_and_unknown_interactions_are_errors() {
    let (_dir, store) = temp_store().await;
    store
        .create_interaction(P, &interaction("int_1"))
        .await
        .unwrap();
    assert!(matches!(
        store.create_interaction(P, &interaction("int_1")).await,
        Err(hookbox_store::Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.append_step("nope", 0, &Step::model_text("x")).await,
        Err(hookbox_store::Error::NotFound { .. })
    ));
    assert!(store.get_interaction(P, "nope").await.unwrap().is_none());
}

#[tokio::test]
async fn delete_removes_interaction_and_steps() {
    let (_dir, store) = temp_store().await;
    store
        .create_interaction(P, &interaction("int_1"))
        .await
        .unwrap();
    assert!(store.delete_interaction(P, "int_1").await.unwrap());
    assert!(!store.delete_interaction(P, "int_1").await.unwrap());
    // Re-creating with the same id starts without the old steps.
    let mut fresh = interaction("int_1");
    fresh.steps.clear();
    store.create_interaction(P, &fresh).await.unwrap();
    assert!(
        store
            .get_interaction(P, "int_1")
            .await
            .unwrap()
            .unwrap()
            .steps
            .is_empty()
    );
}

#[tokio::test]
async fn recovery_fails_only_running_interactions_with_the_reason() {
    let (_dir, store) = temp_store().await;
    store
        .create_interaction(P, &interaction("int_run"))
        .await
        .unwrap();
    let mut done = interaction("int_done");
    done.status = InteractionStatus::Completed;
    store.create_interaction(P, &done).await.unwrap();
    let mut queued = interaction("int_queued");
    queued.status = InteractionStatus::Queued;
    store.create_interaction(P, &queued).await.unwrap();

    let ids = store
        .recover_interrupted("hookbox restarted", "2026-05-21T00:00:00Z")
        .await
        .unwrap();
    assert_eq!(ids, ["int_run", "int_queued"]);
    let run = store.get_interaction(P, "int_run").await.unwrap().unwrap();
    assert_eq!(run.status, InteractionStatus::Failed);
    assert_eq!(
        run.errors,
        [InteractionError {
            code: "interrupted".into(),
            message: "hookbox restarted".into()
        }]
    );
    let done = store.get_interaction(P, "int_done").await.unwrap().unwrap();
    assert_eq!(done.status, InteractionStatus::Completed);
    assert!(
        store
            .recover_interrupted("again", "x")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn schema_is_versioned_and_newer_schemas_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = super::sqlite_open(dir.path());
    assert_eq!(
        store.schema_version().await.unwrap(),
        hookbox_store::sqlite::SCHEMA_VERSION
    );
    drop(store);
    let conn = rusqlite::Connection::open(dir.path().join("hookbox.db")).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = hookbox_store::SqliteStore::open(
        &dir.path().join("hookbox.db"),
        hookbox_store::SecretKey::from_bytes([42; 32]),
        &Default::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, hookbox_store::Error::SchemaTooNew { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn listing_filters_pages_newest_first_and_stays_in_its_project() {
    let (_dir, store) = temp_store().await;
    for (i, (status, agent, env)) in [
        (InteractionStatus::Completed, "a1", "env_1"),
        (InteractionStatus::Failed, "a1", "env_2"),
        (InteractionStatus::Completed, "a2", "env_1"),
        (InteractionStatus::Completed, "a1", "env_1"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut it = interaction(&format!("int_{i}"));
        it.status = status;
        it.agent = Some(agent.into());
        it.environment_id = Some(env.into());
        it.created = Some(format!("2026-05-20T10:00:0{i}Z"));
        store.create_interaction(P, &it).await.unwrap();
    }
    let mut other = interaction("int_other");
    other.status = InteractionStatus::Completed;
    store.create_interaction("other", &other).await.unwrap();

    let ids = |page: &hookbox_store::Paged<Interaction>| {
        page.items.iter().map(|i| i.id.clone()).collect::<Vec<_>>()
    };
    let all = store
        .list_interactions(P, &Default::default(), &Default::default())
        .await
        .unwrap();
    assert_eq!(ids(&all), ["int_3", "int_2", "int_1", "int_0"]);
    assert!(all.items.iter().all(|i| i.steps.is_empty()));
    let filter = hookbox_store::InteractionFilter {
        status: Some("completed".into()),
        agent: Some("a1".into()),
        environment_id: Some("env_1".into()),
        ..Default::default()
    };
    let matching = store
        .list_interactions(P, &filter, &Default::default())
        .await
        .unwrap();
    assert_eq!(ids(&matching), ["int_3", "int_0"]);
    let window = hookbox_store::InteractionFilter {
        created_after: Some("2026-05-20T10:00:01Z".into()),
        created_before: Some("2026-05-20T10:00:03Z".into()),
        ..Default::default()
    };
    let between = store
        .list_interactions(P, &window, &Default::default())
        .await
        .unwrap();
    assert_eq!(ids(&between), ["int_2", "int_1"]);
    // The continuations of one interaction (the console's link back from what was continued).
    let mut next = interaction("int_next");
    next.previous_interaction_id = Some("int_1".into());
    store.create_interaction(P, &next).await.unwrap();
    let mut elsewhere = interaction("int_next_other");
    elsewhere.previous_interaction_id = Some("int_1".into());
    store.create_interaction("other", &elsewhere).await.unwrap();
    let continued = hookbox_store::InteractionFilter {
        previous_interaction_id: Some("int_1".into()),
        ..Default::default()
    };
    let continuations = store
        .list_interactions(P, &continued, &Default::default())
        .await
        .unwrap();
    assert_eq!(ids(&continuations), ["int_next"]);
    store.delete_interaction(P, "int_next").await.unwrap();
    // Pages of two, then the rest.
    let first = store
        .list_interactions(
            P,
            &Default::default(),
            &hookbox_store::Page {
                size: Some(2),
                token: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(&first), ["int_3", "int_2"]);
    let second = store
        .list_interactions(
            P,
            &Default::default(),
            &hookbox_store::Page {
                size: Some(2),
                token: first.next_page_token.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(ids(&second), ["int_1", "int_0"]);
    assert_eq!(second.next_page_token, None);
}

#[tokio::test]
async fn interaction_hooks_traces_are_kept_per_event_and_only_get_shows_them() {
    let (_dir, store) = temp_store().await;
    store
        .create_interaction(P, &interaction("int_h"))
        .await
        .unwrap();
    let fresh = store.get_interaction(P, "int_h").await.unwrap().unwrap();
    assert_eq!(fresh.hooks, None);
    let patch = |key: &str, value: serde_json::Value| {
        let mut map = serde_json::Map::new();
        map.insert(key.into(), value);
        map
    };
    store
        .record_interaction_hooks(
            "int_h",
            &patch(
                "pre",
                serde_json::json!({"decision": "allow", "trace": [{"outcome": "failed_open"}]}),
            ),
        )
        .await
        .unwrap();
    store
        .record_interaction_hooks(
            "int_h",
            &patch(
                "post",
                serde_json::json!({"decision": "allow", "trace": []}),
            ),
        )
        .await
        .unwrap();
    // A run going on in place runs its post hooks again: the new trace replaces the old one,
    // the pre trace stays.
    store
        .record_interaction_hooks(
            "int_h",
            &patch(
                "post",
                serde_json::json!({"trace": [{"outcome": "completed"}]}),
            ),
        )
        .await
        .unwrap();
    let got = store.get_interaction(P, "int_h").await.unwrap().unwrap();
    assert_eq!(
        got.hooks,
        Some(serde_json::json!({
            "pre": {"decision": "allow", "trace": [{"outcome": "failed_open"}]},
            "post": {"trace": [{"outcome": "completed"}]},
        }))
    );
    assert!(got.extra.get("hooks").is_none());
    let listed = store
        .list_interactions(P, &Default::default(), &Default::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].hooks, None);
    assert!(matches!(
        store
            .record_interaction_hooks("int_missing", &patch("pre", serde_json::json!({})))
            .await,
        Err(hookbox_store::Error::NotFound { .. })
    ));
    // Another project's reader does not see it.
    assert!(
        store
            .get_interaction("other", "int_h")
            .await
            .unwrap()
            .is_none()
    );
}
