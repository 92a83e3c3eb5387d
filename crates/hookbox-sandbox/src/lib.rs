//! hookbox's isolated environments and the six built-in tools.
//!
//! Owns: the launcher that builds a sandbox from Linux primitives ([`launcher`]), the launch spec
//! ([`spec`]), the seccomp deny list ([`seccomp`]), per-environment cgroups ([`cgroup`]), kernel
//! feature detection ([`features`]), an environment's egress wiring ([`network`]), the
//! [`runner::SandboxRunner`] that runs command hooks and
//! `code_execution` inside an environment, the file tools ([`tools`]), environments on disk and
//! their sources ([`environment`], [`source`]), and the tool-call lifecycle
//! ([`environment::Environment::call_tool`]).
//!
//! Must not: interpret hooks configuration or handler output (that is `hookbox-hooks`), resolve
//! paths in a tree with anything but `hookbox-rootfs`, or talk to the network on the sandbox's
//! behalf (that is `hookbox-egress`).
//!
//! # Opening a store (the API the binary and the server use)
//! ```ignore
//! let egress = EgressOptions::new(credentials)          // Arc<dyn hookbox_egress::credentials::CredentialStore>
//!     .with_operator(EgressOperator {                   // all optional; Default is the safe choice
//!         allowed_cidrs: vec!["127.0.0.0/8".parse()?],  // DANGEROUS: re-admits blocked ranges
//!         extra_ca_file: Some(pem_path),                // extra upstream roots
//!         resolve_pins: vec!["api.example.com:443=127.0.0.1:8443".parse()?], // curl --connect-to
//!     });
//! let store = Store::open(&data_dir, SandboxOptions::new(launcher), egress)?;
//! let env = store.open_env(id)?;      // keep it open as long as the environment is in use:
//! env.call_tool(call).await;          // its netns and proxy task live exactly as long as it
//! ```
//! [`source::EnvironmentSpec::network`] takes the API's `network` JSON as is; [`Store::create`]
//! rejects an invalid one (the error names the JSON path) before anything is created.
//! [`environment::EnvironmentMeta`] values returned by the store have `transform` header values
//! redacted.
//!
//! # Decisions
//! - One sandbox per open environment, built by a re-executed single-threaded launcher
//!   (`hookbox-sandbox-exec`, or `hookbox __sandbox-exec`) and kept ([`warm`]); each tool call
//!   and command hook is cloned inside it into its own PID, mount and IPC namespaces with its own
//!   `/proc`, limits, Landlock and seccomp, and handed over with its stdio through a socket
//!   ([`fdpass`]). With `SandboxOptions::warm` off, one sandbox per call. The spec travels as
//!   JSON in a memfd on fd 3, failures come back as text on fd 4.
//! - Namespaces: user (uid/gid 0 inside mapped to hookbox's own uid/gid), mount, PID, IPC, UTS,
//!   and a network namespace (see Network below).
//! - Network ([`network`]): the environment's `network` is validated at creation and kept in its
//!   metadata; absent means disabled. Disabled (or an empty allowlist): each sandbox gets a
//!   fresh namespace with only `lo` ([`spec::Network::Isolated`]; the calls of a
//!   warm sandbox share it) and no proxy variables.
//!   Otherwise, on the first launch, the opened [`environment::Environment`] creates one
//!   loopback-only namespace (`hookbox_egress::netns`) with the egress proxy listening on
//!   `127.0.0.1:<port>` inside it (served by a task on the caller's tokio runtime, dialing from
//!   the host's namespace), and every sandbox of the environment (tools and command hooks) joins
//!   it ([`spec::Network::Join`]). The kernel, not the variables, keeps programs in: a direct
//!   connect is refused at once, and `/etc/resolv.conf` names `127.0.0.1`, where nothing answers,
//!   so DNS is not a way out (names are resolved by the proxy). Proxy and CA variables
//!   (`hookbox_egress::env::sandbox_env`) are set last, over the environment's own variables.
//!   The namespace, proxy task and CA bundle go when the `Environment` is dropped.
//! - CA: per opened environment (key only in hookbox's memory). The bundle (host roots + that
//!   CA) is written under the environment's directory (`.egress-*/`, outside the tree) and bound
//!   read-only at [`network::SANDBOX_CA_BUNDLE`] and over each system bundle file present on the
//!   host ([`network::SYSTEM_CA_BUNDLES`]).
//! - http hooks always leave through `hookbox_egress::EgressPoster` with the environment's
//!   `Egress` (same allowlist, always-on blocks and injection as the sandbox); with a disabled
//!   policy every hook URL is refused, fails open, and the trace names the rule.
//! - Secrets: credentials stay in the credential store; `transform` values are kept only in
//!   `environment.json` (outside the tree) and redacted in every metadata the store returns.
//! - Operator options ([`network::EgressOperator`]) apply to every environment of the store:
//!   re-admitted CIDRs (dangerous), extra upstream roots, `HOST:PORT=IP:PORT` pins.
//! - Environments with egress need hookbox to run as root (creating and joining the namespace
//!   needs `CAP_SYS_ADMIN`); disabled ones do not. With `--insecure-no-isolation` no proxy is set
//!   up and the policy does not confine programs (http hooks still go through egress).
//! - Root: a tmpfs, read-only after setup, with the host's `/usr`, `/bin`, `/sbin`, `/lib*` bound
//!   read-only, a curated read-only `/etc` (generated `passwd`, `group`, `hosts`, `hostname`,
//!   `resolv.conf`; `ssl/certs` but never `ssl/private`), a minimal `/dev`, a fresh `/proc`, and
//!   every top-level directory of the environment's tree bound writable (`/workspace` is the cwd
//!   and `HOME`). Names the host provides (`usr`, `etc`, ...) are refused as source targets.
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
//! - Repository sources ([`source`]): API clients ([`source::SourceOrigin::Client`]) may name
//!   `https://` URLs only, the operator (CLI) also local paths and `file://`; every https clone
//!   goes through an egress proxy over the environment's own policy (disabled by default, so
//!   refused), git runs with a clean env/config and only the allowed protocols, is killed (whole
//!   group) after [`source::SourceLimits::clone_timeout`] (300 s), and a tree over
//!   [`source::SourceLimits::max_tree_bytes`] (1 GiB) after the clone is refused and removed.
//! - Frozen hooks: `/.agents` moves to `frozen/.agents` (bound read-only) with a copy of
//!   `/workspace/.agents/hooks.json`; hooks load from the snapshot; file tools refuse writes there.
//! - `--insecure-no-isolation` runs the program directly with the tree's `workspace` as cwd;
//!   sandbox paths such as `/.agents/...` do not resolve in that mode.

mod bounded;
pub mod cgroup;
pub mod disk;
pub mod environment;
pub mod fdpass;
pub mod features;
pub mod gvisor;
mod gvisor_init;
pub mod launcher;
pub mod network;
pub mod runner;
pub mod seccomp;
pub mod slots;
pub mod source;
pub mod spec;
pub mod tools;
pub mod vars;
pub mod warm;

pub use environment::Store;
pub use network::{EgressOperator, EgressOptions};
