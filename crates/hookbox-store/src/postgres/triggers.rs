//! Triggers and their executions in PostgreSQL. The claim of a due run reads the trigger
//! `FOR UPDATE`, so two replicas claiming the same run take turns and the second sees the moved
//! `next_run_ms` and loses; what the claim, the start and the end decide comes from
//! [`crate::triggers`].

use deadpool_postgres::{GenericClient, Object};
use hookbox_protocol::api::InteractionStatus;
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution, TriggerUpdate};

use super::documents::{self, Params, one, paged};
use crate::documents::TRIGGERS;
use crate::error::{Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;
use crate::triggers::{self, RunStart, TriggerRecord};

async fn write(c: &impl GenericClient, project: &str, record: &TriggerRecord) -> Result<()> {
    with_columns(
        c,
        "UPDATE triggers SET status = $3, next_run_ms = $4, record_json = $5 WHERE project = $1 AND id = $2",
        project,
        record,
    )
    .await?;
    Ok(())
}

/// Runs `sql` with the columns of trigger `record` of `project`: `$1` project, `$2` id, `$3`
/// status, `$4` next run, `$5` the record; the rows it changed.
async fn with_columns(
    c: &impl GenericClient,
    sql: &str,
    project: &str,
    record: &TriggerRecord,
) -> Result<u64> {
    let json = serde_json::to_string(record)?;
    let status = record.trigger.status.as_str();
    let params: Params<'_> = &[
        &project,
        &record.trigger.id,
        &status,
        &record.next_run_ms,
        &json,
    ];
    Ok(c.execute(sql, params).await?)
}

/// An execution, its row locked until the transaction ends.
async fn read_execution(
    c: &impl GenericClient,
    project: &str,
    id: &str,
) -> Result<Option<TriggerExecution>> {
    one(
        c,
        "SELECT record_json FROM trigger_executions WHERE project = $1 AND id = $2 FOR UPDATE",
        &[&project, &id],
        |r| r.json(0),
    )
    .await
}

async fn write_execution(c: &impl GenericClient, execution: &TriggerExecution) -> Result<()> {
    c.execute(
        "UPDATE trigger_executions SET status = $2, interaction_id = $3, record_json = $4 WHERE id = $1",
        &[
            &execution.id,
            &execution.status.as_str(),
            &execution.interaction_id,
            &serde_json::to_string(execution)?,
        ],
    )
    .await?;
    Ok(())
}

/// Ends `execution` of `project` (and counts it for its trigger), in `c`'s transaction.
async fn end_execution_in(
    c: &impl GenericClient,
    project: &str,
    mut execution: TriggerExecution,
    status: ExecutionStatus,
    error: Option<String>,
    now: &str,
) -> Result<bool> {
    let mut trigger = documents::get(c, TRIGGERS, project, &execution.trigger_id, true).await?;
    if !triggers::end_execution(trigger.as_mut(), &mut execution, status, error, now) {
        return Ok(false);
    }
    write_execution(c, &execution).await?;
    if let Some(trigger) = &trigger {
        write(c, project, trigger).await?;
    }
    Ok(true)
}

/// Ends the running executions that created interaction `id`, now that it ended `status`.
pub(super) async fn end_executions_of(
    c: &impl GenericClient,
    interaction_id: &str,
    status: InteractionStatus,
    now: &str,
) -> Result<()> {
    let Some((end, error)) = triggers::execution_end(status) else {
        return Ok(());
    };
    let running = c
        .query(
            "SELECT project, record_json FROM trigger_executions WHERE interaction_id = $1 AND status = 'in_progress' FOR UPDATE",
            &[&interaction_id],
        )
        .await?
        .iter()
        .map(|r| Ok((r.text(0)?, r.json::<TriggerExecution>(1)?)))
        .collect::<Result<Vec<_>>>()?;
    for (project, execution) in running {
        end_execution_in(c, &project, execution, end, error.clone(), now).await?;
    }
    Ok(())
}

pub(super) async fn create(
    c: &impl GenericClient,
    project: &str,
    record: &TriggerRecord,
) -> Result<()> {
    let n = with_columns(
        c,
        "INSERT INTO triggers (project, id, status, next_run_ms, record_json) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (project, id) DO NOTHING",
        project,
        record,
    )
    .await?;
    inserted(n > 0, "trigger", &record.trigger.id)
}

pub(super) async fn update(
    client: &mut Object,
    project: &str,
    id: &str,
    update: &TriggerUpdate,
    resume_next_ms: Option<i64>,
    now: &str,
) -> Result<Option<TriggerRecord>> {
    let tx = client.transaction().await?;
    let Some(mut record) = documents::get(&tx, TRIGGERS, project, id, true).await? else {
        return Ok(None);
    };
    triggers::apply_update(&mut record, update, resume_next_ms, now);
    write(&tx, project, &record).await?;
    tx.commit().await?;
    Ok(Some(record))
}

