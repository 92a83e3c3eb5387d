//! Content items (`type` discriminator, unknown types kept as they came) and media, and
//! [`Object`], the JSON object of the format's open-ended parts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object, used for open-ended parts of the wire format.
pub type Object = Map<String, Value>;

// ---------------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------------

/// One content item (`type` discriminator). Unknown types are kept as they came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Value>,
    },
    Image(Media),
    Audio(Media),
    Document(Media),
    Video(Media),
    #[serde(untagged)]
    Other(Value),
}

impl Content {
    /// A plain text item.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text {
            text: text.into(),
            annotations: None,
        }
    }

    /// The text of a `text` item.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// The body of `image`, `audio`, `document` and `video` items.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Media {
    /// Base64 payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}
