//! The way down for incident updates (`incident_update`): the connection
//! hands each to the leader's dispatcher, which records it in the
//! `Incident`'s status, and answers `incident_update_ack` only once the
//! dispatcher says the status shows it.
//!
//! Guarantees: bounded ([`CAPACITY`]); a full inbox or a dispatcher that
//! does not answer within [`ANSWER_WITHIN`] leaves the update unanswered,
//! and the control plane sends it again (it keeps what is owed). The
//! receiver is taken by one dispatcher at a time (a leadership term).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::wire::IncidentUpdate;

/// Updates waiting for the dispatcher at most.
pub const CAPACITY: usize = 1024;
/// How long the connection waits for the dispatcher's answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// One update and where to say it is recorded.
pub type Delivery = (IncidentUpdate, oneshot::Sender<()>);

/// Shared by the connection (sender) and the dispatcher (receiver).
#[derive(Clone)]
pub struct IncidentInbox {
    tx: mpsc::Sender<Delivery>,
    rx: Arc<Mutex<mpsc::Receiver<Delivery>>>,
}

impl Default for IncidentInbox {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(CAPACITY);
        IncidentInbox {
            tx,
            rx: Arc::new(Mutex::new(rx)),
        }
    }
}

impl std::fmt::Debug for IncidentInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncidentInbox").finish_non_exhaustive()
    }
}

impl IncidentInbox {
    /// Hands an update over; the receiver resolves once it is recorded.
    /// `None` when the inbox is full (the control plane sends it again).
    pub fn offer(&self, u: IncidentUpdate) -> Option<oneshot::Receiver<()>> {
        let (tx, rx) = oneshot::channel();
        self.tx.try_send((u, tx)).ok().map(|()| rx)
    }

    /// The receiving end, for one dispatcher at a time.
    pub async fn take(&self) -> tokio::sync::OwnedMutexGuard<mpsc::Receiver<Delivery>> {
        self.rx.clone().lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::LaneState;

    #[tokio::test]
    async fn an_update_is_answered_once_the_dispatcher_says_so() {
        let inbox = IncidentInbox::default();
        let u = IncidentUpdate {
            id: "inc-0123456789abcdef01234567".into(),
            state: LaneState::Resolved,
            at: "2026-12-06T10:00:00Z".into(),
            lane: None,
        };
        let answered = inbox.offer(u.clone()).unwrap();
        let mut rx = inbox.take().await;
        let (got, done) = rx.recv().await.unwrap();
        assert_eq!(got, u);
        done.send(()).unwrap();
        assert!(answered.await.is_ok());
        // Dropped unanswered: the connection sees an error and sends nothing.
        let lost = inbox.offer(u).unwrap();
        drop(rx.recv().await.unwrap());
        assert!(lost.await.is_err());
    }
}
