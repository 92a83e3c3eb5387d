//! Webhooks in SQLite: the record's JSON beside its sealed signing secrets
//! ([`crate::webhooks`] seals and opens them), and [`enqueue`], which writes an event's
//! deliveries in the caller's transaction.

use hookbox_protocol::webhooks::WebhookUpdate;
use rusqlite::{Connection, params};
use serde_json::Value;

use super::documents::{one, paged};
use crate::crypto::SecretKey;
use crate::error::{Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;
use crate::webhooks::{self, SigningKey, WebhookRecord};

/// A webhook's record with its sealed keys opened.
pub(super) fn read(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
) -> Result<Option<(WebhookRecord, Vec<SigningKey>)>> {
    one(
        conn,
        "SELECT record_json, nonce, ciphertext FROM webhooks WHERE project = ?1 AND id = ?2",
        params![project, id],
        |r| webhooks::opened_from_row(key, project, id, r),
    )
}

/// Writes a webhook's record (and, when given, its keys sealed anew).
pub(super) fn write(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    keys: Option<&[SigningKey]>,
) -> Result<()> {
    let id = &record.webhook.id;
    match webhooks::columns(key, project, record, keys)? {
        (state, json, Some((nonce, ct))) => {
            conn.prepare_cached(
                "UPDATE webhooks SET state = ?3, record_json = ?4, nonce = ?5, ciphertext = ?6 WHERE project = ?1 AND id = ?2",
            )?
            .execute(params![project, id, state, json, nonce, ct])?;
        }
        (state, json, None) => {
            conn.prepare_cached(
                "UPDATE webhooks SET state = ?3, record_json = ?4 WHERE project = ?1 AND id = ?2",
            )?
            .execute(params![project, id, state, json])?;
        }
    }
    Ok(())
}

/// The webhooks an event of a project may go to, with their `rowid` ([`enqueue`] sorts them by
/// it: the order they were made). Not `ORDER BY rowid`, nor `(?2 IS NULL OR id = ?2)` for the
/// one webhook: SQLite plans either shape for the value bound, so it compiled the cached
/// statement again at every interaction's status change.
pub(super) const WEBHOOKS_OF_PROJECT: &str =
    "SELECT rowid, record_json FROM webhooks WHERE project = ?1";

/// Writes one pending delivery of `kind` for each webhook of `project` that wants it (only
/// `only`, when given), inside `conn`'s transaction; their ids.
pub(super) fn enqueue(
    conn: &Connection,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let records = match only {
        None => {
            let mut rows = conn
                .prepare_cached(WEBHOOKS_OF_PROJECT)?
                .query_and_then(params![project], |r| {
                    Ok((r.get::<_, i64>(0)?, r.json::<WebhookRecord>(1)?))
                })?
                .collect::<Result<Vec<_>>>()?;
            rows.sort_unstable_by_key(|(rowid, _)| *rowid);
            rows.into_iter().map(|(_, record)| record).collect()
        }
        Some(id) => conn
            .prepare_cached("SELECT record_json FROM webhooks WHERE project = ?1 AND id = ?2")?
            .query_and_then(params![project, id], |r| r.json::<WebhookRecord>(0))?
            .collect::<Result<Vec<_>>>()?,
    };
    let mut insert = conn.prepare_cached(
        "INSERT INTO webhook_deliveries (id, project, webhook_id, event_type, payload_json, status, next_attempt_ms, created, created_ms, updated)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7, ?6, ?7)",
    )?;
    let mut ids = Vec::new();
    for d in webhooks::new_deliveries(&records, kind, data, now)? {
        insert.execute(params![
            d.id,
            project,
            d.webhook_id,
            kind,
            d.body,
            d.created_ms,
            now
        ])?;
        ids.push(d.id);
    }
    Ok(ids)
}

pub(super) fn create(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    signing: &SigningKey,
) -> Result<()> {
    let id = &record.webhook.id;
    let (nonce, ct) = webhooks::seal_keys(key, project, id, std::slice::from_ref(signing))?;
    let n = conn.execute(
        "INSERT OR IGNORE INTO webhooks (project, id, state, record_json, nonce, ciphertext) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            project,
            id,
            record.webhook.state.as_str(),
            serde_json::to_string(record)?,
            nonce,
            ct
        ],
    )?;
    inserted(n > 0, "webhook", id)
}

/// The webhook, its live secrets shown truncated.
pub(super) fn get(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    Ok(read(conn, key, project, id)?.map(|(mut record, keys)| {
        webhooks::show_secrets(&mut record, &keys, now);
        record
    }))
}

pub(super) fn list(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    page: &Page,
    now: &str,
) -> Result<Paged<WebhookRecord>> {
    paged(
        conn,
        "SELECT rowid, id, record_json, nonce, ciphertext FROM webhooks WHERE rowid > ?1 AND project = ?2 ORDER BY rowid LIMIT ?3",
        params![page.after(), project, page.fetch()],
        page,
        |r| webhooks::shown_from_row(key, project, r, now),
    )
}

pub(super) fn update(
    conn: &mut Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
    update: &WebhookUpdate,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    change(conn, key, (project, id), now, |record, _| {
        webhooks::apply_update(record, update, now);
        None
    })
}

pub(super) fn rotate_secret(
    conn: &mut Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
    new: SigningKey,
    previous_expire: Option<&str>,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    change(conn, key, (project, id), now, |record, keys| {
        record.webhook.update_time = now.to_owned();
        Some(webhooks::rotate(keys.to_vec(), new, previous_expire, now))
    })
}

/// Changes webhook `(project, id)` in one transaction: `change` edits its record and may
/// return new keys (sealed anew). The record as shown after it, `None` if there is none.
fn change(
    conn: &mut Connection,
    key: &SecretKey,
    (project, id): (&str, &str),
    now: &str,
    change: impl FnOnce(&mut WebhookRecord, &[SigningKey]) -> Option<Vec<SigningKey>>,
) -> Result<Option<WebhookRecord>> {
    let tx = conn.savepoint()?;
    let Some((mut record, keys)) = read(&tx, key, project, id)? else {
        return Ok(None);
    };
    let resealed = change(&mut record, &keys);
    write(&tx, key, project, &record, resealed.as_deref())?;
    tx.commit()?;
    webhooks::show_secrets(&mut record, resealed.as_deref().unwrap_or(&keys), now);
    Ok(Some(record))
}

/// The webhook and its deliveries.
pub(super) fn delete(conn: &mut Connection, project: &str, id: &str) -> Result<bool> {
    let tx = conn.savepoint()?;
    let n = tx.execute(
        "DELETE FROM webhooks WHERE project = ?1 AND id = ?2",
        params![project, id],
    )?;
    tx.execute(
        "DELETE FROM webhook_deliveries WHERE project = ?1 AND webhook_id = ?2",
        params![project, id],
    )?;
    tx.commit()?;
    Ok(n > 0)
}

/// The secrets that sign at `now`, in full.
pub(super) fn signing_keys(
    conn: &Connection,
    key: &SecretKey,
    project: &str,
    id: &str,
    now: &str,
) -> Result<Option<Vec<SigningKey>>> {
    Ok(read(conn, key, project, id)?
        .map(|(_, keys)| keys.into_iter().filter(|k| k.live_at(now)).collect()))
}

/// [`enqueue`] in a transaction of its own.
pub(super) fn enqueue_event(
    conn: &mut Connection,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let tx = conn.savepoint()?;
    let ids = enqueue(&tx, project, kind, data, only, now)?;
    tx.commit()?;
    Ok(ids)
}
