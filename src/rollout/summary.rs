//! Where each tenant's rollout stands, as typed values, from its `Rollout`
//! alone (pure; no client). Everything here reads the status through
//! [`Rollout::current_status`]: a status written for another spec (an older
//! generation or desired hash) says nothing about the current one, so it is
//! reported as [`TenantState::Stale`] and never as verified.
//!
//! The CLI (`exo release status|rollout`), the promotion gates and the demo
//! script (through `exo release status -o json`) read tenants through this.

use serde::Serialize;

use crate::crd::{InventoryKind, Rollout, RolloutPhase, StepState};
use crate::release::WaveName;

/// Why a status does not describe the current spec: what it was computed
/// for against what the spec is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Staleness {
    /// `status.observedGeneration` (none when the status never said).
    pub status_generation: Option<i64>,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `status.desiredHash`.
    pub status_hash: Option<String>,
    /// `spec.desiredHash`.
    pub desired_hash: String,
}

impl std::fmt::Display for Staleness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let generation = |g: Option<i64>| g.map_or_else(|| "-".to_owned(), |g| g.to_string());
        let hash = |h: Option<&str>| h.map_or("-", short_id).to_owned();
        write!(
            f,
            "status is for generation {} (hash {}), spec is generation {} (hash {})",
            generation(self.status_generation),
            hash(self.status_hash.as_deref()),
            generation(self.generation),
            hash(Some(&self.desired_hash)),
        )
    }
}

/// One tenant's saga, as far as its status can be trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "phase")]
pub enum TenantState {
    /// The status was computed for another spec; the current one has not
    /// been looked at yet.
    Stale(Staleness),
    /// Current status, saga not started (or no status written at all).
    Pending,
    /// A step is running.
    Progressing {
        step: Option<String>,
    },
    /// A step's actuator is missing; it is retried.
    Waiting {
        step: Option<String>,
    },
    Verified,
    /// A step failed; the status message says why.
    Failed {
        step: Option<String>,
    },
}

impl TenantState {
    /// The state of `r`'s saga for its current spec.
    pub fn of(r: &Rollout) -> TenantState {
        let Some(status) = r.status.as_ref() else {
            return TenantState::Pending;
        };
        let Some(s) = r.current_status() else {
            return TenantState::Stale(Staleness {
                status_generation: status.observed_generation,
                generation: r.metadata.generation,
                status_hash: status.desired_hash.clone(),
                desired_hash: r.spec.desired_hash.clone(),
            });
        };
        let step = s.current_step.clone();
        match s.phase.unwrap_or_default() {
            RolloutPhase::Pending => TenantState::Pending,
            RolloutPhase::Progressing => TenantState::Progressing { step },
            RolloutPhase::Waiting => TenantState::Waiting { step },
            RolloutPhase::Verified => TenantState::Verified,
            RolloutPhase::Failed => TenantState::Failed { step },
        }
    }

    /// The saga phase a current status reports; `None` when stale.
    pub fn phase(&self) -> Option<RolloutPhase> {
        match self {
            TenantState::Stale(_) => None,
            TenantState::Pending => Some(RolloutPhase::Pending),
            TenantState::Progressing { .. } => Some(RolloutPhase::Progressing),
            TenantState::Waiting { .. } => Some(RolloutPhase::Waiting),
            TenantState::Verified => Some(RolloutPhase::Verified),
            TenantState::Failed { .. } => Some(RolloutPhase::Failed),
        }
    }

    /// The step a current saga is at.
    pub fn step(&self) -> Option<&str> {
        match self {
            TenantState::Progressing { step }
            | TenantState::Waiting { step }
            | TenantState::Failed { step } => step.as_deref(),
            TenantState::Stale(_) | TenantState::Pending | TenantState::Verified => None,
        }
    }
}

impl std::fmt::Display for TenantState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.phase() {
            None => f.write_str("stale"),
            Some(p) => write!(f, "{p:?}"),
        }
    }
}

/// Why a tenant is not in sync with git.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OutOfSync {
    /// The status is for another spec.
    Stale,
    /// The saga has not verified the current spec yet (pending, running
    /// or waiting).
    Progressing,
    /// The saga failed on the current spec.
    Failed,
    /// A live re-check found content that is not the release's.
    ContentDrift,
    /// Objects git dropped are not deleted yet.
    PendingPrune,
}

impl OutOfSync {
    pub fn as_str(self) -> &'static str {
        match self {
            OutOfSync::Stale => "stale",
            OutOfSync::Progressing => "progressing",
            OutOfSync::Failed => "failed",
            OutOfSync::ContentDrift => "drift",
            OutOfSync::PendingPrune => "pending prune",
        }
    }
}

/// An inventory entry git dropped whose deletion did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingPrune {
    pub kind: InventoryKind,
    pub name: String,
    pub reason: String,
}

