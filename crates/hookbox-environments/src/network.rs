//! An environment's network, wired to `hookbox-egress`.
//!
//! Owns the egress plumbing [`crate::environment::Environments`] are opened with
//! ([`EgressOptions`]: the credential store and the operator's [`EgressOperator`] options) and,
//! per opened environment, [`EnvNetwork`]: its [`Egress`] (policy, CA, credentials), used by
//! http hooks through `EgressPoster` (behind the hooks engine's seam: [`HookPoster`]), and —
//! only when the policy allows some egress — a lazily created per-environment network namespace
//! with the egress proxy listening inside, the CA bundle file and the proxy/CA variables every
//! sandbox of the environment gets.
//!
//! It must not decide anything about traffic (that is `hookbox-egress`) nor build sandboxes (the
//! runner and launcher do; they only receive the namespace fd, the variables and file binds).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookbox_egress::credentials::CredentialStore;
use hookbox_egress::netns::{NetnsError, listener_in_new_netns};
use hookbox_egress::policy::{NetworkPolicy, PolicyError};
use hookbox_egress::ssrf::Cidr;
use hookbox_egress::tls::TlsError;
use hookbox_egress::{
    Egress, EgressConfig, EgressProxy, ResolvePin, Resolver, StaticResolver, SystemResolver,
};
use serde_json::Value;
use tokio::sync::OnceCell;

use hookbox_sandbox::spec::FileBind;

/// Where the environment's CA bundle (system roots + the environment's CA) is bound in every
/// sandbox with egress; the CA variables (`SSL_CERT_FILE`, ...) name this path.
pub const SANDBOX_CA_BUNDLE: &str = "/etc/hookbox/ca-bundle.crt";

/// System CA bundle paths. The first readable one on the host provides the system roots; each
/// that is a regular file on the host is overlaid (read-only) in the sandbox with the
/// environment's bundle, so programs that ignore the CA variables trust the environment's CA too.
pub const SYSTEM_CA_BUNDLES: &[&str] = &[
    // Debian, Ubuntu, Alpine, Arch.
    "/etc/ssl/certs/ca-certificates.crt",
    // Fedora, RHEL.
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    // openSUSE.
    "/etc/ssl/ca-bundle.pem",
    // OpenSSL's default on several distributions (often a symlink to one of the above).
    "/etc/ssl/cert.pem",
];

/// Largest system bundle read (Debian's is about 200 KiB).
const MAX_SYSTEM_BUNDLE: u64 = 8 << 20;

pub use hookbox_sandbox::spec::SANDBOX_RESOLV_CONF;

/// The hooks engine's http seam over an environment's egress: every http hook leaves through
/// the environment's allowlist, SSRF defences and header injection. Egress does not know the
/// engine, nor the engine egress; both speak `hookbox_protocol::post`, so this is all the
/// wiring there is.
#[derive(Debug, Clone)]
pub struct HookPoster(pub hookbox_egress::EgressPoster);

#[async_trait::async_trait]
impl hookbox_hooks::http::HttpPoster for HookPoster {
    async fn post(
        &self,
        request: hookbox_protocol::post::HttpRequest,
    ) -> Result<hookbox_protocol::post::HttpResponse, hookbox_protocol::post::HttpError> {
        self.0.post(request).await
    }
}

/// What the operator decides for every environment of a hookbox process. Defaults are the safe
/// ones: no re-admitted ranges, no extra roots, no pins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressOperator {
    /// DANGEROUS: blocked ranges (loopback, private, link-local, ...) that may be dialed anyway,
    /// for every environment. Tests use `127.0.0.0/8`.
    pub allowed_cidrs: Vec<Cidr>,
    /// A PEM file of extra roots trusted for upstream TLS (besides the webpki roots).
    pub extra_ca_file: Option<PathBuf>,
    /// `HOST:PORT=IP:PORT` pins (curl's `--connect-to`); other names use the system resolver.
    /// A pinned address is still checked against the blocked ranges.
    pub resolve_pins: Vec<ResolvePin>,
}

/// The egress plumbing a store is opened with, shared by all its environments.
#[derive(Debug, Clone)]
pub struct EgressOptions {
    /// Where `credential` ids of allowlist entries are revealed (the proxy reads it on every
    /// injected request, so updates apply at once).
    pub credentials: Arc<dyn CredentialStore>,
    pub operator: EgressOperator,
    /// The project of the environment these options were made for ([`Self::for_project`]),
    /// named in its egress audit events.
    pub project: Option<String>,
}

impl EgressOptions {
    /// Options with `credentials` and the default (safe) operator options.
    pub fn new(credentials: Arc<dyn CredentialStore>) -> Self {
        Self {
            credentials,
            operator: EgressOperator::default(),
            project: None,
        }
    }

    /// Replaces the operator options.
    pub fn with_operator(mut self, operator: EgressOperator) -> Self {
        self.operator = operator;
        self
    }

