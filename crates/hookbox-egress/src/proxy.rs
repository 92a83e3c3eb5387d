//! The HTTP proxy sandbox programs talk to: `CONNECT host:port` (tunnelled untouched, or
//! intercepted with the environment's CA when the allowlist entry injects headers) and
//! absolute-form `http://` requests.
//!
//! Owns the client-facing HTTP/1 handling, the 403/502/504 answers, the SNI check of tunnels,
//! the Host check inside intercepted connections, and relaying with an idle timeout. Every
//! decision, lookup, dial and injection goes through [`Egress`]; this module must not
//! re-implement any of them.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, Semaphore};

use crate::audit::{Mode, Origin};
use crate::egress::{Denial, DenyRule, Egress, EgressError, Target, deny};
use crate::inject::{Injected, strip_hop_by_hop};
use crate::relay::{IdleIo, splice_bidirectional};
use crate::scrub::Secrets;
use crate::sni::read_client_hello;
use crate::ssrf::HostKind;

/// Response body type of the proxy.
pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Header naming the rule on a 403 answer.
pub const RULE_HEADER: &str = "x-hookbox-egress-rule";

/// The proxy for one environment.
#[derive(Debug, Clone)]
pub struct EgressProxy {
    egress: Arc<Egress>,
    /// Client connections served at once (listener and streams together).
    slots: Arc<Semaphore>,
}

impl EgressProxy {
    pub fn new(egress: Arc<Egress>) -> Self {
        let slots = Arc::new(Semaphore::new(egress.limits.max_connections));
        Self { egress, slots }
    }

    /// Serves clients accepted on `listener` until the task is dropped. The listener may have
    /// been bound inside an environment's network namespace (see [`crate::netns`]); outbound
    /// connections are made from the namespace of the threads running this future.
    pub async fn serve(self, listener: TcpListener) -> io::Result<()> {
        let slots = self.slots.clone();
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) if is_transient_accept_error(&e) => {
                    tracing::warn!(error = %e, "proxy accept failed; continuing");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "proxy connection limit reached; closing");
                continue;
            };
            let egress = self.egress.clone();
            tokio::spawn(async move {
                serve_tcp_client(egress, stream).await;
                drop(permit);
            });
        }
    }

    /// Serves one client connected over `stream` (any byte stream: the gVisor runtime relays
    /// sandbox connections over unix sockets), counted against the same connection limit as
    /// [`Self::serve`]'s. Returns at once; the connection is served by a task of its own.
    pub fn serve_stream<S>(&self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Ok(permit) = self.slots.clone().try_acquire_owned() else {
            tracing::warn!("proxy connection limit reached; closing");
            return;
        };
        let egress = self.egress.clone();
        tokio::spawn(async move {
            serve_client(egress, stream).await;
            drop(permit);
        });
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

fn server_builder(egress: &Egress) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(egress.limits.header_read_timeout)
        .max_buf_size(egress.limits.max_header_bytes.max(8192));
    b
}

async fn serve_tcp_client(egress: Arc<Egress>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    serve_client(egress, stream).await;
}

async fn serve_client<S>(egress: Arc<Egress>, stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_egress = egress.clone();
    let svc = service_fn(move |req| handle(svc_egress.clone(), req));
    let conn = server_builder(&egress)
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "proxy client connection ended with an error");
    }
}

async fn handle(
    egress: Arc<Egress>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    if req.method() == Method::CONNECT {
        Ok(handle_connect(egress, req).await)
    } else {
        Ok(handle_absolute(egress, req).await)
    }
}

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// 403 naming the rule.
pub(crate) fn denied_response(d: &Denial) -> Response<ProxyBody> {
    let mut resp = text(StatusCode::FORBIDDEN, format!("hookbox egress: {d}\n"));
    resp.headers_mut()
        .insert(RULE_HEADER, HeaderValue::from_static(d.rule.name()));
    resp
}

fn error_response(e: &EgressError) -> Response<ProxyBody> {
    match e {
        EgressError::Denied(d) => denied_response(d),
        EgressError::Timeout(_) => text(
            StatusCode::GATEWAY_TIMEOUT,
            format!("hookbox egress: {e}\n"),
        ),
        EgressError::Resolve { .. }
        | EgressError::Connect { .. }
        | EgressError::Tls { .. }
        | EgressError::Upstream(_) => {
            text(StatusCode::BAD_GATEWAY, format!("hookbox egress: {e}\n"))
        }
        EgressError::Config(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "hookbox egress: configuration error\n".into(),
        ),
    }
}

