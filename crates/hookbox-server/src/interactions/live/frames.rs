//! The live socket's frames: decoding what a client sends (one event with an `event_type`, or a
//! batch `{"events": [...]}`) within its bounds, and the server's events (each an object with an
//! `event_type`, as the SDK requires). Every problem is an [`EventError`] the socket answers as
//! an `error` event naming it; nothing here panics on client bytes.
//!
//! This module only translates: it must not touch the store or the run registry.

use hookbox_protocol::api::{ConnectEvent, CreateEvent, InputEvent, LiveStatus, client_event};
use serde_json::{Map, Value, json};

/// The most events one batch frame may carry.
pub const MAX_BATCH_EVENTS: usize = 64;
/// The longest interaction id a client may name.
pub const MAX_ID_BYTES: usize = 128;
/// The most content items one `input` may carry.
pub const MAX_INPUT_ITEMS: usize = 256;

/// Content types an `input` may carry (the REST `input`'s content items).
const CONTENT_TYPES: &[&str] = &["text", "image", "audio", "document", "video"];

/// A client event, decoded and checked for shape.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    Connect(ConnectEvent),
    Create(CreateEvent),
    Input(InputEvent),
    Complete,
    Cancel,
    Disconnect,
    /// `user_action` / `world_setup`: interactive worlds, which hookbox does not serve.
    World(&'static str),
}

/// What is wrong with a frame or one of its events: a string code (the SDK types `error.code`
/// as a string) and a message that names the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventError {
    pub code: &'static str,
    pub message: String,
}

impl EventError {
    pub fn invalid(message: impl Into<String>) -> Self {
        EventError {
            code: "invalid_argument",
            message: message.into(),
        }
    }

    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        EventError {
            code,
            message: message.into(),
        }
    }
}

/// Decodes one frame's text: its events in order, each decoded or the error naming what is
/// wrong with it. A frame that is not JSON, too large, or a malformed batch is one error.
pub fn decode(
    text: &str,
    max_bytes: usize,
) -> Result<Vec<Result<ClientEvent, EventError>>, EventError> {
    if text.len() > max_bytes {
        return Err(too_large(text.len(), max_bytes));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| EventError::invalid(format!("The frame is not valid JSON: {e}.")))?;
    let Value::Object(object) = value else {
        return Err(EventError::invalid(
            "A frame must be a JSON object with an `event_type`, or {\"events\": [...]}.",
        ));
    };
    if !object.contains_key("event_type")
        && let Some(events) = object.get("events")
    {
        let Value::Array(events) = events else {
            return Err(EventError::invalid("`events` must be a list of events."));
        };
        if events.len() > MAX_BATCH_EVENTS {
            return Err(EventError::invalid(format!(
                "A batch holds at most {MAX_BATCH_EVENTS} events, not {}.",
                events.len()
            )));
        }
        return Ok(events
            .iter()
            .enumerate()
            .map(|(i, event)| match event {
                Value::Object(event) => decode_event(event),
                _ => Err(EventError::invalid(format!(
                    "`events[{i}]` must be an object with an `event_type`."
                ))),
            })
            .collect());
    }
    Ok(vec![decode_event(&object)])
}

/// The error for a frame of `len` bytes over `max`.
pub fn too_large(len: usize, max: usize) -> EventError {
    EventError::new(
        "resource_exhausted",
        format!("The frame is {len} bytes; a live socket takes frames of at most {max} bytes."),
    )
}

