//! The way back down: what support did with an incident (acknowledged,
//! resolved, or the lane a tenant's unrouted incidents joined) is sent to
//! the deployment's operator as `incident_update` frames until it answers
//! `incident_update_ack` with the same state.
//!
//! Guarantees:
//! - only to an operator whose `hello` advertises
//!   [`CAP_INCIDENT_UPDATES`]; an older one is never sent the frame;
//! - nothing is lost: what is owed lives in the database (`state` differs
//!   from `delivered_state`), so a reconnect, a restart or another replica
//!   taking the connection finds it again; the connection looks when it
//!   opens, when it is nudged (a move on this replica, or one announced by
//!   another through the shared database), and again every [`RETRY`]
//!   while something it sent is unanswered;
//! - one store query per look (at most [`MAX_PENDING`] rows), none while
//!   nothing is owed: 10,000 idle connections cost no queries.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use super::Session;
use crate::controlplane::App;
use crate::controlplane::bus::Change;
use crate::controlplane::model::MAX_PENDING;
use crate::wire::incident::IncidentError;
use crate::wire::{CAP_INCIDENT_UPDATES, Frame, IncidentUpdate, IncidentUpdateAck, LaneState};

/// How long a sent update waits for its answer before it is sent again.
pub const RETRY: Duration = Duration::from_secs(15);

/// One connection's updates in flight.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// Whether the operator takes `incident_update`.
    pub enabled: bool,
    sent: HashMap<String, (LaneState, Instant)>,
}

impl InFlight {
    pub fn for_capabilities(caps: &[String]) -> Self {
        InFlight {
            enabled: caps.iter().any(|c| c == CAP_INCIDENT_UPDATES),
            sent: HashMap::new(),
        }
    }

    /// Whether something sent is unanswered.
    pub fn waiting(&self) -> bool {
        !self.sent.is_empty()
    }
}

fn rfc3339(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms)
        .unwrap_or_default()
        .to_string()
}

impl Session {
    /// Sends what the operator is owed and has not been sent (or was sent
    /// longer than [`RETRY`] ago), as frames on this socket.
    pub(super) async fn owed_updates(&mut self) -> Vec<Frame> {
        if !self.updates.enabled {
            return Vec::new();
        }
        let dep = &self.auth.deployment;
        let owed = match self.app.store.pending_updates(dep, MAX_PENDING).await {
            Ok(o) => o,
            Err(e) => {
                warn!(deployment = %dep, error = %e, "incident updates: lookup failed; retried later");
                return Vec::new();
            }
        };
        let now = Instant::now();
        let mut frames = Vec::new();
        for u in owed {
            let fresh = self
                .updates
                .sent
                .get(&u.id)
                .is_some_and(|(s, at)| *s == u.state && now.duration_since(*at) < RETRY);
            if fresh {
                continue;
            }
            self.updates.sent.insert(u.id.clone(), (u.state, now));
            frames.push(Frame::IncidentUpdate(IncidentUpdate {
                id: u.id,
                state: u.state,
                at: rfc3339(u.at_ms),
                lane: u.lane,
            }));
        }
        if !frames.is_empty() {
            debug!(deployment = %dep, count = frames.len(), "incident updates sent");
        }
        frames
    }

    /// Records the operator's answer. Returns whether to look for more
    /// (nothing is in flight any longer: the next batch may be waiting).
    pub(super) async fn on_update_ack(
        &mut self,
        a: &IncidentUpdateAck,
    ) -> Result<bool, IncidentError> {
        if !crate::wire::incident::valid_id(&a.id) {
            return Err(IncidentError::BadId(a.id.clone()));
        }
        let dep = &self.auth.deployment;
        if let Err(e) = self.app.store.mark_delivered(dep, &a.id, a.state).await {
            // Sent again after RETRY.
            warn!(deployment = %dep, error = %e, "incident update ack: write failed");
            return Ok(false);
        }
        if self
            .updates
            .sent
            .get(&a.id)
            .is_some_and(|(s, _)| *s == a.state)
        {
            self.updates.sent.remove(&a.id);
        }
        Ok(!self.updates.waiting())
    }
}

/// Nudges the local connection of every deployment whose operator is owed
/// updates (one subscriber to the bus for the whole server).
pub async fn relay(app: Arc<App>) {
    let mut rx = app.bus.subscribe();
    let mut shutdown = app.shutdown.subscribe();
    loop {
        let got = tokio::select! {
            r = rx.recv() => r,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        match got {
            Ok(c) => {
                if let Change::IncidentUpdates(d) = &*c {
                    app.live.nudge(d);
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => app.live.nudge_all(),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_operator_that_says_so_is_sent_updates() {
        assert!(!InFlight::for_capabilities(&["mount-filesystems".into()]).enabled);
        assert!(InFlight::for_capabilities(&[CAP_INCIDENT_UPDATES.into()]).enabled);
        assert!(!InFlight::default().waiting());
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    }
}
