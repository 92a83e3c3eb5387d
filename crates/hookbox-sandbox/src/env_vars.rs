//! Every environment variable name hookbox-sandbox reads, in one place.

/// Overrides the launcher program (default: `hookbox-sandbox-exec` beside the `hookbox` binary,
/// else the `hookbox` binary itself, `__sandbox-exec`).
pub const HOOKBOX_SANDBOX_EXEC: &str = "HOOKBOX_SANDBOX_EXEC";
/// A directory for runsc's debug logs (`--debug --debug-log=DIR/`): for diagnosing a gVisor
/// sandbox that does not start. The logs name every mount and syscall; never set it in production.
pub const HOOKBOX_RUNSC_DEBUG_LOG: &str = "HOOKBOX_RUNSC_DEBUG_LOG";
/// Set (to `1`) by hookbox for the launcher it makes the init of a gVisor container; internal.
pub const INIT_MARKER: &str = "HOOKBOX_GVISOR_INIT";
/// Set (to `1`) by hookbox for the launcher it has wrap `runsc` (see [`crate::gvisor::wrap`]);
/// internal.
pub const WRAP_MARKER: &str = "HOOKBOX_GVISOR_WRAP";
