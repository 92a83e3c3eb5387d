//! Interactions and their steps in PostgreSQL. Among replicas, a write of an interaction is
//! fenced by its environment's lease and announced to the others ([`super::replica`]); a change
//! of status is written with what it causes, in its transaction: the webhook event and the end
//! of the trigger executions that created the interaction ([`status_changed`]).

use deadpool_postgres::{GenericClient, Object, Transaction};
use hookbox_protocol::api::{Interaction, InteractionStatus, Step};

use super::documents::{one, paged};
use super::replica::{self, ClusterState};
use super::{triggers, webhooks};
use crate::error::{Error, Result, inserted};
use crate::interactions::{self, InteractionFilter, NewInteraction, StatusUpdate};
use crate::page::{Page, Paged};
use crate::row::Columns;

/// The condition of an interaction that something may still be running.
pub(super) const ACTIVE: &str = "status IN ('queued', 'in_progress')";

/// An interaction's replica has stopped heartbeating (or it never had one).
const DEAD_REPLICA: &str =
    "replica IS NULL OR replica NOT IN (SELECT id FROM replicas WHERE expires_at > now())";

/// Inserts `row` and its steps in `tx` (and notifies streams); [`Error::AlreadyExists`] on a
/// taken id.
pub(super) async fn insert(
    tx: &Transaction<'_>,
    cluster: Option<&ClusterState>,
    project: &str,
    row: &NewInteraction,
) -> Result<()> {
    let body = &row.body;
    let n = tx
        .execute(
            "INSERT INTO interactions (id, status, agent, environment_id, previous_interaction_id, created, updated, usage_json, errors_json, body_json, project, replica)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING",
            &[
                &body.id,
                &body.status.as_str(),
                &body.agent,
                &body.environment_id,
                &body.previous_interaction_id,
                &row.created(),
                &row.updated(),
                &row.usage,
                &row.errors,
                &row.body_json,
                &project,
                &cluster.map(|c| c.replica.id.as_str()),
            ],
        )
        .await?;
    inserted(n > 0, "interaction", &body.id)?;
    for (idx, step) in row.steps.iter().enumerate() {
        tx.execute(
            "INSERT INTO steps (interaction_id, idx, step_json) VALUES ($1, $2, $3)",
            &[&body.id, &(idx as i64), step],
        )
        .await?;
    }
    replica::notify(cluster, tx, &body.id).await
}

pub(super) async fn create(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    project: &str,
    row: &NewInteraction,
) -> Result<()> {
    let tx = client.transaction().await?;
    insert(&tx, cluster, project, row).await?;
    tx.commit().await?;
    replica::remember_environment(cluster, &row.body);
    Ok(())
}

