//! Server-sent events (spec §4). Events are generated deterministically from the stored steps
//! (`interaction.created`, then `step.start` / `step.delta` / `step.stop` per step, then an
//! `error` for a failed run and `interaction.completed`, then `data: [DONE]`), numbered from 0 in
//! that order, so a client resuming with `last_event_id=E` gets exactly the events after `E`,
//! whether they come from the store (replay) or live from the running loop. A stream opened while
//! code runs starts with that code's output so far (kept by the run, `run::LiveEvents`), on the
//! replica running it; one relayed from another replica does not get what was printed before.

use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt as _};
use hookbox_protocol::api::{Content, Delta, Interaction, Step, StreamError, StreamEvent};
use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::run::Live;
use crate::AppState;

/// The partial interaction carried by `interaction.created` / `interaction.completed`:
/// no steps, plus `environment_id` (an extra field the SDK keeps).
pub fn summary(i: &Interaction) -> Interaction {
    let mut s = Interaction::new(i.id.clone(), i.status);
    s.agent.clone_from(&i.agent);
    s.environment_id.clone_from(&i.environment_id);
    s.created.clone_from(&i.created);
    s.updated.clone_from(&i.updated);
    s.usage.clone_from(&i.usage);
    s.errors.clone_from(&i.errors);
    s.previous_interaction_id
        .clone_from(&i.previous_interaction_id);
    s
}

/// The events for one step at `index`.
pub fn step_events(index: usize, step: &Step) -> Vec<StreamEvent> {
    let start = |step: Step| StreamEvent::StepStart {
        index,
        step,
        event_id: None,
    };
    let stop = StreamEvent::StepStop {
        index,
        event_id: None,
    };
    match step {
        Step::ModelOutput { content, error } => {
            let mut events = vec![start(Step::ModelOutput {
                content: Some(Vec::new()),
                error: error.clone(),
            })];
            for item in content.iter().flatten() {
                let delta = match item {
                    Content::Text { text, .. } => Delta::Text { text: text.clone() },
                    other => Delta::Other(serde_json::to_value(other).unwrap_or(Value::Null)),
                };
                events.push(StreamEvent::StepDelta {
                    index,
                    delta,
                    event_id: None,
                });
            }
            events.push(stop);
            events
        }
        Step::CodeExecutionResult {
            call_id,
            result,
            is_error,
            signature,
            hooks,
        } => {
            let text = match result {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            vec![
                start(Step::CodeExecutionResult {
                    call_id: call_id.clone(),
                    result: Value::String(String::new()),
                    is_error: *is_error,
                    signature: signature.clone(),
                    hooks: hooks.clone(),
                }),
                StreamEvent::StepDelta {
                    index,
                    delta: Delta::CodeExecutionResult {
                        result: text,
                        is_error: *is_error,
                    },
                    event_id: None,
                },
                stop,
            ]
        }
        // Tool search (SDK 3.4.0+): the step opens empty, its content comes as a delta of the
        // same type (`arguments` of a call, `result` of a result), as the SDK types them.
        Step::Other(v)
            if matches!(
                v.get("type").and_then(Value::as_str),
                Some("tool_search_call" | "tool_search_result")
            ) =>
        {
            let kind = v.get("type").cloned().unwrap_or(Value::Null);
            let field = if kind == "tool_search_call" {
                "arguments"
            } else {
                "result"
            };
            let mut opened = v.clone();
            let mut delta = serde_json::json!({"type": kind});
            if let Some(content) = opened.as_object_mut().and_then(|o| o.remove(field)) {
                delta[field] = content;
            }
            if field == "arguments" {
                // `arguments` is required on the step.
                opened["arguments"] = serde_json::json!({});
            }
            vec![
                start(Step::Other(opened)),
                StreamEvent::StepDelta {
                    index,
                    delta: Delta::Other(delta),
                    event_id: None,
                },
                stop,
            ]
        }
        other => vec![start(other.clone()), stop],
    }
}

/// The closing events of a finished interaction.
pub fn final_events(i: &Interaction) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    if let Some(err) = i.errors.first()
        && !matches!(
            i.status,
            hookbox_protocol::api::InteractionStatus::Completed
        )
    {
        events.push(StreamEvent::Error {
            error: StreamError {
                code: err.code.clone(),
                message: err.message.clone(),
            },
            event_id: None,
        });
    }
    // Waiting for the client (function calls): said as a status change before the end.
    if i.status == hookbox_protocol::api::InteractionStatus::RequiresAction {
        events.push(StreamEvent::StatusUpdate {
            interaction_id: i.id.clone(),
            status: i.status,
            usage: None,
            event_id: None,
        });
    }
    events.push(StreamEvent::InteractionCompleted {
        interaction: summary(i),
        event_id: None,
    });
    events
}

