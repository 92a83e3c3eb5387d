//! SQLite's reads and writes of the one-JSON-document tables ([`DocTable`]), and the two
//! queries every resource file uses: a page of rows, and the rows of one project.

use rusqlite::{Connection, Params, Row, params};
use serde::de::DeserializeOwned;

use crate::documents::DocTable;
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::{Columns, Skip};

/// Runs a paged query of `page` whose first column is the row's position (`rowid` or `seq`;
/// the caller binds [`Page::fetch`] as its limit) and reads each row's other columns with
/// `read`.
pub(super) fn paged<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    page: &Page,
    read: impl Fn(&Skip<'_, Row<'_>>) -> Result<T>,
) -> Result<Paged<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_and_then(params, |r: &Row<'_>| Ok((r.int(0)?, read(&r.skip(1))?)))?;
    Paged::from_rows(rows, page)
}

/// The first row `sql` finds, read with `read`; `None` when it finds none.
pub(super) fn one<T>(
    conn: &Connection,
    sql: &str,
    params: impl Params,
    read: impl FnOnce(&Row<'_>) -> Result<T>,
) -> Result<Option<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params)?;
    rows.next()?.map(read).transpose()
}

/// Rows of `table` in `project`. `table` is a constant, never input.
pub(super) fn count_in_project(conn: &Connection, table: &str, project: &str) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM {table} WHERE project = ?1"))?
        .query_row(params![project], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Inserts or replaces document `id` of `project`.
pub(super) fn put(
    conn: &Connection,
    DocTable { table, column }: DocTable,
    project: &str,
    id: &str,
    json: &str,
) -> Result<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO {table} (project, id, {column}) VALUES (?1, ?2, ?3)
         ON CONFLICT(project, id) DO UPDATE SET {column} = excluded.{column}"
    ))?
    .execute(params![project, id, json])?;
    Ok(())
}

pub(super) fn get<T: DeserializeOwned>(
    conn: &Connection,
    DocTable { table, column }: DocTable,
    project: &str,
    id: &str,
) -> Result<Option<T>> {
    one(
        conn,
        &format!("SELECT {column} FROM {table} WHERE project = ?1 AND id = ?2"),
        params![project, id],
        |r| r.json(0),
    )
}

/// A page of `project`'s documents, in storage order.
pub(super) fn list<T: DeserializeOwned>(
    conn: &Connection,
    DocTable { table, column }: DocTable,
    project: &str,
    page: &Page,
) -> Result<Paged<T>> {
    paged(
        conn,
        &format!(
            "SELECT rowid, {column} FROM {table} WHERE rowid > ?1 AND project = ?2 ORDER BY rowid LIMIT ?3"
        ),
        params![page.after(), project, page.fetch()],
        page,
        |r| r.json(0),
    )
}

pub(super) fn delete(
    conn: &Connection,
    DocTable { table, .. }: DocTable,
    project: &str,
    id: &str,
) -> Result<bool> {
    Ok(conn.execute(
        &format!("DELETE FROM {table} WHERE project = ?1 AND id = ?2"),
        params![project, id],
    )? > 0)
}
