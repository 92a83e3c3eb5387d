//! Webhook deliveries: [`signing`] (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,<base64 HMAC-SHA256>`, one signature per live secret) and
//! [`deliver`], the task that sends the store's outbox at least once, with exponential backoff
//! and jitter, through the egress SSRF guard.
//!
//! The outbox itself (which events exist, one row per subscribed webhook, written in the
//! transaction of the change that caused it) belongs to `hookbox-store`; the HTTP resource to
//! `hookbox-server`. This crate must not write events, serve HTTP or decide where a request may
//! go: the poster it is given (`EgressPoster::for_webhooks`) does.

pub mod deliver;
pub mod signing;

pub use deliver::{Deliverer, DeliveryError, DeliveryOptions};
