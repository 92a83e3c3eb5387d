//! Live interactions over WebSocket: `GET /{v}/interactions/live` (SDK 3.5+,
//! `client.aio.interactions.connect(id)`). The upgrade passes the same auth middleware, browser
//! guard and request quota as every route, and takes one of the project's `live_sockets`
//! places. Then, in the SDK's frames ([`frames`]):
//!
//! 1. `interaction.connect {id}` comes first. An interaction of the project is followed (a turn
//!    running here is streamed on); an unknown id waits for `interaction.create`, which makes a
//!    new live interaction (its id is in `interaction.created`), continuing
//!    `previous_interaction_id`'s history and environment when named.
//! 2. Each `input` is one turn through the same run as `POST /interactions` ([`turn`] →
//!    [`run::start`]: hooks, approvals, function tools, quotas, the store): its steps are stored
//!    before they are sent as `step.start/delta/stop` (the SSE shapes and `event_id`s), and the
//!    turn ends with `interaction.status_update`; a turn that completes leaves the interaction
//!    `idle`. A turn a hook paused (or that calls the client's functions) ends
//!    `requires_action`: the answer comes over REST (`POST /interactions` with
//!    `previous_interaction_id`), which goes on in place ([`answer_in_place`]) and the socket
//!    streams it.
//! 3. `interaction.complete` ends it `completed` (after the running turn) with the terminal
//!    `interaction.completed {status: google.rpc.Status}`; `interaction.cancel` cancels the
//!    running turn and the interaction; `interaction.disconnect` or a dropped socket changes
//!    nothing stored (a running turn goes on), and connecting again to the same id continues.
//!
//! Bounds (the project's quotas): frame size, frames per second, an idle timeout while no turn
//! runs, sockets per project. A malformed frame gets an `error` event naming the problem; the
//! socket's task ends only on close, a terminal event or a bound.
//!
//! This module is the socket side; runs must not depend on it.

pub(crate) mod frames;
mod relay;
mod turns;

use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use hookbox_protocol::api::{
    CreateEvent, Input, Interaction, InteractionError, InteractionStatus, LiveStatus, Step,
};
use hookbox_store::{ApprovalRecord, StatusUpdate};
use serde_json::Value;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::Instant;

use super::approvals::{self, Answer};
use super::run::{self, Live};
use super::{request, resolve, stream};
use crate::cluster::Placement;
use crate::error::{ApiError, ApiResult};
use crate::holder::{self, Needs};
use crate::quota::{Quotas, SocketGuard};
use crate::{AppState, Project, new_id};
use frames::{ClientEvent, EventError};
pub(crate) use turns::answer_in_place;
use turns::{create_live, end, turn};

/// The marker, in a live interaction's stored fields, that says it is one.
const LIVE: &str = "live";

/// Whether `i` was made on a live socket.
pub(crate) fn is_live(i: &Interaction) -> bool {
    i.extra.get(LIVE) == Some(&Value::Bool(true))
}

/// The bounds of one socket, from its project's quotas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_frame_bytes: usize,
    pub(crate) frames_per_second: u64,
    pub(crate) idle_timeout: Duration,
}

impl Limits {
    fn of(quotas: &Quotas) -> Self {
        Limits {
            max_frame_bytes: usize::try_from(quotas.live_max_frame_bytes).unwrap_or(usize::MAX),
            frames_per_second: quotas.live_frames_per_second.max(1),
            idle_timeout: Duration::from_secs(quotas.live_idle_timeout_seconds.max(1)),
        }
    }

    /// The WebSocket library's own limit: above hookbox's, so an oversized frame is read and
    /// answered with an `error` event; only one past this is a 1009 close.
    fn library_max(&self) -> usize {
        self.max_frame_bytes.saturating_mul(4).max(64 << 10)
    }
}

