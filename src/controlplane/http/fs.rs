//! `exo fs` through the control plane: a user's WebSocket
//! (`/api/v1/deployments/{name}/fs`) carrying one AgentFS command to the
//! deployment's operator, and for a copy its bytes.
//!
//! User side: the first message is text, `{"command": {...}, "actor":
//! "...", "timeout_ms": N}` with a wire `Command`. For `agentfs_write` the
//! user then sends the tar stream as binary messages and ends it with the
//! text `{"end": true, "sha256": "<digest of its files>"}`; for
//! `agentfs_read` the server sends the stream as binary messages. Every
//! command ends with one text message, the operator's `command_result`,
//! and a close. The user closing early aborts the copy (`fs_abort`).
//!
//! Guarantees: refused before the upgrade (HTTP 409) when the deployment
//! is offline or its operator does not advertise `mount-filesystems`;
//! at most `fs::WINDOW` chunks are in flight towards the operator, and the
//! user's socket is read only when the window has room (TCP backpressure
//! reaches the user); audited as `fs.<command>`.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::controlplane::App;
use crate::controlplane::model::NewAudit;
use crate::controlplane::relay::FromCopy;
use crate::controlplane::ws::MAX_COMMAND_TIMEOUT;
use crate::wire::fs::{CAP_MOUNT_FILESYSTEMS, CHUNK_BYTES, IDLE_TIMEOUT_MS, WINDOW};
use crate::wire::{
    self, Command, CommandRequest, CommandResult, Frame, FsAbort, FsChunk, FsChunkAck,
};

