//! The fleet-wide projection of Rollouts: one row per deployment,
//! namespace and name, written by the replica holding the deployment's
//! connection and read by every replica (`GET /api/v1/fleet/rollouts`).

/// A Rollout as the projection keeps it: the wire `Resource` as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutRow {
    pub namespace: String,
    pub name: String,
    /// `serde_json` of the wire `Resource`.
    pub resource: String,
}

/// A stored row, as the fleet view reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRollout {
    pub deployment: String,
    pub namespace: String,
    pub name: String,
    pub resource: String,
    pub updated_ms: u64,
}

/// The columns both backends select, in this order.
pub const ROLLOUT_COLUMNS: &str = "deployment, namespace, name, resource, updated_ms";