/// `GET /{v}/interactions/live`: the upgrade.
pub async fn upgrade(
    State(state): State<AppState>,
    Extension(project): Extension<Project>,
    token: Option<Extension<crate::auth::TokenScope>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    // A peer's relay (proved by the cluster secret) is served here, never relayed on.
    let forwarded = match crate::cluster::forwarded(state.inner.cluster.as_ref(), &headers) {
        Ok(forwarded) => forwarded,
        Err(e) => return e.into_response(),
    };
    let guard = match state.inner.quotas.open_socket(&project).await {
        Ok(guard) => guard,
        Err(e) => return e.into_response(),
    };
    let limits = Limits::of(&state.inner.quotas.quotas(&project).await);
    ws.max_message_size(limits.library_max())
        .max_frame_size(limits.library_max())
        .on_upgrade(move |socket| async move {
            let origin = Origin {
                headers,
                path: uri.path().to_owned(),
                forwarded,
            };
            let mut session = Session::new(state, project, limits, guard, origin);
            session.token = token.map(|Extension(scope)| scope);
            session.serve(socket).await;
        })
}

/// The upgrade request, for relaying it to another replica.
struct Origin {
    headers: axum::http::HeaderMap,
    path: String,
    /// A peer relayed it here.
    forwarded: bool,
}

/// One socket's state.
struct Session {
    origin: Origin,
    /// The id the client connected with (replayed when the socket is relayed).
    connect_id: Option<String>,
    state: AppState,
    project: Project,
    /// The ephemeral token the socket was opened with: it reaches its one interaction only.
    token: Option<crate::auth::TokenScope>,
    limits: Limits,
    _guard: SocketGuard,
    /// The interaction connected to (after `interaction.connect`).
    id: Option<String>,
    /// Whether it exists (an unknown id waits for `interaction.create`).
    exists: bool,
    /// The running turn's events, while one runs here.
    run: Option<broadcast::Receiver<Live>>,
    /// Runs as they start on this server (a REST answer or the sweeper going on in place).
    started: broadcast::Receiver<String>,
    /// The index of the next step the client has not been sent.
    next_index: usize,
    /// The SSE number of the next event (`event_id`, as `GET ?stream=true` numbers it).
    next_event: u64,
    /// `interaction.complete` came: complete once the running turn ends.
    completing: bool,
    /// This second's frames, for `live_frames_per_second`.
    window: (Instant, u64),
    /// The socket is done (a terminal event went out, or the client left).
    done: bool,
}

/// How a socket's loop goes on after an event.
enum Flow {
    Continue,
    /// Close with this code (a terminal event went out, or a bound).
    Close(u16, &'static str),
    /// The client went away (or asked to): nothing more to send.
    Gone,
    /// Served by another replica: relay the socket there.
    Relay(Box<relay::Relay>),
}

impl Session {
    fn new(
        state: AppState,
        project: Project,
        limits: Limits,
        guard: SocketGuard,
        origin: Origin,
    ) -> Self {
        let started = state.inner.running.started();
        Session {
            origin,
            connect_id: None,
            state,
            project,
            token: None,
            limits,
            _guard: guard,
            id: None,
            exists: false,
            run: None,
            started,
            next_index: 0,
            next_event: 1,
            completing: false,
            window: (Instant::now(), 0),
            done: false,
        }
    }

