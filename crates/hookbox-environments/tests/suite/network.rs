//! An environment's network policy, end to end: real sandboxes in the environment's network
//! namespace, the egress proxy, real TLS (an rcgen CA stands in for the web PKI) and receivers on
//! 127.0.0.1 that the proxy reaches only through the operator's CIDR and `--connect-to` pins.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hookbox_egress::credentials::{
    CredentialSpec, CredentialStore as _, FileCredentialStore, Secret,
};
use hookbox_environments::environment::Environment;
use hookbox_environments::lifecycle::{Outcome, ToolResult};
use hookbox_environments::network::{EgressOperator, SANDBOX_CA_BUNDLE, SANDBOX_RESOLV_CONF};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::{Value, json};

use super::common::*;

/// The stored bearer credential the proxy injects for `api.example.com`.
const API_SECRET: &str = "sk-sandbox-secret-4242";
/// The reference telemetry example's header value, held by the environment's `network` only.
const TELEMETRY_SECRET: &str = "telemetry_secret_token_123";
const NAMES: &[&str] = &[
    "api.example.com",
    "other.example.com",
    "telemetry.example.com",
];

/// A TLS receiver on 127.0.0.1 with a certificate for [`NAMES`], signed by a fresh test CA.
/// Telemetry posts without the expected header are answered 401.
struct Receiver {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    ca_pem_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

#[derive(Debug, Clone)]
struct Seen {
    host: String,
    path: String,
    authorization: Option<String>,
    body: Vec<u8>,
}

impl Receiver {
    async fn start() -> Self {
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
        let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
        let cert = CertificateParams::new(names)
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
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req| {
                        let log = log.clone();
                        async move { Ok::<_, Infallible>(respond(req, log).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self {
            port,
            seen,
            ca_pem_path,
            _dir: dir,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Operator options that let the proxy reach this receiver under every name of [`NAMES`].
    fn operator(&self) -> EgressOperator {
        EgressOperator {
            allowed_cidrs: vec!["127.0.0.0/8".parse().unwrap()],
            extra_ca_file: Some(self.ca_pem_path.clone()),
            resolve_pins: NAMES
                .iter()
                .map(|name| {
                    format!("{name}:443=127.0.0.1:{}", self.port)
                        .parse()
                        .unwrap()
                })
                .collect(),
        }
    }
}

async fn respond(req: Request<Incoming>, log: Arc<Mutex<Vec<Seen>>>) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("").to_owned())
    };
    let host = header("host").unwrap_or_default();
    let authorization = header("authorization");
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
    let telemetry_ok = authorization.as_deref() == Some("Bearer telemetry_secret_token_123");
    log.lock().unwrap().push(Seen {
        host,
        path: path.clone(),
        authorization,
        body,
    });
    let mut response = Response::new(Full::new(Bytes::from(format!("hello from {path}"))));
    if path == "/api/v1/agent-events" && !telemetry_ok {
        *response.status_mut() = StatusCode::UNAUTHORIZED;
    }
    response
}

/// A store with a stored bearer credential `api-token`, with `operator`'s options.
fn store(data: &std::path::Path, operator: EgressOperator) -> TestEnvironments {
    FileCredentialStore::open(data)
        .unwrap()
        .create(
            "api-token",
            CredentialSpec::BearerToken {
                token: Secret::new(API_SECRET),
                header_name: None,
                prefix: None,
            },
        )
        .unwrap();
    store_with_egress(data, options(), operator)
}

const API_POLICY: &str =
    r#"{"allowlist": [{"domain": "api.example.com", "credential": "api-token"}]}"#;

/// A store in `data` whose proxy reaches `receiver` ([`store`]), and an environment of it
/// under [`API_POLICY`], opened.
fn api_environment(data: &std::path::Path, receiver: &Receiver) -> (TestEnvironments, Environment) {
    let store = store(data, receiver.operator());
    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let meta = create(&store, json!({"network": network}));
    let env = store.open_env(&meta.id).unwrap();
    (store, env)
}

async fn bash(env: &Environment, code: &str) -> (Outcome, Value) {
    let outcome = env
        .call_tool(call(
            "code_execution",
            json!({"code": code, "language": "bash"}),
        ))
        .await;
    let ToolResult::Ok { output } = &outcome.result else {
        panic!("{:?}", outcome.result)
    };
    let output = output.json();
    (outcome, output)
}

#[tokio::test]
async fn curl_through_the_proxy_variables_gets_the_stored_credential_injected() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let (_store, env) = api_environment(data.path(), &receiver);

    // curl uses HTTPS_PROXY and trusts the environment's CA through CURL_CA_BUNDLE; the proxy
    // intercepts, injects the credential, and verifies the receiver against the operator's CA.
    let (outcome, output) = bash(
        &env,
        "curl -sS --max-time 20 https://api.example.com/v1/ping; echo; env",
    )
    .await;
    let stdout = output["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("hello from /v1/ping\n"), "{output}");
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].host, "api.example.com");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {API_SECRET}").as_str())
    );
    // The sandbox has the proxy and CA variables, never the secret.
    assert!(stdout.contains("HTTPS_PROXY=http://127.0.0.1:"), "{stdout}");
    assert!(stdout.contains(&format!("SSL_CERT_FILE={SANDBOX_CA_BUNDLE}")));
    assert!(stdout.contains("NO_PROXY=\n"), "{stdout}");
    assert!(!stdout.contains(API_SECRET));
    assert!(
        !serde_json::to_string(&outcome)
            .unwrap()
            .contains(API_SECRET)
    );
}

