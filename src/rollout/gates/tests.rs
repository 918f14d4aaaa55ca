use super::*;
use crate::crd::StepState;
use crate::rollout::summary::fixtures::{RolloutExt, rollout};

const NOW: i64 = 10_000;

fn gate(soak: Option<&str>, max_failures: u32) -> Gates {
    Gates {
        require_verification: true,
        soak_time: soak.map(str::to_owned),
        max_failures,
    }
}

fn verified(tenant: &str, wave: &str, release: &str, ago: i64) -> Rollout {
    rollout(tenant, wave, release)
        .current(RolloutPhase::Verified)
        .verified_at(NOW - ago)
}

/// Name, wave promoted, its gates, the Rollouts, the refusal (or none).
type Case = (
    &'static str,
    WaveName,
    Gates,
    Vec<Rollout>,
    Result<(), &'static str>,
);

#[test]
fn gate_table() {
    let strict = gate(Some("10m"), 0);
    let cases: Vec<Case> = vec![
        (
            "the canary has no gate",
            WaveName::Canary,
            strict.clone(),
            vec![],
            Ok(()),
        ),
        (
            "verified and soaked",
            WaveName::LowRisk,
            strict.clone(),
            vec![verified("platform", "canary", "r2", 700)],
            Ok(()),
        ),
        (
            "verified, still soaking",
            WaveName::LowRisk,
            strict.clone(),
            vec![verified("platform", "canary", "r2", 60)],
            Err("gate soak-time: wave canary has been verified for 60s, 600s required"),
        ),
        (
            "a step still running",
            WaveName::LowRisk,
            strict.clone(),
            vec![
                rollout("platform", "canary", "r2")
                    .current(RolloutPhase::Progressing)
                    .step("configmaps-published", StepState::Done)
                    .step("repointed/broker", StepState::Running)
                    .message("2 of 3 pods rolled"),
            ],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform is Progressing on r2 at step repointed/broker: 2 of 3 pods rolled)",
            ),
        ),
        (
            "an actuator missing",
            WaveName::LowRisk,
            strict.clone(),
            vec![
                rollout("platform", "canary", "r2")
                    .current(RolloutPhase::Waiting)
                    .step("verified/agent-runtime", StepState::Waiting)
                    .message("no RBAC for pods/exec"),
            ],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform is Waiting on r2 at step verified/agent-runtime: no RBAC for pods/exec)",
            ),
        ),
        (
            "still on the previous release",
            WaveName::LowRisk,
            strict.clone(),
            vec![verified("platform", "canary", "r1", 9000)],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform is Verified on r1)",
            ),
        ),
        (
            "no status at all",
            WaveName::LowRisk,
            strict.clone(),
            vec![rollout("platform", "canary", "r2")],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform is Pending on no release yet)",
            ),
        ),
        (
            "verified on the release, but for the previous commit",
            WaveName::LowRisk,
            strict.clone(),
            vec![
                rollout("platform", "canary", "r2")
                    .stale(RolloutPhase::Verified, "r2")
                    .verified_at(NOW - 9000),
            ],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform has no status for its current spec yet: status is for generation 1 (hash h-r2), spec is generation 2 (hash h-r2))",
            ),
        ),
        (
            "rolled back: a stale status verified on the release is not believed",
            WaveName::LowRisk,
            strict.clone(),
            vec![
                rollout("platform", "canary", "r1")
                    .stale(RolloutPhase::Verified, "r2")
                    .verified_at(NOW - 9000),
            ],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform has no status for its current spec yet: status is for generation 1 (hash h-r2), spec is generation 2 (hash h-r1))",
            ),
        ),
        (
            "verified, then live content drifted",
            WaveName::LowRisk,
            strict.clone(),
            vec![
                verified("platform", "canary", "r2", 9000)
                    .drifting("pod agent-a: AGENTS.md differs"),
            ],
            Err(
                "gate verification: wave canary is not verified on r2 yet (platform is Verified on r2 but a live re-check found content drift: pod agent-a: AGENTS.md differs)",
            ),
        ),
        (
            "too many failures, with what failed",
            WaveName::Fleet,
            strict.clone(),
            vec![
                rollout("a", "low-risk", "r2")
                    .current(RolloutPhase::Failed)
                    .step("pods-rolled", StepState::Failed)
                    .message("imageID is not the pinned digest"),
                verified("b", "low-risk", "r2", 9000),
            ],
            Err(
                "gate max-failures: 1 tenant(s) of wave low-risk failed (a), at most 0 allowed; a at step pods-rolled: imageID is not the pinned digest",
            ),
        ),
        (
            "a tolerated failure",
            WaveName::Fleet,
            gate(Some("10m"), 1),
            vec![
                rollout("a", "low-risk", "r2").current(RolloutPhase::Failed),
                verified("b", "low-risk", "r2", 9000),
            ],
            Ok(()),
        ),
        (
            "a failure for an older spec is not counted, and not verified either",
            WaveName::Fleet,
            strict.clone(),
            vec![
                rollout("a", "low-risk", "r2").stale(RolloutPhase::Failed, "r2"),
                verified("b", "low-risk", "r2", 9000),
            ],
            Err(
                "gate verification: wave low-risk is not verified on r2 yet (a has no status for its current spec yet: status is for generation 1 (hash h-r2), spec is generation 2 (hash h-r2))",
            ),
        ),
        (
            "every tenant failed within max-failures",
            WaveName::Fleet,
            gate(None, 2),
            vec![rollout("a", "low-risk", "r2").current(RolloutPhase::Failed)],
            Err("gate verification: wave low-risk is not verified on r2 yet (every tenant failed)"),
        ),
        (
            "verification not required",
            WaveName::LowRisk,
            Gates {
                require_verification: false,
                soak_time: None,
                max_failures: 0,
            },
            vec![rollout("platform", "canary", "r2").current(RolloutPhase::Progressing)],
            Ok(()),
        ),
        (
            "the gating wave has no tenants",
            WaveName::Fleet,
            strict.clone(),
            vec![verified("platform", "canary", "r2", 9000)],
            Err("gate verification: wave low-risk has no tenants to verify"),
        ),
        (
            "several tenants: each names what it waits for",
            WaveName::Fleet,
            strict.clone(),
            vec![
                verified("c", "low-risk", "r2", 9000),
                rollout("b", "low-risk", "r2").current(RolloutPhase::Pending),
                verified("a", "low-risk", "r1", 9000),
            ],
            Err(
                "gate verification: wave low-risk is not verified on r2 yet (a is Verified on r1; b is Pending on r2)",
            ),
        ),
    ];
    for (name, target, g, rollouts, want) in cases {
        let got =
            check(target, "r2", &g, &rollouts, Analysis::None, NOW).map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_owned), "{name}");
    }
}

