//! The support lanes' incidents in PostgreSQL, by the rules of the SQLite
//! backend: one row per deployment and id; two replicas storing the same
//! resent incident at once store it once; an action moves an incident
//! forward in one conditional statement, so two replicas acting at once
//! move it once.

use tokio_postgres::Row;

use super::Pg;
use crate::controlplane::model::{
    INCIDENT_COLUMNS, IncidentProgress, IncidentRow, IncidentText, LaneAction,
    MAX_INCIDENTS_LISTED, PendingUpdate, incident_row,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::to_i64;
use crate::controlplane::store::incidents::{Act, LaneCounts, PENDING_SQL};
use crate::wire::{IncidentRecord, LaneState, now_ms};

/// The class of the per-tenant advisory lock ("LN") taken by an incident's
/// insert and by a change of the tenant's lane: without it, an incident
/// stored while its tenant is given a lane could read no lane and miss the
/// lane's adoption of the unrouted ones, and stay unrouted.
pub const LANE_LOCK: i32 = 0x4c4e;

/// Takes [`LANE_LOCK`] for one tenant until the transaction ends.
pub(super) async fn lock_tenant(
    tx: &tokio_postgres::Transaction<'_>,
    deployment: &str,
    tenant: &str,
) -> Result<(), tokio_postgres::Error> {
    let key = format!("{deployment}/{tenant}");
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&LANE_LOCK, &key],
    )
    .await
    .map(|_| ())
}

/// Puts a tenant's unrouted incidents into its lane ($1 deployment, $2
/// tenant), owing their operator an update that names it.
pub(super) const ADOPT: &str = "UPDATE incidents SET lane = t.lane, delivered_state = ''
     FROM tenants t
     WHERE t.deployment = $1 AND t.tenant = $2 AND t.lane IS NOT NULL
       AND incidents.deployment = $1 AND incidents.tenant = $2 AND incidents.lane IS NULL";

fn row(r: &Row) -> Result<IncidentRow, tokio_postgres::Error> {
    Ok(incident_row(
        IncidentText {
            deployment: r.try_get(0)?,
            id: r.try_get(1)?,
            tenant: r.try_get(2)?,
            agent: r.try_get(3)?,
            severity: r.try_get(4)?,
            summary: r.try_get(5)?,
            detail: r.try_get(6)?,
            correlation_id: r.try_get(7)?,
            received_at: r.try_get(8)?,
        },
        r.try_get(9)?,
        r.try_get(10)?,
        IncidentProgress {
            state: r.try_get(11)?,
            acknowledged_ms: r.try_get(12)?,
            acknowledged_by: r.try_get(13)?,
            resolved_ms: r.try_get(14)?,
            resolved_by: r.try_get(15)?,
            note: r.try_get(16)?,
            delivered: r.try_get(17)?,
        },
    ))
}

fn rows(rs: &[Row]) -> Result<Vec<IncidentRow>, StoreError> {
    rs.iter()
        .map(row)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Into::into)
}

