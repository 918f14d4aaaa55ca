//! The support lanes' incidents: what operators routed from their agents
//! (`incident`; docs/protocol.md, docs/support.md), one row per
//! deployment and incident id.

use serde::Serialize;

/// The most incidents one listing returns.
pub const MAX_LISTED: usize = 500;

/// One incident in a lane, as the API shows it to support.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IncidentRow {
    pub id: String,
    pub tenant: String,
    pub agent: String,
    pub severity: String,
    /// What the tenant is shown.
    pub summary: String,
    /// What support reads, secrets masked (by the operator, and again here).
    pub detail: String,
    pub correlation_id: String,
    /// When the operator received it (RFC 3339, the operator's clock).
    pub received_at: String,
    /// The lane it was routed to; none while the tenant has no lane.
    pub lane: Option<String>,
    /// When this server stored it (ms since the epoch).
    pub stored_ms: i64,
}

/// The columns [`incident_row`] reads, in order.
pub const INCIDENT_COLUMNS: &str = "id, tenant, agent, severity, summary, detail, correlation_id, \
     received_at, lane, stored_ms";

/// A row from the values of [`INCIDENT_COLUMNS`].
#[allow(clippy::too_many_arguments)]
pub fn incident_row(
    id: String,
    tenant: String,
    agent: String,
    severity: String,
    summary: String,
    detail: String,
    correlation_id: String,
    received_at: String,
    lane: Option<String>,
    stored_ms: i64,
) -> IncidentRow {
    IncidentRow {
        id,
        tenant,
        agent,
        severity,
        summary,
        detail,
        correlation_id,
        received_at,
        lane,
        stored_ms,
    }
}
