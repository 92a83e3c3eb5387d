//! Calls paused for a reviewer in SQLite. A settlement is conditional updates from `pending` in
//! one savepoint, rolled back as soon as one record does not move; the one connection on its
//! one thread makes two settlements take turns.

use rusqlite::{Connection, params};

use super::documents::{one, paged};
use super::interactions;
use crate::approvals::{
    self, ApprovalFilter, ApprovalRecord, ApprovalState, COLUMNS, Settle, Settled,
};
use crate::error::Result;
use crate::interactions::NewInteraction;
use crate::page::{Page, Paged};

pub(super) fn create(conn: &Connection, project: &str, record: &ApprovalRecord) -> Result<()> {
    let n = conn
        .prepare_cached(&format!(
            "INSERT OR IGNORE INTO approvals (project, {COLUMNS})
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"
        ))?
        .execute(params![
            project,
            record.id,
            record.interaction_id,
            record.call_id,
            record.environment_id,
            record.tool,
            serde_json::to_string(&record.args)?,
            record.args_sha256,
            record.reason,
            record.hook_group,
            record.expires_at,
            record.created,
            record.state.as_str(),
            record.settled_by,
            record.settled_at,
            record.reviewer_reason
        ])?;
    (n > 0).then_some(()).ok_or_else(|| record.taken())
}

/// Oldest first.
pub(super) fn list(
    conn: &Connection,
    project: &str,
    filter: &ApprovalFilter,
    page: &Page,
) -> Result<Paged<ApprovalRecord>> {
    paged(
        conn,
        &format!(
            "SELECT seq, {COLUMNS} FROM approvals WHERE project = ?1 AND seq > ?2
               AND (?3 IS NULL OR interaction_id = ?3) AND (?4 IS NULL OR state = ?4)
             ORDER BY seq LIMIT ?5"
        ),
        params![
            project,
            page.after(),
            filter.interaction_id,
            filter.state.map(ApprovalState::as_str),
            page.fetch()
        ],
        page,
        |r| approvals::from_row(r),
    )
}

pub(super) fn withdraw(conn: &Connection, project: &str, interaction_id: &str) -> Result<u64> {
    Ok(conn.execute(
        "DELETE FROM approvals WHERE project = ?1 AND interaction_id = ?2 AND state = 'pending'",
        params![project, interaction_id],
    )? as u64)
}

/// Settles the records `settle` names, all or none, and stores `continuation` (the interaction
/// that answers them) in the same transaction only if the settlement won.
pub(super) fn settle(
    conn: &mut Connection,
    project: &str,
    settle: &Settle,
    continuation: Option<&NewInteraction>,
) -> Result<Settled> {
    let tx = conn.savepoint()?;
    if !settle_in(&tx, project, settle)? {
        drop(tx);
        return Ok(Settled::Refused(named(conn, project, settle)?));
    }
    if let Some(row) = continuation {
        interactions::insert(&tx, project, row)?;
    }
    let won = named(&tx, project, settle)?;
    tx.commit()?;
    Ok(Settled::Won(won))
}

/// Moves every record `settle` names from `pending` to its state, in `tx`; `false` as soon as
/// one does not move (the caller then rolls back, so none does).
fn settle_in(tx: &Connection, project: &str, settle: &Settle) -> Result<bool> {
    let mut update = tx.prepare_cached(
        "UPDATE approvals SET state = ?1, settled_by = ?2, settled_at = ?3, reviewer_reason = ?4
         WHERE project = ?5 AND interaction_id = ?6 AND id = ?7 AND state = 'pending'",
    )?;
    for s in approvals::ordered(settle) {
        if s.state == ApprovalState::Pending {
            return Ok(false);
        }
        let n = update.execute(params![
            s.state.as_str(),
            settle.by,
            settle.now,
            s.reviewer_reason,
            project,
            settle.interaction_id,
            s.id
        ])?;
        if n != 1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The records `settle` names, as they are now (missing ones left out).
fn named(conn: &Connection, project: &str, settle: &Settle) -> Result<Vec<ApprovalRecord>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM approvals WHERE project = ?1 AND interaction_id = ?2 AND id = ?3"
    );
    let mut out = Vec::new();
    for s in approvals::ordered(settle) {
        out.extend(one(
            conn,
            &sql,
            params![project, settle.interaction_id, s.id],
            |r| approvals::from_row(r),
        )?);
    }
    Ok(out)
}
