//! [`Store`] for SQLite: which resource function serves each method. Each call takes owned
//! copies of its arguments to the store thread, as a read ([`SqliteStore::read`]: a row it changes is
//! rolled back and it fails, so one marked so by mistake fails its tests) or a write
//! ([`SqliteStore::with`]); what is serialised before the call is queued stays off that thread.

use async_trait::async_trait;
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialUpdate, Interaction, Step,
};
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution, TriggerUpdate};
use hookbox_protocol::webhooks::WebhookUpdate;
use serde_json::{Map, Value};

use super::{
    SqliteStore, approvals, auth_tokens, credentials, deliveries, documents, environments,
    interactions, projects, triggers, webhooks,
};
use crate::approvals::{ApprovalFilter, ApprovalRecord, Settle, Settled};
use crate::auth_tokens::AuthTokenRecord;
use crate::documents::{AGENTS, ENVIRONMENTS};
use crate::environments::{EnvironmentChange, EnvironmentRecord};
use crate::error::{Error, Result};
use crate::interactions::{InteractionFilter, NewInteraction, StatusUpdate};
use crate::page::{Page, Paged};
use crate::projects::{ApiKeyRecord, ProjectRecord, ProjectUsage};
use crate::store::Store;
use crate::triggers::{RunStart, TriggerRecord};
use crate::webhooks::{AttemptOutcome, ClaimedDelivery, DeliveryRecord, SigningKey, WebhookRecord};

#[async_trait]
impl Store for SqliteStore {
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()> {
        let (project, row) = (project.to_owned(), NewInteraction::of(interaction)?);
        self.with(move |c, _| interactions::create(c, &project, &row))
            .await
    }

    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()> {
        let (id, json) = (interaction_id.to_owned(), serde_json::to_string(step)?);
        let index = i64::try_from(index).unwrap_or(i64::MAX);
        self.with(move |c, _| interactions::append_step(c, &id, index, &json))
            .await
    }

    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()> {
        let (id, update) = (interaction_id.to_owned(), update.clone());
        self.with(move |c, _| interactions::update_status(c, &id, &update))
            .await
    }

