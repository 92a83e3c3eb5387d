//! The runs of interactions on this server: the registry of those running here ([`Runs`]: their
//! live events, cancellation, which environment each holds), [`start`] (registers and spawns a
//! run) and [`drive`], the run itself: `pre_interaction` hooks, the agent loop, every step
//! appended to the store *before* it is broadcast (so what a client has seen is durable), a
//! call a hook paused recorded before its request step, then the environment's last use, its
//! checkpoint, `post_interaction` hooks and the final status. Each event's interaction hooks
//! trace is stored as the interaction's `hooks` (`pre`, `post`) as soon as they ran. A run
//! survives the client going away.
//!
//! This module must not speak HTTP: handlers start runs, streams subscribe to them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hookbox_agent::agent_loop::{LoopContext, LoopEvent, LoopOutcome};
use hookbox_agent::mcp::McpServerSpec;
use hookbox_protocol::api::{Interaction, InteractionError, InteractionStatus, Step};
use hookbox_protocol::{HookEvent, InteractionHookPayload, ToolName};
use hookbox_store::{ApprovalRecord, StatusUpdate};
use tokio::sync::{broadcast, mpsc, watch};

use super::approvals;
use crate::error::{ApiError, ApiResult};
use crate::quota::RunningGuard;
use crate::{AppState, Project};

/// Messages from a running interaction to its SSE subscribers.
#[derive(Debug, Clone)]
pub(crate) enum Live {
    /// A step, already stored, at this index.
    Step(usize, Step),
    /// A piece of running code's stdout for the `code_execution_result` step that will be
    /// stored at `index`, starting at byte `offset` of that stdout. Never stored.
    Output {
        index: usize,
        offset: usize,
        text: String,
    },
    /// The run ended; the final stored interaction.
    Finished(Box<Interaction>),
}

/// The most of a running call's output kept for streams that join while it runs; past it, such
/// a stream gets that output with the result step, as before any was kept.
const MAX_KEPT_OUTPUT: usize = 1 << 20;

/// How many live events a subscriber may fall behind before it lags (and reads the store).
const LIVE_CAPACITY: usize = 1024;

/// A run's live events. The output of the code running now is kept beside the channel, so a
/// stream opened mid-call (the console opened on a running call) starts with what was printed
/// so far: kept and sent under one lock, so a subscriber gets each piece once, kept or sent.
/// The channel is made by the first subscriber: most runs (a plain `POST`) have none, and
/// building and dropping its [`LIVE_CAPACITY`] slots was about 2 % of the server's CPU per
/// interaction under load. An event sent before anyone subscribed reaches no one, as it would
/// through a channel without receivers.
#[derive(Debug, Clone)]
pub(crate) struct LiveEvents(Arc<LiveChannel>);

#[derive(Debug)]
struct LiveChannel {
    sender: std::sync::OnceLock<broadcast::Sender<Live>>,
    output: Mutex<Option<KeptOutput>>,
}

/// The output so far of the code whose result step will be stored at `index`.
#[derive(Debug)]
struct KeptOutput {
    index: usize,
    text: String,
    /// False once a piece was out of order or the cap was passed: nothing is offered then.
    whole: bool,
}

impl LiveEvents {
    fn new() -> Self {
        Self(Arc::new(LiveChannel {
            sender: std::sync::OnceLock::new(),
            output: Mutex::new(None),
        }))
    }

    /// The channel, made on first use (by a subscriber).
    fn sender(&self) -> &broadcast::Sender<Live> {
        self.0
            .sender
            .get_or_init(|| broadcast::channel(LIVE_CAPACITY).0)
    }

