//! The fleet projection of Rollouts: a snapshot replaces a deployment's
//! rows (an unchanged row is not written), a delta changes one, and only
//! the session whose snapshot the rows are from may change them.

use crate::controlplane::model::RolloutRow;
use crate::controlplane::test_store::backends;

fn row(ns: &str, body: &str) -> RolloutRow {
    RolloutRow {
        namespace: ns.into(),
        name: "rollout".into(),
        resource: format!(r#"{{"ns":"{ns}","v":"{body}"}}"#),
    }
}

fn listed(rows: &[crate::controlplane::model::StoredRollout]) -> Vec<(String, String, String)> {
    rows.iter()
        .map(|r| {
            (
                r.deployment.clone(),
                r.namespace.clone(),
                r.resource.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn snapshots_replace_deltas_change_one_row_and_old_sessions_nothing() {
    for b in backends().await {
        let s = b.store();
        let n = s
            .replace_rollouts("eu", "s1", &[row("acme", "1"), row("beta", "1")])
            .await
            .unwrap();
        assert_eq!(n, 2, "{b}");
        s.replace_rollouts("us", "u1", &[row("acme", "1")])
            .await
            .unwrap();
        // The same snapshot again writes nothing.
        let n = s
            .replace_rollouts("eu", "s1", &[row("acme", "1"), row("beta", "1")])
            .await
            .unwrap();
        assert_eq!(n, 0, "{b}");

        // A delta upserts one row and removes another.
        assert!(
            s.put_rollout(
                "eu",
                "s1",
                "acme",
                "rollout",
                Some(&row("acme", "2").resource)
            )
            .await
            .unwrap(),
            "{b}"
        );
        assert!(
            !s.put_rollout(
                "eu",
                "s1",
                "acme",
                "rollout",
                Some(&row("acme", "2").resource)
            )
            .await
            .unwrap(),
            "{b}: an unchanged upsert changes nothing"
        );
        assert!(
            s.put_rollout("eu", "s1", "beta", "rollout", None)
                .await
                .unwrap(),
            "{b}"
        );
        let all = s.fleet_rollouts(None).await.unwrap();
        assert_eq!(
            listed(&all),
            [
                ("eu".into(), "acme".into(), row("acme", "2").resource),
                ("us".into(), "acme".into(), row("acme", "1").resource),
            ],
            "{b}"
        );
        assert!(all.iter().all(|r| r.updated_ms > 0), "{b}");

        // A new connection's snapshot takes over: rows it lacks go, and
        // a late delta of the old session changes nothing.
        let n = s
            .replace_rollouts("eu", "s2", &[row("gamma", "1")])
            .await
            .unwrap();
        assert_eq!(n, 2, "{b}: one insert, one delete");
        assert!(
            !s.put_rollout(
                "eu",
                "s1",
                "delta",
                "rollout",
                Some(&row("delta", "1").resource)
            )
            .await
            .unwrap(),
            "{b}"
        );
        assert!(
            !s.put_rollout("eu", "s1", "gamma", "rollout", None)
                .await
                .unwrap(),
            "{b}"
        );
        // Nor does a delta of a deployment with no snapshot yet.
        assert!(
            !s.put_rollout(
                "ap",
                "a1",
                "acme",
                "rollout",
                Some(&row("acme", "1").resource)
            )
            .await
            .unwrap(),
            "{b}"
        );
        let acme = s.fleet_rollouts(Some("acme")).await.unwrap();
        assert_eq!(
            listed(&acme),
            [("us".into(), "acme".into(), row("acme", "1").resource)],
            "{b}"
        );
        let eu: Vec<_> = s
            .fleet_rollouts(None)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.deployment == "eu")
            .map(|r| r.namespace)
            .collect();
        assert_eq!(eu, ["gamma"], "{b}");

        // An empty snapshot empties the deployment.
        s.replace_rollouts("us", "u2", &[]).await.unwrap();
        assert!(
            s.fleet_rollouts(Some("acme")).await.unwrap().is_empty(),
            "{b}"
        );
    }
}

#[tokio::test]
async fn a_change_is_announced() {
    for b in backends().await {
        let s = b.store();
        let mut rx = s.bus().subscribe();
        s.replace_rollouts("eu", "s1", &[row("acme", "1")])
            .await
            .unwrap();
        let c = rx.recv().await.unwrap();
        assert!(
            matches!(&*c, crate::controlplane::bus::Change::Fleet(d) if d == "eu"),
            "{b}: {c:?}"
        );
        // Nothing changed: nothing announced.
        s.replace_rollouts("eu", "s1", &[row("acme", "1")])
            .await
            .unwrap();
        s.put_rollout("eu", "s1", "acme", "rollout", None)
            .await
            .unwrap();
        let c = rx.recv().await.unwrap();
        assert!(
            matches!(&*c, crate::controlplane::bus::Change::Fleet(d) if d == "eu"),
            "{b}: {c:?}"
        );
        assert!(rx.try_recv().is_err(), "{b}: one announcement per change");
    }
}
