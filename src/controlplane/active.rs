//! Active alerts: per deployment, the keyed conditions that fire now.
//!
//! A keyed firing alert (`key` set, `state` firing) becomes the
//! deployment's active alert for that key, or replaces it; a resolved alert
//! with the key removes it. The alert itself is stored in the history
//! (`alerts` module) either way, and the active set changes in the same
//! transaction as that insert, so both agree after a crash.
//!
//! Guarantees:
//! - Only a newly stored alert changes the active set: a resent alert (an
//!   id already stored) changes nothing, so a resend of an old firing alert
//!   after its resolution cannot bring it back.
//! - A resolved alert for a key that is not active changes nothing.
//! - Keys under [`PLANE_PREFIX`] belong to the control plane (its own
//!   disconnect alert): an operator's alert with such a key is stored in the
//!   history but never changes the active set, and the control plane's
//!   alerts touch only keys under it.
//! - An active alert keeps its own copy of the alert, so trimming the
//!   history (the newest 500 per deployment) never loses it.

use std::collections::HashMap;

use super::alerts::{COLUMNS, parse_severity, row};
use super::model::{ActiveAlert, ActiveChange, Origin, change_for};
use super::store::{Store, StoreError};
use crate::wire::{Alert, Severity};
use rusqlite::{Transaction, params};

/// Schema version 1: keys and states in the history, and the active set.
/// Works on a database of the previous version (the columns are added,
/// with defaults that make every old alert a keyless firing one) and on a
/// new one; a column already there is left alone.
pub(super) fn migrate_v1(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    add_column(tx, "alerts", "alert_key", "TEXT NOT NULL DEFAULT ''")?;
    add_column(
        tx,
        "alerts",
        "alert_state",
        "TEXT NOT NULL DEFAULT 'firing'",
    )?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS active_alerts (
            deployment TEXT NOT NULL,
            alert_key TEXT NOT NULL,
            since_ms INTEGER NOT NULL,
            id INTEGER NOT NULL,
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
            alert_state TEXT NOT NULL DEFAULT 'firing',
            PRIMARY KEY (deployment, alert_key)
        );",
    )
}

fn add_column(tx: &Transaction<'_>, table: &str, column: &str, decl: &str) -> rusqlite::Result<()> {
    let exists: i64 = tx.query_row(
        &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
        [column],
        |r| r.get(0),
    )?;
    if exists == 0 {
        tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl};"))?;
    }
    Ok(())
}