fn decode_event(object: &Map<String, Value>) -> Result<ClientEvent, EventError> {
    let event_type = match object.get("event_type") {
        Some(Value::String(t)) if !t.is_empty() => t.as_str(),
        Some(_) => {
            return Err(EventError::invalid(
                "`event_type` must be a non-empty string.",
            ));
        }
        None => return Err(EventError::invalid("The event has no `event_type`.")),
    };
    let fields = || {
        let mut fields = object.clone();
        fields.remove("event_type");
        Value::Object(fields)
    };
    match event_type {
        client_event::CONNECT => {
            let id = match object.get("id") {
                Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
                _ => {
                    return Err(EventError::invalid(
                        "interaction.connect needs `id`, a non-empty string.",
                    ));
                }
            };
            if id.len() > MAX_ID_BYTES {
                return Err(EventError::invalid(format!(
                    "interaction.connect `id` is longer than {MAX_ID_BYTES} bytes."
                )));
            }
            let background = match object.get("background") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => {
                    return Err(EventError::invalid(
                        "interaction.connect `background` must be a boolean.",
                    ));
                }
            };
            Ok(ClientEvent::Connect(ConnectEvent { id, background }))
        }
        client_event::CREATE => {
            let create: CreateEvent = serde_json::from_value(fields())
                .map_err(|e| EventError::invalid(format!("Invalid interaction.create: {e}.")))?;
            Ok(ClientEvent::Create(create))
        }
        client_event::INPUT => {
            let Some(Value::Array(content)) = object.get("content") else {
                return Err(EventError::invalid(
                    "input.content must be a non-empty list.",
                ));
            };
            if content.is_empty() {
                return Err(EventError::invalid(
                    "input.content must be a non-empty list.",
                ));
            }
            if content.len() > MAX_INPUT_ITEMS {
                return Err(EventError::invalid(format!(
                    "input.content holds at most {MAX_INPUT_ITEMS} items, not {}.",
                    content.len()
                )));
            }
            for (i, item) in content.iter().enumerate() {
                let ty = item.get("type").and_then(Value::as_str);
                if !ty.is_some_and(|t| CONTENT_TYPES.contains(&t)) {
                    return Err(EventError::invalid(format!(
                        "input.content[{i}] must be a content object with `type` one of {}.",
                        CONTENT_TYPES.join(", ")
                    )));
                }
            }
            Ok(ClientEvent::Input(InputEvent {
                content: content.clone(),
            }))
        }
        client_event::COMPLETE => Ok(ClientEvent::Complete),
        client_event::CANCEL => Ok(ClientEvent::Cancel),
        client_event::DISCONNECT => Ok(ClientEvent::Disconnect),
        client_event::USER_ACTION => Ok(ClientEvent::World(client_event::USER_ACTION)),
        client_event::WORLD_SETUP => Ok(ClientEvent::World(client_event::WORLD_SETUP)),
        other => Err(EventError::invalid(format!(
            "Unknown client event_type `{}`; a live socket takes {}.",
            truncated(other),
            [
                client_event::CONNECT,
                client_event::CREATE,
                client_event::INPUT,
                client_event::COMPLETE,
                client_event::CANCEL,
                client_event::DISCONNECT,
            ]
            .join(", ")
        ))),
    }
}

