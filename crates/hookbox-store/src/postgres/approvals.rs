//! Calls paused for a reviewer in PostgreSQL. A settlement is conditional updates from
//! `pending` in one transaction, rolled back as soon as one record does not move. A concurrent
//! settlement of the same row waits for this one's commit and then finds it no longer pending
//! (READ COMMITTED re-checks the condition), so exactly one wins; rows are taken in a fixed
//! order ([`approvals::ordered`]), so two cannot deadlock.

use deadpool_postgres::{GenericClient, Object, Transaction};

use super::documents::{one, paged};
use super::interactions;
use super::replica::{self, ClusterState};
use crate::approvals::{
    self, ApprovalFilter, ApprovalRecord, ApprovalState, COLUMNS, Settle, Settled,
};
use crate::error::Result;
use crate::interactions::NewInteraction;
use crate::page::{Page, Paged};

pub(super) async fn create(
    c: &impl GenericClient,
    project: &str,
    record: &ApprovalRecord,
) -> Result<()> {
    let n = c
        .execute(
            &format!(
                "INSERT INTO approvals (project, {COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
                 ON CONFLICT (project, interaction_id, id) DO NOTHING"
            ),
            &[
                &project,
                &record.id,
                &record.interaction_id,
                &record.call_id,
                &record.environment_id,
                &record.tool,
                &serde_json::to_string(&record.args)?,
                &record.args_sha256,
                &record.reason,
                &record.hook_group,
                &record.expires_at,
                &record.created,
                &record.state.as_str(),
                &record.settled_by,
                &record.settled_at,
                &record.reviewer_reason,
            ],
        )
        .await?;
    (n > 0).then_some(()).ok_or_else(|| record.taken())
}

/// Oldest first.
pub(super) async fn list(
    c: &impl GenericClient,
    project: &str,
    filter: &ApprovalFilter,
    page: &Page,
) -> Result<Paged<ApprovalRecord>> {
    paged(
        c,
        &format!(
            "SELECT seq, {COLUMNS} FROM approvals WHERE project = $1 AND seq > $2
               AND ($3::text IS NULL OR interaction_id = $3) AND ($4::text IS NULL OR state = $4)
             ORDER BY seq LIMIT $5"
        ),
        &[
            &project,
            &page.after(),
            &filter.interaction_id,
            &filter.state.map(ApprovalState::as_str),
            &page.fetch(),
        ],
        page,
        |r| approvals::from_row(r),
    )
    .await
}

pub(super) async fn withdraw(
    c: &impl GenericClient,
    project: &str,
    interaction_id: &str,
) -> Result<u64> {
    Ok(c.execute(
        "DELETE FROM approvals WHERE project = $1 AND interaction_id = $2 AND state = 'pending'",
        &[&project, &interaction_id],
    )
    .await?)
}

/// Settles the records `settle` names, all or none, and stores `continuation` (the interaction
/// that answers them) in the same transaction only if the settlement won.
pub(super) async fn settle(
    client: &mut Object,
    cluster: Option<&ClusterState>,
    project: &str,
    settle: &Settle,
    continuation: Option<&NewInteraction>,
) -> Result<Settled> {
    let tx = client.transaction().await?;
    let Some(won) = settle_in(&tx, project, settle).await? else {
        tx.rollback().await?;
        return Ok(Settled::Refused(named(&*client, project, settle).await?));
    };
    if let Some(row) = continuation {
        interactions::insert(&tx, cluster, project, row).await?;
    }
    tx.commit().await?;
    if let Some(row) = continuation {
        replica::remember_environment(cluster, &row.body);
    }
    Ok(Settled::Won(won))
}

/// Moves every record `settle` names from `pending` to its state, in `tx`: the records as
/// settled, or `None` as soon as one does not move (the caller rolls back, so none does).
async fn settle_in(
    tx: &Transaction<'_>,
    project: &str,
    settle: &Settle,
) -> Result<Option<Vec<ApprovalRecord>>> {
    let update = tx
        .prepare_cached(&format!(
            "UPDATE approvals SET state = $1, settled_by = $2, settled_at = $3, reviewer_reason = $4
             WHERE project = $5 AND interaction_id = $6 AND id = $7 AND state = 'pending'
             RETURNING {COLUMNS}"
        ))
        .await?;
    let mut won = Vec::new();
    for s in approvals::ordered(settle) {
        if s.state == ApprovalState::Pending {
            return Ok(None);
        }
        let Some(row) = tx
            .query_opt(
                &update,
                &[
                    &s.state.as_str(),
                    &settle.by,
                    &settle.now,
                    &s.reviewer_reason,
                    &project,
                    &settle.interaction_id,
                    &s.id,
                ],
            )
            .await?
        else {
            return Ok(None);
        };
        won.push(approvals::from_row(&row)?);
    }
    Ok(Some(won))
}

/// The records `settle` names, as they are now (missing ones left out).
async fn named(
    c: &impl GenericClient,
    project: &str,
    settle: &Settle,
) -> Result<Vec<ApprovalRecord>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM approvals WHERE project = $1 AND interaction_id = $2 AND id = $3"
    );
    let mut out = Vec::new();
    for s in approvals::ordered(settle) {
        out.extend(
            one(c, &sql, &[&project, &settle.interaction_id, &s.id], |r| {
                approvals::from_row(r)
            })
            .await?,
        );
    }
    Ok(out)
}
