//! [`Store`] for PostgreSQL: which resource function serves each method, with a pooled
//! connection, the store's key where secrets are sealed, and this replica's cluster state where
//! writes of interactions are fenced and announced.

use async_trait::async_trait;
use hookbox_protocol::api::{
    Agent, Credential, CredentialConfig, CredentialUpdate, Interaction, Step,
};
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution, TriggerUpdate};
use hookbox_protocol::webhooks::WebhookUpdate;
use serde_json::{Map, Value};

use super::{
    PostgresStore, approvals, auth_tokens, credentials, deliveries, documents, environments,
    interactions, projects, triggers, webhooks,
};
use crate::approvals::{ApprovalFilter, ApprovalRecord, Settle, Settled};
use crate::auth_tokens::AuthTokenRecord;
use crate::documents::{AGENTS, ENVIRONMENTS, TRIGGERS};
use crate::environments::{EnvironmentChange, EnvironmentRecord};
use crate::error::{Error, Result};
use crate::interactions::{InteractionFilter, NewInteraction, StatusUpdate};
use crate::page::{Page, Paged};
use crate::projects::{ApiKeyRecord, ProjectRecord, ProjectUsage};
use crate::store::Store;
use crate::triggers::{RunStart, TriggerRecord};
use crate::webhooks::{AttemptOutcome, ClaimedDelivery, DeliveryRecord, SigningKey, WebhookRecord};

#[async_trait]
impl Store for PostgresStore {
    async fn create_interaction(&self, project: &str, interaction: &Interaction) -> Result<()> {
        let row = NewInteraction::of(interaction)?;
        let cluster = self.cluster.as_deref();
        interactions::create(&mut self.client().await?, cluster, project, &row).await
    }

    async fn append_step(&self, interaction_id: &str, index: usize, step: &Step) -> Result<()> {
        let index = i64::try_from(index).unwrap_or(i64::MAX);
        let cluster = self.cluster.as_deref();
        interactions::append_step(
            &mut self.client().await?,
            cluster,
            interaction_id,
            index,
            step,
        )
        .await
    }

    async fn record_interaction_hooks(
        &self,
        interaction_id: &str,
        hooks: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        let cluster = self.cluster.as_deref();
        interactions::record_hooks(&mut self.client().await?, cluster, interaction_id, hooks).await
    }

    async fn update_status(&self, interaction_id: &str, update: &StatusUpdate) -> Result<()> {
        let cluster = self.cluster.as_deref();
        interactions::update_status(&mut self.client().await?, cluster, interaction_id, update)
            .await
    }

    async fn get_interaction(&self, project: &str, id: &str) -> Result<Option<Interaction>> {
        interactions::get(&self.client().await?, project, id).await
    }

    async fn delete_interaction(&self, project: &str, id: &str) -> Result<bool> {
        interactions::delete(&mut self.client().await?, project, id).await
    }

    async fn list_interactions(
        &self,
        project: &str,
        filter: &InteractionFilter,
        page: &Page,
    ) -> Result<Paged<Interaction>> {
        interactions::list(&self.client().await?, project, filter, page).await
    }

    async fn count_running_interactions(&self, project: &str) -> Result<u64> {
        interactions::count_running(&self.client().await?, project).await
    }

    async fn recover_interrupted(&self, reason: &str, now: &str) -> Result<Vec<String>> {
        let cluster = self.cluster.as_deref();
        interactions::recover_interrupted(&mut self.client().await?, cluster, reason, now).await
    }

    async fn create_approval(&self, project: &str, record: &ApprovalRecord) -> Result<()> {
        approvals::create(&self.client().await?, project, record).await
    }

    async fn list_approvals(
        &self,
        project: &str,
        filter: &ApprovalFilter,
        page: &Page,
    ) -> Result<Paged<ApprovalRecord>> {
        approvals::list(&self.client().await?, project, filter, page).await
    }

