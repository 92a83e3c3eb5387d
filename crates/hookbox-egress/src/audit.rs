//! Audit events: one per egress decision (allowed or denied), for proxy traffic and hook posts.
//!
//! Owns the event shape and the sink trait. Events carry host, port, decision and rule, never a
//! header value or body. This module must not decide anything.

use std::fmt;

/// Where the request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A sandbox program, through the proxy.
    Sandbox,
    /// An http hook handler, through [`crate::EgressPoster`].
    Hook,
    /// A webhook delivery, through [`crate::EgressPoster::for_webhooks`].
    Webhook,
}

/// How the connection is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// CONNECT, bytes relayed untouched.
    Tunnel,
    /// CONNECT, TLS terminated with the environment's CA so headers can be injected.
    Intercept,
    /// Plain http request (absolute-form through the proxy, or a hook post).
    Http,
    /// A hook post over https.
    Https,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Allowed,
    Denied { rule: &'static str, detail: String },
}

/// One audit event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// The project of the environment, when it has one.
    pub project: Option<String>,
    pub environment: String,
    pub origin: Origin,
    pub mode: Mode,
    pub host: String,
    pub port: u16,
    /// The allowlist entry's credential (its id, never its value), when the entry has one.
    pub credential: Option<String>,
    pub outcome: Outcome,
}

/// Receives audit events.
pub trait AuditSink: Send + Sync + fmt::Debug {
    fn record(&self, event: &AuditEvent);
}

/// Writes audit events as tracing events with target `hookbox_egress::audit`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingAudit;

impl AuditSink for TracingAudit {
    fn record(&self, event: &AuditEvent) {
        match &event.outcome {
            Outcome::Allowed => tracing::info!(
                name: hookbox_protocol::events::EGRESS_ALLOWED,
                target: "hookbox_egress::audit",
                project = event.project.as_deref(),
                environment = %event.environment,
                credential = event.credential.as_deref(),
                origin = ?event.origin,
                mode = ?event.mode,
                host = %event.host,
                port = event.port,
                "egress allowed"
            ),
            Outcome::Denied { rule, detail } => tracing::warn!(
                name: hookbox_protocol::events::EGRESS_DENIED,
                target: "hookbox_egress::audit",
                project = event.project.as_deref(),
                environment = %event.environment,
                credential = event.credential.as_deref(),
                origin = ?event.origin,
                mode = ?event.mode,
                host = %event.host,
                port = event.port,
                rule = *rule,
                detail = %detail,
                "egress denied"
            ),
        }
    }
}
