//! [`EgressPoster`]: one bounded POST ([`HttpRequest`] → [`HttpResponse`], the shapes of
//! `hookbox_protocol::post`) through an [`Egress`], so an http hook leaves through the same
//! policy, SSRF checks, TLS verification and header injection as sandbox traffic, and a webhook
//! delivery through the SSRF guard ([`EgressPoster::for_webhooks`]).
//!
//! Owns only the mapping between a POST and [`Egress`]; it must not decide anything itself, and
//! it does not know who posts: the hooks engine reaches it through an adapter where hooks are
//! wired to an environment (`hookbox-environments`), webhooks call it directly. A refusal is
//! `HttpError::Blocked` naming the rule, which the hooks engine treats as a failed handler (fail
//! open) and records in its trace.

use std::sync::Arc;

use bytes::Bytes;
use hookbox_protocol::post::{HttpError, HttpRequest, HttpResponse};
use http::uri::{Authority, Scheme};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt as _, Full};

use crate::audit::{Mode, Origin};
use crate::egress::{Egress, EgressError};
use crate::proxy::{open_http1, outbound_request, send};

/// Posts hook events through an environment's egress.
#[derive(Debug, Clone)]
pub struct EgressPoster {
    egress: Arc<Egress>,
    origin: Origin,
}

impl EgressPoster {
    pub fn new(egress: Arc<Egress>) -> Self {
        Self {
            egress,
            origin: Origin::Hook,
        }
    }

    /// The poster webhook deliveries leave through: any host, but every SSRF defence of
    /// egress (no loopback, private, link-local or metadata address unless the operator
    /// admitted its CIDR), https verified against the system roots and `extra_ca_file`, no
    /// header or credential injected; names resolved through `resolve_pins` first (the
    /// operator's `--egress-resolve`, still checked against the blocked ranges). Audited as
    /// [`Origin::Webhook`].
    pub fn for_webhooks(
        operator_allowed_cidrs: Vec<crate::ssrf::Cidr>,
        extra_ca_file: Option<std::path::PathBuf>,
        resolve_pins: &[crate::egress::ResolvePin],
    ) -> Result<Self, crate::tls::TlsError> {
        let credentials: Arc<dyn crate::credentials::CredentialStore> = Arc::new(NoCredentials);
        let mut config = crate::egress::EgressConfig::new(
            "webhooks",
            crate::policy::NetworkPolicy::Allowlist(vec![crate::policy::AllowEntry {
                pattern: crate::policy::DomainPattern::Any,
                transform: Vec::new(),
                credential: None,
            }]),
            credentials,
        );
        config.operator_allowed_cidrs = operator_allowed_cidrs;
        config.extra_ca_file = extra_ca_file;
        if !resolve_pins.is_empty() {
            config.resolver = Arc::new(crate::egress::StaticResolver::from_pins(
                resolve_pins,
                Some(Arc::new(crate::egress::SystemResolver)),
            ));
        }
        Ok(Self {
            egress: Arc::new(Egress::new(config)?),
            origin: Origin::Webhook,
        })
    }

