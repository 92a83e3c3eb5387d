//! What the operator allows: names besides IP literals and `localhost` ([`AllowedHost`]),
//! origins of other pages ([`AllowedOrigin`]), and how a refusal tells them to allow more.
//! Parsing is shared with the request side ([`Authority`], [`OriginParts`]) so a flag and a
//! header are normalised the same way.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// What an endpoint accepts; see the crate doc for the rules. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub(crate) hosts: Vec<AllowedHost>,
    pub(crate) origins: Vec<AllowedOrigin>,
    /// Whether refusals mention the `[server]` table of `--config` (only `hookbox serve` has
    /// one).
    pub(crate) config_file: bool,
    /// Paths whose request body is file bytes rather than JSON.
    pub(crate) file_bytes: Option<fn(&str) -> bool>,
}

impl Policy {
    /// IP literals and `localhost` only, no other origin than the server's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also answers `Host` values naming `spec` (`NAME`: any port; `NAME:PORT`: that port).
    pub fn allow_host(&mut self, spec: &str) -> Result<&mut Self> {
        let host = spec.parse::<AllowedHost>()?;
        if !self.hosts.contains(&host) {
            self.hosts.push(host);
        }
        Ok(self)
    }

    /// Also answers pages of origin `spec`, with CORS headers.
    pub fn allow_origin(&mut self, spec: &str) -> Result<&mut Self> {
        let origin = spec.parse::<AllowedOrigin>()?;
        if !self.origins.contains(&origin) {
            self.origins.push(origin);
        }
        Ok(self)
    }

    /// Also answers the host of `url`, on any port: the address other replicas reach this one
    /// by (`--replica-url`), so requests they forward pass.
    pub fn allow_url_host(&mut self, url: &str) -> Result<&mut Self> {
        let uri: http::Uri = url.parse().map_err(|_| Error::BadUrl(url.to_owned()))?;
        let authority = uri
            .authority()
            .and_then(|a| Authority::parse(a.as_str()))
            .ok_or_else(|| Error::BadUrl(url.to_owned()))?;
        if !authority.is_ip_literal() {
            let host = AllowedHost {
                name: authority.host,
                port: None,
            };
            if !self.hosts.contains(&host) {
                self.hosts.push(host);
            }
        }
        Ok(self)
    }

    /// Refusals also name the `[server]` table of the `--config` file.
    pub fn mention_config_file(&mut self) -> &mut Self {
        self.config_file = true;
        self
    }

    /// Requests to paths for which `is_file_bytes` holds carry file bytes (the resumable
    /// upload's chunks): instead of a JSON type they need `X-Goog-Upload-Command` and any type
    /// but the three a browser sends without a preflight.
    pub fn file_bytes_at(&mut self, is_file_bytes: fn(&str) -> bool) -> &mut Self {
        self.file_bytes = Some(is_file_bytes);
        self
    }

    /// The names allowed besides IP literals and `localhost`.
    pub fn hosts(&self) -> &[AllowedHost] {
        &self.hosts
    }

    /// The origins allowed besides the server's own.
    pub fn origins(&self) -> &[AllowedOrigin] {
        &self.origins
    }

    /// Whether a request naming `authority` in `Host` is answered.
    pub(crate) fn allows_host(&self, authority: &Authority) -> bool {
        authority.is_ip_literal()
            || authority.host == "localhost"
            || self.hosts.iter().any(|h| h.matches(authority))
    }
}

/// A name the operator allowed in `Host`: `NAME` (any port) or `NAME:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    name: String,
    port: Option<u16>,
}

impl AllowedHost {
    fn matches(&self, authority: &Authority) -> bool {
        self.name == authority.host && self.port.is_none_or(|p| authority.port == Some(p))
    }
}

impl std::str::FromStr for AllowedHost {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let bad = || Error::BadHost(spec.to_owned());
        let text = spec.trim();
        if text.contains("://") || text.contains('/') {
            return Err(bad());
        }
        let authority = Authority::parse(text).ok_or_else(bad)?;
        if !(authority.is_ip_literal() || is_dns_name(&authority.host)) {
            return Err(bad());
        }
        Ok(AllowedHost {
            name: authority.host,
            port: authority.port,
        })
    }
}