    async fn serve(&mut self, mut socket: WebSocket) {
        let mut last_frame = Instant::now();
        loop {
            // Only time without a turn running counts as idle; pings are not frames.
            let idle_at = last_frame + self.limits.idle_timeout;
            let running = self.run.is_some();
            let flow = tokio::select! {
                message = socket.recv() => match message {
                    None | Some(Err(_)) => Flow::Gone,
                    Some(Ok(Message::Close(_))) => Flow::Gone,
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => Flow::Continue,
                    Some(Ok(Message::Text(text))) => {
                        last_frame = Instant::now();
                        self.frame(&mut socket, text.as_str()).await
                    }
                    Some(Ok(Message::Binary(bytes))) => {
                        last_frame = Instant::now();
                        match std::str::from_utf8(&bytes) {
                            Ok(text) => self.frame(&mut socket, text).await,
                            Err(_) => self.send_error(&mut socket, &EventError::invalid("A binary frame must hold UTF-8 JSON text.")).await,
                        }
                    }
                },
                live = next_live(&mut self.run) => self.live(&mut socket, live).await,
                started = self.started.recv() => match started {
                    Ok(id) if Some(&id) == self.id.as_ref() && self.run.is_none() => self.follow(&mut socket).await,
                    Err(RecvError::Lagged(_)) if self.run.is_none() && self.exists => self.follow(&mut socket).await,
                    _ => Flow::Continue,
                },
                () = tokio::time::sleep_until(idle_at), if !running => {
                    let error = EventError::new("deadline_exceeded", format!(
                        "No frame for {} s: the socket is closed; the interaction is kept, connect again to go on.",
                        self.limits.idle_timeout.as_secs()
                    ));
                    let _ = send(&mut socket, frames::error_event(&error)).await;
                    let _ = send(&mut socket, frames::reconnection_required(self.id.as_deref())).await;
                    Flow::Close(1000, "idle")
                }
            };
            match flow {
                Flow::Continue if !self.done => {}
                Flow::Continue => {
                    close(&mut socket, 1000, "done").await;
                    return;
                }
                Flow::Close(code, reason) => {
                    close(&mut socket, code, reason).await;
                    return;
                }
                Flow::Gone => {
                    tracing::debug!(interaction_id = ?self.id, "live socket closed by the client");
                    return;
                }
                Flow::Relay(to) => {
                    relay::relay(
                        &self.state,
                        socket,
                        &self.origin.headers,
                        *to,
                        self.limits.library_max(),
                    )
                    .await;
                    return;
                }
            }
        }
    }

    /// One frame from the client: each of its events in order.
    async fn frame(&mut self, socket: &mut WebSocket, text: &str) -> Flow {
        if !self.admit() {
            if !self.over_rate() {
                return Flow::Continue;
            }
            let error = EventError::new(
                "resource_exhausted",
                format!(
                    "Too many frames: a live socket takes at most {} per second; this one and the rest of this second's are dropped.",
                    self.limits.frames_per_second
                ),
            );
            return self.send_error(socket, &error).await;
        }
        let events = match frames::decode(text, self.limits.max_frame_bytes) {
            Ok(events) => events,
            Err(e) => return self.send_error(socket, &e).await,
        };
        let count = events.len();
        for (k, event) in events.into_iter().enumerate() {
            let flow = match event {
                Ok(event) => self.event(socket, event).await,
                Err(e) => self.send_error(socket, &e).await,
            };
            if let Flow::Relay(mut to) = flow {
                // The rest of a batch goes on to the holder.
                if k + 1 < count
                    && let Ok(Value::Object(mut batch)) = serde_json::from_str::<Value>(text)
                    && let Some(Value::Array(all)) = batch.remove("events")
                {
                    let rest: Vec<Value> = all.into_iter().skip(k + 1).collect();
                    to.replay
                        .push(serde_json::json!({"events": rest}).to_string());
                }
                return Flow::Relay(to);
            }
            if !matches!(flow, Flow::Continue) || self.done {
                return flow;
            }
        }
        Flow::Continue
    }

    /// Counts a frame against `live_frames_per_second`; past it the frame is dropped, with one
    /// `error` per second saying so (more would let a flood make the server talk).
    fn admit(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.window.0) >= Duration::from_secs(1) {
            self.window = (now, 0);
        }
        self.window.1 += 1;
        self.window.1 <= self.limits.frames_per_second
    }

    fn over_rate(&self) -> bool {
        self.window.1 == self.limits.frames_per_second + 1
    }