    async fn record_interaction_hooks(
        &self,
        interaction_id: &str,
        hooks: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let (id, hooks) = (interaction_id.to_owned(), hooks.clone());
        self.with(move |c, _| interactions::record_hooks(c, &id, &hooks))
            .await
    }

    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, _| interactions::get(c, &project, &id))
            .await
    }

    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| interactions::delete(c, &project, &id))
            .await
    }

    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>> {
        let (project, filter, page) = (project.to_owned(), filter.clone(), page.clone());
        self.read(move |c, _| interactions::list(c, &project, &filter, &page))
            .await
    }

    async fn count_running_interactions(&self, project: &str) -> Result<u64> {
        let project = project.to_owned();
        self.read(move |c, _| interactions::count_running(c, &project))
            .await
    }

    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>> {
        let (reason, now) = (reason.to_owned(), now.to_owned());
        self.with(move |c, _| interactions::recover_interrupted(c, &reason, &now))
            .await
    }

    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()> {
        let (project, record) = (project.to_owned(), record.clone());
        self.with(move |c, _| approvals::create(c, &project, &record))
            .await
    }

    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>> {
        let (project, filter, page) = (project.to_owned(), filter.clone(), page.clone());
        self.read(move |c, _| approvals::list(c, &project, &filter, &page))
            .await
    }

    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled> {
        let (project, settle) = (project.to_owned(), settle.clone());
        self.with(move |c, _| approvals::settle(c, &project, &settle, None))
            .await
    }

    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled> {
        let row = NewInteraction::of(interaction)?;
        let (project, settle) = (project.to_owned(), settle.clone());
        self.with(move |c, _| approvals::settle(c, &project, &settle, Some(&row)))
            .await
    }

    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64> {
        let (project, interaction_id) = (project.to_owned(), interaction_id.to_owned());
        self.with(move |c, _| approvals::withdraw(c, &project, &interaction_id))
            .await
    }

    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()> {
        let (project, env) = (project.to_owned(), env.clone());
        self.with(move |c, _| environments::put(c, &project, &env))
            .await
    }

    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, _| documents::get(c, ENVIRONMENTS, &project, &id))
            .await
    }

    async fn list_environments(
        &self,
        project: &str,
        mode: Option<&str>,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>> {
        let (project, mode, page) = (project.to_owned(), mode.map(str::to_owned), page.clone());
        self.read(move |c, _| environments::list(c, &project, mode.as_deref(), &page))
            .await
    }

    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| documents::delete(c, ENVIRONMENTS, &project, &id))
            .await
    }

    async fn count_environments(&self, project: &str) -> Result<u64> {
        let project = project.to_owned();
        self.read(move |c, _| documents::count_in_project(c, ENVIRONMENTS.table, &project))
            .await
    }

    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>> {
        let (project, id, change) = (project.to_owned(), id.to_owned(), change.clone());
        self.with(move |c, _| environments::change(c, &project, &id, &change))
            .await
    }

    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>> {
        let page = page.clone();
        self.read(move |c, _| environments::list_all(c, &page))
            .await
    }

    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential> {
        let (project, config, now) = (project.to_owned(), config.clone(), now.to_owned());
        self.with(move |c, key| credentials::create(c, key, &project, &config, &now))
            .await
    }

    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, _| credentials::get(c, &project, &id))
            .await
    }

    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, key| credentials::secret(c, key, &project, &id))
            .await
    }

    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential> {
        let (project, id) = (project.to_owned(), id.to_owned());
        let (update, now) = (update.clone(), now.to_owned());
        self.with(move |c, key| credentials::update(c, key, &project, &id, &update, &now))
            .await
    }

    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.read(move |c, _| credentials::list(c, &project, &page))
            .await
    }

    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| credentials::delete(c, &project, &id))
            .await
    }

    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()> {
        let id = agent
            .id
            .clone()
            .ok_or_else(|| Error::not_found("agent", ""))?;
        let (project, json) = (project.to_owned(), serde_json::to_string(agent)?);
        self.with(move |c, _| documents::put(c, AGENTS, &project, &id, &json))
            .await
    }

    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, _| documents::get(c, AGENTS, &project, &id))
            .await
    }

    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.read(move |c, _| documents::list(c, AGENTS, &project, &page))
            .await
    }

    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| documents::delete(c, AGENTS, &project, &id))
            .await
    }

    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()> {
        let (project, record, signing) = (project.to_owned(), record.clone(), key.clone());
        self.with(move |c, key| webhooks::create(c, key, &project, &record, &signing))
            .await
    }

    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id, now) = (project.to_owned(), id.to_owned(), now.to_owned());
        self.read(move |c, key| webhooks::get(c, key, &project, &id, &now))
            .await
    }

    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>> {
        let (project, page, now) = (project.to_owned(), page.clone(), now.to_owned());
        self.read(move |c, key| webhooks::list(c, key, &project, &page, &now))
            .await
    }

    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        let (update, now) = (update.clone(), now.to_owned());
        self.with(move |c, key| webhooks::update(c, key, &project, &id, &update, &now))
            .await
    }

    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let (project, id, new) = (project.to_owned(), id.to_owned(), new.clone());
        let (expire, now) = (previous_expire.map(str::to_owned), now.to_owned());
        self.with(move |c, key| {
            webhooks::rotate_secret(c, key, &project, &id, new, expire.as_deref(), &now)
        })
        .await
    }

    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| webhooks::delete(c, &project, &id))
            .await
    }

    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>> {
        let (project, id, now) = (project.to_owned(), id.to_owned(), now.to_owned());
        self.read(move |c, key| webhooks::signing_keys(c, key, &project, &id, &now))
            .await
    }

    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>> {
        let (project, kind, data) = (project.to_owned(), kind.to_owned(), data.clone());
        let (only, now) = (only.map(str::to_owned), now.to_owned());
        self.with(move |c, _| {
            webhooks::enqueue_event(c, &project, &kind, &data, only.as_deref(), &now)
        })
        .await
    }

    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        self.with(move |c, _| deliveries::claim(c, now_ms, lease_until_ms, limit))
            .await
    }

    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()> {
        let (id, outcome, now) = (id.to_owned(), outcome.clone(), now.to_owned());
        self.with(move |c, key| deliveries::finish(c, key, &id, &outcome, &now))
            .await
    }

    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>> {
        let (project, webhook_id, page) = (project.to_owned(), webhook_id.to_owned(), page.clone());
        self.read(move |c, _| deliveries::list(c, &project, &webhook_id, &page))
            .await
    }

    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>> {
        self.read(move |c, _| deliveries::next_due_ms(c)).await
    }

    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()> {
        let (project, record) = (project.to_owned(), record.clone());
        self.with(move |c, _| triggers::create(c, &project, &record))
            .await
    }

    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.read(move |c, _| triggers::get(c, &project, &id)).await
    }

    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>> {
        let (project, page) = (project.to_owned(), page.clone());
        self.read(move |c, _| triggers::list(c, &project, &page))
            .await
    }

    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>> {
        let (project, id) = (project.to_owned(), id.to_owned());
        let (update, now) = (update.clone(), now.to_owned());
        self.with(move |c, _| triggers::update(c, &project, &id, &update, resume_next_ms, &now))
            .await
    }

    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool> {
        let (project, id) = (project.to_owned(), id.to_owned());
        self.with(move |c, _| triggers::delete(c, &project, &id))
            .await
    }

    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>> {
        self.read(move |c, _| triggers::due(c, now_ms, limit)).await
    }

    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart> {
        let (project, id) = (project.to_owned(), id.to_owned());
        let (scheduled, now) = (scheduled.to_owned(), now.to_owned());
        self.with(move |c, _| triggers::start_execution(c, &project, &id, claim, &scheduled, &now))
            .await
    }

    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()> {
        let (project, execution) = (project.to_owned(), execution_id.to_owned());
        let (interaction, environment) =
            (interaction_id.to_owned(), environment_id.map(str::to_owned));
        let now = now.to_owned();
        self.with(move |c, _| {
            triggers::attach_interaction(
                c,
                &project,
                &execution,
                &interaction,
                environment.as_deref(),
                &now,
            )
        })
        .await
    }

    async fn end_trigger_execution(
        &self,
        project: &str,
        execution_id: &str,
        status: ExecutionStatus,
        error: Option<&str>,
        now: &str,
    ) -> Result<bool> {
        let (project, execution) = (project.to_owned(), execution_id.to_owned());
        let (error, now) = (error.map(str::to_owned), now.to_owned());
        self.with(move |c, _| {
            triggers::end_execution(c, &project, &execution, status, error.as_deref(), &now)
        })
        .await
    }

    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<TriggerExecution>> {
        let (project, trigger_id, page) = (project.to_owned(), trigger_id.to_owned(), page.clone());
        self.read(move |c, _| triggers::list_executions(c, &project, &trigger_id, &page))
            .await
    }

    async fn create_project(&self, project: &ProjectRecord) -> Result<()> {
        let project = project.clone();
        self.with(move |c, _| projects::create(c, &project)).await
    }

    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>> {
        let name = name.to_owned();
        self.read(move |c, _| projects::get(c, &name)).await
    }

    async fn list_projects(&self) -> Result<Vec<ProjectRecord>> {
        self.read(move |c, _| projects::list(c)).await
    }

    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()> {
        let (name, quotas) = (name.to_owned(), quotas.clone());
        self.with(move |c, _| projects::set_quotas(c, &name, &quotas))
            .await
    }

    async fn project_usage(&self, name: &str) -> Result<ProjectUsage> {
        let name = name.to_owned();
        self.read(move |c, _| projects::usage(c, &name)).await
    }

    async fn delete_project(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.with(move |c, _| projects::delete(c, &name)).await
    }

    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()> {
        let (record, sha256) = (key.clone(), *sha256);
        self.with(move |c, _| projects::create_api_key(c, &record, &sha256))
            .await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>> {
        self.read(move |c, _| projects::list_api_keys(c)).await
    }

    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool> {
        let (id, now) = (id.to_owned(), now.to_owned());
        self.with(move |c, _| projects::revoke_api_key(c, &id, &now))
            .await
    }

    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>> {
        let sha256 = *sha256;
        self.read(move |c, _| projects::find_api_key(c, &sha256))
            .await
    }

    async fn has_api_keys(&self) -> Result<bool> {
        self.read(move |c, _| projects::has_api_keys(c)).await
    }

    async fn create_auth_token(&self, token: &AuthTokenRecord, sha256: &[u8; 32]) -> Result<()> {
        let (token, sha256) = (token.clone(), *sha256);
        self.with(move |c, _| auth_tokens::create(c, &token, &sha256))
            .await
    }

    async fn find_auth_token(&self, sha256: &[u8; 32]) -> Result<Option<AuthTokenRecord>> {
        let sha256 = *sha256;
        self.read(move |c, _| auth_tokens::find(c, &sha256)).await
    }

    async fn delete_auth_token(
        &self,
        project: &str,
        interaction_id: &str,
        sha256: &[u8; 32],
    ) -> Result<Option<AuthTokenRecord>> {
        let (project, interaction_id, sha256) =
            (project.to_owned(), interaction_id.to_owned(), *sha256);
        self.with(move |c, _| auth_tokens::delete(c, &project, &interaction_id, &sha256))
            .await
    }

    async fn purge_expired_auth_tokens(&self, cutoff: &str) -> Result<u64> {
        let cutoff = cutoff.to_owned();
        self.with(move |c, _| auth_tokens::purge_expired(c, &cutoff))
            .await
    }
}
