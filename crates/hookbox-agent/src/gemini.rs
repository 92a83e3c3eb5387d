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
                Step::UserInput { content } => {
                    push("user", json!({"text": step.text().unwrap_or_default()}));
                    for item in content.iter().flatten() {
                        if let Some(part) = media_part(item) {
                            push("user", part);
                        }
                    }
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

/// A user's `image`, `audio`, `document` or `video` item as a Gemini part: `fileData` for a
/// `uri`, `inlineData` for base64 `data` (nothing without either). Of the item's `processing`
/// options (google-genai 3.4.0+) the Gemini API takes a video's clip and frame rate, sent as
/// `videoMetadata {startOffset, endOffset, fps}`. It has no place for the rest, which is ignored
/// here (kept in the stored step): an audio clip (`start_offset`/`end_offset`), a document's
/// `page_options`, `spreadsheet_options` and `resolution`, a video's `content_layers`, and the
/// string forms `"static"` / `"agentic"`.
pub fn media_part(item: &hookbox_protocol::api::Content) -> Option<Value> {
    use hookbox_protocol::api::Content;
    let (media, video) = match item {
        Content::Image(m) | Content::Audio(m) | Content::Document(m) => (m, false),
        Content::Video(m) => (m, true),
        Content::Text { .. } | Content::Other(_) => return None,
    };
    let mime = media.mime_type.clone().unwrap_or_default();
    let mut part = if let Some(uri) = &media.uri {
        json!({"fileData": {"mimeType": mime, "fileUri": uri}})
    } else if let Some(data) = &media.data {
        json!({"inlineData": {"mimeType": mime, "data": data}})
    } else {
        return None;
    };
    if video && let Some(processing) = media.extra.get("processing").and_then(Value::as_object) {
        let mut metadata = serde_json::Map::new();
        for (from, to) in [("start_offset", "startOffset"), ("end_offset", "endOffset")] {
            if let Some(offset) = processing.get(from).and_then(Value::as_str) {
                metadata.insert(to.into(), json!(offset));
            }
        }
        if let Some(fps) = processing.get("fps").and_then(Value::as_f64) {
            metadata.insert("fps".into(), json!(fps));
        }
        if !metadata.is_empty() {
            part["videoMetadata"] = Value::Object(metadata);
        }
    }
    Some(part)
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

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_protocol::api::Content;

    fn item(v: Value) -> Content {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn video_processing_reaches_gemini_as_video_metadata() {
        let video = item(
            json!({"type": "video", "uri": "gs://b/v.mp4", "mime_type": "video/mp4",
            "processing": {"type": "static", "fps": 1.0, "start_offset": "10.5s", "end_offset": "30s",
                           "content_layers": ["frames"]}}),
        );
        assert_eq!(
            media_part(&video).unwrap(),
            json!({"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"},
                   "videoMetadata": {"startOffset": "10.5s", "endOffset": "30s", "fps": 1.0}})
        );
        // What the API has no place for is not sent.
        let doc = item(
            json!({"type": "document", "uri": "gs://b/a.pdf", "mime_type": "application/pdf",
            "resolution": "high", "processing": {"type": "static", "page_options": {"start_page": 2}}}),
        );
        assert_eq!(
            media_part(&doc).unwrap(),
            json!({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}})
        );
        let audio = item(
            json!({"type": "audio", "data": "AAAA", "mime_type": "audio/mp3", "processing": "static"}),
        );
        assert_eq!(
            media_part(&audio).unwrap(),
            json!({"inlineData": {"mimeType": "audio/mp3", "data": "AAAA"}})
        );
        assert_eq!(media_part(&Content::text("hi")), None);
    }

    #[test]
    fn the_request_body_carries_the_users_media() {
        let steps = vec![Step::UserInput {
            content: Some(vec![
                Content::text("what is in it?"),
                item(
                    json!({"type": "video", "uri": "gs://b/v.mp4", "mime_type": "video/mp4",
                    "processing": {"type": "static", "fps": 2.0}}),
                ),
            ]),
        }];
        let body = GeminiModel::body(&ModelRequest {
            model: None,
            system_instruction: None,
            steps: &steps,
            tools: &[],
            functions: &[],
            tool_search: None,
        });
        assert_eq!(
            body["contents"],
            json!([{"role": "user", "parts": [
                {"text": "what is in it?"},
                {"fileData": {"mimeType": "video/mp4", "fileUri": "gs://b/v.mp4"}, "videoMetadata": {"fps": 2.0}}
            ]}])
        );
    }
}
