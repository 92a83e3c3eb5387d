//! `GET /stats` (hookbox extension): guard health over a window, computed from the store for the
//! console's Overview page. It reads the project's interactions created in the window (newest
//! first, at most [`MAX_INTERACTIONS`]; `truncated` says when more were left out) and the hook
//! traces of their result steps, so it answers the same on every replica and after a restart.
//! Process-wide counters for Prometheus are `metrics`'; this is per project and per call.
//!
//! The answer:
//! - `interactions`: counts by status, and `buckets` (the window cut in `buckets` equal spans,
//!   oldest first) of counts by status;
//! - `decisions`: handler runs by outcome (allow, deny, ask, failed_open, failed_closed, ...) in
//!   each bucket;
//! - `guards`: per group (a guard): runs by outcome, fail-opens by cause (`failure.kind`:
//!   non_zero_exit, timed_out, ...), handler latency p50/p95/p99 (nearest rank, ms), runs in each
//!   half of the window, and `health`: `failing` (more failures in the second half than in the
//!   first), `quiet` (ran in the first half, not in the second), or `ok`;
//! - `events`: the newest denies, asks and failures (at most [`MAX_EVENTS`]), each with its
//!   interaction, environment, tool, guard, reason, failure cause and the handler's stderr as
//!   the step's trace has it;
//! - `approvals_waiting`: pending approvals now;
//! - `quotas`: each project the key sees (its own) with its counted quotas' limits and what is
//!   held now (`QuotaBook::usage`: environments and running interactions from the store,
//!   sandboxed processes and live sockets on this replica).
//!
//! An interaction's own hooks (`pre_interaction`, `post_interaction`: its `hooks`) count as
//! their guards' runs too, with the event's name and no tool.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Extension, Query, State};
use chrono::{DateTime, Utc};
use hookbox_protocol::api::{Interaction, Step};
use hookbox_store::{ApprovalFilter, ApprovalState, InteractionFilter, Page};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::{ApiError, ApiResult, AppState, Project};

/// Most interactions read for one answer.
pub const MAX_INTERACTIONS: usize = 2000;
/// Most events listed.
pub const MAX_EVENTS: usize = 200;
/// Most pending approvals counted.
const MAX_APPROVALS: usize = 10_000;
/// Longest window: 30 days.
const MAX_WINDOW_SECS: i64 = 30 * 86_400;

/// Query of `GET /stats`.
#[derive(Debug, Default, Deserialize)]
pub struct StatsQuery {
    /// Seconds back from now (default a day; 60 s to 30 days).
    #[serde(default)]
    window: Option<i64>,
    /// How many spans the charts cut the window into (default 24; 1 to 96).
    #[serde(default)]
    buckets: Option<usize>,
}

/// Hooks that ran for one call (or the interaction itself): its call id (empty for the
/// interaction), its trace, its tool (empty for the interaction), and each phase of the trace
/// with the event name it is listed as.
type Traced<'a> = (
    &'a str,
    &'a Value,
    &'a str,
    [(&'static str, &'static str); 2],
);

#[derive(Default)]
struct Guard {
    outcomes: BTreeMap<String, u64>,
    causes: BTreeMap<String, u64>,
    durations: Vec<u64>,
    halves: [u64; 2],
    failures: [u64; 2],
}

