//! What a deployment looks like to the API and the dashboard (built by
//! `crate::controlplane::view`).

use serde::Serialize;

use super::health::Health;

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
