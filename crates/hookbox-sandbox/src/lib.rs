//! hookbox's isolated environments and the six built-in tools.
//!
//! Owns: the launcher that builds a sandbox from Linux primitives ([`launcher`]), the launch spec
//! ([`spec`]), the seccomp deny list ([`seccomp`]), per-environment cgroups ([`cgroup`]), kernel
//! feature detection ([`features`]), the [`runner::SandboxRunner`] that runs command hooks and
//! `code_execution` inside an environment, the file tools ([`tools`]), environments on disk and
//! their sources ([`environment`], [`source`]), and the tool-call lifecycle
//! ([`environment::Environment::call_tool`]).
//!
//! Must not: interpret hooks configuration or handler output (that is `hookbox-hooks`), resolve
//! paths in a tree with anything but `hookbox-rootfs`, or talk to the network on the sandbox's
//! behalf (that is `hookbox-egress`).
//!
//! # Decisions
//! - One sandbox per process tree (per tool call and per command hook), built by a re-executed
//!   single-threaded launcher (`hookbox-sandbox-exec`, or `hookbox __sandbox-exec`); the spec
//!   travels as JSON in a memfd on fd 3, failures come back as text on fd 4.
//! - Namespaces: user (uid/gid 0 inside mapped to hookbox's own uid/gid), mount, PID, IPC, UTS,
//!   and a fresh network namespace with only `lo` ([`spec::Network::Isolated`]) or an inherited one
//!   joined with `setns` ([`spec::Network::Join`], for the egress proxy).
//! - Root: a tmpfs, read-only after setup, with the host's `/usr`, `/bin`, `/sbin`, `/lib*` bound
//!   read-only, a curated read-only `/etc` (generated `passwd`, `group`, `hosts`, `hostname`),
//!   a minimal `/dev`, a fresh `/proc`, and every top-level directory of the environment's tree
//!   bound writable (`/workspace` is the cwd and `HOME`). Names the host provides (`usr`, `etc`,
//!   ...) are refused as source targets.
//! - Landlock: read/execute everywhere, writes only beneath the writable binds, `/dev/shm` and the
//!   harmless devices; abstract unix sockets and signals scoped. Seccomp: a deny list returning
//!   `EPERM` ([`seccomp::DENIED`], each entry with why), namespace flags of `clone`, `TIOCSTI`;
//!   `clone3` returns `ENOSYS`. The capability bounding set keeps only file/process basics
//!   (`CHOWN`, `DAC_*`, `FOWNER`, `FSETID`, `KILL`, `SET[UG]ID`, `NET_BIND_SERVICE`), so root in
//!   the sandbox cannot reconfigure its network namespace. `setsid` (no TIOCSTI), parent-death
//!   signals on launcher and init, `no_new_privs`.
//! - Limits: per-environment cgroup (`hookbox/<env_id>`; v2 if it offers the controller, else v1)
//!   for processes (default 512) and memory (default 4 GiB); `RLIMIT_NPROC`/`RLIMIT_AS` only as a
//!   fallback, and as root without a pids cgroup the environment refuses to open.
//! - Frozen hooks: `/.agents` moves to `frozen/.agents` (bound read-only) with a copy of
//!   `/workspace/.agents/hooks.json`; hooks load from the snapshot; file tools refuse writes there.
//! - `--insecure-no-isolation` runs the program directly with the tree's `workspace` as cwd;
//!   sandbox paths such as `/.agents/...` do not resolve in that mode.

pub mod cgroup;
pub mod environment;
pub mod features;
pub mod launcher;
pub mod runner;
pub mod seccomp;
pub mod source;
pub mod spec;
pub mod tools;
pub mod vars;