/// `GET /stats?window=SECONDS&buckets=N`: see the module's doc.
pub async fn stats(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    Query(q): Query<StatsQuery>,
) -> ApiResult<Json<Value>> {
    let window = q.window.unwrap_or(86_400);
    if !(60..=MAX_WINDOW_SECS).contains(&window) {
        return Err(ApiError::bad_request(format!(
            "`window` is {window}: give seconds from 60 to {MAX_WINDOW_SECS}."
        )));
    }
    let buckets = q.buckets.unwrap_or(24);
    if !(1..=96).contains(&buckets) {
        return Err(ApiError::bad_request(format!(
            "`buckets` is {buckets}: give 1 to 96."
        )));
    }
    let now = Utc::now();
    let start = now - chrono::Duration::seconds(window);
    let filter = InteractionFilter {
        created_after: Some(start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        ..InteractionFilter::default()
    };
    let store = &state.inner.store;
    let mut listed: Vec<Interaction> = Vec::new();
    let mut token = None;
    let mut truncated = false;
    loop {
        let page = Page {
            size: Some(Page::MAX_SIZE),
            token: token.take(),
        };
        let got = store.list_interactions(&project, &filter, &page).await?;
        listed.extend(got.items);
        if listed.len() >= MAX_INTERACTIONS {
            truncated = listed.len() > MAX_INTERACTIONS || got.next_page_token.is_some();
            listed.truncate(MAX_INTERACTIONS);
            break;
        }
        match got.next_page_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }

    let span_ms = (window * 1000) as f64 / buckets as f64;
    let bucket_of = |created: Option<&str>| -> usize {
        let at = created
            .and_then(|c| DateTime::parse_from_rfc3339(c).ok())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or(now);
        let ms = (at - start).num_milliseconds().max(0) as f64;
        ((ms / span_ms) as usize).min(buckets - 1)
    };
    let mut by_status: BTreeMap<String, u64> = BTreeMap::new();
    let mut status_buckets: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); buckets];
    let mut decision_buckets: Vec<BTreeMap<String, u64>> = vec![BTreeMap::new(); buckets];
    let mut guards: BTreeMap<String, Guard> = BTreeMap::new();
    let mut events: Vec<Value> = Vec::new();
    for listed in &listed {
        let status = listed.status.as_str().to_owned();
        let bucket = bucket_of(listed.created.as_deref());
        *by_status.entry(status.clone()).or_default() += 1;
        *status_buckets[bucket].entry(status).or_default() += 1;
        let id = listed.id.as_str();
        let Some(full) = store.get_interaction(&project, id).await? else {
            continue;
        };
        let half = usize::from(bucket * 2 >= buckets);
        let mut calls: BTreeMap<&str, &str> = BTreeMap::new();
        // What hooks ran: each result step's trace (`pre`, `post`), then the interaction's own.
        let mut traced: Vec<Traced> = Vec::new();
        for step in &full.steps {
            if let Step::FunctionCall { id, name, .. } = step {
                calls.insert(id.as_str(), name.as_str());
            }
            let (call_id, hooks, tool) = match step {
                Step::FunctionResult {
                    call_id,
                    hooks: Some(h),
                    name,
                    ..
                } => (
                    call_id.as_str(),
                    h,
                    name.as_deref()
                        .or_else(|| calls.get(call_id.as_str()).copied())
                        .unwrap_or(""),
                ),
                Step::CodeExecutionResult {
                    call_id,
                    hooks: Some(h),
                    ..
                } => (call_id.as_str(), h, "code_execution"),
                Step::McpServerToolResult {
                    call_id,
                    hooks: Some(h),
                    name,
                    ..
                } => (call_id.as_str(), h, name.as_deref().unwrap_or("")),
                _ => continue,
            };
            traced.push((call_id, hooks, tool, [("pre", "pre"), ("post", "post")]));
        }
        if let Some(hooks) = &full.hooks {
            let events = [("pre", "pre_interaction"), ("post", "post_interaction")];
            traced.push(("", hooks, "", events));
        }
        for (call_id, hooks, tool, phases) in traced {
            for (phase, event) in phases {
                let trace = hooks
                    .get(phase)
                    .and_then(|d| d.get("trace"))
                    .and_then(Value::as_array);
                for h in trace.into_iter().flatten() {
                    let text = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or("");
                    let outcome = text("outcome");
                    let group = text("group");
                    if outcome.is_empty() || matches!(outcome, "skipped" | "disabled") {
                        continue;
                    }
                    let g = guards.entry(group.to_owned()).or_default();
                    *g.outcomes.entry(outcome.to_owned()).or_default() += 1;
                    *decision_buckets[bucket]
                        .entry(outcome.to_owned())
                        .or_default() += 1;
                    g.halves[half] += 1;
                    if let Some(ms) = h.get("duration_ms").and_then(Value::as_u64) {
                        g.durations.push(ms);
                    }
                    let cause = h
                        .get("failure")
                        .and_then(|f| f.get("kind"))
                        .and_then(Value::as_str);
                    if outcome.starts_with("failed") {
                        g.failures[half] += 1;
                    }
                    if outcome == "failed_open" {
                        *g.causes
                            .entry(cause.unwrap_or("unknown").to_owned())
                            .or_default() += 1;
                    }
                    if matches!(outcome, "deny" | "ask") || outcome.starts_with("failed") {
                        events.push(json!({
                            "interaction_id": id,
                            "environment_id": full.environment_id,
                            "created": full.created,
                            "call_id": (!call_id.is_empty()).then_some(call_id),
                            "tool": tool,
                            "event": event,
                            "group": group,
                            "handler_type": text("handler_type"),
                            "outcome": outcome,
                            "reason": h.get("reason"),
                            "failure": cause,
                            "stderr": h.get("stderr"),
                        }));
                    }
                }
            }
        }
    }
    events.truncate(MAX_EVENTS);

    let approvals_waiting = {
        let filter = ApprovalFilter {
            interaction_id: None,
            state: Some(ApprovalState::Pending),
        };
        let mut n = 0usize;
        let mut token = None;
        loop {
            let page = Page {
                size: Some(Page::MAX_SIZE),
                token: token.take(),
            };
            let got = store.list_approvals(&project, &filter, &page).await?;
            n += got.items.len();
            match got.next_page_token {
                Some(t) if n < MAX_APPROVALS => token = Some(t),
                _ => break,
            }
        }
        n
    };

    let guards: Vec<Value> = guards
        .into_iter()
        .map(|(name, mut g)| {
            g.durations.sort_unstable();
            let health = if g.failures[1] > g.failures[0] {
                "failing"
            } else if g.halves[0] > 0 && g.halves[1] == 0 {
                "quiet"
            } else {
                "ok"
            };
            json!({
                "group": name,
                "runs": g.outcomes.values().sum::<u64>(),
                "outcomes": g.outcomes,
                "failed_open_causes": g.causes,
                "latency_ms": {
                    "p50": percentile(&g.durations, 50),
                    "p95": percentile(&g.durations, 95),
                    "p99": percentile(&g.durations, 99),
                },
                "runs_by_half": g.halves,
                "failures_by_half": g.failures,
                "health": health,
            })
        })
        .collect();
    let mut out = Map::new();
    out.insert(
        "window".into(),
        json!({
            "seconds": window,
            "start": start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "end": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "buckets": buckets,
        }),
    );
    out.insert(
        "interactions".into(),
        json!({ "total": listed.len(), "by_status": by_status, "buckets": status_buckets }),
    );
    out.insert("decisions".into(), json!({ "buckets": decision_buckets }));
    out.insert("guards".into(), Value::Array(guards));
    out.insert("events".into(), Value::Array(events));
    out.insert("approvals_waiting".into(), json!(approvals_waiting));
    out.insert("truncated".into(), json!(truncated));
    out.insert(
        "quotas".into(),
        json!([{
            "project": &*project.0,
            "quotas": state.inner.quotas.usage(&project).await?,
        }]),
    );
    Ok(Json(Value::Object(out)))
}

/// Nearest-rank percentile of sorted values; `None` when there are none.
fn percentile(sorted: &[u64], p: usize) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 95), Some(95));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile(&[], 50), None);
    }
}
