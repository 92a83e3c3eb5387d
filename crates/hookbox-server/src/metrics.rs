//! Prometheus metrics, in the text format (`prometheus-client`), fed by a `tracing` layer.
//!
//! The crates already emit one structured event per interaction, tool call, hook handler, model
//! turn and egress decision; [`MetricsLayer`] turns those into counters and histograms, so no
//! crate needs a metrics dependency. The event names and fields it reads are listed in
//! its `on_event` (the `Layer` implementation); the end-to-end test in `crates/hookbox/tests` keeps them honest.
//! This module must not change what is logged.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    event: String,
    tool: String,
    group: String,
    handler_type: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookTypeLabel {
    event: String,
    handler_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabel {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WarmLabel {
    warm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    /// One of `hookbox_browser_guard::Refusal::REASONS`, never a client's value.
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EgressLabels {
    outcome: String,
    reason: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    // 0.5 ms .. ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// The registry and the metrics in it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    interactions: Family<StatusLabel, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_seconds: Histograms<ToolLabel>,
    hook_runs: Family<HookLabels, Counter>,
    hook_seconds: Histograms<HookTypeLabel>,
    model_seconds: Histograms<ModelLabel>,
    egress: Family<EgressLabels, Counter>,
    sandbox_start_seconds: Histograms<WarmLabel>,
    open_environments: Gauge,
    pending_checkpoints: Gauge,
    snapshots: Family<SnapshotLabels, Counter>,
    snapshot_bytes: Counter,
    webhook_deliveries: Family<OutcomeLabel, Counter>,
    approvals: Family<OutcomeLabel, Counter>,
    hooks_file_errors: Counter,
    guard_refusals: Family<ReasonLabel, Counter>,
    enabled: AtomicBool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    /// Webhook deliveries: `delivered`, `retrying`, `gave_up`; approvals: `approved`,
    /// `denied`, `timed_out`.
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SnapshotLabels {
    /// `checkpoint`, `checkpoint_failed`, `checkpoint_stale`, `restore`, `evict`, `expire`,
    /// `lease_lost`.
    operation: String,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("hookbox");
        let interactions = Family::<StatusLabel, Counter>::default();
        registry.register(
            "interactions",
            "Interactions that ended, by status",
            interactions.clone(),
        );
        let tool_calls = Family::<ToolLabels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls, by tool and outcome (ok, error, denied)",
            tool_calls.clone(),
        );
        let tool_seconds: Histograms<ToolLabel> = Family::new_with_constructor(latency);
        registry.register(
            "tool_call_seconds",
            "Tool call latency, hooks included",
            tool_seconds.clone(),
        );
        let hook_runs = Family::<HookLabels, Counter>::default();
        registry.register(
            "hook_handler_runs",
            "Hook handler runs, by event, tool, group, handler type and outcome (allow, deny, completed, failed_open, failed_closed, ...)",
            hook_runs.clone(),
        );
        let hook_seconds: Histograms<HookTypeLabel> = Family::new_with_constructor(latency);
        registry.register(
            "hook_handler_seconds",
            "Hook handler latency",
            hook_seconds.clone(),
        );
        let model_seconds: Histograms<ModelLabel> = Family::new_with_constructor(latency);
        registry.register(
            "model_turn_seconds",
            "Model call latency",
            model_seconds.clone(),
        );
        let egress = Family::<EgressLabels, Counter>::default();
        registry.register(
            "egress_requests",
            "Egress requests, allowed or blocked, with the rule that blocked them",
            egress.clone(),
        );
        let sandbox_start_seconds: Histograms<WarmLabel> = Family::new_with_constructor(latency);
        registry.register(
            "sandbox_start_seconds",
            "Time from asking for a sandboxed program to it running (warm sandboxes; the first call of an environment builds its sandbox)",
            sandbox_start_seconds.clone(),
        );
        let pending_checkpoints = Gauge::default();
        registry.register(
            "snapshot_pending_checkpoints",
            "Environments with a checkpoint scheduled or running (with --snapshot-store); it grows while the object store fails",
            pending_checkpoints.clone(),
        );
        let open_environments = Gauge::default();
        registry.register(
            "open_environments",
            "Environments open in this server (each with its warm sandbox once used)",
            open_environments.clone(),
        );
        let snapshots = Family::<SnapshotLabels, Counter>::default();
        registry.register(
            "environment_lifecycle",
            "Snapshot and expiry operations on environments, by operation (checkpoint, checkpoint_failed, checkpoint_stale, restore, evict, expire, lease_lost)",
            snapshots.clone(),
        );
        let webhook_deliveries = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts, by outcome (delivered, retrying, gave_up)",
            webhook_deliveries.clone(),
        );
        let approvals = Family::<OutcomeLabel, Counter>::default();
        registry.register(
            "approvals",
            "Calls a hook asked a person about, by how they were settled (approved, denied, timed_out)",
            approvals.clone(),
        );
        let hooks_file_errors = Counter::default();
        registry.register(
            "hooks_file_errors",
            "Errors found in environments' hooks files (each part skipped, so its gate fails open), counted once per change of a file",
            hooks_file_errors.clone(),
        );
        let guard_refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "browser_guard_refusals",
            "Requests the browser guard refused (DNS rebinding, cross-site pages, simple bodies), by reason (foreign_host, missing_host, foreign_origin, cross_site, not_json, ...)",
            guard_refusals.clone(),
        );
        // Every reason is exported from the start (at 0), so a rate or an alert has a series.
        for reason in hookbox_browser_guard::Refusal::REASONS {
            drop(guard_refusals.get_or_create(&ReasonLabel { reason }));
        }
        let snapshot_bytes = Counter::default();
        registry.register(
            "snapshot_uploaded_bytes",
            "Bytes of environment snapshots uploaded to the object store (compressed)",
            snapshot_bytes.clone(),
        );
        Self {
            snapshots,
            snapshot_bytes,
            webhook_deliveries,
            approvals,
            hooks_file_errors,
            guard_refusals,
            registry,
            sandbox_start_seconds,
            open_environments,
            pending_checkpoints,
            interactions,
            tool_calls,
            tool_seconds,
            hook_runs,
            hook_seconds,
            model_seconds,
            egress,
            enabled: AtomicBool::new(true),
        }
    }

    /// The process's metrics.
    pub fn global() -> &'static Metrics {
        static METRICS: OnceLock<Metrics> = OnceLock::new();
        METRICS.get_or_init(Metrics::new)
    }

    /// Counting on or off (for measuring what counting costs).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Everything, in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The layer that counts; add it to the subscriber (with its own filter, see [`layer_targets`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricsLayer;