#[tokio::test]
async fn programs_that_bypass_the_proxy_variables_are_refused_by_the_kernel() {
    // The receiver listens on the host's 127.0.0.1; the environment's namespace has its own
    // loopback, where only the proxy listens, on a port of its own. Both ports are picked by the
    // kernel of two different namespaces, so they can coincide (about once in 14 000 runs): the
    // direct connect would then reach the proxy. Such a pair is set up again.
    let mut attempts = 0;
    let (receiver, _data, _store, env) = loop {
        attempts += 1;
        let receiver = Receiver::start().await;
        let data = tempfile::tempdir().unwrap();
        let (store, env) = api_environment(data.path(), &receiver);
        let joined = env.network().sandbox().await.unwrap().unwrap();
        let proxy_port = joined.proxy_url().rsplit(':').next().unwrap();
        if proxy_port != receiver.port.to_string() {
            break (receiver, data, store, env);
        }
        assert!(
            attempts < 5,
            "the proxy took the receiver's port {attempts} times"
        );
    };

    // Nothing listens on the receiver's port in the namespace, so a direct connect is refused.
    let port = receiver.port;
    let script = format!(
        "curl -sS --max-time 20 --noproxy '*' --connect-to ::127.0.0.1:{port} https://api.example.com/v1/ping; echo \"curl=$?\"\n\
         (exec 3<>/dev/tcp/127.0.0.1/{port}); echo \"bash=$?\"\n\
         curl -sS --max-time 20 --noproxy '*' https://api.example.com/v1/ping; echo \"dns=$?\"\n"
    );
    let (_, output) = bash(&env, &script).await;
    let stdout = output["stdout"].as_str().unwrap();
    let stderr = output["stderr"].as_str().unwrap();
    assert!(stdout.contains("curl=7\n"), "{output}");
    assert!(stdout.contains("bash=1\n"), "{output}");
    assert!(stdout.contains("dns=6\n"), "{output}");
    assert_eq!(
        stderr.matches("Connection refused").count(),
        2,
        "curl and bash must both be refused: {stderr}"
    );
    assert!(stderr.contains("Could not resolve host"), "{stderr}");
    assert!(receiver.seen().is_empty());
}

#[tokio::test]
async fn dns_inside_the_sandbox_goes_nowhere() {
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), EgressOperator::default());
    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let meta = create(&store, json!({"network": network}));
    let env = store.open_env(&meta.id).unwrap();

    let (_, output) = bash(
        &env,
        "cat /etc/resolv.conf; getent hosts api.example.com; echo \"getent=$?\"",
    )
    .await;
    let stdout = output["stdout"].as_str().unwrap();
    assert_eq!(
        stdout,
        format!("{SANDBOX_RESOLV_CONF}getent=2\n"),
        "{output}"
    );
}

