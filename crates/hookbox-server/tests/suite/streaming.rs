use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Harness, RM_REASON, seed_environment, sse_events};

async fn stream_create(h: &Harness, input: &str) -> (Vec<Value>, String) {
    let body = json!({"agent": "antigravity-preview-09-2026", "input": input, "stream": true, "environment": seed_environment()});
    let (status, headers, bytes) = h
        .raw(
            Method::POST,
            "/v1/interactions",
            &[("accept", "text/event-stream")],
            Some(body.to_string().into_bytes()),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = String::from_utf8(bytes).unwrap();
    let datas = sse_events(&text);
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
    let events = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .collect();
    (events, text)
}

#[tokio::test]
async fn stream_carries_every_step_in_sdk_shapes() {
    let h = Harness::new();
    let (events, _) = stream_create(&h, "Run `rm -rf /tmp/forbidden` using code_execution.").await;
    let kinds: Vec<_> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "interaction.created",
            "step.start",
            "step.stop", // user_input
            "step.start",
            "step.stop", // code_execution_call
            "step.start",
            "step.delta",
            "step.stop", // code_execution_result
            "step.start",
            "step.delta",
            "step.stop", // model_output
            "interaction.completed"
        ]
    );
    // Every event carries a distinct, increasing event_id.
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e["event_id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1));
    let created = &events[0]["interaction"];
    assert_eq!(created["status"], "in_progress");
    assert!(
        created["environment_id"]
            .as_str()
            .unwrap()
            .starts_with("env_")
    );
    assert_eq!(events[3]["step"]["type"], "code_execution_call");
    assert_eq!(
        events[6]["delta"],
        json!({"type": "code_execution_result", "result": RM_REASON, "is_error": true})
    );
    assert_eq!(
        events[8]["step"],
        json!({"type": "model_output", "content": []})
    );
    assert!(
        events[9]["delta"]["text"]
            .as_str()
            .unwrap()
            .contains(RM_REASON)
    );
    let done = &events[11]["interaction"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["environment_id"], created["environment_id"]);
    // The same events come back from GET ?stream=true, and resuming skips what was seen.
    let id = created["id"].as_str().unwrap();
    let (_, _, replay) = h
        .raw(
            Method::GET,
            &format!("/v1/interactions/{id}?stream=true"),
            &[],
            None,
        )
        .await;
    let replay: Vec<Value> = sse_events(&String::from_utf8(replay).unwrap())
        .iter()
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(replay.len(), events.len());
    assert_eq!(replay[6], events[6]);
    let (_, _, resumed) = h
        .raw(
            Method::GET,
            &format!("/v1/interactions/{id}?stream=true&last_event_id=8"),
            &[],
            None,
        )
        .await;
    let resumed = sse_events(&String::from_utf8(resumed).unwrap());
    assert_eq!(resumed.len(), 4, "{resumed:?}"); // events 9, 10, 11 and [DONE]
    assert!(resumed[0].contains("\"event_id\":\"9\""));
}

#[tokio::test]
async fn failed_runs_stream_an_error_event() {
    // One model turn is not enough for a tool call plus an answer.
    let h = {
        let dir = tempfile::tempdir().unwrap();
        let store = hookbox_store::SqliteStore::open(
            &dir.path().join("db"),
            hookbox_store::SecretKey::from_bytes([1; 32]),
            &Default::default(),
        )
        .unwrap();
        let store: std::sync::Arc<dyn hookbox_store::Store> = std::sync::Arc::new(store);
        let local = std::sync::Arc::new(hookbox_test_support::LocalBackend::new(dir.path()));
        let state = hookbox_server::AppState::new(hookbox_server::Services {
            store: store.clone(),
            model: std::sync::Arc::new(hookbox_agent::offline::OfflineModel::new().unwrap()),
            executor: local.clone(),
            environments: local,
            api_keys: vec![],
            allow_keyless: true,
            loop_config: hookbox_agent::LoopConfig {
                max_model_turns: 1,
                ..Default::default()
            },
            quotas: Default::default(),
            sandbox_slots: None,
            lifecycle: Default::default(),
            uploads: Default::default(),
        });
        Harness { dir, state, store }
    };
    let (events, _) = stream_create(&h, "run `true`").await;
    let n = events.len();
    assert_eq!(events[n - 2]["event_type"], "error");
    assert_eq!(events[n - 2]["error"]["code"], "step_budget_exceeded");
    assert_eq!(events[n - 1]["interaction"]["status"], "budget_exceeded");
}
