//! Environment variable names this crate reads (the only place they are spelled).

/// Key for the `gemini` backend; its presence makes `gemini` the default model.
pub const GEMINI_API_KEY: &str = "GEMINI_API_KEY";
/// Base URL of the Gemini API (default `https://generativelanguage.googleapis.com`).
pub const HOOKBOX_GEMINI_BASE_URL: &str = "HOOKBOX_GEMINI_BASE_URL";
/// Default Gemini model.
pub const HOOKBOX_GEMINI_MODEL: &str = "HOOKBOX_GEMINI_MODEL";
/// Base URL of an OpenAI-compatible server (e.g. `http://127.0.0.1:11434/v1`); selects the
/// `openai` backend.
pub const HOOKBOX_OPENAI_BASE_URL: &str = "HOOKBOX_OPENAI_BASE_URL";
/// Model name for the `openai` backend.
pub const HOOKBOX_OPENAI_MODEL: &str = "HOOKBOX_OPENAI_MODEL";
/// Optional bearer key for the `openai` backend.
pub const HOOKBOX_OPENAI_API_KEY: &str = "HOOKBOX_OPENAI_API_KEY";