    async fn settle_approvals(&self, project: &str, settle: &Settle) -> Result<Settled> {
        let cluster = self.cluster.as_deref();
        approvals::settle(&mut self.client().await?, cluster, project, settle, None).await
    }

    async fn create_interaction_settling(
        &self,
        project: &str,
        interaction: &Interaction,
        settle: &Settle,
    ) -> Result<Settled> {
        let row = NewInteraction::of(interaction)?;
        let cluster = self.cluster.as_deref();
        approvals::settle(
            &mut self.client().await?,
            cluster,
            project,
            settle,
            Some(&row),
        )
        .await
    }

    async fn withdraw_approvals(&self, project: &str, interaction_id: &str) -> Result<u64> {
        approvals::withdraw(&self.client().await?, project, interaction_id).await
    }

    async fn put_environment(&self, project: &str, env: &EnvironmentRecord) -> Result<()> {
        environments::put(&self.client().await?, project, env).await
    }

    async fn get_environment(&self, project: &str, id: &str) -> Result<Option<EnvironmentRecord>> {
        documents::get(&self.client().await?, ENVIRONMENTS, project, id, false).await
    }

    async fn list_environments(
        &self,
        project: &str,
        mode: Option<&str>,
        page: &Page,
    ) -> Result<Paged<EnvironmentRecord>> {
        environments::list(&self.client().await?, project, mode, page).await
    }

    async fn delete_environment(&self, project: &str, id: &str) -> Result<bool> {
        documents::delete(&self.client().await?, ENVIRONMENTS, project, id).await
    }

    async fn count_environments(&self, project: &str) -> Result<u64> {
        documents::count_in_project(&self.client().await?, ENVIRONMENTS.table, project).await
    }

    async fn change_environment(
        &self,
        project: &str,
        id: &str,
        change: &EnvironmentChange,
    ) -> Result<Option<EnvironmentRecord>> {
        environments::change(&mut self.client().await?, project, id, change).await
    }

    async fn list_all_environments(
        &self,
        page: &Page,
    ) -> Result<Paged<(String, EnvironmentRecord)>> {
        environments::list_all(&self.client().await?, page).await
    }

    async fn create_credential(
        &self,
        project: &str,
        config: &CredentialConfig,
        now: &str,
    ) -> Result<Credential> {
        credentials::create(&self.client().await?, &self.key, project, config, now).await
    }

    async fn get_credential(&self, project: &str, id: &str) -> Result<Option<Credential>> {
        credentials::get(&self.client().await?, project, id).await
    }

    async fn credential_secret(&self, project: &str, id: &str) -> Result<Option<CredentialConfig>> {
        credentials::secret(&self.client().await?, &self.key, project, id, false).await
    }

    async fn update_credential(
        &self,
        project: &str,
        id: &str,
        update: &CredentialUpdate,
        now: &str,
    ) -> Result<Credential> {
        let mut client = self.client().await?;
        credentials::update(&mut client, &self.key, project, id, update, now).await
    }

    async fn list_credentials(&self, project: &str, page: &Page) -> Result<Paged<Credential>> {
        credentials::list(&self.client().await?, project, page).await
    }

    async fn delete_credential(&self, project: &str, id: &str) -> Result<bool> {
        credentials::delete(&self.client().await?, project, id).await
    }

    async fn put_agent(&self, project: &str, agent: &Agent) -> Result<()> {
        let id = agent
            .id
            .as_deref()
            .ok_or_else(|| Error::not_found("agent", ""))?;
        let json = serde_json::to_string(agent)?;
        documents::put(&self.client().await?, AGENTS, project, id, &json).await
    }

    async fn get_agent(&self, project: &str, id: &str) -> Result<Option<Agent>> {
        documents::get(&self.client().await?, AGENTS, project, id, false).await
    }

    async fn list_agents(&self, project: &str, page: &Page) -> Result<Paged<Agent>> {
        documents::list(&self.client().await?, AGENTS, project, page).await
    }

