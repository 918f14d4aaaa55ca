//! The audit log.
//!
//! Caveat: ids come from a sequence, so with several writers at once (two
//! replicas, or two pooled connections) a record can commit after one with
//! a higher id; a page read in between misses it until the next read from
//! the start. SQLite commits its writes one at a time.

use super::Pg;
use crate::controlplane::model::{AuditRow, NewAudit};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{detail_text, parse_detail, to_i64, to_u64};

impl Pg {
    /// Inserts one record; returns its id.
    pub async fn append_audit_at(&self, a: &NewAudit<'_>, at_ms: u64) -> Result<i64, StoreError> {
        let row = self
            .row(
                "INSERT INTO audit (deployment, connection_id, at_ms, source, actor, action,
                 target, outcome, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 RETURNING id",
                &[
                    &a.deployment,
                    &a.connection_id,
                    &to_i64(at_ms),
                    &a.source,
                    &a.actor,
                    &a.action,
                    &a.target,
                    &a.outcome,
                    &detail_text(a),
                ],
            )
            .await?
            .ok_or_else(|| StoreError::Pool("INSERT ... RETURNING gave no row".into()))?;
        Ok(row.try_get(0)?)
    }

    pub async fn list_audit_before(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AuditRow>, StoreError> {
        let rows = self
            .rows(
                "SELECT id, deployment, connection_id, at_ms, source, actor, action, target,
                 outcome, detail FROM audit WHERE deployment = $1 AND id < $3
                 ORDER BY id DESC LIMIT $2",
                &[
                    &deployment,
                    &i64::try_from(limit).unwrap_or(i64::MAX),
                    &before.unwrap_or(i64::MAX),
                ],
            )
            .await?;
        // Read newest first, returned oldest first.
        rows.iter()
            .rev()
            .map(|r| {
                Ok(AuditRow {
                    id: r.try_get(0)?,
                    deployment: r.try_get(1)?,
                    connection_id: r.try_get(2)?,
                    at_ms: to_u64(r.try_get(3)?),
                    source: r.try_get(4)?,
                    actor: r.try_get(5)?,
                    action: r.try_get(6)?,
                    target: r.try_get(7)?,
                    outcome: r.try_get(8)?,
                    detail: parse_detail(r.try_get(9)?),
                })
            })
            .collect()
    }
}
