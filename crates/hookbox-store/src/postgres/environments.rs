//! Environments in PostgreSQL: one JSON document per (project, id). A change that must not race
//! another reads the row `FOR UPDATE` and writes it in the same transaction.

use deadpool_postgres::{GenericClient, Object};

use super::documents::{self, paged};
use crate::documents::ENVIRONMENTS;
use crate::environments::{EnvironmentChange, EnvironmentRecord, apply_environment_change};
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::Columns;

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
