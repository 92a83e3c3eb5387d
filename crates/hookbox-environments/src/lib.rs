//! hookbox's environments, the six built-in tools and the one lifecycle of a tool call.
//!
//! Owns: environments on disk ([`environment::Environments`], and an opened
//! [`environment::Environment`]) and their sources ([`environment`], [`source`], [`disk`]: a
//! disk mounted while some process has its environment open, and after a one-shot `hookbox
//! tool` or `env show` until a server's idle sweep unmounts it), the host uids they hold
//! (claimed as files, `uids`), their pids and memory cgroups (made when an environment is
//! opened, removed by its last close), an
//! environment's egress wiring ([`network`]), per-project process slots ([`slots`]), the
//! [`runner::SandboxRunner`] that turns an environment into launch specs and runs command hooks
//! and `code_execution` through its runtime, the six tools ([`tools`]), and the tool-call
//! lifecycle ([`lifecycle`]: load hooks → pre hooks or a reviewer's approval → the tool, or a
//! remote MCP server's through a closure → post hooks → one typed outcome), which every caller
//! goes through: the server's seams, `hookbox mcp`, `hookbox tool` and `mcp_server` tools.
//!
//! Must not: build sandboxes itself (that is `hookbox-sandbox`: the launcher, warm sandboxes,
//! the namespaces and gVisor runtimes), interpret hooks configuration or handler output (that
//! is `hookbox-hooks`), resolve paths in a tree with anything but `hookbox-rootfs`, or talk to
//! the network on the sandbox's behalf (that is `hookbox-egress`).
//!
//! # Opening the environments (the API the binary and the server use)
//! ```ignore
//! let egress = EgressOptions::new(credentials)          // Arc<dyn hookbox_egress::credentials::CredentialStore>
//!     .with_operator(EgressOperator {                   // all optional; Default is the safe choice
//!         allowed_cidrs: vec!["127.0.0.0/8".parse()?],  // DANGEROUS: re-admits blocked ranges
//!         extra_ca_file: Some(pem_path),                // extra upstream roots
//!         resolve_pins: vec!["api.example.com:443=127.0.0.1:8443".parse()?], // curl --connect-to
//!     });
//! let environments = Environments::open(&data_dir, SandboxOptions::new(launcher), egress)?;
//! let env = environments.open_env(id)?; // keep it open as long as the environment is in use:
//! env.call_tool(call).await;           // its netns and proxy task live exactly as long as it
//! ```
//! [`source::EnvironmentSpec::network`] takes the API's `network` JSON as is;
//! [`Environments::create`] rejects an invalid one (the error names the JSON path) before anything
//! is created. [`environment::EnvironmentMeta`] values it returns have `transform` header values
//! redacted.
//!
//! # Decisions (the sandbox itself: see `hookbox-sandbox`)
//! - Runtime: each environment records the runtime it was created with
//!   ([`environment::EnvironmentMeta::runtime`], `namespaces` unless the spec, the project's
//!   config or `--runtime` says `gvisor`); a fork keeps it. gVisor environments hold a range of
//!   [`hookbox_sandbox::gvisor::ID_SPAN`] host ids and a host process cap raised by
//!   [`hookbox_sandbox::gvisor::HOST_TASKS`] for gVisor's own threads.
//! - Network ([`network`]): the environment's `network` is validated at creation and kept in its
//!   metadata; absent means disabled. Disabled (or an empty allowlist): each sandbox gets a
//!   fresh namespace with only `lo` ([`hookbox_sandbox::spec::Network::Isolated`]; the calls of a
//!   warm sandbox share it) and no proxy variables.
//!   Otherwise, on the first launch, the opened [`environment::Environment`] creates one
//!   loopback-only namespace (`hookbox_egress::netns`) with the egress proxy listening on
//!   `127.0.0.1:<port>` inside it (served by a task on the caller's tokio runtime, dialing from
//!   the host's namespace), and every sandbox of the environment (tools and command hooks) joins
//!   it ([`hookbox_sandbox::spec::Network::Join`]). The kernel, not the variables, keeps
//!   programs in: a direct connect is refused at once, and `/etc/resolv.conf` names
//!   `127.0.0.1`, where nothing answers, so DNS is not a way out (names are resolved by the
//!   proxy). Proxy and CA variables
//!   (`hookbox_egress::env_vars::sandbox_env`) are set last, over the environment's own variables.
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
//! - Repository sources ([`source`]): API clients ([`source::SourceOrigin::Client`]) may name
//!   `https://` URLs only, the operator (CLI) also local paths and `file://`; every https clone
//!   goes through an egress proxy over the environment's own policy (disabled by default, so
//!   refused), git runs with a clean env/config and only the allowed protocols, is killed (whole
//!   group) after [`source::SourceLimits::clone_timeout`] (300 s), and a tree over
//!   [`source::SourceLimits::max_tree_bytes`] (1 GiB) after the clone is refused and removed.
//! - Change record ([`environment::activity`]): a write tool call (an upload, added sources)
//!   bumps the environment's `generation` and moves `updated_at` / `last_accessed_at` (never
//!   back) in its `activity` file, one fixed record changed by a `pwrite` in place under an
//!   exclusive `flock`: no rewrite of `environment.json` per call, and no bump lost to
//!   concurrent writers (threads, or processes sharing the data directory). A read in a second
//!   already recorded writes nothing. [`environment::read_meta`] folds the record in.
//! - Frozen hooks: `/.agents` moves to `frozen/.agents` (bound read-only) with a copy of
//!   `/workspace/.agents/hooks.json`; hooks load from the snapshot; file tools refuse writes there.
//! - `--insecure-no-isolation` runs the program directly with the tree's `workspace` as cwd;
//!   sandbox paths such as `/.agents/...` do not resolve in that mode.

pub mod disk;
pub mod env_vars;
pub mod environment;
pub mod lifecycle;
pub mod network;
pub mod runner;
pub mod slots;
pub mod source;
pub mod tools;
mod uids;

pub use environment::Environments;
/// The kernel an environment's programs run on (`namespaces` or `gvisor`), by the name an
/// environment records and a config file or the API gives.
pub use hookbox_sandbox::spec::RuntimeKind;
pub use network::{EgressOperator, EgressOptions};