#[tokio::test]
async fn hosts_off_the_allowlist_get_403_from_the_proxy() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let (_store, env) = api_environment(data.path(), &receiver);

    // other.example.com is pinned to the receiver too: only the policy stands in the way.
    let (_, output) = bash(
        &env,
        "curl -sS --max-time 20 -o /dev/null -w 'connect=%{http_connect}\\n' https://other.example.com/; echo \"curl=$?\"",
    )
    .await;
    let stdout = output["stdout"].as_str().unwrap();
    assert_eq!(stdout, "connect=403\ncurl=56\n", "{output}");
    assert!(receiver.seen().is_empty());
}

#[tokio::test]
async fn the_sandbox_trusts_the_environment_ca_and_never_sees_its_key() {
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), EgressOperator::default());
    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let meta = create(&store, json!({"network": network}));
    let env_dir = data.path().join("environments").join(&meta.id);
    let env = store.open_env(&meta.id).unwrap();

    let (_, output) = bash(
        &env,
        &format!(
            "cat {SANDBOX_CA_BUNDLE}; echo =====; cat /etc/ssl/certs/ca-certificates.crt; echo =====; grep -rl 'PRIVATE KEY' /etc /workspace /tmp; true"
        ),
    )
    .await;
    let stdout = output["stdout"].as_str().unwrap();
    let parts: Vec<&str> = stdout.split("=====\n").collect();
    assert_eq!(parts.len(), 3, "{output}");
    let ca = env.network().egress().ca_cert_pem().unwrap();
    assert!(
        parts[0].ends_with(ca),
        "the bundle ends with the environment's CA"
    );
    assert!(
        parts[0].len() > ca.len(),
        "and starts with the system roots"
    );
    // The system bundle path (present on the test machine) is overlaid with the same bundle.
    assert_eq!(parts[1], parts[0]);
    assert_eq!(parts[2], "", "no private key anywhere: {output}");

    // The proxy, its namespace and the bundle file go with the environment.
    let egress_dirs = || {
        std::fs::read_dir(&env_dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".egress-")
            })
            .count()
    };
    assert_eq!(egress_dirs(), 1);
    drop(env);
    assert_eq!(egress_dirs(), 0);
}

const TELEMETRY_HOOKS: &str = r#"{"telemetry": {"post_tool_execution": [{"matcher": ".*", "hooks": [
  {"type": "http", "url": "https://telemetry.example.com/api/v1/agent-events"}]}]}}"#;

