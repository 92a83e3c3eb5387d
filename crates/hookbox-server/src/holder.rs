//! Where a request runs among replicas, and sending it there: the one path every request takes
//! that needs something only one replica has (an environment's lease, a running interaction's
//! loop, an upload session's spool). [`locate`] decides (the forwarded flag, placement by lease,
//! what a draining server takes), [`send`] forwards and relays the answer, [`to_holder`] is both
//! for a handler holding its request, and [`follow_environments`] both for every route about one
//! environment or upload session. [`take_new`] makes a new environment this replica's.
//!
//! Without replicas everything runs here (a draining lone server takes no new interaction).
//! This module decides where; it runs nothing itself and changes nothing but leases. The
//! mechanisms it uses are [`crate::cluster`]'s (leases, the forwarding request) and
//! [`crate::drain`]'s (where a draining replica sends work).

use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::cluster::{self, Placement};
use crate::error::{ApiError, ApiResult, RETRY_AFTER_SECS};
use crate::{AppState, Project, drain};

/// What a request needs, which decides where it runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Needs<'a> {
    /// Environment `id`, which exists, to work in (a fork copies it; the expiry sweeper deletes
    /// its files): here if this replica holds its lease or takes it now, else at its holder. A
    /// request a peer forwarded takes it here or is refused (503) when it moved meanwhile, so
    /// requests never bounce. Draining changes nothing.
    Environment(&'a str),
    /// A new interaction of `project` in environment `environment` (`None`, or an id `project`
    /// does not have: it will make a new one). An existing environment is placed as
    /// [`Needs::Environment`]. A draining server takes no new interaction: it goes to the
    /// environment's holder or, without one, to any live peer, and is refused (503 with
    /// `Retry-After`) when that is this replica or a peer forwarded it already.
    Interaction {
        project: &'a Project,
        environment: Option<&'a str>,
    },
    /// A request about environment `id` of `project` (its metadata, files, uploads, deletion):
    /// as [`Needs::Environment`], but only an environment `project` has is placed (an unknown id
    /// takes no lease and gets its 404 here), a draining server takes no lease (it serves the
    /// request while it holds the environment, else sends it to the holder or a live peer), and
    /// a forwarded request is served here, where its sender placed it.
    Files {
        project: Option<&'a Project>,
        id: &'a str,
    },
    /// Interaction `id`'s loop, which runs on another replica (only that one can stop it).
    Run(&'a str),
    /// An upload session opened on replica `replica` (the session's id names it).
    Session(&'a str),
}

/// A request as this replica received it, kept whole to be sent on unchanged.
#[derive(Debug)]
pub(crate) struct Received<'a> {
    pub(crate) method: Method,
    pub(crate) uri: &'a Uri,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: Bytes,
    /// Sent by a peer, which placed it here (proved by the cluster secret).
    pub(crate) forwarded: bool,
}

impl<'a> Received<'a> {
    /// A client's or a peer's request; one that claims to come from a peer without the cluster
    /// secret is refused (403).
    pub(crate) fn new(
        state: &AppState,
        method: Method,
        uri: &'a Uri,
        headers: &'a HeaderMap,
        body: Bytes,
    ) -> ApiResult<Self> {
        let forwarded = cluster::forwarded(state.inner.cluster.as_ref(), headers)?;
        Ok(Received {
            method,
            uri,
            headers,
            body,
            forwarded,
        })
    }
}

/// Where a handler's request ran.
#[derive(Debug)]
pub(crate) enum Routed {
    /// It runs here: go on.
    Here,
    /// Another replica ran it: its answer, relayed.
    There(Response),
}

/// Runs `request` where `needs` is: [`Routed::Here`], or the answer of the replica that has it.
pub(crate) async fn to_holder(
    state: &AppState,
    needs: Needs<'_>,
    request: Received<'_>,
) -> ApiResult<Routed> {
    match locate(state, needs, request.forwarded).await? {
        Placement::Here => Ok(Routed::Here),
        Placement::There { replica, url } => send(state, (&replica, &url), request)
            .await
            .map(Routed::There),
    }
}

/// Where a request that needs `needs` runs (`forwarded`: a peer sent it); see [`Needs`].
pub(crate) async fn locate(
    state: &AppState,
    needs: Needs<'_>,
    forwarded: bool,
) -> ApiResult<Placement> {
    let Some(config) = state.inner.cluster.as_ref() else {
        if matches!(needs, Needs::Interaction { .. }) && state.is_draining() {
            return Err(drain::refused());
        }
        return Ok(Placement::Here);
    };
    match needs {
        Needs::Environment(id) => cluster::place(Some(config), id, forwarded).await,
        Needs::Interaction {
            project,
            environment,
        } => {
            let existing = match environment {
                Some(id) if exists(state, project, id).await? => Some(id),
                _ => None,
            };
            if state.is_draining() {
                if forwarded {
                    return Err(drain::refused());
                }
                return match drain::placement(config, existing).await? {
                    Placement::There { replica, url } => {
                        tracing::info!(%replica, "draining: new interaction sent to a peer");
                        Ok(Placement::There { replica, url })
                    }
                    Placement::Here => Err(drain::refused()),
                };
            }
            match existing {
                Some(id) => cluster::place(Some(config), id, forwarded).await,
                None => Ok(Placement::Here),
            }
        }
        Needs::Files { project, id } => {
            if forwarded {
                return Ok(Placement::Here);
            }
            let known = match project {
                Some(project) => exists(state, project, id).await.unwrap_or(false),
                None => false,
            };
            if !known {
                Ok(Placement::Here)
            } else if state.is_draining() {
                drain::placement(config, Some(id)).await
            } else {
                cluster::place(Some(config), id, false).await
            }
        }
        Needs::Run(_) if forwarded => Ok(Placement::Here),
        Needs::Run(id) => Ok(match config.cluster.runner_of(id).await? {
            Some((replica, url)) => Placement::There { replica, url },
            None => Placement::Here,
        }),
        Needs::Session(replica) => {
            if forwarded || replica == config.cluster.replica().id {
                return Ok(Placement::Here);
            }
            match config.cluster.replica_url(replica).await? {
                Some(url) => Ok(Placement::There {
                    replica: replica.to_owned(),
                    url,
                }),
                None => Err(ApiError::unavailable(
                    format!(
                        "The upload session was opened on replica `{replica}`, which stopped; start the upload again."
                    ),
                    RETRY_AFTER_SECS,
                )),
            }
        }
    }
}

/// Whether `project` has environment `id`.
async fn exists(state: &AppState, project: &Project, id: &str) -> ApiResult<bool> {
    let id = crate::strip_resource_prefix(id, "environments");
    Ok(state
        .inner
        .store
        .get_environment(project, id)
        .await?
        .is_some())
}

/// Sends `request` to `replica` at `url` and relays its answer as it comes (streams included).
pub(crate) async fn send(
    state: &AppState,
    (replica, url): (&str, &str),
    request: Received<'_>,
) -> ApiResult<Response> {
    let Some(config) = state.inner.cluster.as_ref() else {
        return Err(ApiError::internal(
            &"a request placed on another replica without replicas",
        ));
    };
    cluster::forward(
        config,
        (replica, url),
        request.method,
        request.uri,
        request.headers,
        request.body,
    )
    .await
}

/// Makes new environment `id` this replica's, where its files are; a 503 to retry when another
/// replica took it meanwhile.
pub(crate) async fn take_new(state: &AppState, id: &str) -> ApiResult<()> {
    match cluster::place(state.inner.cluster.as_ref(), id, true).await? {
        Placement::Here => Ok(()),
        Placement::There { replica, .. } => Err(ApiError::unavailable(
            format!("Environment `{id}` was taken by replica `{replica}`; retry."),
            RETRY_AFTER_SECS,
        )),
    }
}

/// What an API path needs to run where it is held: an environment, or an upload session
/// (whose id names the replica that opened it).
fn held_part(path: &str) -> Option<Held> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let at = |name: &str| parts.iter().position(|p| *p == name);
    if let Some(i) = at("sessions") {
        let session = parts.get(i + 1)?;
        return session
            .split_once('.')
            .map(|(replica, _)| Held::Session(replica.to_owned()));
    }
    let i = at("environments")?;
    parts
        .get(i + 1)
        .map(|id| Held::Environment((*id).to_owned()))
}