    async fn event(&mut self, socket: &mut WebSocket, event: ClientEvent) -> Flow {
        if self.id.is_none() && !matches!(event, ClientEvent::Connect(_)) {
            return self
                .send_error(
                    socket,
                    &EventError::new(
                        "failed_precondition",
                        "The first event must be interaction.connect {id}.",
                    ),
                )
                .await;
        }
        let result = match event {
            ClientEvent::Connect(connect) => self.connect(socket, &connect.id).await,
            ClientEvent::Create(create) => self.create(socket, create).await,
            ClientEvent::Input(input) => self.input(input.content).await,
            ClientEvent::Complete => self.complete(socket).await,
            ClientEvent::Cancel => self.cancel(socket).await,
            ClientEvent::Disconnect => return Flow::Gone,
            ClientEvent::World(what) => Err(EventError::new(
                "unimplemented",
                format!(
                    "{what} is for interactive worlds, which hookbox does not serve: a live interaction here is an agent in its sandbox (send `input`)."
                ),
            )),
        };
        match result {
            Ok(flow) => flow,
            Err(e) => self.send_error(socket, &e).await,
        }
    }

    async fn connect(&mut self, socket: &mut WebSocket, id: &str) -> Result<Flow, EventError> {
        if self.id.is_some() {
            return Err(EventError::new(
                "failed_precondition",
                "This socket is connected already; open another one for another interaction.",
            ));
        }
        if !crate::auth::may_access(self.token.as_ref(), id) {
            // The same answer a missing interaction gets under a key: nothing is revealed.
            return Err(EventError::new(
                "not_found",
                format!("Interaction `{id}` not found."),
            ));
        }
        self.connect_id = Some(id.to_owned());
        // Subscribed before the store is read, so no step of a running turn falls in between.
        let live = self.state.inner.running.subscribe(id);
        let stored = self
            .state
            .inner
            .store
            .get_interaction(&self.project, id)
            .await
            .map_err(|e| internal(&e))?;
        self.id = Some(id.to_owned());
        let Some(i) = stored else {
            send(socket, frames::connected(id, "pending_create")).await?;
            return Ok(Flow::Continue);
        };
        // Served where its environment is held.
        if live.is_none()
            && let Some(env) = i.environment_id.as_deref()
            && let Some(to) = self
                .placed(Needs::Environment(env), Vec::new(), false)
                .await?
        {
            return Ok(Flow::Relay(to));
        }
        self.exists = true;
        self.at_end_of(&i);
        send(socket, frames::connected(id, i.status.as_str())).await?;
        // A run still registered after its end was stored is finishing: nothing to follow.
        if live.is_some() && i.status.is_running() {
            self.run = live;
            return Ok(Flow::Continue);
        }
        if !is_terminal(i.status) {
            // `interaction.connected` said the status. One stored as running but not
            // registered yet is announced as it starts (`started`, which this socket heard
            // from before the store was read).
            return Ok(Flow::Continue);
        }
        // Ended: connecting reads the end.
        Ok(self.after_turn(socket, &i, false).await)
    }

    /// Where `needs` is served: `None` here, or the relay to its replica (replaying the connect
    /// and then `replay`). A refusal (a peer relayed it here and it moved) is an error.
    async fn placed(
        &self,
        needs: Needs<'_>,
        replay: Vec<String>,
        connected_sent: bool,
    ) -> Result<Option<Box<relay::Relay>>, EventError> {
        if self.state.inner.cluster.is_none() {
            return Ok(None);
        }
        match holder::locate(&self.state, needs, self.origin.forwarded).await {
            Ok(Placement::Here) => Ok(None),
            Ok(Placement::There { replica, url }) => {
                let connect = serde_json::json!({
                    "event_type": hookbox_protocol::api::client_event::CONNECT,
                    "id": self.connect_id.as_deref().unwrap_or_default(),
                });
                let mut frames = vec![connect.to_string()];
                frames.extend(replay);
                Ok(Some(Box::new(relay::Relay {
                    replica,
                    url,
                    path: self.origin.path.clone(),
                    replay: frames,
                    connected_sent,
                })))
            }
            Err(e) => Err(api_error(&e)),
        }
    }

