//! Stable names of the log events that metrics and the audit log are built from. Each is the
//! tracing event's own name (`tracing::info!(name: events::HOOK_RAN, ...)`, read back with
//! `event.metadata().name()`), so a message can be reworded without a metric or an audit line
//! silently going quiet. Renaming one of these is a breaking change for dashboards.

/// A hook handler ran and decided (fields: event, tool, group, handler, handler_type,
/// decision, reason, duration_ms).
pub const HOOK_RAN: &str = "hook.ran";
/// A hook handler failed (timed out, crashed, bad output): fields as [`HOOK_RAN`] plus failure.
pub const HOOK_FAILED: &str = "hook.failed";
/// A tool call ended (tool, outcome, duration_ms, hooks).
pub const TOOL_FINISHED: &str = "tool.finished";
/// An interaction ended (interaction_id, status).
pub const INTERACTION_FINISHED: &str = "interaction.finished";
/// A model turn ended (model, ok, duration_ms).
pub const MODEL_TURN: &str = "model.turn";
/// A sandboxed process started (warm, duration_ms).
pub const SANDBOX_STARTED: &str = "sandbox.started";
/// How many environments are open (open_environments).
pub const OPEN_ENVIRONMENTS: &str = "environments.open";
/// Egress let a connection or hook post out (project, environment, origin, mode, host, port,
/// credential).
pub const EGRESS_ALLOWED: &str = "egress.allowed";
/// Egress refused one (as [`EGRESS_ALLOWED`] plus rule and detail).
pub const EGRESS_DENIED: &str = "egress.denied";

/// How many environments have a checkpoint scheduled or running (pending_checkpoints).
pub const PENDING_CHECKPOINTS: &str = "snapshot.pending";

/// One webhook delivery attempt ended (webhook_id, event, outcome: `delivered`, `retrying`,
/// `gave_up`; status, attempt).
pub const WEBHOOK_DELIVERY: &str = "webhook.delivery";

/// A call a hook asked a person about was settled, emitted once per call by the run that won
/// its record (tool, call_id, approval_id, paused_interaction, outcome: `approved`, `denied`,
/// `timed_out`; reason: the reviewer's, if any).
pub const APPROVAL_SETTLED: &str = "approval.settled";

/// A request authenticated with an ephemeral auth token (project, token_id, token_interaction,
/// method, path, allowed). Never the token itself.
pub const AUTH_TOKEN_USED: &str = "auth_token.used";
/// An auth token was created or deleted (project, token_id, token_interaction, action:
/// `created` / `deleted`, expires_at).
pub const AUTH_TOKEN_CHANGED: &str = "auth_token.changed";

/// A hooks file an environment's calls read has an error (bad JSON, a skipped part), logged
/// once per change of the file (file, path, error).
pub const HOOKS_FILE_BROKEN: &str = "hooks.file_broken";

/// Every name above.
pub const ALL: [&str; 15] = [
    HOOK_RAN,
    HOOK_FAILED,
    TOOL_FINISHED,
    INTERACTION_FINISHED,
    MODEL_TURN,
    SANDBOX_STARTED,
    OPEN_ENVIRONMENTS,
    EGRESS_ALLOWED,
    EGRESS_DENIED,
    PENDING_CHECKPOINTS,
    WEBHOOK_DELIVERY,
    APPROVAL_SETTLED,
    AUTH_TOKEN_USED,
    AUTH_TOKEN_CHANGED,
    HOOKS_FILE_BROKEN,
];
