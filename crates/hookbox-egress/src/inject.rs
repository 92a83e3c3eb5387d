//! Header rewriting on requests leaving through the proxy: hop-by-hop removal and injection of
//! an allowlist entry's `transform` headers and credential.
//!
//! Injected headers replace any same-named header the sandbox sent. Credential values are marked
//! sensitive (`HeaderValue::set_sensitive`) so that hyper and `Debug` do not show them. This
//! module must not decide whether a request is allowed.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Hop-by-hop headers (RFC 9110 §7.6.1) plus the proxy's own, never forwarded nor injectable.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// Why `name` cannot name a header hookbox sends (an allowlist `transform`, a credential's
/// `header_name`, an `mcp_server` header): it must be an RFC 7230 token (no spaces, colons or
/// control characters). Checked when the name is given, so it is never silently dropped later.
pub fn check_header_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a header name cannot be empty");
    }
    HeaderName::from_bytes(name.as_bytes())
        .map(|_| ())
        .map_err(|_| "not a valid header name (an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~, no spaces)")
}

/// Why `value` cannot be sent as (part of) a header value: only visible ASCII, spaces and tabs
/// (no CR, LF, NUL or other control characters, nothing outside ASCII). The message never
/// echoes the value, which is often a secret.
pub fn check_header_value(value: &str) -> Result<(), &'static str> {
    if value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err("a header value cannot contain CR, LF or NUL");
    }
    // Stricter than `HeaderValue`, which also takes bytes past ASCII that receivers read
    // differently.
    if !value
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err("a header value may hold only visible ASCII characters, spaces and tabs");
    }
    Ok(())
}

/// Headers to set on every request to one allowlist entry's hosts.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Injected {
    pub fn push(&mut self, name: HeaderName, value: HeaderValue) {
        self.headers.push((name, value));
    }

    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The injected values that are secrets, for masking what an upstream echoes of them
    /// ([`crate::scrub`]): a credential's value, and a `transform` value whose header name says
    /// it carries one ([`names_a_secret`]). Other `transform` values (`Accept:
    /// application/json`, an API version) are ordinary text a response may well contain.
    pub fn secret_values(&self) -> impl Iterator<Item = &[u8]> {
        self.headers
            .iter()
            .filter(|(n, v)| v.is_sensitive() || names_a_secret(n.as_str()))
            .map(|(_, v)| v.as_bytes())
    }

    /// Names only, for traces.
    pub fn names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Removes hop-by-hop headers (and those the `Connection` header names), then sets the
    /// injected headers, replacing what the sender put there.
    pub fn apply(&self, headers: &mut HeaderMap) {
        strip_hop_by_hop(headers);
        for (name, _) in &self.headers {
            headers.remove(name);
        }
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// Whether a header of this name carries a secret, by its words (split at `-` and `_`):
/// `Authorization`, `Cookie`, `X-Api-Key`, `X-Auth-Token`, `Private-Token`, `X-Client-Secret`,
/// `X-Session-Id`, `X-Signature`. A word must be one of these, or end in `apikey`, `token` or
/// `secret`: `Author` or `X-Monkey-Id` is no secret's name.
pub fn names_a_secret(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "credential",
        "credentials",
        "jwt",
        "key",
        "pass",
        "passwd",
        "password",
        "session",
        "sessionid",
        "sig",
        "signature",
    ];
    name.to_ascii_lowercase().split(['-', '_']).any(|word| {
        WORDS.contains(&word)
            || ["apikey", "token", "secret"]
                .iter()
                .any(|end| word.ends_with(end))
    })
}

/// Removes hop-by-hop headers, including any listed in `Connection`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_headers_replace_sent_ones() {
        let mut h = HeaderMap::new();
        h.append(
            "authorization",
            HeaderValue::from_static("Bearer sandbox-guess"),
        );
        h.append("x-keep", HeaderValue::from_static("1"));
        h.append("connection", HeaderValue::from_static("close, x-drop"));
        h.append("x-drop", HeaderValue::from_static("1"));
        h.append("proxy-authorization", HeaderValue::from_static("Basic x"));
        let mut inj = Injected::default();
        let mut v = HeaderValue::from_static("Bearer real");
        v.set_sensitive(true);
        inj.push(HeaderName::from_static("authorization"), v);
        inj.apply(&mut h);
        assert_eq!(h.get_all("authorization").iter().count(), 1);
        assert_eq!(h["authorization"], "Bearer real");
        assert_eq!(h["x-keep"], "1");
        assert!(h.get("x-drop").is_none());
        assert!(h.get("connection").is_none());
        assert!(h.get("proxy-authorization").is_none());
        assert!(!format!("{h:?}").contains("real"));
    }

    #[test]
    fn credentials_and_secret_looking_transforms_are_the_secret_values() {
        let mut injected = Injected::default();
        let mut credential = HeaderValue::from_static("Bearer from-the-store");
        credential.set_sensitive(true);
        injected.push(HeaderName::from_static("x-custom"), credential);
        for (name, value) in [
            ("x-api-key", "team-key-55555"),
            ("authorization", "Basic dXNlcjpwYXNz"),
            ("accept", "application/json"),
            ("anthropic-version", "2023-06-01"),
            ("author", "someone-somewhere"),
            ("x-monkey-id", "monkey-4711"),
        ] {
            injected.push(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let values: Vec<&[u8]> = injected.secret_values().collect();
        assert_eq!(
            values,
            vec![
                b"Bearer from-the-store".as_slice(),
                b"team-key-55555".as_slice(),
                b"Basic dXNlcjpwYXNz".as_slice()
            ]
        );
    }
}
