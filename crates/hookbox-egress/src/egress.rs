//! The one code path for leaving an environment, shared by the proxy and hook posts:
//! authorize a host against the policy, resolve it once, check every address, dial exactly a
//! checked address, wrap it in verified TLS, and compute the headers to inject.
//!
//! Owns [`Egress`] (one environment's policy, CA, credentials and limits), [`Denial`] and
//! [`EgressError`]. What a refusal or a failure says (a 403 body, a hook's or a webhook's error)
//! reaches the tenant: it names the rule, never what a name resolved to; only the operator's
//! audit event has that ([`Denial::logged`]). It must not speak HTTP to clients (see `proxy`
//! and `poster`).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
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

    /// The socket addresses to dial for `name` on `port`. By default the resolved addresses
    /// with `port`; a resolver may redirect the port too (see [`StaticResolver::connect_to`]).
    async fn resolve_port(&self, name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        let ips = self.resolve(name).await?;
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
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

/// Fixed name-to-address pins (like curl's `--resolve`) and `host:port`-to-`ip:port` pins (like
/// curl's `--connect-to`), falling back to `fallback` for other names if one is given. Operators
/// use it to pin names; tests use it to point names at loopback receivers. Pinned addresses are
/// still checked against the blocked ranges like any resolved address.
#[derive(Debug, Default)]
pub struct StaticResolver {
    /// Lower-case name → addresses (any port).
    pub pins: HashMap<String, Vec<IpAddr>>,
    /// (lower-case name, port) → socket addresses; checked before `pins`.
    pub connect_to: HashMap<(String, u16), Vec<SocketAddr>>,
    pub fallback: Option<Arc<dyn Resolver>>,
}

impl StaticResolver {
    /// A resolver with `pins` (`host:port` → `ip:port`), falling back to `fallback`.
    pub fn from_pins(pins: &[ResolvePin], fallback: Option<Arc<dyn Resolver>>) -> Self {
        let mut connect_to: HashMap<(String, u16), Vec<SocketAddr>> = HashMap::new();
        for pin in pins {
            connect_to
                .entry((pin.host.clone(), pin.port))
                .or_default()
                .push(pin.addr);
        }
        Self {
            pins: HashMap::new(),
            connect_to,
            fallback,
        }
    }
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

    async fn resolve_port(&self, name: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Some(addrs) = self.connect_to.get(&(name.to_owned(), port)) {
            return Ok(addrs.clone());
        }
        let ips = self.resolve(name).await?;
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

/// An operator's `HOST:PORT=IP:PORT` pin (curl's `--connect-to`): connections to `HOST` on
/// `PORT` dial `IP:PORT` instead. TLS still verifies `HOST`, and the address is still checked
/// against the blocked ranges (so a loopback pin needs an operator CIDR too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvePin {
    /// Lower-case, without a trailing dot.
    pub host: String,
    pub port: u16,
    pub addr: SocketAddr,
}

/// A malformed [`ResolvePin`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resolve pin {input:?}: {reason} (expected HOST:PORT=IP:PORT, IPv6 as [::1]:443)")]
pub struct ResolvePinError {
    pub input: String,
    pub reason: &'static str,
}

impl std::str::FromStr for ResolvePin {
    type Err = ResolvePinError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |reason| ResolvePinError {
            input: input.to_owned(),
            reason,
        };
        let (from, to) = input.split_once('=').ok_or_else(|| err("missing `=`"))?;
        let (host, port) = from
            .rsplit_once(':')
            .ok_or_else(|| err("missing `:PORT` after HOST"))?;
        let port: u16 = port.parse().map_err(|_| err("invalid PORT"))?;
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        match parse_host(&host) {
            Ok(HostKind::Name(_)) => {}
            Ok(HostKind::Ip(_)) => return Err(err("HOST must be a name, not an address")),
            Err(_) => return Err(err("invalid HOST")),
        }
        let addr: SocketAddr = to.parse().map_err(|_| err("invalid IP:PORT"))?;
        Ok(Self { host, port, addr })
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

/// A refusal: the rule and a human explanation (never a secret). `detail` is what the sandbox,
/// a hook, a model or a webhook's owner is told: it names the rule, never what an internal name
/// resolves to. The operator's audit event may say more ([`Denial::logged`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("denied by rule {}: {detail}", rule.name())]
pub struct Denial {
    pub rule: DenyRule,
    pub detail: String,
    /// The operator's fuller account (the resolved address and the range), for the audit
    /// event only; `None`: the same as `detail`.
    logged: Option<String>,
}

impl Denial {
    /// What the operator's audit event says about the refusal: `detail`, or more (the address
    /// a name resolved to) when there is more.
    pub fn logged(&self) -> &str {
        self.logged.as_deref().unwrap_or(&self.detail)
    }
}

pub(crate) fn deny(rule: DenyRule, detail: impl Into<String>) -> Denial {
    Denial {
        rule,
        detail: detail.into(),
        logged: None,
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
    /// The environment's project, for audit events.
    pub project: Option<String>,
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
            project: None,
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
    project: Option<String>,
    policy: NetworkPolicy,
    guard: AddressGuard,
    resolver: Arc<dyn Resolver>,
    credentials: Arc<dyn CredentialStore>,
    audit: Arc<dyn AuditSink>,
    /// The operator's extra upstream roots, read when [`Self::tls`] is first made.
    extra_ca_file: Option<PathBuf>,
    /// The CA and the client configurations, made on first use (see [`Self::tls`]).
    tls: OnceLock<EgressTls>,
    pub(crate) limits: Limits,
}

/// An environment's TLS material: what only a connection that leaves (or is intercepted) needs.
#[derive(Debug)]
struct EgressTls {
    ca: EnvCa,
    upstream: Arc<ClientConfig>,
    /// For hookbox's own clients that go through this environment's proxy.
    client: Arc<ClientConfig>,
}

impl EgressTls {
    fn new(environment: &str, extra_ca_file: Option<&Path>) -> Result<Self, TlsError> {
        let ca = EnvCa::generate(environment)?;
        Ok(Self {
            client: crate::tls::upstream_client_config_and(extra_ca_file, Some(&ca))?,
            upstream: upstream_client_config(extra_ca_file)?,
            ca,
        })
    }
}

impl Egress {
    /// The environment's egress. Its CA key pair and TLS configurations are made when first
    /// needed (a connection intercepted or verified, the sandbox's CA bundle, hookbox's own
    /// client): most environments' calls never leave, and a one-shot CLI call would otherwise
    /// pay for a key pair and two root stores it does not use. An operator's extra CA file is
    /// still read here, so that a bad one fails at once rather than at the first connection.
    pub fn new(config: EgressConfig) -> Result<Self, TlsError> {
        let egress = Self {
            extra_ca_file: config.extra_ca_file,
            tls: OnceLock::new(),
            environment: config.environment,
            project: config.project,
            policy: config.policy,
            guard: AddressGuard::new(config.operator_allowed_cidrs),
            resolver: config.resolver,
            credentials: config.credentials,
            audit: config.audit,
            limits: config.limits,
        };
        if egress.extra_ca_file.is_some() {
            egress.tls()?;
        }
        Ok(egress)
    }

    /// The TLS material, made on the first call (two callers racing may both make it; one
    /// copy is kept, so every caller sees the same CA).
    fn tls(&self) -> Result<&EgressTls, TlsError> {
        if let Some(tls) = self.tls.get() {
            return Ok(tls);
        }
        let made = EgressTls::new(&self.environment, self.extra_ca_file.as_deref())?;
        Ok(self.tls.get_or_init(|| made))
    }

    /// Whether this egress has made its CA and TLS configurations yet (see [`Self::new`]).
    pub fn tls_made(&self) -> bool {
        self.tls.get().is_some()
    }

    /// TLS for a client inside hookbox whose connections go through this environment's proxy
    /// ([`crate::LocalEndpoint`]): the upstream trust (public roots and the operator's extra
    /// CA) and this environment's CA, which signs the certificates of intercepted connections.
    pub fn client_tls(&self) -> Result<Arc<ClientConfig>, TlsError> {
        Ok(self.tls()?.client.clone())
    }

    /// The environment's CA certificate, for the sandbox's trust store.
    pub fn ca_cert_pem(&self) -> Result<&str, TlsError> {
        Ok(self.tls()?.ca.cert_pem())
    }

    /// The CA bundle to overlay on the sandbox's system bundle (and to point `SSL_CERT_FILE`
    /// and friends at, see [`crate::env_vars`]): the system roots followed by this environment's CA.
    pub fn sandbox_ca_bundle(&self, system_bundle_pem: &str) -> Result<String, TlsError> {
        let ca = self.tls()?.ca.cert_pem();
        let mut out = String::with_capacity(system_bundle_pem.len() + ca.len() + 1);
        out.push_str(system_bundle_pem);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(ca);
        Ok(out)
    }

    pub(crate) fn ca(&self) -> Result<&EnvCa, TlsError> {
        Ok(&self.tls()?.ca)
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
                detail: d.logged().to_owned(),
            },
        };
        // The entry's credential, so a refusal for a deleted one names it.
        let credential = match self.policy.decide(host) {
            HostDecision::Allowed { entry, .. } => entry.credential.clone(),
            _ => None,
        };
        self.audit.record(&AuditEvent {
            project: self.project.clone(),
            environment: self.environment.clone(),
            credential,
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
                // The tenant learns the rule; only the operator's audit event learns what an
                // internal name resolves to.
                let told = if host == ip.to_string() {
                    format!("{host} is in a blocked range ({})", range.rule)
                } else {
                    format!(
                        "the address {host} resolves to is in a blocked range ({})",
                        range.rule
                    )
                };
                let via = via
                    .map(|v| format!(" (embedded via {v:?})"))
                    .unwrap_or_default();
                Err(Denial {
                    rule: DenyRule::BlockedAddress(range.rule),
                    detail: told,
                    logged: Some(format!(
                        "{host} resolves to {ip}{via}, in {} ({})",
                        range.cidr, range.reason
                    )),
                })
            }
        }
    }

    /// Resolves the target once, checks every address, and returns the checked addresses in
    /// resolver order. One blocked address refuses the whole name (a name that mixes public
    /// and private addresses is a rebinding attempt or a misconfiguration).
    pub async fn resolve_checked(&self, target: &Target) -> Result<Vec<SocketAddr>, EgressError> {
        let addrs = match &target.host {
            HostKind::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
            HostKind::Name(name) => {
                let lookup = self.resolver.resolve_port(name, target.port);
                match tokio::time::timeout(self.limits.resolve_timeout, lookup).await {
                    Err(_) => return Err(EgressError::Timeout("name resolution")),
                    Ok(Err(e)) => {
                        return Err(EgressError::Resolve {
                            host: name.clone(),
                            message: e.to_string(),
                        });
                    }
                    Ok(Ok(addrs)) if addrs.is_empty() => {
                        return Err(EgressError::Resolve {
                            host: name.clone(),
                            message: "no addresses".into(),
                        });
                    }
                    Ok(Ok(addrs)) => addrs,
                }
            }
        };
        for addr in &addrs {
            self.check_address(&target.host_str, addr.ip())?;
        }
        Ok(addrs)
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
                // The error goes back to the sandbox (a 502): it says what failed, not which
                // address the name resolved to; the operator's log has that.
                Ok(Err(e)) => {
                    tracing::debug!(host = %target.host_str, %addr, error = %e, "egress connect failed");
                    last = e.to_string();
                }
                Err(_) => {
                    tracing::debug!(host = %target.host_str, %addr, "egress connect timed out");
                    last = "connect timed out".into();
                }
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
        let upstream = self.tls().map_err(|e| EgressError::Tls {
            host: target.host_str.clone(),
            message: e.to_string(),
        })?;
        let connector = tokio_rustls::TlsConnector::from(upstream.upstream.clone());
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

    /// Every header value this environment's egress may inject (its allowlist's `transform`
    /// values and its credentials' values, read fresh from the credential store), with the
    /// parts of each that count on their own ([`crate::scrub::parts`]: the token after a
    /// `Bearer `-style prefix, each cookie of a list): what must be scrubbed from anything
    /// recorded about the environment, since an upstream may echo what it was sent. Credentials
    /// that cannot be read are left out (nothing of theirs was injected).
    pub fn injected_values(&self) -> Vec<String> {
        let NetworkPolicy::Allowlist(entries) = &self.policy else {
            return Vec::new();
        };
        let mut values: Vec<String> = Vec::new();
        for entry in entries {
            for (_, value) in &entry.transform {
                values.push(value.clone());
            }
            if let Some(id) = &entry.credential
                && let Ok(Injection::Header { value, .. }) = self.credentials.reveal(id)
            {
                values.push(value.expose().to_owned());
            }
        }
        let mut values: Vec<String> = values
            .iter()
            .flat_map(|v| crate::scrub::parts(v.as_bytes()))
            .filter_map(|part| String::from_utf8(part).ok())
            .collect();
        values.sort();
        values.dedup();
        values
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::FileCredentialStore;

    #[test]
    fn resolve_pins_parse_like_curl_connect_to() {
        let pin: ResolvePin = "Telemetry.Example.com.:443=127.0.0.1:8443".parse().unwrap();
        assert_eq!(pin.host, "telemetry.example.com");
        assert_eq!(pin.port, 443);
        assert_eq!(pin.addr, "127.0.0.1:8443".parse().unwrap());
        let v6: ResolvePin = "a.example:443=[::1]:9443".parse().unwrap();
        assert_eq!(v6.addr, "[::1]:9443".parse().unwrap());
        for bad in [
            "a.example:443",
            "a.example=127.0.0.1:1",
            "a.example:x=127.0.0.1:1",
            "a.example:443=127.0.0.1",
            "127.0.0.1:443=127.0.0.1:1",
            "a b:443=127.0.0.1:1",
        ] {
            assert!(bad.parse::<ResolvePin>().is_err(), "{bad}");
        }
    }

    fn egress(cidrs: Vec<Cidr>) -> (Egress, tempfile::TempDir) {
        let data = tempfile::tempdir().unwrap();
        let store = Arc::new(FileCredentialStore::open(data.path()).unwrap());
        let policy =
            NetworkPolicy::from_json(Some(&serde_json::json!({"allowlist": [{"domain": "*"}]})))
                .unwrap();
        let mut config = EgressConfig::new("env_test", policy, store);
        let pins = ["a.example:443=127.0.0.1:8443".parse().unwrap()];
        config.resolver = Arc::new(StaticResolver::from_pins(&pins, None));
        config.operator_allowed_cidrs = cidrs;
        (Egress::new(config).unwrap(), data)
    }

    #[tokio::test]
    async fn a_pin_redirects_the_port_but_its_address_is_still_checked() {
        let (open, _d1) = egress(vec!["127.0.0.0/8".parse().unwrap()]);
        let target = open.authorize("a.example", 443).unwrap();
        assert_eq!(
            open.resolve_checked(&target).await.unwrap(),
            vec!["127.0.0.1:8443".parse().unwrap()]
        );
        // Another port of the same name is not pinned (and there is no fallback resolver).
        let other = open.authorize("a.example", 80).unwrap();
        assert!(matches!(
            open.resolve_checked(&other).await,
            Err(EgressError::Resolve { .. })
        ));

        let (closed, _d2) = egress(Vec::new());
        let target = closed.authorize("a.example", 443).unwrap();
        match closed.resolve_checked(&target).await {
            Err(EgressError::Denied(d)) => assert_eq!(d.rule.name(), "loopback"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_ca_is_made_on_first_use_once_and_a_bad_extra_ca_file_still_fails_at_once() {
        let (egress, _data) = egress(Vec::new());
        assert!(!egress.tls_made(), "made before anything needed it");
        let bundle = egress.sandbox_ca_bundle("ROOTS\n").unwrap();
        assert!(egress.tls_made());
        let ca = egress.ca_cert_pem().unwrap().to_owned();
        assert_eq!(bundle, format!("ROOTS\n{ca}"));
        assert!(Arc::ptr_eq(
            &egress.client_tls().unwrap(),
            &egress.client_tls().unwrap()
        ));

        let data = tempfile::tempdir().unwrap();
        let empty = data.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let store = Arc::new(FileCredentialStore::open(data.path()).unwrap());
        let mut config = EgressConfig::new("env_test", NetworkPolicy::Disabled, store);
        config.extra_ca_file = Some(empty);
        assert!(matches!(Egress::new(config), Err(TlsError::CaFile { .. })));
    }
}
