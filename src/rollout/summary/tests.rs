use super::fixtures::{RolloutExt, rollout, time};
use super::*;
use crate::crd::{DriftRecord, InventoryEntry, LiveCheck};

const NOW: i64 = 100_000;

#[test]
fn states_and_sync() {
    use OutOfSync as O;
    let stale = Staleness {
        status_generation: Some(1),
        generation: Some(2),
        status_hash: Some("h-r1".into()),
        desired_hash: "h-r2".into(),
    };
    let cases: Vec<(&str, Rollout, TenantState, Vec<OutOfSync>)> = vec![
        (
            "no status",
            rollout("a", "canary", "r2"),
            TenantState::Pending,
            vec![O::Progressing],
        ),
        (
            "verified for this spec",
            rollout("a", "canary", "r2").current(RolloutPhase::Verified),
            TenantState::Verified,
            vec![],
        ),
        (
            "verified, but for the previous spec",
            rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r1"),
            TenantState::Stale(stale.clone()),
            vec![O::Stale],
        ),
        (
            "same hash, older generation",
            {
                let mut r = rollout("a", "canary", "r2").current(RolloutPhase::Verified);
                r.status_mut().observed_generation = Some(1);
                r
            },
            TenantState::Stale(Staleness {
                status_hash: Some("h-r2".into()),
                ..stale.clone()
            }),
            vec![O::Stale],
        ),
        (
            "a status that never said its generation",
            {
                let mut r = rollout("a", "canary", "r2").current(RolloutPhase::Verified);
                r.status_mut().observed_generation = None;
                r.status_mut().desired_hash = None;
                r
            },
            TenantState::Stale(Staleness {
                status_generation: None,
                status_hash: None,
                ..stale.clone()
            }),
            vec![O::Stale],
        ),
        (
            "drift and prunes are not read from a stale status",
            rollout("a", "canary", "r2")
                .stale(RolloutPhase::Verified, "r1")
                .drifting("x")
                .prune_blocked(InventoryKind::Agent, "old", "finalizer"),
            TenantState::Stale(stale),
            vec![O::Stale],
        ),
        (
            "running a step",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Progressing)
                .step("configmaps-published", StepState::Done)
                .step("repointed/broker", StepState::Running),
            TenantState::Progressing {
                step: Some("repointed/broker".into()),
            },
            vec![O::Progressing],
        ),
        (
            "waiting for an actuator",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Waiting)
                .step("verified/agent-runtime", StepState::Waiting),
            TenantState::Waiting {
                step: Some("verified/agent-runtime".into()),
            },
            vec![O::Progressing],
        ),
        (
            "failed",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Failed)
                .step("pods-rolled", StepState::Failed),
            TenantState::Failed {
                step: Some("pods-rolled".into()),
            },
            vec![O::Failed],
        ),
        (
            "verified with live content drift",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Verified)
                .drifting("pod agent-x: hash differs"),
            TenantState::Verified,
            vec![O::ContentDrift],
        ),
        (
            "verified with a pending prune",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Verified)
                .prune_blocked(InventoryKind::Tool, "old", "finalizer"),
            TenantState::Verified,
            vec![O::PendingPrune],
        ),
        (
            "everything at once",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Failed)
                .drifting("m")
                .prune_blocked(InventoryKind::AgentFS, "old", "mounted"),
            TenantState::Failed { step: None },
            vec![O::Failed, O::ContentDrift, O::PendingPrune],
        ),
    ];
    for (name, r, state, why) in cases {
        let s = summarize(&r, NOW);
        assert_eq!(s.state, state, "{name}");
        assert_eq!(s.out_of_sync, why, "{name}");
        assert_eq!(s.in_sync, why.is_empty(), "{name}");
    }
}

