use axum::http::{Method, StatusCode};
use serde_json::json;

use super::{Harness, PII_REASON, RM_REASON, output_text, seed_environment};

#[tokio::test]
async fn security_gate_denial_reaches_output_text() {
    let h = Harness::new();
    let i = h
        .interact(json!({
            "agent": "antigravity-preview-09-2026",
            "input": "Run `rm -rf /tmp/forbidden` using code_execution.",
            "environment": seed_environment(),
            "tools": [{"type": "code_execution"}]
        }))
        .await;
    assert_eq!(i["status"], "completed");
    assert!(i["id"].as_str().unwrap().starts_with("int_"));
    assert!(i["environment_id"].as_str().unwrap().starts_with("env_"));
    let types: Vec<_> = i["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "user_input",
            "code_execution_call",
            "code_execution_result",
            "model_output"
        ]
    );
    assert_eq!(i["steps"][2]["is_error"], true);
    assert_eq!(i["steps"][2]["call_id"], i["steps"][1]["id"]);
    assert!(output_text(&i).contains(RM_REASON), "{}", output_text(&i));
    assert_eq!(i["tools"], json!([{"type": "code_execution"}]));
    assert!(i.get("input").is_none());
    assert!(i["created"].as_str().unwrap().ends_with('Z'));
    // GET returns the same stored interaction.
    let (status, got) = h
        .call(
            Method::GET,
            &format!(
                "/v1/interactions/{}?stream=false",
                i["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["steps"], i["steps"]);
    let (_, with_input) = h
        .call(
            Method::GET,
            &format!(
                "/v1/interactions/{}?stream=false&include_input=true",
                i["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(
        with_input["input"],
        "Run `rm -rf /tmp/forbidden` using code_execution."
    );
}

#[tokio::test]
async fn privacy_gate_then_previous_interaction_continues_in_the_same_environment() {
    let h = Harness::new();
    let int1 = h
        .interact(json!({
            "agent": "antigravity-preview-09-2026",
            "input": "Use your filesystem tool to read `/workspace/private/employees.json` and summarize the employee details.",
            "environment": seed_environment()
        }))
        .await;
    assert!(output_text(&int1).contains(PII_REASON));
    assert_eq!(int1["steps"][1]["type"], "function_call");
    assert_eq!(int1["steps"][1]["name"], "view_file");
    let env = int1["environment_id"].as_str().unwrap();

    let int2 = h
        .interact(json!({
            "agent": "antigravity-preview-09-2026",
            "input": "Understood. Please read the approved `/workspace/public/summary.json` file instead and provide the summary.",
            "environment": env,
            "previous_interaction_id": int1["id"]
        }))
        .await;
    assert_eq!(int2["environment_id"], env);
    assert_eq!(int2["previous_interaction_id"], int1["id"]);
    assert!(
        output_text(&int2).contains("\"team_size\": 42"),
        "{}",
        output_text(&int2)
    );
    // Only this turn's steps are returned, starting with its user_input.
    assert_eq!(int2["steps"][0]["type"], "user_input");
    assert_eq!(int2["steps"].as_array().unwrap().len(), 4);

    // Without `environment`, the previous interaction's environment is reused.
    let int3 = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "list `/workspace/public`", "previous_interaction_id": int2["id"]}))
        .await;
    assert_eq!(int3["environment_id"], env);
    assert!(output_text(&int3).contains("summary.json"));
}

#[tokio::test]
async fn input_forms_are_normalised() {
    let h = Harness::new();
    for input in [
        json!("run `echo one`"),
        json!({"type": "text", "text": "run `echo one`"}),
        json!([{"type": "text", "text": "run `echo one`"}]),
        json!([{"text": "run `echo one`"}]),
        json!([{"type": "user_input", "content": [{"type": "text", "text": "run `echo one`"}]}]),
    ] {
        let i = h
            .interact(json!({"agent": "antigravity-preview-09-2026", "input": input}))
            .await;
        assert_eq!(i["steps"][0]["type"], "user_input", "{input}");
        assert_eq!(
            i["steps"][0]["content"][0]["text"], "run `echo one`",
            "{input}"
        );
        assert!(
            output_text(&i).contains("one"),
            "{input}: {}",
            output_text(&i)
        );
    }
}

#[tokio::test]
async fn background_returns_at_once_and_the_result_is_stored() {
    let h = Harness::new();
    let (status, i) = h.call(Method::POST, "/v1beta/interactions", Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo bg`", "background": true}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(i["status"], "in_progress");
    let id = i["id"].as_str().unwrap();
    // Streaming GET ends when the run ends: no sleeping.
    let (_, _, body) = h
        .raw(
            Method::GET,
            &format!("/v1beta/interactions/{id}?stream=true"),
            &[],
            None,
        )
        .await;
    assert!(
        String::from_utf8(body)
            .unwrap()
            .ends_with("data: [DONE]\n\n")
    );
    let (_, done) = h
        .call(
            Method::GET,
            &format!("/v1beta/interactions/{id}?stream=false"),
            None,
        )
        .await;
    assert_eq!(done["status"], "completed");
    assert!(output_text(&done).contains("bg"));
}

#[tokio::test]
async fn cancel_stops_a_running_command_and_delete_removes() {
    let h = Harness::new();
    let (_, i) = h.call(Method::POST, "/v1beta/interactions", Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `sleep 600`", "background": true}))).await;
    let id = i["id"].as_str().unwrap().to_owned();
    let (status, cancelled) = h
        .call(
            Method::POST,
            &format!("/v1beta/interactions/{id}/cancel"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(h.state.running_count(), 0);
    let (status, body) = h
        .call(Method::DELETE, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (status, _) = h
        .call(
            Method::GET,
            &format!("/v1beta/interactions/{id}?stream=false"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn store_false_is_not_retrievable_afterwards() {
    let h = Harness::new();
    let i = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "hi", "store": false}))
        .await;
    assert_eq!(i["status"], "completed");
    let (status, _) = h
        .call(
            Method::GET,
            &format!(
                "/v1beta/interactions/{}?stream=false",
                i["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn restart_marks_running_interactions_failed_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = hookbox_store::SqliteStore::open(
            &dir.path().join("hookbox.db"),
            hookbox_store::SecretKey::from_bytes([9; 32]),
            &Default::default(),
        )
        .unwrap();
        let i = hookbox_protocol::api::Interaction::new(
            "int_stale",
            hookbox_protocol::api::InteractionStatus::InProgress,
        );
        hookbox_store::Store::create_interaction(&store, hookbox_store::DEFAULT_PROJECT, &i)
            .await
            .unwrap();
    }
    let h = Harness::in_dir(dir, vec![]);
    assert_eq!(h.state.recover().await.unwrap(), ["int_stale"]);
    let (_, i) = h
        .call(Method::GET, "/v1/interactions/int_stale?stream=false", None)
        .await;
    assert_eq!(i["status"], "failed");
    assert!(
        i["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("hookbox stopped")
    );
}

#[tokio::test]
async fn stored_agents_supply_defaults_and_unversioned_paths_work() {
    let h = Harness::new();
    let (status, _) = h.call(Method::POST, "/v1beta/agents", Some(json!({"id": "lister", "base_agent": "antigravity-preview-09-2026", "system_instruction": "s"}))).await;
    assert_eq!(status, StatusCode::OK);
    let (status, i) = h
        .call(
            Method::POST,
            "/interactions",
            Some(json!({"agent": "lister", "input": "run `echo via-agent`"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{i}");
    assert!(output_text(&i).contains("via-agent"));
}

#[tokio::test]
async fn embedded_environment_id_updates_that_environment() {
    let h = Harness::new();
    let (_, env) = h.call(Method::POST, "/v1/environments", Some(json!({"sources": [{"type": "inline", "target": "workspace/a.txt", "content": "A"}]}))).await;
    let id = env["id"].as_str().unwrap();
    let i = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "run `cat a.txt b.txt`",
            "environment": {"environment_id": id, "sources": [{"type": "inline", "target": "workspace/b.txt", "content": "B"}]}}))
        .await;
    assert_eq!(i["environment_id"], id);
    assert!(output_text(&i).ends_with("AB"), "{}", output_text(&i));
    let (_, env) = h
        .call(Method::GET, &format!("/v1/environments/{id}"), None)
        .await;
    assert_eq!(env["sources"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn interactions_are_listed_newest_first_with_filters() {
    let h = Harness::new();
    let first = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "Say hi.", "environment": seed_environment()}))
        .await;
    let env = first["environment_id"].as_str().unwrap();
    let second = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "Say hi again.", "environment": env}))
        .await;
    let (status, listed) = h.call(Method::GET, "/v1beta/interactions", None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let ids: Vec<&str> = listed["interactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            second["id"].as_str().unwrap(),
            first["id"].as_str().unwrap()
        ]
    );
    assert!(
        listed["interactions"][0]
            .get("steps")
            .is_none_or(|s| s.as_array().is_some_and(Vec::is_empty))
    );
    let (_, completed) = h
        .call(
            Method::GET,
            &format!("/v1beta/interactions?status=completed&environment={env}&page_size=1"),
            None,
        )
        .await;
    assert_eq!(completed["interactions"].as_array().unwrap().len(), 1);
    assert!(completed["next_page_token"].is_string(), "{completed}");
    let (_, none) = h
        .call(Method::GET, "/v1beta/interactions?status=failed", None)
        .await;
    assert_eq!(none["interactions"], json!([]));
    let (status, bad) = h
        .call(Method::GET, "/v1beta/interactions?status=sideways", None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

#[tokio::test]
async fn interactions_are_listed_with_their_hook_outcomes_on_request() {
    // #31: the console's list marks denies and fail-opens per row (`hooks=true`). The counts
    // from real hooks files are checked in tests/console; the counting is unit-tested.
    let h = Harness::new();
    let listed_one = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "Say hi.", "environment": seed_environment()}))
        .await;
    let (status, listed) = h
        .call(Method::GET, "/v1beta/interactions?hooks=true", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let row = &listed["interactions"][0];
    assert_eq!(row["id"], listed_one["id"]);
    assert_eq!(row["hook_outcomes"], json!({}), "{listed}");
    let (_, plain) = h.call(Method::GET, "/v1beta/interactions", None).await;
    assert!(plain["interactions"][0].get("hook_outcomes").is_none());
}

#[tokio::test]
async fn interactions_are_listed_by_the_interaction_they_continue() {
    // #31: the console links an interaction to its continuations (`previous_interaction`).
    let h = Harness::new();
    let first = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "Say hi.", "environment": seed_environment()}))
        .await;
    let id = first["id"].as_str().unwrap();
    let next = h
        .interact(json!({"agent": "antigravity-preview-09-2026", "input": "Say hi again.", "previous_interaction_id": id}))
        .await;
    h.interact(json!({"agent": "antigravity-preview-09-2026", "input": "Unrelated.", "environment": seed_environment()}))
        .await;
    for filter in [id.to_owned(), format!("interactions/{id}")] {
        let (status, listed) = h
            .call(
                Method::GET,
                &format!("/v1beta/interactions?previous_interaction={filter}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        let ids: Vec<&str> = listed["interactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [next["id"].as_str().unwrap()], "{listed}");
    }
}
