//! Live interactions over a real WebSocket (`/v1beta/interactions/live`) on 127.0.0.1: the
//! frames, turns stored like any step, `idle` between turns, complete, cancel, reconnecting,
//! and the bounds (frame size, frames per second, idle timeout, sockets per project, the
//! browser guard on the upgrade). Every wait is on a frame, with a bound that only fails a hung
//! test.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use futures::{SinkExt, StreamExt};
use hookbox_server::app;
use hookbox_test_support::{TestServer, spawn_server};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::Harness;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Only a hung test waits this long.
const HUNG: Duration = Duration::from_secs(120);

fn harness(quotas: &str) -> Harness {
    let config: hookbox_server::quota::QuotaConfig = toml::from_str(quotas).unwrap();
    Harness::configured(tempfile::tempdir().unwrap(), vec![], config)
}

async fn start(h: &Harness) -> TestServer {
    spawn_server(app(h.state.clone())).await
}

/// Opens the socket as the SDK does (its headers included).
async fn open(server: &TestServer) -> Socket {
    try_open(server, &[]).await.unwrap()
}

async fn try_open(
    server: &TestServer,
    headers: &[(&'static str, &str)],
) -> Result<Socket, tokio_tungstenite::tungstenite::Error> {
    let mut request = format!("ws://{}/v1beta/interactions/live", server.addr)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("api-revision", "2026-05-20".parse().unwrap());
    request
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in headers {
        request.headers_mut().insert(*k, v.parse().unwrap());
    }
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

async fn send(socket: &mut Socket, event: Value) {
    socket
        .send(Message::Text(event.to_string().into()))
        .await
        .unwrap();
}

/// The next server events (a batch frame is split), or `None` once the socket closed.
async fn next(socket: &mut Socket) -> Option<Vec<Value>> {
    loop {
        let message = tokio::time::timeout(HUNG, socket.next())
            .await
            .expect("a hung socket")?;
        match message {
            Ok(Message::Text(text)) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                let events = match value.get("events") {
                    Some(Value::Array(events)) if value.get("event_type").is_none() => {
                        events.clone()
                    }
                    _ => vec![value],
                };
                for event in &events {
                    assert!(
                        event["event_type"].as_str().is_some_and(|t| !t.is_empty()),
                        "every server event has an event_type: {event}"
                    );
                }
                return Some(events);
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Events until one of `event_type` (included); panics if the socket closes first.
async fn until(socket: &mut Socket, event_type: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let events = next(socket)
            .await
            .unwrap_or_else(|| panic!("closed before {event_type}: {seen:?}"));
        for event in events {
            let done = event["event_type"] == event_type;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// Connects to a new id and creates a live interaction; its id.
async fn create(socket: &mut Socket) -> String {
    send(
        socket,
        json!({"event_type": "interaction.connect", "id": "new"}),
    )
    .await;
    let connected = until(socket, "interaction.connected").await;
    assert_eq!(connected[0]["status"], "pending_create");
    send(socket, json!({"event_type": "interaction.create"})).await;
    let created = until(socket, "interaction.created").await;
    created[0]["interaction_id"].as_str().unwrap().to_owned()
}

fn input(text: &str) -> Value {
    json!({"event_type": "input", "content": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn a_live_session_runs_turns_stores_their_steps_and_completes() {
    let h = harness("");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    let id = create(&mut socket).await;
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["status"], "idle");

    send(
        &mut socket,
        input("create `/workspace/a.txt` containing 'one'"),
    )
    .await;
    let turn = until(&mut socket, "interaction.status_update").await;
    assert_eq!(turn.last().unwrap()["status"], "idle");
    let kinds: Vec<&str> = turn
        .iter()
        .filter(|e| e["event_type"] == "step.start")
        .map(|e| e["step"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_input",
            "function_call",
            "function_result",
            "model_output"
        ],
        "{turn:?}"
    );

    send(&mut socket, input("read `/workspace/a.txt`")).await;
    let second = until(&mut socket, "interaction.status_update").await;
    let text: String = second
        .iter()
        .filter(|e| e["event_type"] == "step.delta")
        .filter_map(|e| e["delta"]["text"].as_str())
        .collect();
    assert!(text.contains("one"), "{second:?}");

    // Stored like any step, numbered as the SSE stream numbers them.
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["status"], "idle");
    let steps = stored["steps"].as_array().unwrap();
    assert_eq!(steps[0]["type"], "user_input");
    assert_eq!(steps[4]["type"], "user_input");
    assert_eq!(steps.len(), 8, "{stored}");
    let (_, _, body) = h
        .raw(
            Method::GET,
            &format!("/v1beta/interactions/{id}?stream=true"),
            &[],
            None,
        )
        .await;
    let sse: Vec<Value> = super::sse_events(&String::from_utf8(body).unwrap())
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    let live_last = second
        .iter()
        .rev()
        .find(|e| e["event_type"] == "step.stop")
        .unwrap();
    let sse_same = sse
        .iter()
        .find(|e| e["event_type"] == "step.stop" && e["index"] == live_last["index"])
        .unwrap();
    assert_eq!(live_last["event_id"], sse_same["event_id"]);

    send(&mut socket, json!({"event_type": "interaction.complete"})).await;
    let end = until(&mut socket, "interaction.completed").await;
    assert_eq!(end.last().unwrap()["status"], json!({"code": 0}));
    assert!(next(&mut socket).await.is_none(), "closed after the end");
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["status"], "completed");
    let (_, listed) = h
        .call(Method::GET, "/v1beta/interactions?status=idle", None)
        .await;
    assert_eq!(
        listed["interactions"],
        json!([]),
        "idle is a status to filter on"
    );
}

#[tokio::test]
async fn a_dropped_socket_loses_nothing_and_a_reconnect_goes_on() {
    let h = harness("");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    let id = create(&mut socket).await;
    send(
        &mut socket,
        input("create `/workspace/b.txt` containing 'two'"),
    )
    .await;
    // Mid-turn: its first step was sent (the user's input, stored first).
    until(&mut socket, "step.start").await;
    drop(socket);

    let mut again = open(&server).await;
    send(
        &mut again,
        json!({"event_type": "interaction.connect", "id": id}),
    )
    .await;
    let connected = until(&mut again, "interaction.connected").await;
    if connected[0]["status"] != "idle" {
        // Still running: this socket follows the turn to its end.
        let end = until(&mut again, "interaction.status_update").await;
        assert_eq!(end.last().unwrap()["status"], "idle");
    }
    send(&mut again, input("read `/workspace/b.txt`")).await;
    let turn = until(&mut again, "interaction.status_update").await;
    assert!(
        turn.iter().any(|e| e["delta"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("two"))),
        "{connected:?} {turn:?}"
    );
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["steps"].as_array().unwrap().len(), 8, "{stored}");
    let (_, listed) = h
        .call(Method::GET, "/v1beta/interactions?status=idle", None)
        .await;
    assert_eq!(listed["interactions"][0]["id"], id.as_str());
}

#[tokio::test]
async fn cancel_stops_the_running_turn_and_ends_the_interaction() {
    let h = harness("");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    let id = create(&mut socket).await;
    send(&mut socket, input("run `sleep 300`")).await;
    // The call is stored and sent before the tool runs.
    loop {
        let started = until(&mut socket, "step.start").await;
        if started.last().unwrap()["step"]["type"] == "code_execution_call" {
            break;
        }
    }
    send(&mut socket, json!({"event_type": "interaction.cancel"})).await;
    until(&mut socket, "interaction.cancelled").await;
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["status"], "cancelled");
    // Connecting to it again reads the end.
    let mut again = open(&server).await;
    send(
        &mut again,
        json!({"event_type": "interaction.connect", "id": id}),
    )
    .await;
    let end = until(&mut again, "interaction.cancelled").await;
    assert_eq!(end[0]["status"], "cancelled");
}

#[tokio::test]
async fn malformed_frames_get_error_events_naming_the_problem_and_the_socket_goes_on() {
    let h = harness("[quotas]\nlive_max_frame_bytes = 1024\n");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    let big = input(&"x".repeat(4096)).to_string();
    for (frame, code, needle) in [
        ("{not json".to_owned(), "invalid_argument", "not valid JSON"),
        (
            input("hi").to_string(),
            "failed_precondition",
            "interaction.connect",
        ),
        (big.clone(), "resource_exhausted", "at most 1024 bytes"),
    ] {
        socket.send(Message::Text(frame.into())).await.unwrap();
        let events = next(&mut socket).await.unwrap();
        assert_eq!(events[0]["event_type"], "error");
        assert_eq!(events[0]["error"]["code"], code, "{events:?}");
        let message = events[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{message}");
    }
    let id = create(&mut socket).await;
    for (event, code, needle) in [
        (json!({"event_type": "bogus"}), "invalid_argument", "bogus"),
        (
            json!({"event_type": "world_setup", "world_prompt": "A coral reef"}),
            "unimplemented",
            "interactive worlds",
        ),
        (
            json!({"event_type": "user_action", "action": "key_down", "input": "space"}),
            "unimplemented",
            "does not serve",
        ),
        (
            json!({"event_type": "input", "content": {}}),
            "invalid_argument",
            "non-empty list",
        ),
        (
            json!({"event_type": "input", "content": [{"type": "function_result", "call_id": "c"}]}),
            "invalid_argument",
            "content[0]",
        ),
        (
            json!({"event_type": "interaction.create"}),
            "already_exists",
            "does not exist yet",
        ),
    ] {
        send(&mut socket, event.clone()).await;
        let events = next(&mut socket).await.unwrap();
        assert_eq!(events[0]["error"]["code"], code, "{event}: {events:?}");
        let message = events[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{event}: {message}");
    }
    // A frame past even the library's limit closes this socket only.
    let huge = input(&"x".repeat(1 << 20)).to_string();
    let _ = socket.send(Message::Text(huge.into())).await;
    while next(&mut socket).await.is_some() {}
    // Still serving, and the interaction is untouched.
    let mut again = open(&server).await;
    send(
        &mut again,
        json!({"event_type": "interaction.connect", "id": id}),
    )
    .await;
    let connected = until(&mut again, "interaction.connected").await;
    assert_eq!(connected[0]["status"], "idle");
    send(&mut again, input("hello")).await;
    until(&mut again, "interaction.status_update").await;
}

#[tokio::test]
async fn too_many_frames_per_second_are_dropped_with_one_error() {
    let h = harness("[quotas]\nlive_frames_per_second = 1\n");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    for _ in 0..20 {
        send(&mut socket, json!({"event_type": "bogus"})).await;
    }
    let mut seen = Vec::new();
    loop {
        let events = next(&mut socket).await.expect("open");
        let event = events[0].clone();
        seen.push(event.clone());
        if event["error"]["code"] == "resource_exhausted" {
            let message = event["error"]["message"].as_str().unwrap();
            assert!(message.contains("at most 1 per second"), "{message}");
            break;
        }
    }
    // Each second admits one frame at most, so 20 frames got far fewer than 20 answers.
    assert!(seen.len() < 20, "{seen:?}");
}

#[tokio::test]
async fn an_idle_socket_is_shed_cleanly_and_the_interaction_kept() {
    let h = harness("[quotas]\nlive_idle_timeout_seconds = 1\n");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    let id = create(&mut socket).await;
    let events = until(&mut socket, "reconnection_required").await;
    assert_eq!(events[0]["error"]["code"], "deadline_exceeded");
    assert!(next(&mut socket).await.is_none());
    let (_, stored) = h
        .call(Method::GET, &format!("/v1beta/interactions/{id}"), None)
        .await;
    assert_eq!(stored["status"], "idle");
}

#[tokio::test]
async fn sockets_per_project_are_a_quota() {
    let h = harness("[quotas]\nlive_sockets = 1\n");
    let server = start(&h).await;
    let first = open(&server).await;
    match try_open(&server, &[]).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            assert!(body.contains("live_sockets"), "{body}");
        }
        other => panic!("a second socket was let in: {:?}", other.map(|_| ())),
    }
    // The place is given back when the socket's task ends (which closes the connection).
    let mut first = first;
    first.close(None).await.unwrap();
    while next(&mut first).await.is_some() {}
    let mut reopened = try_open(&server, &[]).await.unwrap();
    create(&mut reopened).await;
}

#[tokio::test]
async fn the_live_upgrade_needs_a_key_and_acts_in_its_project() {
    let h = Harness::with_keys(vec!["team-a:key-a".into(), "team-b:key-b".into()]);
    let server = start(&h).await;
    match try_open(&server, &[]).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        }
        other => panic!("a keyless upgrade was let in: {:?}", other.map(|_| ())),
    }
    let mut a = try_open(&server, &[("x-goog-api-key", "key-a")])
        .await
        .unwrap();
    let id = create(&mut a).await;
    // Another project's key does not see it.
    let mut b = try_open(&server, &[("x-goog-api-key", "key-b")])
        .await
        .unwrap();
    send(
        &mut b,
        json!({"event_type": "interaction.connect", "id": id}),
    )
    .await;
    let connected = until(&mut b, "interaction.connected").await;
    assert_eq!(connected[0]["status"], "pending_create");
    send(&mut b, input("hello")).await;
    let refused = next(&mut b).await.unwrap();
    assert_eq!(refused[0]["error"]["code"], "failed_precondition");
}

// Issue 33 on the socket: a page on another origin must not open a live socket to a local
// server (the WebSocket handshake is a GET a page can send to any host).
#[tokio::test]
async fn a_cross_origin_page_cannot_open_a_live_socket() {
    let h = harness("");
    let guard = hookbox_browser_guard::Policy::new();
    let server = spawn_server(guard.protect(app(h.state.clone()))).await;
    match try_open(&server, &[("origin", "http://evil.example")]).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            assert_eq!(response.status(), StatusCode::FORBIDDEN);
        }
        other => panic!("a cross-origin upgrade was let in: {:?}", other.map(|_| ())),
    }
    let own = format!("http://{}", server.addr);
    let mut socket = try_open(&server, &[("origin", &own)]).await.unwrap();
    create(&mut socket).await;
    // The SDK sends no Origin.
    let mut sdk = try_open(&server, &[]).await.unwrap();
    create(&mut sdk).await;
}

#[tokio::test]
async fn a_client_function_is_answered_over_rest_and_the_socket_streams_the_rest() {
    let h = harness("");
    let server = start(&h).await;
    let mut socket = open(&server).await;
    send(
        &mut socket,
        json!({"event_type": "interaction.connect", "id": "new"}),
    )
    .await;
    until(&mut socket, "interaction.connected").await;
    send(
        &mut socket,
        json!({"event_type": "interaction.create", "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]}),
    )
    .await;
    let created = until(&mut socket, "interaction.created").await;
    let id = created[0]["interaction_id"].as_str().unwrap().to_owned();
    send(
        &mut socket,
        input("call `weather` with `{\"city\": \"Oslo\"}`"),
    )
    .await;
    let asked = until(&mut socket, "interaction.status_update").await;
    assert_eq!(asked.last().unwrap()["status"], "requires_action");
    let call = asked
        .iter()
        .find(|e| e["event_type"] == "step.start" && e["step"]["type"] == "function_call")
        .unwrap()["step"]
        .clone();
    assert_eq!(call["name"], "weather");
    // Input on the socket is refused while the call waits.
    send(&mut socket, input("hello")).await;
    let refused = next(&mut socket).await.unwrap();
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("answer them over REST"),
        "{refused:?}"
    );
    // The answer over REST goes on in place: the same interaction, streamed here.
    let answered = h
        .interact(json!({
            "agent": "antigravity-preview-09-2026",
            "previous_interaction_id": id,
            "input": [{"type": "function_result", "call_id": call["id"], "name": "weather", "result": "sunny"}],
        }))
        .await;
    assert_eq!(answered["id"], id.as_str());
    assert_eq!(answered["status"], "idle");
    let rest = until(&mut socket, "interaction.status_update").await;
    assert_eq!(rest.last().unwrap()["status"], "idle");
    let kinds: Vec<&str> = rest
        .iter()
        .filter(|e| e["event_type"] == "step.start")
        .map(|e| e["step"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["function_result", "model_output"], "{rest:?}");
    assert!(
        rest.iter().any(|e| e["delta"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("sunny"))),
        "{rest:?}"
    );
}

// Issue 32 item 2 on the socket: an ephemeral token live-connects its own interaction only;
// another interaction of the same project is "not found" and it cannot create one.
#[tokio::test]
async fn an_auth_token_live_connects_its_interaction_only() {
    let h = Harness::with_keys(vec!["team-a:key-a".into()]);
    let server = start(&h).await;
    let mut keyed = try_open(&server, &[("x-goog-api-key", "key-a")])
        .await
        .unwrap();
    let mine = create(&mut keyed).await;
    let mut keyed2 = try_open(&server, &[("x-goog-api-key", "key-a")])
        .await
        .unwrap();
    let other = create(&mut keyed2).await;
    let (status, minted) = h
        .raw(
            Method::POST,
            &format!("/v1beta/interactions/{mine}/auth_tokens"),
            &[("x-goog-api-key", "key-a")],
            Some(b"{}".to_vec()),
        )
        .await
        .pipe_json();
    assert_eq!(status, StatusCode::OK, "{minted}");
    let token = minted["auth_token"].as_str().unwrap().to_owned();

    let mut t = try_open(&server, &[("x-goog-api-key", &token)])
        .await
        .unwrap();
    send(
        &mut t,
        json!({"event_type": "interaction.connect", "id": other}),
    )
    .await;
    let refused = next(&mut t).await.unwrap();
    assert_eq!(refused[0]["event_type"], "error", "{refused:?}");
    assert_eq!(refused[0]["error"]["code"], "not_found", "{refused:?}");

    let mut t = try_open(&server, &[("x-goog-api-key", &token)])
        .await
        .unwrap();
    send(
        &mut t,
        json!({"event_type": "interaction.connect", "id": "new"}),
    )
    .await;
    assert_eq!(next(&mut t).await.unwrap()[0]["error"]["code"], "not_found");

    let mut t = try_open(&server, &[("x-goog-api-key", &token)])
        .await
        .unwrap();
    send(
        &mut t,
        json!({"event_type": "interaction.connect", "id": mine}),
    )
    .await;
    let connected = until(&mut t, "interaction.connected").await;
    assert_ne!(connected[0]["status"], "pending_create", "{connected:?}");
    send(&mut t, json!({"event_type": "interaction.create"})).await;
    let refused = next(&mut t).await.unwrap();
    assert_eq!(
        refused[0]["error"]["code"], "permission_denied",
        "{refused:?}"
    );
}

trait PipeJson {
    fn pipe_json(self) -> (StatusCode, Value);
}

impl PipeJson for (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    fn pipe_json(self) -> (StatusCode, Value) {
        (
            self.0,
            serde_json::from_slice(&self.2).unwrap_or(Value::Null),
        )
    }
}
