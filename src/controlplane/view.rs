//! What a deployment looks like to the API and the dashboard: built from
//! this server's live state (`live`), or, for a deployment held by another
//! replica, from its row in the shared database (`replica`).

use std::time::Duration;

use serde::Serialize;

use super::live::{Health, Thresholds};
use super::replica::Holding;
use crate::wire::now_ms;

/// What `/api/v1/deployments/{name}` shows.
#[derive(Debug, Clone, Serialize)]
pub struct DeploymentView {
    pub name: String,
    pub state: Health,
    pub connected: bool,
    pub session: Option<String>,
    pub connection_id: Option<String>,
    pub boot_id: Option<String>,
    pub agent_version: Option<String>,
    pub hostname: Option<String>,
    pub connected_since_ms: Option<u64>,
    pub last_frame_age_ms: Option<u64>,
    /// Wall-clock time of the last frame (ms since the epoch), so a page
    /// can count the age itself; derived from the same receive time.
    pub last_frame_at_ms: Option<u64>,
    pub resources: usize,
    pub snapshots_completed: u64,
    pub deltas_applied: u64,
    pub snapshot_in_progress: bool,
    pub connections: u64,
    pub evictions: u64,
    /// Times the deployment lost its connection without a successor taking
    /// over (evictions do not count).
    pub disconnects: u64,
    pub last_close: Option<String>,
    /// What the operator advertised in its `hello` (last known).
    pub capabilities: Vec<String>,
    /// Alerts active now (`active` module); filled in by the API.
    pub active_alerts: u64,
    /// The replica holding (or that last held) the connection; only with
    /// `--db postgres://`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

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
