//! The writer side of a connection: frames out in priority order, and
//! requests carried out with their acks and results.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::{FutureExt, SinkExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

use super::Out;
use crate::alerts::AlertQueue;
use crate::upstream::actions;
use crate::upstream::health::HealthHandle;
use crate::upstream::outbox::{DataItem, Outbox};
use crate::upstream::packed::DataFrame;
use crate::upstream::registrations::{Incidents, Registrations};
use crate::wire::{self, AuditRecord, CommandAck, CommandResult, Frame, Heartbeat, close};

/// Why a frame could not go out; the session retries the connection with
/// this as its reason.
#[derive(Debug, thiserror::Error)]
pub(super) enum WriteError {
    #[error("encode: {0}")]
    Encode(#[source] serde_json::Error),
    #[error("write: {0}")]
    Write(#[source] tungstenite::Error),
}

/// Acks, runs until the deadline, answers with a result and an audit record.
pub(super) async fn carry_out<F>(
    tx: &mpsc::Sender<Out>,
    id: &str,
    actor: &str,
    action: &str,
    target: serde_json::Value,
    deadline_ms: u64,
    work: F,
) -> bool
where
    F: std::future::Future<Output = Result<serde_json::Value, actions::ActionError>>,
{
    let now = wire::now_ms();
    let result = if deadline_ms <= now {
        Err("deadline passed before the request arrived".to_owned())
    } else {
        let _ = tx
            .send(Out::Frame(Box::new(Frame::CommandAck(CommandAck {
                id: id.to_owned(),
            }))))
            .await;
        match tokio::time::timeout(Duration::from_millis(deadline_ms - now), work).await {
            Err(_) => Err("deadline exceeded".to_owned()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(v)) => Ok(v),
        }
    };
    let ok = result.is_ok();
    let (value, err) = match result {
        Ok(v) => (v, None),
        Err(e) => (serde_json::Value::Null, Some(e)),
    };
    let audit = AuditRecord {
        at_ms: wire::now_ms(),
        actor: actor.to_owned(),
        action: action.to_owned(),
        target: target.to_string(),
        outcome: if ok {
            "ok".into()
        } else {
            err.clone().unwrap_or_default()
        },
        detail: serde_json::json!({ "request_id": id }),
    };
    let _ = tx
        .send(Out::Frame(Box::new(Frame::CommandResult(CommandResult {
            id: id.to_owned(),
            ok,
            result: value,
            error: err,
        }))))
        .await;
    let _ = tx.send(Out::Frame(Box::new(Frame::Audit(audit)))).await;
    ok
}

pub(super) async fn send<W>(sink: &mut W, frame: &Frame) -> Result<(), WriteError>
where
    W: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    send_text(sink, frame.to_json().map_err(WriteError::Encode)?).await
}

async fn send_text<W>(sink: &mut W, text: String) -> Result<(), WriteError>
where
    W: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    sink.send(Message::Text(text.into()))
        .await
        .map_err(WriteError::Write)
}

/// Sends a close frame (best effort: the peer may be gone already).
async fn close_with<W>(sink: &mut W, code: u16, reason: String)
where
    W: futures::Sink<Message> + Unpin,
{
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: close::reason(&reason).into(),
        })))
        .await;
}

/// What waits for a connection beyond the resources: alerts (`None` when
/// the control plane takes none), tenant registrations and incidents (each
/// book sends none to a control plane that does not take them).
pub(super) struct Held {
    pub alerts: Option<AlertQueue>,
    pub registrations: Registrations,
    pub incidents: Incidents,
}

/// Sends control frames first, heartbeats on time, alerts and tenant
/// registrations once the first snapshot is out, and data frames from the
/// outbox in between.
#[allow(clippy::too_many_arguments)]
pub(super) async fn writer<W>(
    mut sink: W,
    mut ctl_rx: mpsc::Receiver<Out>,
    mut data_rx: mpsc::Receiver<DataItem>,
    heartbeat_interval: Duration,
    count: Arc<AtomicU64>,
    health: HealthHandle,
    mut outbox: Outbox,
    held: Held,
) -> Result<(), WriteError>
where
    W: futures::Sink<Message, Error = tungstenite::Error> + Unpin,
{
    let mut hb = tokio::time::interval_at(
        tokio::time::Instant::now() + heartbeat_interval,
        heartbeat_interval,
    );
    let heartbeat = |count: &AtomicU64| {
        Frame::Heartbeat(Heartbeat {
            sent_at_ms: wire::now_ms(),
            resources: count.load(Ordering::Relaxed),
        })
    };
    // The control plane learns the cluster's state from the first snapshot;
    // alerts about it follow.
    let mut snapshot_sent = false;
    let Held {
        alerts,
        registrations,
        incidents,
    } = held;
    let alert_wake = async |q: &Option<AlertQueue>| match q {
        Some(q) => q.queued().await,
        None => std::future::pending().await,
    };
    loop {
        match ctl_rx.try_recv() {
            Ok(Out::Frame(f)) => {
                send(&mut sink, &f).await?;
                continue;
            }
            Ok(Out::Close(code, reason)) => {
                close_with(&mut sink, code, reason).await;
                return Ok(());
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return Ok(()),
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        if hb.tick().now_or_never().is_some() {
            send(&mut sink, &heartbeat(&count)).await?;
        }
        if snapshot_sent && let Some(a) = alerts.as_ref().and_then(AlertQueue::next_to_send) {
            send(&mut sink, &Frame::Alert(a)).await?;
            continue;
        }
        if snapshot_sent && let Some(r) = registrations.next_to_send() {
            send(&mut sink, &r.frame()).await?;
            continue;
        }
        if snapshot_sent && let Some(i) = incidents.next_to_send() {
            send(&mut sink, &Frame::Incident(i)).await?;
            continue;
        }
        while outbox.queued() < 256 {
            match data_rx.try_recv() {
                Ok(item) => outbox.push(item),
                Err(_) => break,
            }
        }
        if let Some(frame) = outbox.next_frame() {
            send_text(&mut sink, frame.to_json().map_err(WriteError::Encode)?).await?;
            match &frame {
                DataFrame::Snapshot { last: true, .. } => {
                    snapshot_sent = true;
                    health.update(|h| h.sent_snapshot());
                }
                DataFrame::Delta { .. } => health.update(|h| h.sent_delta()),
                DataFrame::Snapshot { .. } => {}
            }
            continue;
        }
        tokio::select! {
            biased;
            m = ctl_rx.recv() => match m {
                Some(Out::Frame(f)) => send(&mut sink, &f).await?,
                Some(Out::Close(code, reason)) => {
                    close_with(&mut sink, code, reason).await;
                    return Ok(());
                }
                None => return Ok(()),
            },
            _ = hb.tick() => send(&mut sink, &heartbeat(&count)).await?,
            // Loops back to the top, which sends it.
            _ = alert_wake(&alerts), if snapshot_sent => {}
            () = registrations.queued(), if snapshot_sent => {}
            () = incidents.queued(), if snapshot_sent => {}
            item = data_rx.recv() => match item {
                Some(item) => outbox.push(item),
                None => return Ok(()),
            },
        }
    }
}
