//! Alerts: the history and the active set, by the rules of the SQLite
//! backend ([`change_for`] is shared).
//!
//! Guarantee beyond SQLite's, for N replicas: [`Pg::insert_alert`] holds a
//! lock on its deployment (an advisory lock, class [`ALERT_LOCK`], key the
//! name's hash) for its whole transaction. So a deployment's alerts get ids
//! in the order they commit, the trim to [`MAX_ALERTS_PER_DEPLOYMENT`] is
//! exact, and the active set ends as the newest alert of each key says,
//! also when two replicas store alerts of one deployment at once.

use std::collections::HashMap;

use tokio_postgres::{Row, Transaction};

use super::Pg;
use crate::controlplane::model::{
    ActiveAlert, ActiveChange, AlertRow, AlertSummary, MAX_ALERTS_PER_DEPLOYMENT, Origin,
    change_for,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{
    COLUMNS, parse_severity, parse_state, state_str, to_i64, to_u64,
};
use crate::wire::{Alert, Severity, now_ms};

/// The class of the per-deployment advisory lock of alert inserts ("EA").
/// Two-key advisory locks do not collide with single-key ones
/// ([`super::schema::MIGRATION_LOCK`]).
pub const ALERT_LOCK: i32 = 0x4541;

/// A row of [`COLUMNS`].
fn alert_row(r: &Row) -> Result<AlertRow, tokio_postgres::Error> {
    Ok(AlertRow {
        id: r.try_get(0)?,
        deployment: r.try_get(1)?,
        alert_id: r.try_get(2)?,
        boot_id: r.try_get(3)?,
        connection_id: r.try_get(4)?,
        received_ms: to_u64(r.try_get(5)?),
        at: r.try_get(6)?,
        severity: parse_severity(r.try_get(7)?),
        reason: r.try_get(8)?,
        namespace: r.try_get(9)?,
        object: r.try_get(10)?,
        message: r.try_get(11)?,
        key: r.try_get(12)?,
        state: parse_state(r.try_get(13)?),
    })
}

/// A row of [`COLUMNS`] and `since_ms`.
fn active_row(r: &Row) -> Result<ActiveAlert, tokio_postgres::Error> {
    Ok(ActiveAlert {
        since_ms: to_u64(r.try_get(14)?),
        alert: alert_row(r)?,
    })
}

/// Applies a newly stored alert (history row `id`) to the active set,
/// inside the insert's transaction (the SQLite backend's `apply`).
async fn apply(
    tx: &Transaction<'_>,
    origin: &Origin<'_>,
    a: &Alert,
    id: i64,
    received_ms: i64,
) -> Result<(), tokio_postgres::Error> {
    match change_for(origin.source, a) {
        ActiveChange::None => {}
        ActiveChange::Upsert => {
            tx.execute(
                "INSERT INTO active_alerts (deployment, alert_key, since_ms, id, alert_id,
                 boot_id, connection_id, received_ms, at, severity, reason, namespace, object,
                 message, alert_state)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $3, $8, $9, $10, $11, $12, $13, 'firing')
                 ON CONFLICT (deployment, alert_key) DO UPDATE SET
                   id = excluded.id, alert_id = excluded.alert_id, boot_id = excluded.boot_id,
                   connection_id = excluded.connection_id, received_ms = excluded.received_ms,
                   at = excluded.at, severity = excluded.severity, reason = excluded.reason,
                   namespace = excluded.namespace, object = excluded.object,
                   message = excluded.message",
                &[
                    &origin.deployment,
                    &a.key,
                    &received_ms,
                    &id,
                    &a.id,
                    &origin.boot_id,
                    &origin.connection_id,
                    &a.at.to_string(),
                    &a.severity.as_str(),
                    &a.reason,
                    &a.namespace,
                    &a.object,
                    &a.message,
                ],
            )
            .await?;
        }
        ActiveChange::Remove => {
            tx.execute(
                "DELETE FROM active_alerts WHERE deployment = $1 AND alert_key = $2",
                &[&origin.deployment, &a.key],
            )
            .await?;
        }
    }
    Ok(())
}