fn audit_err(egress: &Egress, mode: Mode, host: &str, port: u16, e: &EgressError) {
    match e {
        EgressError::Denied(d) => egress.audit(Origin::Sandbox, mode, host, port, Err(d)),
        EgressError::Resolve { .. }
        | EgressError::Connect { .. }
        | EgressError::Timeout(_)
        | EgressError::Tls { .. }
        | EgressError::Upstream(_)
        | EgressError::Config(_) => {
            tracing::info!(host, port, error = %e, "egress upstream failure");
        }
    }
}

async fn handle_connect(egress: Arc<Egress>, req: Request<Incoming>) -> Response<ProxyBody> {
    let Some(authority) = req.uri().authority().cloned() else {
        let d = deny(DenyRule::BadRequest, "CONNECT needs host:port");
        egress.audit(Origin::Sandbox, Mode::Tunnel, "", 0, Err(&d));
        return denied_response(&d);
    };
    let host = authority.host();
    let Some(port) = authority.port_u16() else {
        let d = deny(DenyRule::BadRequest, "CONNECT needs an explicit port");
        egress.audit(Origin::Sandbox, Mode::Tunnel, host, 0, Err(&d));
        return denied_response(&d);
    };
    let target = match egress.authorize(host, port) {
        Ok(t) => t,
        Err(d) => {
            egress.audit(Origin::Sandbox, Mode::Tunnel, host, port, Err(&d));
            return denied_response(&d);
        }
    };
    let intercept = target.entry.injects();
    let mode = if intercept {
        Mode::Intercept
    } else {
        Mode::Tunnel
    };
    if intercept {
        // Refuse now if the credential is missing, rather than after the TLS handshake.
        if let Err(d) = egress.injected(&target, true) {
            egress.audit(Origin::Sandbox, mode, &target.host_str, port, Err(&d));
            return denied_response(&d);
        }
    }
    let upstream = match egress.connect(&target).await {
        Ok(s) => s,
        Err(e) => {
            audit_err(&egress, mode, &target.host_str, port, &e);
            return error_response(&e);
        }
    };
    egress.audit(Origin::Sandbox, mode, &target.host_str, port, Ok(()));
    tokio::spawn(async move {
        let upgraded = match hyper::upgrade::on(req).await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "CONNECT upgrade failed");
                return;
            }
        };
        if intercept {
            intercept_conn(egress, target, TokioIo::new(upgraded), upstream).await;
            return;
        }
        // The client's own socket, so the relay can splice socket to socket in the kernel.
        match upgraded.downcast::<TokioIo<TcpStream>>() {
            Ok(parts) => {
                let client = parts.io.into_inner();
                tunnel_tcp(egress, target, client, parts.read_buf, upstream).await;
            }
            Err(upgraded) => tunnel(egress, target, TokioIo::new(upgraded), upstream).await,
        }
    });
    Response::new(Full::new(Bytes::new()).map_err(|e| match e {}).boxed())
}

/// Whether a TLS server name is the one the target allows.
fn sni_matches(target: &Target, sni: Option<&str>) -> bool {
    match (&target.host, sni) {
        (HostKind::Name(name), Some(sni)) => crate::policy::normalise_host(sni) == *name,
        (HostKind::Name(_), None) => false,
        // IP literals cannot appear in SNI (RFC 6066).
        (HostKind::Ip(_), None) => true,
        (HostKind::Ip(_), Some(_)) => false,
    }
}

/// Reads the tunnel's ClientHello and checks its SNI; the bytes to forward first if it passes.
async fn checked_hello<R>(egress: &Egress, target: &Target, client: &mut R) -> Option<Vec<u8>>
where
    R: AsyncRead + Unpin,
{
    let hello =
        tokio::time::timeout(egress.limits.handshake_timeout, read_client_hello(client)).await;
    let refusal = match hello {
        Err(_) => deny(DenyRule::NotTls, "no TLS ClientHello in time"),
        Ok(Err(e)) => deny(DenyRule::NotTls, e.to_string()),
        Ok(Ok(hello)) if sni_matches(target, hello.server_name.as_deref()) => {
            return Some(hello.raw);
        }
        Ok(Ok(hello)) => deny(
            DenyRule::SniMismatch,
            format!(
                "TLS server name {:?} differs from CONNECT host {}",
                hello.server_name, target.host_str
            ),
        ),
    };
    egress.audit(
        Origin::Sandbox,
        Mode::Tunnel,
        &target.host_str,
        target.port,
        Err(&refusal),
    );
    None
}