/// The reference's telemetry example: a post hook POSTs every event over HTTPS; the environment's
/// allowlist injects the Authorization header, so the hooks file holds no secret.
#[tokio::test]
async fn reference_telemetry_example_posts_with_the_injected_header() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), receiver.operator());
    let meta = create(
        &store,
        json!({
            "sources": [{"type": "inline", "target": ".agents/hooks.json", "content": TELEMETRY_HOOKS}],
            "network": {"allowlist": [
                {"domain": "telemetry.example.com", "transform": {"Authorization": "Bearer telemetry_secret_token_123"}},
                {"domain": "*"}
            ]},
        }),
    );
    let env = store.open_env(&meta.id).unwrap();

    let write = env
        .call_tool(call(
            "write_to_file",
            json!({"path": "/workspace/notes.md", "content": "# notes\n"}),
        ))
        .await;
    let view = env
        .call_tool(call("view_file", json!({"path": "/workspace/notes.md"})))
        .await;
    for outcome in [&write, &view] {
        assert!(
            matches!(outcome.result, ToolResult::Ok { .. }),
            "{:?}",
            outcome.result
        );
        let post = outcome.post.as_ref().unwrap();
        assert_eq!(post.trace.len(), 1);
        // The receiver answers 401 without the right header, which would be `failed`.
        assert_eq!(post.trace[0].outcome.label(), "completed", "{post:?}");
    }

    let seen = receiver.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let mut tools = Vec::new();
    for s in &seen {
        assert_eq!(s.path, "/api/v1/agent-events");
        assert_eq!(s.host, "telemetry.example.com");
        assert_eq!(
            s.authorization.as_deref(),
            Some("Bearer telemetry_secret_token_123")
        );
        let payload: Value = serde_json::from_slice(&s.body).unwrap();
        assert!(
            !s.body
                .windows(TELEMETRY_SECRET.len())
                .any(|w| w == TELEMETRY_SECRET.as_bytes())
        );
        tools.push(payload["tool_call"]["name"].as_str().unwrap().to_owned());
    }
    tools.sort();
    assert_eq!(tools, ["view_file", "write_to_file"], "{seen:?}");

    // The secret is in no trace, no shown metadata, and not in the sandbox.
    for outcome in [&write, &view] {
        assert!(
            !serde_json::to_string(outcome)
                .unwrap()
                .contains(TELEMETRY_SECRET)
        );
    }
    let shown = serde_json::to_string(&store.show(&meta.id).unwrap()).unwrap();
    assert!(!shown.contains(TELEMETRY_SECRET), "{shown}");
    assert!(shown.contains("telemetry.example.com"), "{shown}");
    assert!(
        !serde_json::to_string(env.meta())
            .unwrap()
            .contains(TELEMETRY_SECRET)
    );
    let (_, output) = bash(&env, "env; cat /.agents/hooks.json").await;
    assert!(!output.to_string().contains(TELEMETRY_SECRET), "{output}");
    // ...and the bash call above was posted too, still with the header.
    assert_eq!(receiver.seen().len(), 3);
}

/// An http hook to the host's loopback is refused by egress's always-on rules unless the
/// operator re-admits the range; the refusal fails open and the trace names the rule.
#[tokio::test]
async fn http_hooks_to_loopback_are_blocked_and_fail_open_with_the_rule() {
    let receiver = Receiver::start().await;
    let hooks = format!(
        r#"{{"gate": {{"pre_tool_execution": [{{"matcher": ".*", "hooks": [
            {{"type": "http", "url": "http://127.0.0.1:{}/gate"}}]}}]}}}}"#,
        receiver.port
    );
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), EgressOperator::default());
    let meta = create(
        &store,
        json!({
            "sources": [{"type": "inline", "target": ".agents/hooks.json", "content": hooks}],
            "network": {"allowlist": [{"domain": "*"}]},
        }),
    );
    let env = store.open_env(&meta.id).unwrap();
    let outcome = env
        .call_tool(call("list_dir", json!({"path": "/workspace"})))
        .await;
    assert!(
        matches!(outcome.result, ToolResult::Ok { .. }),
        "{:?}",
        outcome.result
    );
    let trace = serde_json::to_value(&outcome.pre.trace).unwrap();
    assert_eq!(trace[0]["outcome"], "failed_open", "{trace}");
    let text = trace.to_string();
    assert!(text.contains("denied by rule loopback"), "{text}");
    assert!(receiver.seen().is_empty());
}

/// Without `network` nothing leaves: http hooks are refused (fail open, rule in the trace) and
/// sandboxes get no proxy.
#[tokio::test]
async fn without_network_hooks_are_refused_and_sandboxes_get_no_proxy() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), receiver.operator());
    let meta = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": TELEMETRY_HOOKS}]}),
    );
    let env = store.open_env(&meta.id).unwrap();
    let (outcome, output) = bash(
        &env,
        "env | grep -ci proxy; curl -sS --max-time 20 https://telemetry.example.com/; echo \"curl=$?\"",
    )
    .await;
    assert_eq!(output["stdout"], "0\ncurl=6\n", "{output}");
    let post = serde_json::to_value(outcome.post.as_ref().unwrap()).unwrap();
    assert_eq!(post["trace"][0]["outcome"], "failed", "{post}");
    assert!(
        post.to_string().contains("denied by rule network-disabled"),
        "{post}"
    );
    assert!(receiver.seen().is_empty());
}

