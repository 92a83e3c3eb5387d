//! The one code path for leaving an environment, shared by the proxy and hook posts:
//! authorize a host against the policy, resolve it once, check every address, dial exactly a
//! checked address, wrap it in verified TLS, and compute the headers to inject.
//!
//! Owns [`Egress`] (one environment's policy, CA, credentials and limits), [`Denial`] and
//! [`EgressError`]. It must not speak HTTP to clients (see `proxy` and `poster`).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::{HeaderName, HeaderValue};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::audit::{AuditEvent, AuditSink, Mode, Origin, Outcome, TracingAudit};
use crate::credentials::{CredentialError, CredentialStore, Injection};
use crate::inject::Injected;
use crate::policy::{AllowEntry, HostDecision, NetworkPolicy};
use crate::ssrf::{AddressGuard, AddressVerdict, Cidr, HostError, HostKind, parse_host};
use crate::tls::{EnvCa, TlsError, upstream_client_config};

/// Bounds on every wait and buffer.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Name resolution.
    pub resolve_timeout: Duration,
    /// TCP connect to one address.
    pub connect_timeout: Duration,
    /// TLS handshakes, the ClientHello of a tunnel, and an upstream response's head.
    pub handshake_timeout: Duration,
    /// A request head from a client.
    pub header_read_timeout: Duration,
    /// No byte in either direction for this long closes a tunnel or connection.
    pub idle_timeout: Duration,
    /// hyper's read buffer, which bounds a request or response head.
    pub max_header_bytes: usize,
    /// Concurrent client connections per proxy.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            resolve_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
            max_header_bytes: 64 * 1024,
            max_connections: 1024,
        }
    }
}

/// Resolves names to addresses. The proxy resolves once per connection and dials only
/// addresses it has checked.
#[async_trait]
pub trait Resolver: Send + Sync + fmt::Debug {
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>>;
}

/// The system resolver (getaddrinfo on a blocking thread).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((name, 0)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// Fixed name-to-address pins (like curl's `--resolve`), falling back to `fallback` for other
/// names if one is given. Operators use it to pin names; tests use it to point names at
/// loopback receivers.
#[derive(Debug, Default)]
pub struct StaticResolver {
    pub pins: HashMap<String, Vec<IpAddr>>,
    pub fallback: Option<Arc<dyn Resolver>>,
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        if let Some(ips) = self.pins.get(name) {
            return Ok(ips.clone());
        }
        match &self.fallback {
            Some(f) => f.resolve(name).await,
            None => Err(io::Error::new(io::ErrorKind::NotFound, "name not pinned")),
        }
    }
}

/// The rule that refused a request. Exhaustive: every refusal names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyRule {
    /// The environment's network is disabled.
    NetworkDisabled,
    /// No allowlist entry matches the host.
    NotAllowlisted,
    /// The host string is not a valid name or IP literal.
    InvalidHost,
    /// `localhost` and `*.localhost` never leave the sandbox.
    LocalhostName,
    /// A resolved (or literal) address is in a blocked range.
    BlockedAddress(&'static str),
    /// A tunnel's TLS server name differs from its CONNECT host, or is missing.
    SniMismatch,
    /// A tunnel did not start with a TLS ClientHello.
    NotTls,
    /// A request inside an intercepted connection named another host.
    HostMismatch,
    /// The entry's credential is missing or cannot be injected.
    CredentialUnavailable,
    /// Credentials are only injected over TLS.
    CredentialNeedsTls,
    /// A request the proxy does not carry (origin-form, bad authority, unsupported scheme).
    BadRequest,
}