/// Where a client resumes: after event `event`, and, when it last saw a piece of running code's
/// output (`"<event>.<offset>"`), after byte `offset` of that output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    pub event: u64,
    pub offset: Option<usize>,
}

impl std::str::FromStr for ResumePoint {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (event, offset) = match s.split_once('.') {
            Some((event, offset)) => (event, Some(offset.parse().map_err(|_| ())?)),
            None => (s, None),
        };
        Ok(Self {
            event: event.parse().map_err(|_| ())?,
            offset,
        })
    }
}

/// Numbers events and drops those at or before the resume point. Also streams running code's
/// output: the first piece opens the coming `code_execution_result` step early (its
/// `step.start` takes that step's number N) and each piece is a `step.delta` numbered `N.<end
/// offset>`, outside the main sequence; when the step arrives its delta carries only the rest.
/// So a replay from the store, which knows no pieces, numbers every event the same.
struct Numberer {
    next: u64,
    after: Option<ResumePoint>,
    /// The call step the next result step answers (the placeholder `step.start` needs its id).
    last_call_id: Option<String>,
    partial: Option<Partial>,
}

/// A result step opened early by its output.
struct Partial {
    index: usize,
    /// The number of its `step.start`.
    start: u64,
    /// The output sent so far.
    streamed: String,
    /// A piece was missed: no more pieces; the rest comes with the step.
    gap: bool,
}

impl Numberer {
    fn new(after: Option<ResumePoint>) -> Self {
        Self {
            next: 0,
            after,
            last_call_id: None,
            partial: None,
        }
    }

    fn push(&mut self, out: &mut Vec<Event>, ev: StreamEvent) {
        let n = self.next;
        self.next += 1;
        let ev = match self.after {
            Some(after) if n <= after.event => return,
            // The first delta of the step whose output the client saw up to `offset`.
            Some(ResumePoint {
                event,
                offset: Some(offset),
            }) if n == event + 1 => trim_result(ev, offset),
            _ => ev,
        };
        out.push(to_sse(ev.with_event_id(n.to_string())));
    }

    /// The events of the stored `step` at `index`.
    fn step(&mut self, out: &mut Vec<Event>, index: usize, step: &Step) {
        if let Step::CodeExecutionCall { id, .. } = step {
            self.last_call_id = Some(id.clone());
        }
        let events = step_events(index, step);
        let Some(partial) = self.partial.take_if(|p| p.index == index) else {
            for ev in events {
                self.push(out, ev);
            }
            return;
        };
        // Opened early: its start went out (and took its number); the delta has the rest.
        for ev in events.into_iter().skip(1) {
            let ev = match (&partial.streamed, ev) {
                (
                    streamed,
                    StreamEvent::StepDelta {
                        index,
                        delta: Delta::CodeExecutionResult { result, is_error },
                        event_id,
                    },
                ) => StreamEvent::StepDelta {
                    index,
                    delta: Delta::CodeExecutionResult {
                        result: result
                            .strip_prefix(streamed.as_str())
                            .map(str::to_owned)
                            .unwrap_or(result),
                        is_error,
                    },
                    event_id,
                },
                (_, ev) => ev,
            };
            self.push(out, ev);
        }
    }

