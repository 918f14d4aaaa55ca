//! Alerts in the SQLite file: the history and the active set, changed
//! together in the insert's transaction.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, Transaction, params};

use super::Sqlite;
use crate::controlplane::model::{
    ActiveAlert, ActiveChange, AlertRow, AlertSummary, MAX_ALERTS_PER_DEPLOYMENT, Origin,
    change_for,
};
use crate::controlplane::store::StoreError;
use crate::controlplane::store::codec::{COLUMNS, parse_severity, parse_state, state_str, to_i64};
use crate::wire::{Alert, Severity, now_ms};

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AlertRow> {
    let severity: String = r.get(7)?;
    Ok(AlertRow {
        id: r.get(0)?,
        deployment: r.get(1)?,
        alert_id: r.get(2)?,
        boot_id: r.get(3)?,
        connection_id: r.get(4)?,
        received_ms: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
        at: r.get(6)?,
        severity: parse_severity(&severity),
        reason: r.get(8)?,
        namespace: r.get(9)?,
        object: r.get(10)?,
        message: r.get(11)?,
        key: r.get(12)?,
        state: parse_state(&r.get::<_, String>(13)?),
    })
}

/// Applies a newly stored alert (history row `id`) to the active set,
/// inside the insert's transaction. Returns the change made.
fn apply(
    tx: &Transaction<'_>,
    origin: &Origin<'_>,
    a: &Alert,
    id: i64,
    received_ms: i64,
) -> rusqlite::Result<ActiveChange> {
    let change = change_for(origin.source, a);
    match change {
        ActiveChange::None => {}
        ActiveChange::Upsert => {
            tx.execute(
                "INSERT INTO active_alerts (deployment, alert_key, since_ms, id, alert_id,
                 boot_id, connection_id, received_ms, at, severity, reason, namespace, object,
                 message, alert_state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?3, ?8, ?9, ?10, ?11, ?12, ?13, 'firing')
                 ON CONFLICT (deployment, alert_key) DO UPDATE SET
                   id = excluded.id, alert_id = excluded.alert_id, boot_id = excluded.boot_id,
                   connection_id = excluded.connection_id, received_ms = excluded.received_ms,
                   at = excluded.at, severity = excluded.severity, reason = excluded.reason,
                   namespace = excluded.namespace, object = excluded.object,
                   message = excluded.message",
                params![
                    origin.deployment,
                    a.key,
                    received_ms,
                    id,
                    a.id,
                    origin.boot_id,
                    origin.connection_id,
                    a.at.to_string(),
                    a.severity.as_str(),
                    a.reason,
                    a.namespace,
                    a.object,
                    a.message
                ],
            )?;
        }
        ActiveChange::Remove => {
            tx.execute(
                "DELETE FROM active_alerts WHERE deployment = ?1 AND alert_key = ?2",
                params![origin.deployment, a.key],
            )?;
        }
    }
    Ok(change)
}

fn active_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ActiveAlert> {
    let since: i64 = r.get(14)?;
    Ok(ActiveAlert {
        since_ms: u64::try_from(since).unwrap_or(0),
        alert: row(r)?,
    })
}