/// The last managed object put back to what git says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastDrift {
    pub object: String,
    pub fields: Vec<String>,
    pub age_seconds: Option<i64>,
}

/// The last live re-check of the verified pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LastLiveCheck {
    pub pods: u32,
    pub ok: bool,
    pub message: Option<String>,
    pub age_seconds: Option<i64>,
}

/// Everything `exo release status` says about one tenant. Field names are
/// the stable JSON form (`-o json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantSummary {
    pub namespace: String,
    pub wave: String,
    pub tenant: String,
    /// The release the spec asks for.
    pub release: String,
    /// The release the current status is for (none when stale).
    pub applied_release: Option<String>,
    /// The fleet commit the current status is for (none when stale).
    pub applied_commit: Option<String>,
    pub state: TenantState,
    pub steps_done: usize,
    pub steps_total: usize,
    /// Seconds since the saga started, or since it was verified.
    pub age_seconds: Option<i64>,
    pub message: Option<String>,
    pub in_sync: bool,
    /// Empty exactly when `inSync`.
    pub out_of_sync: Vec<OutOfSync>,
    /// The ContentDrift condition's message, while it is True.
    pub content_drift: Option<String>,
    pub pending_prunes: Vec<PendingPrune>,
    pub last_drift: Option<LastDrift>,
    pub last_live_check: Option<LastLiveCheck>,
}

impl TenantSummary {
    /// Whether the spec asks for `release` and the current status is for it.
    pub fn runs(&self, release: &str) -> bool {
        self.release == release && self.applied_release.as_deref() == Some(release)
    }

    /// Whether the current status verified `release`.
    pub fn verified_on(&self, release: &str) -> bool {
        self.state == TenantState::Verified && self.runs(release)
    }
}

/// The wave a Rollout belongs to (`None` for a name no release uses).
pub fn wave_of(r: &Rollout) -> Option<WaveName> {
    r.spec.wave.parse().ok()
}

/// A commit id or hash shortened for people: 12 characters, without a
/// `sha256:` prefix.
pub fn short_id(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    id.char_indices().nth(12).map_or(id, |(i, _)| &id[..i])
}