    /// Why `url` can never be posted to, as far as can be told without a lookup: not an http(s)
    /// URL, user info, a `localhost` name, or a literal address the SSRF guard blocks (names are
    /// checked against the addresses they resolve to at each post). `None`: it may be.
    pub fn refusal(&self, url: &str) -> Option<String> {
        let uri: Uri = match url.parse() {
            Ok(uri) => uri,
            Err(_) => return Some("not a URL".to_owned()),
        };
        let tls = match uri.scheme() {
            Some(s) if *s == Scheme::HTTPS => true,
            Some(s) if *s == Scheme::HTTP => false,
            _ => return Some("only http and https are supported".to_owned()),
        };
        let authority = uri.authority()?;
        if authority.as_str().contains('@') {
            return Some("user info is not allowed".to_owned());
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        self.egress
            .authorize(authority.host(), port)
            .err()
            .map(|d| d.to_string())
    }

    async fn post_inner(&self, request: &HttpRequest) -> Result<HttpResponse, HttpError> {
        let egress = &*self.egress;
        let invalid = |why: &str| HttpError::InvalidUrl(format!("{}: {why}", request.url));
        let uri: Uri = request.url.parse().map_err(|_| invalid("not a URL"))?;
        let scheme = uri.scheme().ok_or_else(|| invalid("no scheme"))?;
        let tls = if *scheme == Scheme::HTTPS {
            true
        } else if *scheme == Scheme::HTTP {
            false
        } else {
            return Err(invalid("only http and https are supported"));
        };
        let mode = if tls { Mode::Https } else { Mode::Http };
        let authority: Authority = uri.authority().cloned().ok_or_else(|| invalid("no host"))?;
        if authority.as_str().contains('@') {
            return Err(invalid("user info is not allowed"));
        }
        let port = authority.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let host = authority.host();
        let target = egress.authorize(host, port).map_err(|d| {
            egress.audit(self.origin, mode, host, port, Err(&d));
            HttpError::Blocked(d.to_string())
        })?;
        let injected = egress.injected(&target, tls).map_err(|d| {
            egress.audit(self.origin, mode, &target.host_str, port, Err(&d));
            HttpError::Blocked(d.to_string())
        })?;
        let tcp = egress.connect(&target).await.map_err(|e| {
            if let EgressError::Denied(d) = &e {
                egress.audit(self.origin, mode, &target.host_str, port, Err(d));
            }
            to_http_error(e)
        })?;
        egress.audit(self.origin, mode, &target.host_str, port, Ok(()));

        let mut req = Request::new(Full::new(Bytes::from(request.body.clone())));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = uri.clone();
        let headers = req.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in &request.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| HttpError::Other(format!("invalid header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| HttpError::Other(format!("invalid value for header {name}")))?;
            headers.insert(name, value);
        }
        let out = outbound_request(req, &authority, &injected)
            .map_err(|d| HttpError::Blocked(d.to_string()))?;
        let response = if tls {
            let stream = egress
                .tls_connect(&target, tcp)
                .await
                .map_err(to_http_error)?;
            let mut sender = open_http1(egress, stream).await.map_err(to_http_error)?;
            send(egress, &mut sender, out, None)
                .await
                .map_err(to_http_error)?
        } else {
            let mut sender = open_http1(egress, tcp).await.map_err(to_http_error)?;
            send(egress, &mut sender, out, None)
                .await
                .map_err(to_http_error)?
        };
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut out = Vec::new();
        let mut truncated = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| HttpError::Other(e.to_string()))?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            let room = request.response_limit.saturating_sub(out.len());
            if chunk.len() > room {
                out.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            out.extend_from_slice(&chunk);
        }
        Ok(HttpResponse {
            status,
            body: out,
            truncated,
        })
    }
}

/// The credential store of a poster that injects nothing: every id is unknown.
#[derive(Debug)]
struct NoCredentials;

impl crate::credentials::CredentialStore for NoCredentials {
    fn create(
        &self,
        id: &str,
        _: crate::credentials::CredentialSpec,
    ) -> crate::credentials::Result<crate::credentials::CredentialMeta> {
        Err(crate::credentials::CredentialError::Invalid(format!(
            "{id}: webhook deliveries have no credentials"
        )))
    }
    fn list(&self) -> crate::credentials::Result<Vec<crate::credentials::CredentialMeta>> {
        Ok(Vec::new())
    }
    fn get(&self, id: &str) -> crate::credentials::Result<crate::credentials::CredentialMeta> {
        Err(crate::credentials::CredentialError::NotFound(id.to_owned()))
    }
    fn update(
        &self,
        id: &str,
        _: crate::credentials::CredentialUpdate,
    ) -> crate::credentials::Result<crate::credentials::CredentialMeta> {
        Err(crate::credentials::CredentialError::NotFound(id.to_owned()))
    }
    fn remove(&self, id: &str) -> crate::credentials::Result<()> {
        Err(crate::credentials::CredentialError::NotFound(id.to_owned()))
    }
    fn reveal(&self, id: &str) -> crate::credentials::Result<crate::credentials::Injection> {
        Err(crate::credentials::CredentialError::NotFound(id.to_owned()))
    }
}

fn to_http_error(e: EgressError) -> HttpError {
    match e {
        EgressError::Denied(d) => HttpError::Blocked(d.to_string()),
        EgressError::Timeout(_) => HttpError::TimedOut,
        EgressError::Resolve { .. } | EgressError::Connect { .. } => {
            HttpError::Connect(e.to_string())
        }
        EgressError::Tls { .. } | EgressError::Upstream(_) | EgressError::Config(_) => {
            HttpError::Other(e.to_string())
        }
    }
}

impl EgressPoster {
    /// POSTs `request` through the egress, bounded by its timeout (connect, send and reading
    /// the answer together) and its response limit.
    pub async fn post(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        tokio::time::timeout(request.timeout, self.post_inner(&request))
            .await
            .map_err(|_| HttpError::TimedOut)?
    }
}