/// Tunnel over the client's own socket: bytes hyper had already read come first.
async fn tunnel_tcp(
    egress: Arc<Egress>,
    target: Target,
    mut client: TcpStream,
    read_buf: Bytes,
    mut upstream: TcpStream,
) {
    let mut prefix: &[u8] = &read_buf;
    let hello = {
        let mut joined = AsyncReadExt::chain(&mut prefix, &mut client);
        checked_hello(&egress, &target, &mut joined).await
    };
    let Some(hello) = hello else {
        let _ = client.shutdown().await;
        return;
    };
    if let Err(e) = async {
        upstream.write_all(&hello).await?;
        upstream.write_all(prefix).await
    }
    .await
    {
        tracing::debug!(error = %e, "writing ClientHello upstream failed");
        return;
    }
    if let Err(e) = splice_bidirectional(client, upstream, egress.limits.idle_timeout).await {
        tracing::debug!(error = %e, "tunnel ended with an error");
    }
}

/// Tunnel over any client stream (fallback when the socket cannot be recovered).
async fn tunnel<C>(egress: Arc<Egress>, target: Target, mut client: C, mut upstream: TcpStream)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let Some(hello) = checked_hello(&egress, &target, &mut client).await else {
        let _ = client.shutdown().await;
        return;
    };
    if let Err(e) = upstream.write_all(&hello).await {
        tracing::debug!(error = %e, "writing ClientHello upstream failed");
        return;
    }
    relay(client, upstream, egress.limits.idle_timeout).await;
}

async fn intercept_conn<C>(egress: Arc<Egress>, target: Target, client: C, upstream: TcpStream)
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let cfg = match egress
        .ca()
        .and_then(|ca| ca.server_config(&target.host_str))
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, host = %target.host_str, "leaf certificate issue failed");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let tls = match tokio::time::timeout(egress.limits.handshake_timeout, acceptor.accept(client))
        .await
    {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "client TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    if !sni_matches(&target, tls.get_ref().1.server_name()) {
        let d = deny(
            DenyRule::SniMismatch,
            format!(
                "TLS server name {:?} differs from CONNECT host {}",
                tls.get_ref().1.server_name(),
                target.host_str
            ),
        );
        egress.audit(
            Origin::Sandbox,
            Mode::Intercept,
            &target.host_str,
            target.port,
            Err(&d),
        );
        return;
    }
    let upstream = match egress.tls_connect(&target, upstream).await {
        Ok(u) => open_http1::<_, Incoming>(&egress, u).await,
        Err(e) => Err(e),
    };
    let upstream = Arc::new(Mutex::new(upstream));
    let target = Arc::new(target);
    let svc_egress = egress.clone();
    let svc = service_fn(move |req| {
        let (egress, target, upstream) = (svc_egress.clone(), target.clone(), upstream.clone());
        async move { Ok::<_, Infallible>(intercepted_request(&egress, &target, &upstream, req).await) }
    });
    if let Err(e) = server_builder(&egress)
        .serve_connection(
            TokioIo::new(IdleIo::new(tls, egress.limits.idle_timeout)),
            svc,
        )
        .await
    {
        tracing::debug!(error = %e, "intercepted connection ended with an error");
    }
}

type Upstream = Result<SendRequest<Incoming>, EgressError>;

