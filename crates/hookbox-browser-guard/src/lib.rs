//! What an HTTP endpoint on this machine accepts from browsers. hookbox serves HTTP on loopback
//! without a key in local mode (the API, the console, `/metrics`, `hookbox mcp --listen`), and
//! every web page the developer opens can send requests there. Two attacks matter:
//!
//! - **Cross-site requests.** A page on another origin may send "simple" requests without
//!   asking first (no CORS preflight): `GET`, `HEAD` and `POST` with `text/plain`,
//!   `application/x-www-form-urlencoded` or `multipart/form-data` bodies. It cannot read the
//!   answers, but a POST is enough to start an agent turn that runs code.
//! - **DNS rebinding.** A page on a name the attacker controls re-points that name at
//!   127.0.0.1; the browser then treats the server as the page's own origin and lets it read
//!   every answer. Such requests carry the attacker's name in `Host`.
//!
//! A [`Policy`] says what the endpoint answers; [`Policy::protect`] puts it in front of a
//! router as middleware. In order, a request must:
//!
//! 1. **Host** name the server the way only a legitimate client can: an IP literal (v4 or
//!    bracketed v6, any port: rebinding forges names, never addresses), `localhost` (any port;
//!    browsers never ask DNS for it), or a name the operator allowed (`--allow-host NAME`, any
//!    port, or `NAME:PORT`, that port only: behind a reverse proxy the operator's names are the
//!    way in). A request without `Host` is refused unless it is HTTP/1.0 (browsers always send
//!    one). Refused: 403 (400 for a missing, repeated or malformed `Host`).
//! 2. **Origin**, when present, be allowed: the same `host[:port]` as the request's `Host`
//!    (same origin; the authority is compared, not the scheme, so a TLS-terminating proxy that
//!    keeps `Host` works), or an origin the operator listed (`--allow-origin`, normalised:
//!    lowercase, default port stripped). `Origin: null` is never allowed. Refused: 403 (400 for
//!    a repeated or malformed `Origin`).
//! 3. **Sec-Fetch-Site** not be `cross-site` or `same-site` without an allowed `Origin`
//!    (browsers send no `Origin` on `<img src>` or `<script src>` GETs), except top-level
//!    navigations (`Sec-Fetch-Mode: navigate`, GET or HEAD), so a link to `/console` works.
//!    Refused: 403.
//! 4. **Content-Type**, when the request has a body (`Content-Length` above 0 or any
//!    `Transfer-Encoding`), be `application/json` or `application/*+json` (parameters allowed).
//!    No browser sends that cross-origin without a preflight, which only listed origins pass,
//!    so this closes simple requests even where `Origin` is absent. Refused: 415 naming the type.
//!    Routes whose body is file bytes ([`Policy::file_bytes_at`]: the resumable upload's
//!    chunks) instead need the `X-Goog-Upload-Command` header (a custom header forces a
//!    preflight; 400 without it) and may not use the three types a browser sends without one.
//!
//! CORS headers are sent only to origins the operator listed: their preflights are answered
//! here (the methods, and the request headers the SDKs send) and their answers name them in
//! `Access-Control-Allow-Origin` (never `*`; no credentials: keys travel in headers). Same-origin
//! pages need none. Refusals use the API's JSON error shape and say which flag or config key
//! allows more.
//!
//! Each refusal is logged as [`REFUSED_EVENT`] with its [`Refusal::reason`], a closed set
//! ([`Refusal::REASONS`]) that a server may count by (never a value the client sent).
//!
//! This crate decides and answers refusals; it must not know routes, keys or projects (the
//! endpoint says which paths carry file bytes).

mod check;
mod error;
pub mod headers;
mod layer;
mod policy;

pub use check::{Decision, Refusal};
pub use error::{Error, Result};
pub use layer::REFUSED_EVENT;
pub use policy::{AllowedHost, AllowedOrigin, Policy};
