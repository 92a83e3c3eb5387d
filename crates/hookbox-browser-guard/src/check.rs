//! The decision about one request, a pure function of its method, URI, version and headers
//! ([`Policy::decide`]), so every rule is tested without a server. Refusals carry what the
//! message names; [`Refusal::message`] says how to allow more.

use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, Version};

use crate::headers::{SEC_FETCH_MODE, SEC_FETCH_SITE, X_GOOG_UPLOAD_COMMAND};
use crate::policy::{Authority, OriginParts, Policy};

/// What happens to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The endpoint answers; `cors` is the listed origin to name in CORS headers, if one asked.
    Pass { cors: Option<HeaderValue> },
    /// A CORS preflight from a listed origin, answered here.
    Preflight { origin: HeaderValue },
    /// Refused before the endpoint sees it.
    Refuse(Refusal),
}

/// Why a request is refused. Values a client sent are kept shortened, for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP/1.1 or later without `Host`.
    MissingHost,
    /// `Host` (or the request target's authority) is not `host[:port]`, or there are several.
    MalformedHost(String),
    /// `Host` names the server by a name the operator did not allow (DNS rebinding).
    ForeignHost { host: String, name: String },
    /// `Origin: null`: a sandboxed frame, a local file, a redirect across origins.
    NullOrigin,
    /// `Origin` is not an origin, or there are several.
    MalformedOrigin(String),
    /// A page of another origin that the operator did not list.
    ForeignOrigin(String),
    /// A `cross-site` or `same-site` request without `Origin` that is not a navigation.
    CrossSite(String),
    /// A body whose `Content-Type` is not JSON (`None`: no `Content-Type`).
    NotJson(Option<String>),
    /// A request to a file-bytes route without `X-Goog-Upload-Command`.
    UploadWithoutCommand,
    /// File bytes sent as a type a browser sends without a preflight.
    UploadSimpleType(String),
}

/// The three `Content-Type`s a browser sends cross-origin without asking first.
const CORS_SAFELISTED_TYPES: &[&str] = &[
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
];

/// Longest part of a client's value a message repeats.
const SHOWN_CHARS: usize = 100;