/// The trigger and its executions.
pub(super) async fn delete(client: &mut Object, project: &str, id: &str) -> Result<bool> {
    let tx = client.transaction().await?;
    let n = tx
        .execute(
            "DELETE FROM triggers WHERE project = $1 AND id = $2",
            &[&project, &id],
        )
        .await?;
    tx.execute(
        "DELETE FROM trigger_executions WHERE project = $1 AND trigger_id = $2",
        &[&project, &id],
    )
    .await?;
    tx.commit().await?;
    Ok(n > 0)
}

/// Active triggers of every project due at `now_ms`, oldest due first.
pub(super) async fn due(
    c: &impl GenericClient,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<(String, TriggerRecord)>> {
    c.query(
        "SELECT project, record_json FROM triggers WHERE status = 'active' AND next_run_ms <= $1 ORDER BY next_run_ms LIMIT $2",
        &[&now_ms, &i64::from(limit)],
    )
    .await?
    .iter()
    .map(|r| Ok((r.text(0)?, r.json(1)?)))
    .collect()
}

pub(super) async fn start_execution(
    client: &mut Object,
    project: &str,
    id: &str,
    claim: Option<(i64, Option<i64>)>,
    scheduled: &str,
    now: &str,
) -> Result<RunStart> {
    let tx = client.transaction().await?;
    // FOR UPDATE: two replicas claiming the same run take turns here; the second then sees
    // the moved next_run_ms and loses.
    let stored = documents::get(&tx, TRIGGERS, project, id, true).await?;
    let Some(mut record) = triggers::claim(stored, claim) else {
        return Ok(RunStart::Lost);
    };
    let busy = tx
        .query_opt(
            "SELECT 1 FROM trigger_executions WHERE project = $1 AND trigger_id = $2 AND status = 'in_progress' LIMIT 1",
            &[&project, &id],
        )
        .await?
        .is_some();
    let execution = triggers::start(&mut record, busy, scheduled, now);
    tx.execute(
        "INSERT INTO trigger_executions (id, project, trigger_id, status, record_json) VALUES ($1, $2, $3, $4, $5)",
        &[
            &execution.id,
            &project,
            &id,
            &execution.status.as_str(),
            &serde_json::to_string(&execution)?,
        ],
    )
    .await?;
    write(&tx, project, &record).await?;
    tx.commit().await?;
    Ok(RunStart::of(execution))
}

pub(super) async fn attach_interaction(
    client: &mut Object,
    project: &str,
    execution_id: &str,
    interaction_id: &str,
    environment_id: Option<&str>,
    now: &str,
) -> Result<()> {
    let tx = client.transaction().await?;
    let Some(mut execution) = read_execution(&tx, project, execution_id).await? else {
        return Ok(());
    };
    triggers::attach(&mut execution, interaction_id, environment_id);
    write_execution(&tx, &execution).await?;
    if let Some(mut trigger) =
        documents::get::<TriggerRecord>(&tx, TRIGGERS, project, &execution.trigger_id, true).await?
    {
        trigger.trigger.previous_interaction_id = Some(interaction_id.to_owned());
        write(&tx, project, &trigger).await?;
    }
    // It may have ended before it was linked.
    let status = one(
        &tx,
        "SELECT status FROM interactions WHERE id = $1",
        &[&interaction_id],
        |r| r.text(0),
    )
    .await?;
    if let Some(status) = status.as_deref().and_then(InteractionStatus::parse) {
        end_executions_of(&tx, interaction_id, status, now).await?;
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn end_execution(
    client: &mut Object,
    project: &str,
    execution_id: &str,
    status: ExecutionStatus,
    error: Option<&str>,
    now: &str,
) -> Result<bool> {
    let tx = client.transaction().await?;
    let Some(execution) = read_execution(&tx, project, execution_id).await? else {
        return Ok(false);
    };
    let ended = end_execution_in(
        &tx,
        project,
        execution,
        status,
        error.map(str::to_owned),
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(ended)
}

/// Executions of one trigger, newest first.
pub(super) async fn list_executions(
    c: &impl GenericClient,
    project: &str,
    trigger_id: &str,
    page: &Page,
) -> Result<Paged<TriggerExecution>> {
    paged(
        c,
        "SELECT seq, record_json FROM trigger_executions WHERE project = $1 AND trigger_id = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4",
        &[&project, &trigger_id, &page.before(), &page.fetch()],
        page,
        |r| r.json(0),
    )
    .await
}
