//! Promotion gates, pure: given the Rollouts of the wave before the one
//! being promoted, may release `R` move on?
//!
//! Only a status computed for its Rollout's current spec counts (read
//! through [`crate::rollout::summary`]): a tenant whose status is for an
//! older generation or desired hash is not verified, whatever it says.

use std::time::Duration;

use crate::crd::{AnalysisPhase, AnalysisRun, Rollout, RolloutPhase};
use crate::fleet::release::WavePointer;
use crate::release::{Gates, WaveName, parse_duration};
use crate::rollout::summary::{Staleness, TenantState, TenantSummary, summarize, wave_of};

/// Why one tenant of the gating wave does not count as verified on the
/// release yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unverified {
    /// Its status was computed for another spec.
    Stale(Staleness),
    /// Its current status is for another release (or none yet).
    OtherRelease {
        phase: RolloutPhase,
        release: Option<String>,
    },
    /// Its saga on the release has not finished: the step it is at.
    Running {
        phase: RolloutPhase,
        step: Option<String>,
        message: Option<String>,
    },
    /// Verified, but a live re-check found content that is not the
    /// release's (the ContentDrift condition's message).
    ContentDrift { message: String },
}

/// A tenant the gate waits for, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub tenant: String,
    pub release: String,
    pub why: Unverified,
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.tenant;
        match &self.why {
            Unverified::Stale(s) => write!(f, "{t} has no status for its current spec yet: {s}"),
            Unverified::OtherRelease {
                phase,
                release: Some(r),
            } => write!(f, "{t} is {phase:?} on {r}"),
            Unverified::OtherRelease {
                phase,
                release: None,
            } => write!(f, "{t} is {phase:?} on no release yet"),
            Unverified::Running {
                phase,
                step,
                message,
            } => {
                write!(f, "{t} is {phase:?} on {}", self.release)?;
                if let Some(s) = step {
                    write!(f, " at step {s}")?;
                }
                if let Some(m) = message {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
            Unverified::ContentDrift { message } => write!(
                f,
                "{t} is Verified on {} but a live re-check found content drift: {message}",
                self.release
            ),
        }
    }
}

/// A tenant whose saga failed on the release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub tenant: String,
    pub step: Option<String>,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFailure {
    NoTenants {
        wave: WaveName,
    },
    NotVerified {
        wave: WaveName,
        release: String,
        /// Empty when every tenant failed within `maxFailures`.
        waiting: Vec<Waiting>,
    },
    TooManyFailures {
        wave: WaveName,
        failed: Vec<Failure>,
        max: u32,
    },
    Soak {
        wave: WaveName,
        needed: Duration,
        elapsed: Duration,
    },
    BadSoak(crate::duration::DurationError),
    /// The wave has an analysis and its run on the release has not passed.
    Analysis {
        wave: WaveName,
        release: String,
        /// The run's phase; `None` when there is no run (yet), or its
        /// status is for another spec.
        phase: Option<AnalysisPhase>,
        message: Option<String>,
    },
}

/// What the gate knows of the gating wave's analysis on the release.
#[derive(Debug, Clone, Copy)]
pub enum Analysis<'a> {
    /// The release gives the wave no analysis.
    None,
    /// It does: the wave's run on the release, if there is one.
    Run(Option<&'a AnalysisRun>),
}

fn join<T: std::fmt::Display>(items: impl IntoIterator<Item = T>, sep: &str) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

impl std::fmt::Display for GateFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateFailure::NoTenants { wave } => {
                write!(f, "gate verification: wave {wave} has no tenants to verify")
            }
            GateFailure::NotVerified {
                wave,
                release,
                waiting,
            } => {
                write!(
                    f,
                    "gate verification: wave {wave} is not verified on {release} yet ("
                )?;
                if waiting.is_empty() {
                    f.write_str("every tenant failed")?;
                } else {
                    f.write_str(&join(waiting, "; "))?;
                }
                f.write_str(")")
            }
            GateFailure::TooManyFailures { wave, failed, max } => {
                write!(
                    f,
                    "gate max-failures: {} tenant(s) of wave {wave} failed ({}), at most {max} allowed",
                    failed.len(),
                    join(failed.iter().map(|x| &x.tenant), ", ")
                )?;
                for x in failed {
                    write!(f, "; {}", x.tenant)?;
                    if let Some(s) = &x.step {
                        write!(f, " at step {s}")?;
                    }
                    write!(f, ": {}", x.message.as_deref().unwrap_or("no message"))?;
                }
                Ok(())
            }
            GateFailure::Soak {
                wave,
                needed,
                elapsed,
            } => write!(
                f,
                "gate soak-time: wave {wave} has been verified for {}s, {}s required",
                elapsed.as_secs(),
                needed.as_secs()
            ),
            GateFailure::BadSoak(e) => write!(f, "gate soak-time: {e}"),
            GateFailure::Analysis {
                wave,
                release,
                phase,
                message,
            } => {
                match phase {
                    None => write!(
                        f,
                        "gate analysis: wave {wave} has no analysis run on {release} yet (it starts once every tenant of the wave is verified)"
                    )?,
                    Some(p) => write!(
                        f,
                        "gate analysis: wave {wave}'s analysis of {release} is {p}"
                    )?,
                }
                if let Some(m) = message {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
        }
    }
}

/// Where one tenant of the gating wave stands on the release.
enum Standing {
    Verified { at: Option<i64> },
    Failed(Failure),
    Waiting(Waiting),
}

