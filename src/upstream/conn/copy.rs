//! Copies on the operator side: an `agentfs_write` or `agentfs_read`
//! command and its `fs_chunk` frames, run through the same
//! `agentfs::transfer` code the CLI's direct route uses.
//!
//! Flow control: an upload's chunk is acknowledged once written into the
//! pod's `tar -x`; a download sends at most `WINDOW` chunks ahead of the
//! control plane's acknowledgements. A copy with no traffic for
//! `IDLE_TIMEOUT_MS`, or an `fs_abort`, is given up and its staging
//! folder removed.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use kube::Client;
use tokio::sync::mpsc;

use super::Out;
use crate::agentfs::FsError;
use crate::agentfs::helper::HelperOpts;
use crate::agentfs::tarstream::Limits;
use crate::agentfs::transfer::{Download, Upload};
use crate::upstream::actions::ActionError;
use crate::wire::fs::{IDLE_TIMEOUT_MS, WINDOW};
use crate::wire::{Command, Frame, FsAbort, FsChunk, FsChunkAck};

/// What the control plane sent for one copy.
#[derive(Debug)]
pub(super) enum FromServer {
    Chunk(FsChunk),
    Ack(u64),
    Abort(String),
}

impl FromServer {
    /// The copy a frame belongs to, and what it says.
    pub(super) fn route(frame: Frame) -> Option<(String, Self)> {
        match frame {
            Frame::FsChunk(c) => Some((c.id.clone(), FromServer::Chunk(c))),
            Frame::FsChunkAck(a) => Some((a.id, FromServer::Ack(a.seq))),
            Frame::FsAbort(a) => Some((a.id, FromServer::Abort(a.reason))),
            _ => None,
        }
    }
}

async fn send(tx: &mpsc::Sender<Out>, f: Frame) -> Result<(), FsError> {
    tx.send(Out::Frame(Box::new(f)))
        .await
        .map_err(|_| FsError::Invalid("the control plane connection closed".into()))
}

fn limits(asked: u64, cap: u64) -> Limits {
    Limits {
        max_bytes: asked.min(cap),
        ..Limits::default()
    }
}

/// Runs one copy to its end; the value is the `command_result`.
pub(super) async fn run(
    client: Client,
    id: String,
    command: Command,
    helper: HelperOpts,
    cap: u64,
    mut rx: mpsc::Receiver<FromServer>,
    tx: mpsc::Sender<Out>,
) -> Result<serde_json::Value, ActionError> {
    let idle = Duration::from_millis(IDLE_TIMEOUT_MS);
    let done = match command {
        Command::AgentfsWrite {
            namespace,
            fs_name,
            path,
            top,
            max_bytes,
        } => {
            let up = Upload::begin(
                &client,
                &namespace,
                &fs_name,
                &path,
                &top,
                limits(max_bytes, cap),
                &helper,
            )
            .await?;
            receive(up, &id, &mut rx, &tx, idle).await?
        }
        Command::AgentfsRead {
            namespace,
            fs_name,
            path,
            max_bytes,
        } => {
            let down = Download::begin(
                &client,
                &namespace,
                &fs_name,
                &path,
                limits(max_bytes, cap),
                &helper,
            )
            .await?;
            transmit(down, &id, &mut rx, &tx, idle).await?
        }
        _ => {
            return Err(ActionError::Invalid(
                "not a copy: agentfs_write or agentfs_read".into(),
            ));
        }
    };
    serde_json::to_value(done).map_err(|e| ActionError::Invalid(e.to_string()))
}

async fn receive(
    mut up: Upload,
    id: &str,
    rx: &mut mpsc::Receiver<FromServer>,
    tx: &mpsc::Sender<Out>,
    idle: Duration,
) -> Result<crate::wire::fs::Transferred, FsError> {
    let mut next = 0u64;
    loop {
        let m = tokio::time::timeout(idle, rx.recv()).await;
        let failure = match m {
            Err(_) => format!("no data for {} s", idle.as_secs()),
            Ok(None) => "the copy was dropped".to_owned(),
            Ok(Some(FromServer::Abort(r))) => format!("aborted: {r}"),
            Ok(Some(FromServer::Ack(_))) => continue,
            Ok(Some(FromServer::Chunk(c))) => {
                if c.seq != next {
                    format!("chunk {} out of order (expected {next})", c.seq)
                } else {
                    next += 1;
                    match B64.decode(c.data.as_bytes()) {
                        Err(e) => format!("bad chunk data: {e}"),
                        Ok(data) => {
                            if let Err(e) = up.write(&data).await {
                                up.abort().await;
                                return Err(e);
                            }
                            let ack = FsChunkAck {
                                id: id.to_owned(),
                                seq: c.seq,
                            };
                            send(tx, Frame::FsChunkAck(ack)).await?;
                            if c.last {
                                return up.finish(c.sha256.as_deref()).await;
                            }
                            continue;
                        }
                    }
                }
            }
        };
        up.abort().await;
        return Err(FsError::Stream(failure));
    }
}

async fn transmit(
    mut down: Download,
    id: &str,
    rx: &mut mpsc::Receiver<FromServer>,
    tx: &mpsc::Sender<Out>,
    idle: Duration,
) -> Result<crate::wire::fs::Transferred, FsError> {
    let (mut seq, mut acked) = (0u64, 0u64);
    loop {
        // Take every acknowledgement (or abort) already here; wait while
        // the window is full.
        loop {
            let m = if seq >= acked + WINDOW {
                tokio::time::timeout(idle, rx.recv()).await.map_err(|_| {
                    FsError::Stream(format!("no acknowledgement for {} s", idle.as_secs()))
                })?
            } else {
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                }
            };
            match m {
                None => return Err(FsError::Stream("the copy was dropped".into())),
                Some(FromServer::Abort(r)) => return Err(FsError::Stream(format!("aborted: {r}"))),
                Some(FromServer::Ack(s)) => acked = acked.max(s + 1),
                Some(FromServer::Chunk(_)) => {}
            }
        }
        let chunk = match down.next().await {
            Ok(c) => c,
            Err(e) => {
                let abort = FsAbort {
                    id: id.to_owned(),
                    reason: e.to_string(),
                };
                let _ = send(tx, Frame::FsAbort(abort)).await;
                return Err(e);
            }
        };
        let Some(data) = chunk else {
            let done = down.finish().await?;
            let last = FsChunk {
                id: id.to_owned(),
                seq,
                data: String::new(),
                last: true,
                sha256: Some(done.sha256.clone()),
            };
            send(tx, Frame::FsChunk(last)).await?;
            return Ok(done);
        };
        let c = FsChunk {
            id: id.to_owned(),
            seq,
            data: B64.encode(&data),
            last: false,
            sha256: None,
        };
        seq += 1;
        send(tx, Frame::FsChunk(c)).await?;
    }
}
