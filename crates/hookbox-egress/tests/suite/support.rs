//! Test harness: a test CA (rcgen), real HTTP and HTTPS receivers on 127.0.0.1 that record what
//! they saw, a proxy on 127.0.0.1:0, and a raw CONNECT client.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hookbox_egress::audit::{AuditEvent, AuditSink, Outcome};
use hookbox_egress::credentials::{CredentialSpec, CredentialStore, FileCredentialStore, Secret};
use hookbox_egress::policy::NetworkPolicy;
use hookbox_egress::{Egress, EgressConfig, EgressProxy, StaticResolver};
use http_body_util::{BodyExt as _, Empty, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

pub const SECRET: &str = "sk-live-very-secret-0123456789";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA standing in for the public web PKI: receivers present leaves it signed, and the proxy
/// trusts it through the operator's extra-CA file.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pub pem: String,
    pub pem_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "hookbox test root");
        let cert = params.self_signed(&key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pem_path = dir.path().join("test-ca.pem");
        std::fs::write(&pem_path, cert.pem()).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
            pem_path,
            _dir: dir,
        }
    }

    pub fn server_config(&self, names: &[&str]) -> Arc<ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(cfg)
    }
}

/// A client configuration trusting only the certificates in `pem`.
pub fn client_trusting(pem: &str) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// One request a receiver saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

pub type SeenLog = Arc<Mutex<Vec<Seen>>>;

pub struct Receiver {
    pub addr: SocketAddr,
    pub seen: SeenLog,
}

/// A response body sent one byte per frame (a trickling stream).
struct Trickle(std::collections::VecDeque<u8>);

impl hyper::body::Body for Trickle {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(
            self.0
                .pop_front()
                .map(|b| Ok(hyper::body::Frame::data(Bytes::copy_from_slice(&[b])))),
        )
    }
}

type ReceiverBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn respond(req: Request<Incoming>, seen: SeenLog) -> Response<ReceiverBody> {
    let path = req.uri().path().to_owned();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    // What an echo endpoint sends back: every request header, one per line.
    let echo: String = headers.iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
    let authorization = headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        headers,
        body,
    });
    let body = match path.as_str() {
        "/big" => Bytes::from(vec![b'x'; 1024 * 1024]),
        "/ingest" => Bytes::from_static(b"{}"),
        "/echo" | "/echo-gzip" | "/echo-hidden-gzip" | "/echo-reason" => Bytes::from(echo.clone()),
        "/echo-trickle" => {
            let mut resp = Response::new(Trickle(echo.into_bytes().into()).boxed());
            resp.headers_mut().insert(
                "x-echo-authorization",
                http::HeaderValue::from_str(&authorization).unwrap(),
            );
            return resp;
        }
        _ => Bytes::from(format!("hello from {path}")),
    };
    let mut resp = Response::new(Full::new(body).boxed());
    if path == "/close" {
        resp.headers_mut()
            .insert("connection", http::HeaderValue::from_static("close"));
    }
    if path.starts_with("/echo") {
        resp.headers_mut().insert(
            "x-echo-authorization",
            http::HeaderValue::from_str(&authorization).unwrap(),
        );
    }
    if path == "/echo-gzip" || path == "/echo-hidden-gzip" {
        // Encoded whatever the request asked for.
        resp.headers_mut()
            .insert("content-encoding", http::HeaderValue::from_static("gzip"));
    }
    if path == "/echo-hidden-gzip" {
        // ... and the coding named as hop-by-hop, which a proxy strips.
        resp.headers_mut().insert(
            "connection",
            http::HeaderValue::from_static("content-encoding"),
        );
    }
    if path == "/echo-reason" {
        // An error that quotes the key it refused in its status line.
        *resp.status_mut() = http::StatusCode::UNAUTHORIZED;
        resp.extensions_mut().insert(
            hyper::ext::ReasonPhrase::try_from(format!("invalid key {authorization}")).unwrap(),
        );
    }
    resp
}

/// A receiver on 127.0.0.1; TLS when `tls` is given.
pub async fn receiver(tls: Option<Arc<ServerConfig>>) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: SeenLog = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen2.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let seen = seen.clone();
                    async move { Ok::<_, Infallible>(respond(req, seen).await) }
                });
                let builder = hyper::server::conn::http1::Builder::new();
                match tls {
                    Some(cfg) => {
                        let Ok(s) = tokio_rustls::TlsAcceptor::from(cfg).accept(stream).await
                        else {
                            return;
                        };
                        let _ = builder.serve_connection(TokioIo::new(s), svc).await;
                    }
                    None => {
                        let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
                    }
                }
            });
        }
    });
    Receiver { addr, seen }
}

/// Records audit events for assertions.
#[derive(Debug, Default)]
pub struct MemoryAudit(pub Mutex<Vec<AuditEvent>>);

impl AuditSink for MemoryAudit {
    fn record(&self, event: &AuditEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl MemoryAudit {
    pub fn denied_rules(&self) -> Vec<&'static str> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.outcome {
                Outcome::Denied { rule, .. } => Some(*rule),
                Outcome::Allowed => None,
            })
            .collect()
    }
}

/// Everything a test environment needs.
pub struct Env {
    pub egress: Arc<Egress>,
    pub audit: Arc<MemoryAudit>,
    pub _data: tempfile::TempDir,
}

