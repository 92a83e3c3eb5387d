//! How an http handler's event reaches its URL.
//!
//! [`HttpPoster`] is the seam between the hooks engine and the network: the engine only says
//! "POST these bytes to this URL with these headers, within this time, reading at most this
//! much". [`DirectPoster`] sends straight out with reqwest (no proxy, no redirects) and is meant
//! for local development; `hookbox-environments` implements the same trait over `hookbox-egress`'s
//! poster so that every hook request goes through an environment's allowlist, SSRF defences
//! and header injection. The request and response shapes are `hookbox_protocol::post`'s, shared
//! with webhook deliveries; every [`HttpError`] makes the handler fail open (or closed, with
//! `on_failure: deny`).
//!
//! This module must not interpret response bodies; the engine decides what a body means.

use std::fmt;

use async_trait::async_trait;

pub use hookbox_protocol::post::{HttpError, HttpRequest, HttpResponse};

/// Default cap on a hook response body.
pub const DEFAULT_RESPONSE_LIMIT: usize = 1024 * 1024;

/// Sends hook events over HTTP.
#[async_trait]
pub trait HttpPoster: Send + Sync + fmt::Debug {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, HttpError>;
}

/// Sends requests directly, with no egress policy. Redirects are not followed (a hook endpoint
/// that redirects fails open rather than sending the event somewhere unreviewed) and ambient
/// proxy variables are ignored.
#[derive(Debug, Clone)]
pub struct DirectPoster {
    client: reqwest::Client,
}

impl DirectPoster {
    pub fn new() -> Result<Self, HttpError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| HttpError::Other(e.to_string()))?;
        Ok(Self { client })
    }
}

#[async_trait]
impl HttpPoster for DirectPoster {
    async fn post(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let url = reqwest::Url::parse(&request.url)
            .map_err(|e| HttpError::InvalidUrl(format!("{}: {e}", request.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HttpError::InvalidUrl(format!(
                "{}: only http and https are supported",
                request.url
            )));
        }
        let work = async {
            let mut builder = self
                .client
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json");
            for (name, value) in &request.headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            let mut response = builder
                .body(request.body.clone())
                .send()
                .await
                .map_err(classify)?;
            let status = response.status().as_u16();
            let mut body = Vec::new();
            let mut truncated = false;
            while let Some(chunk) = response.chunk().await.map_err(classify)? {
                let room = request.response_limit.saturating_sub(body.len());
                if chunk.len() > room {
                    body.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok(HttpResponse {
                status,
                body,
                truncated,
            })
        };
        tokio::time::timeout(request.timeout, work)
            .await
            .map_err(|_| HttpError::TimedOut)?
    }
}

fn classify(err: reqwest::Error) -> HttpError {
    if err.is_timeout() {
        HttpError::TimedOut
    } else if err.is_connect() {
        HttpError::Connect(err.to_string())
    } else if err.is_builder() {
        HttpError::InvalidUrl(err.to_string())
    } else {
        HttpError::Other(err.to_string())
    }
}
