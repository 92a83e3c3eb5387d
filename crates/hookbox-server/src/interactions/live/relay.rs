//! A live socket served by the replica that holds its interaction's environment. The URL names
//! no interaction, so the replica a client reached learns where it belongs only from its first
//! events; when that is another replica ([`crate::holder::locate`]), this one opens a socket to
//! it as a peer (the cluster secret, the client's key and headers, as a forwarded request),
//! replays the events it has read, and relays frames both ways until either side closes. The
//! holder applies every bound; this end only copies.
//!
//! This module must not decide placement or look into frames beyond the one event it drops.

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest};

use super::frames::{self, EventError};
use crate::AppState;

/// How long the holder has to accept the relayed socket.
const PEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where to relay a socket, and what it has said so far.
#[derive(Debug)]
pub(crate) struct Relay {
    pub(crate) replica: String,
    /// The holder's `--replica-url`.
    pub(crate) url: String,
    /// The path the client upgraded on.
    pub(crate) path: String,
    /// Events to replay to the holder first, each a frame.
    pub(crate) replay: Vec<String>,
    /// This replica answered `interaction.connected` already: the holder's is dropped.
    pub(crate) connected_sent: bool,
}

/// Relays `client` to `relay`'s replica; returns when either side is done.
pub(crate) async fn relay(
    state: &AppState,
    mut client: WebSocket,
    headers: &axum::http::HeaderMap,
    relay: Relay,
    max_message: usize,
) {
    let Some(config) = state.inner.cluster.as_ref() else {
        return;
    };
    let url = format!(
        "{}{}",
        relay
            .url
            .trim_end_matches('/')
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1),
        relay.path
    );
    let peer = match url.as_str().into_client_request() {
        Ok(mut request) => {
            for (name, value) in crate::cluster::forwarding_headers(config, headers, |name| {
                name.len() >= 14 && name[..14].eq_ignore_ascii_case("sec-websocket-")
            }) {
                if let Ok(name) = tungstenite::http::HeaderName::from_bytes(name.as_bytes()) {
                    request.headers_mut().insert(name, value);
                }
            }
            let config = tungstenite::protocol::WebSocketConfig::default()
                .max_message_size(Some(max_message))
                .max_frame_size(Some(max_message));
            // A peer that does not answer in time is treated as down (its lease lapses soon).
            match tokio::time::timeout(
                PEER_TIMEOUT,
                tokio_tungstenite::connect_async_with_config(request, Some(config), false),
            )
            .await
            {
                Ok(connected) => connected,
                Err(_) => Err(tungstenite::Error::Io(std::io::ErrorKind::TimedOut.into())),
            }
        }
        Err(e) => Err(e),
    };
    let mut peer = match peer {
        Ok((peer, _)) => peer,
        Err(e) => {
            tracing::warn!(replica = %relay.replica, error = %e, "the replica holding a live interaction's environment does not answer");
            let error = EventError::new(
                "unavailable",
                format!(
                    "The interaction's environment is held by replica `{}`, which does not answer; connect again.",
                    relay.replica
                ),
            );
            let _ = client
                .send(Message::Text(
                    frames::error_event(&error).to_string().into(),
                ))
                .await;
            let _ = client
                .send(Message::Text(
                    frames::reconnection_required(None).to_string().into(),
                ))
                .await;
            let _ = client
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: Utf8Bytes::from_static("unavailable"),
                })))
                .await;
            return;
        }
    };
    tracing::debug!(replica = %relay.replica, "live socket relayed to the environment's holder");
    for frame in relay.replay {
        if peer.send(tungstenite::Message::text(frame)).await.is_err() {
            return;
        }
    }
    let mut drop_connected = relay.connected_sent;
    loop {
        tokio::select! {
            from_client = client.recv() => {
                let message = match from_client {
                    Some(Ok(Message::Text(text))) => tungstenite::Message::text(text.as_str()),
                    Some(Ok(Message::Binary(bytes))) => tungstenite::Message::binary(bytes),
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                        let _ = peer.close(None).await;
                        return;
                    }
                };
                if peer.send(message).await.is_err() {
                    return;
                }
            }
            from_peer = peer.next() => {
                let message = match from_peer {
                    Some(Ok(tungstenite::Message::Text(text))) => {
                        if drop_connected {
                            drop_connected = false;
                            let event: serde_json::Value =
                                serde_json::from_str(text.as_str()).unwrap_or_default();
                            if event["event_type"] == "interaction.connected" {
                                continue;
                            }
                        }
                        Message::Text(text.as_str().into())
                    }
                    Some(Ok(tungstenite::Message::Binary(bytes))) => Message::Binary(bytes),
                    Some(Ok(tungstenite::Message::Close(frame))) => {
                        let frame = frame.map(|f| CloseFrame {
                            code: f.code.into(),
                            reason: f.reason.as_str().into(),
                        });
                        let _ = client.send(Message::Close(frame)).await;
                        return;
                    }
                    Some(Ok(_)) => continue,
                    None | Some(Err(_)) => return,
                };
                if client.send(message).await.is_err() {
                    let _ = peer.close(None).await;
                    return;
                }
            }
        }
    }
}
