//! The Linux sandbox, how it is built and run: everything between a launch spec and a running,
//! confined program (namespaces, Landlock, seccomp, cgroups, or gVisor).
//!
//! Owns: the launch spec ([`spec`]); the launcher, the small single-threaded program that builds
//! a sandbox from Linux primitives ([`launcher`], entered through [`launcher_main`]); handing a
//! launch over to it ([`handoff`]) and reading its status channel back ([`status`]); why a
//! launch failed, typed ([`error`]: the [`Stage`], the errno, [`SandboxError::is_transient`]);
//! warm sandboxes and the call protocol ([`warm`], [`fdpass`]); the seccomp deny list
//! ([`seccomp`]); per-environment cgroups ([`cgroup`]); kernel feature detection ([`features`]);
//! the isolation runtimes behind one trait ([`runtime::Runtime`]: [`runtime::Namespaces`],
//! [`runtime::Gvisor`]) and gVisor's host side ([`gvisor`]) and init.
//!
//! Must not: know environments, hooks (configuration or engine), network policy or the API. It
//! takes a [`spec::LaunchSpec`] and a network to join (or to relay to) and gives back a
//! program's output; what goes into the spec is the environments crate's (`hookbox-environments`)
//! business. Bounding a process (time-outs, output caps, killing its group, pidfds) is
//! `hookbox-process`'s, which it shares with everything else that runs programs. codex-rs keeps
//! `linux-sandbox` apart from the code that uses it the same way.
//!
//! Module order, bottom up: [`env_vars`], [`spec`], [`direct`], [`fdpass`], [`seccomp`], [`error`], [`status`],
//! [`cgroup`] → [`launcher`] with `call_host` → [`gvisor`], `gvisor_init` → [`handoff`] → [`warm`] with
//! [`early`] (a warm sandbox's launcher started before its spec; each names the other's types)
//! → [`runtime`]; no module imports one above it.
//!
//! # Decisions
//! - One sandbox per open environment, built by a re-executed single-threaded launcher
//!   (`hookbox-sandbox-exec`, or `hookbox __sandbox-exec`) and kept ([`warm`]); each tool call
//!   and command hook runs inside it in its own PID, mount and IPC namespaces with its own
//!   `/proc`, limits, Landlock and seccomp (the bounding set and the limits no call can change
//!   are set once, by the init), handed over with its stdio through a socket ([`fdpass`]).
//!   Those namespaces are a call host's, kept from one call to the next with nothing of the last
//!   call left in them (`call_host`, under namespaces and, run by `gvisor_init`, under gVisor),
//!   so a call costs its program's process. A command hook's line that is one simple command of plain words comes
//!   with its words ([`spec::LaunchSpec::direct`]); the init execs them itself instead of
//!   `/bin/sh -c` (one program start fewer), exactly as dash would, or runs the shell on anything
//!   it cannot do identically ([`direct`]). With `SandboxOptions::warm` off, one sandbox per
//!   call. The spec travels as JSON in a sealed memfd on fd 3 (or, to a launcher started before
//!   its spec was known, as one sent on a socket there: [`early`]); a failure comes back on fd
//!   4 as one line naming its stage and errno ([`status`]), so whether to try again is decided
//!   on types, never on words.
//! - Namespaces: user (uid/gid 0 inside mapped to hookbox's own uid/gid), mount, PID, IPC, UTS,
//!   and a network namespace: the environment's egress namespace, joined, or the sandbox's own,
//!   which the launcher creates after the fork (`lo` up) while the init builds the root.
//! - Root: a tmpfs, read-only after setup, with the host's `/usr`, `/bin`, `/sbin`, `/lib*` bound
//!   read-only, a curated read-only `/etc` (generated `passwd`, `group`, `hosts`, `hostname`,
//!   `resolv.conf`; `ssl/certs` but never `ssl/private`), a minimal `/dev`, a fresh `/proc`, and
//!   every top-level directory of the environment's tree bound writable (`/workspace` is the cwd
//!   and `HOME`). Names the host provides (`usr`, `etc`, ...) are refused as source targets.
//! - Landlock: read/execute everywhere, writes only beneath the writable binds, `/dev/shm` and the
//!   harmless devices; abstract unix sockets and signals scoped. Seccomp: a deny list returning
//!   `EPERM` ([`seccomp::DENIED`], each entry with why), namespace flags of `clone`, `TIOCSTI`;
//!   `clone3` returns `ENOSYS`; x32 system calls `EPERM`. One classic-BPF program, a binary
//!   search over the syscall number (about 10 instructions per call, not a linear list); a warm
//!   call host under namespaces (except a one-shot command's) installs it split in two, its own
//!   part once and each program's short rest ([`seccomp::Stacked`]). The
//!   capability bounding set keeps only file/process basics (`CHOWN`, `DAC_*`, `FOWNER`,
//!   `FSETID`, `KILL`, `SET[UG]ID`, `NET_BIND_SERVICE`), so root in the sandbox cannot
//!   reconfigure its network namespace. `setsid` (no TIOCSTI), parent-death signals on launcher
//!   and init, `no_new_privs`.
//! - Limits: per-environment cgroup (`hookbox/<env_id>`; v2 if it offers the controller, else v1)
//!   for processes (default 512) and memory (default 4 GiB); `RLIMIT_NPROC`/`RLIMIT_AS` only as a
//!   fallback, and as root without a pids cgroup the environment refuses to open. The
//!   single-threaded launcher joins v1 cgroups through `tasks` (no global lock, no RCU grace
//!   period; [`cgroup::open_self_join`]), v2 through `cgroup.procs`.
//! - gVisor ([`gvisor`], `--runtime gvisor`): one runsc container per warm sandbox, from an OCI
//!   bundle written from the same spec (read-only root of mountpoints, the same binds and
//!   generated `/etc`), `--network=none`, `--host-uds=none`, `--ignore-cgroups` inside the
//!   environment's cgroup, started through a wrapper that stages every bind as host root and
//!   read-only on the host. Its init is the launcher, fed over fd 0: calls get their own PID,
//!   mount and IPC namespaces, limits, capabilities and seccomp (no Landlock: ENOSYS); their end
//!   and kill go over their reply socket (no pidfd crosses out of gVisor). Egress is relayed from
//!   gVisor's own loopback to the environment's proxy over unix sockets passed in.

mod call_host;
pub mod cgroup;
pub mod direct;
pub mod early;
pub mod env_vars;
pub mod error;
pub mod fdpass;
pub mod features;
pub mod gvisor;
mod gvisor_init;
pub mod handoff;
pub mod launcher;
pub mod runtime;
pub mod seccomp;
pub mod spec;
pub mod status;
pub mod warm;

pub use error::{LaunchFailure, SandboxError, Stage};

/// Entry point of the launcher binary (`hookbox-sandbox-exec`, `hookbox __sandbox-exec`): the
/// init of a gVisor container, the wrapper around `runsc`, or (by default) the namespaces
/// launcher, by the marker in its environment. Never returns on success; on failure it has
/// reported on its status channel and returns the exit code.
pub fn launcher_main() -> i32 {
    if std::env::var_os(env_vars::INIT_MARKER).is_some() {
        return gvisor_init::main();
    }
    if std::env::var_os(env_vars::WRAP_MARKER).is_some() {
        return gvisor::wrapper_main();
    }
    launcher::main()
}
