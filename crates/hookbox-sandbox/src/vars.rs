//! Every environment variable name hookbox-sandbox reads, in one place.

/// Overrides the launcher program (default: the `hookbox` binary itself, `__sandbox-exec`).
pub const HOOKBOX_SANDBOX_EXEC: &str = "HOOKBOX_SANDBOX_EXEC";
/// A directory for runsc's debug logs (`--debug --debug-log=DIR/`): for diagnosing a gVisor
/// sandbox that does not start. The logs name every mount and syscall; never set it in production.
pub const HOOKBOX_RUNSC_DEBUG_LOG: &str = "HOOKBOX_RUNSC_DEBUG_LOG";