impl fmt::Display for AllowedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Letters, digits, `-`, `_` and dots between non-empty labels: what a `Host` name can be.
fn is_dns_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// An origin the operator listed: its pages get CORS headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin(OriginParts);

impl AllowedOrigin {
    pub(crate) fn matches(&self, origin: &OriginParts) -> bool {
        self.0 == *origin
    }
}

impl std::str::FromStr for AllowedOrigin {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let text = spec.trim().trim_end_matches('/');
        OriginParts::parse(text)
            .filter(|o| o.scheme != "null")
            .map(AllowedOrigin)
            .ok_or_else(|| Error::BadOrigin(spec.to_owned()))
    }
}

impl fmt::Display for AllowedOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A `Host` value (or a URI's authority): the host lowercased without one trailing dot (IPv6
/// literals keep their brackets), and the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Authority {
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

impl Authority {
    /// `None` for anything that is not `host[:port]` (user info, an empty host, a bad port).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if text.is_empty() || text.contains('@') {
            return None;
        }
        let authority: http::uri::Authority = text.parse().ok()?;
        let host = authority.host().to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host).to_owned();
        if host.is_empty() || host.starts_with('.') {
            return None;
        }
        // `http` drops a port that is not a number; here it makes the value malformed.
        let port = match authority.as_str().get(authority.host().len()..)? {
            "" => None,
            rest => Some(rest.strip_prefix(':')?.parse::<u16>().ok()?),
        };
        Some(Authority { host, port })
    }

    /// An IPv4 address in dotted-quad form or a bracketed IPv6 address: what no DNS answer can
    /// put in a browser's `Host`.
    pub(crate) fn is_ip_literal(&self) -> bool {
        match self
            .host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
        {
            Some(v6) => v6.parse::<Ipv6Addr>().is_ok(),
            None => self.host.parse::<Ipv4Addr>().is_ok(),
        }
    }
}

/// A browser origin, normalised: scheme and host lowercased, the scheme's default port
/// dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OriginParts {
    pub(crate) scheme: String,
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
}

impl OriginParts {
    /// `None` for anything that is not `scheme://host[:port]` (a path other than `/`, a query,
    /// user info). `null` is kept apart by the caller.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let uri: http::Uri = text.parse().ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = Authority::parse(uri.authority()?.as_str())?;
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return None;
        }
        let port = authority.port.filter(|p| Some(*p) != default_port(&scheme));
        Some(OriginParts {
            scheme,
            host: authority.host,
            port,
        })
    }

    /// Whether this origin is the server that `Host` names: the same host and port (a `Host`
    /// without a port means the origin scheme's default, as a proxy that terminates TLS and
    /// keeps `Host` sends it).
    pub(crate) fn is_served_at(&self, host: &Authority) -> bool {
        let default = default_port(&self.scheme);
        self.host == host.host && self.port.or(default) == host.port.or(default)
    }
}