    /// Sends `event` to every subscriber (none before the first subscribed), keeping running
    /// output first.
    pub(crate) fn send(&self, event: Live) {
        let Ok(mut kept) = self.0.output.lock() else {
            if let Some(sender) = self.0.sender.get() {
                let _ = sender.send(event);
            }
            return;
        };
        match &event {
            Live::Output {
                index,
                offset,
                text,
            } => match kept.as_mut() {
                Some(k) if k.index == *index => {
                    if k.whole
                        && k.text.len() == *offset
                        && k.text.len() + text.len() <= MAX_KEPT_OUTPUT
                    {
                        k.text.push_str(text);
                    } else {
                        k.whole = false;
                        k.text = String::new();
                    }
                }
                _ => {
                    let whole = *offset == 0 && text.len() <= MAX_KEPT_OUTPUT;
                    *kept = Some(KeptOutput {
                        index: *index,
                        text: if whole { text.clone() } else { String::new() },
                        whole,
                    });
                }
            },
            // Stored: a stream reads it from the store now.
            Live::Step(index, _) => {
                if kept.as_ref().is_some_and(|k| k.index <= *index) {
                    *kept = None;
                }
            }
            Live::Finished(_) => *kept = None,
        }
        if let Some(sender) = self.0.sender.get() {
            let _ = sender.send(event);
        }
    }

    fn subscribe(&self) -> broadcast::Receiver<Live> {
        self.sender().subscribe()
    }

    /// A receiver and, taken with it, the output so far of the code running now: the index of
    /// its coming result step and the text from byte 0 (the next piece sent starts at its end).
    fn subscribe_with_output(&self) -> Subscription {
        let Ok(kept) = self.0.output.lock() else {
            return (self.subscribe(), None);
        };
        let output = kept
            .as_ref()
            .filter(|k| k.whole && !k.text.is_empty())
            .map(|k| (k.index, k.text.clone()));
        (self.subscribe(), output)
    }
}

/// A live-event receiver and the output so far of the code running now (the index of its coming
/// result step and the text from byte 0), if any.
pub(crate) type Subscription = (broadcast::Receiver<Live>, Option<(usize, String)>);

/// Bookkeeping of a running interaction.
#[derive(Debug)]
struct Running {
    /// The environment it runs in (a draining server keeps that one until it ends).
    environment_id: String,
    events: LiveEvents,
    cancel: watch::Sender<bool>,
    finished: watch::Receiver<bool>,
}

/// The interactions running on this server, by id. A poisoned lock counts as nothing running
/// (and as holding every environment, so a drain hands none over). Each start is announced
/// (`started`): a live socket waiting between turns follows a run started elsewhere (an
/// answer over REST, the approvals' sweeper) on its interaction.
#[derive(Debug)]
pub(crate) struct Runs(Mutex<HashMap<String, Running>>, broadcast::Sender<String>);

impl Default for Runs {
    fn default() -> Self {
        Runs(Mutex::new(HashMap::new()), broadcast::channel(256).0)
    }
}