#[test]
fn an_invalid_network_is_refused_at_create_naming_the_path_and_nothing_is_created() {
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), EgressOperator::default());
    let spec: hookbox_environments::source::EnvironmentSpec = serde_json::from_value(
        json!({"network": {"allowlist": [{"domain": "a.example.com"}, {"domian": "b"}]}}),
    )
    .unwrap();
    let err = store
        .create(
            &spec,
            hookbox_environments::source::SourceOrigin::Operator,
            &mut |_| {},
            false,
        )
        .unwrap_err();
    assert!(err.to_string().contains("network.allowlist[1]"), "{err}");
    assert!(store.list().unwrap().is_empty());
    let leftovers: Vec<_> = std::fs::read_dir(data.path().join("environments"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Command hooks run in the same sandbox network as `code_execution`: through the proxy, with
/// the same injection.
#[tokio::test]
async fn command_hooks_share_the_environment_network() {
    let receiver = Receiver::start().await;
    let hooks = r#"{"gate": {"pre_tool_execution": [{"matcher": ".*", "hooks": [
        {"type": "command", "command": "cat >/dev/null; curl -sS --max-time 20 -o /dev/null https://api.example.com/from-hook && echo '{\"decision\":\"allow\"}'"}]}]}}"#;
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), receiver.operator());
    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let meta = create(
        &store,
        json!({
            "sources": [{"type": "inline", "target": ".agents/hooks.json", "content": hooks}],
            "network": network,
        }),
    );
    let env = store.open_env(&meta.id).unwrap();
    let outcome = env
        .call_tool(call("list_dir", json!({"path": "/workspace"})))
        .await;
    assert_eq!(
        outcome.pre.trace[0].outcome.label(),
        "allow",
        "{:?}",
        outcome.pre
    );
    let seen = receiver.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/from-hook");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {API_SECRET}").as_str())
    );
}

/// Credentials kept per project, each project's in its own real file store: `scoped` hands an
/// environment its project's store, as the server's SQLite-backed store does.
#[derive(Debug)]
struct PerProject {
    root: std::path::PathBuf,
}

impl PerProject {
    fn store(&self, project: &str) -> FileCredentialStore {
        let dir = self.root.join(project);
        std::fs::create_dir_all(&dir).unwrap();
        FileCredentialStore::open(&dir).unwrap()
    }
}

impl hookbox_egress::credentials::CredentialStore for PerProject {
    fn create(
        &self,
        id: &str,
        spec: CredentialSpec,
    ) -> hookbox_egress::credentials::Result<hookbox_egress::credentials::CredentialMeta> {
        self.store("default").create(id, spec)
    }
    fn list(
        &self,
    ) -> hookbox_egress::credentials::Result<Vec<hookbox_egress::credentials::CredentialMeta>> {
        self.store("default").list()
    }
    fn get(
        &self,
        id: &str,
    ) -> hookbox_egress::credentials::Result<hookbox_egress::credentials::CredentialMeta> {
        self.store("default").get(id)
    }
    fn update(
        &self,
        id: &str,
        update: hookbox_egress::credentials::CredentialUpdate,
    ) -> hookbox_egress::credentials::Result<hookbox_egress::credentials::CredentialMeta> {
        self.store("default").update(id, update)
    }
    fn remove(&self, id: &str) -> hookbox_egress::credentials::Result<()> {
        self.store("default").remove(id)
    }
    fn reveal(
        &self,
        id: &str,
    ) -> hookbox_egress::credentials::Result<hookbox_egress::credentials::Injection> {
        self.store("default").reveal(id)
    }
    fn scoped(
        &self,
        project: &str,
    ) -> Option<Arc<dyn hookbox_egress::credentials::CredentialStore>> {
        Some(Arc::new(self.store(project)))
    }
}

