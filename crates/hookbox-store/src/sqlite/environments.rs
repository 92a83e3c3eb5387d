//! Environments in SQLite: one JSON document per (project, id). A change that must not race
//! another is read and written in one transaction on the one connection.

use rusqlite::{Connection, params};

use super::documents::{self, paged};
use crate::documents::ENVIRONMENTS;
use crate::environments::{EnvironmentChange, EnvironmentRecord, apply_environment_change};
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::Columns;

pub(super) fn change(
    conn: &mut Connection,
    project: &str,
    id: &str,
    change: &EnvironmentChange,
) -> Result<Option<EnvironmentRecord>> {
    let tx = conn.transaction()?;
    let Some(mut record) = documents::get::<EnvironmentRecord>(&tx, ENVIRONMENTS, project, id)?
    else {
        return Ok(None);
    };
    if apply_environment_change(&mut record, change) {
        documents::put_value(&tx, ENVIRONMENTS, project, id, &record)?;
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
