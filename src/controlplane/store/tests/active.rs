//! Active alerts: per deployment, the keyed conditions that fire now
//! (the rule is `model::change_for`; both backends apply it).
//!
//! A keyed firing alert (`key` set, `state` firing) becomes the
//! deployment's active alert for that key, or replaces it; a resolved alert
//! with the key removes it. The alert itself is stored in the history
//! (`tests::alerts`) either way, and the active set changes in the same
//! transaction as that insert, so both agree after a crash.
//!
//! Guarantees:
//! - Only a newly stored alert changes the active set: a resent alert (an
//!   id already stored) changes nothing, so a resend of an old firing alert
//!   after its resolution cannot bring it back.
//! - A resolved alert for a key that is not active changes nothing.
//! - Keys under `model::PLANE_PREFIX` belong to the control plane (its own
//!   disconnect alert): an operator's alert with such a key is stored in the
//!   history but never changes the active set, and the control plane's
//!   alerts touch only keys under it.
//! - An active alert keeps its own copy of the alert, so trimming the
//!   history (the newest 500 per deployment) never loses it.

use crate::controlplane::model::{Origin, Source};
use crate::controlplane::store::Store;
use crate::controlplane::test_store::backends;
use crate::wire::{Alert, AlertState, Severity};

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
        let stored = futures::future::join_all(batch.iter().map(|a| s.insert_alert(&OP, a))).await;
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