    async fn delete_agent(&self, project: &str, id: &str) -> Result<bool> {
        documents::delete(&self.client().await?, AGENTS, project, id).await
    }

    async fn create_webhook(
        &self,
        project: &str,
        record: &WebhookRecord,
        key: &SigningKey,
    ) -> Result<()> {
        webhooks::create(&self.client().await?, &self.key, project, record, key).await
    }

    async fn get_webhook(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        webhooks::get(&self.client().await?, &self.key, project, id, now).await
    }

    async fn list_webhooks(
        &self,
        project: &str,
        page: &Page,
        now: &str,
    ) -> Result<Paged<WebhookRecord>> {
        webhooks::list(&self.client().await?, &self.key, project, page, now).await
    }

    async fn update_webhook(
        &self,
        project: &str,
        id: &str,
        update: &WebhookUpdate,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let mut client = self.client().await?;
        webhooks::update(&mut client, &self.key, project, id, update, now).await
    }

    async fn rotate_webhook_secret(
        &self,
        project: &str,
        id: &str,
        new: &SigningKey,
        previous_expire: Option<&str>,
        now: &str,
    ) -> Result<Option<WebhookRecord>> {
        let mut client = self.client().await?;
        webhooks::rotate_secret(
            &mut client,
            &self.key,
            project,
            id,
            new,
            previous_expire,
            now,
        )
        .await
    }

    async fn delete_webhook(&self, project: &str, id: &str) -> Result<bool> {
        webhooks::delete(&mut self.client().await?, project, id).await
    }

    async fn webhook_signing_keys(
        &self,
        project: &str,
        id: &str,
        now: &str,
    ) -> Result<Option<Vec<SigningKey>>> {
        webhooks::signing_keys(&self.client().await?, &self.key, project, id, now).await
    }

    async fn enqueue_webhook_event(
        &self,
        project: &str,
        kind: &str,
        data: &Value,
        only: Option<&str>,
        now: &str,
    ) -> Result<Vec<String>> {
        let mut client = self.client().await?;
        webhooks::enqueue_event(&mut client, project, kind, data, only, now).await
    }

    async fn claim_webhook_deliveries(
        &self,
        now_ms: i64,
        lease_until_ms: i64,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        deliveries::claim(&self.client().await?, now_ms, lease_until_ms, limit).await
    }

    async fn finish_webhook_delivery(
        &self,
        id: &str,
        outcome: &AttemptOutcome,
        now: &str,
    ) -> Result<()> {
        deliveries::finish(&mut self.client().await?, &self.key, id, outcome, now).await
    }

    async fn list_webhook_deliveries(
        &self,
        project: &str,
        webhook_id: &str,
        page: &Page,
    ) -> Result<Paged<DeliveryRecord>> {
        deliveries::list(&self.client().await?, project, webhook_id, page).await
    }

    async fn next_webhook_delivery_ms(&self) -> Result<Option<i64>> {
        deliveries::next_due_ms(&self.client().await?).await
    }

    async fn create_trigger(&self, project: &str, record: &TriggerRecord) -> Result<()> {
        triggers::create(&self.client().await?, project, record).await
    }

    async fn get_trigger(&self, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
        documents::get(&self.client().await?, TRIGGERS, project, id, false).await
    }

    async fn list_triggers(&self, project: &str, page: &Page) -> Result<Paged<TriggerRecord>> {
        documents::list(&self.client().await?, TRIGGERS, project, page).await
    }

    async fn update_trigger(
        &self,
        project: &str,
        id: &str,
        update: &TriggerUpdate,
        resume_next_ms: Option<i64>,
        now: &str,
    ) -> Result<Option<TriggerRecord>> {
        let mut client = self.client().await?;
        triggers::update(&mut client, project, id, update, resume_next_ms, now).await
    }

