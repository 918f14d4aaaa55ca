//! The support lanes' incidents in PostgreSQL, by the rules of the SQLite
//! backend: one row per deployment and id; two replicas storing the same
//! resent incident at once store it once.

use tokio_postgres::Row;

use super::Pg;
use crate::controlplane::model::{
    INCIDENT_COLUMNS, IncidentRow, MAX_INCIDENTS_LISTED, incident_row,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::wire::{IncidentRecord, now_ms};

fn row(r: &Row) -> Result<IncidentRow, tokio_postgres::Error> {
    Ok(incident_row(
        r.try_get(0)?,
        r.try_get(1)?,
        r.try_get(2)?,
        r.try_get(3)?,
        r.try_get(4)?,
        r.try_get(5)?,
        r.try_get(6)?,
        r.try_get(7)?,
        r.try_get(8)?,
        r.try_get(9)?,
    ))
}

impl Pg {
    /// Stores an incident in its tenant's lane unless it is stored
    /// already; returns the lane it is in.
    pub async fn insert_incident(
        &self,
        deployment: &str,
        i: &IncidentRecord,
        detail: &str,
    ) -> Result<Option<String>, StoreError> {
        let now = to_i64(now_ms());
        let c = self.client().await?;
        c.execute(
            "INSERT INTO incidents (deployment, id, tenant, agent, severity, summary, detail,
             correlation_id, received_at, lane, stored_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,
               (SELECT lane FROM tenants WHERE deployment = $1 AND tenant = $3), $10)
             ON CONFLICT (deployment, id) DO NOTHING",
            &[
                &deployment,
                &i.id,
                &i.tenant,
                &i.agent,
                &i.severity,
                &i.summary,
                &detail,
                &i.correlation_id,
                &i.received_at,
                &now,
            ],
        )
        .await?;
        let row = c
            .query_opt(
                "SELECT lane FROM incidents WHERE deployment = $1 AND id = $2",
                &[&deployment, &i.id],
            )
            .await?;
        Ok(match row {
            Some(r) => r.try_get(0)?,
            None => None,
        })
    }

    /// A deployment's incidents (one tenant's when `tenant` is given),
    /// newest first, at most [`MAX_INCIDENTS_LISTED`].
    pub async fn list_incidents(
        &self,
        deployment: &str,
        tenant: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        let c = self.client().await?;
        let limit = MAX_INCIDENTS_LISTED as i64;
        let rows = c
            .query(
                &format!(
                    "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE deployment = $1
                     AND ($2::TEXT IS NULL OR tenant = $2) ORDER BY stored_ms DESC, id LIMIT $3"
                ),
                &[&deployment, &tenant, &limit],
            )
            .await?;
        rows.iter()
            .map(row)
            .collect::<Result<Vec<_>, _>>()
            .map_err(Into::into)
    }
}
