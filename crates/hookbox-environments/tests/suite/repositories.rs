//! Repository sources: who may name what, and every `https://` clone going through the
//! environment's egress, bounded. Real git; a real HTTPS git server (`git http-backend` behind
//! rustls, certificate from an rcgen CA the operator trusts) on 127.0.0.1, reachable only under
//! a name pinned by the operator, so a clone that reaches it must have gone through the proxy.

use std::convert::Infallible;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hookbox_environments::environment::{EnvError, Environments};
use hookbox_environments::network::EgressOperator;
use hookbox_environments::source::{EnvironmentSpec, SourceError, SourceOrigin};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};

use super::common::*;

/// The name the operator pins to the test server; it resolves nowhere else.
const GIT_HOST: &str = "git.hookbox.test";
const README: &str = "hello from a cloned repository\n";

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

/// A repository with one commit (`README`) at `<dir>/src`, and its bare copy at
/// `<dir>/repo.git`.
fn make_repo(dir: &Path) -> (PathBuf, PathBuf) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "--quiet"]);
    std::fs::write(src.join("README"), README).unwrap();
    git(&src, &["add", "README"]);
    git(&src, &["commit", "--quiet", "-m", "init"]);
    git(dir, &["clone", "--quiet", "--bare", "src", "repo.git"]);
    (src, dir.join("repo.git"))
}

fn spec(url: &str, network: Option<Value>) -> EnvironmentSpec {
    let mut spec = json!({"sources": [
        {"type": "inline", "target": "workspace/a.txt", "content": "a"},
        {"type": "repository", "url": url, "target": "workspace/repo"},
    ]});
    if let Some(network) = network {
        spec["network"] = network;
    }
    serde_json::from_value(spec).unwrap()
}

/// Creates off the test's runtime (creation is blocking: it runs git).
async fn create_as(
    store: &Environments,
    spec: EnvironmentSpec,
    origin: SourceOrigin,
) -> Result<hookbox_environments::environment::EnvironmentMeta, EnvError> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.create(&spec, origin, &mut |_| {}, false))
        .await
        .unwrap()
}

/// Nothing was left in the data directory: no environment, no staging directory, no host uid
/// still claimed (`.uids` keeps only its empty block directories and completion marker).
fn assert_nothing_created(data: &Path) {
    let root = data.join("environments");
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != ".uids")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let claims = root.join(".uids");
    let claimed: Vec<_> = std::fs::read_dir(&claims)
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .flat_map(|block| std::fs::read_dir(block).unwrap())
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(claimed.is_empty(), "{claimed:?}");
}

/// Whether anything connected to `listener` (the kernel queues completed connections whether or
/// not they were accepted, so this needs no waiting).
fn was_connected(listener: &TcpListener) -> bool {
    listener.set_nonblocking(true).unwrap();
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

/// Operator options that make [`GIT_HOST`] reach `port` on 127.0.0.1 through the proxy.
fn pinned_operator(port: u16, extra_ca_file: Option<PathBuf>) -> EgressOperator {
    EgressOperator {
        allowed_cidrs: vec!["127.0.0.0/8".parse().unwrap()],
        extra_ca_file,
        resolve_pins: vec![format!("{GIT_HOST}:443=127.0.0.1:{port}").parse().unwrap()],
    }
}

fn allow(domain: &str) -> Option<Value> {
    Some(json!({"allowlist": [{"domain": domain}]}))
}

#[tokio::test]
async fn client_specs_may_name_only_https_repositories_and_nothing_is_created() {
    let data = tempfile::tempdir().unwrap();
    let repos = tempfile::tempdir().unwrap();
    let (src, _) = make_repo(repos.path());
    let store = store_with(data.path(), options());
    let local = src.display().to_string();
    for url in [
        local.clone(),
        format!("file://{local}"),
        "http://127.0.0.1:9/repo.git".into(),
        "ssh://127.0.0.1/repo.git".into(),
        "git://127.0.0.1/repo.git".into(),
        "ext::sh -c touch% /tmp/pwned".into(),
        "127.0.0.1:repo.git".into(),
        "HTTPS://127.0.0.1/repo.git".into(),
    ] {
        let err = create_as(&store, spec(&url, None), SourceOrigin::Client)
            .await
            .unwrap_err();
        assert!(
            matches!(
                &err,
                EnvError::Source(SourceError::NotAllowed { index: 1, .. })
            ),
            "{url}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.starts_with("sources[1]: ") && message.contains("only https:// URLs"),
            "{message}"
        );
        assert_nothing_created(data.path());
    }

    // The operator (the CLI) still clones local repositories.
    for url in [local.clone(), format!("file://{local}")] {
        let meta = create_as(&store, spec(&url, None), SourceOrigin::Operator)
            .await
            .unwrap();
        let readme = data
            .path()
            .join("environments")
            .join(&meta.id)
            .join("root/workspace/repo/README");
        assert_eq!(std::fs::read_to_string(readme).unwrap(), README);
    }
}

#[tokio::test]
async fn client_https_clones_are_refused_by_egress_naming_the_rule() {
    // A direct, unproxied clone would connect here.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    // Even where the operator made the server reachable, a disabled policy (the default) refuses.
    let data = tempfile::tempdir().unwrap();
    let store = store_with_egress(data.path(), options(), pinned_operator(port, None));
    let url = format!("https://{GIT_HOST}/repo.git");
    let err = create_as(&store, spec(&url, None), SourceOrigin::Client)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("rule `network-disabled`"), "{err}");
    assert_nothing_created(data.path());

    // Allowing every domain does not open loopback without the operator's CIDR.
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let url = format!("https://127.0.0.1:{port}/repo.git");
    let err = create_as(&store, spec(&url, allow("*")), SourceOrigin::Client)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("rule `loopback`"), "{err}");
    assert_nothing_created(data.path());
    assert!(!was_connected(&listener));
}