pub(super) async fn append_step(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    id: &str,
    index: i64,
    step: &Step,
) -> Result<()> {
    let json = serde_json::to_string(step)?;
    let tx = client.transaction().await?;
    replica::check_fence(cluster, &tx, id).await?;
    // The step goes in only if its interaction exists.
    let n = tx
        .execute(
            "INSERT INTO steps (interaction_id, idx, step_json)
             SELECT id, $2, $3 FROM interactions WHERE id = $1
             ON CONFLICT (interaction_id, idx) DO UPDATE SET step_json = excluded.step_json",
            &[&id, &index, &json],
        )
        .await?;
    if n == 0 {
        return Err(Error::not_found("interaction", id));
    }
    replica::notify(cluster, &tx, id).await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn update_status(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    id: &str,
    update: &StatusUpdate,
) -> Result<()> {
    let (usage, errors) = update.columns()?;
    let tx = client.transaction().await?;
    replica::check_fence(cluster, &tx, id).await?;
    let Some((old, project, environment)) = one(
        &tx,
        "SELECT status, project, environment_id FROM interactions WHERE id = $1 FOR UPDATE",
        &[&id],
        |r| Ok((r.text(0)?, r.text(1)?, r.opt_text(2)?)),
    )
    .await?
    else {
        return Err(Error::not_found("interaction", id));
    };
    tx.execute(
        "UPDATE interactions SET status = $2, usage_json = COALESCE($3, usage_json), errors_json = $4, updated = $5 WHERE id = $1",
        &[&id, &update.status.as_str(), &usage, &errors, &update.updated],
    )
    .await?;
    status_changed(
        &tx,
        (id, &project, environment.as_deref()),
        InteractionStatus::parse(&old),
        update.status,
        &update.updated,
    )
    .await?;
    replica::notify(cluster, &tx, id).await?;
    tx.commit().await?;
    if !update.status.is_running() {
        replica::forget_environment(cluster, id);
    }
    Ok(())
}

pub(super) async fn record_hooks(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    id: &str,
    patch: &serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let tx = client.transaction().await?;
    replica::check_fence(cluster, &tx, id).await?;
    let Some(stored) = one(
        &tx,
        "SELECT hooks_json FROM interactions WHERE id = $1 FOR UPDATE",
        &[&id],
        |r| r.opt_text(0),
    )
    .await?
    else {
        return Err(Error::not_found("interaction", id));
    };
    let hooks = interactions::merged_hooks(stored.as_deref(), patch)?;
    tx.execute(
        "UPDATE interactions SET hooks_json = $2 WHERE id = $1",
        &[&id, &hooks],
    )
    .await?;
    replica::notify(cluster, &tx, id).await?;
    tx.commit().await?;
    Ok(())
}

/// What a change of interaction `(id, project, environment)`'s status from `old` to `new`
/// writes with it, in `c`'s transaction: its webhook event, and the end of the executions it
/// ends.
async fn status_changed(
    c: &impl GenericClient,
    (id, project, environment): (&str, &str, Option<&str>),
    old: Option<InteractionStatus>,
    new: InteractionStatus,
    now: &str,
) -> Result<()> {
    if let Some((kind, data)) = crate::webhooks::status_event(id, old, new, environment) {
        webhooks::enqueue(c, project, kind, &data, None, now).await?;
    }
    triggers::end_executions_of(c, id, new, now).await
}

/// [`status_changed`] for an interaction that was running and was failed (recovered, reaped).
pub(super) async fn failed(
    c: &impl GenericClient,
    interaction: (&str, &str, Option<&str>),
    now: &str,
) -> Result<()> {
    status_changed(c, interaction, None, InteractionStatus::Failed, now).await
}

pub(super) async fn get(
    c: &impl GenericClient,
    project: &str,
    id: &str,
) -> Result<Option<Interaction>> {
    let Some(mut interaction) = one(
        c,
        &format!(
            "SELECT {} FROM interactions WHERE id = $1 AND project = $2",
            interactions::COLUMNS
        ),
        &[&id, &project],
        interactions::from_row,
    )
    .await?
    else {
        return Ok(None);
    };
    interaction.steps = c
        .query(
            "SELECT step_json FROM steps WHERE interaction_id = $1 ORDER BY idx",
            &[&id],
        )
        .await?
        .iter()
        .map(|r| r.json::<Step>(0))
        .collect::<Result<_>>()?;
    Ok(Some(interaction))
}

/// The interaction, its steps (`ON DELETE CASCADE`) and its approval records.
pub(super) async fn delete(client: &mut Object, project: &str, id: &str) -> Result<bool> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM interactions WHERE id = $1 AND project = $2",
            &[&id, &project],
        )
        .await?;
    if n > 0 {
        tx.execute(
            "DELETE FROM approvals WHERE project = $1 AND interaction_id = $2",
            &[&project, &id],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(n > 0)
}

/// Newest first.
pub(super) async fn list(
    c: &impl GenericClient,
    project: &str,
    filter: &InteractionFilter,
    page: &Page,
) -> Result<Paged<Interaction>> {
    paged(
        c,
        &format!(
            "SELECT seq, {} FROM interactions
             WHERE project = $1 AND seq < $2
               AND ($3::text IS NULL OR status = $3) AND ($4::text IS NULL OR agent = $4)
               AND ($5::text IS NULL OR environment_id = $5)
               AND ($6::text IS NULL OR created >= $6) AND ($7::text IS NULL OR created < $7)
               AND ($9::text IS NULL OR previous_interaction_id = $9)
             ORDER BY seq DESC LIMIT $8",
            interactions::COLUMNS
        ),
        &[
            &project,
            &page.before(),
            &filter.status,
            &filter.agent,
            &filter.environment_id,
            &filter.created_after,
            &filter.created_before,
            &page.fetch(),
            &filter.previous_interaction_id,
        ],
        page,
        |r| interactions::listed_from_row(r),
    )
    .await
}

pub(super) async fn count_running(c: &impl GenericClient, project: &str) -> Result<u64> {
    let n: i64 = c
        .query_one(
            &format!("SELECT COUNT(*) FROM interactions WHERE project = $1 AND {ACTIVE}"),
            &[&project],
        )
        .await?
        .get(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Fails what nothing can still run: a replica recovers only what no live replica runs (its
/// own earlier runs included: a restart is a new replica); a lone server recovers everything.
pub(super) async fn recover_interrupted(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    reason: &str,
    now: &str,
) -> Result<Vec<String>> {
    let errors = interactions::failure("interrupted", reason)?;
    let only_dead = match cluster {
        Some(_) => format!(" AND ({DEAD_REPLICA})"),
        None => String::new(),
    };
    let tx = client.transaction().await?;
    let mut rows = tx
        .query(
            &format!(
                "UPDATE interactions SET status = 'failed', errors_json = $1, updated = $2 WHERE {ACTIVE}{only_dead} RETURNING seq, id, project, environment_id"
            ),
            &[&errors, &now],
        )
        .await?
        .iter()
        .map(|r| Ok((r.int(0)?, r.text(1)?, r.text(2)?, r.opt_text(3)?)))
        .collect::<Result<Vec<_>>>()?;
    // RETURNING has no order; events go out in the interactions' order, as on SQLite.
    rows.sort();
    for (_, id, project, environment) in &rows {
        failed(&tx, (id, project, environment.as_deref()), now).await?;
    }
    tx.commit().await?;
    Ok(rows.into_iter().map(|(_, id, ..)| id).collect())
}