/// At most 64 characters of a client's string, for messages.
fn truncated(s: &str) -> String {
    let mut out: String = s.chars().take(64).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The `error` event for `error`.
pub fn error_event(error: &EventError) -> Value {
    json!({"event_type": "error", "error": {"code": error.code, "message": error.message}})
}

/// `interaction.connected`: `interaction_id` and `status` are extras the SDK keeps.
pub fn connected(id: &str, status: &str) -> Value {
    json!({"event_type": "interaction.connected", "interaction_id": id, "status": status})
}

/// `interaction.created`: the id the new interaction got.
pub fn created(id: &str) -> Value {
    json!({"event_type": "interaction.created", "interaction_id": id})
}

/// `interaction.status_update`: a turn ended (not typed by the SDK's live union: it yields it
/// as a plain model with `.status`).
pub fn status_update(id: &str, status: &str) -> Value {
    json!({"event_type": "interaction.status_update", "interaction_id": id, "status": status})
}

/// `interaction.completed`, terminal: `status` is a `google.rpc.Status` (`code` 0: OK).
pub fn completed(
    id: &str,
    status: &LiveStatus,
    interaction: &hookbox_protocol::api::Interaction,
) -> Value {
    let mut event = json!({
        "event_type": "interaction.completed",
        "interaction_id": id,
        "status": status,
    });
    put_times(&mut event, interaction);
    event
}

/// `interaction.cancelled`, terminal.
pub fn cancelled(id: &str, interaction: &hookbox_protocol::api::Interaction) -> Value {
    let mut event = json!({"event_type": "interaction.cancelled", "interaction_id": id});
    put_times(&mut event, interaction);
    event
}

/// `reconnection_required`, terminal for the SDK: the socket is shed, the interaction kept.
pub fn reconnection_required(id: Option<&str>) -> Value {
    json!({"event_type": "reconnection_required", "interaction_id": id})
}

fn put_times(event: &mut Value, i: &hookbox_protocol::api::Interaction) {
    if let Some(usage) = &i.usage {
        event["usage"] = serde_json::to_value(usage).unwrap_or(Value::Null);
    }
    if let Some(created) = &i.created {
        event["created"] = Value::String(created.clone());
    }
    if let Some(updated) = &i.updated {
        event["updated"] = Value::String(updated.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Result<ClientEvent, EventError> {
        let mut events = decode(text, 1 << 20).unwrap();
        assert_eq!(events.len(), 1);
        events.remove(0)
    }

    #[test]
    fn the_sdks_frames_decode() {
        assert_eq!(
            one(r#"{"event_type":"interaction.connect","id":"int_1"}"#).unwrap(),
            ClientEvent::Connect(ConnectEvent {
                id: "int_1".into(),
                background: None
            })
        );
        assert!(matches!(
            one(r#"{"content":[{"text":"And 3+3?","type":"text"}],"event_type":"input"}"#),
            Ok(ClientEvent::Input(_))
        ));
        assert!(matches!(
            one(
                r#"{"event_type":"interaction.create","model":"gemini-4-neon","store":true,"system_instruction":"Be brief."}"#
            ),
            Ok(ClientEvent::Create(CreateEvent {
                store: Some(true),
                ..
            }))
        ));
        let batch = decode(
            r#"{"events":[{"event_type":"input","content":[{"type":"text","text":"bye"}]},{"event_type":"interaction.complete"}]}"#,
            1 << 20,
        )
        .unwrap();
        assert!(matches!(batch[1], Ok(ClientEvent::Complete)));
        assert_eq!(
            one(r#"{"event_type":"world_setup","world_prompt":"A coral reef"}"#).unwrap(),
            ClientEvent::World("world_setup")
        );
    }

    #[test]
    fn every_malformed_frame_is_an_error_that_names_the_problem() {
        for (text, needle) in [
            ("{not json", "not valid JSON"),
            ("[1,2]", "JSON object"),
            (
                r#"{"events":{"event_type":"input"}}"#,
                "`events` must be a list",
            ),
            (r#"{"x":1}"#, "no `event_type`"),
            (r#"{"event_type":7}"#, "non-empty string"),
        ] {
            let err = decode(text, 1 << 20)
                .and_then(|mut e| e.remove(0))
                .unwrap_err();
            assert!(err.message.contains(needle), "{text}: {}", err.message);
        }
        for (text, needle) in [
            (
                r#"{"event_type":"bogus"}"#,
                "Unknown client event_type `bogus`",
            ),
            (r#"{"event_type":"input"}"#, "non-empty list"),
            (r#"{"event_type":"input","content":{}}"#, "non-empty list"),
            (
                r#"{"event_type":"input","content":[{"type":"function_result","call_id":"x"}]}"#,
                "content[0]",
            ),
            (r#"{"event_type":"interaction.connect"}"#, "needs `id`"),
            (
                r#"{"event_type":"interaction.connect","id":"  "}"#,
                "needs `id`",
            ),
            (
                r#"{"event_type":"interaction.create","tools":"x"}"#,
                "interaction.create",
            ),
        ] {
            let err = one(text).unwrap_err();
            assert!(err.message.contains(needle), "{text}: {}", err.message);
        }
        let big = format!(
            r#"{{"event_type":"input","content":[{{"type":"text","text":"{}"}}]}}"#,
            "a".repeat(2000)
        );
        assert_eq!(decode(&big, 1024).unwrap_err().code, "resource_exhausted");
        let many = format!(
            r#"{{"events":[{}]}}"#,
            vec![r#"{"event_type":"interaction.complete"}"#; MAX_BATCH_EVENTS + 1].join(",")
        );
        assert!(
            decode(&many, 1 << 20)
                .unwrap_err()
                .message
                .contains("at most")
        );
    }

    #[test]
    fn every_server_event_has_an_event_type() {
        let i = hookbox_protocol::api::Interaction::new(
            "int_1",
            hookbox_protocol::api::InteractionStatus::Completed,
        );
        for event in [
            error_event(&EventError::invalid("x")),
            connected("int_1", "idle"),
            created("int_1"),
            status_update("int_1", "idle"),
            completed(
                "int_1",
                &LiveStatus {
                    code: 0,
                    message: None,
                },
                &i,
            ),
            cancelled("int_1", &i),
            reconnection_required(None),
        ] {
            assert!(
                event["event_type"].as_str().is_some_and(|t| !t.is_empty()),
                "{event}"
            );
        }
        assert_eq!(
            completed(
                "int_1",
                &LiveStatus {
                    code: 0,
                    message: None
                },
                &i
            )["status"],
            json!({"code": 0})
        );
    }
}
