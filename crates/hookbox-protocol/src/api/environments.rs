//! Environments: sources, network allowlists, variables, the create request, the object and
//! its files; int64 fields as decimal strings ([`int64_string`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content::Object;

/// int64 fields (`file_count`, `size_bytes`) as the API's JSON mapping writes them: a decimal
/// string, as in proto3 JSON. The Java SDK declares them `String` and refuses a number ("Cannot
/// deserialize value of type `java.lang.String` from Integer value"); the Python SDK takes
/// either. Reading takes a number too, so records stored before this are still read.
pub mod int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire {
        Number(u64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(value: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(n) => s.collect_str(n),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match Option::<Wire>::deserialize(d)? {
            None => Ok(None),
            Some(Wire::Number(n)) => Ok(Some(n)),
            Some(Wire::Text(t)) => t
                .parse()
                .map(Some)
                .map_err(|_| serde::de::Error::custom(format!("not an int64: {t:?}"))),
        }
    }
}

/// A source placed into an environment (spec §5.2). Every field is optional on the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// `inline`, `gcs`, `repository`, `skill_registry` (open; fixtures also use `INLINE`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Sandbox path; relative targets resolve against `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// E.g. `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// `gs://…` or a repository URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

/// One `network.allowlist` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllowlistEntry {
    pub domain: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// `{header: value}` or a list of such maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<Value>,
}

/// `allowlist`: `"disabled"` or a list of entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Allowlist {
    Mode(String),
    Entries(Vec<AllowlistEntry>),
}

/// `network`: the string `"disabled"` or `{allowlist}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Network {
    Mode(String),
    Rules { allowlist: Allowlist },
}

/// One value of the embedded environment's `env` map.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvValue {
    Plain(String),
    Ref {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        credential: Option<String>,
    },
}

/// The environment embedded in a create-interaction request (spec §5.2).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentSpec {
    /// Always `remote` from the SDK; curl may leave it out.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Map<String, Value>>,
    /// Update this existing environment instead of creating one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    /// [`EnvironmentMode`] (SDK 3.5.0+): `on_demand` or `self_hosted` (open enum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Customer-defined JSON kept with the environment (SDK 3.5.0+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_config: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Object,
}

/// `environment` in a create request: an existing id or an embedded spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvironmentRef {
    Id(String),
    Spec(Box<EnvironmentSpec>),
}

/// `POST /environments` body (spec §5.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CreateEnvironmentRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// `environments/{id}` or `{id}`: fork that environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_environment: Option<String>,
    /// [`EnvironmentMode`] (SDK 3.5.0+); `on_demand` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Customer-defined JSON kept with the environment and returned (SDK 3.5.0+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_config: Option<Map<String, Value>>,
    /// Added to the system instruction of every interaction run in the environment (SDK 3.5.0+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<String>,
    #[serde(flatten)]
    pub extra: Object,
}

/// The compute lifecycle mode of an environment (SDK 3.5.0+, an open enum on the wire).
#[derive(Debug, Clone, Copy)]
pub struct EnvironmentMode;

impl EnvironmentMode {
    /// The default: hookbox materialises the environment and runs its sandbox itself.
    pub const ON_DEMAND: &'static str = "on_demand";
    /// A remote runner polls for work. hookbox has no remote runners yet, so it refuses it.
    pub const SELF_HOSTED: &'static str = "self_hosted";
}

/// Environment status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentStatus {
    Active,
    Expired,
}

/// The Environment resource (spec §5.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EnvironmentStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accessed: Option<String>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_count: Option<u64>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    /// [`EnvironmentMode`] (SDK 3.5.0+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_config: Option<Map<String, Value>>,
    /// Not in the SDK's `Environment` type (it keeps it as an extra field); returned so a
    /// client can read back what its interactions are told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_instruction: Option<String>,
    /// The self-hosted runner's secret, in the create response only. hookbox refuses
    /// `self_hosted`, so it never sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_key: Option<String>,
}

/// `GET /environments` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListEnvironmentsResponse {
    pub environments: Vec<Environment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}

/// `file` or `directory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileType {
    File,
    Directory,
}

/// One entry of an environment file listing (spec §5.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentFile {
    /// Base name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Path from the sandbox root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FileType>,
    /// An int64, so a decimal string on the wire ([`int64_string`]).
    #[serde(
        default,
        with = "int64_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
}

/// `GET /environments/{env}/files/{path}` response, and the final upload reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListFilesResponse {
    pub files: Vec<EnvironmentFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page_token: Option<String>,
}
