//! Decoding and encoding of the wire types: unknown types kept, `output_text`, secrets, int64
//! strings, the error body.

use super::*;
use serde_json::json;

#[test]
fn unknown_step_and_content_types_are_kept_verbatim() {
    let raw = json!({"type": "google_search_call", "id": "c1", "arguments": {"q": "x"}});
    let step: Step = serde_json::from_value(raw.clone()).unwrap();
    assert!(matches!(step, Step::Other(_)));
    assert_eq!(step.type_name(), "google_search_call");
    assert_eq!(serde_json::to_value(&step).unwrap(), raw);

    let raw = json!({"type": "hologram", "data": "x"});
    let c: Content = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(serde_json::to_value(&c).unwrap(), raw);
}

#[test]
fn output_text_follows_the_sdk_algorithm() {
    let steps: Vec<Step> = serde_json::from_value(json!([
        {"type":"user_input","content":[{"type":"text","text":"Run"}]},
        {"type":"model_output","content":[{"type":"text","text":"ignored "}]},
        {"type":"thought","signature":"c2ln","summary":[{"type":"text","text":"Thinking"}]},
        {"type":"code_execution_call","id":"call_1","arguments":{"code":"rm -rf /tmp/forbidden","language":"bash"}},
        {"type":"code_execution_result","call_id":"call_1","is_error":true,"result":"blocked"},
        {"type":"model_output","content":[{"type":"text","text":"The command was "}]},
        {"type":"thought"},
        {"type":"model_output","content":[{"type":"text","text":"blocked by the hook."}]}
    ]))
    .unwrap();
    assert_eq!(output_text(&steps), "The command was blocked by the hook.");
    assert_eq!(output_text(&steps[..1]), "");
}

#[test]
fn secrets_never_show_in_debug() {
    let c: CredentialConfig = serde_json::from_value(
        json!({"id": "cred_bearer", "token": "s3cr3t", "type": "bearer_token"}),
    )
    .unwrap();
    assert!(!format!("{c:?}").contains("s3cr3t"));
}

// The Java SDK refused `"file_count": 1` (it declares int64 fields `String`).
#[test]
fn int64_fields_are_strings_on_the_wire_and_read_either_way() {
    let env = Environment {
        id: "env_1".into(),
        status: None,
        created: None,
        updated: None,
        last_accessed: None,
        file_count: Some(3),
        size_bytes: Some(1 << 40),
        sources: None,
        network: None,
        ..Environment::default()
    };
    let wire = serde_json::to_value(&env).unwrap();
    assert_eq!(
        wire,
        json!({"id": "env_1", "file_count": "3", "size_bytes": "1099511627776"})
    );
    assert_eq!(serde_json::from_value::<Environment>(wire).unwrap(), env);
    let old: Environment = serde_json::from_value(
        json!({"id": "env_1", "file_count": 3, "size_bytes": 1099511627776_u64}),
    )
    .unwrap();
    assert_eq!(old, env);
    assert!(serde_json::from_value::<Environment>(json!({"id": "e", "file_count": "x"})).is_err());
    let file: EnvironmentFile =
        serde_json::from_value(json!({"path": "/a", "size_bytes": "2"})).unwrap();
    assert_eq!(file.size_bytes, Some(2));
    assert_eq!(serde_json::to_value(&file).unwrap()["size_bytes"], "2");
}

#[test]
fn error_body_has_integer_code() {
    let body = ErrorBody {
        error: RpcStatus {
            code: 404,
            message: "Interaction not found.".into(),
            status: "NOT_FOUND".into(),
        },
    };
    assert_eq!(
        serde_json::to_string(&body).unwrap(),
        r#"{"error":{"code":404,"message":"Interaction not found.","status":"NOT_FOUND"}}"#
    );
}