    /// Counts the steps of `i` as sent: the client is sent what comes after.
    fn at_end_of(&mut self, i: &Interaction) {
        self.next_index = i.steps.len();
        self.next_event = 1 + i
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| stream::step_events(index, step).len() as u64)
            .sum::<u64>();
    }

    async fn create(
        &mut self,
        socket: &mut WebSocket,
        create: CreateEvent,
    ) -> Result<Flow, EventError> {
        if self.token.is_some() {
            return Err(EventError::new(
                "permission_denied",
                "An auth token (auth_tokens/...) may only live-connect the interaction it was created for, not create one; use an API key.",
            ));
        }
        if self.exists {
            return Err(EventError::new(
                "already_exists",
                "interaction.create is for an id that does not exist yet; this one does (send `input`).",
            ));
        }
        // Continuing an interaction: made where that one's environment is held.
        if let Some(previous) = create.previous_interaction_id.as_deref()
            && self.state.inner.cluster.is_some()
        {
            let env = self
                .state
                .inner
                .store
                .get_interaction(&self.project, previous)
                .await
                .map_err(|e| internal(&e))?
                .and_then(|p| p.environment_id);
            let project = self.project.clone();
            let needs = Needs::Interaction {
                project: &project,
                environment: env.as_deref(),
            };
            let mut frame = serde_json::to_value(&create).unwrap_or_default();
            frame["event_type"] = Value::from(hookbox_protocol::api::client_event::CREATE);
            if let Some(to) = self.placed(needs, vec![frame.to_string()], true).await? {
                return Ok(Flow::Relay(to));
            }
        }
        let i = create_live(&self.state, &self.project, create)
            .await
            .map_err(|e| api_error(&e))?;
        self.id = Some(i.id.clone());
        self.exists = true;
        self.at_end_of(&i);
        send(socket, frames::created(&i.id)).await?;
        Ok(Flow::Continue)
    }

    async fn input(&mut self, content: Vec<Value>) -> Result<Flow, EventError> {
        let Some(id) = self.id.clone().filter(|_| self.exists) else {
            return Err(EventError::new(
                "failed_precondition",
                "No interaction to send input to: this id does not exist; send interaction.create first.",
            ));
        };
        if self.completing {
            return Err(EventError::new(
                "failed_precondition",
                "interaction.complete was sent: no more input.",
            ));
        }
        if self.run.is_some() {
            return Err(EventError::new(
                "failed_precondition",
                "A turn is running; send input after its interaction.status_update (or cancel it).",
            ));
        }
        let steps = request::input_steps(&Input::List(content)).map_err(|e| api_error(&e))?;
        let (events, _handle) = turn(&self.state, &self.project, &id, steps, &[], false)
            .await
            .map_err(|e| api_error(&e))?;
        self.run = Some(events);
        Ok(Flow::Continue)
    }

    async fn complete(&mut self, socket: &mut WebSocket) -> Result<Flow, EventError> {
        if !self.exists {
            return Err(EventError::new(
                "failed_precondition",
                "No interaction to complete: send interaction.create first.",
            ));
        }
        self.completing = true;
        if self.run.is_some() {
            return Ok(Flow::Continue);
        }
        let i = self.reload().await?;
        Ok(self.after_turn(socket, &i, true).await)
    }

    async fn cancel(&mut self, socket: &mut WebSocket) -> Result<Flow, EventError> {
        let Some(id) = self.id.clone().filter(|_| self.exists) else {
            return Err(EventError::new(
                "failed_precondition",
                "No interaction to cancel: send interaction.create first.",
            ));
        };
        if !run::cancel_and_wait(&self.state, &id).await {
            let i = self.reload().await?;
            if !is_terminal(i.status) {
                end(&self.state, &self.project, &i, InteractionStatus::Cancelled)
                    .await
                    .map_err(|e| api_error(&e))?;
            }
        }
        self.run = None;
        let i = self.reload().await?;
        tracing::info!(interaction_id = %id, "live interaction cancelled");
        let _ = send(socket, frames::cancelled(&id, &i)).await;
        self.done = true;
        Ok(Flow::Close(1000, "cancelled"))
    }

    async fn reload(&self) -> Result<Interaction, EventError> {
        let id = self.id.as_deref().unwrap_or_default();
        self.state
            .inner
            .store
            .get_interaction(&self.project, id)
            .await
            .map_err(|e| internal(&e))?
            .ok_or_else(|| EventError::new("not_found", format!("Interaction `{id}` was deleted.")))
    }

    /// A run started on this interaction: follow it, catching up on what it stored already.
    async fn follow(&mut self, socket: &mut WebSocket) -> Flow {
        let Some(id) = self.id.clone() else {
            return Flow::Continue;
        };
        self.run = self.state.inner.running.subscribe(&id);
        let before = self.next_index;
        match self.catch_up(socket).await {
            // Ended already: told only if it added steps (the announcement of a turn this
            // socket started itself, and followed to its end, adds none).
            Ok(Some(i)) if self.run.is_none() && self.next_index > before => {
                self.after_turn(socket, &i, false).await
            }
            Ok(_) => Flow::Continue,
            Err(e) => self.send_error(socket, &e).await,
        }
    }

    /// Sends the stored steps the client has not had; the interaction as stored.
    async fn catch_up(
        &mut self,
        socket: &mut WebSocket,
    ) -> Result<Option<Interaction>, EventError> {
        let i = self.reload().await?;
        for index in self.next_index..i.steps.len() {
            if let Some(step) = i.steps.get(index) {
                self.send_step(socket, index, step).await?;
            }
        }
        Ok(Some(i))
    }

    async fn send_step(
        &mut self,
        socket: &mut WebSocket,
        index: usize,
        step: &Step,
    ) -> Result<(), EventError> {
        let mut batch = Vec::new();
        for event in stream::step_events(index, step) {
            let event = event.with_event_id(self.next_event.to_string());
            self.next_event += 1;
            batch.push(serde_json::to_value(&event).unwrap_or(Value::Null));
        }
        self.next_index = index + 1;
        send_batch(socket, batch).await
    }

    /// An event of the running turn.
    async fn live(&mut self, socket: &mut WebSocket, live: Result<Live, RecvError>) -> Flow {
        let result = match live {
            Ok(Live::Step(index, _)) if index < self.next_index => Ok(()),
            Ok(Live::Step(index, step)) if index == self.next_index => {
                self.send_step(socket, index, &step).await
            }
            // Steps were missed: the store has them (each is stored before it is sent).
            Ok(Live::Step(..)) => self.catch_up(socket).await.map(|_| ()),
            // Running code's output: the step brings it whole.
            Ok(Live::Output { .. }) => Ok(()),
            Ok(Live::Finished(i)) => {
                self.run = None;
                return match self.catch_up(socket).await {
                    Ok(_) => self.after_turn(socket, &i, self.completing).await,
                    Err(e) => self.send_error(socket, &e).await,
                };
            }
            Err(RecvError::Lagged(_)) => self.catch_up(socket).await.map(|_| ()),
            Err(RecvError::Closed) => {
                self.run = None;
                match self.catch_up(socket).await {
                    Ok(Some(i)) => return self.after_turn(socket, &i, self.completing).await,
                    Ok(None) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Ok(()) => Flow::Continue,
            Err(e) => self.send_error(socket, &e).await,
        }
    }

    /// What the client is told when no turn runs: the status, and the terminal event when the
    /// interaction ended (or is to be completed now).
    async fn after_turn(
        &mut self,
        socket: &mut WebSocket,
        i: &Interaction,
        complete: bool,
    ) -> Flow {
        let id = i.id.clone();
        let status = i.status;
        let code = match status {
            InteractionStatus::Idle | InteractionStatus::RequiresAction if complete => {
                if let Err(e) =
                    end(&self.state, &self.project, i, InteractionStatus::Completed).await
                {
                    return self.send_error(socket, &api_error(&e)).await;
                }
                0
            }
            InteractionStatus::Completed => 0,
            InteractionStatus::Cancelled => {
                let _ = send(socket, frames::cancelled(&id, i)).await;
                self.done = true;
                return Flow::Close(1000, "cancelled");
            }
            InteractionStatus::BudgetExceeded => 8,
            InteractionStatus::Failed | InteractionStatus::Incomplete => 13,
            InteractionStatus::Idle
            | InteractionStatus::RequiresAction
            | InteractionStatus::Queued
            | InteractionStatus::InProgress
            | InteractionStatus::RequiresContinuation => {
                if send(socket, frames::status_update(&id, status.as_str()))
                    .await
                    .is_err()
                {
                    return Flow::Gone;
                }
                return Flow::Continue;
            }
        };
        let message = i
            .errors
            .first()
            .map(|e| format!("{}: {}", e.code, e.message));
        if code != 0
            && let Some(e) = i.errors.first()
        {
            let _ = send(
                socket,
                frames::error_event(&EventError::new(
                    "failed",
                    format!("{}: {}", e.code, e.message),
                )),
            )
            .await;
        }
        let ended = if complete {
            self.reload().await.unwrap_or_else(|_| i.clone())
        } else {
            i.clone()
        };
        let _ = send(
            socket,
            frames::completed(
                &id,
                &LiveStatus {
                    code,
                    message: (code != 0).then_some(message).flatten(),
                },
                &ended,
            ),
        )
        .await;
        self.done = true;
        Flow::Close(1000, "completed")
    }

    async fn send_error(&mut self, socket: &mut WebSocket, error: &EventError) -> Flow {
        match send(socket, frames::error_event(error)).await {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::Gone,
        }
    }
}

/// The running turn's next event; pending forever while none runs.
async fn next_live(run: &mut Option<broadcast::Receiver<Live>>) -> Result<Live, RecvError> {
    match run {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn send(socket: &mut WebSocket, event: Value) -> Result<(), EventError> {
    socket
        .send(Message::Text(Utf8Bytes::from(event.to_string())))
        .await
        .map_err(|_| EventError::new("unavailable", "the client went away"))
}

/// Events in one `{"events": [...]}` frame (a step's start, deltas and stop).
async fn send_batch(socket: &mut WebSocket, events: Vec<Value>) -> Result<(), EventError> {
    match events.len() {
        0 => Ok(()),
        1 => send(socket, events.into_iter().next().unwrap_or(Value::Null)).await,
        _ => send(socket, serde_json::json!({"events": events})).await,
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code,
            reason: Utf8Bytes::from_static(reason),
        })))
        .await;
}

fn is_terminal(status: InteractionStatus) -> bool {
    !matches!(
        status,
        InteractionStatus::Idle
            | InteractionStatus::RequiresAction
            | InteractionStatus::Queued
            | InteractionStatus::InProgress
    )
}

fn api_error(e: &ApiError) -> EventError {
    let code = match e.status.as_u16() {
        400 if e.message.contains("still") => "failed_precondition",
        400 => "invalid_argument",
        401 => "unauthenticated",
        403 => "permission_denied",
        404 => "not_found",
        409 => "failed_precondition",
        429 => "resource_exhausted",
        503 => "unavailable",
        _ => "internal",
    };
    EventError::new(code, e.message.clone())
}

fn internal(e: &dyn std::fmt::Display) -> EventError {
    api_error(&ApiError::internal(e))
}
