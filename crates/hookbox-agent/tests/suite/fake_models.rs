//! The gemini and openai backends against fake servers on 127.0.0.1 that script tool calls, so the
//! real HTTP paths (request bodies, headers, response parsing) are exercised.

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use hookbox_agent::agent_loop::LoopConfig;
use hookbox_agent::gemini::GeminiModel;
use hookbox_agent::openai::OpenAiModel;
use hookbox_protocol::api::{InteractionStatus, Step, output_text};
use hookbox_test_support::{TestServer, spawn_server};
use serde_json::{Value, json};

use super::{backend, run_loop};

#[derive(Clone, Default)]
struct Script {
    /// (status, body) per request, in order.
    replies: Arc<Vec<(u16, Value)>>,
    /// What the server received: path, headers, body.
    seen: Arc<Mutex<Vec<(String, HeaderMap, Value)>>>,
}

async fn reply(
    script: Script,
    path: String,
    headers: HeaderMap,
    body: Value,
) -> (StatusCode, Json<Value>) {
    let n = {
        let mut seen = script.seen.lock().unwrap();
        seen.push((path, headers, body));
        seen.len() - 1
    };
    let (status, body) = script
        .replies
        .get(n)
        .cloned()
        .unwrap_or((500, json!({"error": {"message": "script exhausted"}})));
    (StatusCode::from_u16(status).unwrap(), Json(body))
}

async fn gemini_server(replies: Vec<(u16, Value)>) -> (TestServer, Script) {
    let script = Script {
        replies: Arc::new(replies),
        ..Script::default()
    };
    let router = Router::new()
        .route(
            "/v1beta/models/{action}",
            post(
                |State(s): State<Script>,
                 Path(action): Path<String>,
                 headers: HeaderMap,
                 Json(body): Json<Value>| { reply(s, action, headers, body) },
            ),
        )
        .with_state(script.clone());
    (spawn_server(router).await, script)
}

async fn openai_server(replies: Vec<(u16, Value)>) -> (TestServer, Script) {
    let script = Script {
        replies: Arc::new(replies),
        ..Script::default()
    };
    let router = Router::new()
        .route(
            "/v1/chat/completions",
            post(
                |State(s): State<Script>, headers: HeaderMap, Json(body): Json<Value>| {
                    reply(s, "chat".into(), headers, body)
                },
            ),
        )
        .with_state(script.clone());
    (spawn_server(router).await, script)
}

#[tokio::test]
async fn gemini_function_call_round_trip_with_signature_and_usage() {
    let (_dir, local) = backend(&[("workspace/a.txt", "hello from a")]).await;
    let (server, script) = gemini_server(vec![
        (200, json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "I should look.", "thought": true},
            {"functionCall": {"name": "view_file", "args": {"path": "/workspace/a.txt"}}, "thoughtSignature": "c2lnMQ=="}
        ]}}], "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 13}})),
        (200, json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "It says hello."}]}}],
            "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 4, "totalTokenCount": 24}})),
    ])
    .await;
    let url = server.url();
    let model = GeminiModel::new(&url, "test-key-123", "gemini-test");
    let (outcome, steps) =
        run_loop(&model, local.as_ref(), "read a.txt", LoopConfig::default()).await;

    assert_eq!(outcome.status, InteractionStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.usage.total_tokens, Some(37));
    let types: Vec<_> = steps.iter().map(Step::type_name).collect();
    assert_eq!(
        types,
        [
            "thought",
            "function_call",
            "function_result",
            "model_output"
        ]
    );
    assert_eq!(output_text(&steps), "It says hello.");

    let seen = script.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, "gemini-test:generateContent");
    assert_eq!(seen[0].1["x-goog-api-key"], "test-key-123");
    let decls = &seen[0].2["tools"][0]["functionDeclarations"];
    assert_eq!(decls.as_array().unwrap().len(), 6);
    assert_eq!(
        seen[0].2["systemInstruction"]["parts"][0]["text"],
        "Be brief."
    );
    // Second request: the call with its signature, then the tool's real output.
    let contents = seen[1].2["contents"].as_array().unwrap();
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(contents[1]["parts"][0]["thoughtSignature"], "c2lnMQ==");
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"]["response"]["output"],
        "hello from a"
    );
}