    /// A piece of output for the result step that will be stored at `index`.
    fn output(&mut self, out: &mut Vec<Event>, index: usize, offset: usize, text: &str) {
        match &mut self.partial {
            Some(partial) if partial.index == index => {
                if partial.gap || partial.streamed.len() != offset {
                    // A piece went missing: stop here, the step brings the rest.
                    partial.gap = true;
                    return;
                }
                partial.streamed.push_str(text);
                let (start, end) = (partial.start, partial.streamed.len());
                self.push_piece(out, index, start, offset, text, end);
            }
            _ => {
                // Joined after the output began: the step will bring it whole.
                if offset != 0 {
                    return;
                }
                let Some(call_id) = self.last_call_id.clone() else {
                    return;
                };
                let start = self.next;
                self.push(
                    out,
                    StreamEvent::StepStart {
                        index,
                        step: Step::CodeExecutionResult {
                            call_id,
                            result: Value::String(String::new()),
                            is_error: None,
                            signature: None,
                            hooks: None,
                        },
                        event_id: None,
                    },
                );
                self.partial = Some(Partial {
                    index,
                    start,
                    streamed: text.to_owned(),
                    gap: false,
                });
                self.push_piece(out, index, start, 0, text, text.len());
            }
        }
    }

    /// One piece, `text` at `offset..end` of the output of the step started by event `start`.
    fn push_piece(
        &self,
        out: &mut Vec<Event>,
        index: usize,
        start: u64,
        offset: usize,
        text: &str,
        end: usize,
    ) {
        let text = match self.after {
            Some(after) if after.event > start => return,
            Some(ResumePoint {
                event,
                offset: Some(seen),
            }) if event == start => {
                if end <= seen {
                    return;
                }
                match text.get(seen.saturating_sub(offset)..) {
                    Some(rest) => rest,
                    None => text,
                }
            }
            _ => text,
        };
        let ev = StreamEvent::StepDelta {
            index,
            delta: Delta::CodeExecutionResult {
                result: text.to_owned(),
                is_error: None,
            },
            event_id: None,
        };
        out.push(to_sse(ev.with_event_id(format!("{start}.{end}"))));
    }
}

/// A `code_execution_result` delta without its first `offset` bytes (already seen).
fn trim_result(ev: StreamEvent, offset: usize) -> StreamEvent {
    match ev {
        StreamEvent::StepDelta {
            index,
            delta: Delta::CodeExecutionResult { result, is_error },
            event_id,
        } => StreamEvent::StepDelta {
            index,
            delta: Delta::CodeExecutionResult {
                result: result.get(offset..).map(str::to_owned).unwrap_or(result),
                is_error,
            },
            event_id,
        },
        other => other,
    }
}

fn to_sse(ev: StreamEvent) -> Event {
    let name = match &ev {
        StreamEvent::InteractionCreated { .. } => "interaction.created",
        StreamEvent::StatusUpdate { .. } => "interaction.status_update",
        StreamEvent::StepStart { .. } => "step.start",
        StreamEvent::StepDelta { .. } => "step.delta",
        StreamEvent::StepStop { .. } => "step.stop",
        StreamEvent::InteractionCompleted { .. } => "interaction.completed",
        StreamEvent::Error { .. } => "error",
    };
    let data = serde_json::to_string(&ev).unwrap_or_else(|_| "{}".to_owned());
    Event::default().event(name).data(data)
}

fn done() -> Event {
    Event::default().data("[DONE]")
}

/// The SSE response for interaction `id`: replay from the store after `after`, then live events
/// until it finishes. Subscribes before reading the store so no step falls in between.
pub async fn sse(
    state: AppState,
    project: crate::Project,
    id: String,
    after: Option<ResumePoint>,
) -> crate::ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    // With the output so far of code running now: a stream opened mid-call shows it at once.
    let (live, output) = match state.inner.running.subscribe_with_output(&id) {
        Some((rx, output)) => (Some(rx), output),
        None => (None, None),
    };
    // Running on another replica: its changes arrive through the database's notifications.
    let remote = match (&live, &state.inner.cluster) {
        (None, Some(config)) => Some(config.cluster.changes()),
        _ => None,
    };
    let stored = state
        .inner
        .store
        .get_interaction(&project, &id)
        .await?
        .ok_or_else(|| crate::ApiError::not_found(format!("Interaction `{id}` not found.")))?;
    let state = Scoped {
        app: state,
        project,
    };
    let stream = async_stream(state, stored, live, output, remote, after);
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// The server state and the project a stream was opened in (its reloads stay in that project).
struct Scoped {
    app: AppState,
    project: crate::Project,
}

