//! Where an operator's frames for an open user session go: the shell
//! attaches (`http::attach`) and the file copies (`http::fs`) each keep one
//! [`Registry`] of their sessions, and the operator's socket (`ws`)
//! delivers to it.
//!
//! Guarantee: a frame reaches a session only when it comes from the
//! session's own deployment; a frame for an unknown session is dropped.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use tokio::sync::mpsc;

use crate::wire::{Frame, FsChunk};

/// A message to a user's session, read from an operator frame.
pub trait Routed: Sized {
    /// The session the frame is for and what it says; `None` for a frame
    /// of another kind.
    fn route(frame: Frame) -> Option<(String, Self)>;
}

/// Open sessions by id: their deployment and where their messages go.
#[derive(Debug)]
pub struct Registry<M> {
    map: Mutex<HashMap<String, (String, mpsc::UnboundedSender<M>)>>,
}

impl<M> Default for Registry<M> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<M: Routed> Registry<M> {
    pub fn insert(&self, id: &str, deployment: &str, tx: mpsc::UnboundedSender<M>) {
        if let Ok(mut m) = self.map.lock() {
            m.insert(id.to_owned(), (deployment.to_owned(), tx));
        }
    }

    pub fn remove(&self, id: &str) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(id);
        }
    }

    /// Routes an operator frame to its session; only the session's
    /// deployment may write to it.
    pub fn deliver(&self, deployment: &str, frame: Frame) {
        let Some((id, msg)) = M::route(frame) else {
            return;
        };
        if let Ok(m) = self.map.lock()
            && let Some((dep, tx)) = m.get(&id)
            && dep == deployment
        {
            let _ = tx.send(msg);
        }
    }
}

/// What the operator sent for one shell session.
#[derive(Debug)]
pub enum FromShell {
    Data(Vec<u8>),
    Close(String),
}

impl Routed for FromShell {
    fn route(frame: Frame) -> Option<(String, Self)> {
        Some(match frame {
            Frame::AttachData(d) => match B64.decode(d.data.as_bytes()) {
                Ok(bytes) => (d.session, FromShell::Data(bytes)),
                Err(e) => (d.session, FromShell::Close(format!("bad attach data: {e}"))),
            },
            Frame::AttachClose(c) => (c.session, FromShell::Close(c.reason)),
            _ => return None,
        })
    }
}

/// What the operator sent for one copy.
#[derive(Debug)]
pub enum FromCopy {
    Chunk(FsChunk),
    Ack(u64),
    Abort(String),
}

impl Routed for FromCopy {
    fn route(frame: Frame) -> Option<(String, Self)> {
        Some(match frame {
            Frame::FsChunk(c) => (c.id.clone(), FromCopy::Chunk(c)),
            Frame::FsChunkAck(a) => (a.id, FromCopy::Ack(a.seq)),
            Frame::FsAbort(a) => (a.id, FromCopy::Abort(a.reason)),
            _ => return None,
        })
    }
}

/// The shell sessions open now.
pub type Attaches = Registry<FromShell>;

/// The copies running now.
pub type Transfers = Registry<FromCopy>;