#[tokio::test]
async fn gemini_http_error_fails_the_run_with_the_message() {
    let (_dir, local) = backend(&[]).await;
    let (server, _script) = gemini_server(vec![(429, json!({"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}))]).await;
    let url = server.url();
    let model = GeminiModel::new(&url, "k", "m");
    let (outcome, steps) = run_loop(&model, local.as_ref(), "hi", LoopConfig::default()).await;
    assert_eq!(outcome.status, InteractionStatus::Failed);
    assert!(
        outcome.errors[0].message.contains("429")
            && outcome.errors[0].message.contains("Quota exceeded"),
        "{outcome:?}"
    );
    assert!(steps.is_empty());
}

#[tokio::test]
async fn openai_tool_calls_run_and_results_go_back_as_tool_messages() {
    let (dir, local) = backend(&[]).await;
    let (server, script) = openai_server(vec![
        (200, json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_w", "type": "function", "function": {"name": "write_to_file", "arguments": "{\"path\": \"/workspace/x.txt\", \"content\": \"42\"}"}},
            {"id": "call_r", "type": "function", "function": {"name": "code_execution", "arguments": "{\"code\": \"cat x.txt; echo; ls /nonexistent-dir\"}"}}
        ]}}], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})),
        (200, json!({"choices": [{"message": {"role": "assistant", "content": "Done: 42"}}]})),
    ])
    .await;
    let url = server.url();
    let model = OpenAiModel::new(&format!("{url}/v1"), "llama-test", Some("sk-test"));
    let (outcome, steps) =
        run_loop(&model, local.as_ref(), "write 42", LoopConfig::default()).await;
    assert_eq!(outcome.status, InteractionStatus::Completed, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("env_t/workspace/x.txt")).unwrap(),
        "42"
    );
    let types: Vec<_> = steps.iter().map(Step::type_name).collect();
    assert_eq!(
        types,
        [
            "function_call",
            "function_result",
            "code_execution_call",
            "code_execution_result",
            "model_output"
        ]
    );

    let seen = script.seen.lock().unwrap();
    assert_eq!(seen[0].1["authorization"], "Bearer sk-test");
    assert_eq!(seen[0].2["model"], "llama-test");
    assert_eq!(seen[0].2["tools"].as_array().unwrap().len(), 6);
    let msgs = seen[1].2["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    // Calls run one after another, so each call is followed by its own result.
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "tool"]
    );
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_w");
    assert_eq!(msgs[5]["tool_call_id"], "call_r");
    let out = msgs[5]["content"].as_str().unwrap();
    assert!(
        out.starts_with("ERROR: 42\n") && out.contains("nonexistent-dir"),
        "{out}"
    );
}

#[tokio::test]
async fn openai_unparseable_arguments_fail_the_run() {
    let (_dir, local) = backend(&[]).await;
    let (server, _script) = openai_server(vec![(200, json!({"choices": [{"message": {"tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "view_file", "arguments": "{not json"}}]}}]}))]).await;
    let url = server.url();
    let model = OpenAiModel::new(&format!("{url}/v1"), "m", None);
    let (outcome, _) = run_loop(&model, local.as_ref(), "x", LoopConfig::default()).await;
    assert_eq!(outcome.status, InteractionStatus::Failed);
    assert!(outcome.errors[0].message.contains("not JSON"));
}

#[test]
fn client_functions_are_declared_beside_the_sandbox_tools() {
    let functions = [hookbox_agent::model::FunctionDecl {
        name: "get_weather".into(),
        description: "The weather".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    }];
    let steps = [hookbox_protocol::api::Step::user_text("weather?")];
    let request = hookbox_agent::ModelRequest {
        model: None,
        system_instruction: None,
        steps: &steps,
        tools: &[hookbox_protocol::ToolName::CodeExecution],
        functions: &functions,
        tool_search: None,
    };
    let gemini = hookbox_agent::gemini::GeminiModel::body(&request);
    let declared: Vec<&str> = gemini["tools"][0]["functionDeclarations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, ["code_execution", "get_weather"]);
    assert_eq!(
        gemini["tools"][0]["functionDeclarations"][1]["parameters"]["properties"]["city"]["type"],
        "string"
    );
    let openai =
        hookbox_agent::openai::OpenAiModel::new("http://127.0.0.1:9/v1", "m", None).body(&request);
    let declared: Vec<&str> = openai["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(declared, ["code_execution", "get_weather"]);
}
