//! Alerts as stored and shown: the history's rows, the active set's rows,
//! where an alert came from, and the pure rule of what a newly stored alert
//! does to the active set (the store applies it in the insert's
//! transaction, on either backend).
//!
//! The active set: a keyed firing alert (`key` set, `state` firing) becomes
//! the deployment's active alert for that key, or replaces it; a resolved
//! alert with the key removes it. Keys under [`PLANE_PREFIX`] belong to the
//! control plane (its own disconnect alert): an operator's alert with such a
//! key is stored in the history but never changes the active set, and the
//! control plane's alerts touch only keys under it.

use serde::Serialize;

use crate::wire::{Alert, AlertState, Severity};

/// Alerts kept per deployment.
pub const MAX_ALERTS_PER_DEPLOYMENT: usize = 500;

/// Keys the control plane raises itself.
pub const PLANE_PREFIX: &str = "plane/";

/// A stored alert, as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AlertRow {
    /// Order of receipt; the paging cursor.
    pub id: i64,
    pub deployment: String,
    /// The operator's id of the alert.
    pub alert_id: String,
    pub boot_id: Option<String>,
    pub connection_id: Option<String>,
    pub received_ms: u64,
    /// When the operator raised it (RFC 3339, as sent).
    pub at: String,
    pub severity: Severity,
    pub reason: String,
    pub namespace: String,
    pub object: String,
    pub message: String,
    /// The condition's key; empty for a one-off alert.
    pub key: String,
    pub state: AlertState,
}

/// Who raised an alert.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Source {
    /// An operator, in an `alert` frame.
    #[default]
    Operator,
    /// The control plane itself (its disconnect alert).
    ControlPlane,
}

/// Where an alert came from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Origin<'a> {
    pub deployment: &'a str,
    pub boot_id: Option<&'a str>,
    pub connection_id: Option<&'a str>,
    pub source: Source,
}

/// A deployment's alerts in brief, for the status page.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AlertSummary {
    pub count: u64,
    pub newest: Option<AlertRow>,
}

/// An active alert as the API shows it: the newest firing alert of its key
/// and since when the key has been active.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ActiveAlert {
    /// When the key became active (the first firing alert's receipt).
    pub since_ms: u64,
    #[serde(flatten)]
    pub alert: AlertRow,
}

/// What a newly stored alert does to the active set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveChange {
    /// A one-off alert, or a key its sender may not touch.
    None,
    /// Becomes (or replaces) the active alert of its key.
    Upsert,
    /// Ends the active alert of its key, if there is one.
    Remove,
}

/// Pure: the change `a`, sent by `source`, makes.
pub fn change_for(source: Source, a: &Alert) -> ActiveChange {
    if a.key.is_empty() {
        return ActiveChange::None;
    }
    let plane_key = a.key.starts_with(PLANE_PREFIX);
    if plane_key != (source == Source::ControlPlane) {
        return ActiveChange::None;
    }
    match a.state {
        AlertState::Firing => ActiveChange::Upsert,
        AlertState::Resolved => ActiveChange::Remove,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(key: &str, msg: &str) -> Alert {
        Alert::new(Severity::Warning, "AuditPlacement", "t1", "Pod/p", msg).keyed(key)
    }

    #[tokio::test]
    async fn changes_by_key_state_and_source() {
        let plane = Source::ControlPlane;
        let op = Source::Operator;
        let f = finding("audit/a", "m");
        let r = f.resolving("gone");
        let one_off = Alert::new(Severity::Warning, "R", "", "Pod/p", "m");
        let plane_key = finding("plane/disconnected", "m");
        let cases = [
            (op, &f, ActiveChange::Upsert),
            (op, &r, ActiveChange::Remove),
            (op, &one_off, ActiveChange::None),
            (op, &plane_key, ActiveChange::None),
            (plane, &plane_key, ActiveChange::Upsert),
            (plane, &plane_key.resolving("back"), ActiveChange::Remove),
            (plane, &f, ActiveChange::None),
        ];
        for (source, alert, want) in cases {
            assert_eq!(change_for(source, alert), want, "{source:?} {}", alert.key);
        }
    }
}