async fn intercepted_request(
    egress: &Egress,
    target: &Target,
    upstream: &Mutex<Upstream>,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    // Every request is checked again: its Host must be the CONNECT host (= SNI).
    let authority = match request_authority(&req) {
        Some(a) => a,
        None => {
            let d = deny(DenyRule::BadRequest, "request without Host");
            return denied_response(&d);
        }
    };
    let host_ok = crate::policy::normalise_host(authority.host().trim_matches(['[', ']']))
        == target.host_str
        && authority.port_u16().unwrap_or(443) == target.port;
    if !host_ok {
        let d = deny(
            DenyRule::HostMismatch,
            format!(
                "Host {authority} differs from the connection's host {}",
                target.host_str
            ),
        );
        egress.audit(
            Origin::Sandbox,
            Mode::Intercept,
            &target.host_str,
            target.port,
            Err(&d),
        );
        return denied_response(&d);
    }
    let injected = match egress.injected(target, true) {
        Ok(i) => i,
        Err(d) => {
            egress.audit(
                Origin::Sandbox,
                Mode::Intercept,
                &target.host_str,
                target.port,
                Err(&d),
            );
            return denied_response(&d);
        }
    };
    let mut guard = upstream.lock().await;
    // Servers close idle keep-alive connections: when ours is gone, dial again through the same
    // checks (authorization, resolve, address check, verified TLS) rather than answer 502.
    let usable = match &mut *guard {
        Ok(s) => matches!(
            tokio::time::timeout(egress.limits.handshake_timeout, s.ready()).await,
            Ok(Ok(()))
        ),
        Err(_) => false,
    };
    if !usable {
        *guard = reconnect(egress, target).await;
    }
    let sender = match &mut *guard {
        Ok(s) => s,
        Err(e) => return error_response(e),
    };
    let out = match outbound_request(req, &authority, &injected) {
        Ok(r) => r,
        Err(d) => return denied_response(&d),
    };
    let (out, secrets) = ask_for_readable(out, &injected);
    match send(egress, sender, out, secrets).await {
        Ok(resp) => resp,
        Err(e) => error_response(&e),
    }
}

/// When `injected` put secrets into the request that an upstream could echo, asks for a body
/// that can be read as it is sent (`Accept-Encoding: identity`) and whole (no `Range`, which
/// would let the sandbox cut a secret into pieces too short to recognise), and returns what to
/// mask in the response ([`crate::scrub`]).
fn ask_for_readable<B>(mut req: Request<B>, injected: &Injected) -> (Request<B>, Option<Secrets>) {
    let secrets = Secrets::new(injected.secret_values());
    if secrets.is_some() {
        let headers = req.headers_mut();
        headers.insert(
            http::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.remove(http::header::RANGE);
        headers.remove(http::header::IF_RANGE);
    }
    (req, secrets)
}

async fn reconnect(egress: &Egress, target: &Target) -> Upstream {
    let tcp = egress.connect(target).await?;
    let tls = egress.tls_connect(target, tcp).await?;
    open_http1::<_, Incoming>(egress, tls).await
}

fn request_authority<B>(req: &Request<B>) -> Option<Authority> {
    if let Some(a) = req.uri().authority() {
        return Some(a.clone());
    }
    req.headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<Authority>().ok())
}

/// Builds the request sent upstream: origin-form URI, Host from the authority, hop-by-hop
/// headers removed, injected headers set.
pub(crate) fn outbound_request<B>(
    req: Request<B>,
    authority: &Authority,
    injected: &Injected,
) -> Result<Request<B>, Denial> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    parts.uri = Uri::from(path);
    parts.version = http::Version::HTTP_11;
    injected.apply(&mut parts.headers);
    let host = HeaderValue::from_str(authority.as_str())
        .map_err(|_| deny(DenyRule::BadRequest, "invalid authority"))?;
    parts.headers.insert(http::header::HOST, host);
    Ok(Request::from_parts(parts, body))
}

/// An HTTP/1.1 client connection over an already checked, dialed (and maybe TLS) stream.
pub(crate) async fn open_http1<T, B>(egress: &Egress, io: T) -> Result<SendRequest<B>, EgressError>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(egress.limits.max_header_bytes.max(8192))
        .handshake(TokioIo::new(IdleIo::new(io, egress.limits.idle_timeout)))
        .await
        .map_err(|e| EgressError::Upstream(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended with an error");
        }
    });
    Ok(sender)
}