    /// These options for an environment of `project`: credentials resolve inside that project
    /// only (when the store knows projects). `None`: the store's own scope.
    pub fn for_project(&self, project: Option<&str>) -> Self {
        let credentials = project
            .and_then(|p| self.credentials.scoped(p))
            .unwrap_or_else(|| self.credentials.clone());
        Self {
            credentials,
            operator: self.operator.clone(),
            project: project.map(str::to_owned),
        }
    }
}

/// Why an environment's network could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("invalid network policy: {0}")]
    Policy(#[from] PolicyError),
    #[error("egress TLS setup: {0}")]
    Tls(#[from] TlsError),
    #[error("creating the environment's network namespace: {0}")]
    Netns(#[from] NetnsError),
    #[error("the egress proxy listener: {0}")]
    Listener(std::io::Error),
    #[error("the egress proxy needs a tokio runtime")]
    NoRuntime,
    #[error("writing the CA bundle in {path}: {source}")]
    Bundle {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks an environment's `network` value (API JSON); `None` is the default, disabled.
pub fn validate_policy(network: Option<&Value>) -> Result<NetworkPolicy, PolicyError> {
    NetworkPolicy::from_json(network)
}

/// Whether the policy lets anything out (and so whether sandboxes need the proxy).
fn allows_egress(policy: &NetworkPolicy) -> bool {
    match policy {
        NetworkPolicy::Disabled => false,
        NetworkPolicy::Allowlist(entries) => !entries.is_empty(),
    }
}

/// `network` with the values of every `transform` header replaced, for anything shown outside
/// (CLI output, API responses): a transform often carries a secret.
pub fn redact_network(network: &Value) -> Value {
    fn redact_all(value: &mut Value) {
        match value {
            Value::String(s) => *s = "[redacted]".into(),
            Value::Array(items) => items.iter_mut().for_each(redact_all),
            Value::Object(map) => map.values_mut().for_each(redact_all),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if key == "transform" {
                        redact_all(v);
                    } else {
                        walk(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => {}
        }
    }
    let mut out = network.clone();
    walk(&mut out);
    out
}

/// The [`Egress`] of environment `env_id` under `policy` with the store's options: what its
/// sandboxes, http hooks and `https://` repository clones all go through.
pub(crate) fn build_egress(
    env_id: &str,
    policy: NetworkPolicy,
    options: &EgressOptions,
) -> Result<Arc<Egress>, NetworkError> {
    let operator = &options.operator;
    let resolver: Arc<dyn Resolver> = if operator.resolve_pins.is_empty() {
        Arc::new(SystemResolver)
    } else {
        Arc::new(StaticResolver::from_pins(
            &operator.resolve_pins,
            Some(Arc::new(SystemResolver)),
        ))
    };
    let mut config = EgressConfig::new(env_id, policy, options.credentials.clone());
    config.project.clone_from(&options.project);
    config.operator_allowed_cidrs = operator.allowed_cidrs.clone();
    config.extra_ca_file = operator.extra_ca_file.clone();
    config.resolver = resolver;
    Ok(Arc::new(Egress::new(config)?))
}

/// One opened environment's network.
#[derive(Debug)]
pub struct EnvNetwork {
    env_id: String,
    egress: Arc<Egress>,
    /// Where the per-process CA bundle directory goes: the environment's directory, outside
    /// the tree the sandbox sees.
    dir: PathBuf,
    sandbox: SandboxNet,
}

#[derive(Debug)]
enum SandboxNet {
    /// Nothing may leave: each sandbox gets a fresh loopback-only namespace and no proxy.
    Closed,
    /// Created on the first sandbox launch, dropped with the environment.
    Proxied(OnceCell<Arc<JoinedNetwork>>),
}

/// The shared namespace of an environment whose policy allows egress, with its proxy.
#[derive(Debug)]
pub struct JoinedNetwork {
    pub(crate) netns: Arc<OwnedFd>,
    /// Proxy and CA-bundle variables for every sandbox process.
    pub(crate) env: Vec<(String, String)>,
    /// The CA bundle, bound read-only at [`SANDBOX_CA_BUNDLE`] and over the system bundles.
    pub(crate) files: Vec<FileBind>,
    /// The proxy's port on the sandbox's `127.0.0.1`.
    pub(crate) port: u16,
    /// The proxy itself, which also serves connections relayed from a gVisor sandbox.
    pub(crate) server: EgressProxy,
    proxy: AbortOnDrop,
    _bundle_dir: tempfile::TempDir,
}

impl JoinedNetwork {
    /// The proxy's URL as sandbox programs see it.
    pub fn proxy_url(&self) -> &str {
        &self.proxy.url
    }

    /// Where a gVisor sandbox's relayed connections go: this proxy.
    pub fn relay_sink(&self) -> hookbox_sandbox::runtime::RelaySink {
        let server = self.server.clone();
        Arc::new(move |stream| server.serve_stream(stream))
    }
}

#[derive(Debug)]
struct AbortOnDrop {
    task: tokio::task::AbortHandle,
    url: String,
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EnvNetwork {
    /// The egress of environment `env_id` (directory `dir`) under `policy`. `sandboxed` is false
    /// for `--insecure-no-isolation`, where programs run on the host and no proxy is set up.
    pub(crate) fn new(
        env_id: &str,
        dir: &Path,
        policy: NetworkPolicy,
        options: &EgressOptions,
        sandboxed: bool,
    ) -> Result<Self, NetworkError> {
        let proxied = allows_egress(&policy);
        if proxied && !sandboxed {
            tracing::warn!(
                env_id,
                "network policy NOT enforced for sandbox programs: isolation is off (--insecure-no-isolation)"
            );
        }
        let egress = build_egress(env_id, policy, options)?;
        Ok(Self {
            env_id: env_id.to_owned(),
            egress,
            dir: dir.to_path_buf(),
            sandbox: if proxied && sandboxed {
                SandboxNet::Proxied(OnceCell::new())
            } else {
                SandboxNet::Closed
            },
        })
    }

    /// The environment's egress (what http hooks post through).
    pub fn egress(&self) -> &Arc<Egress> {
        &self.egress
    }

    /// The namespace every sandbox joins, created on first use; `None` when nothing may leave
    /// (each sandbox then gets a fresh loopback-only namespace).
    pub async fn sandbox(&self) -> Result<Option<Arc<JoinedNetwork>>, NetworkError> {
        match &self.sandbox {
            SandboxNet::Closed => Ok(None),
            SandboxNet::Proxied(cell) => cell
                .get_or_try_init(|| async { self.create().map(Arc::new) })
                .await
                .map(|joined| Some(joined.clone())),
        }
    }

    fn create(&self) -> Result<JoinedNetwork, NetworkError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| NetworkError::NoRuntime)?;
        let bundle_dir = tempfile::Builder::new()
            .prefix(".egress-")
            .tempdir_in(&self.dir)
            .map_err(|source| NetworkError::Bundle {
                path: self.dir.clone(),
                source,
            })?;
        let bundle = bundle_dir.path().join("ca-bundle.crt");
        std::fs::write(&bundle, self.egress.sandbox_ca_bundle(&system_bundle())?).map_err(
            |source| NetworkError::Bundle {
                path: bundle.clone(),
                source,
            },
        )?;
        let mut files = vec![FileBind {
            source: bundle.clone(),
            target: SANDBOX_CA_BUNDLE.into(),
        }];
        for path in SYSTEM_CA_BUNDLES {
            // Symlinks are skipped: they resolve, inside the sandbox, to a bundle overlaid here.
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
                files.push(FileBind {
                    source: bundle.clone(),
                    target: (*path).to_owned(),
                });
            }
        }

        let (netns, listener) = listener_in_new_netns(std::net::SocketAddr::from((
            std::net::Ipv4Addr::LOCALHOST,
            0,
        )))?;
        let addr = listener.local_addr().map_err(NetworkError::Listener)?;
        listener
            .set_nonblocking(true)
            .map_err(NetworkError::Listener)?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(NetworkError::Listener)?
        };
        let url = format!("http://{addr}");
        let proxy = EgressProxy::new(self.egress.clone());
        let server = proxy.clone();
        let env_id = self.env_id.clone();
        let task = runtime.spawn(async move {
            if let Err(error) = proxy.serve(listener).await {
                tracing::error!(%env_id, %error, "egress proxy stopped");
            }
        });
        tracing::info!(env_id = %self.env_id, proxy = %url, "environment network ready");
        Ok(JoinedNetwork {
            netns: Arc::new(netns),
            env: hookbox_egress::env_vars::sandbox_env(&url, SANDBOX_CA_BUNDLE),
            files,
            port: addr.port(),
            server,
            proxy: AbortOnDrop {
                task: task.abort_handle(),
                url,
            },
            _bundle_dir: bundle_dir,
        })
    }
}

/// The host's system roots (PEM), or nothing when no known bundle is readable.
pub(crate) fn system_bundle() -> String {
    use std::io::Read as _;
    for path in SYSTEM_CA_BUNDLES {
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        let mut text = String::new();
        if file
            .take(MAX_SYSTEM_BUNDLE)
            .read_to_string(&mut text)
            .is_ok()
        {
            return text;
        }
    }
    tracing::warn!("no system CA bundle found; sandboxes trust only the environment's CA");
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_values_are_redacted_everywhere() {
        let network = serde_json::json!({"allowlist": [
            {"domain": "a.example.com", "transform": {"Authorization": "Bearer s3cret"}},
            {"domain": "b.example.com", "transform": [{"X-Key": "k1"}, {"X-Other": "k2"}], "credential": "cred"},
            {"domain": "*"}
        ]});
        let shown = redact_network(&network).to_string();
        for secret in ["s3cret", "k1", "k2"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("Authorization") && shown.contains("cred"));
    }
}
