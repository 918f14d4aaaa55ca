//! The support lanes' incidents in the SQLite file: one row per
//! deployment and id, so a resent incident is stored once.

use rusqlite::{OptionalExtension, params};

use super::Sqlite;
use crate::controlplane::model::{
    INCIDENT_COLUMNS, IncidentRow, MAX_INCIDENTS_LISTED, incident_row,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::wire::{IncidentRecord, now_ms};

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IncidentRow> {
    Ok(incident_row(
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
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
}
