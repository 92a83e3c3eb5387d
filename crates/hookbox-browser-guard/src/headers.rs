//! Header names this crate reads or writes that `http` has no constant for.

/// Which site a browser request comes from (`same-origin`, `same-site`, `cross-site`,
/// `none`).
pub const SEC_FETCH_SITE: &str = "sec-fetch-site";
/// What the request is for (`navigate`, `cors`, `no-cors`, ...).
pub const SEC_FETCH_MODE: &str = "sec-fetch-mode";
/// The resumable upload's command (`start`, `upload`, `upload, finalize`), which the SDKs
/// send with every upload request.
pub const X_GOOG_UPLOAD_COMMAND: &str = "x-goog-upload-command";
/// Request headers only a browser sets about its own context; a replica that forwards a
/// request it already checked strips them, so the receiving replica judges the forwarder,
/// not the browser.
pub const BROWSER_CONTEXT: &[&str] = &[
    "origin",
    "referer",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "sec-fetch-user",
];
