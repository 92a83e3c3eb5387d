//! Triggers and their executions in SQLite. The claim of a due run, the start of an execution
//! and its end are each one transaction on the one connection; what they decide comes from
//! [`crate::triggers`].

use hookbox_protocol::api::InteractionStatus;
use hookbox_protocol::triggers::{ExecutionStatus, TriggerExecution, TriggerUpdate};
use rusqlite::{Connection, params};

use super::documents::{self, one, paged};
use crate::documents::TRIGGERS;
use crate::error::{Error, Result, inserted};
use crate::page::{Page, Paged};
use crate::row::Columns;
use crate::triggers::{self, RunStart, TriggerRecord};

pub(super) fn get(conn: &Connection, project: &str, id: &str) -> Result<Option<TriggerRecord>> {
    documents::get(conn, TRIGGERS, project, id)
}

fn write(conn: &Connection, project: &str, record: &TriggerRecord) -> Result<()> {
    with_columns(
        conn,
        "UPDATE triggers SET status = ?3, next_run_ms = ?4, record_json = ?5 WHERE project = ?1 AND id = ?2",
        project,
        record,
    )?;
    Ok(())
}

/// Runs `sql` with the columns of trigger `record` of `project`: `?1` project, `?2` id, `?3`
/// status, `?4` next run, `?5` the record; the rows it changed.
fn with_columns(
    conn: &Connection,
    sql: &str,
    project: &str,
    record: &TriggerRecord,
) -> Result<usize> {
    Ok(conn.prepare_cached(sql)?.execute(params![
        project,
        record.trigger.id,
        record.trigger.status.as_str(),
        record.next_run_ms,
        serde_json::to_string(record)?
    ])?)
}

fn read_execution(conn: &Connection, project: &str, id: &str) -> Result<Option<TriggerExecution>> {
    one(
        conn,
        "SELECT record_json FROM trigger_executions WHERE project = ?1 AND id = ?2",
        params![project, id],
        |r| r.json(0),
    )
}

fn write_execution(conn: &Connection, execution: &TriggerExecution) -> Result<()> {
    conn.prepare_cached(
        "UPDATE trigger_executions SET status = ?2, interaction_id = ?3, record_json = ?4 WHERE id = ?1",
    )?
    .execute(params![
        execution.id,
        execution.status.as_str(),
        execution.interaction_id,
        serde_json::to_string(execution)?
    ])?;
    Ok(())
}

/// Ends `execution` of `project` (and counts it for its trigger), inside `conn`'s transaction.
fn end_execution_in(
    conn: &Connection,
    project: &str,
    mut execution: TriggerExecution,
    status: ExecutionStatus,
    error: Option<String>,
    now: &str,
) -> Result<bool> {
    let mut trigger = get(conn, project, &execution.trigger_id)?;
    if !triggers::end_execution(trigger.as_mut(), &mut execution, status, error, now) {
        return Ok(false);
    }
    write_execution(conn, &execution)?;
    if let Some(trigger) = &trigger {
        write(conn, project, trigger)?;
    }
    Ok(true)
}

/// Ends the running executions that created interaction `id`, now that it ended `status`.
pub(super) fn end_executions_of(
    conn: &Connection,
    interaction_id: &str,
    status: InteractionStatus,
    now: &str,
) -> Result<()> {
    let Some((end, error)) = triggers::execution_end(status) else {
        return Ok(());
    };
    let running = conn
        .prepare_cached(
            "SELECT project, record_json FROM trigger_executions WHERE interaction_id = ?1 AND status = 'in_progress'",
        )?
        .query_and_then(params![interaction_id], |r| {
            Ok::<_, Error>((r.text(0)?, r.json::<TriggerExecution>(1)?))
        })?
        .collect::<Result<Vec<_>>>()?;
    for (project, execution) in running {
        end_execution_in(conn, &project, execution, end, error.clone(), now)?;
    }
    Ok(())
}

pub(super) fn create(conn: &Connection, project: &str, record: &TriggerRecord) -> Result<()> {
    let n = with_columns(
        conn,
        "INSERT OR IGNORE INTO triggers (project, id, status, next_run_ms, record_json) VALUES (?1, ?2, ?3, ?4, ?5)",
        project,
        record,
    )?;
    inserted(n > 0, "trigger", &record.trigger.id)
}

pub(super) fn list(conn: &Connection, project: &str, page: &Page) -> Result<Paged<TriggerRecord>> {
    documents::list(conn, TRIGGERS, project, page)
}

