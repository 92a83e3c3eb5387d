//! Calls paused for a reviewer through the router: `GET /approvals` shows a project its own
//! paused calls (pending ones by default) and nobody else's; another project's answer is "not
//! found", exactly like an unknown id, and settles nothing.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::Harness;

const KEY_A: &str = "team-a:key-of-a";
const KEY_B: &str = "team-b:key-of-b";

async fn call(
    h: &Harness,
    key: &str,
    method: Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let key = key.split_once(':').map_or(key, |(_, k)| k);
    let (status, _, bytes) = h
        .raw(
            method,
            uri,
            &[("x-goog-api-key", key)],
            body.map(|b| b.to_string().into_bytes()),
        )
        .await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn the_approvals_listing_is_per_project_and_another_project_cannot_answer() {
    let h = Harness::with_keys(vec![KEY_A.into(), KEY_B.into()]);
    let (s, paused) = call(
        &h,
        KEY_A,
        Method::POST,
        "/v1beta/interactions",
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `make deploy`"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{paused}");
    assert_eq!(paused["status"], "requires_action", "{paused}");
    let id = paused["id"].as_str().unwrap();

    let (s, mine) = call(&h, KEY_A, Method::GET, "/v1beta/approvals", None).await;
    assert_eq!(s, StatusCode::OK);
    let listed = mine["approvals"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{mine}");
    assert_eq!(listed[0]["interaction_id"], id);
    assert_eq!(listed[0]["state"], "pending");
    assert_eq!(listed[0]["args"]["code"], "make deploy");
    assert_eq!(listed[0]["environment_id"], paused["environment_id"]);
    let request = listed[0]["id"].as_str().unwrap();

    // Project B sees none of it, by any filter.
    for uri in [
        "/v1beta/approvals".to_owned(),
        "/v1beta/approvals?state=all".to_owned(),
        format!("/v1beta/approvals?interaction={id}&state=all"),
    ] {
        let (s, theirs) = call(&h, KEY_B, Method::GET, &uri, None).await;
        assert_eq!(
            (s, &theirs["approvals"]),
            (StatusCode::OK, &json!([])),
            "{uri}"
        );
    }
    // B's answer is what an answer to an unknown interaction is.
    let answer = |previous: &str| {
        json!({"agent": "antigravity-preview-09-2026", "previous_interaction_id": previous,
               "input": [{"type": "function_result", "call_id": request, "result": {"approved": true}}]})
    };
    let (s_b, by_b) = call(
        &h,
        KEY_B,
        Method::POST,
        "/v1beta/interactions",
        Some(answer(id)),
    )
    .await;
    let (s_none, none) = call(
        &h,
        KEY_B,
        Method::POST,
        "/v1beta/interactions",
        Some(answer("int_0000000000000000")),
    )
    .await;
    assert_eq!(s_b, StatusCode::NOT_FOUND, "{by_b}");
    assert_eq!(
        by_b["error"]["message"].as_str().unwrap().replace(id, "ID"),
        none["error"]["message"]
            .as_str()
            .unwrap()
            .replace("int_0000000000000000", "ID"),
        "{s_none}"
    );

    // A's own answer settles it; it then leaves the default (pending) listing.
    let (s, done) = call(
        &h,
        KEY_A,
        Method::POST,
        "/v1beta/interactions",
        Some(answer(id)),
    )
    .await;
    assert_eq!(
        (s, &done["status"]),
        (StatusCode::OK, &json!("completed")),
        "{done}"
    );
    let (_, pending) = call(&h, KEY_A, Method::GET, "/v1beta/approvals", None).await;
    assert_eq!(pending["approvals"], json!([]));
    let (_, all) = call(
        &h,
        KEY_A,
        Method::GET,
        &format!("/v1beta/approvals?interaction={id}&state=approved"),
        None,
    )
    .await;
    assert_eq!(all["approvals"][0]["settled_by"], done["id"], "{all}");
    let (s, bad) = call(
        &h,
        KEY_A,
        Method::GET,
        "/v1beta/approvals?state=maybe",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}");
}
