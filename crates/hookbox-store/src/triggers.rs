//! Triggers as stored, and their executions: what both backends share.
//!
//! The store knows no cron: the scheduler computes every `next_run_ms`. What the store makes
//! atomic is the claim of a run: [`crate::Store::start_trigger_execution`] moves a trigger's
//! `next_run_ms` from the value the scheduler read to the next one, in the transaction that
//! writes the execution, so among any number of replicas exactly one fires each due run. An
//! execution ends in the transaction that stores its interaction's end status (or when the
//! scheduler times it out or cannot create the interaction), which also counts failures and
//! moves the trigger to `error` at `max_consecutive_failures`.

use hookbox_protocol::api::InteractionStatus;
use hookbox_protocol::triggers::{
    ExecutionStatus, Trigger, TriggerExecution, TriggerStatus, TriggerUpdate,
};
use serde::{Deserialize, Serialize};

/// A trigger as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriggerRecord {
    pub trigger: Trigger,
    /// Unix milliseconds of the next run (`None` while paused or in error).
    #[serde(default)]
    pub next_run_ms: Option<i64>,
}

impl TriggerRecord {
    /// Sets the next run, and the `next_run_time` shown with it.
    pub fn set_next_run(&mut self, next_ms: Option<i64>) {
        self.next_run_ms = next_ms;
        self.trigger.next_run_time =
            next_ms.map(|ms| crate::time::format_unix(ms.div_euclid(1000)));
    }
}

/// What an execution's end is, from its interaction's end status (`None`: not ended).
pub fn execution_end(status: InteractionStatus) -> Option<(ExecutionStatus, Option<String>)> {
    match status {
        InteractionStatus::Completed => Some((ExecutionStatus::Completed, None)),
        InteractionStatus::Failed
        | InteractionStatus::Cancelled
        | InteractionStatus::Incomplete
        | InteractionStatus::BudgetExceeded => Some((
            ExecutionStatus::Failed,
            Some(format!("the interaction ended {}", status.as_str())),
        )),
        _ => None,
    }
}

/// Ends `execution` (if it is still running) with `status`, and counts it for `trigger`:
/// a completion resets the failures, a failure or time-out adds one and, at the trigger's
/// `max_consecutive_failures`, moves it to `error` (no further runs). `true` if it ended here.
pub(crate) fn end_execution(
    trigger: Option<&mut TriggerRecord>,
    execution: &mut TriggerExecution,
    status: ExecutionStatus,
    error: Option<String>,
    now: &str,
) -> bool {
    if execution.status != ExecutionStatus::InProgress {
        return false;
    }
    execution.status = status;
    execution.end_time = Some(now.to_owned());
    if error.is_some() {
        execution.error = error;
    }
    if let Some(record) = trigger {
        let t = &mut record.trigger;
        match status {
            ExecutionStatus::Completed => t.consecutive_failure_count = 0,
            ExecutionStatus::Failed | ExecutionStatus::TimedOut => {
                t.consecutive_failure_count = t.consecutive_failure_count.saturating_add(1);
                if let Some(max) = t.max_consecutive_failures.filter(|m| *m > 0)
                    && t.consecutive_failure_count >= max
                    && t.status == TriggerStatus::Active
                {
                    t.status = TriggerStatus::Error;
                    t.last_pause_time = Some(now.to_owned());
                    t.update_time = now.to_owned();
                    record.set_next_run(None);
                    tracing::warn!(
                        trigger_id = %record.trigger.id,
                        failures = record.trigger.consecutive_failure_count,
                        "trigger paused after consecutive failures"
                    );
                }
            }
            ExecutionStatus::InProgress | ExecutionStatus::Skipped => {}
        }
    }
    true
}

/// The record after `update` at `now`; `resume_next_ms` is the next run when it is resumed.
pub(crate) fn apply_update(
    record: &mut TriggerRecord,
    update: &TriggerUpdate,
    resume_next_ms: Option<i64>,
    now: &str,
) {
    if let Some(name) = &update.display_name {
        record.trigger.display_name = Some(name.clone());
    }
    match update.status {
        Some(TriggerStatus::Active) if record.trigger.status != TriggerStatus::Active => {
            record.trigger.status = TriggerStatus::Active;
            record.trigger.consecutive_failure_count = 0;
            record.trigger.last_resume_time = Some(now.to_owned());
            record.set_next_run(resume_next_ms);
        }
        Some(TriggerStatus::Paused) if record.trigger.status != TriggerStatus::Paused => {
            record.trigger.status = TriggerStatus::Paused;
            record.trigger.last_pause_time = Some(now.to_owned());
            record.set_next_run(None);
        }
        _ => {}
    }
    record.trigger.update_time = now.to_owned();
}

/// Claims a run of `record` (the trigger as stored, if it still is): `claim` is, for a
/// scheduled run, the `next_run_ms` the caller read and the one after it. `None` (the run is
/// lost) when the trigger is gone, its stored next run is no longer the one read, or it is not
/// active (another replica took the run, or the trigger changed); else the trigger, moved on to
/// the next run. A manual run (`claim` `None`) proceeds while the trigger exists.
pub(crate) fn claim(
    record: Option<TriggerRecord>,
    claim: Option<(i64, Option<i64>)>,
) -> Option<TriggerRecord> {
    let mut record = record?;
    if let Some((expected, next)) = claim {
        if record.next_run_ms != Some(expected) || record.trigger.status != TriggerStatus::Active {
            return None;
        }
        record.set_next_run(next);
    }
    Some(record)
}

