//! Errors of models and the loop.

/// Errors of models and the loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("model request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("model server answered {status}: {message}")]
    ModelStatus { status: u16, message: String },
    #[error("model response could not be understood: {0}")]
    ModelResponse(String),
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;