impl Pg {
    /// Stores the alert unless its id is stored for the deployment, applies
    /// a new one to the active set and trims the history, in one
    /// transaction. Returns whether it was new.
    pub async fn insert_alert(&self, origin: &Origin<'_>, a: &Alert) -> Result<bool, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&ALERT_LOCK, &origin.deployment],
        )
        .await?;
        let received = to_i64(now_ms());
        let inserted = tx
            .query_opt(
                "INSERT INTO alerts (deployment, alert_id, boot_id, connection_id, received_ms,
                 at, severity, reason, namespace, object, message, alert_key, alert_state)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                 ON CONFLICT (deployment, alert_id) DO NOTHING
                 RETURNING id",
                &[
                    &origin.deployment,
                    &a.id,
                    &origin.boot_id,
                    &origin.connection_id,
                    &received,
                    &a.at.to_string(),
                    &a.severity.as_str(),
                    &a.reason,
                    &a.namespace,
                    &a.object,
                    &a.message,
                    &a.key,
                    &state_str(a.state),
                ],
            )
            .await?;
        let Some(row) = inserted else {
            // A resend: nothing written, nothing else changes.
            tx.rollback().await?;
            return Ok(false);
        };
        apply(&tx, origin, a, row.try_get(0)?, received).await?;
        // Everything older than the newest MAX_ALERTS_PER_DEPLOYMENT goes.
        tx.execute(
            "DELETE FROM alerts WHERE deployment = $1 AND id < (
                SELECT id FROM alerts WHERE deployment = $1 ORDER BY id DESC
                LIMIT 1 OFFSET $2)",
            &[
                &origin.deployment,
                &to_i64(MAX_ALERTS_PER_DEPLOYMENT as u64 - 1),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn list_alerts(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        self.rows(
            &format!(
                "SELECT {COLUMNS} FROM alerts WHERE deployment = $1 AND id < $2
                 ORDER BY id DESC LIMIT $3"
            ),
            &[
                &deployment,
                &before.unwrap_or(i64::MAX),
                &to_i64(limit as u64),
            ],
        )
        .await?
        .iter()
        .map(|r| Ok(alert_row(r)?))
        .collect()
    }

    pub async fn alert_summary(&self, deployment: &str) -> Result<AlertSummary, StoreError> {
        // One statement: the window counts every row before LIMIT keeps the
        // newest.
        let row = self
            .row(
                &format!(
                    "SELECT {COLUMNS}, count(*) OVER () FROM alerts WHERE deployment = $1
                     ORDER BY id DESC LIMIT 1"
                ),
                &[&deployment],
            )
            .await?;
        Ok(match row {
            None => AlertSummary {
                count: 0,
                newest: None,
            },
            Some(r) => AlertSummary {
                count: to_u64(r.try_get(14)?),
                newest: Some(alert_row(&r)?),
            },
        })
    }

    pub async fn list_active(&self, deployment: &str) -> Result<Vec<ActiveAlert>, StoreError> {
        self.rows(
            &format!(
                "SELECT {COLUMNS}, since_ms FROM active_alerts WHERE deployment = $1
                 ORDER BY since_ms, alert_key COLLATE \"C\""
            ),
            &[&deployment],
        )
        .await?
        .iter()
        .map(|r| Ok(active_row(r)?))
        .collect()
    }

    pub async fn active(
        &self,
        deployment: &str,
        key: &str,
    ) -> Result<Option<ActiveAlert>, StoreError> {
        let row = self
            .row(
                &format!(
                    "SELECT {COLUMNS}, since_ms FROM active_alerts
                     WHERE deployment = $1 AND alert_key = $2"
                ),
                &[&deployment, &key],
            )
            .await?;
        Ok(row.map(|r| active_row(&r)).transpose()?)
    }

    pub async fn active_counts(&self) -> Result<HashMap<String, u64>, StoreError> {
        self.rows(
            "SELECT deployment, count(*) FROM active_alerts GROUP BY deployment",
            &[],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, to_u64(r.try_get(1)?))))
        .collect()
    }

    pub async fn active_severities(
        &self,
        key: &str,
    ) -> Result<HashMap<String, Severity>, StoreError> {
        self.rows(
            "SELECT deployment, severity FROM active_alerts WHERE alert_key = $1",
            &[&key],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, parse_severity(r.try_get(1)?))))
        .collect()
    }
}