impl Policy {
    /// Decides about one request; see the crate doc for the rules, in this order.
    pub fn decide(
        &self,
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Decision {
        match self.check(method, uri, version, headers) {
            Ok(Some(origin)) if is_preflight(method, headers) => Decision::Preflight { origin },
            Ok(cors) => Decision::Pass { cors },
            Err(refusal) => Decision::Refuse(refusal),
        }
    }

    fn check(
        &self,
        method: &Method,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Result<Option<HeaderValue>, Refusal> {
        let host = self.check_host(uri, version, headers)?;
        let (origin_allowed, cors) = self.check_origin(host.as_ref(), headers)?;
        if !origin_allowed {
            check_fetch_site(method, headers)?;
        }
        if let Some(cors) = &cors
            && is_preflight(method, headers)
        {
            return Ok(Some(cors.clone()));
        }
        if self.file_bytes.is_some_and(|is_file| is_file(uri.path())) {
            check_file_bytes(headers)?;
        } else if has_body(headers) {
            check_json(headers)?;
        }
        Ok(cors)
    }

    /// The request's authority (`None` only for HTTP/1.0 without `Host`), once allowed. The
    /// request target's authority (absolute form, HTTP/2) wins over `Host`, as in routing;
    /// both must be allowed.
    fn check_host(
        &self,
        uri: &Uri,
        version: Version,
        headers: &HeaderMap,
    ) -> Result<Option<Authority>, Refusal> {
        let mut host_headers = headers.get_all(HOST).iter();
        let header = host_headers.next();
        if host_headers.next().is_some() {
            return Err(Refusal::MalformedHost("several Host headers".to_owned()));
        }
        let mut seen = None;
        let given = header
            .map(|v| v.to_str().unwrap_or("(not text)"))
            .into_iter()
            .chain(uri.authority().map(|a| a.as_str()));
        for text in given {
            let authority =
                Authority::parse(text).ok_or_else(|| Refusal::MalformedHost(shown(text)))?;
            if !self.allows_host(&authority) {
                return Err(Refusal::ForeignHost {
                    host: shown(text),
                    name: shown(&authority.host),
                });
            }
            seen = Some(authority);
        }
        if seen.is_none() && version != Version::HTTP_10 && version != Version::HTTP_09 {
            return Err(Refusal::MissingHost);
        }
        Ok(seen)
    }

    /// Whether an allowed `Origin` came, and the listed origin to answer with CORS headers.
    fn check_origin(
        &self,
        host: Option<&Authority>,
        headers: &HeaderMap,
    ) -> Result<(bool, Option<HeaderValue>), Refusal> {
        let mut values = headers.get_all(ORIGIN).iter();
        let Some(value) = values.next() else {
            return Ok((false, None));
        };
        if values.next().is_some() {
            return Err(Refusal::MalformedOrigin(
                "several Origin headers".to_owned(),
            ));
        }
        let text = value.to_str().unwrap_or("(not text)").trim();
        if text.eq_ignore_ascii_case("null") {
            return Err(Refusal::NullOrigin);
        }
        let origin =
            OriginParts::parse(text).ok_or_else(|| Refusal::MalformedOrigin(shown(text)))?;
        if self.origins.iter().any(|o| o.matches(&origin)) {
            return Ok((true, Some(value.clone())));
        }
        if host.is_some_and(|h| origin.is_served_at(h)) {
            return Ok((true, None));
        }
        Err(Refusal::ForeignOrigin(shown(&origin.to_string())))
    }
}

/// A request from another site without an allowed `Origin` is refused unless it is a
/// top-level navigation (a link the user followed).
fn check_fetch_site(method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
    };
    let Some(site) = header(SEC_FETCH_SITE) else {
        return Ok(());
    };
    let other_site = matches!(site.as_str(), "cross-site" | "same-site");
    let navigation = header(SEC_FETCH_MODE).as_deref() == Some("navigate")
        && (method == Method::GET || method == Method::HEAD);
    if other_site && !navigation {
        return Err(Refusal::CrossSite(shown(&site)));
    }
    Ok(())
}

fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::OPTIONS && headers.contains_key(http::header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// `Content-Length` above 0 (or unreadable), or any `Transfer-Encoding`.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .any(|v| v.to_str().ok().and_then(|t| t.trim().parse::<u64>().ok()) != Some(0))
}

/// The one `Content-Type`'s essence (`type/subtype`, lowercase), `Err` with what to show when
/// it is missing or there are several.
fn essence(headers: &HeaderMap) -> Result<String, Option<String>> {
    let mut values = headers.get_all(CONTENT_TYPE).iter();
    let Some(value) = values.next() else {
        return Err(None);
    };
    if values.next().is_some() {
        return Err(Some("several Content-Type headers".to_owned()));
    }
    let text = value.to_str().map_err(|_| Some("(not text)".to_owned()))?;
    Ok(text
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase())
}

fn check_json(headers: &HeaderMap) -> Result<(), Refusal> {
    let essence = essence(headers).map_err(Refusal::NotJson)?;
    let json = essence == "application/json"
        || essence
            .strip_prefix("application/")
            .and_then(|sub| sub.strip_suffix("+json"))
            .is_some_and(|tree| !tree.is_empty() && !tree.contains('/'));
    if json {
        Ok(())
    } else {
        Err(Refusal::NotJson(Some(shown(&essence))))
    }
}

/// File bytes: the upload command header (which makes any cross-origin request preflighted)
/// and no type a browser sends without a preflight.
fn check_file_bytes(headers: &HeaderMap) -> Result<(), Refusal> {
    if !headers.contains_key(X_GOOG_UPLOAD_COMMAND) {
        return Err(Refusal::UploadWithoutCommand);
    }
    match essence(headers) {
        Ok(essence) if CORS_SAFELISTED_TYPES.contains(&essence.as_str()) => {
            Err(Refusal::UploadSimpleType(essence))
        }
        Ok(_) | Err(None) => Ok(()),
        Err(Some(shown)) => Err(Refusal::UploadSimpleType(shown)),
    }
}

/// At most [`SHOWN_CHARS`] characters of a client's value.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

impl Refusal {
    /// The HTTP status: 415 for a body type, 400 for a malformed upload, 403 otherwise.
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::NotJson(_) | Refusal::UploadSimpleType(_) => {
                StatusCode::UNSUPPORTED_MEDIA_TYPE
            }
            Refusal::UploadWithoutCommand
            | Refusal::MissingHost
            | Refusal::MalformedHost(_)
            | Refusal::MalformedOrigin(_) => StatusCode::BAD_REQUEST,
            Refusal::ForeignHost { .. }
            | Refusal::NullOrigin
            | Refusal::ForeignOrigin(_)
            | Refusal::CrossSite(_) => StatusCode::FORBIDDEN,
        }
    }

    /// The Google RPC status name of [`Refusal::status`].
    pub fn rpc_status(&self) -> &'static str {
        match self.status() {
            StatusCode::FORBIDDEN => "PERMISSION_DENIED",
            _ => "INVALID_ARGUMENT",
        }
    }

    /// Every [`Refusal::reason`]: a closed set, so a server may use them as metric labels
    /// (`hookbox_browser_guard_refusals_total{reason}`) without a client choosing the label.
    pub const REASONS: [&'static str; 10] = [
        "missing_host",
        "malformed_host",
        "foreign_host",
        "null_origin",
        "malformed_origin",
        "foreign_origin",
        "cross_site",
        "not_json",
        "upload_without_command",
        "upload_simple_type",
    ];

    /// A stable name for logs and metric labels, one of [`Refusal::REASONS`].
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::MissingHost => "missing_host",
            Refusal::MalformedHost(_) => "malformed_host",
            Refusal::ForeignHost { .. } => "foreign_host",
            Refusal::NullOrigin => "null_origin",
            Refusal::MalformedOrigin(_) => "malformed_origin",
            Refusal::ForeignOrigin(_) => "foreign_origin",
            Refusal::CrossSite(_) => "cross_site",
            Refusal::NotJson(_) => "not_json",
            Refusal::UploadWithoutCommand => "upload_without_command",
            Refusal::UploadSimpleType(_) => "upload_simple_type",
        }
    }

    /// What the client is told: what was wrong and, where the operator can allow it, how.
    pub fn message(&self, policy: &Policy) -> String {
        let config = |key: &str, value: &str| {
            if policy.config_file {
                format!(
                    " (or `{key} = [\"{value}\"]` in the `[server]` table of the --config file)"
                )
            } else {
                String::new()
            }
        };
        match self {
            Refusal::MissingHost => {
                "The request has no Host header, which HTTP/1.1 requires.".to_owned()
            }
            Refusal::MalformedHost(host) => {
                format!("Host `{host}` is not a host name with an optional port.")
            }
            Refusal::ForeignHost { host, name } => format!(
                "Host `{host}` is not a name this server answers to: it answers to IP addresses, `localhost`, and the names its operator allowed (this stops DNS-rebinding attacks from web pages). If clients reach it by this name, start it with --allow-host {name}{}.",
                config("allow_hosts", name)
            ),
            Refusal::NullOrigin => "Requests with `Origin: null` (sandboxed frames, local files) may not use this server.".to_owned(),
            Refusal::MalformedOrigin(origin) => {
                format!("Origin `{origin}` is not an origin (SCHEME://HOST[:PORT]).")
            }
            Refusal::ForeignOrigin(origin) => format!(
                "Origin `{origin}` may not use this server: web pages may call it only from its own origin and the origins its operator allowed. To allow this one, start it with --allow-origin {origin}{}.",
                config("allow_origins", origin)
            ),
            Refusal::CrossSite(site) => format!(
                "A {site} browser request without an allowed Origin may not use this server; only links to its pages (such as /console) are followed."
            ),
            Refusal::NotJson(None) => "The request has a body but no Content-Type; send `Content-Type: application/json`.".to_owned(),
            Refusal::NotJson(Some(got)) => format!(
                "Content-Type `{got}` is not accepted: a request with a body must send `application/json` (web pages on other sites can send other types without the browser asking this server first)."
            ),
            Refusal::UploadWithoutCommand => "An upload request needs the X-Goog-Upload-Command header (the SDKs send it).".to_owned(),
            Refusal::UploadSimpleType(got) => format!(
                "Content-Type `{got}` is not accepted for upload bytes: send `application/octet-stream` or the SDK's `application/json` (web pages on other sites can send {} without the browser asking this server first).",
                CORS_SAFELISTED_TYPES.join(", ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> (Method, Uri, HeaderMap) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        (method.parse().unwrap(), uri.parse().unwrap(), map)
    }

    fn decide(policy: &Policy, method: &str, uri: &str, headers: &[(&str, &str)]) -> Decision {
        let (m, u, h) = request(method, uri, headers);
        policy.decide(&m, &u, Version::HTTP_11, &h)
    }

    fn refused(decision: Decision) -> &'static str {
        match decision {
            Decision::Refuse(r) => r.reason(),
            other => panic!("not refused: {other:?}"),
        }
    }

    const PASS: Decision = Decision::Pass { cors: None };

    /// The metric labels are exactly the reasons: each refusal's reason is listed, and each
    /// listed reason is some refusal's.
    #[test]
    fn reasons_lists_every_refusal_reason() {
        let all = [
            Refusal::MissingHost,
            Refusal::MalformedHost(String::new()),
            Refusal::ForeignHost {
                host: String::new(),
                name: String::new(),
            },
            Refusal::NullOrigin,
            Refusal::MalformedOrigin(String::new()),
            Refusal::ForeignOrigin(String::new()),
            Refusal::CrossSite(String::new()),
            Refusal::NotJson(None),
            Refusal::UploadWithoutCommand,
            Refusal::UploadSimpleType(String::new()),
        ];
        let reasons: Vec<&str> = all.iter().map(Refusal::reason).collect();
        assert_eq!(reasons, Refusal::REASONS);
    }

    #[test]
    fn curl_without_origin_passes() {
        let p = Policy::new();
        let json = [
            ("host", "127.0.0.1:8080"),
            ("content-type", "application/json"),
            ("content-length", "2"),
        ];
        assert_eq!(decide(&p, "POST", "/v1beta/interactions", &json), PASS);
        assert_eq!(
            decide(
                &p,
                "GET",
                "/v1beta/interactions",
                &[("host", "localhost:8080")]
            ),
            PASS
        );
    }

    #[test]
    fn a_missing_host_is_refused_on_http_1_1_only() {
        let p = Policy::new();
        let (m, u, h) = request("GET", "/healthz", &[]);
        assert!(matches!(
            p.decide(&m, &u, Version::HTTP_11, &h),
            Decision::Refuse(Refusal::MissingHost)
        ));
        assert_eq!(p.decide(&m, &u, Version::HTTP_10, &h), PASS);
        let (m, u, h) = request(
            "GET",
            "/healthz",
            &[("host", "127.0.0.1"), ("host", "127.0.0.1")],
        );
        assert_eq!(
            refused(p.decide(&m, &u, Version::HTTP_11, &h)),
            "malformed_host"
        );
    }

    #[test]
    fn an_absolute_target_must_name_an_allowed_host_too() {
        let p = Policy::new();
        let (m, u, h) = request(
            "GET",
            "http://evil.example/v1beta/interactions",
            &[("host", "127.0.0.1:8080")],
        );
        assert_eq!(
            refused(p.decide(&m, &u, Version::HTTP_11, &h)),
            "foreign_host"
        );
    }

    #[test]
    fn a_foreign_host_is_refused_naming_the_flag_and_the_config_key() {
        let mut p = Policy::new();
        p.mention_config_file();
        let Decision::Refuse(refusal) =
            decide(&p, "GET", "/console", &[("host", "Rebind.Example:8080")])
        else {
            panic!("passed")
        };
        assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
        let message = refusal.message(&p);
        assert!(message.contains("--allow-host rebind.example"), "{message}");
        assert!(
            message.contains("allow_hosts = [\"rebind.example\"]"),
            "{message}"
        );
        assert!(!refusal.message(&Policy::new()).contains("--config"));
    }

    #[test]
    fn origins_pass_when_same_origin_or_listed_and_only_listed_ones_get_cors() {
        let mut p = Policy::new();
        p.allow_origin("https://console.example.com").unwrap();
        let same = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert_eq!(decide(&p, "GET", "/v1beta/interactions", &same), PASS);
        let listed = [
            ("host", "127.0.0.1:8080"),
            ("origin", "https://console.example.com"),
        ];
        assert_eq!(
            decide(&p, "GET", "/v1beta/interactions", &listed),
            Decision::Pass {
                cors: Some(HeaderValue::from_static("https://console.example.com"))
            }
        );
        for (origin, reason) in [
            ("http://evil.example", "foreign_origin"),
            ("http://127.0.0.1:8081", "foreign_origin"),
            ("https://console.example.com:8443", "foreign_origin"),
            ("null", "null_origin"),
            ("evil", "malformed_origin"),
        ] {
            let headers = [("host", "127.0.0.1:8080"), ("origin", origin)];
            assert_eq!(
                refused(decide(&p, "GET", "/v1beta/interactions", &headers)),
                reason,
                "{origin}"
            );
        }
    }

    #[test]
    fn a_listed_origins_preflight_is_answered_and_a_foreign_ones_refused() {
        let mut p = Policy::new();
        p.allow_origin("http://app.example:3000").unwrap();
        let preflight = |origin: &'static str| {
            decide(
                &p,
                "OPTIONS",
                "/v1beta/interactions",
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", origin),
                    ("access-control-request-method", "POST"),
                    (
                        "access-control-request-headers",
                        "content-type,x-goog-api-key",
                    ),
                ],
            )
        };
        assert_eq!(
            preflight("http://app.example:3000"),
            Decision::Preflight {
                origin: HeaderValue::from_static("http://app.example:3000")
            }
        );
        assert_eq!(refused(preflight("http://evil.example")), "foreign_origin");
    }

    #[test]
    fn cross_site_requests_without_origin_pass_only_as_navigations() {
        let p = Policy::new();
        let img = [
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ];
        assert_eq!(
            refused(decide(&p, "GET", "/v1beta/interactions", &img)),
            "cross_site"
        );
        let same_site = [("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")];
        assert_eq!(
            refused(decide(&p, "GET", "/metrics", &same_site)),
            "cross_site"
        );
        let link = [
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ];
        assert_eq!(decide(&p, "GET", "/console", &link), PASS);
        assert_eq!(refused(decide(&p, "POST", "/console", &link)), "cross_site");
        for site in ["same-origin", "none"] {
            let typed = [("host", "127.0.0.1:8080"), ("sec-fetch-site", site)];
            assert_eq!(decide(&p, "GET", "/console", &typed), PASS);
        }
    }

    #[test]
    fn a_body_must_be_json_whatever_the_origin() {
        let mut p = Policy::new();
        p.allow_origin("http://app.example").unwrap();
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
        ] {
            let headers = [
                ("host", "127.0.0.1:8080"),
                ("content-type", ok),
                ("content-length", "2"),
            ];
            assert_eq!(
                decide(&p, "POST", "/v1beta/interactions", &headers),
                PASS,
                "{ok}"
            );
        }
        for bad in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
            "application/jsonx",
            "text/json",
        ] {
            for origin in [None, Some("http://app.example")] {
                let mut headers = vec![
                    ("host", "127.0.0.1:8080"),
                    ("content-type", bad),
                    ("transfer-encoding", "chunked"),
                ];
                headers.extend(origin.map(|o| ("origin", o)));
                let Decision::Refuse(refusal) =
                    decide(&p, "POST", "/v1beta/interactions", &headers)
                else {
                    panic!("{bad} passed")
                };
                assert_eq!(refusal.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
                let essence = bad.split(';').next().unwrap().to_ascii_lowercase();
                assert!(refusal.message(&p).contains(&essence), "{bad}");
            }
        }
        let untyped = [("host", "127.0.0.1:8080"), ("content-length", "5")];
        assert_eq!(
            refused(decide(&p, "POST", "/v1beta/interactions", &untyped)),
            "not_json"
        );
        // No body: any type, or none (cancel with an empty POST, GETs from the SDK that say JSON).
        let empty = [
            ("host", "127.0.0.1:8080"),
            ("content-type", "text/plain"),
            ("content-length", "0"),
        ];
        assert_eq!(
            decide(&p, "POST", "/v1beta/interactions/x/cancel", &empty),
            PASS
        );
        assert_eq!(
            decide(
                &p,
                "POST",
                "/v1beta/interactions/x/cancel",
                &[("host", "localhost")]
            ),
            PASS
        );
    }

    #[test]
    fn file_bytes_need_the_upload_command_and_no_simple_type() {
        let mut p = Policy::new();
        p.file_bytes_at(|path| path.contains("/sessions/"));
        let chunk = |ct: Option<&'static str>, command: bool| {
            let mut headers = vec![("host", "127.0.0.1:8080"), ("content-length", "5")];
            headers.extend(ct.map(|c| ("content-type", c)));
            if command {
                headers.push(("x-goog-upload-command", "upload, finalize"));
            }
            decide(&p, "POST", "/upload/v1beta/sessions/upl_1", &headers)
        };
        // What the Python and JS SDKs send: their default JSON type over file bytes.
        assert_eq!(chunk(Some("application/json"), true), PASS);
        assert_eq!(chunk(Some("application/octet-stream"), true), PASS);
        assert_eq!(chunk(None, true), PASS);
        assert_eq!(
            refused(chunk(Some("application/json"), false)),
            "upload_without_command"
        );
        for simple in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ] {
            assert_eq!(refused(chunk(Some(simple), true)), "upload_simple_type");
        }
        // Other paths keep the JSON rule.
        let headers = [
            ("host", "127.0.0.1:8080"),
            ("content-type", "application/octet-stream"),
            ("content-length", "5"),
            ("x-goog-upload-command", "upload"),
        ];
        assert_eq!(
            refused(decide(&p, "POST", "/v1beta/interactions", &headers)),
            "not_json"
        );
    }

    #[test]
    fn every_refusal_has_a_status_a_reason_and_a_message() {
        let p = Policy::new();
        let all = [
            Refusal::MissingHost,
            Refusal::MalformedHost("x y".into()),
            Refusal::ForeignHost {
                host: "e.example:1".into(),
                name: "e.example".into(),
            },
            Refusal::NullOrigin,
            Refusal::MalformedOrigin("x".into()),
            Refusal::ForeignOrigin("http://e.example".into()),
            Refusal::CrossSite("cross-site".into()),
            Refusal::NotJson(None),
            Refusal::NotJson(Some("text/plain".into())),
            Refusal::UploadWithoutCommand,
            Refusal::UploadSimpleType("text/plain".into()),
        ];
        for refusal in all {
            assert!(refusal.status().is_client_error());
            assert!(!refusal.message(&p).is_empty());
            assert!(!refusal.reason().is_empty());
        }
    }

    #[test]
    fn values_shown_back_are_bounded() {
        let long = "a".repeat(5000);
        assert_eq!(shown(&long).chars().count(), SHOWN_CHARS + 1);
        assert_eq!(shown("short"), "short");
    }
}
