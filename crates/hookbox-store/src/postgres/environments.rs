//! Environments in PostgreSQL: one JSON document per (project, id). A change that must not race
//! another reads the row `FOR UPDATE` and writes it in the same transaction.

use deadpool_postgres::{GenericClient, Object};

use super::documents::{self, paged};
use crate::documents::ENVIRONMENTS;
use crate::environments::{EnvironmentChange, EnvironmentRecord, apply_environment_change};
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::Columns;

/// Inserts or replaces `record` of `project`, with its mode as a column for [`list`].
pub(super) async fn put(
    c: &impl GenericClient,
    project: &str,
    record: &EnvironmentRecord,
) -> Result<()> {
    c.execute(
        "INSERT INTO environments (project, id, record_json, mode) VALUES ($1, $2, $3, $4)
         ON CONFLICT (project, id) DO UPDATE SET record_json = excluded.record_json, mode = excluded.mode",
        &[
            &project,
            &record.environment.id,
            &serde_json::to_string(record)?,
            &record.mode(),
        ],
    )
    .await?;
    Ok(())
}

/// A page of `project`'s environments (of `mode` only, if given), in storage order.
pub(super) async fn list(
    c: &impl GenericClient,
    project: &str,
    mode: Option<&str>,
    page: &Page,
) -> Result<Paged<EnvironmentRecord>> {
    paged(
        c,
        "SELECT seq, record_json FROM environments
         WHERE seq > $1 AND project = $2 AND ($3::TEXT IS NULL OR mode = $3) ORDER BY seq LIMIT $4",
        &[&page.after(), &project, &mode, &page.fetch()],
        page,
        |r| r.json(0),
    )
    .await
}

pub(super) async fn change(
    client: &mut Object,
    project: &str,
    id: &str,
    change: &EnvironmentChange,
) -> Result<Option<EnvironmentRecord>> {
    let tx = client.transaction().await?;
    let Some(mut record) =
        documents::get::<EnvironmentRecord>(&tx, ENVIRONMENTS, project, id, true).await?
    else {
        return Ok(None);
    };
    if apply_environment_change(&mut record, change) {
        tx.execute(
            "UPDATE environments SET record_json = $3 WHERE project = $1 AND id = $2",
            &[&project, &id, &serde_json::to_string(&record)?],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Some(record))
}

/// Every project's environments, in storage order.
pub(super) async fn list_all(
    c: &impl GenericClient,
    page: &Page,
) -> Result<Paged<(String, EnvironmentRecord)>> {
    paged(
        c,
        "SELECT seq, project, record_json FROM environments WHERE seq > $1 ORDER BY seq LIMIT $2",
        &[&page.after(), &page.fetch()],
        page,
        |r| Ok((r.text(0)?, r.json(1)?)),
    )
    .await
}
