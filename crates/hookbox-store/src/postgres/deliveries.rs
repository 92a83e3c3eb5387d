//! The webhook outbox in PostgreSQL: claiming due deliveries for a while (one statement,
//! `FOR UPDATE SKIP LOCKED`, so replicas claiming at once take different rows), recording how an
//! attempt ended, listing.

use deadpool_postgres::{GenericClient, Object};
use hookbox_protocol::webhooks::PING_EVENT;

use super::documents::{one, paged};
use super::webhooks;
use crate::crypto::SecretKey;
use crate::error::Result;
use crate::page::{Page, Paged};
use crate::row::Columns;
use crate::webhooks::{
    AttemptOutcome, CLAIMED_COLUMNS, ClaimedDelivery, DELIVERY_COLUMNS, DeliveryRecord,
    claimed_from_row, delivery_from_row,
};

pub(super) async fn claim(
    c: &impl GenericClient,
    now_ms: i64,
    lease_until_ms: i64,
    limit: u32,
) -> Result<Vec<ClaimedDelivery>> {
    let mut rows = c
        .query(
            &format!(
                "UPDATE webhook_deliveries d SET next_attempt_ms = $2
                 FROM webhooks w
                 WHERE d.id IN (
                     SELECT d2.id FROM webhook_deliveries d2
                     JOIN webhooks w2 ON w2.project = d2.project AND w2.id = d2.webhook_id
                     WHERE d2.status = 'pending' AND d2.next_attempt_ms <= $1
                       AND (w2.state = 'enabled' OR d2.event_type = $4)
                     ORDER BY d2.next_attempt_ms, d2.seq LIMIT $3
                     FOR UPDATE OF d2 SKIP LOCKED)
                   AND w.project = d.project AND w.id = d.webhook_id
                 RETURNING d.seq, {CLAIMED_COLUMNS}"
            ),
            &[&now_ms, &lease_until_ms, &i64::from(limit), &PING_EVENT],
        )
        .await?
        .iter()
        .map(|r| Ok((r.int(0)?, claimed_from_row(&r.skip(1))?)))
        .collect::<Result<Vec<_>>>()?;
    // RETURNING has no order; hand them out oldest first, as SQLite does.
    rows.sort_by_key(|(seq, _)| *seq);
    Ok(rows.into_iter().map(|(_, claimed)| claimed).collect())
}

/// Records how an attempt of delivery `id` ended, and counts it for its webhook.
pub(super) async fn finish(
    client: &mut Object,
    key: &SecretKey,
    id: &str,
    outcome: &AttemptOutcome,
    now: &str,
) -> Result<()> {
    let tx = client.transaction().await?;
    let Some((project, webhook_id)) = one(
        &tx,
        "SELECT project, webhook_id FROM webhook_deliveries WHERE id = $1",
        &[&id],
        |r| Ok((r.text(0)?, r.text(1)?)),
    )
    .await?
    else {
        // Deleted with its webhook meanwhile.
        return Ok(());
    };
    let webhook = webhooks::read(&tx, key, &project, &webhook_id, true).await?;
    let row = outcome.row();
    tx.execute(
        "UPDATE webhook_deliveries SET status = $2, attempts = attempts + 1, next_attempt_ms = $3, last_status = $4, last_error = $5, updated = $6 WHERE id = $1",
        &[
            &id,
            &row.status,
            &row.next_attempt_ms,
            &row.last_status.map(i32::from),
            &row.last_error,
            &now,
        ],
    )
    .await?;
    if let Some((mut record, _)) = webhook
        && outcome.count_for(&mut record, now)
    {
        webhooks::write(&tx, key, &project, &record, None).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Deliveries of one webhook, newest first.
pub(super) async fn list(
    c: &impl GenericClient,
    project: &str,
    webhook_id: &str,
    page: &Page,
) -> Result<Paged<DeliveryRecord>> {
    paged(
        c,
        &format!(
            "SELECT seq, {DELIVERY_COLUMNS}
             FROM webhook_deliveries WHERE project = $1 AND webhook_id = $2 AND seq < $3
             ORDER BY seq DESC LIMIT $4"
        ),
        &[&project, &webhook_id, &page.before(), &page.fetch()],
        page,
        |r| delivery_from_row(r, webhook_id),
    )
    .await
}

/// When the next pending delivery of an enabled webhook (or a ping) falls due.
pub(super) async fn next_due_ms(c: &impl GenericClient) -> Result<Option<i64>> {
    Ok(c
        .query_one(
            "SELECT MIN(d.next_attempt_ms) FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
             WHERE d.status = 'pending' AND (w.state = 'enabled' OR d.event_type = $1)",
            &[&PING_EVENT],
        )
        .await?
        .get::<_, Option<i64>>(0))
}
