//! Cluster-wide quotas in PostgreSQL: places (a running interaction, a running tool call) held
//! by live replicas and counted under an advisory lock per quota and project, and one request
//! bucket per project that replicas draw from in small batches.

use deadpool_postgres::Object;

use super::replica::{ClusterState, lock};
use crate::cluster::TokenGrant;
use crate::error::Result;

/// `text` as an SQL string literal (for the one statement sent by the simple query protocol,
/// which takes no parameters).
fn sql_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Takes one of `limit` places of `quota` for `project` for `replica`: the hold's id, or `None`
/// when live replicas hold them all.
pub(super) async fn hold(
    client: &Object,
    replica: &str,
    quota: &str,
    project: &str,
    limit: u64,
) -> Result<Option<String>> {
    let id = format!("hold_{:016x}", rand::random::<u64>());
    let (quota, project, replica) = (
        sql_literal(quota),
        sql_literal(project),
        sql_literal(replica),
    );
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // One round trip: under a lock per (quota, project), count the places live replicas
    // hold and take one if there is room (a stopped replica's places do not count). READ
    // COMMITTED whatever the database's default, so the count sees the places committed while
    // this waited for the lock.
    let sent = client
        .simple_query(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED;
             SELECT pg_advisory_xact_lock(hashtextextended('quota:' || {quota} || ':' || {project}, 0));
             INSERT INTO quota_holds (id, project, quota, replica)
             SELECT '{id}', {project}, {quota}, {replica}
             WHERE (SELECT count(*) FROM quota_holds h JOIN replicas r ON r.id = h.replica
                    WHERE h.project = {project} AND h.quota = {quota} AND r.expires_at > now()) < {limit}
             RETURNING id;
             COMMIT;"
        ))
        .await;
    let messages = match sent {
        Ok(messages) => messages,
        Err(e) => {
            // The pooled connection must not stay inside the failed transaction.
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e.into());
        }
    };
    // The INSERT's row, if any, is the id (the lock's SELECT returns a row too).
    let taken = messages.iter().any(|m| {
        matches!(m, tokio_postgres::SimpleQueryMessage::Row(row) if row.get(0) == Some(id.as_str()))
    });
    Ok(taken.then_some(id))
}

/// Gives a place back.
pub(super) async fn unhold(client: &Object, hold: &str) -> Result<()> {
    client
        .execute("DELETE FROM quota_holds WHERE id = $1", &[&hold])
        .await?;
    Ok(())
}

/// Takes up to `want` whole tokens (at least one) from `project`'s request bucket.
pub(super) async fn take_tokens(
    client: &Object,
    state: &ClusterState,
    project: &str,
    rate: f64,
    burst: f64,
    want: f64,
) -> Result<TokenGrant> {
    let burst = burst.max(1.0);
    if !lock(&state.buckets).contains(project) {
        client
            .execute(
                "INSERT INTO rate_buckets (project, tokens, updated) VALUES ($1, $2::float8, now())
                 ON CONFLICT (project) DO NOTHING",
                &[&project, &burst],
            )
            .await?;
        lock(&state.buckets).insert(project.to_owned());
    }
    // One statement: refill by the time since the last take, then take up to `want` whole
    // tokens if there is at least one (the row lock serialises replicas).
    // The bucket refilled by the time since the last take ($2: rate, $3: burst). The time is
    // `clock_timestamp()`, read when the row is read under its lock (PostgreSQL reads a row
    // changed while it waited again), not `now()` (when the statement began): a take that
    // waited for the lock while another replica's take committed a later `updated` would
    // otherwise refill by a negative time and take tokens away; and the refill never goes
    // below zero, nor `updated` back.
    const REFILLED: &str = "LEAST($3::float8, tokens + \
         GREATEST(0, EXTRACT(EPOCH FROM (clock_timestamp() - updated)))::float8 * $2::float8)";
    let taken = client
        .query_opt(
            &format!(
                "UPDATE rate_buckets b SET tokens = r.refilled - r.take,
                     updated = GREATEST(b.updated, clock_timestamp())
                 FROM (SELECT refilled, LEAST($4::float8, floor(refilled)) AS take FROM (
                         SELECT {REFILLED} AS refilled
                         FROM rate_buckets WHERE project = $1 FOR UPDATE) f) r
                 WHERE b.project = $1 AND r.take >= 1
                 RETURNING r.take"
            ),
            &[&project, &rate, &burst, &want.max(1.0)],
        )
        .await?;
    if let Some(row) = taken {
        return Ok(TokenGrant::Granted(row.get(0)));
    }
    let tokens: f64 = client
        .query_opt(
            &format!("SELECT {REFILLED} FROM rate_buckets WHERE project = $1"),
            &[&project, &rate, &burst],
        )
        .await?
        .map_or(0.0, |row| row.get(0));
    Ok(TokenGrant::Wait(
        (1.0 - tokens).max(0.0) / rate.max(f64::MIN_POSITIVE),
    ))
}