impl Sqlite {
    /// Stores an alert unless its id is already stored for the deployment,
    /// applies a new one to the active set and trims the deployment to its
    /// newest alerts, in one transaction. Returns whether it was new.
    pub fn insert_alert(&self, origin: &Origin<'_>, a: &Alert) -> Result<bool, StoreError> {
        self.with(|c| {
            let tx = c.transaction()?;
            let received = to_i64(now_ms());
            let n = tx.execute(
                "INSERT OR IGNORE INTO alerts (deployment, alert_id, boot_id, connection_id,
                 received_ms, at, severity, reason, namespace, object, message, alert_key,
                 alert_state)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    origin.deployment,
                    a.id,
                    origin.boot_id,
                    origin.connection_id,
                    received,
                    a.at.to_string(),
                    a.severity.as_str(),
                    a.reason,
                    a.namespace,
                    a.object,
                    a.message,
                    a.key,
                    state_str(a.state)
                ],
            )?;
            if n > 0 {
                apply(&tx, origin, a, tx.last_insert_rowid(), received)?;
                // The id of the oldest alert to keep; everything before goes.
                let keep_from: Option<i64> = tx
                    .query_row(
                        "SELECT id FROM alerts WHERE deployment = ?1 ORDER BY id DESC
                         LIMIT 1 OFFSET ?2",
                        params![
                            origin.deployment,
                            to_i64(MAX_ALERTS_PER_DEPLOYMENT as u64 - 1)
                        ],
                        |r| r.get(0),
                    )
                    .optional()?;
                if let Some(from) = keep_from {
                    tx.execute(
                        "DELETE FROM alerts WHERE deployment = ?1 AND id < ?2",
                        params![origin.deployment, from],
                    )?;
                }
            }
            tx.commit()?;
            Ok(n > 0)
        })
    }

    /// Up to `limit` alerts of a deployment received before the alert
    /// `before` (all when `None`), newest first.
    pub fn list_alerts(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLUMNS} FROM alerts WHERE deployment = ?1 AND id < ?2
                 ORDER BY id DESC LIMIT ?3"
            ))?;
            let rows = st
                .query_map(
                    params![deployment, before.unwrap_or(i64::MAX), to_i64(limit as u64)],
                    row,
                )?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// How many alerts a deployment holds and the newest one.
    pub fn alert_summary(&self, deployment: &str) -> Result<AlertSummary, StoreError> {
        self.with(|c| {
            let count: i64 = c.query_row(
                "SELECT count(*) FROM alerts WHERE deployment = ?1",
                [deployment],
                |r| r.get(0),
            )?;
            let newest = c
                .query_row(
                    &format!(
                        "SELECT {COLUMNS} FROM alerts WHERE deployment = ?1
                         ORDER BY id DESC LIMIT 1"
                    ),
                    [deployment],
                    row,
                )
                .optional()?;
            Ok(AlertSummary {
                count: u64::try_from(count).unwrap_or(0),
                newest,
            })
        })
    }
}

impl Sqlite {
    /// A deployment's active alerts, longest active first.
    pub fn list_active(&self, deployment: &str) -> Result<Vec<ActiveAlert>, StoreError> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLUMNS}, since_ms FROM active_alerts WHERE deployment = ?1
                 ORDER BY since_ms, alert_key"
            ))?;
            let rows = st
                .query_map([deployment], active_row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }

    /// The active alert of one key.
    pub fn active(&self, deployment: &str, key: &str) -> Result<Option<ActiveAlert>, StoreError> {
        self.with(|c| {
            Ok(c.query_row(
                &format!(
                    "SELECT {COLUMNS}, since_ms FROM active_alerts
                     WHERE deployment = ?1 AND alert_key = ?2"
                ),
                params![deployment, key],
                active_row,
            )
            .optional()?)
        })
    }

    /// How many alerts are active, per deployment (absent: none).
    pub fn active_counts(&self) -> Result<HashMap<String, u64>, StoreError> {
        self.with(|c| {
            let mut st =
                c.prepare("SELECT deployment, count(*) FROM active_alerts GROUP BY deployment")?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    ))
                })?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        })
    }

    /// The severity of every deployment's active alert under `key`.
    pub fn active_severities(&self, key: &str) -> Result<HashMap<String, Severity>, StoreError> {
        self.with(|c| {
            let mut st =
                c.prepare("SELECT deployment, severity FROM active_alerts WHERE alert_key = ?1")?;
            let rows = st
                .query_map([key], |r| {
                    let s: String = r.get(1)?;
                    Ok((r.get(0)?, parse_severity(&s)))
                })?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        })
    }
}
