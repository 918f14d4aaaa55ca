//! The session audit log in the control plane's database: records the
//! server writes and the operators send (`audit` frames), announced on the
//! store's bus as they are written, read back newest first in pages.

use super::model::{AuditRow, NewAudit};
use super::store::{Store, StoreError, to_i64, to_u64};
use crate::wire::now_ms;
use rusqlite::params;

/// `detail` as stored: JSON text, or NULL.
pub(super) fn detail_text(a: &NewAudit<'_>) -> Option<String> {
    a.detail.as_ref().map(|d| d.to_string())
}

/// A stored `detail` back as JSON; NULL (or text that is not JSON, from a
/// hand-edited database) is `null`.
pub(super) fn parse_detail(text: Option<String>) -> serde_json::Value {
    text.and_then(|d| serde_json::from_str(&d).ok())
        .unwrap_or(serde_json::Value::Null)
}

impl Store {
    pub async fn append_audit(&self, a: &NewAudit<'_>) -> Result<(), StoreError> {
        self.append_audit_at(a, now_ms()).await
    }

    /// Writes one record (committed when this returns) and announces it.
    pub async fn append_audit_at(&self, a: &NewAudit<'_>, at_ms: u64) -> Result<(), StoreError> {
        let id = if let Some(p) = self.pg() {
            p.append_audit_at(a, at_ms).await?
        } else {
            self.sqlite_append(a, at_ms)?
        };
        self.bus()
            .publish(super::bus::Change::Audit(Box::new(a.stored(id, at_ms))));
        Ok(())
    }

    fn sqlite_append(&self, a: &NewAudit<'_>, at_ms: u64) -> Result<i64, StoreError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO audit (deployment, connection_id, at_ms, source, actor, action,
                 target, outcome, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    a.deployment,
                    a.connection_id,
                    to_i64(at_ms),
                    a.source,
                    a.actor,
                    a.action,
                    a.target,
                    a.outcome,
                    detail_text(a)
                ],
            )?;
            Ok(c.last_insert_rowid())
        })
    }

    /// The newest `limit` audit records of a deployment, oldest first.
    pub async fn list_audit(
        &self,
        deployment: &str,
        limit: usize,
    ) -> Result<Vec<AuditRow>, StoreError> {
        self.list_audit_before(deployment, limit, None).await
    }

    /// The newest `limit` audit records of a deployment older than the
    /// record `before` (all when `None`), oldest first.
    pub async fn list_audit_before(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AuditRow>, StoreError> {
        if let Some(p) = self.pg() {
            return p.list_audit_before(deployment, limit, before).await;
        }
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, deployment, connection_id, at_ms, source, actor, action, target,
                 outcome, detail FROM audit WHERE deployment = ?1 AND id < ?3
                 ORDER BY id DESC LIMIT ?2",
            )?;
            let mut rows = st
                .query_map(
                    params![
                        deployment,
                        i64::try_from(limit).unwrap_or(i64::MAX),
                        before.unwrap_or(i64::MAX)
                    ],
                    |r| {
                        Ok(AuditRow {
                            id: r.get(0)?,
                            deployment: r.get(1)?,
                            connection_id: r.get(2)?,
                            at_ms: to_u64(r.get(3)?),
                            source: r.get(4)?,
                            actor: r.get(5)?,
                            action: r.get(6)?,
                            target: r.get(7)?,
                            outcome: r.get(8)?,
                            detail: parse_detail(r.get(9)?),
                        })
                    },
                )?
                .collect::<Result<Vec<_>, _>>()?;
            rows.reverse();
            Ok(rows)
        })
    }
}
