//! Egress benchmark: direct vs tinyproxy vs hookbox (tunnel and intercept), all HTTPS to a
//! server on 127.0.0.1. Needs tinyproxy (`scripts/bench-deps.sh`); installs nothing itself.
//!
//! For each path: throughput of 1 MB downloads (sequential, one kept-alive connection), latency
//! of 1000 small requests on one kept-alive connection, and latency of 100 new connections
//! (CONNECT, TLS handshake, one small request). Run with `cargo bench -p hookbox-egress`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hookbox_egress::credentials::FileCredentialStore;
use hookbox_egress::policy::NetworkPolicy;
use hookbox_egress::{Egress, EgressConfig, EgressProxy, StaticResolver};
use http_body_util::{BodyExt as _, Empty, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

const HOST: &str = "bench.test";
const BIG: usize = 1024 * 1024;
const DOWNLOADS: usize = 100;
const SMALL: usize = 1000;
const FRESH: usize = 100;
const ROUNDS: usize = 10;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[derive(Clone, Copy, Debug)]
enum Path {
    Direct,
    Tinyproxy(SocketAddr),
    HookboxTunnel(SocketAddr),
    HookboxIntercept(SocketAddr),
}

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Direct => "direct",
            Path::Tinyproxy(_) => "tinyproxy",
            Path::HookboxTunnel(_) => "hookbox tunnel",
            Path::HookboxIntercept(_) => "hookbox intercept",
        }
    }
}

struct Setup {
    server: SocketAddr,
    test_roots: Arc<ClientConfig>,
    env_roots: Arc<ClientConfig>,
}

fn roots(pem: &str) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

async fn open(setup: &Setup, path: Path) -> SendRequest<Empty<Bytes>> {
    let (tcp, cfg) = match path {
        Path::Direct => (
            TcpStream::connect(setup.server).await.unwrap(),
            &setup.test_roots,
        ),
        Path::Tinyproxy(p) => (
            connect_via(p, &setup.server.to_string()).await,
            &setup.test_roots,
        ),
        Path::HookboxTunnel(p) => (
            connect_via(p, &format!("{HOST}:{}", setup.server.port())).await,
            &setup.test_roots,
        ),
        Path::HookboxIntercept(p) => (
            connect_via(p, &format!("{HOST}:{}", setup.server.port())).await,
            &setup.env_roots,
        ),
    };
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(ServerName::try_from(HOST).unwrap(), tcp)
        .await
        .unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn connect_via(proxy: SocketAddr, authority: &str) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert!(head.len() < 8192);
        assert_eq!(s.read(&mut b).await.unwrap(), 1, "proxy closed");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(
        head.split(' ').nth(1) == Some("200"),
        "CONNECT refused: {head}"
    );
    s
}

async fn fetch(sender: &mut SendRequest<Empty<Bytes>>, path: &str, host: &str) -> usize {
    sender.ready().await.unwrap();
    let req = Request::get(path)
        .header("host", host)
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap().to_bytes().len()
}

struct Stats {
    mean: Duration,
    p50: Duration,
    p99: Duration,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let sum: Duration = v.iter().sum();
    Stats {
        mean: sum / v.len() as u32,
        p50: v[v.len() / 2],
        p99: v[(v.len() * 99 / 100).min(v.len() - 1)],
    }
}

/// What one path measured over all rounds.
#[derive(Default)]
struct Samples {
    mbps: Vec<f64>,
    small: Vec<Duration>,
    fresh: Vec<Duration>,
}

/// One round of one path: downloads and small requests on `sender`, then new connections.
async fn round(
    setup: &Setup,
    path: Path,
    sender: &mut SendRequest<Empty<Bytes>>,
    out: &mut Samples,
) {
    let host = format!("{HOST}:{}", setup.server.port());
    let host = host.as_str();
    let start = Instant::now();
    let mut bytes = 0;
    for _ in 0..DOWNLOADS / ROUNDS {
        bytes += fetch(sender, "/big", host).await;
    }
    assert_eq!(bytes, DOWNLOADS / ROUNDS * BIG);
    out.mbps
        .push(bytes as f64 / start.elapsed().as_secs_f64() / 1e6);
    for _ in 0..SMALL / ROUNDS {
        let t = Instant::now();
        fetch(sender, "/small", host).await;
        out.small.push(t.elapsed());
    }
    for _ in 0..FRESH / ROUNDS {
        let t = Instant::now();
        let mut s = open(setup, path).await;
        fetch(&mut s, "/small", host).await;
        out.fresh.push(t.elapsed());
    }
}

