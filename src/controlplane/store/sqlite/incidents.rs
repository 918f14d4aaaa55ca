//! The support lanes' incidents in the SQLite file: one row per
//! deployment and id, so a resent incident is stored once; what support
//! did with each, and whether its operator has been told.

use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::controlplane::model::{
    INCIDENT_COLUMNS, IncidentProgress, IncidentRow, IncidentText, LaneAction,
    MAX_INCIDENTS_LISTED, PendingUpdate, incident_row,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::controlplane::store::incidents::{Act, LaneCounts, PENDING_SQL};
use crate::wire::{IncidentRecord, LaneState, now_ms};

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IncidentRow> {
    Ok(incident_row(
        IncidentText {
            deployment: r.get(0)?,
            id: r.get(1)?,
            tenant: r.get(2)?,
            agent: r.get(3)?,
            severity: r.get(4)?,
            summary: r.get(5)?,
            detail: r.get(6)?,
            correlation_id: r.get(7)?,
            received_at: r.get(8)?,
        },
        r.get(9)?,
        r.get(10)?,
        IncidentProgress {
            state: r.get(11)?,
            acknowledged_ms: r.get(12)?,
            acknowledged_by: r.get(13)?,
            resolved_ms: r.get(14)?,
            resolved_by: r.get(15)?,
            note: r.get(16)?,
            delivered: r.get(17)?,
        },
    ))
}

impl Sqlite {
    /// Stores an incident in its tenant's lane (the lane registered now;
    /// none without one), unless it is stored already. Returns the lane it
    /// is in. One transaction.
    pub fn insert_incident(
        &self,
        deployment: &str,
        i: &IncidentRecord,
        detail: &str,
    ) -> Result<Option<String>, StoreError> {
        let now = to_i64(now_ms());
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO incidents (deployment, id, tenant, agent, severity, summary, detail,
                 correlation_id, received_at, lane, stored_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
                   (SELECT lane FROM tenants WHERE deployment = ?1 AND tenant = ?3), ?10)
                 ON CONFLICT (deployment, id) DO NOTHING",
                params![
                    deployment,
                    i.id,
                    i.tenant,
                    i.agent,
                    i.severity,
                    i.summary,
                    detail,
                    i.correlation_id,
                    i.received_at,
                    now
                ],
            )?;
            let lane: Option<Option<String>> = tx
                .query_row(
                    "SELECT lane FROM incidents WHERE deployment = ?1 AND id = ?2",
                    params![deployment, i.id],
                    |r| r.get(0),
                )
                .optional()?;
            tx.commit()?;
            Ok(lane.flatten())
        })
    }

    /// A deployment's incidents (one tenant's when `tenant` is given),
    /// newest first, at most [`MAX_INCIDENTS_LISTED`].
    pub fn list_incidents(
        &self,
        deployment: &str,
        tenant: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE deployment = ?1
                 AND (?2 IS NULL OR tenant = ?2) ORDER BY stored_ms DESC, id LIMIT ?3"
            ))?;
            let rows = st
                .query_map(
                    params![deployment, tenant, MAX_INCIDENTS_LISTED as i64],
                    row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// A lane's incidents (in one state when given), newest first, at
    /// most `limit`.
    pub fn lane_incidents(
        &self,
        lane: &str,
        state: Option<LaneState>,
        limit: usize,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE lane = ?1
                 AND (?2 IS NULL OR state = ?2) ORDER BY stored_ms DESC, deployment, id LIMIT ?3"
            ))?;
            let rows = st
                .query_map(
                    params![
                        lane,
                        state.map(LaneState::as_str),
                        i64::try_from(limit).unwrap_or(i64::MAX)
                    ],
                    row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// The incidents of a lane with this id (one per deployment that has
    /// it; one deployment's when given).
    pub fn lane_incident(
        &self,
        lane: &str,
        id: &str,
        deployment: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE lane = ?1 AND id = ?2
                 AND (?3 IS NULL OR deployment = ?3) ORDER BY deployment"
            ))?;
            let rows = st
                .query_map(params![lane, id, deployment], row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// Moves one incident forward (never back); returns the row after,
    /// and whether this call moved it. `None`: no such incident.
    pub fn act_on_incident(&self, a: &Act<'_>) -> Result<Option<(IncidentRow, bool)>, StoreError> {
        let now = to_i64(now_ms());
        let (ack, res) = a.stamps(now);
        self.with(|c| {
            let tx = c.transaction()?;
            let moved = tx.execute(
                &format!(
                    "UPDATE incidents SET state = ?3,
                       acknowledged_ms = COALESCE(acknowledged_ms, ?4),
                       acknowledged_by = COALESCE(acknowledged_by, ?5),
                       resolved_ms = COALESCE(resolved_ms, ?6),
                       resolved_by = COALESCE(resolved_by, ?7),
                       note = CASE WHEN ?8 = '' THEN note ELSE ?8 END
                     WHERE deployment = ?1 AND id = ?2 AND {} < ?9",
                    LaneAction::RANK_SQL
                ),
                params![
                    a.deployment,
                    a.id,
                    a.action.target().as_str(),
                    ack.0,
                    ack.1,
                    res.0,
                    res.1,
                    a.note,
                    a.action.rank()
                ],
            )? > 0;
            let after = tx
                .query_row(
                    &format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE deployment = ?1 AND id = ?2"
                    ),
                    params![a.deployment, a.id],
                    row,
                )
                .optional()?;
            tx.commit()?;
            Ok(after.map(|r| (r, moved)))
        })
    }

    /// Updates a deployment's operator has not confirmed, oldest first.
    pub fn pending_updates(
        &self,
        deployment: &str,
        limit: usize,
    ) -> Result<Vec<PendingUpdate>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!("{PENDING_SQL} WHERE deployment = ?1 AND delivered_state <> state ORDER BY stored_ms, id LIMIT ?2"))?;
            let rows = st
                .query_map(params![deployment, limit as i64], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows.into_iter().filter_map(PendingUpdate::from_parts).collect())
        })
    }

    /// Records that the operator's copy of `id` shows `state` (if that is
    /// still the state).
    pub fn mark_delivered(
        &self,
        deployment: &str,
        id: &str,
        state: LaneState,
    ) -> Result<bool, StoreError> {
        self.with(|c| {
            Ok(c.execute(
                "UPDATE incidents SET delivered_state = state
                 WHERE deployment = ?1 AND id = ?2 AND state = ?3 AND delivered_state <> state",
                params![deployment, id, state.as_str()],
            )? > 0)
        })
    }

    /// Every lane's tenants and incident counts (one lane's when given).
    pub fn lane_counts(&self, only: Option<&str>) -> Result<LaneCounts, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT lane, deployment, tenant FROM tenants
                 WHERE lane IS NOT NULL AND (?1 IS NULL OR lane = ?1)",
            )?;
            let tenants = st
                .query_map(params![only], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            let mut st = c.prepare(
                "SELECT lane, state, count(*) FROM incidents
                 WHERE lane IS NOT NULL AND (?1 IS NULL OR lane = ?1) GROUP BY lane, state",
            )?;
            let counts = st
                .query_map(params![only], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(LaneCounts { tenants, counts })
        })
    }

    /// The lane of a tenant, and whether its operator registered it.
    pub fn tenant_lane(
        &self,
        deployment: &str,
        tenant: &str,
    ) -> Result<Option<(Option<String>, String)>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT lane, lane_uid FROM tenants WHERE deployment = ?1 AND tenant = ?2",
                params![deployment, tenant],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
        })
    }

    /// Sets a tenant's lane by hand (`exo support lane create`), and puts
    /// the tenant's unrouted incidents in it. One transaction.
    pub fn assign_lane(
        &self,
        deployment: &str,
        tenant: &str,
        lane: &str,
        contacts: &str,
        by: &str,
    ) -> Result<usize, StoreError> {
        let now = to_i64(now_ms());
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "INSERT INTO tenants (deployment, tenant, updated_ms, lane, contacts,
                 lane_generation, lane_updated_ms, lane_uid)
                 VALUES (?1, ?2, ?3, ?4, ?5, -1, ?3, ?6)
                 ON CONFLICT (deployment, tenant) DO UPDATE SET
                   lane = excluded.lane, contacts = excluded.contacts,
                   lane_generation = -1, lane_updated_ms = excluded.lane_updated_ms,
                   lane_uid = excluded.lane_uid",
                params![deployment, tenant, now, lane, contacts, by],
            )?;
            let n = adopt(&tx, deployment, tenant)?;
            tx.commit()?;
            Ok(n)
        })
    }
}

/// Puts a tenant's unrouted incidents into its lane, owing their operator
/// an update that names it.
pub(super) fn adopt(
    c: &rusqlite::Connection,
    deployment: &str,
    tenant: &str,
) -> rusqlite::Result<usize> {
    c.execute(
        "UPDATE incidents SET lane = (SELECT lane FROM tenants WHERE deployment = ?1 AND tenant = ?2),
           delivered_state = ''
         WHERE deployment = ?1 AND tenant = ?2 AND lane IS NULL
           AND (SELECT lane FROM tenants WHERE deployment = ?1 AND tenant = ?2) IS NOT NULL",
        params![deployment, tenant],
    )
}
