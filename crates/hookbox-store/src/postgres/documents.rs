//! PostgreSQL's reads and writes of the one-JSON-document tables ([`DocTable`]), and the
//! queries every resource file uses: one optional row, a page of rows, the rows of one project.

use deadpool_postgres::GenericClient;
use serde::de::DeserializeOwned;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::documents::DocTable;
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::{Columns, Skip};

/// Query parameters.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The row `sql` finds, read with `read`; `None` when it finds none.
pub(super) async fn one<T>(
    c: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
    read: impl FnOnce(&Row) -> Result<T>,
) -> Result<Option<T>> {
    c.query_opt(sql, params)
        .await?
        .as_ref()
        .map(read)
        .transpose()
}

/// Runs a paged query of `page` whose first column is the row's position (`seq`; the caller
/// binds [`Page::fetch`] as its limit) and reads each row's other columns with `read`.
pub(super) async fn paged<T>(
    c: &impl GenericClient,
    sql: &str,
    params: Params<'_>,
    page: &Page,
    read: impl Fn(&Skip<'_, Row>) -> Result<T>,
) -> Result<Paged<T>> {
    let rows = c.query(sql, params).await?;
    Paged::from_rows(
        rows.iter().map(|r| Ok((r.int(0)?, read(&r.skip(1))?))),
        page,
    )
}

/// Rows of `table` in `project`. `table` is a constant, never input.
pub(super) async fn count_in_project(
    c: &impl GenericClient,
    table: &str,
    project: &str,
) -> Result<u64> {
    let n: i64 = c
        .query_one(
            &format!("SELECT COUNT(*) FROM {table} WHERE project = $1"),
            &[&project],
        )
        .await?
        .get(0);
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Inserts or replaces document `id` of `project`.
pub(super) async fn put(
    c: &impl GenericClient,
    DocTable { table, column }: DocTable,
    project: &str,
    id: &str,
    json: &str,
) -> Result<()> {
    c.execute(
        &format!(
            "INSERT INTO {table} (project, id, {column}) VALUES ($1, $2, $3)
             ON CONFLICT (project, id) DO UPDATE SET {column} = excluded.{column}"
        ),
        &[&project, &id, &json],
    )
    .await?;
    Ok(())
}

/// Document `id` of `project`; with `lock`, its row is locked until the transaction ends
/// (`FOR UPDATE`: a read-modify-write takes turns with any other).
pub(super) async fn get<T: DeserializeOwned>(
    c: &impl GenericClient,
    DocTable { table, column }: DocTable,
    project: &str,
    id: &str,
    lock: bool,
) -> Result<Option<T>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    one(
        c,
        &format!("SELECT {column} FROM {table} WHERE project = $1 AND id = $2{lock}"),
        &[&project, &id],
        |r| r.json(0),
    )
    .await
}

/// A page of `project`'s documents, in storage order.
pub(super) async fn list<T: DeserializeOwned>(
    c: &impl GenericClient,
    DocTable { table, column }: DocTable,
    project: &str,
    page: &Page,
) -> Result<Paged<T>> {
    paged(
        c,
        &format!(
            "SELECT seq, {column} FROM {table} WHERE seq > $1 AND project = $2 ORDER BY seq LIMIT $3"
        ),
        &[&page.after(), &project, &page.fetch()],
        page,
        |r| r.json(0),
    )
    .await
}

pub(super) async fn delete(
    c: &impl GenericClient,
    DocTable { table, .. }: DocTable,
    project: &str,
    id: &str,
) -> Result<bool> {
    Ok(c.execute(
        &format!("DELETE FROM {table} WHERE project = $1 AND id = $2"),
        &[&project, &id],
    )
    .await?
        > 0)
}
