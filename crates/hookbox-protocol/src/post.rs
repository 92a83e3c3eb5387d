//! One bounded POST of JSON to a URL, and what came of it: the shape shared by the two things
//! hookbox posts (an http hook's event, a webhook delivery) and the crate that carries both
//! through the network policy (`hookbox-egress`'s `EgressPoster`). The hooks engine's seam
//! (`hookbox_hooks::http::HttpPoster`) takes and returns these too, so wiring it to egress is a
//! one-line adapter and neither egress nor webhooks depends on the hooks engine.
//!
//! Data only: sending is the poster's business.

use std::time::Duration;

/// One POST of a JSON body.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub url: String,
    /// Headers to send, in order (a hook's `headers` map in file order, a webhook's signature).
    pub headers: Vec<(String, String)>,
    /// The JSON payload.
    pub body: Vec<u8>,
    /// Limit for connect, send and reading the response together.
    pub timeout: Duration,
    /// Cap on the response body; a longer body is cut and flagged.
    pub response_limit: usize,
}

/// What came back.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
    pub truncated: bool,
}

/// Why a POST produced no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    #[error("blocked by network policy: {0}")]
    Blocked(String),
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("timed out")]
    TimedOut,
    #[error("request failed: {0}")]
    Other(String),
}