/// Sends one request and waits (bounded) for the response head; the body streams back. With
/// `secrets` (what was injected into a sandbox's request), the response's header values,
/// reason phrase and body are masked of them ([`crate::scrub`]), and a body that could not be
/// read for them (a content or transfer coding) is answered 502 instead.
pub(crate) async fn send<B>(
    egress: &Egress,
    sender: &mut SendRequest<B>,
    req: Request<B>,
    secrets: Option<Secrets>,
) -> Result<Response<ProxyBody>, EgressError>
where
    B: Body + Send + 'static,
{
    let wait = egress.limits.header_read_timeout;
    let work = async {
        sender
            .ready()
            .await
            .map_err(|e| EgressError::Upstream(e.to_string()))?;
        sender
            .send_request(req)
            .await
            .map_err(|e| EgressError::Upstream(e.to_string()))
    };
    let resp = tokio::time::timeout(wait, work)
        .await
        .map_err(|_| EgressError::Timeout("upstream response"))??;
    let (mut parts, body) = resp.into_parts();
    let Some(secrets) = secrets else {
        strip_hop_by_hop(&mut parts.headers);
        return Ok(Response::from_parts(parts, body.boxed()));
    };
    // Read before hop-by-hop headers go: `Connection: content-encoding` must not hide one.
    if !crate::scrub::readable(&parts.headers) {
        return Ok(text(
            StatusCode::BAD_GATEWAY,
            "hookbox egress: the upstream sent an encoded body (a content or transfer coding) \
             to a request carrying an injected secret, although asked for identity; it is not \
             passed on, since what it echoes of the secret could not be masked\n"
                .to_owned(),
        ));
    }
    strip_hop_by_hop(&mut parts.headers);
    secrets.mask_headers(&mut parts.headers);
    if let Some(reason) = parts.extensions.get::<hyper::ext::ReasonPhrase>() {
        let masked = secrets.mask_whole(reason.as_bytes());
        if masked != reason.as_bytes() {
            // Masking only turns visible bytes into `*`; if it could not be kept, the status's
            // own reason is sent.
            match hyper::ext::ReasonPhrase::try_from(masked) {
                Ok(masked) => parts.extensions.insert(masked),
                Err(_) => parts.extensions.remove::<hyper::ext::ReasonPhrase>(),
            };
        }
    }
    Ok(Response::from_parts(
        parts,
        crate::scrub::ScrubBody::new(body.boxed(), secrets).boxed(),
    ))
}

async fn handle_absolute(egress: Arc<Egress>, req: Request<Incoming>) -> Response<ProxyBody> {
    let uri = req.uri().clone();
    let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority().cloned()) else {
        let d = deny(
            DenyRule::BadRequest,
            "this is a proxy: send absolute-form http:// requests or CONNECT",
        );
        egress.audit(Origin::Sandbox, Mode::Http, "", 0, Err(&d));
        return denied_response(&d);
    };
    let host = authority.host();
    if *scheme != Scheme::HTTP {
        let d = deny(
            DenyRule::BadRequest,
            format!("scheme {scheme} is not proxied; use CONNECT"),
        );
        egress.audit(Origin::Sandbox, Mode::Http, host, 0, Err(&d));
        return denied_response(&d);
    }
    let port = authority.port_u16().unwrap_or(80);
    let target = match egress.authorize(host, port) {
        Ok(t) => t,
        Err(d) => {
            egress.audit(Origin::Sandbox, Mode::Http, host, port, Err(&d));
            return denied_response(&d);
        }
    };
    let injected = match egress.injected(&target, false) {
        Ok(i) => i,
        Err(d) => {
            egress.audit(Origin::Sandbox, Mode::Http, &target.host_str, port, Err(&d));
            return denied_response(&d);
        }
    };
    let tcp = match egress.connect(&target).await {
        Ok(s) => s,
        Err(e) => {
            audit_err(&egress, Mode::Http, &target.host_str, port, &e);
            return error_response(&e);
        }
    };
    egress.audit(Origin::Sandbox, Mode::Http, &target.host_str, port, Ok(()));
    let result = async {
        let mut sender = open_http1::<_, Incoming>(&egress, tcp).await?;
        let out = outbound_request(req, &authority, &injected)?;
        let (out, secrets) = ask_for_readable(out, &injected);
        send(&egress, &mut sender, out, secrets).await
    }
    .await;
    match result {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

/// Copies both ways until both sides close or nothing moves for `idle`.
async fn relay<A, B>(a: A, b: B, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let last = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut a = IdleTracked::with_clock(a, last.clone(), start);
    let mut b = IdleTracked::with_clock(b, last.clone(), start);
    let copy = tokio::io::copy_bidirectional_with_sizes(&mut a, &mut b, 64 * 1024, 64 * 1024);
    tokio::pin!(copy);
    loop {
        tokio::select! {
            r = &mut copy => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "tunnel ended with an error");
                }
                return;
            }
            () = tokio::time::sleep(idle) => {
                let quiet = start.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= idle {
                    tracing::debug!("tunnel idle; closing");
                    return;
                }
            }
        }
    }
}

/// Records the time of the last successful read, for idle timeouts.
struct IdleTracked<T> {
    inner: T,
    last: Arc<AtomicU64>,
    start: Instant,
}

impl<T> IdleTracked<T> {
    fn with_clock(inner: T, last: Arc<AtomicU64>, start: Instant) -> Self {
        Self { inner, last, start }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.last.store(ms, Ordering::Relaxed);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