impl DenyRule {
    /// Short stable name, used in 403 bodies and audit events.
    pub fn name(self) -> &'static str {
        match self {
            DenyRule::NetworkDisabled => "network-disabled",
            DenyRule::NotAllowlisted => "not-allowlisted",
            DenyRule::InvalidHost => "invalid-host",
            DenyRule::LocalhostName => "localhost",
            DenyRule::BlockedAddress(range) => range,
            DenyRule::SniMismatch => "sni-mismatch",
            DenyRule::NotTls => "not-tls",
            DenyRule::HostMismatch => "host-mismatch",
            DenyRule::CredentialUnavailable => "credential-unavailable",
            DenyRule::CredentialNeedsTls => "credential-needs-tls",
            DenyRule::BadRequest => "bad-request",
        }
    }
}

/// A refusal: the rule and a human explanation (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("denied by rule {}: {detail}", rule.name())]
pub struct Denial {
    pub rule: DenyRule,
    pub detail: String,
}

pub(crate) fn deny(rule: DenyRule, detail: impl Into<String>) -> Denial {
    Denial {
        rule,
        detail: detail.into(),
    }
}

/// Why leaving failed.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error(transparent)]
    Denied(#[from] Denial),
    #[error("could not resolve {host}: {message}")]
    Resolve { host: String, message: String },
    #[error("could not connect to {host}: {message}")]
    Connect { host: String, message: String },
    #[error("timed out: {0}")]
    Timeout(&'static str),
    #[error("TLS with {host}: {message}")]
    Tls { host: String, message: String },
    #[error("upstream: {0}")]
    Upstream(String),
    #[error("configuration: {0}")]
    Config(String),
}

/// How an [`Egress`] is set up.
#[derive(Debug)]
pub struct EgressConfig {
    /// Environment id, for audit events and the CA's name.
    pub environment: String,
    pub policy: NetworkPolicy,
    /// Operator-only, dangerous: blocked CIDRs that may be dialed anyway.
    pub operator_allowed_cidrs: Vec<Cidr>,
    /// Operator-supplied PEM file of extra upstream roots.
    pub extra_ca_file: Option<PathBuf>,
    pub resolver: Arc<dyn Resolver>,
    pub credentials: Arc<dyn CredentialStore>,
    pub audit: Arc<dyn AuditSink>,
    pub limits: Limits,
}

impl EgressConfig {
    /// A configuration with the system resolver, tracing audit and default limits.
    pub fn new(
        environment: impl Into<String>,
        policy: NetworkPolicy,
        credentials: Arc<dyn CredentialStore>,
    ) -> Self {
        Self {
            environment: environment.into(),
            policy,
            operator_allowed_cidrs: Vec::new(),
            extra_ca_file: None,
            resolver: Arc::new(SystemResolver),
            credentials,
            audit: Arc::new(TracingAudit),
            limits: Limits::default(),
        }
    }
}

/// A host the policy allows, not yet resolved.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: HostKind,
    /// The host as it is written in SNI and certificates: a name, or an IP's text.
    pub host_str: String,
    pub port: u16,
    pub entry: AllowEntry,
}

/// One environment's way out.
#[derive(Debug)]
pub struct Egress {
    environment: String,
    policy: NetworkPolicy,
    guard: AddressGuard,
    resolver: Arc<dyn Resolver>,
    credentials: Arc<dyn CredentialStore>,
    audit: Arc<dyn AuditSink>,
    ca: EnvCa,
    upstream_tls: Arc<ClientConfig>,
    pub(crate) limits: Limits,
}

impl Egress {
    pub fn new(config: EgressConfig) -> Result<Self, TlsError> {
        Ok(Self {
            ca: EnvCa::generate(&config.environment)?,
            upstream_tls: upstream_client_config(config.extra_ca_file.as_deref())?,
            environment: config.environment,
            policy: config.policy,
            guard: AddressGuard::new(config.operator_allowed_cidrs),
            resolver: config.resolver,
            credentials: config.credentials,
            audit: config.audit,
            limits: config.limits,
        })
    }

    /// The environment's CA certificate, for the sandbox's trust store.
    pub fn ca_cert_pem(&self) -> &str {
        self.ca.cert_pem()
    }

