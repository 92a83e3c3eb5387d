//! Every environment variable name hookbox-environments reads, in one place (the launcher's and
//! runsc's are in `hookbox_sandbox::env_vars`).

/// Where environments live (default `~/.local/share/hookbox`).
pub const HOOKBOX_DATA_DIR: &str = "HOOKBOX_DATA_DIR";
/// `HOME`, for the default data dir.
pub const HOME: &str = "HOME";
/// `XDG_DATA_HOME`, for the default data dir.
pub const XDG_DATA_HOME: &str = "XDG_DATA_HOME";