impl fmt::Display for OriginParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// The port a scheme implies when an origin leaves it out.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(text: &str) -> Authority {
        Authority::parse(text).unwrap()
    }

    #[test]
    fn ip_literals_and_localhost_are_answered_on_any_port_and_names_only_when_allowed() {
        let policy = Policy::new();
        for ok in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "10.1.2.3:1",
            "[::1]:8080",
            "[::1]",
            "[2001:db8::7]:443",
            "localhost:8080",
            "LOCALHOST",
            "localhost.:9",
        ] {
            assert!(policy.allows_host(&authority(ok)), "{ok}");
        }
        for refused in [
            "evil.example:8080",
            "evil.example",
            "127.0.0.1.evil.example",
            "127.1",
            "0x7f.0.0.1",
            "sub.localhost",
            "localhost.evil.example",
            "[fe80::1%25eth0]",
        ] {
            let parsed = Authority::parse(refused);
            assert!(
                parsed.is_none_or(|a| !policy.allows_host(&a)),
                "{refused} must be refused"
            );
        }
    }

    #[test]
    fn an_allowed_name_matches_any_port_unless_it_names_one() {
        let mut policy = Policy::new();
        policy.allow_host("Hookbox.Example.com.").unwrap();
        policy.allow_host("api.example.com:8443").unwrap();
        assert!(policy.allows_host(&authority("hookbox.example.com")));
        assert!(policy.allows_host(&authority("HOOKBOX.example.com:9999")));
        assert!(policy.allows_host(&authority("api.example.com:8443")));
        assert!(!policy.allows_host(&authority("api.example.com:8080")));
        assert!(!policy.allows_host(&authority("api.example.com")));
        assert!(!policy.allows_host(&authority("example.com")));
        assert_eq!(policy.hosts().len(), 2);
        assert_eq!(policy.hosts()[0].to_string(), "hookbox.example.com");
    }

    #[test]
    fn host_specs_that_are_not_names_are_refused() {
        for bad in [
            "",
            "*",
            "*.example.com",
            "http://hookbox.example.com",
            "hookbox.example.com/x",
            "user@hookbox.example.com",
            "hookbox.example.com:99999",
            "hookbox.example.com:abc",
            "a..b",
            "bad name",
        ] {
            assert!(
                matches!(bad.parse::<AllowedHost>(), Err(Error::BadHost(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn origins_are_normalised_and_never_a_wildcard() {
        let o: AllowedOrigin = "HTTPS://Console.Example.com:443/".parse().unwrap();
        assert_eq!(o.to_string(), "https://console.example.com");
        let o: AllowedOrigin = "http://127.0.0.1:3000".parse().unwrap();
        assert_eq!(o.to_string(), "http://127.0.0.1:3000");
        let o: AllowedOrigin = "http://x.example:80".parse().unwrap();
        assert_eq!(o.to_string(), "http://x.example");
        for bad in [
            "*",
            "null",
            "console.example.com",
            "https://console.example.com/app",
            "https://console.example.com?x=1",
            "https://u@console.example.com",
            "",
        ] {
            assert!(
                matches!(bad.parse::<AllowedOrigin>(), Err(Error::BadOrigin(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn same_origin_compares_the_authority_with_the_scheme_default_port() {
        let origin = |t: &str| OriginParts::parse(t).unwrap();
        assert!(origin("http://127.0.0.1:8080").is_served_at(&authority("127.0.0.1:8080")));
        assert!(!origin("http://127.0.0.1:8081").is_served_at(&authority("127.0.0.1:8080")));
        // A proxy that terminates TLS and keeps Host.
        assert!(origin("https://hookbox.example").is_served_at(&authority("hookbox.example")));
        assert!(origin("https://hookbox.example").is_served_at(&authority("hookbox.example:443")));
        assert!(!origin("https://hookbox.example").is_served_at(&authority("hookbox.example:80")));
        assert!(!origin("http://evil.example:8080").is_served_at(&authority("127.0.0.1:8080")));
        assert!(origin("http://[::1]:8080").is_served_at(&authority("[::1]:8080")));
        assert!(origin("http://LOCALHOST:8080").is_served_at(&authority("localhost:8080")));
    }

    #[test]
    fn ports_are_read_after_the_host_including_bracketed_ipv6() {
        assert_eq!(
            Authority::parse("[::1]:8080"),
            Some(Authority {
                host: "[::1]".into(),
                port: Some(8080)
            })
        );
        assert_eq!(authority("[2001:db8::1]").port, None);
        assert_eq!(authority("Example.COM:443").host, "example.com");
        for bad in [
            "example.com:",
            "example.com:-1",
            "example.com:65536",
            "",
            "@x",
            ":80",
        ] {
            assert_eq!(Authority::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_replica_url_allows_its_name_on_any_port() {
        let mut policy = Policy::new();
        policy
            .allow_url_host("http://Replica-1.internal:8080/")
            .unwrap();
        policy.allow_url_host("http://10.0.0.11:8080").unwrap();
        assert!(policy.allows_host(&authority("replica-1.internal:8080")));
        assert!(policy.allows_host(&authority("replica-1.internal")));
        assert_eq!(policy.hosts().len(), 1, "IP literals need no entry");
        assert!(matches!(
            policy.allow_url_host("not a url"),
            Err(Error::BadUrl(_))
        ));
    }
}
