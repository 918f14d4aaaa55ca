//! The support lanes: incidents move forward only and owe their operator
//! an update until it confirms; tenants join lanes by registration or by
//! hand; admin tokens can be limited to one lane.

use crate::controlplane::model::{LaneAction, Scope};
use crate::controlplane::store::{Act, StoreError};
use crate::controlplane::test_store::backends;
use crate::wire::{IncidentRecord, LaneState, Registration};

fn incident(n: u32, tenant: &str) -> IncidentRecord {
    IncidentRecord {
        id: format!("inc-{n:024x}"),
        tenant: tenant.into(),
        agent: "assistant".into(),
        severity: "error".into(),
        summary: "The calendar sync failed.".into(),
        detail: "boom with sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into(),
        correlation_id: String::new(),
        received_at: "2026-12-06T10:00:00Z".into(),
    }
}

fn act<'a>(dep: &'a str, id: &'a str, action: LaneAction) -> Act<'a> {
    Act {
        deployment: dep,
        id,
        action,
        by: "adm_test",
        note: "",
    }
}

#[tokio::test]
async fn incidents_move_forward_once_and_their_operator_is_owed_each_move() {
    for b in backends().await {
        let s = b.store();
        s.create_deployment("eu").await.unwrap();
        // No lane yet: stored unrouted, nothing owed.
        let one = incident(1, "acme");
        assert_eq!(s.insert_incident("eu", &one).await.unwrap(), None, "{b}");
        assert!(s.pending_updates("eu", 10).await.unwrap().is_empty(), "{b}");
        // A lane by hand takes it in, and the operator is owed its lane.
        let adopted = s
            .assign_lane("eu", "acme", "desk", &["ops@x.test".into()], "adm_test")
            .await
            .unwrap();
        assert_eq!(adopted, 1, "{b}");
        let owed = s.pending_updates("eu", 10).await.unwrap();
        assert_eq!(owed.len(), 1, "{b}");
        assert_eq!(
            (owed[0].state, owed[0].lane.as_deref()),
            (LaneState::Routed, Some("desk")),
            "{b}"
        );
        assert!(
            s.mark_delivered("eu", &one.id, LaneState::Routed)
                .await
                .unwrap(),
            "{b}"
        );
        assert!(s.pending_updates("eu", 10).await.unwrap().is_empty(), "{b}");
        // New ones go straight in; the key is masked in the lane too.
        let two = incident(2, "acme");
        assert_eq!(
            s.insert_incident("eu", &two).await.unwrap().as_deref(),
            Some("desk"),
            "{b}"
        );
        let rows = s.lane_incidents("desk", None, 500).await.unwrap();
        assert_eq!(rows.len(), 2, "{b}");
        assert!(rows.iter().all(|r| !r.detail.contains("AAAAAAAA")), "{b}");

        // Acknowledge: moved once, owed once.
        let (row, moved) = s
            .act_on_incident(&act("eu", &two.id, LaneAction::Acknowledge))
            .await
            .unwrap()
            .unwrap();
        assert!(moved, "{b}");
        assert_eq!(row.state, LaneState::Acknowledged, "{b}");
        assert_eq!(row.acknowledged_by.as_deref(), Some("adm_test"), "{b}");
        assert!(!row.delivered, "{b}");
        let (_, again) = s
            .act_on_incident(&act("eu", &two.id, LaneAction::Acknowledge))
            .await
            .unwrap()
            .unwrap();
        assert!(!again, "{b}: a second ack changes nothing");
        let owed = s.pending_updates("eu", 10).await.unwrap();
        assert_eq!(owed.len(), 1, "{b}");
        assert_eq!(owed[0].state, LaneState::Acknowledged, "{b}");
        assert!(owed[0].at_ms > 0, "{b}");
        // Resolved before the operator confirmed the ack: its late ack
        // does not settle the resolution.
        let resolve = Act {
            note: "fixed upstream",
            ..act("eu", &two.id, LaneAction::Resolve)
        };
        let (row, moved) = s.act_on_incident(&resolve).await.unwrap().unwrap();
        assert!(moved && row.state == LaneState::Resolved, "{b}");
        assert_eq!(row.note, "fixed upstream", "{b}");
        assert!(
            !s.mark_delivered("eu", &two.id, LaneState::Acknowledged)
                .await
                .unwrap(),
            "{b}"
        );
        assert_eq!(
            s.pending_updates("eu", 10).await.unwrap()[0].state,
            LaneState::Resolved,
            "{b}"
        );
        assert!(
            s.mark_delivered("eu", &two.id, LaneState::Resolved)
                .await
                .unwrap(),
            "{b}"
        );
        // Never back.
        let (row, moved) = s
            .act_on_incident(&act("eu", &two.id, LaneAction::Acknowledge))
            .await
            .unwrap()
            .unwrap();
        assert!(!moved && row.state == LaneState::Resolved, "{b}");
        assert!(
            s.act_on_incident(&act(
                "eu",
                "inc-ffffffffffffffffffffffff",
                LaneAction::Resolve
            ))
            .await
            .unwrap()
            .is_none(),
            "{b}"
        );
        // The lane's counts and lookups.
        let lanes = s.lanes(None).await.unwrap();
        assert_eq!(lanes.len(), 1, "{b}");
        assert_eq!(lanes[0].tenants, vec!["eu/acme"], "{b}");
        assert_eq!((lanes[0].routed, lanes[0].resolved), (1, 1), "{b}");
        assert_eq!(
            s.lane_incidents("desk", Some(LaneState::Resolved), 500)
                .await
                .unwrap()
                .len(),
            1,
            "{b}"
        );
        assert_eq!(
            s.lane_incident("desk", &two.id, None).await.unwrap().len(),
            1,
            "{b}"
        );
        assert!(
            s.lane_incident("other", &two.id, None)
                .await
                .unwrap()
                .is_empty(),
            "{b}"
        );
        assert!(matches!(
            s.act_on_incident(&Act {
                note: &"x".repeat(3000),
                ..act("eu", &two.id, LaneAction::Resolve)
            })
            .await,
            Err(StoreError::NoteTooLong(3000))
        ));
    }
}