/// Applies a newly stored alert (history row `id`) to the active set,
/// inside the insert's transaction. Returns the change made.
pub(super) fn apply(
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

impl Store {
    /// A deployment's active alerts, longest active first.
    pub async fn list_active(&self, deployment: &str) -> Result<Vec<ActiveAlert>, StoreError> {
        if let Some(p) = self.pg() {
            return p.list_active(deployment).await;
        }
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
    pub async fn active(
        &self,
        deployment: &str,
        key: &str,
    ) -> Result<Option<ActiveAlert>, StoreError> {
        if let Some(p) = self.pg() {
            return p.active(deployment, key).await;
        }
        use rusqlite::OptionalExtension;
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
    pub async fn active_counts(&self) -> Result<HashMap<String, u64>, StoreError> {
        if let Some(p) = self.pg() {
            return p.active_counts().await;
        }
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
    pub async fn active_severities(
        &self,
        key: &str,
    ) -> Result<HashMap<String, Severity>, StoreError> {
        if let Some(p) = self.pg() {
            return p.active_severities(key).await;
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::model::Source;
    use crate::controlplane::test_store::backends;
    use crate::wire::AlertState;

    fn finding(key: &str, msg: &str) -> Alert {
        Alert::new(Severity::Warning, "AuditPlacement", "t1", "Pod/p", msg).keyed(key)
    }

    const OP: Origin<'static> = Origin {
        deployment: "d",
        boot_id: Some("boot"),
        connection_id: None,
        source: Source::Operator,
    };

    async fn keys(s: &Store) -> Vec<(String, String)> {
        s.list_active("d")
            .await
            .unwrap()
            .into_iter()
            .map(|a| (a.alert.key, a.alert.message))
            .collect()
    }

    #[tokio::test]
    async fn a_firing_alert_is_active_until_resolved() {
        for b in backends().await {
            let s = b.store();
            let f = finding("audit/a", "m1");
            assert!(s.insert_alert(&OP, &f).await.unwrap(), "{b}");
            assert_eq!(keys(s).await, [("audit/a".into(), "m1".into())], "{b}");
            let since = s.list_active("d").await.unwrap()[0].since_ms;
            // Changed: replaced, still active since the first.
            let f2 = finding("audit/a", "m2");
            s.insert_alert(&OP, &f2).await.unwrap();
            let active = s.list_active("d").await.unwrap();
            assert_eq!(active.len(), 1, "{b}");
            assert_eq!(
                (active[0].alert.message.as_str(), active[0].since_ms),
                ("m2", since),
                "{b}"
            );
            assert_eq!(active[0].alert.alert_id, f2.id, "{b}");
            assert_eq!(
                s.active("d", "audit/a").await.unwrap().as_ref(),
                Some(&active[0]),
                "{b}"
            );
            assert_eq!(s.active_counts().await.unwrap().get("d"), Some(&1), "{b}");
            assert_eq!(
                s.active_severities("audit/a").await.unwrap().get("d"),
                Some(&Severity::Warning),
                "{b}"
            );
            // Resolved: gone from the active set, both kept in the history.
            let r = f2.resolving("fixed");
            s.insert_alert(&OP, &r).await.unwrap();
            assert!(keys(s).await.is_empty(), "{b}");
            assert_eq!(s.active("d", "audit/a").await.unwrap(), None, "{b}");
            assert_eq!(s.active_counts().await.unwrap().get("d"), None, "{b}");
            assert!(
                s.active_severities("audit/a").await.unwrap().is_empty(),
                "{b}"
            );
            let history = s.list_alerts("d", 10, None).await.unwrap();
            assert_eq!(history.len(), 3, "{b}");
            assert_eq!(
                (history[0].key.as_str(), history[0].state),
                ("audit/a", AlertState::Resolved),
                "{b}"
            );
            // Resolving again, or a key never active: nothing changes.
            s.insert_alert(&OP, &f2.resolving("again")).await.unwrap();
            s.insert_alert(&OP, &finding("audit/b", "x").resolving("never"))
                .await
                .unwrap();
            assert!(keys(s).await.is_empty(), "{b}");
        }
    }

    #[tokio::test]
    async fn active_alerts_are_listed_longest_active_first() {
        for b in backends().await {
            let s = b.store();
            for key in ["audit/b", "audit/a", "audit/B"] {
                s.insert_alert(&OP, &finding(key, key)).await.unwrap();
            }
            let listed: Vec<_> = s
                .list_active("d")
                .await
                .unwrap()
                .into_iter()
                .map(|a| (a.since_ms, a.alert.key))
                .collect();
            let mut want = listed.clone();
            // Ties in `since_ms` break by key, in byte order.
            want.sort();
            assert_eq!(listed, want, "{b}");
            assert_eq!(s.active_counts().await.unwrap().get("d"), Some(&3), "{b}");
        }
    }

    #[tokio::test]
    async fn a_resent_firing_alert_does_not_come_back() {
        for b in backends().await {
            let s = b.store();
            let f = finding("audit/a", "m");
            s.insert_alert(&OP, &f).await.unwrap();
            s.insert_alert(&OP, &f.resolving("fixed")).await.unwrap();
            // The operator missed the first ack and sends it again.
            assert!(!s.insert_alert(&OP, &f).await.unwrap(), "{b}: stored once");
            assert!(keys(s).await.is_empty(), "{b}");
        }
    }

    #[tokio::test]
    async fn one_off_alerts_and_other_deployments_stay_apart() {
        for b in backends().await {
            let s = b.store();
            s.insert_alert(
                &OP,
                &Alert::new(Severity::Critical, "ContentDrift", "t1", "Pod/p", "m"),
            )
            .await
            .unwrap();
            let other = Origin {
                deployment: "e",
                ..OP
            };
            s.insert_alert(&other, &finding("audit/a", "m"))
                .await
                .unwrap();
            assert!(keys(s).await.is_empty(), "{b}");
            assert_eq!(s.list_active("e").await.unwrap().len(), 1, "{b}");
            // An operator cannot raise or clear the control plane's keys.
            s.insert_alert(&OP, &finding("plane/disconnected", "m"))
                .await
                .unwrap();
            assert!(keys(s).await.is_empty(), "{b}");
            let plane = Origin {
                source: Source::ControlPlane,
                ..OP
            };
            s.insert_alert(&plane, &finding("plane/disconnected", "lost"))
                .await
                .unwrap();
            assert_eq!(
                keys(s).await,
                [("plane/disconnected".into(), "lost".into())],
                "{b}"
            );
        }
    }

    /// What N replicas do at once: alerts of one deployment stored
    /// concurrently keep the history's bound, and the active set ends as the
    /// newest alert of the key says.
    #[tokio::test]
    async fn concurrent_alerts_keep_the_bound_and_the_active_set() {
        use crate::controlplane::model::MAX_ALERTS_PER_DEPLOYMENT;
        for b in backends().await {
            let s = b.store();
            for i in 0..MAX_ALERTS_PER_DEPLOYMENT - 2 {
                let mut a = Alert::new(Severity::Warning, "R", "", "Pod/p", "m");
                a.id = format!("fill{i}");
                s.insert_alert(&OP, &a).await.unwrap();
            }
            let fired = finding("audit/k", "m");
            let batch: Vec<Alert> = (0..8)
                .map(|i| {
                    let mut a = if i % 2 == 0 {
                        fired.clone()
                    } else {
                        fired.resolving("fixed")
                    };
                    a.id = format!("k{i}");
                    a
                })
                .collect();
            let stored =
                futures::future::join_all(batch.iter().map(|a| s.insert_alert(&OP, a))).await;
            assert!(
                stored.iter().all(|r| matches!(r, Ok(true))),
                "{b}: {stored:?}"
            );
            let sum = s.alert_summary("d").await.unwrap();
            assert_eq!(sum.count, MAX_ALERTS_PER_DEPLOYMENT as u64, "{b}");
            let newest = sum.newest.unwrap();
            let active = s.active("d", "audit/k").await.unwrap();
            match newest.state {
                AlertState::Firing => {
                    assert_eq!(
                        active.map(|a| a.alert.alert_id),
                        Some(newest.alert_id),
                        "{b}"
                    )
                }
                AlertState::Resolved => assert_eq!(active, None, "{b}"),
            }
        }
    }

    /// SQLite only: a file of the schema before keys and states.
    #[tokio::test]
    async fn an_old_database_is_migrated_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp.sqlite");
        {
            // The previous version's alerts table, with one alert in it.
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE alerts (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, deployment TEXT NOT NULL,
                    alert_id TEXT NOT NULL, boot_id TEXT, connection_id TEXT,
                    received_ms INTEGER NOT NULL, at TEXT NOT NULL, severity TEXT NOT NULL,
                    reason TEXT NOT NULL, namespace TEXT NOT NULL, object TEXT NOT NULL,
                    message TEXT NOT NULL, UNIQUE (deployment, alert_id));
                 INSERT INTO alerts (deployment, alert_id, received_ms, at, severity, reason,
                    namespace, object, message)
                 VALUES ('d', 'old', 1, '2026-05-01T10:00:00Z', 'warning', 'R', '', 'Pod/p', 'm');",
            )
            .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let old = s.list_alerts("d", 10, None).await.unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!(
            (old[0].key.as_str(), old[0].state),
            ("", AlertState::Firing)
        );
        s.insert_alert(&OP, &finding("audit/a", "m")).await.unwrap();
        assert_eq!(keys(&s).await.len(), 1);
        drop(s);
        // Opening again runs no migration twice.
        let s = Store::open(&path).unwrap();
        assert_eq!(keys(&s).await.len(), 1);
        assert_eq!(s.list_alerts("d", 10, None).await.unwrap().len(), 2);
    }
}