    /// The CA bundle to overlay on the sandbox's system bundle (and to point `SSL_CERT_FILE`
    /// and friends at, see [`crate::env`]): the system roots followed by this environment's CA.
    pub fn sandbox_ca_bundle(&self, system_bundle_pem: &str) -> String {
        let mut out = String::with_capacity(system_bundle_pem.len() + self.ca.cert_pem().len() + 1);
        out.push_str(system_bundle_pem);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(self.ca.cert_pem());
        out
    }

    pub(crate) fn ca(&self) -> &EnvCa {
        &self.ca
    }

    pub fn policy(&self) -> &NetworkPolicy {
        &self.policy
    }

    /// Records an audit event.
    pub(crate) fn audit(
        &self,
        origin: Origin,
        mode: Mode,
        host: &str,
        port: u16,
        result: Result<(), &Denial>,
    ) {
        let outcome = match result {
            Ok(()) => Outcome::Allowed,
            Err(d) => Outcome::Denied {
                rule: d.rule.name(),
                detail: d.detail.clone(),
            },
        };
        self.audit.record(&AuditEvent {
            environment: self.environment.clone(),
            origin,
            mode,
            host: host.to_owned(),
            port,
            outcome,
        });
    }

    /// Checks a destination against the policy and the name rules (no lookup yet).
    pub fn authorize(&self, host: &str, port: u16) -> Result<Target, Denial> {
        let kind = parse_host(host).map_err(|e| match e {
            HostError::Empty
            | HostError::MalformedNumeric(_)
            | HostError::MalformedIpv6(_)
            | HostError::InvalidName(_) => deny(DenyRule::InvalidHost, e.to_string()),
        })?;
        let host_str = match &kind {
            HostKind::Ip(ip) => ip.to_string(),
            HostKind::Name(name) => name.clone(),
        };
        // Always-on rules first, so a refusal names them whatever the allowlist says.
        match &kind {
            HostKind::Name(name) if name == "localhost" || name.ends_with(".localhost") => {
                return Err(deny(
                    DenyRule::LocalhostName,
                    format!("{name} is the sandbox's own loopback, never reachable through egress"),
                ));
            }
            HostKind::Name(_) => {}
            HostKind::Ip(ip) => self.check_address(&host_str, *ip)?,
        }
        let entry = match self.policy.decide(&host_str) {
            HostDecision::Allowed { entry, .. } => entry.clone(),
            HostDecision::DeniedDisabled => {
                return Err(deny(
                    DenyRule::NetworkDisabled,
                    "this environment's network is disabled",
                ));
            }
            HostDecision::DeniedNotListed => {
                return Err(deny(
                    DenyRule::NotAllowlisted,
                    format!("{host_str} matches no entry of the environment's allowlist"),
                ));
            }
        };
        Ok(Target {
            host: kind,
            host_str,
            port,
            entry,
        })
    }

    fn check_address(&self, host: &str, ip: IpAddr) -> Result<(), Denial> {
        match self.guard.check(ip) {
            AddressVerdict::Public => Ok(()),
            AddressVerdict::OperatorAllowed(cidr) => {
                tracing::debug!(host, %ip, %cidr, "address allowed by operator CIDR");
                Ok(())
            }
            AddressVerdict::Blocked { range, via } => {
                let via = via
                    .map(|v| format!(" (embedded via {v:?})"))
                    .unwrap_or_default();
                Err(deny(
                    DenyRule::BlockedAddress(range.rule),
                    format!(
                        "{host} resolves to {ip}{via}, in {} ({})",
                        range.cidr, range.reason
                    ),
                ))
            }
        }
    }

