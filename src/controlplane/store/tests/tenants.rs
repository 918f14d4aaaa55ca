//! The tenant registry: each record kind kept at its newest generation,
//! a resend changing nothing, per deployment.

use crate::controlplane::test_store::backends;
use crate::wire::Registration;

#[tokio::test]
async fn the_newest_generation_of_each_record_wins_and_a_resend_changes_nothing() {
    for b in backends().await {
        let s = b.store();
        let enroll = Registration::tenant("acme", 1, true, "standard", "canary");
        s.register("a", &enroll).await.unwrap();
        s.register("a", &enroll).await.unwrap();
        let lane = Registration::support("acme", 1, Some("gold"), &["ops@acme.test".into()]);
        s.register("a", &lane).await.unwrap();
        let rows = s.list_tenants("a").await.unwrap();
        assert_eq!(rows.len(), 1, "{b}");
        let r = &rows[0];
        assert!(r.enrolled, "{b}");
        assert_eq!(
            (r.tier.as_str(), r.wave.as_str(), r.generation),
            ("standard", "canary", 1),
            "{b}"
        );
        let sup = r.support.as_ref().expect("the lane");
        assert_eq!(sup.lane, "gold", "{b}");
        assert_eq!(sup.contacts, ["ops@acme.test"], "{b}");

        // Generation 3 (a wave change), then generation 2 arriving late.
        s.register(
            "a",
            &Registration::tenant("acme", 3, true, "standard", "fleet"),
        )
        .await
        .unwrap();
        s.register("a", &Registration::tenant("acme", 2, true, "gpu", "canary"))
            .await
            .unwrap();
        let r = &s.list_tenants("a").await.unwrap()[0];
        assert_eq!(
            (r.tier.as_str(), r.wave.as_str(), r.generation),
            ("standard", "fleet", 3),
            "{b}"
        );
        assert_eq!(
            r.support.as_ref().map(|s| s.lane.as_str()),
            Some("gold"),
            "{b}: the lane is its own record"
        );

        // Offboarding: the lane goes, the tenant is withdrawn.
        s.register("a", &Registration::support("acme", 4, None, &[]))
            .await
            .unwrap();
        s.register(
            "a",
            &Registration::tenant("acme", 4, false, "standard", "fleet"),
        )
        .await
        .unwrap();
        let r = &s.list_tenants("a").await.unwrap()[0];
        assert!(!r.enrolled && r.support.is_none(), "{b}: {r:?}");

        // The Tenant deleted and made again: a new uid, its generations
        // from 1 anew, replaces the record of the old one.
        s.register(
            "a",
            &Registration::tenant("acme", 1, true, "gpu", "canary").with_uid("new-uid"),
        )
        .await
        .unwrap();
        s.register(
            "a",
            &Registration::support("acme", 1, Some("desk"), &[]).with_uid("new-uid"),
        )
        .await
        .unwrap();
        let r = &s.list_tenants("a").await.unwrap()[0];
        assert!(
            r.enrolled && r.generation == 1 && r.tier == "gpu",
            "{b}: {r:?}"
        );
        assert_eq!(
            r.support.as_ref().map(|s| s.lane.as_str()),
            Some("desk"),
            "{b}"
        );

        // Per deployment; a lane before any enrollment makes a row that is
        // not enrolled.
        s.register("b", &Registration::support("acme", 1, Some("x"), &[]))
            .await
            .unwrap();
        let other = s.list_tenants("b").await.unwrap();
        assert_eq!(other.len(), 1, "{b}");
        assert!(!other[0].enrolled && other[0].generation == -1, "{b}");
        assert!(s.list_tenants("c").await.unwrap().is_empty(), "{b}");
    }
}