pub(super) fn update(
    conn: &mut Connection,
    project: &str,
    id: &str,
    update: &TriggerUpdate,
    resume_next_ms: Option<i64>,
    now: &str,
) -> Result<Option<TriggerRecord>> {
    let tx = conn.savepoint()?;
    let Some(mut record) = get(&tx, project, id)? else {
        return Ok(None);
    };
    triggers::apply_update(&mut record, update, resume_next_ms, now);
    write(&tx, project, &record)?;
    tx.commit()?;
    Ok(Some(record))
}

/// The trigger and its executions.
pub(super) fn delete(conn: &mut Connection, project: &str, id: &str) -> Result<bool> {
    let tx = conn.savepoint()?;
    let n = tx.execute(
        "DELETE FROM triggers WHERE project = ?1 AND id = ?2",
        params![project, id],
    )?;
    tx.execute(
        "DELETE FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2",
        params![project, id],
    )?;
    tx.commit()?;
    Ok(n > 0)
}

/// Active triggers of every project due at `now_ms`, oldest due first.
pub(super) fn due(
    conn: &Connection,
    now_ms: i64,
    limit: u32,
) -> Result<Vec<(String, TriggerRecord)>> {
    conn.prepare_cached(
        "SELECT project, record_json FROM triggers WHERE status = 'active' AND next_run_ms <= ?1 ORDER BY next_run_ms LIMIT ?2",
    )?
    .query_and_then(params![now_ms, i64::from(limit)], |r| {
        Ok::<_, Error>((r.text(0)?, r.json(1)?))
    })?
    .collect()
}

pub(super) fn start_execution(
    conn: &mut Connection,
    project: &str,
    id: &str,
    claim: Option<(i64, Option<i64>)>,
    scheduled: &str,
    now: &str,
) -> Result<RunStart> {
    let tx = conn.savepoint()?;
    let Some(mut record) = triggers::claim(get(&tx, project, id)?, claim) else {
        return Ok(RunStart::Lost);
    };
    let busy = tx
        .prepare_cached(
            "SELECT 1 FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2 AND status = 'in_progress'",
        )?
        .exists(params![project, id])?;
    let execution = triggers::start(&mut record, busy, scheduled, now);
    tx.prepare_cached(
        "INSERT INTO trigger_executions (id, project, trigger_id, status, record_json) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        execution.id,
        project,
        id,
        execution.status.as_str(),
        serde_json::to_string(&execution)?
    ])?;
    write(&tx, project, &record)?;
    tx.commit()?;
    Ok(RunStart::of(execution))
}

pub(super) fn attach_interaction(
    conn: &mut Connection,
    project: &str,
    execution_id: &str,
    interaction_id: &str,
    environment_id: Option<&str>,
    now: &str,
) -> Result<()> {
    let tx = conn.savepoint()?;
    let Some(mut execution) = read_execution(&tx, project, execution_id)? else {
        return Ok(());
    };
    triggers::attach(&mut execution, interaction_id, environment_id);
    write_execution(&tx, &execution)?;
    if let Some(mut trigger) = get(&tx, project, &execution.trigger_id)? {
        trigger.trigger.previous_interaction_id = Some(interaction_id.to_owned());
        write(&tx, project, &trigger)?;
    }
    // It may have ended before it was linked.
    let status = one(
        &tx,
        "SELECT status FROM interactions WHERE id = ?1",
        params![interaction_id],
        |r| r.text(0),
    )?;
    if let Some(status) = status.as_deref().and_then(InteractionStatus::parse) {
        end_executions_of(&tx, interaction_id, status, now)?;
    }
    tx.commit()?;
    Ok(())
}

pub(super) fn end_execution(
    conn: &mut Connection,
    project: &str,
    execution_id: &str,
    status: ExecutionStatus,
    error: Option<&str>,
    now: &str,
) -> Result<bool> {
    let tx = conn.savepoint()?;
    let Some(execution) = read_execution(&tx, project, execution_id)? else {
        return Ok(false);
    };
    let ended = end_execution_in(
        &tx,
        project,
        execution,
        status,
        error.map(str::to_owned),
        now,
    )?;
    tx.commit()?;
    Ok(ended)
}

/// Executions of one trigger, newest first.
pub(super) fn list_executions(
    conn: &Connection,
    project: &str,
    trigger_id: &str,
    page: &Page,
) -> Result<Paged<TriggerExecution>> {
    paged(
        conn,
        "SELECT seq, record_json FROM trigger_executions WHERE project = ?1 AND trigger_id = ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4",
        params![project, trigger_id, page.before(), page.fetch()],
        page,
        |r| r.json(0),
    )
}
