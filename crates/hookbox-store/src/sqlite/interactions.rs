//! Interactions and their steps in SQLite. A change of status is written with what it causes,
//! in its transaction: the webhook event ([`super::webhooks::enqueue`]) and the end of the
//! trigger executions that created the interaction ([`super::triggers::end_executions_of`]).

use hookbox_protocol::api::{Interaction, InteractionStatus, Step};
use rusqlite::{Connection, params};

use super::documents::{one, paged};
use super::{triggers, webhooks};
use crate::error::{Error, Result, inserted};
use crate::interactions::{self, InteractionFilter, NewInteraction, StatusUpdate};
use crate::page::{Page, Paged};
use crate::row::Columns;

/// Inserts `row` and its steps in `tx`; [`Error::AlreadyExists`] on a taken id.
pub(super) fn insert(tx: &Connection, project: &str, row: &NewInteraction) -> Result<()> {
    let body = &row.body;
    let n = tx.prepare_cached(
        "INSERT OR IGNORE INTO interactions (id, status, agent, environment_id, previous_interaction_id, created, updated, usage_json, errors_json, body_json, project)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?
    .execute(params![
            body.id,
            body.status.as_str(),
            body.agent,
            body.environment_id,
            body.previous_interaction_id,
            row.created(),
            row.updated(),
            row.usage,
            row.errors,
            row.body_json,
            project
    ])?;
    inserted(n > 0, "interaction", &body.id)?;
    let mut insert_step = tx
        .prepare_cached("INSERT INTO steps (interaction_id, idx, step_json) VALUES (?1, ?2, ?3)")?;
    for (idx, step) in row.steps.iter().enumerate() {
        insert_step.execute(params![body.id, idx as i64, step])?;
    }
    Ok(())
}

pub(super) fn create(conn: &mut Connection, project: &str, row: &NewInteraction) -> Result<()> {
    let tx = conn.savepoint()?;
    insert(&tx, project, row)?;
    tx.commit()?;
    Ok(())
}

pub(super) fn append_step(conn: &Connection, id: &str, index: i64, json: &str) -> Result<()> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM interactions WHERE id = ?1")?
        .exists(params![id])?;
    if !exists {
        return Err(Error::not_found("interaction", id));
    }
    conn.prepare_cached(
        "INSERT OR REPLACE INTO steps (interaction_id, idx, step_json) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![id, index, json])?;
    Ok(())
}

pub(super) fn update_status(conn: &mut Connection, id: &str, update: &StatusUpdate) -> Result<()> {
    let (usage, errors) = update.columns()?;
    let tx = conn.savepoint()?;
    let Some((old, project, environment)) = one(
        &tx,
        "SELECT status, project, environment_id FROM interactions WHERE id = ?1",
        params![id],
        |r| Ok((r.text(0)?, r.text(1)?, r.opt_text(2)?)),
    )?
    else {
        return Err(Error::not_found("interaction", id));
    };
    tx.prepare_cached(
        "UPDATE interactions SET status = ?2, usage_json = COALESCE(?3, usage_json), errors_json = ?4, updated = ?5 WHERE id = ?1",
    )?
    .execute(params![id, update.status.as_str(), usage, errors, update.updated])?;
    status_changed(
        &tx,
        (id, &project, environment.as_deref()),
        InteractionStatus::parse(&old),
        update.status,
        &update.updated,
    )?;
    tx.commit()?;
    Ok(())
}

pub(super) fn record_hooks(
    conn: &mut Connection,
    id: &str,
    patch: &serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let tx = conn.savepoint()?;
    let Some(stored) = one(
        &tx,
        "SELECT hooks_json FROM interactions WHERE id = ?1",
        params![id],
        |r| r.opt_text(0),
    )?
    else {
        return Err(Error::not_found("interaction", id));
    };
    let hooks = interactions::merged_hooks(stored.as_deref(), patch)?;
    tx.execute(
        "UPDATE interactions SET hooks_json = ?2 WHERE id = ?1",
        params![id, hooks],
    )?;
    tx.commit()?;
    Ok(())
}

/// What a change of interaction `(id, project, environment)`'s status from `old` to `new`
/// writes with it, in `tx`: its webhook event, and the end of the executions it ends.
fn status_changed(
    tx: &Connection,
    (id, project, environment): (&str, &str, Option<&str>),
    old: Option<InteractionStatus>,
    new: InteractionStatus,
    now: &str,
) -> Result<()> {
    if let Some((kind, data)) = crate::webhooks::status_event(id, old, new, environment) {
        webhooks::enqueue(tx, project, kind, &data, None, now)?;
    }
    triggers::end_executions_of(tx, id, new, now)
}

pub(super) fn get(conn: &Connection, project: &str, id: &str) -> Result<Option<Interaction>> {
    let Some(mut interaction) = one(
        conn,
        &format!(
            "SELECT {} FROM interactions WHERE id = ?1 AND project = ?2",
            interactions::COLUMNS
        ),
        params![id, project],
        |r| interactions::from_row(r),
    )?
    else {
        return Ok(None);
    };
    let mut steps = conn
        .prepare_cached(STEPS)?
        .query_and_then(params![id], |r| {
            Ok((r.get::<_, i64>(0)?, r.json::<Step>(1)?))
        })?
        .collect::<Result<Vec<_>>>()?;
    steps.sort_unstable_by_key(|(idx, _)| *idx);
    interaction.steps = steps.into_iter().map(|(_, step)| step).collect();
    Ok(Some(interaction))
}

/// An interaction's steps, in no particular order ([`get`] sorts them by `idx`). Not `ORDER BY
/// idx` in SQL: SQLite recompiles a statement of that shape (an equality on the key's first
/// column with a bound value, ordered by its second) each time the value is bound anew, so the
/// cached statement was parsed and planned again on every read of an interaction.
pub(super) const STEPS: &str = "SELECT idx, step_json FROM steps WHERE interaction_id = ?1";

pub(super) fn delete(conn: &mut Connection, project: &str, id: &str) -> Result<bool> {
    let tx = conn.savepoint()?;
    let n = tx.execute(
        "DELETE FROM interactions WHERE id = ?1 AND project = ?2",
        params![id, project],
    )?;
    if n > 0 {
        tx.execute("DELETE FROM steps WHERE interaction_id = ?1", params![id])?;
        tx.execute(
            "DELETE FROM approvals WHERE project = ?1 AND interaction_id = ?2",
            params![project, id],
        )?;
    }
    tx.commit()?;
    Ok(n > 0)
}

/// Newest first.
pub(super) fn list(
    conn: &Connection,
    project: &str,
    filter: &InteractionFilter,
    page: &Page,
) -> Result<Paged<Interaction>> {
    paged(
        conn,
        &format!(
            "SELECT rowid, {} FROM interactions
             WHERE project = ?1 AND rowid < ?2
               AND (?3 IS NULL OR status = ?3) AND (?4 IS NULL OR agent = ?4)
               AND (?5 IS NULL OR environment_id = ?5)
               AND (?6 IS NULL OR created >= ?6) AND (?7 IS NULL OR created < ?7)
               AND (?9 IS NULL OR previous_interaction_id = ?9)
             ORDER BY rowid DESC LIMIT ?8",
            interactions::COLUMNS
        ),
        params![
            project,
            page.before(),
            filter.status,
            filter.agent,
            filter.environment_id,
            filter.created_after,
            filter.created_before,
            page.fetch(),
            filter.previous_interaction_id
        ],
        page,
        |r| interactions::listed_from_row(r),
    )
}

pub(super) fn count_running(conn: &Connection, project: &str) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM interactions WHERE project = ?1 AND status IN ('queued', 'in_progress')",
        )?
        .query_row(params![project], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Fails every interaction still `queued` or `in_progress` (nothing runs them after a restart).
pub(super) fn recover_interrupted(
    conn: &mut Connection,
    reason: &str,
    now: &str,
) -> Result<Vec<String>> {
    let errors = interactions::failure("interrupted", reason)?;
    let tx = conn.savepoint()?;
    let rows = tx
        .prepare("SELECT id, project, environment_id FROM interactions WHERE status IN ('queued', 'in_progress') ORDER BY rowid")?
        .query_and_then([], |r| {
            Ok::<_, Error>((r.text(0)?, r.text(1)?, r.opt_text(2)?))
        })?
        .collect::<Result<Vec<_>>>()?;
    tx.execute(
        "UPDATE interactions SET status = 'failed', errors_json = ?1, updated = ?2 WHERE status IN ('queued', 'in_progress')",
        params![errors, now],
    )?;
    for (id, project, environment) in &rows {
        status_changed(
            &tx,
            (id, project, environment.as_deref()),
            None,
            InteractionStatus::Failed,
            now,
        )?;
    }
    tx.commit()?;
    Ok(rows.into_iter().map(|(id, ..)| id).collect())
}