#[tokio::test]
async fn an_allowlist_credential_resolves_only_inside_the_environments_project() {
    let receiver = Receiver::start().await;
    let data = tempfile::tempdir().unwrap();
    let credentials = PerProject {
        root: data.path().join("credentials"),
    };
    credentials
        .store("team-a")
        .create(
            "api-token",
            CredentialSpec::BearerToken {
                token: Secret::new(API_SECRET),
                header_name: None,
                prefix: None,
            },
        )
        .unwrap();
    let egress = hookbox_environments::network::EgressOptions::new(Arc::new(credentials))
        .with_operator(receiver.operator());
    let store = TestEnvironments(
        hookbox_environments::environment::Environments::open(data.path(), options(), egress)
            .unwrap(),
    );
    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let own = create(&store, json!({"network": network, "project": "team-a"}));
    let other = create(&store, json!({"network": network, "project": "team-b"}));
    for (meta, injected) in [(&own, true), (&other, false)] {
        let env = store.open_env(&meta.id).unwrap();
        let before = receiver.seen().len();
        let (_, output) = bash(
            &env,
            "curl -sS --max-time 20 https://api.example.com/v1/ping",
        )
        .await;
        let seen = receiver.seen();
        let new: Vec<_> = seen[before..].to_vec();
        if injected {
            assert_eq!(new.len(), 1, "{output}");
            assert_eq!(
                new[0].authorization.as_deref(),
                Some(format!("Bearer {API_SECRET}").as_str())
            );
        } else {
            // team-b names team-a's credential id: the proxy cannot resolve it in team-b and
            // refuses the request rather than send it without (or with another's) credential.
            assert!(new.iter().all(|s| s.authorization.is_none()), "{new:?}");
            assert!(new.is_empty(), "{new:?}");
            assert!(
                output["stderr"].as_str().unwrap().contains("403"),
                "{output}"
            );
            assert!(!output.to_string().contains(API_SECRET));
        }
    }
}

/// The egress CA key pair and TLS configurations are made only when something can use them: an
/// environment without network runs a call (and an http hook, refused) without making them; one
/// whose allowlist lets something out makes them for its sandbox's CA bundle.
#[tokio::test]
async fn the_egress_ca_is_made_only_for_an_environment_whose_sandboxes_reach_the_proxy() {
    let data = tempfile::tempdir().unwrap();
    let store = store(data.path(), EgressOperator::default());
    let closed = create(
        &store,
        json!({"sources": [{"type": "inline", "target": ".agents/hooks.json", "content": TELEMETRY_HOOKS}]}),
    );
    let env = store.open_env(&closed.id).unwrap();
    assert!(!env.network().egress().tls_made());
    let (outcome, output) = bash(&env, "echo ran").await;
    assert_eq!(output["stdout"], "ran\n", "{output}");
    let post = serde_json::to_value(outcome.post.as_ref().unwrap()).unwrap();
    assert!(
        post.to_string().contains("denied by rule network-disabled"),
        "{post}"
    );
    assert!(
        !env.network().egress().tls_made(),
        "a call that cannot leave made the egress CA"
    );

    let network: Value = serde_json::from_str(API_POLICY).unwrap();
    let open = create(&store, json!({"network": network}));
    let env = store.open_env(&open.id).unwrap();
    assert!(!env.network().egress().tls_made());
    let (_, output) = bash(&env, "test -s /etc/hookbox/ca-bundle.crt && echo bundle").await;
    assert_eq!(output["stdout"], "bundle\n", "{output}");
    assert!(env.network().egress().tls_made());
}

// The metadata keeps `transform` header values as given (often a secret); it was written with
// the process's umask (0644 by default), readable by every local user.
#[test]
fn metadata_holding_transform_values_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    let store = store_with(data.path(), options());
    let meta = create(
        &store,
        json!({"network": {"allowlist": [
            {"domain": "api.example.com", "transform": {"Authorization": "Bearer s3cret"}}
        ]}}),
    );
    let path = data
        .path()
        .join("environments")
        .join(&meta.id)
        .join(hookbox_environments::environment::META_FILE);
    assert!(std::fs::read_to_string(&path).unwrap().contains("s3cret"));
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "environment.json has mode {mode:o}");
    // One written before (with the umask's mode) is made owner-only when next read.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    hookbox_environments::environment::read_meta(path.parent().unwrap()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o077,
        0,
        "an older environment.json kept mode {mode:o}"
    );
}
