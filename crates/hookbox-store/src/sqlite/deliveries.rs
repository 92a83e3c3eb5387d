//! The webhook outbox in SQLite: claiming due deliveries for a while, recording how an attempt
//! ended, listing. A claim is a select and updates in one savepoint; the one connection on its
//! one thread keeps two claims apart.

use hookbox_protocol::webhooks::PING_EVENT;
use rusqlite::{Connection, params};

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

pub(super) fn claim(
    conn: &mut Connection,
    now_ms: i64,
    lease_until_ms: i64,
    limit: u32,
) -> Result<Vec<ClaimedDelivery>> {
    let tx = conn.savepoint()?;
    let claimed = tx
        .prepare_cached(&format!(
            "SELECT {CLAIMED_COLUMNS}
             FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
             WHERE d.status = 'pending' AND d.next_attempt_ms <= ?1
               AND (w.state = 'enabled' OR d.event_type = ?3)
             ORDER BY d.next_attempt_ms, d.seq LIMIT ?2"
        ))?
        .query_and_then(params![now_ms, i64::from(limit), PING_EVENT], |r| {
            claimed_from_row(r)
        })?
        .collect::<Result<Vec<_>>>()?;
    for delivery in &claimed {
        tx.prepare_cached("UPDATE webhook_deliveries SET next_attempt_ms = ?2 WHERE id = ?1")?
            .execute(params![delivery.id, lease_until_ms])?;
    }
    tx.commit()?;
    Ok(claimed)
}

/// Records how an attempt of delivery `id` ended, and counts it for its webhook.
pub(super) fn finish(
    conn: &mut Connection,
    key: &SecretKey,
    id: &str,
    outcome: &AttemptOutcome,
    now: &str,
) -> Result<()> {
    let tx = conn.savepoint()?;
    let Some((project, webhook_id)) = one(
        &tx,
        "SELECT project, webhook_id FROM webhook_deliveries WHERE id = ?1",
        params![id],
        |r| Ok((r.text(0)?, r.text(1)?)),
    )?
    else {
        // Deleted with its webhook meanwhile.
        return Ok(());
    };
    let webhook = webhooks::read(&tx, key, &project, &webhook_id)?;
    let row = outcome.row();
    tx.prepare_cached(
        "UPDATE webhook_deliveries SET status = ?2, attempts = attempts + 1, next_attempt_ms = ?3, last_status = ?4, last_error = ?5, updated = ?6 WHERE id = ?1",
    )?
    .execute(params![
        id,
        row.status,
        row.next_attempt_ms,
        row.last_status,
        row.last_error,
        now
    ])?;
    if let Some((mut record, _)) = webhook
        && outcome.count_for(&mut record, now)
    {
        webhooks::write(&tx, key, &project, &record, None)?;
    }
    tx.commit()?;
    Ok(())
}

/// Deliveries of one webhook, newest first.
pub(super) fn list(
    conn: &Connection,
    project: &str,
    webhook_id: &str,
    page: &Page,
) -> Result<Paged<DeliveryRecord>> {
    paged(
        conn,
        &format!(
            "SELECT seq, {DELIVERY_COLUMNS}
             FROM webhook_deliveries WHERE project = ?1 AND webhook_id = ?2 AND seq < ?3
             ORDER BY seq DESC LIMIT ?4"
        ),
        params![project, webhook_id, page.before(), page.fetch()],
        page,
        |r| delivery_from_row(r, webhook_id),
    )
}

/// When the next pending delivery of an enabled webhook (or a ping) falls due.
pub(super) fn next_due_ms(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT MIN(d.next_attempt_ms) FROM webhook_deliveries d JOIN webhooks w ON w.project = d.project AND w.id = d.webhook_id
             WHERE d.status = 'pending' AND (w.state = 'enabled' OR d.event_type = ?1)",
        )?
        .query_row(params![PING_EVENT], |r| r.get::<_, Option<i64>>(0))?)
}
