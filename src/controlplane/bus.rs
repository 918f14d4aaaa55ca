//! The broadcast of every change: fed by the live state (registrations,
//! snapshots, deltas, health transitions) and the store (audit records,
//! alerts), read by the dashboard's events stream (`http::sse`).
//!
//! Guarantees: publishing never blocks nor fails; a subscriber that falls
//! behind the ring of [`RING`] changes is told so (`Lagged`) instead of
//! being sent what it missed.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::model::AuditRow;
use crate::wire::{DeltaOp, Resource};

/// Events kept for slow subscribers before they are told to resync.
pub const RING: usize = 4096;

/// One change. Deployment views are not carried: they are read when sent.
#[derive(Debug, Clone)]
pub enum Change {
    /// Something in the deployment's view changed (connection, state,
    /// snapshot, active alerts).
    Deployment(String),
    /// A delta was applied to the deployment's resource view.
    Resource {
        deployment: String,
        op: DeltaOp,
        resource: Box<Resource>,
    },
    /// A snapshot replaced the deployment's resource view.
    Resources(String),
    /// An audit record was written.
    Audit(Box<AuditRow>),
    /// An alert arrived for the deployment (its active set may have changed).
    Alerts(String),
    /// A heartbeat frame arrived: the deployment's last frame is now.
    Heartbeat(String),
    /// Something in the support lane changed (an incident arrived or
    /// moved, a tenant joined it).
    Lane(String),
    /// The deployment's operator is owed `incident_update`s.
    IncidentUpdates(String),
    /// The deployment's Rollouts in the fleet projection changed, or its
    /// connection came or went (announced to every replica).
    Fleet(String),
}

impl Change {
    /// The deployment the change is about; none for a lane's (a lane
    /// spans deployments).
    pub fn deployment(&self) -> Option<&str> {
        match self {
            Change::Deployment(d)
            | Change::Resources(d)
            | Change::Alerts(d)
            | Change::Heartbeat(d)
            | Change::IncidentUpdates(d)
            | Change::Fleet(d) => Some(d),
            Change::Resource { deployment, .. } => Some(deployment),
            Change::Audit(a) => Some(&a.deployment),
            Change::Lane(_) => None,
        }
    }
}

/// The broadcast every change goes through; cheap to clone.
#[derive(Debug, Clone)]
pub struct Bus {
    tx: broadcast::Sender<Arc<Change>>,
}

impl Default for Bus {
    fn default() -> Self {
        Self {
            tx: broadcast::Sender::new(RING),
        }
    }
}

impl Bus {
    /// Publishes a change; nobody listening is not an error.
    pub fn publish(&self, c: Change) {
        let _ = self.tx.send(Arc::new(c));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_subscriber_that_falls_behind_is_told_to_resync() {
        let bus = Bus::default();
        let mut rx = bus.subscribe();
        for i in 0..RING + 5 {
            bus.publish(Change::Alerts(format!("d{i}")));
        }
        assert!(matches!(
            rx.recv().await,
            Err(broadcast::error::RecvError::Lagged(_))
        ));
    }
}