#[derive(Debug, Deserialize)]
struct Opening {
    command: Command,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct End {
    end: bool,
    #[serde(default)]
    sha256: Option<String>,
}

fn refuse(status: StatusCode, msg: String) -> Response {
    (status, axum::Json(json!({ "error": msg }))).into_response()
}

/// Why a deployment cannot take a command that needs `capability` now, if
/// it cannot: an operator is sent no command it did not announce (one
/// that does not know its name would close its connection on it).
pub fn unavailable(app: &App, deployment: &str, capability: &str) -> Option<String> {
    match app.live.capabilities(deployment) {
        None => Some(format!(
            "deployment {deployment} is offline (no live connection); refused"
        )),
        Some(caps) if !caps.iter().any(|c| c == capability) => Some(format!(
            "deployment {deployment}'s operator does not advertise the {capability} \
             capability (it advertises: {}); upgrade the operator",
            if caps.is_empty() {
                "nothing".to_owned()
            } else {
                caps.join(", ")
            }
        )),
        Some(_) => None,
    }
}

pub async fn fs(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    match app.store.deployment_exists(&name).await {
        Ok(true) => {}
        Ok(false) => {
            return refuse(
                StatusCode::NOT_FOUND,
                format!("deployment {name:?} does not exist"),
            );
        }
        Err(e) => return refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
    if let Some(why) = unavailable(&app, &name, CAP_MOUNT_FILESYSTEMS) {
        return refuse(StatusCode::CONFLICT, why);
    }
    ws.max_message_size(4 * CHUNK_BYTES)
        .on_upgrade(move |socket| serve(app, name, socket))
}

async fn close(user: &mut WebSocket, reason: &str) {
    let short: String = reason.chars().take(100).collect();
    let _ = user
        .send(Message::Close(Some(CloseFrame {
            code: 1000,
            reason: Utf8Bytes::from(short),
        })))
        .await;
}

fn failed(id: &str, error: impl Into<String>) -> CommandResult {
    CommandResult {
        id: id.to_owned(),
        ok: false,
        result: serde_json::Value::Null,
        error: Some(error.into()),
    }
}

async fn serve(app: Arc<App>, deployment: String, mut user: WebSocket) {
    let id = wire::random_id();
    let opening = match user.recv().await {
        Some(Ok(Message::Text(t))) => serde_json::from_str::<Opening>(t.as_str()),
        _ => {
            close(&mut user, "expected the command as the first text message").await;
            return;
        }
    };
    let opening = match opening {
        Ok(o) => o,
        Err(e) => {
            let r = failed(&id, format!("bad command: {e}"));
            let _ = user.send(Message::Text(json!(r).to_string().into())).await;
            close(&mut user, "bad command").await;
            return;
        }
    };
    // The upgrade checked `mount-filesystems`; an App volume command needs
    // its own capability.
    let capability = opening.command.capability();
    if capability != CAP_MOUNT_FILESYSTEMS
        && let Some(why) = unavailable(&app, &deployment, capability)
    {
        let r = failed(&id, why);
        let _ = user.send(Message::Text(json!(r).to_string().into())).await;
        close(&mut user, "refused").await;
        return;
    }
    let actor = opening.actor.unwrap_or_else(|| "api".into());
    let action = format!(
        "fs.{}",
        serde_json::to_value(&opening.command)
            .ok()
            .and_then(|v| v.get("name").and_then(|n| n.as_str().map(str::to_owned)))
            .unwrap_or_default()
    );
    let target = serde_json::to_value(&opening.command).unwrap_or_default();
    let timeout =
        Duration::from_millis(opening.timeout_ms.unwrap_or(120_000)).min(MAX_COMMAND_TIMEOUT);
    let (tx, mut rx) = mpsc::unbounded_channel();
    app.transfers.insert(&id, &deployment, tx);
    let write = matches!(opening.command, Command::AgentfsWrite { .. });
    let read = matches!(opening.command, Command::AgentfsRead { .. });
    let frame = Frame::Command(CommandRequest {
        id: id.clone(),
        deadline_ms: wire::now_ms()
            .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        actor: actor.clone(),
        command: opening.command,
    });
    let result = match app.live.request(&deployment, &id, frame) {
        Err(e) => failed(&id, e.to_string()),
        Ok(done) if write => upload(&app, &deployment, &id, &mut user, &mut rx, done).await,
        Ok(done) if read => download(&app, &deployment, &id, &mut user, &mut rx, done).await,
        Ok(done) => match tokio::time::timeout(timeout, done).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => failed(&id, "the operator connection closed before answering"),
            Err(_) => failed(&id, format!("no result within {} ms", timeout.as_millis())),
        },
    };
    app.transfers.remove(&id);
    app.live.forget(&id);
    let outcome = if result.ok {
        "ok".to_owned()
    } else {
        format!("failed: {}", result.error.clone().unwrap_or_default())
    };
    let record = NewAudit {
        deployment: &deployment,
        connection_id: None,
        source: "server",
        actor: &actor,
        action: &action,
        target: &id,
        outcome: &outcome,
        detail: Some(target),
    };
    // Committed before the user hears the outcome; one that cannot be
    // audited is not reported as a success.
    let result = match app.store.append_audit(&record).await {
        Ok(()) => result,
        Err(e) => failed(
            &id,
            format!("the outcome could not be written to the audit log: {e}"),
        ),
    };
    let _ = user
        .send(Message::Text(json!(result).to_string().into()))
        .await;
    close(&mut user, "done").await;
}

fn abort(app: &App, deployment: &str, id: &str, reason: &str) {
    let _ = app.live.send_frame(
        deployment,
        Frame::FsAbort(FsAbort {
            id: id.to_owned(),
            reason: reason.to_owned(),
        }),
    );
}

/// User -> operator. Reads the user's socket only while fewer than
/// `WINDOW` chunks are unacknowledged.
async fn upload(
    app: &App,
    deployment: &str,
    id: &str,
    user: &mut WebSocket,
    rx: &mut mpsc::UnboundedReceiver<FromCopy>,
    mut done: oneshot::Receiver<CommandResult>,
) -> CommandResult {
    let idle = Duration::from_millis(IDLE_TIMEOUT_MS);
    let (mut seq, mut acked, mut ended) = (0u64, 0u64, false);
    let send = |c: FsChunk| app.live.send_frame(deployment, Frame::FsChunk(c));
    loop {
        tokio::select! {
            m = user.recv(), if !ended && seq < acked + WINDOW => {
                match m {
                    Some(Ok(Message::Binary(b))) => {
                        for piece in b.chunks(CHUNK_BYTES) {
                            let c = FsChunk { id: id.to_owned(), seq, data: B64.encode(piece), last: false, sha256: None };
                            seq += 1;
                            if send(c).is_err() {
                                return failed(id, "the deployment went offline");
                            }
                        }
                    }
                    Some(Ok(Message::Text(t))) => match serde_json::from_str::<End>(t.as_str()) {
                        Ok(e) if e.end => {
                            let c = FsChunk { id: id.to_owned(), seq, data: String::new(), last: true, sha256: e.sha256 };
                            seq += 1;
                            ended = true;
                            if send(c).is_err() {
                                return failed(id, "the deployment went offline");
                            }
                        }
                        _ => {
                            abort(app, deployment, id, "bad message from the user");
                            return failed(id, "expected binary data or {\"end\": true, ...}");
                        }
                    },
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => {
                        abort(app, deployment, id, "the user went away");
                        return failed(id, "the user went away before the end of the stream");
                    }
                    Some(Ok(_)) => {}
                }
            }
            m = rx.recv() => match m {
                Some(FromCopy::Ack(s)) => acked = acked.max(s + 1),
                Some(FromCopy::Abort(reason)) => {
                    // The operator's command_result carries the reason.
                    tracing::debug!(id, reason, "operator aborted the upload");
                    ended = true;
                }
                Some(FromCopy::Chunk(_)) => {}
                None => return failed(id, "copy dropped"),
            },
            r = &mut done => return r.unwrap_or_else(|_| failed(id, "the operator connection closed before answering")),
            _ = tokio::time::sleep(idle) => {
                abort(app, deployment, id, "idle");
                return failed(id, format!("no progress for {} s", idle.as_secs()));
            }
        }
    }
}

/// Operator -> user. Each chunk is acknowledged once written to the
/// user's socket, so the operator runs at the user's pace.
async fn download(
    app: &App,
    deployment: &str,
    id: &str,
    user: &mut WebSocket,
    rx: &mut mpsc::UnboundedReceiver<FromCopy>,
    mut done: oneshot::Receiver<CommandResult>,
) -> CommandResult {
    let idle = Duration::from_millis(IDLE_TIMEOUT_MS);
    let mut next = 0u64;
    loop {
        tokio::select! {
            biased;
            m = rx.recv() => match m {
                Some(FromCopy::Chunk(c)) => match forward(&mut next, c, user).await {
                    Ok(seq) => {
                        let _ = app.live.send_frame(deployment, Frame::FsChunkAck(FsChunkAck { id: id.to_owned(), seq }));
                    }
                    Err(e) => {
                        let e = e.to_string();
                        abort(app, deployment, id, &e);
                        return failed(id, e);
                    }
                },
                Some(FromCopy::Abort(reason)) => tracing::debug!(id, reason, "operator aborted the download"),
                Some(FromCopy::Ack(_)) => {}
                None => return failed(id, "copy dropped"),
            },
            r = &mut done => {
                // Chunks sent before the result are already queued: pass them on.
                while let Ok(FromCopy::Chunk(c)) = rx.try_recv() {
                    if let Err(e) = forward(&mut next, c, user).await {
                        return failed(id, e.to_string());
                    }
                }
                return r.unwrap_or_else(|_| failed(id, "the operator connection closed before answering"));
            }
            m = user.recv() => {
                if matches!(m, None | Some(Err(_)) | Some(Ok(Message::Close(_)))) {
                    abort(app, deployment, id, "the user went away");
                    return failed(id, "the user went away");
                }
            }
            _ = tokio::time::sleep(idle) => {
                abort(app, deployment, id, "idle");
                return failed(id, format!("no progress for {} s", idle.as_secs()));
            }
        }
    }
}

/// Why a download chunk could not be passed on; the message goes to the
/// user as the copy's error and to the operator as the abort reason.
#[derive(Debug, thiserror::Error)]
enum ForwardError {
    #[error("chunk {got} out of order (expected {want})")]
    OutOfOrder { got: u64, want: u64 },
    #[error("bad chunk data: {0}")]
    Data(#[from] base64::DecodeError),
    #[error("the user went away")]
    UserGone,
}

/// Writes one chunk to the user's socket; its `seq` when it was in order.
async fn forward(next: &mut u64, c: FsChunk, user: &mut WebSocket) -> Result<u64, ForwardError> {
    if c.seq != *next {
        return Err(ForwardError::OutOfOrder {
            got: c.seq,
            want: *next,
        });
    }
    *next += 1;
    let bytes = B64.decode(c.data.as_bytes())?;
    if !bytes.is_empty() {
        user.send(Message::Binary(bytes.into()))
            .await
            .map_err(|_| ForwardError::UserGone)?;
    }
    Ok(c.seq)
}
