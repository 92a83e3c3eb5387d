//! Projects: two projects on one server, every route tried by one against the other's ids. The
//! other project's id must answer exactly as an id that does not exist (status and body), and
//! nothing of the other project may change.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::Harness;

const KEY_A: &str = "team-a:key-of-a";
const KEY_B: &str = "team-b:key-of-b";

fn harness() -> Harness {
    Harness::with_keys(vec![KEY_A.into(), KEY_B.into()])
}

fn key(spec: &str) -> &str {
    spec.split_once(':').map(|(_, k)| k).unwrap_or(spec)
}

/// Calls `uri` as the holder of `key_spec`; returns the status and the body (JSON, or text).
async fn call_as(
    h: &Harness,
    key_spec: &str,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut all = vec![("x-goog-api-key", key(key_spec))];
    all.extend_from_slice(headers);
    let (status, _, bytes) = h
        .raw(method, uri, &all, body.map(|b| b.to_string().into_bytes()))
        .await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, value)
}

/// What project A owns.
struct Owned {
    interaction: String,
    environment: String,
    session: String,
}

async fn populate_a(h: &Harness) -> Owned {
    let (s, env) = call_as(
        h,
        KEY_A,
        Method::POST,
        "/v1beta/environments",
        &[],
        Some(json!({"sources": [{"type": "inline", "target": "workspace/a.txt", "content": "only a"}]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{env}");
    let environment = env["id"].as_str().unwrap().to_owned();
    let (s, i) = call_as(
        h,
        KEY_A,
        Method::POST,
        "/v1beta/interactions",
        &[],
        Some(json!({"agent": "antigravity-preview-09-2026", "input": "run `echo hi`", "environment": environment})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{i}");
    let interaction = i["id"].as_str().unwrap().to_owned();
    let (s, c) = call_as(
        h,
        KEY_A,
        Method::POST,
        "/v1beta/credentials",
        &[],
        Some(json!({"id": "cred-a", "type": "bearer_token", "token": "secret-of-a"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let (s, a) = call_as(
        h,
        KEY_A,
        Method::POST,
        "/v1beta/agents",
        &[],
        Some(json!({"id": "agent-a", "base_agent": "antigravity-preview-09-2026"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let (s, hdrs, _) = h
        .raw(
            Method::PUT,
            &format!("/upload/v1beta/environments/{environment}/files/workspace/up.txt"),
            &[
                ("x-goog-api-key", key(KEY_A)),
                ("x-goog-upload-protocol", "resumable"),
                ("x-goog-upload-command", "start"),
            ],
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let url = hdrs["x-goog-upload-url"].to_str().unwrap();
    let session = url.rsplit('/').next().unwrap().to_owned();
    Owned {
        interaction,
        environment,
        session,
    }
}

/// Everything A can read of its own resources, to compare before and after B's attempts.
async fn snapshot_a(h: &Harness, owned: &Owned) -> Vec<Value> {
    let mut out = Vec::new();
    for uri in [
        format!("/v1beta/interactions/{}", owned.interaction),
        format!("/v1beta/environments/{}", owned.environment),
        format!(
            "/v1beta/environments/{}/files/workspace?recursive=true",
            owned.environment
        ),
        format!(
            "/v1beta/environments/{}/files/workspace/a.txt?alt=media",
            owned.environment
        ),
        "/v1beta/credentials/cred-a".to_owned(),
        "/v1beta/agents/agent-a".to_owned(),
        "/v1beta/environments".to_owned(),
        "/v1beta/credentials".to_owned(),
        "/v1beta/agents".to_owned(),
    ] {
        let (s, mut v) = call_as(h, KEY_A, Method::GET, &uri, &[], None).await;
        assert_eq!(s, StatusCode::OK, "{uri}: {v}");
        // Reads touch `last_accessed`; everything else must be identical.
        strip_access_times(&mut v);
        out.push(v);
    }
    out
}

fn strip_access_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("last_accessed");
            map.remove("lastAccessed");
            map.values_mut().for_each(strip_access_times);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_access_times),
        _ => {}
    }
}

/// One route, filled with either A's real id or a well-formed id that exists nowhere.
struct Route {
    method: Method,
    uri: String,
    headers: Vec<(&'static str, &'static str)>,
    body: Option<Value>,
}

fn routes(int: &str, env: &str, session: &str) -> Vec<Route> {
    let r = |method: Method, uri: String, body: Option<Value>| Route {
        method,
        uri,
        headers: Vec::new(),
        body,
    };
    let mut routes = vec![
        r(Method::GET, format!("/v1beta/interactions/{int}"), None),
        r(
            Method::GET,
            format!("/v1beta/interactions/{int}?stream=true"),
            None,
        ),
        r(
            Method::POST,
            format!("/v1beta/interactions/{int}/cancel"),
            None,
        ),
        r(Method::DELETE, format!("/v1beta/interactions/{int}"), None),
        r(
            Method::POST,
            "/v1beta/interactions".into(),
            Some(
                json!({"agent": "antigravity-preview-09-2026", "input": "hi", "previous_interaction_id": int}),
            ),
        ),
        r(
            Method::POST,
            "/v1beta/interactions".into(),
            Some(
                json!({"agent": "antigravity-preview-09-2026", "input": "run `cat /workspace/a.txt`", "environment": env}),
            ),
        ),
        r(
            Method::POST,
            "/v1beta/interactions".into(),
            Some(
                json!({"agent": "antigravity-preview-09-2026", "input": "hi", "environment": {"type": "remote", "environment_id": env, "sources": [{"type": "inline", "target": "workspace/b.txt", "content": "from b"}]}}),
            ),
        ),
        r(Method::GET, format!("/v1beta/environments/{env}"), None),
        r(Method::DELETE, format!("/v1beta/environments/{env}"), None),
        r(
            Method::GET,
            format!("/v1beta/environments/{env}/files"),
            None,
        ),
        r(
            Method::GET,
            format!("/v1beta/environments/{env}/files/workspace/a.txt?alt=media"),
            None,
        ),
        r(
            Method::POST,
            "/v1beta/environments".into(),
            Some(json!({"from_environment": env})),
        ),
    ];
    routes.push(Route {
        method: Method::PUT,
        uri: format!("/upload/v1beta/environments/{env}/files/workspace/evil.txt"),
        headers: vec![
            ("x-goog-upload-protocol", "resumable"),
            ("x-goog-upload-command", "start"),
        ],
        body: None,
    });
    routes.push(Route {
        method: Method::POST,
        uri: format!("/upload/v1beta/sessions/{session}"),
        headers: vec![
            ("x-goog-upload-command", "upload, finalize"),
            ("x-goog-upload-offset", "0"),
        ],
        body: Some(json!("overwritten by b")),
    });
    routes
}

/// Credential and agent routes take ids a client chose; `id` is one of A's or a missing one.
fn named_routes(cred: &str, agent: &str) -> Vec<Route> {
    let r = |method: Method, uri: String, body: Option<Value>| Route {
        method,
        uri,
        headers: Vec::new(),
        body,
    };
    vec![
        r(Method::GET, format!("/v1beta/credentials/{cred}"), None),
        r(
            Method::PATCH,
            format!("/v1beta/credentials/{cred}?update_mask=token"),
            Some(json!({"type": "bearer_token", "token": "stolen"})),
        ),
        r(Method::DELETE, format!("/v1beta/credentials/{cred}"), None),
        r(Method::GET, format!("/v1beta/agents/{agent}"), None),
        r(Method::DELETE, format!("/v1beta/agents/{agent}"), None),
        r(
            Method::POST,
            "/v1beta/interactions".into(),
            Some(json!({"agent": agent, "input": "hi"})),
        ),
    ]
}

async fn send(h: &Harness, key_spec: &str, route: &Route) -> (StatusCode, Value) {
    call_as(
        h,
        key_spec,
        route.method.clone(),
        &route.uri,
        &route.headers,
        route.body.clone(),
    )
    .await
}

#[tokio::test]
async fn another_projects_ids_answer_like_missing_ones_on_every_route() {
    let h = harness();
    let owned = populate_a(&h).await;
    let before = snapshot_a(&h, &owned).await;

    let real = routes(&owned.interaction, &owned.environment, &owned.session);
    let missing = routes(
        "int_00000000deadbeef",
        "env_0000000000000000",
        "upl_00000000deadbeef",
    );
    let mut real_named = named_routes("cred-a", "agent-a");
    let missing_named = named_routes("cred-zz", "agent-zz");
    let mut pairs: Vec<(Route, Route)> = real.into_iter().zip(missing).collect();
    pairs.extend(real_named.drain(..).zip(missing_named));
    let ids = [
        (owned.interaction.as_str(), "int_00000000deadbeef"),
        (owned.environment.as_str(), "env_0000000000000000"),
        (owned.session.as_str(), "upl_00000000deadbeef"),
        ("cred-a", "cred-zz"),
        ("agent-a", "agent-zz"),
    ];
    for (real, missing) in &pairs {
        let (s_real, body_real) = send(&h, KEY_B, real).await;
        let (s_missing, body_missing) = send(&h, KEY_B, missing).await;
        assert!(
            s_real.is_client_error(),
            "{} {} as B: {s_real} {body_real}",
            real.method,
            real.uri
        );
        assert_eq!(
            s_real, s_missing,
            "{} {}: {body_real} vs {body_missing}",
            real.method, real.uri
        );
        let mut shown = body_real.to_string();
        for (id, stand_in) in ids {
            shown = shown.replace(id, stand_in);
        }
        assert_eq!(
            shown,
            body_missing.to_string(),
            "{} {}",
            real.method,
            real.uri
        );
        if s_real == StatusCode::NOT_FOUND {
            assert_eq!(body_real["error"]["status"], "NOT_FOUND");
        }
    }

    // B's listings hold nothing of A's.
    for uri in [
        "/v1beta/environments",
        "/v1beta/credentials",
        "/v1beta/agents",
    ] {
        let (s, list) = call_as(&h, KEY_B, Method::GET, uri, &[], None).await;
        assert_eq!(s, StatusCode::OK);
        let text = list.to_string();
        assert!(
            !text.contains(&owned.environment)
                && !text.contains("cred-a")
                && !text.contains("agent-a"),
            "{uri}: {text}"
        );
    }

    // Nothing of A changed, and A's upload session still works for A.
    assert_eq!(snapshot_a(&h, &owned).await, before);
    let (s, _, _) = h
        .raw(
            Method::POST,
            &format!("/upload/v1beta/sessions/{}", owned.session),
            &[
                ("x-goog-api-key", key(KEY_A)),
                ("x-goog-upload-command", "upload, finalize"),
                ("x-goog-upload-offset", "0"),
            ],
            Some(b"from a".to_vec()),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn the_same_credential_id_in_two_projects_is_two_credentials() {
    let h = harness();
    for (k, token) in [(KEY_A, "token-a"), (KEY_B, "token-b")] {
        let (s, c) = call_as(
            &h,
            k,
            Method::POST,
            "/v1beta/credentials",
            &[],
            Some(json!({"id": "telemetry", "type": "bearer_token", "token": token})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{c}");
    }
    let (s, _) = call_as(
        &h,
        KEY_B,
        Method::DELETE,
        "/v1beta/credentials/telemetry",
        &[],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, c) = call_as(
        &h,
        KEY_A,
        Method::GET,
        "/v1beta/credentials/telemetry",
        &[],
        None,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::OK,
        "A's credential survives B deleting its own: {c}"
    );
}

#[tokio::test]
async fn bare_keys_are_projects_of_their_own_and_shared_prefixes_share_one() {
    let h = Harness::with_keys(vec![
        "k1".into(),
        "k2".into(),
        "ops:k3".into(),
        "ops:k4".into(),
    ]);
    let create = |k: &'static str| {
        let h = &h;
        async move {
            let (s, env) = call_as(
                h,
                k,
                Method::POST,
                "/v1beta/environments",
                &[],
                Some(json!({})),
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{env}");
            env["id"].as_str().unwrap().to_owned()
        }
    };
    let e1 = create("k1").await;
    let e3 = create("ops:k3").await;
    let get = |k: &'static str, id: String| {
        let h = &h;
        async move {
            call_as(
                h,
                k,
                Method::GET,
                &format!("/v1beta/environments/{id}"),
                &[],
                None,
            )
            .await
            .0
        }
    };
    assert_eq!(get("k1", e1.clone()).await, StatusCode::OK);
    assert_eq!(get("k2", e1.clone()).await, StatusCode::NOT_FOUND);
    assert_eq!(get("ops:k3", e1).await, StatusCode::NOT_FOUND);
    assert_eq!(get("ops:k4", e3.clone()).await, StatusCode::OK);
    assert_eq!(get("k2", e3).await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn managed_keys_authenticate_into_their_project_until_revoked() {
    let h = harness();
    let store = hookbox_store::SqliteStore::open(
        &h.dir.path().join("hookbox.db"),
        hookbox_store::SecretKey::from_bytes([9; 32]),
        &Default::default(),
    )
    .unwrap();
    use hookbox_store::Store;
    store
        .create_project(&hookbox_store::ProjectRecord {
            name: "team-a".into(),
            created: "t".into(),
            quotas: Default::default(),
        })
        .await
        .unwrap();
    let managed = hookbox_store::keys::generate();
    store
        .create_api_key(
            &hookbox_store::ApiKeyRecord {
                id: managed.id.clone(),
                project: "team-a".into(),
                prefix: managed.prefix.clone(),
                created: "t".into(),
                revoked: None,
            },
            &managed.sha256,
        )
        .await
        .unwrap();
    let owned = populate_a(&h).await;
    let uri = format!("/v1beta/environments/{}", owned.environment);
    let as_managed = |uri: String| {
        let h = &h;
        let k = managed.key.clone();
        async move {
            h.raw(Method::GET, &uri, &[("x-goog-api-key", &k)], None)
                .await
                .0
        }
    };
    assert_eq!(as_managed(uri.clone()).await, StatusCode::OK);
    assert!(store.revoke_api_key(&managed.id, "t").await.unwrap());
    assert_eq!(as_managed(uri).await, StatusCode::UNAUTHORIZED);
}
