//! The storage seam ([`Store`]): every method the rest of hookbox persists through, grouped by
//! resource (interactions and their steps, approvals, environments, credentials, agents,
//! webhooks and their deliveries, triggers and their executions, projects and their keys). It
//! holds no logic: each backend's `store.rs` says which function of its resource files serves
//! each method.

use async_trait::async_trait;
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialUpdate, Interaction, Step,
};
use serde_json::{Map, Value};

use crate::approvals::{ApprovalFilter, ApprovalRecord, Settle, Settled};
use crate::auth_tokens::AuthTokenRecord;
use crate::environments::{EnvironmentChange, EnvironmentRecord};
use crate::error::Result;
use crate::interactions::{InteractionFilter, StatusUpdate};
use crate::page::{Page, Paged};
use crate::projects::{ApiKeyRecord, ProjectRecord, ProjectUsage};
use crate::triggers::{RunStart, TriggerRecord};
use crate::webhooks::{AttemptOutcome, ClaimedDelivery, DeliveryRecord, SigningKey, WebhookRecord};

/// The storage seam. Every method is durable when it returns `Ok`: a crash right after cannot
/// lose what it wrote (see [`crate::sqlite`] for what that means per backend).
///
/// Every resource belongs to one project, and every method that names a resource takes the
/// project it is asked from: a resource of another project is [`Error::NotFound`](crate::Error::NotFound) / `None` /
/// absent from lists, exactly as if it did not exist. (Steps and status updates are written only
/// by the run that owns the interaction, so they go by its globally unique id.)
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Inserts a new interaction (its `steps` are inserted too) into `project`.
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()>;
    /// Appends one step at `index` (the step's position in `steps`).
    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()>;
    /// Sets status, usage, errors and `updated`.
    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()>;
    /// Records the trace of interaction hooks that ran (the interaction's `hooks`): each
    /// top-level key of `hooks` (`pre`, `post`) replaces the one stored, the others stay.
    async fn record_interaction_hooks(
        &self,
        interaction_id: &str,
        hooks: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()>;
    /// The interaction with all its steps.
    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>>;
    /// Deletes the interaction, its steps and its approval records; `false` if it did not
    /// exist.
    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool>;
    /// Interactions of `project` matching `filter`, newest first, without their steps.
    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>>;
    /// Interactions of `project` that are `queued` or `in_progress`.
    async fn count_running_interactions(&self, project: &str) -> Result<u64>;
    /// Marks every `queued`/`in_progress` interaction `failed` with `reason` (run at start-up:
    /// nothing can still be running them). Returns their ids.
    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>>;

    /// Records a call paused for a reviewer (state `pending`), written by the run that paused
    /// it. [`Error::AlreadyExists`](crate::Error::AlreadyExists) when its interaction already has a record of that id.
    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()>;
    /// Approval records of `project` matching `filter`, oldest first.
    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>>;
    /// Settles records of one interaction, all or none, each by a conditional update from
    /// `pending`: [`Settled::Refused`] (and nothing changed) when any of them is not pending or
    /// does not exist. Whatever races it (another settlement, on any replica), one wins.
    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled>;
    /// [`Store::create_interaction`] and [`Store::settle_approvals`] in one transaction: the
    /// interaction (the continuation that answers the records) is stored only if the settlement
    /// won, so no stored continuation claims a settlement it lost, and none is lost after a win.
    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled>;
    /// Deletes the `pending` records of an interaction whose run ended without waiting for
    /// them (failed, cancelled): nobody can answer them any more. How many.
    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64>;

    /// Inserts or replaces an environment of `project`.
    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()>;
    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>>;
    /// A page of `project`'s environments; with `mode`, only those of that mode.
    async fn list_environments(
        &self,
        project: &str,
        mode: Option<&str>,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>>;
    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool>;
    async fn count_environments(&self, project: &str) -> Result<u64>;
    /// Applies `change` atomically; the record afterwards (changed or not), `None` if there is
    /// none.
    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>>;
    /// Environments of every project with their project, in storage order (for the expiry
    /// sweeper).
    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>>;

    /// Stores a new credential, its secrets encrypted. [`Error::AlreadyExists`](crate::Error::AlreadyExists) on an id taken
    /// in `project` (other projects may use the same id).
    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential>;
    /// Metadata only.
    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>>;
    /// The decrypted configuration, for the egress proxy. Never return this to a client.
    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>>;
    /// Applies a partial update. [`Error::NotFound`](crate::Error::NotFound), [`Error::CredentialTypeMismatch`](crate::Error::CredentialTypeMismatch).
    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential>;
    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>>;
    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool>;

    /// Inserts or replaces an agent (its `id` must be set) of `project`.
    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()>;
    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>>;
    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>>;
    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool>;

    /// Stores a new webhook of `project` with its first signing secret (sealed).
    /// [`Error::AlreadyExists`](crate::Error::AlreadyExists) on a taken id.
    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()>;
    /// The webhook, its live secrets shown truncated.
    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>>;
    /// Applies a (validated) partial update; the record after it, `None` if there is none.
    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::webhooks::WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    /// Makes `new` the current secret; the previous ones expire at `previous_expire` (`None`:
    /// now). The record after it, `None` if there is none.
    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>>;
    /// Deletes the webhook and every delivery of it; `false` if it did not exist.
    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool>;
    /// The secrets a delivery is signed with at `now`, in full. Only for the deliverer: never
    /// return them to a client.
    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>>;
    /// Writes one delivery of event `kind` (with `data`) for every webhook of `project` that
    /// wants it, or only for webhook `only` (a ping); their ids. Interaction events are written
    /// by [`Store::update_status`] and the recoveries themselves, in their transaction.
    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>>;
    /// Claims up to `limit` pending deliveries due at `now_ms` (of enabled webhooks; pings
    /// always) until `lease_until_ms`: another claim skips them until then, so a claimer that
    /// dies only delays them.
    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>>;
    /// Records how an attempt of delivery `id` ended, and counts it for its webhook.
    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()>;
    /// Deliveries of one webhook, newest first.
    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>>;
    /// When the next pending delivery of an enabled webhook falls due (unix ms), if any.
    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>>;

    /// Stores a new trigger of `project`. [`Error::AlreadyExists`](crate::Error::AlreadyExists) on a taken id.
    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()>;
    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>>;
    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>>;
    /// Applies a (validated) update; `resume_next_ms` is the next run if it resumes. The record
    /// after it, `None` if there is none.
    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &hookbox_protocol::triggers::TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>>;
    /// Deletes the trigger and its executions; `false` if it did not exist.
    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool>;
    /// Active triggers of every project whose next run is due at `now_ms`, oldest due first.
    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>>;
    /// Starts a run of trigger `id`, recorded as an execution scheduled at `scheduled`.
    /// `claim`: for a scheduled run, the `next_run_ms` the caller read and the one after it;
    /// the run is [`RunStart::Lost`] unless the stored one is still the first (another replica
    /// took it), and the trigger then moves on to the second. `None`: a manual run (`run`).
    /// Recorded `skipped` while an earlier execution of the trigger still runs.
    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart>;
    /// Links a started execution to the interaction it created (and ends it at once if that
    /// interaction already ended).
    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()>;
    /// Ends a running execution (a time-out, an interaction that could not be created) and
    /// counts it for its trigger; `false` if it had ended already.
    async fn end_trigger_execution(
        &self,
        project: &str,
        execution_id: &str,
        status: hookbox_protocol::triggers::ExecutionStatus,
        error: Option<&str>,
        now: &str,
    ) -> Result<bool>;
    /// Executions of one trigger, newest first.
    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<hookbox_protocol::triggers::TriggerExecution>>;

    /// Creates a managed project. [`Error::AlreadyExists`](crate::Error::AlreadyExists) on a taken name.
    async fn create_project(&self, project: &ProjectRecord) -> Result<()>;
    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>>;
    async fn list_projects(&self) -> Result<Vec<ProjectRecord>>;
    /// Replaces the project's quota overrides. [`Error::NotFound`](crate::Error::NotFound).
    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()>;
    /// What the project still holds.
    async fn project_usage(&self, name: &str) -> Result<ProjectUsage>;
    /// Removes a managed project and its keys; `false` if there was none. The caller checks
    /// [`Store::project_usage`] first.
    async fn delete_project(&self, name: &str) -> Result<bool>;

    /// Stores a managed key by the SHA-256 of its value. [`Error::NotFound`](crate::Error::NotFound) for an unknown
    /// project.
    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()>;
    /// Every managed key (revoked ones included), oldest first.
    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>>;
    /// Revokes a key by id; `false` if there was no such unrevoked key.
    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool>;
    /// The unrevoked key with this SHA-256, if any.
    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>>;
    /// Whether any managed key was ever created and not removed with its project, revoked ones
    /// included: then the server is not in local mode (revoking the last key must not turn
    /// every request, the revoked key's too, into a keyless local-mode request).
    async fn has_api_keys(&self) -> Result<bool>;

    /// Stores an ephemeral auth token by the SHA-256 of its value (the value is never stored).
    async fn create_auth_token(&self, token: &AuthTokenRecord, sha256: &[u8; 32]) -> Result<()>;
    /// The token with this SHA-256, expired or not (the caller compares `expires_at`).
    async fn find_auth_token(&self, sha256: &[u8; 32]) -> Result<Option<AuthTokenRecord>>;
    /// Deletes the token with this SHA-256 if it belongs to `interaction_id` of `project`;
    /// the deleted record, `None` if there was none.
    async fn delete_auth_token(
        &self,
        project: &str,
        interaction_id: &str,
        sha256: &[u8; 32],
    ) -> Result<Option<AuthTokenRecord>>;
    /// Deletes every token whose `expires_at` lies strictly before `cutoff` (RFC 3339 UTC, as
    /// [`crate::time`] writes; the caller passes a grace period before now, so only tokens
    /// that authenticate nothing any more are deleted); how many it deleted.
    async fn purge_expired_auth_tokens(&self, cutoff: &str) -> Result<u64>;
}
