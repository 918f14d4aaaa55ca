//! The alert history: stored once per id, newest first, bounded.

use crate::controlplane::model::{MAX_ALERTS_PER_DEPLOYMENT, Origin, Source};
use crate::controlplane::test_store::backends;
use crate::wire::{Alert, AlertState, Severity};

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
