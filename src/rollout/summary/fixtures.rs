//! Builders for Rollouts with a status, shared by the unit tests of the
//! summary and of the gates.

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
            settings: Default::default(),
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
        self.status_mut().pending_prunes.push(InventoryEntry {
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
