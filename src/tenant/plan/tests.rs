//! The tenant sagas' pure core, table-tested.

use super::*;
use crate::crd::tenant::{StorageSpec, SupportSpec, UidRange};
use k8s_openapi::jiff::Timestamp;

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(secs).unwrap())
}

fn names(steps: &[TenantStep]) -> Vec<String> {
    steps.iter().map(Step::name).collect()
}

fn spec() -> TenantSpec {
    TenantSpec {
        tier: Some("standard".into()),
        wave: Some("fleet".into()),
        models: vec!["gpt-4o-mini".into()],
        support: Some(SupportSpec {
            lane: "acme-support".into(),
            contacts: vec![],
        }),
        ..TenantSpec::default()
    }
}

fn resource(s: &TenantSpec) -> TenantResourceSpec {
    TenantResourceSpec {
        settings: s.clone(),
        ..TenantResourceSpec::default()
    }
}

#[test]
fn onboarding_runs_in_the_documented_order() {
    assert_eq!(
        names(&onboard(&spec())),
        [
            "identity-enrolled",
            "state-provisioned",
            "access-minted",
            "rollout-verified",
            "support-registered",
            "status-projected"
        ]
    );
    let no_lane = TenantSpec {
        support: None,
        ..spec()
    };
    assert!(!names(&onboard(&no_lane)).contains(&"support-registered".to_owned()));
    for s in onboard(&spec()) {
        assert_eq!(TenantStep::parse(&s.name()), Some(s));
        assert!(!s.owner().is_empty());
    }
}

#[test]
fn a_change_runs_the_steps_it_touches() {
    let old = spec();
    let with = |f: &dyn Fn(&mut TenantSpec)| {
        let mut s = spec();
        f(&mut s);
        s
    };
    let cases: Vec<(&str, TenantSpec, Vec<&str>)> = vec![
        ("nothing", spec(), vec![]),
        (
            "an egress rule is the rollout's",
            with(&|s| s.allowed_egress = vec![Default::default()]),
            vec![],
        ),
        (
            "scopes: mint, roll, then revoke the old key",
            with(&|s| s.models.push("claude-sonnet".into())),
            vec![
                "access-minted",
                "rollout-verified",
                "old-keys-revoked",
                "status-projected",
            ],
        ),
        (
            "tier",
            with(&|s| s.tier = Some("premium".into())),
            vec![
                "identity-enrolled",
                "state-provisioned",
                "rollout-verified",
                "status-projected",
            ],
        ),
        (
            "quota",
            with(&|s| {
                s.storage = Some(StorageSpec {
                    quota: Some("50Gi".into()),
                    ..StorageSpec::default()
                })
            }),
            vec!["state-provisioned", "rollout-verified", "status-projected"],
        ),
        (
            "uid range",
            with(&|s| {
                s.uid_range = Some(UidRange {
                    start: 300_000,
                    size: 100,
                })
            }),
            vec!["state-provisioned", "rollout-verified", "status-projected"],
        ),
        (
            "wave",
            with(&|s| s.wave = Some("canary".into())),
            vec!["identity-enrolled", "rollout-verified", "status-projected"],
        ),
        (
            "support",
            with(&|s| s.support.as_mut().unwrap().contacts.push("ops@x".into())),
            vec!["support-registered", "status-projected"],
        ),
        (
            "support removed",
            with(&|s| s.support = None),
            vec!["support-unregistered", "status-projected"],
        ),
    ];
    for (what, new, want) in cases {
        assert_eq!(names(&change(&old, &new)), want, "{what}");
    }
}

#[test]
fn offboarding_revokes_keys_first_and_deletes_the_namespace_last() {
    let got = names(&offboard(&spec()));
    assert_eq!(
        got,
        [
            "rollout-stopped",
            "keys-revoked",
            "support-unregistered",
            "data-retained",
            "namespace-deleted",
            "enrollment-withdrawn",
            "status-projected"
        ]
    );
    let delete = TenantSpec {
        storage: Some(StorageSpec {
            retention: Retention::Delete,
            ..StorageSpec::default()
        }),
        support: None,
        ..spec()
    };
    assert_eq!(
        names(&offboard(&delete)),
        [
            "rollout-stopped",
            "keys-revoked",
            "data-deleted",
            "namespace-deleted",
            "enrollment-withdrawn",
            "status-projected"
        ]
    );
}

