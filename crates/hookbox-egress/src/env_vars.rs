//! Environment variable names the sandbox gets so that its programs use the proxy and trust the
//! environment's CA. One registry, so the names are spelled once.
//!
//! The variables are a convenience only: the network namespace (loopback only) is what keeps a
//! program that ignores them from getting out. This module must not set anything itself.

/// Variables pointing programs at the proxy (both cases: tools differ in which they read).
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Variables that would exempt hosts from the proxy; the sandbox gets them empty.
pub const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// Variables naming a CA bundle, each with the tool that reads it.
pub const CA_BUNDLE_VARS: &[(&str, &str)] = &[
    ("SSL_CERT_FILE", "OpenSSL, rustls-native-certs, Go"),
    ("REQUESTS_CA_BUNDLE", "Python requests"),
    ("CURL_CA_BUNDLE", "curl"),
    (
        "NODE_EXTRA_CA_CERTS",
        "Node.js (added to its built-in roots)",
    ),
    ("GIT_SSL_CAINFO", "git over https"),
    ("PIP_CERT", "pip"),
];

/// The variables for a sandbox whose proxy is `proxy_url` and whose CA bundle (system roots
/// plus the environment's CA) is at `ca_bundle_path` inside the sandbox.
pub fn sandbox_env(proxy_url: &str, ca_bundle_path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in PROXY_VARS {
        out.push(((*name).to_owned(), proxy_url.to_owned()));
    }
    for name in NO_PROXY_VARS {
        out.push(((*name).to_owned(), String::new()));
    }
    for (name, _) in CA_BUNDLE_VARS {
        out.push(((*name).to_owned(), ca_bundle_path.to_owned()));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_variable_is_set() {
        let env = super::sandbox_env(
            "http://127.0.0.1:3128",
            "/etc/ssl/certs/ca-certificates.crt",
        );
        assert_eq!(env.len(), 14);
        assert!(env.contains(&("https_proxy".into(), "http://127.0.0.1:3128".into())));
        assert!(env.contains(&(
            "NODE_EXTRA_CA_CERTS".into(),
            "/etc/ssl/certs/ca-certificates.crt".into()
        )));
        assert!(env.contains(&("NO_PROXY".into(), String::new())));
    }
}