    async fn delete_trigger(&self, project: &str, id: &str) -> Result<bool> {
        triggers::delete(&mut self.client().await?, project, id).await
    }

    async fn due_triggers(&self, now_ms: i64, limit: u32) -> Result<Vec<(String, TriggerRecord)>> {
        triggers::due(&self.client().await?, now_ms, limit).await
    }

    async fn start_trigger_execution(
        &self,
        project: &str,
        id: &str,
        claim: Option<(i64, Option<i64>)>,
        scheduled: &str,
        now: &str,
    ) -> Result<RunStart> {
        let mut client = self.client().await?;
        triggers::start_execution(&mut client, project, id, claim, scheduled, now).await
    }

    async fn attach_trigger_interaction(
        &self,
        project: &str,
        execution_id: &str,
        interaction_id: &str,
        environment_id: Option<&str>,
        now: &str,
    ) -> Result<()> {
        let mut client = self.client().await?;
        triggers::attach_interaction(
            &mut client,
            project,
            execution_id,
            interaction_id,
            environment_id,
            now,
        )
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
        let mut client = self.client().await?;
        triggers::end_execution(&mut client, project, execution_id, status, error, now).await
    }

    async fn list_trigger_executions(
        &self,
        project: &str,
        trigger_id: &str,
        page: &Page,
    ) -> Result<Paged<TriggerExecution>> {
        triggers::list_executions(&self.client().await?, project, trigger_id, page).await
    }

    async fn create_project(&self, project: &ProjectRecord) -> Result<()> {
        projects::create(&self.client().await?, project).await
    }

    async fn get_project(&self, name: &str) -> Result<Option<ProjectRecord>> {
        projects::get(&self.client().await?, name).await
    }

    async fn list_projects(&self) -> Result<Vec<ProjectRecord>> {
        projects::list(&self.client().await?).await
    }

    async fn set_project_quotas(&self, name: &str, quotas: &Map<String, Value>) -> Result<()> {
        projects::set_quotas(&self.client().await?, name, quotas).await
    }

    async fn project_usage(&self, name: &str) -> Result<ProjectUsage> {
        projects::usage(&self.client().await?, name).await
    }

    async fn delete_project(&self, name: &str) -> Result<bool> {
        projects::delete(&self.client().await?, name).await
    }

    async fn create_api_key(&self, key: &ApiKeyRecord, sha256: &[u8; 32]) -> Result<()> {
        projects::create_api_key(&mut self.client().await?, key, sha256).await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyRecord>> {
        projects::list_api_keys(&self.client().await?).await
    }

    async fn revoke_api_key(&self, id: &str, now: &str) -> Result<bool> {
        projects::revoke_api_key(&self.client().await?, id, now).await
    }

    async fn find_api_key(&self, sha256: &[u8; 32]) -> Result<Option<ApiKeyRecord>> {
        projects::find_api_key(&self.client().await?, sha256).await
    }

    async fn has_api_keys(&self) -> Result<bool> {
        projects::has_api_keys(&self.client().await?).await
    }

    async fn create_auth_token(&self, token: &AuthTokenRecord, sha256: &[u8; 32]) -> Result<()> {
        let mut client = self.client().await?;
        auth_tokens::create(&mut client, token, sha256).await
    }

    async fn find_auth_token(&self, sha256: &[u8; 32]) -> Result<Option<AuthTokenRecord>> {
        auth_tokens::find(&self.client().await?, sha256).await
    }

    async fn delete_auth_token(
        &self,
        project: &str,
        interaction_id: &str,
        sha256: &[u8; 32],
    ) -> Result<Option<AuthTokenRecord>> {
        auth_tokens::delete(&self.client().await?, project, interaction_id, sha256).await
    }

    async fn purge_expired_auth_tokens(&self, cutoff: &str) -> Result<u64> {
        auth_tokens::purge_expired(&self.client().await?, cutoff).await
    }
}