#[test]
fn a_saga_moves_the_phase_and_ends_active_with_its_settings() {
    let s = spec();
    let rs = resource(&s);
    let steps = onboard(&s);
    let hash = settings_hash(&rs);
    let for_ = StartedFor {
        desired_hash: &hash,
        commit: Some("abc"),
        generation: Some(1),
    };
    let mut st = start(None, TenantOperation::Onboard, &steps, at(0), for_);
    assert_eq!(st.phase, Some(TenantPhase::Onboarding));
    assert_eq!(st.current_step.as_deref(), Some("identity-enrolled"));
    assert!(record(&mut st, 0, &Outcome::Done, &at(1), &rs));
    assert!(
        !record(&mut st, 0, &Outcome::Done, &at(1), &rs),
        "same again"
    );
    assert!(record(
        &mut st,
        2,
        &Outcome::Waiting("no key actuator is configured".into()),
        &at(2),
        &rs
    ));
    assert_eq!(st.phase, Some(TenantPhase::Waiting));
    assert_eq!(st.message.as_deref(), Some("no key actuator is configured"));
    for i in 0..steps.len() {
        record(&mut st, i, &Outcome::Done, &at(3), &rs);
    }
    assert_eq!(st.phase, Some(TenantPhase::Active));
    assert_eq!(st.active_settings.as_ref(), Some(&s));
    assert_eq!(st.current_step, None);
    assert_eq!(st.desired_hash.as_deref(), Some(hash.as_str()));
    // An offboarding keeps when it began across restarts of its saga.
    let off = start(
        Some(&st),
        TenantOperation::Offboard,
        &offboard(&s),
        at(10),
        for_,
    );
    let again = start(
        Some(&off),
        TenantOperation::Offboard,
        &offboard(&s),
        at(20),
        for_,
    );
    assert_eq!(again.offboard_started_at, Some(at(10)));
    assert_eq!(again.active_settings.as_ref(), Some(&s));
}

#[test]
fn the_namespace_waits_for_the_grace_period_or_a_confirmation() {
    let s = TenantSpec {
        offboard_grace_period: Some("1h".into()),
        ..spec()
    };
    assert_eq!(
        namespace_may_go(&s, &at(0), &at(600), false),
        Err(Duration::from_secs(3000))
    );
    assert_eq!(namespace_may_go(&s, &at(0), &at(3600), false), Ok(()));
    assert_eq!(namespace_may_go(&s, &at(0), &at(1), true), Ok(()));
    let default = spec();
    assert_eq!(
        namespace_may_go(&default, &at(0), &at(3600), false),
        Err(Duration::from_secs(23 * 3600))
    );
}

#[test]
fn a_tenant_without_scopes_has_no_access_step() {
    let none = TenantSpec {
        models: vec![],
        support: None,
        ..spec()
    };
    assert_eq!(
        names(&onboard(&none)),
        [
            "identity-enrolled",
            "state-provisioned",
            "rollout-verified",
            "status-projected"
        ]
    );
}

#[test]
fn decide_starts_the_saga_the_spec_calls_for_and_resumes_one_in_progress() {
    let s = spec();
    let rs = resource(&s);
    let hash = settings_hash(&rs);
    let for_ = StartedFor {
        desired_hash: &hash,
        commit: None,
        generation: None,
    };
    // New: onboarding.
    assert_eq!(
        decide(&rs, None),
        Decision::Start(TenantOperation::Onboard, onboard(&s))
    );
    let mut st = start(None, TenantOperation::Onboard, &onboard(&s), at(0), for_);
    // In progress for this spec: its next step, never a fresh start.
    assert_eq!(decide(&rs, Some(&st)), Decision::Run(0));
    record(&mut st, 0, &Outcome::Done, &at(1), &rs);
    assert_eq!(decide(&rs, Some(&st)), Decision::Run(1));
    // The gate: the Rollout waits for the keys.
    assert!(!rollout_may_run(&hash, Some(&st)));
    record(&mut st, 1, &Outcome::Done, &at(1), &rs);
    record(&mut st, 2, &Outcome::Done, &at(1), &rs);
    assert!(rollout_may_run(&hash, Some(&st)));
    assert!(!rollout_may_run("other", Some(&st)), "for another spec");
    for i in 3..onboard(&s).len() {
        record(&mut st, i, &Outcome::Done, &at(2), &rs);
    }
    assert_eq!(decide(&rs, Some(&st)), Decision::Idle);
    // A scope change: measured against what was carried out.
    let mut wider = s.clone();
    wider.models.push("claude".into());
    let rw = resource(&wider);
    assert_eq!(
        decide(&rw, Some(&st)),
        Decision::Start(TenantOperation::Change, change(&s, &wider))
    );
    // A tier definition changed under the same settings: provisioning.
    let mut retiered = rs.clone();
    retiered.tier = Some(crate::crd::tenant::tiers::Tier {
        name: "standard".into(),
        ..Default::default()
    });
    assert_eq!(
        decide(&retiered, Some(&st)),
        Decision::Start(
            TenantOperation::Change,
            vec![TenantStep::Provision, TenantStep::Project]
        )
    );
    // Gone from git: offboarding, and the Rollout stays shut.
    let gone = TenantResourceSpec {
        offboarding: true,
        ..rs.clone()
    };
    assert_eq!(
        decide(&gone, Some(&st)),
        Decision::Start(TenantOperation::Offboard, offboard(&s))
    );
    let off = start(
        Some(&st),
        TenantOperation::Offboard,
        &offboard(&s),
        at(5),
        for_,
    );
    assert_eq!(decide(&gone, Some(&off)), Decision::Run(0));
    assert!(!rollout_may_run(&hash, Some(&off)));
    // Back in git before the namespace went: onboarding again.
    assert_eq!(
        decide(&rs, Some(&off)),
        Decision::Start(TenantOperation::Onboard, onboard(&s))
    );
}
