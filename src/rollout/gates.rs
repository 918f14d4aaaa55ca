//! Promotion gates, pure: given the Rollouts of the wave before the one
//! being promoted, may release `R` move on?

use std::time::Duration;

use crate::crd::{Rollout, RolloutPhase};
use crate::release::{Gates, WaveName, parse_duration};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateFailure {
    NoTenants {
        wave: WaveName,
    },
    NotVerified {
        wave: WaveName,
        release: String,
        pending: Vec<String>,
    },
    TooManyFailures {
        wave: WaveName,
        failed: Vec<String>,
        max: u32,
    },
    Soak {
        wave: WaveName,
        needed: Duration,
        elapsed: Duration,
    },
    BadSoak(String),
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
                pending,
            } => write!(
                f,
                "gate verification: wave {wave} is not verified on {release} yet ({})",
                pending.join(", ")
            ),
            GateFailure::TooManyFailures { wave, failed, max } => write!(
                f,
                "gate max-failures: {} tenant(s) of wave {wave} failed ({}), at most {max} allowed",
                failed.len(),
                failed.join(", ")
            ),
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
        }
    }
}

/// Checks the gates of `target` for `release`, from the Rollouts of every
/// tenant, at time `now` (seconds since the epoch).
pub fn check(
    target: WaveName,
    release: &str,
    gates: &Gates,
    rollouts: &[Rollout],
    now: i64,
) -> Result<(), GateFailure> {
    let Some(prev) = target.previous() else {
        return Ok(());
    };
    let in_prev: Vec<&Rollout> = rollouts
        .iter()
        .filter(|r| r.spec.wave == prev.as_str())
        .collect();
    if in_prev.is_empty() {
        return Err(GateFailure::NoTenants { wave: prev });
    }
    let on_release = |r: &&Rollout| {
        r.spec.release == release
            && r.status.as_ref().and_then(|s| s.release.as_deref()) == Some(release)
    };
    let phase = |r: &Rollout| r.status.as_ref().and_then(|s| s.phase);
    let failed: Vec<String> = in_prev
        .iter()
        .filter(|r| on_release(r) && phase(r) == Some(RolloutPhase::Failed))
        .map(|r| r.spec.tenant.clone())
        .collect();
    if failed.len() > gates.max_failures as usize {
        return Err(GateFailure::TooManyFailures {
            wave: prev,
            failed,
            max: gates.max_failures,
        });
    }
    let verified: Vec<&&Rollout> = in_prev
        .iter()
        .filter(|r| on_release(r) && phase(r) == Some(RolloutPhase::Verified))
        .collect();
    if gates.require_verification {
        let pending: Vec<String> = in_prev
            .iter()
            .filter(|r| {
                !(on_release(r)
                    && matches!(
                        phase(r),
                        Some(RolloutPhase::Verified | RolloutPhase::Failed)
                    ))
            })
            .map(|r| {
                let p = phase(r)
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "Pending".into());
                let on = r
                    .status
                    .as_ref()
                    .and_then(|s| s.release.clone())
                    .unwrap_or_else(|| "-".into());
                format!("{} is {p} on {on}", r.spec.tenant)
            })
            .collect();
        if !pending.is_empty() || verified.is_empty() {
            return Err(GateFailure::NotVerified {
                wave: prev,
                release: release.to_owned(),
                pending,
            });
        }
    }
    if let Some(soak) = &gates.soak_time {
        let needed = parse_duration(soak).map_err(GateFailure::BadSoak)?;
        let latest = verified
            .iter()
            .filter_map(|r| {
                r.status
                    .as_ref()?
                    .verified_at
                    .as_ref()
                    .map(|t| t.0.as_second())
            })
            .max()
            .unwrap_or(now);
        let elapsed = Duration::from_secs(u64::try_from(now - latest).unwrap_or(0));
        if elapsed < needed {
            return Err(GateFailure::Soak {
                wave: prev,
                needed,
                elapsed,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{RolloutSpec, RolloutStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ro(
        tenant: &str,
        wave: &str,
        release: &str,
        phase: RolloutPhase,
        verified_at: i64,
    ) -> Rollout {
        let mut r = Rollout::new(
            "release",
            RolloutSpec {
                tenant: tenant.into(),
                wave: wave.into(),
                release: release.into(),
                commit: "c".into(),
                desired_hash: "h".into(),
            },
        );
        r.status = Some(RolloutStatus {
            phase: Some(phase),
            release: Some(release.into()),
            verified_at: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(verified_at).unwrap(),
            )),
            ..RolloutStatus::default()
        });
        r
    }

    #[test]
    fn gates() {
        let g = Gates {
            require_verification: true,
            soak_time: Some("10m".into()),
            max_failures: 0,
        };
        let now = 10_000;
        let good = vec![ro(
            "platform",
            "canary",
            "r2",
            RolloutPhase::Verified,
            now - 700,
        )];
        assert_eq!(check(WaveName::Canary, "r2", &g, &[], now), Ok(()));
        assert_eq!(check(WaveName::LowRisk, "r2", &g, &good, now), Ok(()));

        let soaking = vec![ro(
            "platform",
            "canary",
            "r2",
            RolloutPhase::Verified,
            now - 60,
        )];
        assert!(matches!(
            check(WaveName::LowRisk, "r2", &g, &soaking, now),
            Err(GateFailure::Soak { .. })
        ));

        let progressing = vec![ro(
            "platform",
            "canary",
            "r2",
            RolloutPhase::Progressing,
            now,
        )];
        let e = check(WaveName::LowRisk, "r2", &g, &progressing, now).unwrap_err();
        assert!(
            e.to_string().contains("platform is Progressing on r2"),
            "{e}"
        );

        let old = vec![ro(
            "platform",
            "canary",
            "r1",
            RolloutPhase::Verified,
            now - 9000,
        )];
        assert!(matches!(
            check(WaveName::LowRisk, "r2", &g, &old, now),
            Err(GateFailure::NotVerified { .. })
        ));

        let failed = vec![
            ro("a", "low-risk", "r2", RolloutPhase::Failed, now - 9000),
            ro("b", "low-risk", "r2", RolloutPhase::Verified, now - 9000),
        ];
        assert!(matches!(
            check(WaveName::Fleet, "r2", &g, &failed, now),
            Err(GateFailure::TooManyFailures { .. })
        ));
        let tolerant = Gates {
            max_failures: 1,
            ..g.clone()
        };
        assert_eq!(
            check(WaveName::Fleet, "r2", &tolerant, &failed, now),
            Ok(())
        );
        assert!(matches!(
            check(WaveName::Fleet, "r2", &g, &good, now),
            Err(GateFailure::NoTenants { .. })
        ));
    }
}
