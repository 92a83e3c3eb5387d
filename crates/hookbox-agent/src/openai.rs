//! The `openai` model: any OpenAI-compatible `POST {base}/chat/completions` server with tool
//! calling (Ollama, vLLM, llama.cpp server). Steps become `messages`: tool calls as an assistant
//! message's `tool_calls`, results as `tool` messages. The optional key is sent as a bearer token
//! and never logged.

use async_trait::async_trait;
use hookbox_protocol::api::{Step, Usage};
use serde_json::{Value, json};

use crate::model::{Model, ModelCall, ModelRequest, ModelTurn};
use crate::steps::{ToolStep, as_tool_step, declaration, output_as_text};

/// An OpenAI-compatible chat-completions client.
pub struct OpenAiModel {
    http: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    model: String,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// `base_url` includes the version path, e.g. `http://127.0.0.1:11434/v1`.
    pub fn new(base_url: &str, model: &str, api_key: Option<&str>) -> Self {
        OpenAiModel {
            http: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.map(str::to_owned),
            model: model.to_owned(),
        }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        if let Some(system) = request.system_instruction {
            messages.push(json!({"role": "system", "content": system}));
        }
        for step in request.steps {
            match as_tool_step(step) {
                Some(ToolStep::Call { id, name, args, .. }) => {
                    let call = json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}});
                    match messages.last_mut() {
                        Some(last)
                            if last["role"] == "assistant" && last["tool_calls"].is_array() =>
                        {
                            if let Some(calls) = last["tool_calls"].as_array_mut() {
                                calls.push(call);
                            }
                        }
                        _ => messages.push(
                            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                        ),
                    }
                }
                Some(ToolStep::Result {
                    call_id,
                    output,
                    is_error,
                    ..
                }) => {
                    let text = output_as_text(output);
                    let content = if is_error {
                        format!("ERROR: {text}")
                    } else {
                        text
                    };
                    messages
                        .push(json!({"role": "tool", "tool_call_id": call_id, "content": content}));
                }
                None => match step {
                    Step::UserInput { .. } => messages
                        .push(json!({"role": "user", "content": step.text().unwrap_or_default()})),
                    Step::ModelOutput { .. } => messages.push(
                        json!({"role": "assistant", "content": step.text().unwrap_or_default()}),
                    ),
                    _ => {}
                },
            }
        }
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                let (description, parameters) = declaration(*t);
                json!({"type": "function", "function": {
                    "name": t.as_str(), "description": description, "parameters": parameters}})
            })
            .chain(request.functions.iter().map(|f| {
                json!({"type": "function", "function": {
                    "name": f.name, "description": f.description, "parameters": f.parameters}})
            }))
            .collect();
        let mut body = json!({
            "model": request.model.unwrap_or(&self.model),
            "messages": messages,
        });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        body
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn name(&self) -> &'static str {
        "openai"
    }

    async fn turn(&self, request: &ModelRequest<'_>) -> crate::Result<ModelTurn> {
        let mut req = self
            .http
            .post(format!("{}/chat/completions", self.base_url))
            .json(&self.body(request));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = req.send().await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            let message = body["error"]["message"]
                .as_str()
                .or_else(|| body["error"].as_str())
                .unwrap_or("no error message")
                .to_owned();
            return Err(crate::Error::ModelStatus {
                status: status.as_u16(),
                message,
            });
        }
        let message = &body["choices"][0]["message"];
        if !message.is_object() {
            return Err(crate::Error::ModelResponse(
                "chat completion without choices[0].message".into(),
            ));
        }
        let mut turn = ModelTurn {
            text: message["content"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            thought: message["reasoning_content"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
            ..ModelTurn::default()
        };
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let function = &call["function"];
            let args = match &function["arguments"] {
                Value::String(s) => serde_json::from_str(s).map_err(|e| {
                    crate::Error::ModelResponse(format!("tool call arguments are not JSON: {e}"))
                })?,
                Value::Null => json!({}),
                other => other.clone(),
            };
            turn.calls.push(ModelCall {
                id: call["id"].as_str().map(str::to_owned),
                name: function["name"].as_str().unwrap_or_default().to_owned(),
                args,
                signature: None,
            });
        }
        let usage = &body["usage"];
        turn.usage = Usage {
            total_input_tokens: usage["prompt_tokens"].as_u64(),
            total_output_tokens: usage["completion_tokens"].as_u64(),
            total_tokens: usage["total_tokens"].as_u64(),
            ..Usage::default()
        };
        Ok(turn)
    }
}