#[test]
fn refusals_are_typed() {
    let stale = rollout("a", "canary", "r2").stale(RolloutPhase::Verified, "r1");
    let e = check(
        WaveName::LowRisk,
        "r2",
        &gate(None, 0),
        &[stale],
        Analysis::None,
        NOW,
    )
    .unwrap_err();
    let GateFailure::NotVerified { waiting, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        waiting[0].why,
        Unverified::Stale(Staleness {
            status_generation: Some(1),
            generation: Some(2),
            status_hash: Some("h-r1".into()),
            desired_hash: "h-r2".into(),
        })
    );
}

fn run(wave: &str, release: &str, phase: Option<AnalysisPhase>, current: bool) -> AnalysisRun {
    let mut r = AnalysisRun::new(
        "fleet-canary-r2",
        crate::crd::AnalysisRunSpec {
            fleet: "fleet".into(),
            wave: wave.into(),
            release: release.into(),
            commit: "c".into(),
            tenants: vec![],
            checks: vec![],
            soak: None,
            auto_promote: false,
        },
    );
    r.metadata.generation = Some(2);
    r.status = phase.map(|phase| crate::crd::AnalysisRunStatus {
        observed_generation: Some(if current { 2 } else { 1 }),
        phase,
        message: Some("why".into()),
        ..Default::default()
    });
    r
}

#[test]
fn a_wave_with_analysis_gates_on_its_run_having_passed_for_this_spec() {
    let canary = [verified("platform", "canary", "r2", 700)];
    let g = gate(None, 0);
    let gate_with = |a: Analysis<'_>| {
        check(WaveName::LowRisk, "r2", &g, &canary, a, NOW).map_err(|e| e.to_string())
    };
    assert_eq!(gate_with(Analysis::None), Ok(()));
    let passed = run("canary", "r2", Some(AnalysisPhase::Passed), true);
    assert_eq!(gate_with(Analysis::Run(Some(&passed))), Ok(()));
    let cases = [
        (
            None,
            "gate analysis: wave canary has no analysis run on r2 yet (it starts once every tenant of the wave is verified)",
        ),
        (
            Some(run("canary", "r2", Some(AnalysisPhase::Running), true)),
            "gate analysis: wave canary's analysis of r2 is Running: why",
        ),
        (
            Some(run("canary", "r2", Some(AnalysisPhase::Failed), true)),
            "gate analysis: wave canary's analysis of r2 is Failed: why",
        ),
        // Passed, but for an older spec: not trusted.
        (
            Some(run("canary", "r2", Some(AnalysisPhase::Passed), false)),
            "gate analysis: wave canary has no analysis run on r2 yet (it starts once every tenant of the wave is verified)",
        ),
        // Another release's run does not count.
        (
            Some(run("canary", "r1", Some(AnalysisPhase::Passed), true)),
            "gate analysis: wave canary has no analysis run on r2 yet (it starts once every tenant of the wave is verified)",
        ),
    ];
    for (r, want) in cases {
        assert_eq!(gate_with(Analysis::Run(r.as_ref())), Err(want.to_owned()));
    }
}

#[test]
fn a_rollback_goes_to_the_newest_release_every_tenant_verified() {
    let with = |t: &str, releases: &[&str]| {
        let mut r = rollout(t, "canary", "r3").current(RolloutPhase::Verified);
        if let Some(s) = r.status.as_mut() {
            s.verified_releases = releases.iter().map(|x| (*x).to_owned()).collect();
        }
        r
    };
    let p = WavePointer {
        release: "r3".into(),
        history: vec!["r2".into(), "r1".into()],
    };
    let a = with("a", &["r1", "r2", "r3"]);
    let b = with("b", &["r1", "r3"]);
    assert_eq!(rollback_target(&p, &[&a]), Some("r2".into()));
    assert_eq!(rollback_target(&p, &[&a, &b]), Some("r1".into()));
    assert_eq!(rollback_target(&p, &[&with("c", &["r3"])]), None);
    assert_eq!(rollback_target(&p, &[]), None);
}
