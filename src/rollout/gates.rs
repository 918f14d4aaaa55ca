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
    /// A (tenant, cluster) pair nobody can vouch for: its cluster is
    /// offline or unknown to the control plane, or has no Rollout of the
    /// tenant ([`pairs`]). Never verified.
    Unknown(pairs::UnknownWhy),
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
            Unverified::Unknown(why) => write!(f, "{t} is unknown: {why}"),
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
    decide(
        prev,
        release,
        gates,
        wave_standing(prev, release, rollouts, now),
        analysis,
        now,
    )
}

/// The gates of the wave after `prev` for `release`, given how `prev`'s
/// tenants (or (tenant, cluster) pairs) stand on it.
pub(crate) fn decide(
    prev: WaveName,
    release: &str,
    gates: &Gates,
    standing: WaveStanding,
    analysis: Analysis<'_>,
    now: i64,
) -> Result<(), GateFailure> {
    let WaveStanding {
        verified_at,
        failed,
        waiting,
    } = standing;
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

pub mod pairs;
#[cfg(test)]
mod tests;
