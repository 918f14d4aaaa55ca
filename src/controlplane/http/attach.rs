//! Shell attach: a user's WebSocket (`/api/v1/deployments/{name}/attach`)
//! bridged to an exec session the operator opens in the agent's pod.
//!
//! User side of the bridge: binary messages are stdin bytes; a text message
//! `{"resize": {"cols": C, "rows": R}}` resizes the terminal; the server
//! sends stdout as binary messages, then the session's end reason whole as
//! the text message `{"reason": "..."}`, then a close whose reason is the
//! same text made to fit a close frame ([`close::reason`]).
//! Guarantees: refused (HTTP 409) when the deployment has no live
//! connection; a session ends when either side ends or the operator
//! connection drops; open and close are audited.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::controlplane::App;
use crate::controlplane::model::NewAudit;
use crate::controlplane::relay::FromShell;
use crate::wire::{self, AttachClose, AttachData, AttachOpen, AttachResize, Frame, close};

#[derive(Debug, Deserialize)]
pub struct AttachQuery {
    namespace: String,
    agent: String,
    #[serde(default)]
    container: Option<String>,
    /// Command words separated by spaces; default `sh`.
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    tty: Option<bool>,
    #[serde(default)]
    cols: Option<u16>,
    #[serde(default)]
    rows: Option<u16>,
    #[serde(default)]
    actor: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Resize {
    resize: Size,
}

#[derive(Debug, Deserialize)]
struct Size {
    cols: u16,
    rows: u16,
}

pub async fn attach(
    State(app): State<Arc<App>>,
    Path(name): Path<String>,
    Query(q): Query<AttachQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    if !app.live.view(&name).connected {
        return (
            StatusCode::CONFLICT,
            axum::Json(serde_json::json!({
                "error": format!("deployment {name} is offline (no live connection); refused")
            })),
        )
            .into_response();
    }
    ws.on_upgrade(move |socket| bridge(app, name, q, socket))
}

async fn bridge(app: Arc<App>, deployment: String, q: AttachQuery, mut user: WebSocket) {
    let id = wire::random_id();
    let (tx, mut rx) = mpsc::unbounded_channel();
    app.attaches.insert(&id, &deployment, tx);
    let actor = q.actor.clone().unwrap_or_else(|| "api".into());
    let target = format!("{}/{}", q.namespace, q.agent);
    let open = Frame::AttachOpen(AttachOpen {
        session: id.clone(),
        namespace: q.namespace,
        agent: q.agent,
        container: q.container,
        command: q
            .command
            .map(|c| c.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        tty: q.tty.unwrap_or(true),
        cols: q.cols.unwrap_or(80),
        rows: q.rows.unwrap_or(24),
        actor: actor.clone(),
    });
    let audit = async |action: &str, outcome: &str| {
        let record = NewAudit {
            deployment: &deployment,
            connection_id: None,
            source: "server",
            actor: &actor,
            action,
            target: &target,
            outcome,
            detail: Some(serde_json::json!({ "attach_session": id })),
        };
        app.store.append_audit(&record).await
    };
    // The opening is audited before the operator is asked: a shell that
    // cannot be audited is not opened.
    let reason = if let Err(e) = audit("attach.opened", "ok").await {
        format!("the shell could not be written to the audit log: {e}")
    } else if app.live.send_frame(&deployment, open).is_err() {
        "deployment went offline".to_owned()
    } else {
        loop {
            tokio::select! {
                m = user.recv() => {
                    let frame = match m {
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break "closed by the user".to_owned(),
                        Some(Ok(Message::Binary(b))) => Frame::AttachData(AttachData { session: id.clone(), data: B64.encode(&b) }),
                        Some(Ok(Message::Text(t))) => match serde_json::from_str::<Resize>(t.as_str()) {
                            Ok(r) => Frame::AttachResize(AttachResize { session: id.clone(), cols: r.resize.cols, rows: r.resize.rows }),
                            Err(_) => Frame::AttachData(AttachData { session: id.clone(), data: B64.encode(t.as_bytes()) }),
                        },
                        Some(Ok(_)) => continue,
                    };
                    if app.live.send_frame(&deployment, frame).is_err() {
                        break "deployment went offline".to_owned();
                    }
                }
                m = rx.recv() => match m {
                    Some(FromShell::Data(b)) => {
                        if user.send(Message::Binary(b.into())).await.is_err() {
                            break "user socket failed".to_owned();
                        }
                    }
                    Some(FromShell::Close(reason)) => break reason,
                    None => break "session dropped".to_owned(),
                }
            }
        }
    };
    app.attaches.remove(&id);
    let _ = app.live.send_frame(
        &deployment,
        Frame::AttachClose(AttachClose {
            session: id.clone(),
            reason: reason.clone(),
        }),
    );
    if let Err(e) = audit("attach.closed", &reason).await {
        tracing::warn!(deployment = %deployment, error = %e, "attach close not audited");
    }
    // Whole first: an error of the API server easily overruns the 123
    // bytes of a close reason.
    let whole = serde_json::json!({ "reason": reason }).to_string();
    let _ = user.send(Message::Text(Utf8Bytes::from(whole))).await;
    let _ = user
        .send(Message::Close(Some(CloseFrame {
            code: close::NORMAL,
            reason: Utf8Bytes::from(close::reason(&reason)),
        })))
        .await;
}