impl Pg {
    /// Stores an incident in its tenant's lane unless it is stored
    /// already; returns the lane it is in. One transaction, under the
    /// tenant's [`LANE_LOCK`].
    pub async fn insert_incident(
        &self,
        deployment: &str,
        i: &IncidentRecord,
        detail: &str,
    ) -> Result<Option<String>, StoreError> {
        let now = to_i64(now_ms());
        let mut c = self.client().await?;
        let c = c.transaction().await?;
        lock_tenant(&c, deployment, &i.tenant).await?;
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
        c.commit().await?;
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
        let limit = MAX_INCIDENTS_LISTED as i64;
        rows(
            &self
                .rows(
                    &format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE deployment = $1
                     AND ($2::TEXT IS NULL OR tenant = $2) ORDER BY stored_ms DESC, id LIMIT $3"
                    ),
                    &[&deployment, &tenant, &limit],
                )
                .await?,
        )
    }

    /// A lane's incidents (in one state when given), newest first, at
    /// most `limit`.
    pub async fn lane_incidents(
        &self,
        lane: &str,
        state: Option<LaneState>,
        limit: usize,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let state = state.map(LaneState::as_str);
        rows(
            &self
                .rows(
                    &format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE lane = $1
                     AND ($2::TEXT IS NULL OR state = $2)
                     ORDER BY stored_ms DESC, deployment, id LIMIT $3"
                    ),
                    &[&lane, &state, &limit],
                )
                .await?,
        )
    }

    /// The incidents of a lane with this id (one deployment's when given).
    pub async fn lane_incident(
        &self,
        lane: &str,
        id: &str,
        deployment: Option<&str>,
    ) -> Result<Vec<IncidentRow>, StoreError> {
        rows(
            &self
                .rows(
                    &format!(
                        "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE lane = $1 AND id = $2
                     AND ($3::TEXT IS NULL OR deployment = $3) ORDER BY deployment"
                    ),
                    &[&lane, &id, &deployment],
                )
                .await?,
        )
    }

    /// Moves one incident forward (never back); returns the row after and
    /// whether this call moved it. `None`: no such incident.
    pub async fn act_on_incident(
        &self,
        a: &Act<'_>,
    ) -> Result<Option<(IncidentRow, bool)>, StoreError> {
        let now = to_i64(now_ms());
        let (ack, res) = a.stamps(now);
        let target = a.action.target().as_str();
        let rank = a.action.rank();
        let moved = self
            .execute(
                &format!(
                    "UPDATE incidents SET state = $3,
                       acknowledged_ms = COALESCE(acknowledged_ms, $4),
                       acknowledged_by = COALESCE(acknowledged_by, $5),
                       resolved_ms = COALESCE(resolved_ms, $6),
                       resolved_by = COALESCE(resolved_by, $7),
                       note = CASE WHEN $8 = '' THEN note ELSE $8 END
                     WHERE deployment = $1 AND id = $2 AND {} < $9::BIGINT",
                    LaneAction::RANK_SQL
                ),
                &[
                    &a.deployment,
                    &a.id,
                    &target,
                    &ack.0,
                    &ack.1,
                    &res.0,
                    &res.1,
                    &a.note,
                    &rank,
                ],
            )
            .await?
            > 0;
        let after = self
            .row(
                &format!(
                    "SELECT {INCIDENT_COLUMNS} FROM incidents WHERE deployment = $1 AND id = $2"
                ),
                &[&a.deployment, &a.id],
            )
            .await?;
        Ok(match after {
            Some(r) => Some((row(&r)?, moved)),
            None => None,
        })
    }

    /// Updates a deployment's operator has not confirmed, oldest first.
    pub async fn pending_updates(
        &self,
        deployment: &str,
        limit: usize,
    ) -> Result<Vec<PendingUpdate>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rs = self
            .rows(
                &format!(
                    "{PENDING_SQL} WHERE deployment = $1 AND delivered_state <> state
                     ORDER BY stored_ms, id LIMIT $2"
                ),
                &[&deployment, &limit],
            )
            .await?;
        let mut out = Vec::with_capacity(rs.len());
        for r in &rs {
            if let Some(u) = PendingUpdate::from_parts((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
            )) {
                out.push(u);
            }
        }
        Ok(out)
    }

    /// Records that the operator's copy of `id` shows `state` (if that is
    /// still the state).
    pub async fn mark_delivered(
        &self,
        deployment: &str,
        id: &str,
        state: LaneState,
    ) -> Result<bool, StoreError> {
        Ok(self
            .execute(
                "UPDATE incidents SET delivered_state = state
                 WHERE deployment = $1 AND id = $2 AND state = $3 AND delivered_state <> state",
                &[&deployment, &id, &state.as_str()],
            )
            .await?
            > 0)
    }

    /// Every lane's tenants and incident counts (one lane's when given).
    pub async fn lane_counts(&self, only: Option<&str>) -> Result<LaneCounts, StoreError> {
        let mut out = LaneCounts::default();
        for r in self
            .rows(
                "SELECT lane, deployment, tenant FROM tenants
                 WHERE lane IS NOT NULL AND ($1::TEXT IS NULL OR lane = $1)",
                &[&only],
            )
            .await?
        {
            out.tenants
                .push((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?));
        }
        for r in self
            .rows(
                "SELECT lane, state, count(*) FROM incidents
                 WHERE lane IS NOT NULL AND ($1::TEXT IS NULL OR lane = $1) GROUP BY lane, state",
                &[&only],
            )
            .await?
        {
            out.counts
                .push((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?));
        }
        Ok(out)
    }

    /// The lane of a tenant, and who registered it.
    pub async fn tenant_lane(
        &self,
        deployment: &str,
        tenant: &str,
    ) -> Result<Option<(Option<String>, String)>, StoreError> {
        match self
            .row(
                "SELECT lane, lane_uid FROM tenants WHERE deployment = $1 AND tenant = $2",
                &[&deployment, &tenant],
            )
            .await?
        {
            Some(r) => Ok(Some((r.try_get(0)?, r.try_get(1)?))),
            None => Ok(None),
        }
    }

    /// Sets a tenant's lane by hand and puts the tenant's unrouted
    /// incidents in it. One transaction.
    pub async fn assign_lane(
        &self,
        deployment: &str,
        tenant: &str,
        lane: &str,
        contacts: &str,
        by: &str,
    ) -> Result<usize, StoreError> {
        let now = to_i64(now_ms());
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        lock_tenant(&tx, deployment, tenant).await?;
        tx.execute(
            "INSERT INTO tenants (deployment, tenant, updated_ms, lane, contacts,
             lane_generation, lane_updated_ms, lane_uid)
             VALUES ($1, $2, $3, $4, $5, -1, $3, $6)
             ON CONFLICT (deployment, tenant) DO UPDATE SET
               lane = excluded.lane, contacts = excluded.contacts,
               lane_generation = -1, lane_updated_ms = excluded.lane_updated_ms,
               lane_uid = excluded.lane_uid",
            &[&deployment, &tenant, &now, &lane, &contacts, &by],
        )
        .await?;
        let n = tx.execute(ADOPT, &[&deployment, &tenant]).await?;
        tx.commit().await?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }
}
