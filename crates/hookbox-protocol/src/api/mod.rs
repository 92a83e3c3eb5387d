//! Wire types of the Interactions API as the `google-genai` SDK (3.3.0+) speaks it: interactions and
//! their steps, content, streamed events, environments, environment files, credentials, agents and
//! the Google-RPC error body. `shared/spec/interactions-api.md` is the authority for every name.
//!
//! Every SDK model accepts extra fields and every `type` union is open, so these types keep what
//! they do not know: unknown step, content and delta types land in an `Other(Value)` variant, and
//! request objects carry an `extra` map. This module is serde-only: no I/O, no validation beyond
//! what decoding does; the server decides what a request means.
//!
//! One file per part of the API, every type re-exported here (`hookbox_protocol::api::Step`):
//! `content` (content items, media, [`Object`]), `steps` (an interaction's history and
//! [`output_text`]), `interactions` (the object, its input, the create request), `stream` (SSE
//! events), `live` (the live WebSocket's client events), `environments` (sources, network, files), `credentials`, `agents` and `errors` (the
//! Google-RPC error body). None of them uses this module.

mod agents;
mod content;
mod credentials;
mod environments;
mod errors;
mod interactions;
mod live;
mod steps;
mod stream;

pub use agents::{Agent, ListAgentsResponse};
pub use content::{Content, Media, Object};
pub use credentials::{
    Credential, CredentialConfig, CredentialStatus, CredentialType, CredentialUpdate,
    InjectionLocation, InjectionLocations, ListCredentialsResponse, Secret,
};
pub use environments::{
    Allowlist, AllowlistEntry, CreateEnvironmentRequest, EnvValue, Environment, EnvironmentFile,
    EnvironmentMode, EnvironmentRef, EnvironmentSpec, EnvironmentStatus, FileType,
    ListEnvironmentsResponse, ListFilesResponse, Network, Source, int64_string,
};
pub use errors::{ErrorBody, RpcStatus};
pub use interactions::{
    AgentConfig, CreateInteractionRequest, Input, Interaction, InteractionError, InteractionStatus,
    Usage,
};
pub use live::{ConnectEvent, CreateEvent, InputEvent, LiveStatus, client_event};
pub use steps::{CodeExecutionArguments, Step, output_text};
pub use stream::{Delta, StreamError, StreamEvent};

#[cfg(test)]
mod captured;
#[cfg(test)]
mod tests;
