//! hookbox-egress: the only way out of an environment, and the path every HTTP hook takes.
//!
//! An environment's network namespace has loopback only; its programs reach the outside solely
//! through [`EgressProxy`], served on a listener inside that namespace ([`netns`]). Every
//! connection, whether from the sandbox or from an http hook ([`EgressPoster`]), goes through
//! one [`Egress`]: the `network` policy ([`policy`]), the always-on SSRF defences ([`ssrf`]),
//! resolve-once-dial-the-checked-address, verified upstream TLS, and header/credential injection
//! ([`inject`], [`credentials`]) with TLS interception by a per-environment CA ([`tls`]). What an
//! upstream echoes of an injected value is masked before the sandbox reads it ([`scrub`]).
//!
//! This crate must not create sandboxes or processes (hookbox-environments does) nor store
//! environments; it is handed a policy and a listener.

pub mod audit;
pub mod credentials;
mod egress;
pub mod env_vars;
pub mod inject;
mod local;
pub mod netns;
pub mod policy;
mod poster;
mod proxy;
mod relay;
pub mod scrub;
pub mod sni;
pub mod ssrf;
pub mod tls;

pub use egress::{
    Denial, DenyRule, Egress, EgressConfig, EgressError, Limits, ResolvePin, ResolvePinError,
    Resolver, StaticResolver, SystemResolver, Target,
};
pub use local::{LOCAL_PROXY_USER, LocalEndpoint};
pub use poster::EgressPoster;
pub use proxy::{EgressProxy, ProxyBody, RULE_HEADER};
