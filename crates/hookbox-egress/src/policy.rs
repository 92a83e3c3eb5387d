//! An environment's `network` policy: parsing the API's JSON with precise errors, and matching a
//! destination host against the allowlist.
//!
//! Owns the allowlist semantics (exact names, `*.` wildcards for subdomains at any depth but not
//! the apex, `*` for all; case-insensitive, trailing dot ignored) and the safe default when no
//! `network` is given. It must not look at addresses (see `ssrf`) nor read credentials (it only
//! keeps their ids).

use serde_json::Value;

/// Policy used when an environment has no `network` field: no egress. An agent that needs the
/// network must be given an explicit allowlist, so a forgotten field never opens the sandbox.
pub const DEFAULT_POLICY: NetworkPolicy = NetworkPolicy::Disabled;

/// The parsed `network` of an environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// `"disabled"` or `{"allowlist": "disabled"}`.
    Disabled,
    /// `{"allowlist": [...]}`; first matching entry wins.
    Allowlist(Vec<AllowEntry>),
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    pub pattern: DomainPattern,
    /// Headers injected into every request to a matching host, in order (later maps override
    /// earlier ones).
    pub transform: Vec<(String, String)>,
    /// Id of a stored credential injected into every request to a matching host.
    pub credential: Option<String>,
}

impl AllowEntry {
    /// Whether requests to this entry's hosts need TLS interception.
    pub fn injects(&self) -> bool {
        !self.transform.is_empty() || self.credential.is_some()
    }
}

/// A `domain` of an allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainPattern {
    /// `*`: any host.
    Any,
    /// `*.example.com`: strict subdomains of `example.com` at any depth. Stored without `*.`.
    Subdomains(String),
    /// `api.example.com`: exactly this host.
    Exact(String),
}

impl DomainPattern {
    /// Whether `host` (already lower-case, no trailing dot: see [`normalise_host`]) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            DomainPattern::Any => true,
            DomainPattern::Exact(name) => host == name,
            DomainPattern::Subdomains(base) => host
                .strip_suffix(base.as_str())
                .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.')),
        }
    }
}

impl std::fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DomainPattern::Any => f.write_str("*"),
            DomainPattern::Subdomains(base) => write!(f, "*.{base}"),
            DomainPattern::Exact(name) => f.write_str(name),
        }
    }
}