#[tokio::test]
async fn a_lane_registered_by_the_operator_is_not_overwritten_by_hand() {
    for b in backends().await {
        let s = b.store();
        s.create_deployment("eu").await.unwrap();
        s.insert_incident("eu", &incident(7, "acme")).await.unwrap();
        let reg = Registration::support("acme", 2, Some("gold"), &[]).with_uid("uid-1");
        s.register("eu", &reg).await.unwrap();
        // The registration took in the waiting incident.
        assert_eq!(
            s.lane_incidents("gold", None, 500).await.unwrap().len(),
            1,
            "{b}"
        );
        assert_eq!(s.pending_updates("eu", 10).await.unwrap().len(), 1, "{b}");
        let e = s
            .assign_lane("eu", "acme", "silver", &[], "adm_test")
            .await
            .unwrap_err();
        assert!(
            matches!(&e, StoreError::LaneFromOperator { lane, .. } if lane == "gold"),
            "{b}: {e}"
        );
        // The same lane again is fine; unknown deployments and bad names are not.
        s.assign_lane("eu", "acme", "gold", &[], "adm_test")
            .await
            .unwrap();
        assert!(matches!(
            s.assign_lane("nope", "acme", "gold", &[], "a").await,
            Err(StoreError::NoDeployment(_))
        ));
        assert!(matches!(
            s.assign_lane("eu", "acme", "Not A Lane", &[], "a").await,
            Err(StoreError::BadLane(_))
        ));
        // A lane set by hand gives way to the operator's next registration.
        s.assign_lane("eu", "beta", "silver", &[], "adm_test")
            .await
            .unwrap();
        s.register(
            "eu",
            &Registration::support("beta", 1, Some("gold"), &[]).with_uid("uid-2"),
        )
        .await
        .unwrap();
        assert_eq!(
            s.lanes(Some("gold")).await.unwrap()[0].tenants.len(),
            2,
            "{b}"
        );
    }
}

#[tokio::test]
async fn an_admin_token_can_be_limited_to_one_lane() {
    for b in backends().await {
        let s = b.store();
        let (info, tok) = s.create_admin_token(Some("desk")).await.unwrap();
        let (all, full) = s.create_admin_token(None).await.unwrap();
        assert_eq!(
            s.admin_hash_scope(&tok.hash()).await.unwrap(),
            Some((info.id.clone(), Scope::Lane("desk".into()))),
            "{b}"
        );
        assert_eq!(
            s.admin_hash_scope(&full.hash()).await.unwrap(),
            Some((all.id.clone(), Scope::All)),
            "{b}"
        );
        let listed = s.list_admin_tokens().await.unwrap();
        assert!(
            listed
                .iter()
                .any(|t| t.id == info.id && t.lane.as_deref() == Some("desk")),
            "{b}"
        );
        s.revoke_admin_token(&info.id).await.unwrap();
        assert_eq!(s.admin_hash_scope(&tok.hash()).await.unwrap(), None, "{b}");
        assert!(matches!(
            s.create_admin_token(Some("../x")).await,
            Err(StoreError::BadLane(_))
        ));
    }
}