fn age(now: i64, at: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<i64> {
    at.map(|t| now - t.0.as_second())
}

/// One tenant, at `now` (seconds since the epoch).
pub fn summarize(r: &Rollout, now: i64) -> TenantSummary {
    let state = TenantState::of(r);
    let current = r.current_status();
    let content_drift = r.content_drift().map(|c| c.message.clone());
    let pending_prunes: Vec<PendingPrune> = current
        .iter()
        .flat_map(|s| &s.inventory)
        .filter_map(|e| {
            e.prune_blocked.as_ref().map(|why| PendingPrune {
                kind: e.kind,
                name: e.name.clone(),
                reason: why.clone(),
            })
        })
        .collect();
    let mut out_of_sync = Vec::new();
    match &state {
        TenantState::Stale(_) => out_of_sync.push(OutOfSync::Stale),
        TenantState::Verified => {}
        TenantState::Failed { .. } => out_of_sync.push(OutOfSync::Failed),
        TenantState::Pending | TenantState::Progressing { .. } | TenantState::Waiting { .. } => {
            out_of_sync.push(OutOfSync::Progressing)
        }
    }
    if content_drift.is_some() {
        out_of_sync.push(OutOfSync::ContentDrift);
    }
    if !pending_prunes.is_empty() {
        out_of_sync.push(OutOfSync::PendingPrune);
    }
    let since = current.and_then(|s| match state {
        TenantState::Verified => s.verified_at.as_ref(),
        _ => s.started_at.as_ref(),
    });
    TenantSummary {
        namespace: r.metadata.namespace.clone().unwrap_or_default(),
        wave: r.spec.wave.clone(),
        tenant: r.spec.tenant.clone(),
        release: r.spec.release.clone(),
        applied_release: current.and_then(|s| s.release.clone()),
        applied_commit: current.and_then(|s| s.applied_commit.clone()),
        steps_done: current.map_or(0, |s| {
            s.steps
                .iter()
                .filter(|x| x.state == StepState::Done)
                .count()
        }),
        steps_total: current.map_or(0, |s| s.steps.len()),
        age_seconds: age(now, since),
        message: current.and_then(|s| s.message.clone()),
        in_sync: out_of_sync.is_empty(),
        out_of_sync,
        content_drift,
        pending_prunes,
        last_drift: current
            .and_then(|s| s.last_drift.as_ref())
            .map(|d| LastDrift {
                object: d.object.clone(),
                fields: d.fields.clone(),
                age_seconds: age(now, d.at.as_ref()),
            }),
        last_live_check: current
            .and_then(|s| s.last_live_check.as_ref())
            .map(|c| LastLiveCheck {
                pods: c.pods,
                ok: c.ok,
                message: c.message.clone(),
                age_seconds: age(now, c.at.as_ref()),
            }),
        state,
    }
}

/// Every tenant, in wave order (unknown waves last), then by tenant.
pub fn summarize_all(rollouts: &[Rollout], now: i64) -> Vec<TenantSummary> {
    let mut out: Vec<(Option<WaveName>, TenantSummary)> = rollouts
        .iter()
        .map(|r| (wave_of(r), summarize(r, now)))
        .collect();
    // `None` sorts first; unknown waves belong after the known ones.
    out.sort_by(|(wa, a), (wb, b)| {
        (wa.is_none(), wa, &a.tenant, &a.namespace).cmp(&(
            wb.is_none(),
            wb,
            &b.tenant,
            &b.namespace,
        ))
    });
    out.into_iter().map(|(_, s)| s).collect()
}

/// Builders for Rollouts with a status, shared by the unit tests of this
/// module and of the gates.
#[cfg(test)]
pub(crate) mod fixtures {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use crate::crd::{
        CONDITION_CONTENT_DRIFT, InventoryEntry, InventoryKind, Rollout, RolloutPhase, RolloutSpec,
        RolloutStatus, SagaStep, StepState,
    };

    pub fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid timestamp"))
    }

    /// A Rollout at generation 2 whose spec asks for `release` with desired
    /// hash `h-<release>`, and no status.
    pub fn rollout(tenant: &str, wave: &str, release: &str) -> Rollout {
        let mut r = Rollout::new(
            "release",
            RolloutSpec {
                tenant: tenant.into(),
                wave: wave.into(),
                release: release.into(),
                commit: format!("c-{release}"),
                desired_hash: format!("h-{release}"),
            },
        );
        r.metadata.namespace = Some(tenant.into());
        r.metadata.generation = Some(2);
        r
    }

    pub trait RolloutExt {
        /// A current status (this generation and hash) in `phase`.
        fn current(self, phase: RolloutPhase) -> Rollout;
        /// A status in `phase` for `release`, computed for generation 1 and
        /// that release's hash.
        fn stale(self, phase: RolloutPhase, release: &str) -> Rollout;
        fn verified_at(self, secs: i64) -> Rollout;
        fn started_at(self, secs: i64) -> Rollout;
        fn step(self, name: &str, state: StepState) -> Rollout;
        fn message(self, m: &str) -> Rollout;
        fn drifting(self, message: &str) -> Rollout;
        fn prune_blocked(self, kind: InventoryKind, name: &str, why: &str) -> Rollout;
        fn status_mut(&mut self) -> &mut RolloutStatus;
    }

    impl RolloutExt for Rollout {
        fn current(mut self, phase: RolloutPhase) -> Rollout {
            let spec = self.spec.clone();
            let s = self.status_mut();
            s.phase = Some(phase);
            s.observed_generation = Some(2);
            s.desired_hash = Some(spec.desired_hash);
            s.release = Some(spec.release);
            s.applied_commit = Some(spec.commit);
            self
        }
        fn stale(mut self, phase: RolloutPhase, release: &str) -> Rollout {
            let s = self.status_mut();
            s.phase = Some(phase);
            s.observed_generation = Some(1);
            s.desired_hash = Some(format!("h-{release}"));
            s.release = Some(release.into());
            s.applied_commit = Some(format!("c-{release}"));
            self
        }
        fn verified_at(mut self, secs: i64) -> Rollout {
            self.status_mut().verified_at = Some(time(secs));
            self
        }
        fn started_at(mut self, secs: i64) -> Rollout {
            self.status_mut().started_at = Some(time(secs));
            self
        }
        fn step(mut self, name: &str, state: StepState) -> Rollout {
            let s = self.status_mut();
            if state != StepState::Done {
                s.current_step = Some(name.into());
            }
            s.steps.push(SagaStep {
                name: name.into(),
                owner: "test".into(),
                state,
                ..SagaStep::default()
            });
            self
        }
        fn message(mut self, m: &str) -> Rollout {
            self.status_mut().message = Some(m.into());
            self
        }
        fn drifting(mut self, message: &str) -> Rollout {
            self.status_mut().conditions.push(Condition {
                type_: CONDITION_CONTENT_DRIFT.into(),
                status: "True".into(),
                reason: "Mismatch".into(),
                message: message.into(),
                last_transition_time: time(0),
                observed_generation: Some(2),
            });
            self
        }
        fn prune_blocked(mut self, kind: InventoryKind, name: &str, why: &str) -> Rollout {
            self.status_mut().inventory.push(InventoryEntry {
                kind,
                name: name.into(),
                uid: String::new(),
                prune_blocked: Some(why.into()),
            });
            self
        }
        fn status_mut(&mut self) -> &mut RolloutStatus {
            self.status.get_or_insert_with(RolloutStatus::default)
        }
    }
}

#[cfg(test)]
mod tests {
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
}