#[test]
fn only_a_current_status_fills_the_details() {
    let cases: Vec<(&str, Rollout, bool)> = vec![
        (
            "current",
            rollout("a", "canary", "r2").current(RolloutPhase::Verified),
            true,
        ),
        (
            "stale",
            rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r1"),
            false,
        ),
    ];
    for (name, mut r, current) in cases {
        r = r
            .verified_at(NOW - 60)
            .step("configmaps-published", StepState::Done)
            .message("verified")
            .prune_blocked(InventoryKind::Agent, "gone", "finalizer x");
        r.status_mut().inventory.push(InventoryEntry {
            kind: InventoryKind::Agent,
            name: "kept".into(),
            ..InventoryEntry::default()
        });
        r.status_mut().last_drift = Some(DriftRecord {
            at: Some(time(NOW - 30)),
            object: "Agent/kept".into(),
            fields: vec!["spec.runtime.image".into()],
        });
        r.status_mut().last_live_check = Some(LiveCheck {
            at: Some(time(NOW - 5)),
            pods: 3,
            ok: true,
            message: None,
        });
        let s = summarize(&r, NOW);
        assert_eq!(s.release, "r2", "{name}: the spec's release");
        if current {
            assert_eq!(s.applied_release.as_deref(), Some("r2"), "{name}");
            assert_eq!(s.applied_commit.as_deref(), Some("c-r2"), "{name}");
            assert_eq!((s.steps_done, s.steps_total), (1, 1), "{name}");
            assert_eq!(s.age_seconds, Some(60), "{name}");
            assert_eq!(s.message.as_deref(), Some("verified"), "{name}");
            assert_eq!(
                s.pending_prunes,
                [PendingPrune {
                    kind: InventoryKind::Agent,
                    name: "gone".into(),
                    reason: "finalizer x".into()
                }],
                "{name}: only blocked entries"
            );
            assert_eq!(
                s.last_drift,
                Some(LastDrift {
                    object: "Agent/kept".into(),
                    fields: vec!["spec.runtime.image".into()],
                    age_seconds: Some(30)
                }),
                "{name}"
            );
            assert_eq!(
                s.last_live_check,
                Some(LastLiveCheck {
                    pods: 3,
                    ok: true,
                    message: None,
                    age_seconds: Some(5)
                }),
                "{name}"
            );
        } else {
            assert_eq!(s.applied_release, None, "{name}");
            assert_eq!(s.applied_commit, None, "{name}");
            assert_eq!((s.steps_done, s.steps_total), (0, 0), "{name}");
            assert_eq!(s.age_seconds, None, "{name}");
            assert_eq!(s.message, None, "{name}");
            assert!(s.pending_prunes.is_empty(), "{name}");
            assert_eq!(s.last_drift, None, "{name}");
            assert_eq!(s.last_live_check, None, "{name}");
        }
    }
}

#[test]
fn verified_on_needs_a_current_verified_status_for_that_release() {
    let cases: Vec<(&str, Rollout, bool)> = vec![
        (
            "current, verified",
            rollout("a", "canary", "r2").current(RolloutPhase::Verified),
            true,
        ),
        (
            "stale, verified on r2 before a new commit",
            rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r2"),
            false,
        ),
        (
            "current, progressing",
            rollout("a", "canary", "r2").current(RolloutPhase::Progressing),
            false,
        ),
        (
            "current, verified on another release",
            rollout("a", "canary", "r1").current(RolloutPhase::Verified),
            false,
        ),
    ];
    for (name, r, want) in cases {
        assert_eq!(summarize(&r, NOW).verified_on("r2"), want, "{name}");
    }
}

#[test]
fn sorted_by_wave_then_tenant_unknown_waves_last() {
    let all = vec![
        rollout("z", "fleet", "r"),
        rollout("b", "mystery", "r"),
        rollout("y", "canary", "r"),
        rollout("a", "low-risk", "r"),
        rollout("x", "canary", "r"),
    ];
    let order: Vec<String> = summarize_all(&all, NOW)
        .into_iter()
        .map(|s| s.tenant)
        .collect();
    assert_eq!(order, ["x", "y", "a", "z", "b"]);
}

