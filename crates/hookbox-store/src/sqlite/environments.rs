//! Environments in SQLite: one JSON document per (project, id). A change that must not race
//! another is read and written in one transaction on the one connection.

use rusqlite::{Connection, params};

use super::documents::{self, paged};
use crate::documents::ENVIRONMENTS;
use crate::environments::{EnvironmentChange, EnvironmentRecord, apply_environment_change};
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::Columns;

/// Inserts or replaces `record` of `project`, with its mode as a column for [`list`].
pub(super) fn put(conn: &Connection, project: &str, record: &EnvironmentRecord) -> Result<()> {
    let json = serde_json::to_string(record)?;
    conn.prepare_cached(
        "INSERT INTO environments (project, id, record_json, mode) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(project, id) DO UPDATE SET record_json = excluded.record_json, mode = excluded.mode",
    )?
    .execute(params![project, record.environment.id, json, record.mode()])?;
    Ok(())
}

/// A page of `project`'s environments (of `mode` only, if given), in storage order.
pub(super) fn list(
    conn: &Connection,
    project: &str,
    mode: Option<&str>,
    page: &Page,
) -> Result<Paged<EnvironmentRecord>> {
    paged(
        conn,
        "SELECT rowid, record_json FROM environments
         WHERE rowid > ?1 AND project = ?2 AND (?3 IS NULL OR mode = ?3) ORDER BY rowid LIMIT ?4",
        params![page.after(), project, mode, page.fetch()],
        page,
        |r| r.json(0),
    )
}

pub(super) fn change(
    conn: &mut Connection,
    project: &str,
    id: &str,
    change: &EnvironmentChange,
) -> Result<Option<EnvironmentRecord>> {
    let tx = conn.savepoint()?;
    let Some(mut record) = documents::get::<EnvironmentRecord>(&tx, ENVIRONMENTS, project, id)?
    else {
        return Ok(None);
    };
    if apply_environment_change(&mut record, change) {
        put(&tx, project, &record)?;
    }
    tx.commit()?;
    Ok(Some(record))
}

/// Every project's environments, in storage order.
pub(super) fn list_all(
    conn: &Connection,
    page: &Page,
) -> Result<Paged<(String, EnvironmentRecord)>> {
    paged(
        conn,
        "SELECT rowid, project, record_json FROM environments WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
        params![page.after(), page.fetch()],
        page,
        |r| Ok((r.text(0)?, r.json(1)?)),
    )
}