/// The execution a run of `record` starts at `now` (scheduled at `scheduled`): `skipped` at once
/// while an earlier one still runs (`busy`), else running, and the trigger's last run is now.
pub(crate) fn start(
    record: &mut TriggerRecord,
    busy: bool,
    scheduled: &str,
    now: &str,
) -> TriggerExecution {
    let mut execution = TriggerExecution {
        id: format!("exec_{:016x}", rand::random::<u64>()),
        trigger_id: record.trigger.id.clone(),
        status: ExecutionStatus::InProgress,
        scheduled_time: Some(scheduled.to_owned()),
        start_time: Some(now.to_owned()),
        end_time: None,
        interaction_id: None,
        environment_id: record.trigger.environment_id.clone(),
        error: None,
    };
    if busy {
        execution.status = ExecutionStatus::Skipped;
        execution.end_time = Some(now.to_owned());
        execution.error = Some("the previous execution was still running".into());
    } else {
        record.trigger.last_run_time = Some(now.to_owned());
    }
    execution
}

/// Links `execution` to the interaction it created (and the environment that runs it, when
/// known).
pub(crate) fn attach(
    execution: &mut TriggerExecution,
    interaction_id: &str,
    environment_id: Option<&str>,
) {
    execution.interaction_id = Some(interaction_id.to_owned());
    if let Some(env) = environment_id {
        execution.environment_id = Some(env.to_owned());
    }
}

/// How a claim of a run went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStart {
    /// This caller runs it: create the interaction and attach it.
    Run(TriggerExecution),
    /// Recorded as `skipped`: the previous execution still runs.
    Skipped(TriggerExecution),
    /// Another replica claimed it, or the trigger changed (paused, deleted) meanwhile.
    Lost,
}

impl RunStart {
    /// A started execution ([`start`]): run it, or it was skipped.
    pub(crate) fn of(execution: TriggerExecution) -> Self {
        if execution.status == ExecutionStatus::Skipped {
            RunStart::Skipped(execution)
        } else {
            RunStart::Run(execution)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(max: Option<u32>) -> TriggerRecord {
        TriggerRecord {
            trigger: serde_json::from_value(serde_json::json!({
                "id": "trg_1", "interaction": {}, "schedule": "* * * * *", "time_zone": "UTC",
                "status": "active", "create_time": "t", "update_time": "t",
                "max_consecutive_failures": max
            }))
            .unwrap(),
            next_run_ms: Some(60_000),
        }
    }

    fn running() -> TriggerExecution {
        TriggerExecution {
            id: "exec_1".into(),
            trigger_id: "trg_1".into(),
            status: ExecutionStatus::InProgress,
            scheduled_time: None,
            start_time: None,
            end_time: None,
            interaction_id: None,
            environment_id: None,
            error: None,
        }
    }

    #[test]
    fn failures_pause_the_trigger_at_the_maximum_and_a_success_resets_them() {
        let mut t = trigger(Some(2));
        assert!(end_execution(
            Some(&mut t),
            &mut running(),
            ExecutionStatus::Failed,
            None,
            "n"
        ));
        assert_eq!(
            (t.trigger.consecutive_failure_count, t.trigger.status),
            (1, TriggerStatus::Active)
        );
        end_execution(
            Some(&mut t),
            &mut running(),
            ExecutionStatus::Completed,
            None,
            "n",
        );
        assert_eq!(t.trigger.consecutive_failure_count, 0);
        end_execution(
            Some(&mut t),
            &mut running(),
            ExecutionStatus::TimedOut,
            None,
            "n",
        );
        end_execution(
            Some(&mut t),
            &mut running(),
            ExecutionStatus::Failed,
            None,
            "n",
        );
        assert_eq!(t.trigger.status, TriggerStatus::Error);
        assert_eq!(
            (t.next_run_ms, t.trigger.next_run_time.clone()),
            (None, None)
        );
        // An ended execution does not end again (nor count twice).
        let mut done = running();
        end_execution(None, &mut done, ExecutionStatus::TimedOut, None, "n");
        assert!(!end_execution(
            Some(&mut t),
            &mut done,
            ExecutionStatus::Failed,
            None,
            "n"
        ));
        assert_eq!(done.status, ExecutionStatus::TimedOut);
    }

    #[test]
    fn pausing_clears_the_next_run_and_resuming_sets_it() {
        let mut t = trigger(None);
        let pause = TriggerUpdate {
            status: Some(TriggerStatus::Paused),
            ..Default::default()
        };
        apply_update(&mut t, &pause, Some(5), "p");
        assert_eq!(
            (t.trigger.status, t.next_run_ms),
            (TriggerStatus::Paused, None)
        );
        assert_eq!(t.trigger.last_pause_time.as_deref(), Some("p"));
        let resume = TriggerUpdate {
            status: Some(TriggerStatus::Active),
            ..Default::default()
        };
        apply_update(&mut t, &resume, Some(120_000), "r");
        assert_eq!(t.next_run_ms, Some(120_000));
        assert_eq!(
            t.trigger.next_run_time.as_deref(),
            Some("1970-01-01T00:02:00Z")
        );
    }
}
