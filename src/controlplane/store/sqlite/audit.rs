//! The audit log in the SQLite file.

use rusqlite::params;

use super::Sqlite;
use crate::controlplane::model::{AuditRow, NewAudit};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{detail_text, parse_detail, to_i64, to_u64};

impl Sqlite {
    /// Writes one record; its id.
    pub fn append_audit_at(&self, a: &NewAudit<'_>, at_ms: u64) -> Result<i64, StoreError> {
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

    /// The newest `limit` audit records of a deployment older than the
    /// record `before` (all when `None`), oldest first.
    pub fn list_audit_before(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AuditRow>, StoreError> {
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
