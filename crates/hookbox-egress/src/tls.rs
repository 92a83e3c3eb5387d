//! TLS material: the per-environment CA that signs leaf certificates for intercepted hosts, and
//! the client configuration that verifies real upstream servers.
//!
//! Owns key generation (rcgen, ECDSA P-256 with ring), the leaf cache and root stores. The CA's
//! private key lives only in this process's memory: only [`EnvCa::cert_pem`] is ever handed to
//! the sandbox. This module must not open sockets.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Upper bound on cached leaf configurations per environment; the cache is cleared when full.
const LEAF_CACHE_MAX: usize = 1024;

/// TLS errors.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("reading CA file {path}: {message}")]
    CaFile { path: PathBuf, message: String },
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A per-environment certificate authority.
pub struct EnvCa {
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for EnvCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvCa").finish_non_exhaustive()
    }
}

impl EnvCa {
    /// A fresh CA named after the environment.
    pub fn generate(environment: &str) -> Result<Self, TlsError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(
            DnType::CommonName,
            format!("hookbox egress CA {environment}"),
        );
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(365);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate (no key), for the sandbox's trust store.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// A server configuration presenting a leaf for `host` (a DNS name or an IP literal),
    /// issued on first use and cached.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        if let Some(cfg) = self.lock().get(host) {
            return Ok(cfg.clone());
        }
        let cfg = Arc::new(self.issue(host)?);
        let mut cache = self.lock();
        if cache.len() >= LEAF_CACHE_MAX {
            cache.clear();
        }
        cache.insert(host.to_owned(), cfg.clone());
        Ok(cfg)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ServerConfig>>> {
        self.leaves.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn issue(&self, host: &str) -> Result<ServerConfig, TlsError> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = vec![match host.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(host.to_owned().try_into()?),
        }];
        params.distinguished_name.push(DnType::CommonName, host);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(30);
        let cert = params.signed_by(&key, &self.issuer)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut cfg = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone(), self.cert_der.clone()], key_der)?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(cfg)
    }
}

/// Client configuration for upstream servers: the webpki (Mozilla) roots plus, if given, the
/// certificates of an operator-supplied PEM file.
pub fn upstream_client_config(extra_ca: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    upstream_client_config_and(extra_ca, None)
}

/// [`upstream_client_config`] that also trusts `env_ca` (an environment's CA, which signs what
/// its proxy intercepts).
pub(crate) fn upstream_client_config_and(
    extra_ca: Option<&Path>,
    env_ca: Option<&EnvCa>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    if let Some(ca) = env_ca {
        roots
            .add(ca.cert_der.clone())
            .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
    }
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let err = |message: String| TlsError::CaFile {
            path: path.to_owned(),
            message,
        };
        let mut added = 0;
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| err(e.to_string()))? {
            let cert = cert.map_err(|e| err(e.to_string()))?;
            roots.add(cert).map_err(|e| err(e.to_string()))?;
            added += 1;
        }
        if added == 0 {
            return Err(err("no certificate found".into()));
        }
    }
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_are_cached_per_host() {
        let ca = EnvCa::generate("env_test").unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!ca.cert_pem().contains("PRIVATE KEY"));
        let a = ca.server_config("api.example.com").unwrap();
        let b = ca.server_config("api.example.com").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = ca.server_config("127.0.0.1").unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
    }

    #[test]
    fn extra_ca_file_must_hold_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        assert!(matches!(
            upstream_client_config(Some(&empty)),
            Err(TlsError::CaFile { .. })
        ));
        let ca = EnvCa::generate("x").unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.cert_pem()).unwrap();
        upstream_client_config(Some(&good)).unwrap();
    }
}