/// What [`MetricsLayer`] needs to see, whatever the log level: install it with
/// `MetricsLayer.with_filter(layer_targets())`.
pub fn layer_targets() -> tracing_subscriber::filter::Targets {
    use tracing::Level;
    tracing_subscriber::filter::Targets::new()
        .with_target("hookbox_hooks::engine", Level::INFO)
        .with_target("hookbox_hooks::discover", Level::INFO)
        // Its hooks lint (a handler that cannot run): `hooks.file_broken` too.
        .with_target("hookbox_environments::environment", Level::WARN)
        .with_target("hookbox_server", Level::INFO)
        .with_target("hookbox_egress::audit", Level::INFO)
        .with_target("hookbox_agent::agent_loop", Level::DEBUG)
        .with_target("hookbox_server::sandbox", Level::DEBUG)
        .with_target("hookbox_environments::runner", Level::DEBUG)
        .with_target("hookbox_snapshot", Level::INFO)
        .with_target("hookbox_snapshot::manager", Level::DEBUG)
        .with_target("hookbox_webhooks", Level::INFO)
        // `browser_guard.refused`, from the middleware in front of every endpoint.
        .with_target("hookbox_browser_guard", Level::INFO)
}

/// The fields of one event that metrics use.
#[derive(Default)]
struct Fields {
    status: String,
    tool: String,
    outcome: String,
    event: String,
    group: String,
    handler_type: String,
    decision: String,
    model: String,
    rule: String,
    reason: String,
    duration_ms: Option<u64>,
    open_environments: Option<u64>,
    pending_checkpoints: Option<u64>,
    uploaded_bytes: Option<u64>,
    warm: Option<bool>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), value.to_owned());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "duration_ms" => self.duration_ms = Some(value),
            "open_environments" => self.open_environments = Some(value),
            "pending_checkpoints" => self.pending_checkpoints = Some(value),
            "uploaded_bytes" => self.uploaded_bytes = Some(value),
            _ => {}
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "warm" {
            self.warm = Some(value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "duration_ms" {
            self.duration_ms = u64::try_from(value).ok();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(
            field.name(),
            "status"
                | "tool"
                | "outcome"
                | "event"
                | "group"
                | "handler_type"
                | "decision"
                | "model"
                | "rule"
                | "reason"
        ) {
            self.set(
                field.name(),
                format!("{value:?}").trim_matches('"').to_owned(),
            );
        }
    }
}

impl Fields {
    fn set(&mut self, name: &str, value: String) {
        let slot = match name {
            "status" => &mut self.status,
            "tool" => &mut self.tool,
            "outcome" => &mut self.outcome,
            "event" => &mut self.event,
            "group" => &mut self.group,
            "handler_type" => &mut self.handler_type,
            "decision" => &mut self.decision,
            "model" => &mut self.model,
            "rule" => &mut self.rule,
            "reason" => &mut self.reason,
            _ => return,
        };
        *slot = value;
    }

    fn seconds(&self) -> Option<f64> {
        self.duration_ms.map(|ms| ms as f64 / 1000.0)
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for MetricsLayer {
    /// Reads events by their stable names (`hookbox_protocol::events`), never their messages:
    /// interaction.finished (status), tool.finished (tool, outcome, duration_ms), hook.ran /
    /// hook.failed (event, tool, group, handler_type, decision, duration_ms), model.turn (model,
    /// duration_ms), sandbox.started (warm, duration_ms), environments.open
    /// (open_environments), egress.allowed / egress.denied (rule), webhook.delivery (outcome),
    /// and by their `event` field: browser_guard.refused (reason), the snapshot and expiry
    /// lifecycle.
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let metrics = Metrics::global();
        if !metrics.enabled.load(Ordering::Relaxed) {
            return;
        }
        let mut f = Fields::default();
        event.record(&mut f);
        if f.event == hookbox_browser_guard::REFUSED_EVENT {
            // Only a listed reason becomes a label: whatever logs this event, the label set
            // stays closed.
            if let Some(reason) = hookbox_browser_guard::Refusal::REASONS
                .into_iter()
                .find(|r| *r == f.reason)
            {
                metrics
                    .guard_refusals
                    .get_or_create(&ReasonLabel { reason })
                    .inc();
            }
            return;
        }
        // Lifecycle events go by their stable `event` name, not their message.
        let operation = match f.event.as_str() {
            "snapshot.checkpoint" => Some("checkpoint"),
            "snapshot.failed" => Some("checkpoint_failed"),
            "snapshot.restore" => Some("restore"),
            "snapshot.evict" => Some("evict"),
            "snapshot.stale" => Some("checkpoint_stale"),
            "environment.expired" => Some("expire"),
            "environment.lease_lost" => Some("lease_lost"),
            _ => None,
        };
        if let Some(operation) = operation {
            metrics
                .snapshots
                .get_or_create(&SnapshotLabels {
                    operation: operation.to_owned(),
                })
                .inc();
            if let Some(bytes) = f.uploaded_bytes {
                metrics.snapshot_bytes.inc_by(bytes);
            }
            return;
        }
        use hookbox_protocol::events as names;
        let name = event.metadata().name();
        match name {
            names::INTERACTION_FINISHED => {
                metrics
                    .interactions
                    .get_or_create(&StatusLabel { status: f.status })
                    .inc();
            }
            names::TOOL_FINISHED => {
                if let Some(secs) = f.seconds() {
                    metrics
                        .tool_seconds
                        .get_or_create(&ToolLabel {
                            tool: f.tool.clone(),
                        })
                        .observe(secs);
                }
                metrics
                    .tool_calls
                    .get_or_create(&ToolLabels {
                        tool: f.tool,
                        outcome: f.outcome,
                    })
                    .inc();
            }
            names::HOOK_RAN | names::HOOK_FAILED => {
                if let Some(secs) = f.seconds() {
                    metrics
                        .hook_seconds
                        .get_or_create(&HookTypeLabel {
                            event: f.event.clone(),
                            handler_type: f.handler_type.clone(),
                        })
                        .observe(secs);
                }
                metrics
                    .hook_runs
                    .get_or_create(&HookLabels {
                        event: f.event,
                        tool: f.tool,
                        group: f.group,
                        handler_type: f.handler_type,
                        outcome: f.decision,
                    })
                    .inc();
            }
            names::MODEL_TURN => {
                if let Some(secs) = f.seconds() {
                    metrics
                        .model_seconds
                        .get_or_create(&ModelLabel { model: f.model })
                        .observe(secs);
                }
            }
            names::SANDBOX_STARTED => {
                if let Some(secs) = f.seconds() {
                    metrics
                        .sandbox_start_seconds
                        .get_or_create(&WarmLabel {
                            warm: f.warm.unwrap_or(false).to_string(),
                        })
                        .observe(secs);
                }
            }
            names::PENDING_CHECKPOINTS => {
                if let Some(n) = f.pending_checkpoints {
                    metrics
                        .pending_checkpoints
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                }
            }
            names::OPEN_ENVIRONMENTS => {
                if let Some(n) = f.open_environments {
                    metrics
                        .open_environments
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                }
            }
            names::WEBHOOK_DELIVERY => {
                metrics
                    .webhook_deliveries
                    .get_or_create(&OutcomeLabel { outcome: f.outcome })
                    .inc();
            }
            names::HOOKS_FILE_BROKEN => {
                metrics.hooks_file_errors.inc();
            }
            names::APPROVAL_SETTLED => {
                metrics
                    .approvals
                    .get_or_create(&OutcomeLabel { outcome: f.outcome })
                    .inc();
            }
            names::EGRESS_ALLOWED | names::EGRESS_DENIED => {
                let outcome = if name == names::EGRESS_ALLOWED {
                    "allowed"
                } else {
                    "blocked"
                };
                metrics
                    .egress
                    .get_or_create(&EgressLabels {
                        outcome: outcome.to_owned(),
                        reason: f.rule,
                    })
                    .inc();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    fn sample(text: &str, series: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Every metric is fed by an event's stable name: the same events with reworded messages
    /// still count.
    #[test]
    fn every_metric_counts_by_event_name_whatever_the_message() {
        use hookbox_protocol::events as names;
        let metrics = Metrics::global();
        let series = [
            r#"hookbox_interactions_total{status="unit_renamed"}"#,
            r#"hookbox_tool_calls_total{tool="unit_tool",outcome="ok"}"#,
            r#"hookbox_tool_call_seconds_count{tool="unit_tool"}"#,
            r#"hookbox_model_turn_seconds_count{model="unit_model"}"#,
            r#"hookbox_egress_requests_total{outcome="allowed",reason=""}"#,
            r#"hookbox_egress_requests_total{outcome="blocked",reason="unit_rule"}"#,
        ];
        let before: Vec<f64> = series
            .iter()
            .map(|s| sample(&metrics.render(), s))
            .collect();
        let hooks_before = metrics.render().matches("unit_group").count();
        let subscriber = tracing_subscriber::registry().with(MetricsLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(name: names::INTERACTION_FINISHED, status = "unit_renamed", "reworded 1");
            tracing::info!(name: names::TOOL_FINISHED, tool = "unit_tool", outcome = "ok", duration_ms = 3u64, "reworded 2");
            tracing::info!(name: names::MODEL_TURN, model = "unit_model", duration_ms = 5u64, "reworded 3");
            tracing::info!(name: names::EGRESS_ALLOWED, "reworded 4");
            tracing::info!(name: names::EGRESS_DENIED, rule = "unit_rule", "reworded 5");
            tracing::info!(name: names::PENDING_CHECKPOINTS, pending_checkpoints = 7u64, "reworded 7");
            tracing::info!(name: names::HOOK_RAN, event = "pre_tool_execution", tool = "view_file", group = "unit_group", handler_type = "command", decision = "allow", duration_ms = 1u64, "reworded 6");
            // The old message alone, without the name, counts nothing.
            tracing::info!(status = "unit_renamed", "interaction finished");
        });
        let after: Vec<f64> = series
            .iter()
            .map(|s| sample(&metrics.render(), s))
            .collect();
        for ((series, before), after) in series.iter().zip(before).zip(after) {
            assert_eq!(after - before, 1.0, "{series}");
        }
        assert!(
            metrics.render().matches("unit_group").count() > hooks_before,
            "the hook run was not counted"
        );
        assert_eq!(
            sample(&metrics.render(), "hookbox_snapshot_pending_checkpoints"),
            7.0
        );
    }

    /// A refusal counts under its reason; a reason outside the guard's closed set (whatever
    /// logged it) makes no series, so no client value can grow the label set.
    #[test]
    fn browser_guard_refusals_count_by_a_closed_set_of_reasons() {
        let metrics = Metrics::global();
        let series = r#"hookbox_browser_guard_refusals_total{reason="cross_site"}"#;
        // Exported before any refusal.
        assert!(metrics.render().contains(series), "{}", metrics.render());
        let before = sample(&metrics.render(), series);
        let subscriber = tracing_subscriber::registry().with(MetricsLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(
                event = hookbox_browser_guard::REFUSED_EVENT,
                reason = "cross_site",
                "reworded"
            );
            tracing::info!(
                event = hookbox_browser_guard::REFUSED_EVENT,
                reason = "evil.example",
                "x"
            );
        });
        assert_eq!(sample(&metrics.render(), series) - before, 1.0);
        assert!(!metrics.render().contains("evil.example"));
    }
}
