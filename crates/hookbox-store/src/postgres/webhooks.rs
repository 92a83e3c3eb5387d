//! Webhooks in PostgreSQL: the record's JSON beside its sealed signing secrets
//! ([`crate::webhooks`] seals and opens them), and [`enqueue`], which writes an event's
//! deliveries in the caller's transaction.

use deadpool_postgres::{GenericClient, Object};
use hookbox_protocol::webhooks::WebhookUpdate;
use serde_json::Value;

use super::documents::{one, paged};
use crate::crypto::SecretKey;
use crate::error::{Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;
use crate::webhooks::{self, SigningKey, WebhookRecord};

/// A webhook's record with its sealed keys opened; with `lock`, its row is locked until the
/// transaction ends.
pub(super) async fn read(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
    lock: bool,
) -> Result<Option<(WebhookRecord, Vec<SigningKey>)>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    one(
        c,
        &format!(
            "SELECT record_json, nonce, ciphertext FROM webhooks WHERE project = $1 AND id = $2{lock}"
        ),
        &[&project, &id],
        |r| webhooks::opened_from_row(key, project, id, r),
    )
    .await
}

/// Writes a webhook's record (and, when given, its keys sealed anew).
pub(super) async fn write(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    keys: Option<&[SigningKey]>,
) -> Result<()> {
    let id = &record.webhook.id;
    match webhooks::columns(key, project, record, keys)? {
        (state, json, Some((nonce, ct))) => {
            c.execute(
                "UPDATE webhooks SET state = $3, record_json = $4, nonce = $5, ciphertext = $6 WHERE project = $1 AND id = $2",
                &[&project, id, &state, &json, &nonce, &ct],
            )
            .await?;
        }
        (state, json, None) => {
            c.execute(
                "UPDATE webhooks SET state = $3, record_json = $4 WHERE project = $1 AND id = $2",
                &[&project, id, &state, &json],
            )
            .await?;
        }
    }
    Ok(())
}

/// Writes one pending delivery of `kind` for each webhook of `project` that wants it (only
/// `only`, when given), in `c`'s transaction; their ids.
pub(super) async fn enqueue(
    c: &impl GenericClient,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let records = c
        .query(
            "SELECT record_json FROM webhooks WHERE project = $1 AND ($2::TEXT IS NULL OR id = $2) ORDER BY seq",
            &[&project, &only],
        )
        .await?
        .iter()
        .map(|r| r.json::<WebhookRecord>(0))
        .collect::<Result<Vec<_>>>()?;
    let mut ids = Vec::new();
    for d in webhooks::new_deliveries(&records, kind, data, now)? {
        c.execute(
            "INSERT INTO webhook_deliveries (id, project, webhook_id, event_type, payload_json, status, next_attempt_ms, created, created_ms, updated)
             VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $6, $7)",
            &[&d.id, &project, &d.webhook_id, &kind, &d.body, &d.created_ms, &now],
        )
        .await?;
        ids.push(d.id);
    }
    Ok(ids)
}

pub(super) async fn create(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    record: &WebhookRecord,
    signing: &SigningKey,
) -> Result<()> {
    let id = &record.webhook.id;
    let (nonce, ct) = webhooks::seal_keys(key, project, id, std::slice::from_ref(signing))?;
    let n = c
        .execute(
            "INSERT INTO webhooks (project, id, state, record_json, nonce, ciphertext) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (project, id) DO NOTHING",
            &[
                &project,
                id,
                &record.webhook.state.as_str(),
                &serde_json::to_string(record)?,
                &nonce,
                &ct,
            ],
        )
        .await?;
    inserted(n > 0, "webhook", id)
}

/// The webhook, its live secrets shown truncated.
pub(super) async fn get(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    Ok(read(c, key, project, id, false)
        .await?
        .map(|(mut record, keys)| {
            webhooks::show_secrets(&mut record, &keys, now);
            record
        }))
}

pub(super) async fn list(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    page: &Page,
    now: &str,
) -> Result<Paged<WebhookRecord>> {
    paged(
        c,
        "SELECT seq, id, record_json, nonce, ciphertext FROM webhooks WHERE seq > $1 AND project = $2 ORDER BY seq LIMIT $3",
        &[&page.after(), &project, &page.fetch()],
        page,
        |r| webhooks::shown_from_row(key, project, r, now),
    )
    .await
}

pub(super) async fn update(
    client: &mut Object,
    key: &SecretKey,
    project: &str,
    id: &str,
    update: &WebhookUpdate,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    change(client, key, (project, id), now, |record, _| {
        webhooks::apply_update(record, update, now);
        None
    })
    .await
}

pub(super) async fn rotate_secret(
    client: &mut Object,
    key: &SecretKey,
    project: &str,
    id: &str,
    new: &SigningKey,
    previous_expire: Option<&str>,
    now: &str,
) -> Result<Option<WebhookRecord>> {
    change(client, key, (project, id), now, |record, keys| {
        record.webhook.update_time = now.to_owned();
        Some(webhooks::rotate(
            keys.to_vec(),
            new.clone(),
            previous_expire,
            now,
        ))
    })
    .await
}

/// Changes webhook `(project, id)` in one transaction, its row locked: `change` edits its
/// record and may return new keys (sealed anew). The record as shown after it, `None` if there
/// is none.
async fn change(
    client: &mut Object,
    key: &SecretKey,
    (project, id): (&str, &str),
    now: &str,
    change: impl FnOnce(&mut WebhookRecord, &[SigningKey]) -> Option<Vec<SigningKey>>,
) -> Result<Option<WebhookRecord>> {
    let tx = client.transaction().await?;
    let Some((mut record, keys)) = read(&tx, key, project, id, true).await? else {
        return Ok(None);
    };
    let resealed = change(&mut record, &keys);
    write(&tx, key, project, &record, resealed.as_deref()).await?;
    tx.commit().await?;
    webhooks::show_secrets(&mut record, resealed.as_deref().unwrap_or(&keys), now);
    Ok(Some(record))
}

/// The webhook and its deliveries.
pub(super) async fn delete(client: &mut Object, project: &str, id: &str) -> Result<bool> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM webhooks WHERE project = $1 AND id = $2",
            &[&project, &id],
        )
        .await?;
    tx.execute(
        "DELETE FROM webhook_deliveries WHERE project = $1 AND webhook_id = $2",
        &[&project, &id],
    )
    .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// The secrets that sign at `now`, in full.
pub(super) async fn signing_keys(
    c: &impl GenericClient,
    key: &SecretKey,
    project: &str,
    id: &str,
    now: &str,
) -> Result<Option<Vec<SigningKey>>> {
    Ok(read(c, key, project, id, false)
        .await?
        .map(|(_, keys)| keys.into_iter().filter(|k| k.live_at(now)).collect()))
}

/// [`enqueue`] in a transaction of its own.
pub(super) async fn enqueue_event(
    client: &mut Object,
    project: &str,
    kind: &str,
    data: &Value,
    only: Option<&str>,
    now: &str,
) -> Result<Vec<String>> {
    let tx = client.transaction().await?;
    let ids = enqueue(&tx, project, kind, data, only, now).await?;
    tx.commit().await?;
    Ok(ids)
}