/// Lower-cases a host and removes one trailing dot.
pub fn normalise_host(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Why a `network` value was rejected. `path` is a JSON pointer-like location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network{path}: {message}")]
pub struct PolicyError {
    pub path: String,
    pub message: String,
}

fn perr(path: impl Into<String>, message: impl Into<String>) -> PolicyError {
    PolicyError {
        path: path.into(),
        message: message.into(),
    }
}

/// The outcome of matching a host against a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostDecision<'a> {
    Allowed { index: usize, entry: &'a AllowEntry },
    DeniedDisabled,
    DeniedNotListed,
}

impl NetworkPolicy {
    /// Parses the `network` JSON value; `None` (field absent) gives [`DEFAULT_POLICY`].
    pub fn from_json(value: Option<&Value>) -> Result<Self, PolicyError> {
        let Some(value) = value else {
            return Ok(DEFAULT_POLICY);
        };
        match value {
            Value::String(s) if s == "disabled" => Ok(NetworkPolicy::Disabled),
            Value::String(s) => Err(perr(
                "",
                format!("unknown string {s:?}; expected \"disabled\" or an object"),
            )),
            Value::Object(map) => {
                if let Some(key) = map.keys().find(|k| k.as_str() != "allowlist") {
                    return Err(perr(
                        format!(".{key}"),
                        "unknown field; expected \"allowlist\"",
                    ));
                }
                match map.get("allowlist") {
                    None => Err(perr(".allowlist", "missing")),
                    Some(Value::String(s)) if s == "disabled" => Ok(NetworkPolicy::Disabled),
                    Some(Value::Array(items)) => items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| parse_entry(i, item))
                        .collect::<Result<Vec<_>, _>>()
                        .map(NetworkPolicy::Allowlist),
                    Some(_) => Err(perr(
                        ".allowlist",
                        "expected \"disabled\" or an array of entries",
                    )),
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::Array(_) => {
                Err(perr("", "expected \"disabled\" or {\"allowlist\": ...}"))
            }
        }
    }

    /// Matches a host (CONNECT host or absolute-form URL host, any case, trailing dot allowed).
    pub fn decide(&self, host: &str) -> HostDecision<'_> {
        let host = normalise_host(host);
        match self {
            NetworkPolicy::Disabled => HostDecision::DeniedDisabled,
            NetworkPolicy::Allowlist(entries) => entries
                .iter()
                .enumerate()
                .find(|(_, e)| e.pattern.matches(&host))
                .map_or(HostDecision::DeniedNotListed, |(index, entry)| {
                    HostDecision::Allowed { index, entry }
                }),
        }
    }

    /// Ids of every credential the policy names.
    pub fn credential_ids(&self) -> Vec<&str> {
        match self {
            NetworkPolicy::Disabled => Vec::new(),
            NetworkPolicy::Allowlist(entries) => entries
                .iter()
                .filter_map(|e| e.credential.as_deref())
                .collect(),
        }
    }
}

fn parse_entry(i: usize, item: &Value) -> Result<AllowEntry, PolicyError> {
    let at = format!(".allowlist[{i}]");
    let Value::Object(map) = item else {
        return Err(perr(at, "expected an object {\"domain\": ...}"));
    };
    if let Some(key) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "domain" | "transform" | "credential"))
    {
        return Err(perr(
            format!("{at}.{key}"),
            "unknown field; expected domain, transform or credential",
        ));
    }
    let domain = match map.get("domain") {
        Some(Value::String(d)) => d,
        Some(_) => return Err(perr(format!("{at}.domain"), "expected a string")),
        None => return Err(perr(format!("{at}.domain"), "missing")),
    };
    let pattern = parse_pattern(domain).map_err(|m| perr(format!("{at}.domain"), m))?;
    let transform = match map.get("transform") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(h)) => parse_headers(&format!("{at}.transform"), h)?,
        Some(Value::Array(list)) => {
            let mut all = Vec::new();
            for (j, m) in list.iter().enumerate() {
                let p = format!("{at}.transform[{j}]");
                let Value::Object(h) = m else {
                    return Err(perr(p, "expected a header map"));
                };
                all.extend(parse_headers(&p, h)?);
            }
            all
        }
        Some(_) => {
            return Err(perr(
                format!("{at}.transform"),
                "expected a header map or a list of header maps",
            ));
        }
    };
    let credential = match map.get("credential") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) if crate::credentials::valid_id(c) => Some(c.clone()),
        Some(Value::String(c)) => {
            return Err(perr(
                format!("{at}.credential"),
                format!("{c:?} is not a valid credential id"),
            ));
        }
        Some(_) => return Err(perr(format!("{at}.credential"), "expected a string")),
    };
    Ok(AllowEntry {
        pattern,
        transform,
        credential,
    })
}

fn parse_pattern(domain: &str) -> Result<DomainPattern, String> {
    if domain == "*" {
        return Ok(DomainPattern::Any);
    }
    let (wild, rest) = match domain.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, domain),
    };
    let name = normalise_host(rest);
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        });
    if !ok {
        return Err(format!(
            "{domain:?} is not a host name, \"*.\" followed by a host name, or \"*\""
        ));
    }
    Ok(if wild {
        DomainPattern::Subdomains(name)
    } else {
        DomainPattern::Exact(name)
    })
}

