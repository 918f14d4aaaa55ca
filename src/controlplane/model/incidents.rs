//! The support lanes' incidents: what operators routed from their agents
//! (`incident`; docs/protocol.md, docs/support.md), one row per
//! deployment and incident id; and what support did with them
//! (acknowledged, resolved), which flows back down to the operator
//! (`incident_update`) until it says its copy shows it.

use serde::{Deserialize, Serialize};

use crate::wire::LaneState;

/// The most incidents one listing returns unless asked for more.
pub const MAX_LISTED: usize = 500;
/// The most a lane's listing returns when asked (`?limit=`).
pub const MAX_LIMIT: usize = 5000;
/// The longest note support may add to an acknowledgement or resolution.
pub const MAX_NOTE: usize = 2000;
/// The most updates one look for undelivered ones returns.
pub const MAX_PENDING: usize = 256;

/// One incident in a lane, as the API shows it to support (and as
/// `exo support` reads it back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IncidentRow {
    pub deployment: String,
    pub id: String,
    pub tenant: String,
    pub agent: String,
    pub severity: String,
    /// What the tenant is shown.
    pub summary: String,
    /// What support reads, secrets masked (by the operator, and again here).
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub correlation_id: String,
    /// When the operator received it (RFC 3339, the operator's clock).
    pub received_at: String,
    /// The lane it was routed to; none while the tenant has no lane.
    #[serde(default)]
    pub lane: Option<String>,
    /// When this server stored it (ms since the epoch).
    pub stored_ms: i64,
    pub state: LaneState,
    #[serde(default)]
    pub acknowledged_ms: Option<i64>,
    /// The admin token that acknowledged it (its id, never the token).
    #[serde(default)]
    pub acknowledged_by: Option<String>,
    #[serde(default)]
    pub resolved_ms: Option<i64>,
    #[serde(default)]
    pub resolved_by: Option<String>,
    /// Support's note (never shown to the tenant).
    #[serde(default)]
    pub note: String,
    /// Whether the operator's copy shows `state` (and `lane`).
    pub delivered: bool,
}

/// The columns [`incident_row`] reads, in order.
pub const INCIDENT_COLUMNS: &str = "deployment, id, tenant, agent, severity, summary, detail, \
     correlation_id, received_at, lane, stored_ms, state, acknowledged_ms, acknowledged_by, \
     resolved_ms, resolved_by, note, delivered_state = state";

/// The text columns of [`INCIDENT_COLUMNS`], in order (all but `lane`).
pub struct IncidentText {
    pub deployment: String,
    pub id: String,
    pub tenant: String,
    pub agent: String,
    pub severity: String,
    pub summary: String,
    pub detail: String,
    pub correlation_id: String,
    pub received_at: String,
}

/// What support did, as stored.
pub struct IncidentProgress {
    pub state: String,
    pub acknowledged_ms: Option<i64>,
    pub acknowledged_by: Option<String>,
    pub resolved_ms: Option<i64>,
    pub resolved_by: Option<String>,
    pub note: String,
    pub delivered: bool,
}

/// A row from the values of [`INCIDENT_COLUMNS`]. A state this build does
/// not know reads as `routed` (a newer server's row).
pub fn incident_row(
    t: IncidentText,
    lane: Option<String>,
    stored_ms: i64,
    p: IncidentProgress,
) -> IncidentRow {
    IncidentRow {
        deployment: t.deployment,
        id: t.id,
        tenant: t.tenant,
        agent: t.agent,
        severity: t.severity,
        summary: t.summary,
        detail: t.detail,
        correlation_id: t.correlation_id,
        received_at: t.received_at,
        lane,
        stored_ms,
        state: LaneState::parse(&p.state).unwrap_or(LaneState::Routed),
        acknowledged_ms: p.acknowledged_ms,
        acknowledged_by: p.acknowledged_by,
        resolved_ms: p.resolved_ms,
        resolved_by: p.resolved_by,
        note: p.note,
        delivered: p.delivered,
    }
}

/// What support asks of an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneAction {
    Acknowledge,
    Resolve,
}

impl LaneAction {
    pub fn target(self) -> LaneState {
        match self {
            LaneAction::Acknowledge => LaneState::Acknowledged,
            LaneAction::Resolve => LaneState::Resolved,
        }
    }

    /// The rank of [`target`](Self::target) in SQL: states compare by
    /// their place in the order, never by their names.
    pub const RANK_SQL: &str =
        "(CASE state WHEN 'routed' THEN 0 WHEN 'acknowledged' THEN 1 ELSE 2 END)";

    pub fn rank(self) -> i64 {
        match self.target() {
            LaneState::Routed => 0,
            LaneState::Acknowledged => 1,
            LaneState::Resolved => 2,
        }
    }
}

/// What became of a [`LaneAction`]. Pure: [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The state moved forward.
    Moved(IncidentRow),
    /// It was there already (an ack of an acked one): nothing changed.
    Unchanged(IncidentRow),
    /// It is further along (an ack of a resolved one): nothing changed.
    Behind(IncidentRow),
}

/// What an action on an incident in `current` state means, once the
/// conditional update changed nothing.
pub fn decide(current: IncidentRow, action: LaneAction) -> Outcome {
    if current.state == action.target() {
        Outcome::Unchanged(current)
    } else {
        Outcome::Behind(current)
    }
}

/// An update owed to an operator: the state support moved an incident to
/// (or the lane it was given) that its copy does not show yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpdate {
    pub id: String,
    pub state: LaneState,
    pub lane: Option<String>,
    /// When the state was reached (ms since the epoch); the store time
    /// for `routed`.
    pub at_ms: i64,
}

/// One support lane: the tenants routed to it, and its incidents by state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct LaneRow {
    pub lane: String,
    /// `deployment/tenant` of each tenant whose lane it is.
    pub tenants: Vec<String>,
    pub routed: u64,
    pub acknowledged: u64,
    pub resolved: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: LaneState) -> IncidentRow {
        incident_row(
            IncidentText {
                deployment: "d".into(),
                id: "inc-0123456789abcdef01234567".into(),
                tenant: "acme".into(),
                agent: "a".into(),
                severity: "error".into(),
                summary: "s".into(),
                detail: String::new(),
                correlation_id: String::new(),
                received_at: "2026-12-06T10:00:00Z".into(),
            },
            Some("desk".into()),
            1,
            IncidentProgress {
                state: state.as_str().into(),
                acknowledged_ms: None,
                acknowledged_by: None,
                resolved_ms: None,
                resolved_by: None,
                note: String::new(),
                delivered: true,
            },
        )
    }

    #[test]
    fn an_action_that_changed_nothing_is_told_apart() {
        assert!(matches!(
            decide(row(LaneState::Acknowledged), LaneAction::Acknowledge),
            Outcome::Unchanged(_)
        ));
        assert!(matches!(
            decide(row(LaneState::Resolved), LaneAction::Acknowledge),
            Outcome::Behind(_)
        ));
        assert!(matches!(
            decide(row(LaneState::Resolved), LaneAction::Resolve),
            Outcome::Unchanged(_)
        ));
        assert_eq!(LaneAction::Resolve.rank(), 2);
        let mut r = row(LaneState::Routed);
        r.state = LaneState::parse("reopened").unwrap_or(LaneState::Routed);
        assert_eq!(r.state, LaneState::Routed);
    }
}