    /// Resolves the target once, checks every address, and returns the checked addresses in
    /// resolver order. One blocked address refuses the whole name (a name that mixes public
    /// and private addresses is a rebinding attempt or a misconfiguration).
    pub async fn resolve_checked(&self, target: &Target) -> Result<Vec<SocketAddr>, EgressError> {
        let ips = match &target.host {
            HostKind::Ip(ip) => vec![*ip],
            HostKind::Name(name) => {
                let lookup = self.resolver.resolve(name);
                match tokio::time::timeout(self.limits.resolve_timeout, lookup).await {
                    Err(_) => return Err(EgressError::Timeout("name resolution")),
                    Ok(Err(e)) => {
                        return Err(EgressError::Resolve {
                            host: name.clone(),
                            message: e.to_string(),
                        });
                    }
                    Ok(Ok(ips)) if ips.is_empty() => {
                        return Err(EgressError::Resolve {
                            host: name.clone(),
                            message: "no addresses".into(),
                        });
                    }
                    Ok(Ok(ips)) => ips,
                }
            }
        };
        for ip in &ips {
            self.check_address(&target.host_str, *ip)?;
        }
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, target.port))
            .collect())
    }

    /// Resolves once, checks, and dials exactly the checked addresses in turn.
    pub async fn connect(&self, target: &Target) -> Result<TcpStream, EgressError> {
        let addrs = self.resolve_checked(target).await?;
        let mut last = String::from("no address");
        for addr in addrs {
            match tokio::time::timeout(self.limits.connect_timeout, TcpStream::connect(addr)).await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = format!("{addr}: {e}"),
                Err(_) => last = format!("{addr}: connect timed out"),
            }
        }
        Err(EgressError::Connect {
            host: target.host_str.clone(),
            message: last,
        })
    }

    /// TLS to the upstream server, verified against the real roots (plus the operator's extra
    /// CA), with SNI = the target host.
    pub async fn tls_connect(
        &self,
        target: &Target,
        tcp: TcpStream,
    ) -> Result<TlsStream<TcpStream>, EgressError> {
        let name = ServerName::try_from(target.host_str.clone()).map_err(|e| EgressError::Tls {
            host: target.host_str.clone(),
            message: e.to_string(),
        })?;
        let connector = tokio_rustls::TlsConnector::from(self.upstream_tls.clone());
        match tokio::time::timeout(self.limits.handshake_timeout, connector.connect(name, tcp))
            .await
        {
            Err(_) => Err(EgressError::Timeout("upstream TLS handshake")),
            Ok(Err(e)) => Err(EgressError::Tls {
                host: target.host_str.clone(),
                message: e.to_string(),
            }),
            Ok(Ok(s)) => Ok(s),
        }
    }

    /// The headers to inject for the target's entry, read fresh from the credential store (so
    /// an update applies to the next request). `tls` says whether the request is encrypted:
    /// credentials are never sent in clear text.
    pub fn injected(&self, target: &Target, tls: bool) -> Result<Injected, Denial> {
        let mut out = Injected::default();
        for (name, value) in &target.entry.transform {
            // Parsing the policy already validated both; a failure here is a bug, not a secret.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| deny(DenyRule::BadRequest, e.to_string()))?;
            let value = HeaderValue::from_str(value)
                .map_err(|e| deny(DenyRule::BadRequest, e.to_string()))?;
            out.push(name, value);
        }
        if let Some(id) = &target.entry.credential {
            if !tls {
                return Err(deny(
                    DenyRule::CredentialNeedsTls,
                    format!("credential {id} is only injected into https requests"),
                ));
            }
            let unavailable = |e: CredentialError| {
                deny(
                    DenyRule::CredentialUnavailable,
                    format!("credential {id}: {e}"),
                )
            };
            match self.credentials.reveal(id).map_err(unavailable)? {
                Injection::Header { name, value } => {
                    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        deny(
                            DenyRule::CredentialUnavailable,
                            format!("credential {id}: invalid header name"),
                        )
                    })?;
                    let mut value = HeaderValue::from_str(value.expose()).map_err(|_| {
                        deny(
                            DenyRule::CredentialUnavailable,
                            format!("credential {id}: invalid header value"),
                        )
                    })?;
                    value.set_sensitive(true);
                    out.push(name, value);
                }
            }
        }
        Ok(out)
    }
}