pub struct EnvBuilder {
    pub policy: serde_json::Value,
    pub pins: Vec<(&'static str, IpAddr)>,
    pub loopback_allowed: bool,
    pub trust_test_ca: bool,
    pub audit_to_tracing: bool,
    pub ca: Arc<TestCa>,
}

impl EnvBuilder {
    pub fn new(policy: serde_json::Value, ca: Arc<TestCa>) -> Self {
        Self {
            policy,
            pins: Vec::new(),
            loopback_allowed: true,
            trust_test_ca: true,
            audit_to_tracing: false,
            ca,
        }
    }

    pub fn pin(mut self, name: &'static str) -> Self {
        self.pins.push((name, "127.0.0.1".parse().unwrap()));
        self
    }

    pub fn build(self) -> Env {
        let data = tempfile::tempdir().unwrap();
        let store = FileCredentialStore::open(data.path()).unwrap();
        store
            .create(
                "telemetry",
                CredentialSpec::BearerToken {
                    token: Secret::new(SECRET),
                    header_name: None,
                    prefix: None,
                },
            )
            .unwrap();
        let store: Arc<dyn CredentialStore> = Arc::new(store);
        let policy = NetworkPolicy::from_json(Some(&self.policy)).unwrap();
        let audit = Arc::new(MemoryAudit::default());
        let mut cfg = EgressConfig::new("env_test", policy, store);
        let mut resolver = StaticResolver::default();
        for (name, ip) in self.pins {
            resolver.pins.entry(name.to_owned()).or_default().push(ip);
        }
        cfg.resolver = Arc::new(resolver);
        cfg.audit = audit.clone();
        if self.audit_to_tracing {
            cfg.audit = Arc::new(hookbox_egress::audit::TracingAudit);
        }
        if self.loopback_allowed {
            cfg.operator_allowed_cidrs = vec!["127.0.0.0/8".parse().unwrap()];
        }
        if self.trust_test_ca {
            cfg.extra_ca_file = Some(self.ca.pem_path.clone());
        }
        Env {
            egress: Arc::new(Egress::new(cfg).unwrap()),
            audit,
            _data: data,
        }
    }
}

/// Starts a proxy for `egress` on 127.0.0.1:0.
pub async fn start_proxy(egress: Arc<Egress>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(EgressProxy::new(egress).serve(listener));
    addr
}

/// A proxy refusal: status, rule header, body.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub rule: Option<String>,
    pub body: String,
}

/// Reads an HTTP response head (bounded) and, for refusals, its body.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert!(buf.len() < 16 * 1024, "response head too large");
        let n = s.read(&mut byte).await.unwrap();
        assert_eq!(n, 1, "proxy closed during response head: {buf:?}");
        buf.push(byte[0]);
    }
    let text = String::from_utf8(buf).unwrap();
    let mut lines = text.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.unwrap();
    (status, headers, body)
}

/// `CONNECT authority` through the proxy; the stream on 200, the refusal otherwise.
pub async fn connect_via(proxy: SocketAddr, authority: &str) -> Result<TcpStream, Refused> {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let (status, headers, body) = read_head(&mut s).await;
    if status == 200 {
        return Ok(s);
    }
    Err(Refused {
        status,
        rule: headers
            .iter()
            .find(|(k, _)| k == "x-hookbox-egress-rule")
            .map(|(_, v)| v.clone()),
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// TLS over `io` with SNI `sni`, trusting `cfg`'s roots.
pub async fn tls<IO>(
    io: IO,
    sni: &str,
    cfg: Arc<ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    tokio_rustls::TlsConnector::from(cfg)
        .connect(name, io)
        .await
}

/// A simple HTTP/1.1 response.
#[derive(Debug)]
pub struct Got {
    pub status: u16,
    /// The status line's reason phrase when it is not the status's own.
    pub reason: Option<String>,
    pub rule: Option<String>,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Sends `req` over `io` with hyper's client.
pub async fn send<IO>(io: IO, req: Request<Empty<Bytes>>) -> Result<Got, hyper::Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    send_on(&mut client(io).await?, req).await
}

/// An HTTP/1.1 client connection over `io`.
pub async fn client<IO>(io: IO) -> Result<SendRequest<Empty<Bytes>>, hyper::Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

/// Sends `req` on an existing client connection.
pub async fn send_on(
    sender: &mut SendRequest<Empty<Bytes>>,
    req: Request<Empty<Bytes>>,
) -> Result<Got, hyper::Error> {
    sender.ready().await?;
    let resp = sender.send_request(req).await?;
    let status = resp.status().as_u16();
    let rule = resp
        .headers()
        .get("x-hookbox-egress-rule")
        .map(|v| v.to_str().unwrap().to_owned());
    let headers = resp.headers().clone();
    let reason = resp
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
    let body = resp.into_body().collect().await?.to_bytes().to_vec();
    Ok(Got {
        status,
        reason,
        rule,
        headers,
        body,
    })
}

pub fn get(uri: &str, host: &str, headers: &[(&str, &str)]) -> Request<Empty<Bytes>> {
    let mut b = Request::get(uri).header("host", host);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Empty::new()).unwrap()
}
