//! Alerts the operators sent (`alert` frames), kept per deployment in the
//! control plane's SQLite database.
//!
//! Guarantees: an alert id is stored at most once per deployment (a resent
//! alert is recognised and not stored again); each deployment keeps only its
//! newest [`MAX_ALERTS_PER_DEPLOYMENT`] alerts, older ones are deleted in
//! the same transaction as the insert. "Newest" is the order of receipt,
//! not the operator's clock.

use super::model::{AlertRow, AlertSummary, MAX_ALERTS_PER_DEPLOYMENT, Origin};
use super::store::{Store, StoreError, to_i64};
use crate::wire::{Alert, AlertState, Severity, now_ms};
use rusqlite::{OptionalExtension, params};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    deployment TEXT NOT NULL,
    alert_id TEXT NOT NULL,
    boot_id TEXT,
    connection_id TEXT,
    received_ms INTEGER NOT NULL,
    at TEXT NOT NULL,
    severity TEXT NOT NULL,
    reason TEXT NOT NULL,
    namespace TEXT NOT NULL,
    object TEXT NOT NULL,
    message TEXT NOT NULL,
    UNIQUE (deployment, alert_id)
);
CREATE INDEX IF NOT EXISTS alerts_by_deployment ON alerts(deployment, id);
";

pub(super) const COLUMNS: &str = "id, deployment, alert_id, boot_id, connection_id, \
                       received_ms, at, severity, reason, namespace, object, message, alert_key, \
                       alert_state";

/// An alert state as stored.
pub(super) fn state_str(s: AlertState) -> &'static str {
    match s {
        AlertState::Firing => "firing",
        AlertState::Resolved => "resolved",
    }
}

/// A stored state back; only [`state_str`] values are written.
pub(super) fn parse_state(s: &str) -> AlertState {
    match s {
        "resolved" => AlertState::Resolved,
        _ => AlertState::Firing,
    }
}

/// A stored severity back. Only `Severity::as_str` values are written;
/// anything else is a hand-edited database, shown as the milder severity.
pub(super) fn parse_severity(s: &str) -> Severity {
    Severity::parse(s).unwrap_or(Severity::Warning)
}

pub(super) fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AlertRow> {
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

impl Store {
    /// Stores an alert unless its id is already stored for the deployment,
    /// applies a new one to the active set (`active` module) and trims the
    /// deployment to its newest alerts, in one transaction. Returns whether
    /// it was new.
    pub async fn insert_alert(&self, origin: &Origin<'_>, a: &Alert) -> Result<bool, StoreError> {
        let new = if let Some(p) = self.pg() {
            p.insert_alert(origin, a).await?
        } else {
            self.sqlite_insert_alert(origin, a)?
        };
        if new {
            let d = origin.deployment.to_owned();
            self.bus().publish(super::bus::Change::Alerts(d.clone()));
            // Its count of active alerts may have changed.
            self.bus().publish(super::bus::Change::Deployment(d));
        }
        Ok(new)
    }

    fn sqlite_insert_alert(&self, origin: &Origin<'_>, a: &Alert) -> Result<bool, StoreError> {
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
                super::active::apply(&tx, origin, a, tx.last_insert_rowid(), received)?;
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
    pub async fn list_alerts(
        &self,
        deployment: &str,
        limit: usize,
        before: Option<i64>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        if let Some(p) = self.pg() {
            return p.list_alerts(deployment, limit, before).await;
        }
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
    pub async fn alert_summary(&self, deployment: &str) -> Result<AlertSummary, StoreError> {
        if let Some(p) = self.pg() {
            return p.alert_summary(deployment).await;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::model::Source;
    use crate::controlplane::test_store::backends;

    fn alert(id: &str) -> Alert {
        let mut a = Alert::new(Severity::Critical, "ContentDrift", "t1", "Pod/p", "drift");
        a.id = id.into();
        a
    }

    const A: Origin<'static> = Origin {
        deployment: "a",
        boot_id: Some("boot"),
        connection_id: None,
        source: Source::Operator,
    };

    #[tokio::test]
    async fn a_resent_alert_is_stored_once() {
        for b in backends().await {
            let s = b.store();
            assert!(s.insert_alert(&A, &alert("x")).await.unwrap(), "{b}");
            assert!(!s.insert_alert(&A, &alert("x")).await.unwrap(), "{b}");
            let other = Origin {
                deployment: "b",
                ..A
            };
            assert!(
                s.insert_alert(&other, &alert("x")).await.unwrap(),
                "{b}: per deployment"
            );
            let rows = s.list_alerts("a", 10, None).await.unwrap();
            assert_eq!(rows.len(), 1, "{b}");
            let r = &rows[0];
            assert_eq!(
                (r.alert_id.as_str(), r.severity),
                ("x", Severity::Critical),
                "{b}"
            );
            assert_eq!(r.boot_id.as_deref(), Some("boot"), "{b}");
            assert_eq!(r.connection_id, None, "{b}");
            assert_eq!((r.key.as_str(), r.state), ("", AlertState::Firing), "{b}");
            assert!(
                r.at.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
                "{b}: {}",
                r.at
            );
        }
    }

    #[tokio::test]
    async fn newest_first_paged_and_bounded() {
        for b in backends().await {
            let s = b.store();
            let n = MAX_ALERTS_PER_DEPLOYMENT + 5;
            for i in 0..n {
                s.insert_alert(&A, &alert(&format!("a{i}"))).await.unwrap();
            }
            let s = b.reopen().await;
            let sum = s.alert_summary("a").await.unwrap();
            assert_eq!(sum.count, MAX_ALERTS_PER_DEPLOYMENT as u64, "{b}");
            let newest = sum.newest.unwrap();
            assert_eq!(newest.alert_id, format!("a{}", n - 1), "{b}");

            let page1 = s.list_alerts("a", 3, None).await.unwrap();
            let ids: Vec<_> = page1.iter().map(|r| r.alert_id.clone()).collect();
            assert_eq!(
                ids,
                [
                    format!("a{}", n - 1),
                    format!("a{}", n - 2),
                    format!("a{}", n - 3)
                ],
                "{b}"
            );
            assert_eq!(page1[0], newest, "{b}");
            let page2 = s.list_alerts("a", 2, Some(page1[2].id)).await.unwrap();
            assert_eq!(page2[0].alert_id, format!("a{}", n - 4), "{b}");

            let all = s.list_alerts("a", 10_000, None).await.unwrap();
            assert_eq!(all.len(), MAX_ALERTS_PER_DEPLOYMENT, "{b}");
            assert_eq!(
                all.last().unwrap().alert_id,
                "a5",
                "{b}: the oldest five went"
            );
            let none = s.alert_summary("nobody").await.unwrap();
            assert_eq!((none.count, none.newest), (0, None), "{b}");
        }
    }
}
