//! What a deployment looks like to the API and the dashboard: built from
//! this server's live state (`live`), or, for a deployment held by another
//! replica, from its row in the shared database (`replica`).

use std::time::Duration;

use super::model::{DeploymentView, Health, Thresholds};
use super::replica::Holding;
use crate::wire::now_ms;

impl DeploymentView {
    /// The view of a deployment from its database row, as every replica
    /// reads it. Health is judged from the row's frame time (written by the
    /// holding replica within `replica::FLUSH`); a holder without a lease
    /// is not connected. Resources stay with the holder (`hop`).
    pub fn from_holding(h: &Holding, t: Thresholds) -> Self {
        let now = now_ms();
        let connected = h.connected();
        let age = now.saturating_sub(h.last_frame_ms);
        let hello = h.hello.as_ref();
        Self {
            name: h.deployment.clone(),
            state: Health::after(Some(Duration::from_millis(age)), t),
            connected,
            session: if connected { h.session.clone() } else { None },
            connection_id: hello.map(|x| x.connection_id.clone()),
            boot_id: hello.map(|x| x.boot_id.clone()),
            agent_version: hello.map(|x| x.agent_version.clone()),
            hostname: hello.map(|x| x.host.hostname.clone()),
            connected_since_ms: connected.then_some(h.taken_ms),
            last_frame_age_ms: Some(age),
            last_frame_at_ms: Some(h.last_frame_ms),
            resources: 0,
            snapshots_completed: 0,
            deltas_applied: 0,
            snapshot_in_progress: false,
            connections: h.connections,
            evictions: h.evictions,
            disconnects: h.disconnects,
            last_close: h.last_close.clone(),
            capabilities: hello.map(|x| x.capabilities.clone()).unwrap_or_default(),
            active_alerts: 0,
            replica: Some(h.replica.clone()),
        }
    }
}
