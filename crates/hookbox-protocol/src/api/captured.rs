//! Round trips of the request bodies the real SDK sent (`shared/spec/captured-requests.jsonl`).

use super::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::json;

const CAPTURED: &str = include_str!("../../fixtures/captured-requests.jsonl");

fn bodies(prefix: &str) -> Vec<(String, Value)> {
    CAPTURED
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| {
            let call = l["call"].as_str().unwrap();
            call.contains(prefix) && l["body"].is_object()
        })
        .map(|l| (l["call"].as_str().unwrap().to_owned(), l["body"].clone()))
        .collect()
}

fn round_trip<T: DeserializeOwned + Serialize>(prefix: &str) -> Vec<T> {
    let all = bodies(prefix);
    assert!(!all.is_empty(), "no captured request for {prefix}");
    all.into_iter()
        .map(|(call, body)| {
            let typed: T =
                serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{call}: {e}"));
            assert_eq!(serde_json::to_value(&typed).unwrap(), body, "{call}");
            typed
        })
        .collect()
}

#[test]
fn interaction_create_bodies_round_trip() {
    let reqs: Vec<CreateInteractionRequest> = round_trip("interactions.create");
    assert!(reqs.len() >= 6);
    let seed = &reqs[0];
    assert_eq!(seed.agent.as_deref(), Some("antigravity-preview-09-2026"));
    let Some(EnvironmentRef::Spec(env)) = &seed.environment else {
        panic!("seed environment is an object")
    };
    assert_eq!(
        env.sources.as_ref().unwrap()[0].target.as_deref(),
        Some(".agents/hooks.json")
    );
    assert!(matches!(&reqs[1].environment, Some(EnvironmentRef::Id(id)) if id == "env_xyz789"));
    assert!(matches!(reqs[2].input, Some(Input::List(_))));
    let Some(EnvironmentRef::Spec(env)) = &reqs[2].environment else {
        panic!()
    };
    assert!(matches!(&env.network, Some(Network::Mode(m)) if m == "disabled"));
    let Some(EnvironmentRef::Spec(env)) = &reqs[3].environment else {
        panic!()
    };
    let Some(Network::Rules {
        allowlist: Allowlist::Entries(entries),
    }) = &env.network
    else {
        panic!("allowlist entries")
    };
    assert_eq!(entries[1].credential.as_deref(), Some("cred_1"));
    assert_eq!(reqs[4].stream, Some(true));
    // extra_body fields survive.
    let extra = round_trip::<CreateInteractionRequest>("extra_body");
    assert_eq!(extra[0].extra["hooks"], json!({"a": 1}));
}

#[test]
fn environment_create_bodies_round_trip() {
    let reqs: Vec<CreateEnvironmentRequest> = round_trip("environments.create");
    assert_eq!(
        reqs[0].sources.as_ref().unwrap()[0].content.as_deref(),
        Some("hi")
    );
    assert_eq!(
        reqs[1].from_environment.as_deref(),
        Some("environments/env_1")
    );
}

#[test]
fn credential_bodies_round_trip() {
    let reqs: Vec<CredentialConfig> = round_trip("credentials.create");
    let kinds: Vec<_> = reqs.iter().map(CredentialConfig::kind).collect();
    assert_eq!(
        kinds,
        [
            CredentialType::BearerToken,
            CredentialType::EnvironmentVariable,
            CredentialType::OAuth2
        ]
    );
    let ups: Vec<CredentialUpdate> = round_trip("credentials.update");
    assert!(
        matches!(&ups[0], CredentialUpdate::BearerToken { token: Some(t), .. } if t.0 == "new")
    );
}

#[test]
fn agent_bodies_round_trip() {
    let reqs: Vec<Agent> = round_trip("agents.create");
    assert_eq!(reqs[0].id.as_deref(), Some("agent_1"));
}

#[test]
fn spec_example_interaction_round_trips_and_gives_output_text() {
    let raw = json!({"id":"int_abc123","status":"completed","agent":"antigravity-preview-09-2026","environment_id":"env_xyz789",
     "created":"2026-05-20T10:00:00Z","updated":"2026-05-20T10:00:00Z",
     "steps":[
      {"type":"user_input","content":[{"type":"text","text":"Run `rm -rf /tmp/forbidden` ..."}]},
      {"type":"thought","signature":"c2ln","summary":[{"type":"text","text":"Thinking"}]},
      {"type":"code_execution_call","id":"call_1","arguments":{"code":"rm -rf /tmp/forbidden","language":"bash"}},
      {"type":"code_execution_result","call_id":"call_1","is_error":true,"result":"Destructive command blocked by security gate."},
      {"type":"model_output","content":[{"type":"text","text":"The command was "},{"type":"text","text":"blocked by the hook."}]}],
     "usage":{"total_input_tokens":10,"total_output_tokens":5,"total_tokens":15}});
    let i: Interaction = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(serde_json::to_value(&i).unwrap(), raw);
    assert_eq!(
        output_text(&i.steps),
        "The command was blocked by the hook."
    );
}

#[test]
fn spec_stream_events_parse() {
    let lines = [
        r#"{"event_type":"interaction.created","event_id":"e1","interaction":{"id":"int_1","status":"in_progress","environment_id":"env_1"}}"#,
        r#"{"event_type":"step.start","index":1,"step":{"type":"code_execution_call","id":"call_1","arguments":{"code":"ls","language":"bash"}}}"#,
        r#"{"event_type":"step.delta","index":2,"delta":{"type":"code_execution_result","result":"a.txt\n"}}"#,
        r#"{"event_type":"step.delta","index":3,"delta":{"type":"text","text":"Hello"}}"#,
        r#"{"event_type":"step.stop","index":3}"#,
        r#"{"event_type":"interaction.completed","interaction":{"id":"int_1","status":"completed","environment_id":"env_1"}}"#,
        r#"{"event_type":"error","error":{"code":"internal","message":"boom"}}"#,
    ];
    for line in lines {
        let raw: Value = serde_json::from_str(line).unwrap();
        let ev: StreamEvent = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&ev).unwrap(), raw, "{line}");
    }
}