async fn https_server(cfg: Arc<ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let big = Bytes::from(vec![b'x'; BIG]);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let cfg = cfg.clone();
            let big = big.clone();
            tokio::spawn(async move {
                let Ok(tls) = tokio_rustls::TlsAcceptor::from(cfg).accept(stream).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let body = if req.uri().path() == "/big" {
                        big.clone()
                    } else {
                        Bytes::from_static(b"ok")
                    };
                    async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

/// Starts tinyproxy on a free port, in the foreground, configured for this run only.
fn start_tinyproxy(dir: &std::path::Path) -> Option<(Child, SocketAddr)> {
    if Command::new("tinyproxy").arg("-v").output().is_err() {
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = dir.join("tinyproxy.conf");
    // No ConnectPort line: CONNECT to any port (the server's is random).
    std::fs::write(
        &conf,
        format!(
            "User nobody\nGroup nogroup\nPort {port}\nListen 127.0.0.1\nTimeout 600\n\
             MaxClients 100\nAllow 127.0.0.1\nLogLevel Critical\nDisableViaHeader Yes\n"
        ),
    )
    .unwrap();
    let mut child = Command::new("tinyproxy")
        .arg("-d")
        .arg("-c")
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Bounded wait for it to listen.
    for _ in 0..200 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Some((child, addr));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("tinyproxy did not start listening on {addr}");
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

fn main() {
    // `cargo test --benches` passes --bench-less args; run only under `cargo bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("egress bench: run with `cargo bench -p hookbox-egress`");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tiny = start_tinyproxy(dir.path());
    let results = rt.block_on(async {
        // Test CA and server certificate.
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec![HOST.to_owned()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        let mut server_cfg = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
            )
            .unwrap();
        server_cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server = https_server(Arc::new(server_cfg)).await;
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, ca_cert.pem()).unwrap();

        let make = |policy: serde_json::Value| {
            let store = Arc::new(FileCredentialStore::open(dir.path()).unwrap());
            let policy = NetworkPolicy::from_json(Some(&policy)).unwrap();
            let mut cfg = EgressConfig::new("env_bench", policy, store);
            let mut resolver = StaticResolver::default();
            resolver
                .pins
                .insert(HOST.into(), vec!["127.0.0.1".parse().unwrap()]);
            cfg.resolver = Arc::new(resolver);
            cfg.operator_allowed_cidrs = vec!["127.0.0.0/8".parse().unwrap()];
            cfg.extra_ca_file = Some(ca_path.clone());
            cfg.audit = Arc::new(Quiet);
            Arc::new(Egress::new(cfg).unwrap())
        };
        let tunnel_egress = make(serde_json::json!({"allowlist": [{"domain": HOST}]}));
        let intercept_egress = make(
            serde_json::json!({"allowlist": [{"domain": HOST, "transform": {"X-Bench": "1"}}]}),
        );
        let env_roots = roots(intercept_egress.ca_cert_pem().unwrap());
        let start = |egress: Arc<Egress>| async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let a = l.local_addr().unwrap();
            tokio::spawn(EgressProxy::new(egress).serve(l));
            a
        };
        let tunnel = start(tunnel_egress).await;
        let intercept = start(intercept_egress).await;
        let setup = Setup {
            server,
            test_roots: roots(&ca_cert.pem()),
            env_roots,
        };
        let mut paths = vec![Path::Direct];
        if let Some((_, addr)) = &tiny {
            paths.push(Path::Tinyproxy(*addr));
        }
        paths.push(Path::HookboxTunnel(tunnel));
        paths.push(Path::HookboxIntercept(intercept));
        // Rounds interleave the paths, so load from elsewhere on the machine hits all alike.
        let host = format!("{HOST}:{}", setup.server.port());
        let mut senders = Vec::new();
        for p in &paths {
            let mut s = open(&setup, *p).await;
            fetch(&mut s, "/big", &host).await; // warm-up
            senders.push(s);
        }
        let mut samples: Vec<Samples> = paths.iter().map(|_| Samples::default()).collect();
        for _ in 0..ROUNDS {
            for (i, p) in paths.iter().enumerate() {
                round(&setup, *p, &mut senders[i], &mut samples[i]).await;
            }
        }
        paths.into_iter().zip(samples).collect::<Vec<_>>()
    });
    if let Some((mut child, _)) = tiny {
        let _ = child.kill();
        let _ = child.wait();
    } else {
        println!("tinyproxy not installed (scripts/bench-deps.sh); its row is missing");
    }

    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let rows: Vec<(Path, f64, f64, Stats, Stats)> = results
        .into_iter()
        .map(|(p, s)| {
            (
                p,
                best(&s.mbps),
                median(&s.mbps),
                stats(s.small),
                stats(s.fresh),
            )
        })
        .collect();
    let (d_best, d_med, d_small) = (rows[0].1, rows[0].2, rows[0].3.mean);
    println!(
        "HTTPS on 127.0.0.1, {ROUNDS} interleaved rounds: {DOWNLOADS} x 1 MB downloads and {SMALL} small \
         requests on one kept-alive connection, {FRESH} new connections (CONNECT+TLS+GET)"
    );
    println!(
        "{:<18} {:>9} {:>9} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>7} | {:>9} {:>9} {:>9}",
        "path",
        "best MB/s",
        "med MB/s",
        "x best",
        "x med",
        "mean ms",
        "p50 ms",
        "p99 ms",
        "x mean",
        "conn mean",
        "conn p50",
        "conn p99"
    );
    for (p, best, med, small, fresh) in &rows {
        println!(
            "{:<18} {:>9.1} {:>9.1} {:>8.2} {:>8.2} | {:>8} {:>8} {:>8} {:>7.2} | {:>9} {:>9} {:>9}",
            p.name(),
            best,
            med,
            d_best / best,
            d_med / med,
            ms(small.mean),
            ms(small.p50),
            ms(small.p99),
            small.mean.as_secs_f64() / d_small.as_secs_f64(),
            ms(fresh.mean),
            ms(fresh.p50),
            ms(fresh.p99),
        );
    }
    println!(
        "x best / x med: direct MB/s divided by the path's MB/s (1.00 = as fast as direct); x mean: mean latency over direct's"
    );
}

#[derive(Debug)]
struct Quiet;

impl hookbox_egress::audit::AuditSink for Quiet {
    fn record(&self, _: &hookbox_egress::audit::AuditEvent) {}
}
