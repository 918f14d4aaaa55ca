//! What both backends share about the lanes' incidents: the shape of an
//! action, the query of owed updates, and the lane listing built from
//! their raw rows.

use std::collections::BTreeMap;

use crate::controlplane::model::{LaneAction, LaneRow, PendingUpdate};
use crate::wire::LaneState;

/// Support moving one incident forward.
#[derive(Debug, Clone, Copy)]
pub struct Act<'a> {
    pub deployment: &'a str,
    pub id: &'a str,
    pub action: LaneAction,
    /// Who: the admin token's id (never the token).
    pub by: &'a str,
    /// Empty: keep the note there is.
    pub note: &'a str,
}

/// A time and who, for one stamp (none when the action sets another).
pub type Stamp<'a> = (Option<i64>, Option<&'a str>);

impl<'a> Act<'a> {
    /// The acknowledgement's and the resolution's stamps this action sets
    /// (each only where none is set yet).
    pub fn stamps(&self, now: i64) -> (Stamp<'a>, Stamp<'a>) {
        let by = Some(self.by);
        match self.action {
            LaneAction::Acknowledge => ((Some(now), by), (None, None)),
            LaneAction::Resolve => ((None, None), (Some(now), by)),
        }
    }
}

/// Selects `id, state, lane, at_ms` of the owed updates (the caller adds
/// the `WHERE`).
pub const PENDING_SQL: &str = "SELECT id, state, lane, CASE state \
     WHEN 'acknowledged' THEN acknowledged_ms WHEN 'resolved' THEN resolved_ms \
     ELSE stored_ms END FROM incidents";

impl PendingUpdate {
    /// From the columns of [`PENDING_SQL`]; a state this build does not
    /// know is skipped.
    pub fn from_parts(
        (id, state, lane, at_ms): (String, String, Option<String>, Option<i64>),
    ) -> Option<Self> {
        Some(PendingUpdate {
            id,
            state: LaneState::parse(&state)?,
            lane,
            at_ms: at_ms.unwrap_or(0),
        })
    }
}

/// The raw rows of a lane listing: `(lane, deployment, tenant)` of every
/// routed tenant and `(lane, state, count)` of the incidents.
#[derive(Debug, Default)]
pub struct LaneCounts {
    pub tenants: Vec<(String, String, String)>,
    pub counts: Vec<(String, String, i64)>,
}

impl LaneCounts {
    /// One row per lane, by name.
    pub fn lanes(self) -> Vec<LaneRow> {
        let mut by: BTreeMap<String, LaneRow> = BTreeMap::new();
        for (lane, dep, tenant) in self.tenants {
            by.entry(lane.clone())
                .or_insert_with(|| LaneRow {
                    lane,
                    ..LaneRow::default()
                })
                .tenants
                .push(format!("{dep}/{tenant}"));
        }
        for (lane, state, n) in self.counts {
            let row = by.entry(lane.clone()).or_insert_with(|| LaneRow {
                lane,
                ..LaneRow::default()
            });
            let n = u64::try_from(n).unwrap_or(0);
            match LaneState::parse(&state) {
                Some(LaneState::Acknowledged) => row.acknowledged += n,
                Some(LaneState::Resolved) => row.resolved += n,
                _ => row.routed += n,
            }
        }
        let mut rows: Vec<LaneRow> = by.into_values().collect();
        for r in &mut rows {
            r.tenants.sort();
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_merge_tenants_and_counts() {
        let rows = LaneCounts {
            tenants: vec![
                ("desk".into(), "d2".into(), "b".into()),
                ("desk".into(), "d1".into(), "a".into()),
            ],
            counts: vec![
                ("desk".into(), "routed".into(), 3),
                ("desk".into(), "resolved".into(), 1),
                ("old".into(), "acknowledged".into(), 2),
            ],
        }
        .lanes();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].lane, "desk");
        assert_eq!(rows[0].tenants, vec!["d1/a", "d2/b"]);
        assert_eq!((rows[0].routed, rows[0].resolved), (3, 1));
        assert_eq!((rows[1].lane.as_str(), rows[1].acknowledged), ("old", 2));
    }
}
