//! The `gemini` model: the Gemini API's `models/{model}:generateContent` with one function
//! declaration per built-in tool. Steps become `contents` (tool calls as `functionCall` parts with
//! their `thoughtSignature`, results as `functionResponse` parts). The key goes in the
//! `x-goog-api-key` header and is never logged.

use async_trait::async_trait;
use hookbox_protocol::api::{Step, Usage};
use serde_json::{Value, json};

use crate::model::{Model, ModelCall, ModelRequest, ModelTurn};
use crate::steps::{ToolStep, as_tool_step, declaration};

/// Default API base URL.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// Default model.
pub const DEFAULT_MODEL: &str = "gemini-2.5-flash";

/// A Gemini API client.
pub struct GeminiModel {
    http: reqwest::Client,
    base_url: String,
    api_key: String,
    model: String,
}

impl std::fmt::Debug for GeminiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl GeminiModel {
    pub fn new(base_url: &str, api_key: &str, model: &str) -> Self {
        GeminiModel {
            http: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            model: model.to_owned(),
        }
    }

    /// The request body for `request` (public for tests and debugging).
    pub fn body(request: &ModelRequest<'_>) -> Value {
        let mut contents: Vec<Value> = Vec::new();
        let mut push = |role: &str, part: Value| {
            if let Some(last) = contents.last_mut()
                && last["role"] == role
                && let Some(parts) = last["parts"].as_array_mut()
            {
                parts.push(part);
                return;
            }
            contents.push(json!({"role": role, "parts": [part]}));
        };
        for step in request.steps {
            if let Some(tool) = as_tool_step(step) {
                match tool {
                    ToolStep::Call {
                        name,
                        args,
                        signature,
                        ..
                    } => {
                        let mut part = json!({"functionCall": {"name": name, "args": args}});
                        if let Some(sig) = signature {
                            part["thoughtSignature"] = json!(sig);
                        }
                        push("model", part);
                    }
                    ToolStep::Result {
                        name,
                        output,
                        is_error,
                        ..
                    } => {
                        let key = if is_error { "error" } else { "output" };
                        push(
                            "user",
                            json!({"functionResponse": {"name": name.unwrap_or("tool".into()), "response": {key: output}}}),
                        );
                    }
                }
                continue;
            }
            match step {
                Step::UserInput { .. } => {
                    push("user", json!({"text": step.text().unwrap_or_default()}))
                }
                Step::ModelOutput { .. } => {
                    push("model", json!({"text": step.text().unwrap_or_default()}))
                }
                _ => {}
            }
        }
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let (description, parameters) = declaration(*t);
                json!({"name": t.as_str(), "description": description, "parameters": parameters})
            })
            .chain(request.functions.iter().map(|f| {
                json!({"name": f.name, "description": f.description, "parameters": f.parameters})
            }))
            .collect();
        let mut body = json!({"contents": contents});
        if !declarations.is_empty() {
            body["tools"] = json!([{"functionDeclarations": declarations}]);
        }
        if let Some(system) = request.system_instruction {
            body["systemInstruction"] = json!({"parts": [{"text": system}]});
        }
        body
    }
}

fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

#[async_trait]
impl Model for GeminiModel {
    fn name(&self) -> &'static str {
        "gemini"
    }

    async fn turn(&self, request: &ModelRequest<'_>) -> crate::Result<ModelTurn> {
        let model = request.model.unwrap_or(&self.model);
        let url = format!("{}/v1beta/models/{model}:generateContent", self.base_url);
        let response = self
            .http
            .post(&url)
            .header("x-goog-api-key", &self.api_key)
            .json(&Self::body(request))
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("no error message")
                .to_owned();
            return Err(crate::Error::ModelStatus {
                status: status.as_u16(),
                message,
            });
        }
        let Some(parts) = body["candidates"][0]["content"]["parts"].as_array() else {
            let reason = body["promptFeedback"]["blockReason"]
                .as_str()
                .or_else(|| body["candidates"][0]["finishReason"].as_str())
                .unwrap_or("no candidate content");
            return Err(crate::Error::ModelResponse(format!(
                "Gemini returned no content ({reason})"
            )));
        };
        let mut turn = ModelTurn::default();
        let mut text = String::new();
        let mut thought = String::new();
        for part in parts {
            let signature = part["thoughtSignature"].as_str().map(str::to_owned);
            if let Some(call) = part.get("functionCall") {
                turn.calls.push(ModelCall {
                    id: call["id"].as_str().map(str::to_owned),
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                    args: call.get("args").cloned().unwrap_or_else(|| json!({})),
                    signature,
                });
            } else if let Some(t) = part["text"].as_str() {
                if part["thought"].as_bool() == Some(true) {
                    thought.push_str(t);
                } else {
                    text.push_str(t);
                }
            }
        }
        turn.text = (!text.is_empty()).then_some(text);
        turn.thought = (!thought.is_empty()).then_some(thought);
        let usage = &body["usageMetadata"];
        turn.usage = Usage {
            total_input_tokens: count(usage, "promptTokenCount"),
            total_output_tokens: count(usage, "candidatesTokenCount"),
            total_thought_tokens: count(usage, "thoughtsTokenCount"),
            total_tool_use_tokens: count(usage, "toolUsePromptTokenCount"),
            total_tokens: count(usage, "totalTokenCount"),
        };
        Ok(turn)
    }
}