#[test]
fn json_field_names_are_stable() {
    let r = rollout("a", "canary", "r2")
        .current(RolloutPhase::Progressing)
        .step("repointed/broker", StepState::Running);
    let j = serde_json::to_value(summarize(&r, NOW)).expect("serializes");
    assert_eq!(
        j["state"],
        serde_json::json!({"phase": "Progressing", "step": "repointed/broker"})
    );
    assert_eq!(j["outOfSync"], serde_json::json!(["progressing"]));
    assert_eq!(j["appliedCommit"], "c-r2");
    let stale = rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r1");
    let j = serde_json::to_value(summarize(&stale, NOW)).expect("serializes");
    assert_eq!(
        j["state"],
        serde_json::json!({"phase": "Stale", "statusGeneration": 1, "generation": 2,
            "statusHash": "h-r1", "desiredHash": "h-r2"})
    );
    assert_eq!(j["inSync"], false);
}

#[test]
fn age_counts_from_the_start_until_verified() {
    let cases: Vec<(&str, Rollout, Option<i64>)> = vec![
        (
            "running",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Progressing)
                .started_at(NOW - 90)
                .verified_at(NOW - 5000),
            Some(90),
        ),
        (
            "verified",
            rollout("a", "canary", "r2")
                .current(RolloutPhase::Verified)
                .started_at(NOW - 90)
                .verified_at(NOW - 40),
            Some(40),
        ),
        (
            "never started",
            rollout("a", "canary", "r2").current(RolloutPhase::Pending),
            None,
        ),
    ];
    for (name, r, want) in cases {
        assert_eq!(summarize(&r, NOW).age_seconds, want, "{name}");
    }
}

#[test]
fn short_ids() {
    let cases = [
        ("0123456789abcdef", "0123456789ab"),
        ("sha256:0123456789abcdef", "0123456789ab"),
        ("abc", "abc"),
        ("", ""),
    ];
    for (id, want) in cases {
        assert_eq!(short_id(id), want, "{id}");
    }
}

#[test]
fn staleness_says_both_sides() {
    let s = Staleness {
        status_generation: Some(3),
        generation: Some(4),
        status_hash: Some("sha256:aaaaaaaaaaaaaaaa".into()),
        desired_hash: "bbbbbbbbbbbbbbbb".into(),
    };
    assert_eq!(
        s.to_string(),
        "status is for generation 3 (hash aaaaaaaaaaaa), spec is generation 4 (hash bbbbbbbbbbbb)"
    );
}

#[test]
fn fleets() {
    use crate::crd::{FleetSpec, FleetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
    let spec = FleetSpec {
        url: "git://127.0.0.1/fleet.git".into(),
        branch: "main".into(),
        prune: true,
        ..FleetSpec::default()
    };
    let fresh = Fleet::new("example", spec.clone());
    let mut synced = Fleet::new(
        "example",
        FleetSpec {
            suspend: true,
            prune: false,
            ..spec
        },
    );
    synced.status = Some(FleetStatus {
        conditions: vec![Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Applied".into(),
            message: "5 tenants".into(),
            last_transition_time: time(0),
            observed_generation: None,
        }],
        applied_commit: Some("abc".into()),
        last_sync_time: Some(time(NOW - 30)),
        ..FleetStatus::default()
    });
    // Name, Fleet, then (ready, suspended, prune, seconds since the sync).
    let cases = [
        ("never synced", fresh, (None, false, true, None)),
        (
            "synced, suspended, pruning off",
            synced,
            (Some(true), true, false, Some(30)),
        ),
    ];
    for (name, f, want) in cases {
        let s = summarize_fleet(&f, NOW);
        let got = (s.ready, s.suspended, s.prune, s.last_sync_age_seconds);
        assert_eq!(got, want, "{name}");
    }
}