#[tokio::test]
async fn a_clone_that_hangs_is_killed_by_the_timeout_and_nothing_is_created() {
    let data = tempfile::tempdir().unwrap();
    // Accepts (the kernel completes the handshake) and never answers the ClientHello.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut options = options();
    options.sources.clone_timeout = Duration::from_secs(2);
    let store = store_with_egress(data.path(), options, pinned_operator(port, None));
    let url = format!("https://{GIT_HOST}/repo.git");
    let err = create_as(&store, spec(&url, allow(GIT_HOST)), SourceOrigin::Client)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_nothing_created(data.path());
    // The name resolves only through the operator's pin, so git got here through the proxy.
    assert!(was_connected(&listener));
}

#[tokio::test]
async fn a_clone_over_the_size_limit_is_refused_and_removed() {
    let data = tempfile::tempdir().unwrap();
    let repos = tempfile::tempdir().unwrap();
    let (src, _) = make_repo(repos.path());
    let mut options = options();
    options.sources.max_tree_bytes = 1024;
    let store = store_with(data.path(), options);
    let err = create_as(
        &store,
        spec(&src.display().to_string(), None),
        SourceOrigin::Operator,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, EnvError::Source(SourceError::TooLarge { .. })),
        "{err}"
    );
    assert_nothing_created(data.path());
}

/// `git http-backend` (smart HTTP) over TLS on 127.0.0.1, for the bare repositories in `root`.
struct GitServer {
    listener_port: u16,
    ca_pem_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl GitServer {
    async fn start(root: PathBuf) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(params, ca_key);
        let dir = tempfile::tempdir().unwrap();
        let ca_pem_path = dir.path().join("test-ca.pem");
        std::fs::write(&ca_pem_path, ca_cert.pem()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![GIT_HOST.to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let listener_port = listener.local_addr().unwrap().port();
        let root = Arc::new(root);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let root = root.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req| {
                        let root = root.clone();
                        async move { Ok::<_, Infallible>(http_backend(req, &root).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self {
            listener_port,
            ca_pem_path,
            _dir: dir,
        }
    }
}

/// One request through `git http-backend` as a CGI program.
async fn http_backend(req: Request<Incoming>, root: &Path) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut child = tokio::process::Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", parts.method.as_str())
        .env("PATH_INFO", parts.uri.path())
        .env("QUERY_STRING", parts.uri.query().unwrap_or(""))
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, &body)
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            out.stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        })
        .unwrap();
    let mut response = Response::builder();
    for line in text(&out.stdout[..split.0]).lines() {
        let (name, value) = line.split_once(':').unwrap();
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code: u16 = value.split(' ').next().unwrap().parse().unwrap();
            response = response.status(code);
        } else {
            response = response.header(name, value);
        }
    }
    response
        .body(Full::new(Bytes::copy_from_slice(&out.stdout[split.1..])))
        .unwrap()
}

#[tokio::test]
async fn an_allowlisted_https_repository_is_cloned_through_the_egress_proxy() {
    let data = tempfile::tempdir().unwrap();
    let repos = tempfile::tempdir().unwrap();
    make_repo(repos.path());
    let server = GitServer::start(repos.path().to_path_buf()).await;
    let operator = pinned_operator(server.listener_port, Some(server.ca_pem_path.clone()));
    let store = store_with_egress(data.path(), options(), operator);
    let url = format!("https://{GIT_HOST}/repo.git");

    let meta = create_as(&store, spec(&url, allow(GIT_HOST)), SourceOrigin::Client)
        .await
        .unwrap();
    let readme = data
        .path()
        .join("environments")
        .join(&meta.id)
        .join("root/workspace/repo/README");
    assert_eq!(std::fs::read_to_string(readme).unwrap(), README);

    // Same server, another allowlist: refused before git starts.
    let err = create_as(
        &store,
        spec(&url, allow("other.example.com")),
        SourceOrigin::Client,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("rule `not-allowlisted`"), "{err}");
}