impl Runs {
    /// Registers a run; refused (409) while `id` runs already, so two turns of one interaction
    /// never run at once.
    fn register(&self, id: &str, run: Running) -> ApiResult<()> {
        let mut running = self
            .0
            .lock()
            .map_err(|_| ApiError::internal(&"running-interactions lock poisoned"))?;
        if running.contains_key(id) {
            return Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                format!("Interaction `{id}` is running already; wait for its turn to end."),
            ));
        }
        running.insert(id.to_owned(), run);
        let _ = self.1.send(id.to_owned());
        Ok(())
    }

    /// The ids of runs as they start.
    pub(crate) fn started(&self) -> broadcast::Receiver<String> {
        self.1.subscribe()
    }

    fn remove(&self, id: &str) {
        if let Ok(mut running) = self.0.lock() {
            running.remove(id);
        }
    }

    /// A live-event receiver for `id`, if it runs here.
    pub(crate) fn subscribe(&self, id: &str) -> Option<broadcast::Receiver<Live>> {
        self.0.lock().ok()?.get(id).map(|r| r.events.subscribe())
    }

    /// Like [`Runs::subscribe`], with the output so far of the code running now, if any
    /// ([`LiveEvents::subscribe_with_output`]).
    pub(crate) fn subscribe_with_output(&self, id: &str) -> Option<Subscription> {
        self.0
            .lock()
            .ok()?
            .get(id)
            .map(|r| r.events.subscribe_with_output())
    }

    /// Signals interaction `id` to stop; what says when it has, if it runs here.
    fn cancel(&self, id: &str) -> Option<watch::Receiver<bool>> {
        let running = self.0.lock().ok()?;
        let run = running.get(id)?;
        let _ = run.cancel.send(true);
        Some(run.finished.clone())
    }

    /// Signals every run to stop; returns how many there were.
    pub(crate) fn cancel_all(&self) -> usize {
        let Ok(running) = self.0.lock() else {
            return 0;
        };
        for run in running.values() {
            let _ = run.cancel.send(true);
        }
        running.len()
    }

    /// Whether an interaction runs here in environment `id`.
    pub(crate) fn runs_in(&self, id: &str) -> bool {
        self.0
            .lock()
            .map(|running| running.values().any(|r| r.environment_id == id))
            .unwrap_or(true)
    }

    /// How many interactions run here.
    pub(crate) fn count(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// Signals cancellation and waits until the run has stopped. `false` if it was not running.
pub(crate) async fn cancel_and_wait(state: &AppState, id: &str) -> bool {
    let Some(mut finished) = state.inner.running.cancel(id) else {
        return false;
    };
    let _ = finished.wait_for(|done| *done).await;
    true
}

/// What a run is started with.
pub(crate) struct RunSpec {
    pub(crate) project: Project,
    /// The run's place in its project's `running_interactions` quota, freed when it ends.
    pub(crate) running: RunningGuard,
    pub(crate) id: String,
    pub(crate) environment_id: String,
    pub(crate) model_name: Option<String>,
    pub(crate) system_instruction: Option<String>,
    /// The steps the model sees: the history, then this interaction's.
    pub(crate) conversation: Vec<Step>,
    /// The index the run's first step is stored at.
    pub(crate) first_index: usize,
    /// Whether the interaction is kept when the run ends (`store: false` deletes it).
    pub(crate) keep: bool,
    /// The client's `function` tools.
    pub(crate) functions: Vec<hookbox_agent::model::FunctionDecl>,
    /// The remote MCP servers (`mcp_server` tools).
    pub(crate) mcp: Vec<McpServerSpec>,
    /// The `tool_search` tool and the deferred tools.
    pub(crate) search: Option<hookbox_agent::tool_search::Search>,
    /// The agent it runs, as named in the request (what interaction hooks' matchers match).
    pub(crate) agent: String,
    /// The steps this interaction was given, for `pre_interaction` hooks; `None` for a paused
    /// interaction that goes on in place (no new input, no new `pre_interaction`).
    pub(crate) input: Option<Vec<Step>>,
    /// What the interaction had used before this run (a paused one going on in place): the
    /// stored usage is the sum.
    pub(crate) prior_usage: Option<hookbox_protocol::api::Usage>,
    /// The records of the paused calls this run settled (the store said it won them): their
    /// results come first.
    pub(crate) settled: Vec<ApprovalRecord>,
    /// A live interaction's turn: a turn that completes leaves it `idle` for the next input.
    pub(crate) live: bool,
}

/// Registers and spawns the run, with a receiver of its events subscribed before the first is
/// sent.
pub(crate) fn start(
    state: &AppState,
    run: RunSpec,
) -> ApiResult<(
    broadcast::Receiver<Live>,
    tokio::task::JoinHandle<Interaction>,
)> {
    let events = LiveEvents::new();
    let events_rx = events.subscribe();
    Ok((events_rx, spawn(state, run, events)?))
}

/// Registers and spawns the run, for a caller that does not follow its events (a stream may
/// still subscribe through [`Runs::subscribe`] while it runs).
pub(crate) fn start_unwatched(
    state: &AppState,
    run: RunSpec,
) -> ApiResult<tokio::task::JoinHandle<Interaction>> {
    spawn(state, run, LiveEvents::new())
}

fn spawn(
    state: &AppState,
    run: RunSpec,
    events: LiveEvents,
) -> ApiResult<tokio::task::JoinHandle<Interaction>> {
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let (finished_tx, finished_rx) = watch::channel(false);
    state.inner.running.register(
        &run.id,
        Running {
            environment_id: run.environment_id.clone(),
            events: events.clone(),
            cancel: cancel_tx,
            finished: finished_rx,
        },
    )?;
    let state = state.clone();
    // Everything the run logs (hook decisions included) carries its interaction, project and
    // environment, for the audit log.
    let span = tracing::info_span!(
        "interaction",
        interaction_id = %run.id,
        project = %run.project.0,
        environment_id = %run.environment_id
    );
    let handle = tokio::spawn(tracing::Instrument::instrument(
        async move {
            let id = run.id.clone();
            let project = run.project.clone();
            let keep = run.keep;
            let final_interaction = drive(&state, run, events.clone(), cancel_rx).await;
            state.inner.running.remove(&id);
            events.send(Live::Finished(Box::new(final_interaction.clone())));
            let _ = finished_tx.send(true);
            state.inner.drain.ended_one();
            if !keep && let Err(e) = state.inner.store.delete_interaction(&project, &id).await {
                tracing::warn!(interaction_id = %id, error = %e, "could not delete an interaction with store=false");
            }
            final_interaction
        },
        span,
    ));
    Ok(handle)
}

/// The run's system instruction after its environment's `system_instruction` (set at
/// `environments.create`), separated by a blank line; either alone when the other is absent.
async fn with_environment_instruction(state: &AppState, run: &RunSpec) -> Option<String> {
    let environment = match state
        .inner
        .store
        .get_environment(&run.project, &run.environment_id)
        .await
    {
        Ok(record) => record.and_then(|r| r.environment.system_instruction),
        Err(e) => {
            tracing::warn!(environment_id = %run.environment_id, error = %e, "cannot read the environment's system instruction");
            None
        }
    };
    match (environment, run.system_instruction.as_deref()) {
        (Some(env), Some(own)) => Some(format!("{env}\n\n{own}")),
        (Some(env), None) => Some(env),
        (None, own) => own.map(str::to_owned),
    }
}

/// Runs the loop and persists every step before broadcasting it; returns the final interaction.
async fn drive(
    state: &AppState,
    run: RunSpec,
    events: LiveEvents,
    cancel: watch::Receiver<bool>,
) -> Interaction {
    let inner = Arc::clone(&state.inner);
    let (tx, mut rx) = mpsc::channel::<LoopEvent>(256);
    // Among replicas, each tool call also holds a place of the project's cluster-wide count.
    let counted = crate::quota::ClusterSlots {
        inner: inner.executor.as_ref(),
        book: &inner.quotas,
        project: &run.project,
    };
    let executor: &dyn hookbox_agent::seams::ToolExecutor = if inner.cluster.is_some() {
        &counted
    } else {
        inner.executor.as_ref()
    };
    // pre_interaction hooks (hookbox extension): may deny the turn or add context.
    let pre = match &run.input {
        Some(input) => {
            let payload = interaction_payload(&run, HookEvent::PreInteraction, |p| {
                p.input_text = Some(
                    input
                        .iter()
                        .filter_map(Step::text)
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
                p.input = serde_json::to_value(input).ok();
            });
            executor
                .interaction_hooks(&run.environment_id, &payload)
                .await
        }
        None => hookbox_agent::InteractionHooks::default(),
    };
    let pre_trace_error = record_hooks(state, &run.id, "pre", pre.trace.as_ref()).await;
    // The environment's own instruction comes first, for every interaction run in it.
    let instruction = with_environment_instruction(state, &run).await;
    // pre_interaction hooks' context, one `[context from hooks] TEXT` line each.
    let system_instruction = hookbox_agent::model::with_notes(
        instruction.as_deref(),
        pre.context
            .iter()
            .map(|c| format!("{}{c}", hookbox_agent::model::HOOK_CONTEXT_PREFIX)),
    );
    let mcp: Arc<dyn hookbox_agent::mcp::McpTools> = match (&pre.denied, run.mcp.is_empty()) {
        (None, false) => executor.mcp_session(&run.environment_id, &run.mcp).await,
        _ => Arc::new(hookbox_agent::mcp::Unreachable::default()),
    };
    // Each paused call this run settled, once (the store said this run won it).
    let settled = approvals::settled_calls(&run.settled);
    let ctx = LoopContext {
        model: inner.model.as_ref(),
        executor,
        environment_id: Some(&run.environment_id),
        model_name: run.model_name.as_deref(),
        system_instruction: system_instruction.as_deref(),
        tools: &ToolName::ALL,
        functions: &run.functions,
        mcp: mcp.as_ref(),
        search: run.search.as_ref(),
        settled: &settled,
    };
    let persist = async {
        let mut index = run.first_index;
        let mut store_error = None;
        // The model's last text, for post_interaction hooks.
        let mut last_output = None;
        // Whether this run paused a call (its record is withdrawn if the run ends otherwise).
        let mut asked = false;
        while let Some(event) = rx.recv().await {
            let step = match event {
                LoopEvent::Step(step) => step,
                // A hook asked: the record first (what may run, and where), then the step the
                // client sees; a request without its record is never shown.
                LoopEvent::ApprovalRequested { step, call } => {
                    let record = approvals::paused_record(&run.id, &run.environment_id, call);
                    if let Err(e) = inner.store.create_approval(&run.project, &record).await {
                        tracing::error!(interaction_id = %run.id, error = %e, "could not record a paused call");
                        store_error.get_or_insert(e.to_string());
                        continue;
                    }
                    asked = true;
                    step
                }
                // Running code's output, for the step about to come at `index`: live only.
                LoopEvent::Output { offset, text } => {
                    events.send(Live::Output {
                        index,
                        offset,
                        text,
                    });
                    continue;
                }
            };
            if let Err(e) = inner.store.append_step(&run.id, index, &step).await {
                tracing::error!(interaction_id = %run.id, error = %e, "could not store a step");
                store_error.get_or_insert(e.to_string());
                continue;
            }
            if let Step::ModelOutput { .. } = &step {
                last_output = step.text();
            }
            events.send(Live::Step(index, step));
            index += 1;
        }
        (store_error, last_output, asked)
    };
    let run_loop = async {
        let outcome = match &pre.denied {
            Some(reason) => {
                tracing::info!(interaction_id = %run.id, reason = %reason, "a pre_interaction hook denied the turn");
                LoopOutcome {
                    status: InteractionStatus::Failed,
                    usage: Default::default(),
                    errors: vec![InteractionError {
                        code: "denied_by_hook".into(),
                        message: reason.clone(),
                    }],
                }
            }
            None => {
                hookbox_agent::run(
                    ctx,
                    inner.loop_config,
                    run.conversation.clone(),
                    &tx,
                    cancel,
                )
                .await
            }
        };
        drop(tx);
        outcome
    };
    let (mut outcome, (store_error, last_output, asked)) = tokio::join!(run_loop, persist);
    // Stopped because the server stops, not by a client: as after a crash.
    if outcome.status == InteractionStatus::Cancelled && inner.drain.stopping() {
        outcome.status = InteractionStatus::Failed;
        outcome.errors = vec![InteractionError {
            code: "server_stopped".into(),
            message: crate::drain::STOPPED_REASON.into(),
        }];
    }
    // Used until its end: the expiry clock starts when the interaction stops.
    let touch = hookbox_store::EnvironmentChange::Touch {
        now: hookbox_store::time::now_rfc3339(),
    };
    if let Err(e) = inner
        .store
        .change_environment(&run.project, &run.environment_id, &touch)
        .await
    {
        tracing::warn!(environment_id = %run.environment_id, error = %e, "cannot record the environment's last use");
    }
    if let Some(message) = crate::lifecycle::after_interaction(state, &run.environment_id).await {
        outcome.errors.push(InteractionError {
            code: "checkpoint_failed".into(),
            message,
        });
    }
    outcome.errors.extend(pre_trace_error);
    if store_error.is_some() {
        outcome.status = InteractionStatus::Failed;
        outcome.errors.push(InteractionError {
            code: "storage_error".into(),
            message: "a step could not be stored; see the server log".into(),
        });
    }
    // Calls paused in a run that then ended otherwise (cancelled, failed) wait for nobody.
    if asked
        && outcome.status != InteractionStatus::RequiresAction
        && let Err(e) = inner.store.withdraw_approvals(&run.project, &run.id).await
    {
        tracing::warn!(interaction_id = %run.id, error = %e, "could not withdraw paused calls nobody can answer");
    }
    // post_interaction hooks (hookbox extension): they see how the turn ended, before the
    // status is stored (a client that saw the end can rely on them having run).
    if !inner.drain.stopping() {
        let payload = interaction_payload(&run, HookEvent::PostInteraction, |p| {
            p.status = Some(outcome.status.as_str().to_owned());
            p.output = last_output;
            p.errors = (!outcome.errors.is_empty())
                .then(|| serde_json::to_value(&outcome.errors).ok())
                .flatten();
        });
        let post = executor
            .interaction_hooks(&run.environment_id, &payload)
            .await;
        outcome
            .errors
            .extend(record_hooks(state, &run.id, "post", post.trace.as_ref()).await);
    }
    if let Some(prior) = &run.prior_usage {
        outcome.usage.add(prior);
    }
    // A live interaction goes on after a turn; only `interaction.complete` completes it.
    if run.live && outcome.status == InteractionStatus::Completed {
        outcome.status = InteractionStatus::Idle;
    }
    let update = StatusUpdate {
        status: outcome.status,
        usage: (outcome.usage != hookbox_protocol::api::Usage::default()).then_some(outcome.usage),
        errors: outcome.errors,
        updated: hookbox_store::time::now_rfc3339(),
    };
    if let Err(e) = inner.store.update_status(&run.id, &update).await {
        tracing::error!(interaction_id = %run.id, error = %e, "could not store the final status");
    }
    // The store wrote the webhook events with the status; send them now.
    inner.wake_webhooks();
    tracing::info!(name: hookbox_protocol::events::INTERACTION_FINISHED, interaction_id = %run.id, status = %update.status, "interaction finished");
    let ended = inner.store.get_interaction(&run.project, &run.id).await;
    drop(run.running);
    match ended {
        Ok(Some(i)) => i,
        _ => {
            let mut i = Interaction::new(run.id.clone(), update.status);
            i.errors = update.errors;
            i.environment_id = Some(run.environment_id.clone());
            i
        }
    }
}

/// Stores what an event's interaction hooks did as the interaction's `hooks.<key>` (`pre` or
/// `post`, as a tool call's trace), so a handler that failed open, its stderr and the context
/// it added are visible in the API and the console; nothing when no handler ran.
/// A trace that could not be stored is an error of the interaction's (it would otherwise look as
/// if no hook ran).
async fn record_hooks(
    state: &AppState,
    id: &str,
    key: &str,
    trace: Option<&serde_json::Value>,
) -> Option<InteractionError> {
    let trace = trace?;
    let mut patch = serde_json::Map::new();
    patch.insert(key.to_owned(), trace.clone());
    let e = state
        .inner
        .store
        .record_interaction_hooks(id, &patch)
        .await
        .err()?;
    tracing::warn!(interaction_id = %id, error = %e, "could not store the interaction hooks' trace");
    Some(InteractionError {
        code: "hooks_trace_not_stored".into(),
        message: format!(
            "the {key}_interaction hooks' trace could not be stored; see the server log"
        ),
    })
}

/// The payload of an interaction hook for `run`, with `fill` adding the event's own fields.
fn interaction_payload(
    run: &RunSpec,
    event: HookEvent,
    fill: impl FnOnce(&mut InteractionHookPayload),
) -> InteractionHookPayload {
    let mut payload = InteractionHookPayload {
        interaction_id: run.id.clone(),
        environment_id: run.environment_id.clone(),
        agent: run.agent.clone(),
        input: None,
        input_text: None,
        status: None,
        output: None,
        errors: None,
        hook_event_name: event,
    };
    fill(&mut payload);
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(index: usize, offset: usize, text: &str) -> Live {
        Live::Output {
            index,
            offset,
            text: text.to_owned(),
        }
    }

    /// A run nobody follows makes no channel; a subscriber that comes later makes it, gets the
    /// output kept so far with its subscription, and every event sent after.
    #[tokio::test]
    async fn the_channel_is_made_by_the_first_subscriber() {
        let events = LiveEvents::new();
        events.send(output(2, 0, "a"));
        events.send(output(2, 1, "b"));
        assert!(
            events.0.sender.get().is_none(),
            "a channel without subscribers"
        );

        let (mut rx, kept) = events.subscribe_with_output();
        assert_eq!(kept, Some((2, "ab".to_owned())));
        events.send(output(2, 2, "c"));
        match rx.recv().await {
            Ok(Live::Output {
                index,
                offset,
                text,
            }) => {
                assert_eq!((index, offset, text.as_str()), (2, 2, "c"));
            }
            other => panic!("{other:?}"),
        }
        let mut second = events.subscribe();
        events.send(output(2, 3, "d"));
        for rx in [&mut rx, &mut second] {
            assert!(matches!(
                rx.recv().await,
                Ok(Live::Output { offset: 3, .. })
            ));
        }
    }
}