fn standing(r: &Rollout, t: TenantSummary, release: &str) -> Standing {
    let waiting = |why| {
        Standing::Waiting(Waiting {
            tenant: t.tenant.clone(),
            release: release.to_owned(),
            why,
        })
    };
    let phase = match &t.state {
        TenantState::Stale(s) => return waiting(Unverified::Stale(s.clone())),
        state => state.phase().unwrap_or_default(),
    };
    if !t.runs(release) {
        return waiting(Unverified::OtherRelease {
            phase,
            release: t.applied_release.clone(),
        });
    }
    match &t.state {
        TenantState::Verified => match &t.content_drift {
            Some(message) => waiting(Unverified::ContentDrift {
                message: message.clone(),
            }),
            None => Standing::Verified {
                at: r
                    .current_status()
                    .and_then(|s| s.verified_at.as_ref())
                    .map(|t| t.0.as_second()),
            },
        },
        TenantState::Failed { step } => Standing::Failed(Failure {
            tenant: t.tenant.clone(),
            step: step.clone(),
            message: t.message.clone(),
        }),
        state => waiting(Unverified::Running {
            phase,
            step: state.step().map(str::to_owned),
            message: t.message.clone(),
        }),
    }
}

/// How the tenants of one wave stand on a release.
#[derive(Debug, Default)]
pub struct WaveStanding {
    /// Each verified tenant's `verifiedAt` (seconds), if known.
    pub verified_at: Vec<Option<i64>>,
    pub failed: Vec<Failure>,
    pub waiting: Vec<Waiting>,
}

impl WaveStanding {
    /// Every tenant (at least one) verified on the release.
    pub fn all_verified(&self) -> bool {
        !self.verified_at.is_empty() && self.failed.is_empty() && self.waiting.is_empty()
    }

    /// When the last of them was verified.
    pub fn latest_verified(&self) -> Option<i64> {
        self.verified_at.iter().flatten().copied().max()
    }
}

/// Where each tenant of `wave` stands on `release`, from the Rollouts of
/// every tenant, at `now` (seconds since the epoch); in tenant order.
pub fn wave_standing(
    wave: WaveName,
    release: &str,
    rollouts: &[impl std::borrow::Borrow<Rollout>],
    now: i64,
) -> WaveStanding {
    let mut tenants: Vec<(&Rollout, TenantSummary)> = rollouts
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|r| wave_of(r) == Some(wave))
        .map(|r| (r, summarize(r, now)))
        .collect();
    tenants.sort_by(|(_, a), (_, b)| a.tenant.cmp(&b.tenant));
    let mut out = WaveStanding::default();
    for (r, t) in tenants {
        match standing(r, t, release) {
            Standing::Verified { at } => out.verified_at.push(at),
            Standing::Failed(f) => out.failed.push(f),
            Standing::Waiting(w) => out.waiting.push(w),
        }
    }
    out
}

/// Checks the gates of `target` for `release`, from the Rollouts of every
/// tenant and the gating wave's analysis, at time `now` (seconds since the
/// epoch).
pub fn check(
    target: WaveName,
    release: &str,
    gates: &Gates,
    rollouts: &[Rollout],
    analysis: Analysis<'_>,
    now: i64,
) -> Result<(), GateFailure> {
    let Some(prev) = target.previous() else {
        return Ok(());
    };
    let WaveStanding {
        verified_at,
        failed,
        waiting,
    } = wave_standing(prev, release, rollouts, now);
    if verified_at.is_empty() && failed.is_empty() && waiting.is_empty() {
        return Err(GateFailure::NoTenants { wave: prev });
    }
    if failed.len() > gates.max_failures as usize {
        return Err(GateFailure::TooManyFailures {
            wave: prev,
            failed,
            max: gates.max_failures,
        });
    }
    if gates.require_verification && (!waiting.is_empty() || verified_at.is_empty()) {
        return Err(GateFailure::NotVerified {
            wave: prev,
            release: release.to_owned(),
            waiting,
        });
    }
    if let Some(soak) = &gates.soak_time {
        let needed = parse_duration(soak).map_err(GateFailure::BadSoak)?;
        let latest = verified_at.into_iter().flatten().max().unwrap_or(now);
        let elapsed = Duration::from_secs(u64::try_from(now - latest).unwrap_or(0));
        if elapsed < needed {
            return Err(GateFailure::Soak {
                wave: prev,
                needed,
                elapsed,
            });
        }
    }
    if let Analysis::Run(run) = analysis {
        let run = run.filter(|r| r.spec.release == release && r.spec.wave == prev.as_str());
        let status = run.and_then(AnalysisRun::current_status);
        if status.map(|s| s.phase) != Some(AnalysisPhase::Passed) {
            return Err(GateFailure::Analysis {
                wave: prev,
                release: release.to_owned(),
                phase: status.map(|s| s.phase),
                message: status.and_then(|s| s.message.clone()),
            });
        }
    }
    Ok(())
}

/// The release a rollback of a wave goes to: the newest of its pointer's
/// history that every tenant of the wave verified (`verifiedReleases` is
/// history, true whatever spec the status was last computed for, so a
/// stale status counts: a rollback right after a promotion must not wait
/// for the operator). `None` when the wave has no tenant or no such
/// release.
pub fn rollback_target(current: &WavePointer, in_wave: &[&Rollout]) -> Option<String> {
    current
        .history
        .iter()
        .find(|h| {
            !in_wave.is_empty()
                && in_wave.iter().all(|r| {
                    r.status
                        .as_ref()
                        .is_some_and(|s| s.verified_releases.contains(h))
                })
        })
        .cloned()
}

#[cfg(test)]
mod tests {
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
                Err(
                    "gate verification: wave low-risk is not verified on r2 yet (every tenant failed)",
                ),
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
}