fn async_stream(
    state: Scoped,
    stored: Interaction,
    live: Option<tokio::sync::broadcast::Receiver<Live>>,
    output: Option<(usize, String)>,
    remote: Option<tokio::sync::broadcast::Receiver<String>>,
    after: Option<ResumePoint>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(
        StreamState::Start {
            state,
            stored: Box::new(stored),
            live,
            output,
            remote,
            numberer: Numberer::new(after),
        },
        |st| async move {
            match st {
                StreamState::Start {
                    state,
                    stored,
                    live,
                    output,
                    remote,
                    mut numberer,
                } => {
                    let mut out = Vec::new();
                    numberer.push(
                        &mut out,
                        StreamEvent::InteractionCreated {
                            interaction: summary(&stored),
                            event_id: None,
                        },
                    );
                    for (i, step) in stored.steps.iter().enumerate() {
                        numberer.step(&mut out, i, step);
                    }
                    let sent = stored.steps.len();
                    let next = match (live, remote) {
                        (Some(rx), _) if stored.status.is_running() => {
                            // The output so far of the code running now, as one piece at
                            // offset 0 (unless its step is stored already).
                            if let Some((index, text)) = output.filter(|(index, _)| *index >= sent)
                            {
                                numberer.output(&mut out, index, 0, &text);
                            }
                            StreamState::Live {
                                state,
                                id: stored.id.clone(),
                                rx,
                                sent,
                                numberer,
                            }
                        }
                        (None, Some(changes)) if stored.status.is_running() => {
                            StreamState::Remote {
                                state,
                                id: stored.id.clone(),
                                changes,
                                sent,
                                numberer,
                            }
                        }
                        _ => {
                            for ev in final_events(&stored) {
                                numberer.push(&mut out, ev);
                            }
                            out.push(done());
                            StreamState::Done
                        }
                    };
                    Some((out, next))
                }
                StreamState::Live {
                    state,
                    id,
                    mut rx,
                    mut sent,
                    mut numberer,
                } => {
                    let mut out = Vec::new();
                    match rx.recv().await {
                        Ok(event @ (Live::Step(..) | Live::Output { .. })) => {
                            match event {
                                Live::Step(index, step) if index >= sent => {
                                    numberer.step(&mut out, index, &step);
                                    sent = index + 1;
                                }
                                Live::Output {
                                    index,
                                    offset,
                                    text,
                                } if index >= sent => {
                                    numberer.output(&mut out, index, offset, &text);
                                }
                                _ => {}
                            }
                            Some((
                                out,
                                StreamState::Live {
                                    state,
                                    id,
                                    rx,
                                    sent,
                                    numberer,
                                },
                            ))
                        }
                        Ok(Live::Finished(final_interaction)) => {
                            for (i, step) in final_interaction.steps.iter().enumerate().skip(sent) {
                                numberer.step(&mut out, i, step);
                            }
                            for ev in final_events(&final_interaction) {
                                numberer.push(&mut out, ev);
                            }
                            out.push(done());
                            Some((out, StreamState::Done))
                        }
                        Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => {
                            // Fell behind or the run ended: catch up from the store.
                            let Some(stored) =
                                catch_up(&state, &id, &mut sent, &mut numberer, &mut out).await
                            else {
                                return Some((vec![done()], StreamState::Done));
                            };
                            if stored.status.is_running() {
                                let rx = match state.app.inner.running.subscribe(&id) {
                                    Some(rx) => rx,
                                    None => {
                                        // Finished between the two reads: one more store read
                                        // gets the final state.
                                        return Some((
                                            out,
                                            StreamState::Reload {
                                                state,
                                                id,
                                                sent,
                                                numberer,
                                            },
                                        ));
                                    }
                                };
                                Some((
                                    out,
                                    StreamState::Live {
                                        state,
                                        id,
                                        rx,
                                        sent,
                                        numberer,
                                    },
                                ))
                            } else {
                                for ev in final_events(&stored) {
                                    numberer.push(&mut out, ev);
                                }
                                out.push(done());
                                Some((out, StreamState::Done))
                            }
                        }
                    }
                }
                StreamState::Reload {
                    state,
                    id,
                    mut sent,
                    mut numberer,
                } => {
                    let mut out = Vec::new();
                    if let Some(stored) =
                        catch_up(&state, &id, &mut sent, &mut numberer, &mut out).await
                    {
                        for ev in final_events(&stored) {
                            numberer.push(&mut out, ev);
                        }
                    }
                    out.push(done());
                    Some((out, StreamState::Done))
                }
                StreamState::Remote {
                    state,
                    id,
                    mut changes,
                    sent,
                    mut numberer,
                } => {
                    // Until this interaction changes (a missed notification is made good by a
                    // periodic re-read), then whatever the store has beyond what was sent.
                    let _ = tokio::time::timeout(REMOTE_REREAD, async {
                        loop {
                            match changes.recv().await {
                                Ok(changed) if changed == id => return,
                                Ok(_) => continue,
                                Err(RecvError::Lagged(_)) => return,
                                Err(RecvError::Closed) => {
                                    std::future::pending::<()>().await;
                                }
                            }
                        }
                    })
                    .await;
                    let mut out = Vec::new();
                    let mut sent = sent;
                    let Some(stored) =
                        catch_up(&state, &id, &mut sent, &mut numberer, &mut out).await
                    else {
                        return Some((vec![done()], StreamState::Done));
                    };
                    if stored.status.is_running() {
                        Some((
                            out,
                            StreamState::Remote {
                                state,
                                id,
                                changes,
                                sent,
                                numberer,
                            },
                        ))
                    } else {
                        for ev in final_events(&stored) {
                            numberer.push(&mut out, ev);
                        }
                        out.push(done());
                        Some((out, StreamState::Done))
                    }
                }
                StreamState::Done => None,
            }
        },
    )
    .flat_map(|events| futures::stream::iter(events.into_iter().map(Ok)))
}

