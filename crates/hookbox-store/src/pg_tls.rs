//! TLS to PostgreSQL, with rustls as everywhere else in hookbox, honouring libpq's `sslmode`
//! and `sslrootcert` in the `--database` URL:
//!
//! | `sslmode`     | encrypted             | server certificate checked                     |
//! |---------------|-----------------------|------------------------------------------------|
//! | `disable`     | never                 | -                                              |
//! | `prefer`      | if the server can     | only with `sslrootcert` (chain), as libpq      |
//! | `require`     | always                | only with `sslrootcert` (chain), as libpq      |
//! | `verify-ca`   | always                | chain against `sslrootcert`                    |
//! | `verify-full` | always                | chain against `sslrootcert`, and the host name |
//!
//! Without `sslmode` the default is libpq's, `prefer`. `verify-ca` and `verify-full` need a CA:
//! `sslrootcert=FILE` (PEM), else `~/.postgresql/root.crt` as libpq. Errors never repeat the
//! URL, which may hold the password.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode as PgSslMode;

use crate::error::Error;

/// libpq's `sslmode` values that hookbox supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<Self, Error> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::Config(format!(
                    "sslmode `{other}` in the PostgreSQL URL is not one of disable, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// A `--database` URL taken apart: what tokio-postgres reads, and how TLS is set up.
#[derive(Debug)]
pub struct Connection {
    pub config: tokio_postgres::Config,
    pub mode: SslMode,
    /// The rustls client (never used with `disable`, where tokio-postgres does not ask for it).
    pub tls: rustls::ClientConfig,
}

/// Parses `url` (a `postgres://` URL, or libpq's `key=value` form) with its TLS settings.
pub fn parse(url: &str) -> Result<Connection, Error> {
    let (rest, mode, root) = take_tls_params(url)?;
    let mut config: tokio_postgres::Config = rest
        .parse()
        .map_err(|e| Error::Config(format!("invalid PostgreSQL URL: {e}")))?;
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
    });
    let tls = client_config(mode, root.as_deref())?;
    Ok(Connection { config, mode, tls })
}

/// Removes `sslmode` and `sslrootcert` (which tokio-postgres does not know in full) from `url`.
fn take_tls_params(url: &str) -> Result<(String, SslMode, Option<PathBuf>), Error> {
    let mut mode = None;
    let mut root = None;
    let mut take = |key: &str, value: String| -> Result<bool, Error> {
        match key {
            "sslmode" => mode = Some(SslMode::parse(&value)?),
            "sslrootcert" => root = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let mut kept = Vec::new();
                for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
                    if !take(&key, value.clone().into_owned())? {
                        kept.push((key.into_owned(), value.into_owned()));
                    }
                }
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    let query = url::form_urlencoded::Serializer::new(String::new())
                        .extend_pairs(kept)
                        .finish();
                    format!("{base}?{query}")
                }
            }
        }
    } else {
        // key=value form; values with spaces would be quoted, which hookbox does not parse.
        let mut kept = Vec::new();
        for word in url.split_whitespace() {
            match word.split_once('=') {
                Some((key, value)) if take(key, value.to_owned())? => {}
                _ => kept.push(word),
            }
        }
        kept.join(" ")
    };
    Ok((rest, mode.unwrap_or(SslMode::Prefer), root))
}

fn client_config(mode: SslMode, root: Option<&Path>) -> Result<rustls::ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS setup: {e}")))?;
    let default_root = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
        .filter(|p| p.exists());
    let root = root.map(Path::to_path_buf).or(match mode {
        SslMode::VerifyCa | SslMode::VerifyFull => default_root,
        _ => None,
    });
    let verifier: Arc<dyn ServerCertVerifier> = match (&root, mode) {
        (None, SslMode::VerifyCa | SslMode::VerifyFull) => {
            return Err(Error::Config(format!(
                "sslmode={} needs the CA that signed the server's certificate: add sslrootcert=FILE (PEM) to the PostgreSQL URL",
                if mode == SslMode::VerifyCa {
                    "verify-ca"
                } else {
                    "verify-full"
                }
            )));
        }
        // As libpq: without a CA, prefer and require encrypt but check no certificate.
        (None, _) => Arc::new(Unverified(provider.clone())),
        (Some(path), _) => {
            let roots = Arc::new(read_roots(path)?);
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                roots,
                provider.clone(),
            )
            .build()
            .map_err(|e| Error::Config(format!("sslrootcert {}: {e}", path.display())))?;
            if mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

fn read_roots(path: &Path) -> Result<RootCertStore, Error> {
    use rustls::pki_types::pem::PemObject;
    let unreadable = |e: &dyn std::fmt::Display| {
        Error::Config(format!("cannot read sslrootcert {}: {e}", path.display()))
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))? {
        let cert = cert.map_err(|e| unreadable(&e))?;
        roots.add(cert).map_err(|e| unreadable(&e))?;
    }
    if roots.is_empty() {
        return Err(unreadable(&"no certificate in the file"));
    }
    Ok(roots)
}

/// `verify-ca` (and `require` with a CA): the chain must lead to the CA; the name is not
/// checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // webpki checks the name last, once the chain is good.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a CA (libpq's behaviour): encrypted, the handshake's
/// signatures checked, the certificate itself not.
#[derive(Debug)]
struct Unverified(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_params_are_taken_out_and_the_rest_kept() {
        let (rest, mode, root) = take_tls_params(
            "postgres://u:pw@db.example:5432/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=hb",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u:pw@db.example:5432/app?application_name=hb"
        );
        assert_eq!(mode, SslMode::VerifyFull);
        assert_eq!(root.as_deref(), Some(Path::new("/etc/ca.pem")));
        let (rest, mode, root) =
            take_tls_params("host=db user=u sslmode=require dbname=app").unwrap();
        assert_eq!(rest, "host=db user=u dbname=app");
        assert_eq!(mode, SslMode::Require);
        assert!(root.is_none());
        let (_, mode, _) = take_tls_params("postgres://u@h/db").unwrap();
        assert_eq!(mode, SslMode::Prefer, "libpq's default");
    }

    #[test]
    fn bad_modes_and_missing_cas_are_refused_without_the_password() {
        let err = parse("postgres://u:hunter2@h/db?sslmode=allow")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sslmode `allow`"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let libpq_default = std::env::var_os("HOME")
            .is_some_and(|home| PathBuf::from(home).join(".postgresql/root.crt").exists());
        match parse("postgres://u:hunter2@h/db?sslmode=verify-full") {
            Ok(_) => assert!(libpq_default, "verify-full without any CA was accepted"),
            Err(e) => {
                let err = e.to_string();
                assert!(err.contains("sslrootcert=FILE"), "{err}");
                assert!(!err.contains("hunter2"), "{err}");
            }
        }
        let err = parse("postgres://u:hunter2@h/db?sslmode=verify-ca&sslrootcert=/nonexistent.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nonexistent.pem"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let c = parse("postgres://u@h/db?sslmode=disable").unwrap();
        assert_eq!(c.config.get_ssl_mode(), PgSslMode::Disable);
        let c = parse("postgres://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent.pem");
        assert!(c.is_err());
        let c = parse("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(c.config.get_ssl_mode(), PgSslMode::Require);
    }
}