#[derive(Debug, PartialEq, Eq)]
enum Held {
    Environment(String),
    Session(String),
}

/// Middleware: a request about one environment (its metadata, files, uploads, deletion) runs
/// where the environment is held, and an upload chunk where its session was opened; this
/// forwards it there, so an environment's tree is never touched by two replicas.
pub async fn follow_environments(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if state.inner.cluster.is_none() {
        return next.run(req).await;
    }
    let forwarded = match cluster::forwarded(state.inner.cluster.as_ref(), req.headers()) {
        Ok(forwarded) => forwarded,
        Err(e) => return e.into_response(),
    };
    let project = req.extensions().get::<Project>().cloned();
    let held = held_part(req.uri().path());
    let needs = match &held {
        Some(Held::Environment(id)) => Needs::Files {
            project: project.as_ref(),
            id,
        },
        Some(Held::Session(replica)) => Needs::Session(replica),
        None => return next.run(req).await,
    };
    let (replica, url) = match locate(&state, needs, forwarded).await {
        Ok(Placement::Here) => return next.run(req).await,
        Ok(Placement::There { replica, url }) => (replica, url),
        Err(e) => return e.into_response(),
    };
    let (parts, body) = req.into_parts();
    let Ok(body) = axum::body::to_bytes(body, crate::MAX_BODY_BYTES).await else {
        return ApiError::bad_request("The request body is too large or broken.").into_response();
    };
    let request = Received {
        method: parts.method.clone(),
        uri: &parts.uri,
        headers: &parts.headers,
        body,
        forwarded,
    };
    send(&state, (&replica, &url), request)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_or_an_upload_session_is_read_from_the_path_only() {
        for (path, held) in [
            (
                "/v1beta/environments/env_1/files/a.txt",
                Some(Held::Environment("env_1".into())),
            ),
            (
                "/environments/env_2",
                Some(Held::Environment("env_2".into())),
            ),
            (
                "/upload/v1beta/environments/env_3/files/workspace/b.bin",
                Some(Held::Environment("env_3".into())),
            ),
            (
                "/upload/v1beta/sessions/r_1.upl_2",
                Some(Held::Session("r_1".into())),
            ),
            // A session id without a replica was opened by a lone server: nothing to follow.
            ("/upload/v1beta/sessions/upl_2", None),
            ("/v1beta/environments", None),
            ("/v1beta/interactions/int_1", None),
        ] {
            assert_eq!(held_part(path), held, "{path}");
        }
    }
}