/// Re-reads interaction `id` and emits its steps beyond the `sent` first ones (advancing
/// `sent`); `None` when it is gone.
async fn catch_up(
    state: &Scoped,
    id: &str,
    sent: &mut usize,
    numberer: &mut Numberer,
    out: &mut Vec<Event>,
) -> Option<Interaction> {
    let stored = state
        .app
        .inner
        .store
        .get_interaction(&state.project, id)
        .await
        .ok()
        .flatten()?;
    for (i, step) in stored.steps.iter().enumerate().skip(*sent) {
        numberer.step(out, i, step);
    }
    *sent = (*sent).max(stored.steps.len());
    Some(stored)
}

/// How long a stream of an interaction running on another replica waits for a notification
/// before it reads the store anyway.
const REMOTE_REREAD: std::time::Duration = std::time::Duration::from_secs(2);

enum StreamState {
    Start {
        state: Scoped,
        stored: Box<Interaction>,
        live: Option<tokio::sync::broadcast::Receiver<Live>>,
        /// The output so far of the code running now (its result step's index, the text).
        output: Option<(usize, String)>,
        remote: Option<tokio::sync::broadcast::Receiver<String>>,
        numberer: Numberer,
    },
    /// Following an interaction another replica runs, through the store.
    Remote {
        state: Scoped,
        id: String,
        changes: tokio::sync::broadcast::Receiver<String>,
        sent: usize,
        numberer: Numberer,
    },
    Live {
        state: Scoped,
        id: String,
        rx: tokio::sync::broadcast::Receiver<Live>,
        sent: usize,
        numberer: Numberer,
    },
    Reload {
        state: Scoped,
        id: String,
        sent: usize,
        numberer: Numberer,
    },
    Done,
}