fn parse_headers(
    at: &str,
    map: &serde_json::Map<String, Value>,
) -> Result<Vec<(String, String)>, PolicyError> {
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        if let Err(why) = crate::inject::check_header_name(name) {
            return Err(perr(format!("{at}.{name}"), why));
        }
        if crate::inject::is_hop_by_hop(name) || name.eq_ignore_ascii_case("host") {
            return Err(perr(
                format!("{at}.{name}"),
                "this header cannot be injected",
            ));
        }
        let Value::String(v) = value else {
            return Err(perr(format!("{at}.{name}"), "expected a string value"));
        };
        if let Err(why) = crate::inject::check_header_value(v) {
            return Err(perr(format!("{at}.{name}"), why));
        }
        out.push((name.to_ascii_lowercase(), v.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(v: Value) -> NetworkPolicy {
        NetworkPolicy::from_json(Some(&v)).unwrap()
    }

    fn err(v: Value) -> String {
        NetworkPolicy::from_json(Some(&v)).unwrap_err().to_string()
    }

    #[test]
    fn disabled_forms_and_default() {
        assert_eq!(policy(json!("disabled")), NetworkPolicy::Disabled);
        assert_eq!(
            policy(json!({"allowlist": "disabled"})),
            NetworkPolicy::Disabled
        );
        assert_eq!(
            NetworkPolicy::from_json(None).unwrap(),
            NetworkPolicy::Disabled
        );
        assert_eq!(
            policy(json!("disabled")).decide("a.com"),
            HostDecision::DeniedDisabled
        );
        assert_eq!(
            policy(json!({"allowlist": []})).decide("a.com"),
            HostDecision::DeniedNotListed
        );
    }

    #[test]
    fn matching() {
        let p = policy(json!({"allowlist": [
            {"domain": "api.example.com"},
            {"domain": "*.googleapis.com"},
        ]}));
        let allowed = |h: &str| matches!(p.decide(h), HostDecision::Allowed { .. });
        assert!(allowed("api.example.com"));
        assert!(allowed("API.Example.Com."));
        assert!(!allowed("example.com"));
        assert!(!allowed("x.api.example.com"));
        assert!(!allowed("api.example.com.evil.net"));
        assert!(allowed("storage.googleapis.com"));
        assert!(allowed("a.b.c.googleapis.com"));
        assert!(!allowed("googleapis.com"));
        assert!(!allowed("evilgoogleapis.com"));
        assert!(!allowed(".googleapis.com"));
        let any = policy(json!({"allowlist": [{"domain": "*"}]}));
        assert!(matches!(
            any.decide("whatever.net"),
            HostDecision::Allowed { .. }
        ));
    }

    #[test]
    fn first_match_wins_and_transforms_merge() {
        let p = policy(json!({"allowlist": [
            {"domain": "api.example.com", "transform": [{"X-A": "1"}, {"x-b": "2"}], "credential": "cred-1"},
            {"domain": "*", "transform": {"X-C": "3"}},
        ]}));
        let HostDecision::Allowed { index, entry } = p.decide("api.example.com") else {
            panic!()
        };
        assert_eq!(index, 0);
        assert_eq!(
            entry.transform,
            vec![("x-a".into(), "1".into()), ("x-b".into(), "2".into())]
        );
        assert_eq!(entry.credential.as_deref(), Some("cred-1"));
        assert!(entry.injects());
        assert_eq!(p.credential_ids(), vec!["cred-1"]);
    }

    #[test]
    fn precise_errors() {
        assert_eq!(
            err(json!("enabled")),
            "network: unknown string \"enabled\"; expected \"disabled\" or an object"
        );
        assert_eq!(
            err(json!(3)),
            "network: expected \"disabled\" or {\"allowlist\": ...}"
        );
        assert_eq!(err(json!({})), "network.allowlist: missing");
        assert_eq!(
            err(json!({"allowlist": [], "x": 1})),
            "network.x: unknown field; expected \"allowlist\""
        );
        assert_eq!(
            err(json!({"allowlist": {"domain": "a"}})),
            "network.allowlist: expected \"disabled\" or an array of entries"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com"}, {}]})),
            "network.allowlist[1].domain: missing"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.*.com"}]})),
            "network.allowlist[0].domain: \"a.*.com\" is not a host name, \"*.\" followed by a host name, or \"*\""
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "transfrom": {}}]})),
            "network.allowlist[0].transfrom: unknown field; expected domain, transform or credential"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "transform": [{"X": 1}]}]})),
            "network.allowlist[0].transform[0].X: expected a string value"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "transform": {"Bad Name": "v"}}]})),
            "network.allowlist[0].transform.Bad Name: not a valid header name (an RFC 7230 token: letters, digits and !#$%&'*+-.^_`|~, no spaces)"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "transform": {"Connection": "x"}}]})),
            "network.allowlist[0].transform.Connection: this header cannot be injected"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "credential": "../x"}]})),
            "network.allowlist[0].credential: \"../x\" is not a valid credential id"
        );
        assert_eq!(
            err(json!({"allowlist": [{"domain": "a.com", "transform": "x"}]})),
            "network.allowlist[0].transform: expected a header map or a list of header maps"
        );
    }
}
