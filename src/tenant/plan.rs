//! The tenant sagas' pure core: their steps, in order, with owners; what
//! a change of `tenant.yaml` touches; how an outcome moves the `Tenant`'s
//! phase; and the offboarding grace rule.
//!
//! Order, onboarding: the namespace and identity first (everything else
//! lives in it), then the state its pods need (quota, limits, uid range),
//! then the keys (the pods mount them), then the tenant's Rollout, verified
//! (the pods run with the keys), then the support lane, and the status last.
//! Offboarding is the reverse, with the keys revoked before anything else
//! goes and the namespace deleted last.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::{Digest, Sha256};

use crate::crd::StepState;
use crate::crd::tenant::{
    DEFAULT_OFFBOARD_GRACE, Retention, TenantOperation, TenantPhase, TenantResourceSpec,
    TenantSpec, TenantStatus,
};
use crate::saga::{Outcome, Step};

pub const STEP_ENROLLED: &str = "identity-enrolled";
pub const STEP_PROVISIONED: &str = "state-provisioned";
pub const STEP_ACCESS: &str = "access-minted";
pub const STEP_ROLLOUT: &str = "rollout-verified";
pub const STEP_SUPPORT: &str = "support-registered";
pub const STEP_PROJECTED: &str = "status-projected";
pub const STEP_OLD_KEYS: &str = "old-keys-revoked";
pub const STEP_ROLLOUT_STOPPED: &str = "rollout-stopped";
pub const STEP_KEYS_REVOKED: &str = "keys-revoked";
pub const STEP_SUPPORT_REMOVED: &str = "support-unregistered";
pub const STEP_DATA: &str = "data-retained";
pub const STEP_DATA_DELETED: &str = "data-deleted";
pub const STEP_NAMESPACE: &str = "namespace-deleted";
pub const STEP_WITHDRAWN: &str = "enrollment-withdrawn";

/// One step of a tenant saga.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantStep {
    /// The namespace (labels, Pod Security `restricted`), its
    /// ServiceAccount, and the tenant registered with the control plane
    /// when the installation is managed.
    Enroll,
    /// ResourceQuota and LimitRange from the tier, the uid range
    /// annotation, the default AgentFS when asked.
    Provision,
    /// The virtual key and broker token (and tracing keys) minted by the
    /// key actuator into the tenant's Secret.
    MintAccess,
    /// The tenant's Rollout is Verified for the current release.
    RolloutVerified,
    /// The support lane is registered with the control plane, and its
    /// acknowledgement stored.
    RegisterSupport,
    /// The keys a change replaced are revoked, once the pods using the new
    /// ones are verified.
    RevokeOldKeys,
    /// The Tenant reports `Active` (or `Offboarded`), with an Event.
    Project,
    /// The tenant's Rollout stops acting (suspended, then deleted).
    StopRollout,
    /// Every key of the tenant is revoked at its actuator.
    RevokeKeys,
    UnregisterSupport,
    /// `storage.retention`: volumes kept (`retain`) or deleted.
    Data(Retention),
    /// The namespace goes, once the grace period is over or confirmed.
    DeleteNamespace,
    /// The control plane records the tenant as offboarded (managed
    /// installations; nothing to do otherwise).
    Withdraw,
}

impl Step for TenantStep {
    fn name(&self) -> String {
        match self {
            TenantStep::Enroll => STEP_ENROLLED,
            TenantStep::Provision => STEP_PROVISIONED,
            TenantStep::MintAccess => STEP_ACCESS,
            TenantStep::RolloutVerified => STEP_ROLLOUT,
            TenantStep::RegisterSupport => STEP_SUPPORT,
            TenantStep::RevokeOldKeys => STEP_OLD_KEYS,
            TenantStep::Project => STEP_PROJECTED,
            TenantStep::StopRollout => STEP_ROLLOUT_STOPPED,
            TenantStep::RevokeKeys => STEP_KEYS_REVOKED,
            TenantStep::UnregisterSupport => STEP_SUPPORT_REMOVED,
            TenantStep::Data(Retention::Retain) => STEP_DATA,
            TenantStep::Data(Retention::Delete) => STEP_DATA_DELETED,
            TenantStep::DeleteNamespace => STEP_NAMESPACE,
            TenantStep::Withdraw => STEP_WITHDRAWN,
        }
        .to_owned()
    }

    fn owner(&self) -> &'static str {
        match self {
            TenantStep::Enroll => {
                "exo-operator/tenant-enrollment (server-side apply; the control plane's tenant registry when managed)"
            }
            TenantStep::Provision => "exo-operator/tenant-provisioner (server-side apply)",
            TenantStep::MintAccess | TenantStep::RevokeOldKeys | TenantStep::RevokeKeys => {
                "key actuator (kubernetes or http)"
            }
            TenantStep::RolloutVerified | TenantStep::StopRollout => "exo-operator/rollout",
            TenantStep::RegisterSupport | TenantStep::UnregisterSupport => {
                "control plane (support lanes)"
            }
            TenantStep::Project => "exo-operator/tenant",
            TenantStep::Data(_) => "exo-operator/tenant-provisioner (PVCs)",
            TenantStep::DeleteNamespace => "exo-operator/tenant-enrollment",
            TenantStep::Withdraw => "control plane (tenant registry)",
        }
    }
}

impl TenantStep {
    pub fn parse(name: &str) -> Option<TenantStep> {
        [
            TenantStep::Enroll,
            TenantStep::Provision,
            TenantStep::MintAccess,
            TenantStep::RolloutVerified,
            TenantStep::RegisterSupport,
            TenantStep::RevokeOldKeys,
            TenantStep::Project,
            TenantStep::StopRollout,
            TenantStep::RevokeKeys,
            TenantStep::UnregisterSupport,
            TenantStep::Data(Retention::Retain),
            TenantStep::Data(Retention::Delete),
            TenantStep::DeleteNamespace,
            TenantStep::Withdraw,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

/// The onboarding saga of a tenant with `spec`. The access step is there
/// only when the tenant is scoped to models or capabilities (a tenant with
/// neither holds no keys), the support step only when it declares a lane.
pub fn onboard(spec: &TenantSpec) -> Vec<TenantStep> {
    let mut out = vec![TenantStep::Enroll, TenantStep::Provision];
    if !super::access::Scopes::of(spec).is_empty() {
        out.push(TenantStep::MintAccess);
    }
    out.push(TenantStep::RolloutVerified);
    if spec.support.is_some() {
        out.push(TenantStep::RegisterSupport);
    }
    out.push(TenantStep::Project);
    out
}

/// The steps a change from `old` (what the last saga carried out) to
/// `new` touches, in onboarding order; empty when nothing the sagas own
/// changed (an egress rule is the rollout's, not the tenant saga's).
///
/// - tier, storage, uid range: provisioning again, then the pods rolled
///   and verified (the uid range is in their security context);
/// - models or capabilities: new keys minted, the pods that use them
///   rolled and verified, and only then the old keys revoked;
/// - tier, wave: the tenant registered again first (the control plane's
///   registry holds both; unmanaged this only applies the namespace again);
/// - wave: the Rollout follows its new wave's release, verified;
/// - support: the lane registered again (or unregistered, when the
///   tenant no longer declares one).
pub fn change(old: &TenantSpec, new: &TenantSpec) -> Vec<TenantStep> {
    let provision = old.tier != new.tier
        || old.storage != new.storage
        || old.uid_range != new.uid_range
        || old.node_tier != new.node_tier;
    let access = old.models != new.models || old.capabilities != new.capabilities;
    let wave = old.wave != new.wave;
    let support = old.support != new.support;
    let mut out = Vec::new();
    // The control plane's registry holds the tier and the wave.
    if old.tier != new.tier || wave {
        out.push(TenantStep::Enroll);
    }
    if provision {
        out.push(TenantStep::Provision);
    }
    if access {
        out.push(TenantStep::MintAccess);
    }
    if provision || access || wave {
        out.push(TenantStep::RolloutVerified);
    }
    if access {
        out.push(TenantStep::RevokeOldKeys);
    }
    if support {
        out.push(if new.support.is_some() {
            TenantStep::RegisterSupport
        } else {
            TenantStep::UnregisterSupport
        });
    }
    if !out.is_empty() {
        out.push(TenantStep::Project);
    }
    out
}

/// The offboarding saga: the Rollout stopped, the keys revoked before
/// anything else goes, the lane unregistered, the data kept or deleted
/// per `storage.retention`, the namespace, and the tenant withdrawn from
/// the control plane's registry last.
pub fn offboard(spec: &TenantSpec) -> Vec<TenantStep> {
    let retention = spec
        .storage
        .as_ref()
        .map(|s| s.retention)
        .unwrap_or_default();
    let mut out = vec![TenantStep::StopRollout, TenantStep::RevokeKeys];
    if spec.support.is_some() {
        out.push(TenantStep::UnregisterSupport);
    }
    out.push(TenantStep::Data(retention));
    out.push(TenantStep::DeleteNamespace);
    out.push(TenantStep::Withdraw);
    out.push(TenantStep::Project);
    out
}

/// sha256 of the settings and the tier they name: what a status is
/// stamped with so every reader can tell whether it is about the spec it
/// sees. The commit is not in it: a commit that does not touch the tenant
/// changes nothing here.
pub fn settings_hash(spec: &TenantResourceSpec) -> String {
    let json = serde_json::to_vec(&(&spec.settings, &spec.tier)).unwrap_or_default();
    hex::encode(Sha256::digest(json))
}

/// What the tenant engine does next for a Tenant.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A new saga, for the spec as it is now.
    Start(TenantOperation, Vec<TenantStep>),
    /// Step `i` of the saga in the status.
    Run(usize),
    /// Every step is done for the current spec.
    Idle,
}

/// The pure decision: a spec the status is not about starts a saga
/// (offboarding when git no longer has the tenant; onboarding when it was
/// never Active, or when it comes back while or after being offboarded;
/// otherwise a change measured against what the last saga carried out);
/// a saga for the current spec runs its next step.
pub fn decide(spec: &TenantResourceSpec, status: Option<&TenantStatus>) -> Decision {
    let hash = settings_hash(spec);
    let operation = status.and_then(|s| s.operation);
    let current = status.is_some_and(|s| s.desired_hash.as_deref() == Some(hash.as_str()));
    let run_next = |s: &TenantStatus| match crate::saga::next_step(&s.steps) {
        Some(i) => Decision::Run(i),
        None => Decision::Idle,
    };
    if spec.offboarding {
        return match status {
            Some(s) if operation == Some(TenantOperation::Offboard) => run_next(s),
            _ => {
                let settings = status
                    .and_then(|s| s.active_settings.as_ref())
                    .unwrap_or(&spec.settings);
                Decision::Start(TenantOperation::Offboard, offboard(settings))
            }
        };
    }
    match status {
        Some(s) if current && operation != Some(TenantOperation::Offboard) => run_next(s),
        Some(s) if operation != Some(TenantOperation::Offboard) => match &s.active_settings {
            Some(active) => {
                let mut steps = change(active, &spec.settings);
                if s.active_tier != spec.tier && !steps.contains(&TenantStep::Provision) {
                    steps.insert(0, TenantStep::Provision);
                }
                if steps.last() != Some(&TenantStep::Project) {
                    steps.push(TenantStep::Project);
                }
                Decision::Start(TenantOperation::Change, steps)
            }
            None => Decision::Start(TenantOperation::Onboard, onboard(&spec.settings)),
        },
        // New, or back in git while or after being offboarded: everything
        // the offboarding took down is put back.
        _ => Decision::Start(TenantOperation::Onboard, onboard(&spec.settings)),
    }
}

/// Whether the tenant's Rollout may be written for the spec whose hash is
/// `desired_hash`: the saga in the status is for that spec, is not an
/// offboarding, and every step before `rollout-verified` is done (the
/// namespace, its quota and the keys the pods take exist first). A saga
/// without a rollout step (a support-lane change) leaves it open.
pub fn rollout_may_run(desired_hash: &str, status: Option<&TenantStatus>) -> bool {
    let Some(s) = status else { return false };
    if s.desired_hash.as_deref() != Some(desired_hash)
        || s.operation == Some(TenantOperation::Offboard)
    {
        return false;
    }
    let rollout = TenantStep::RolloutVerified.name();
    match s.steps.iter().position(|st| st.name == rollout) {
        Some(i) => s.steps[..i].iter().all(|st| st.state == StepState::Done),
        None => s.active_settings.is_some() || crate::saga::next_step(&s.steps).is_none(),
    }
}

/// What a saga is started for: the settings' hash, the commit and the
/// resource's generation.
#[derive(Debug, Clone, Copy)]
pub struct StartedFor<'a> {
    pub desired_hash: &'a str,
    pub commit: Option<&'a str>,
    pub generation: Option<i64>,
}

/// A fresh saga of `operation` with `steps`, stamped with what it is for.
/// What outlives a saga (the settings last carried out, when it became
/// Active, when offboarding began, the conditions) is kept.
pub fn start(
    previous: Option<&TenantStatus>,
    operation: TenantOperation,
    steps: &[TenantStep],
    now: Time,
    for_: StartedFor<'_>,
) -> TenantStatus {
    let prev = previous.cloned().unwrap_or_default();
    TenantStatus {
        phase: Some(running_phase(operation)),
        operation: Some(operation),
        current_step: steps.first().map(Step::name),
        steps: crate::saga::fresh(steps),
        desired_hash: Some(for_.desired_hash.to_owned()),
        applied_commit: for_.commit.map(str::to_owned),
        observed_generation: for_.generation,
        active_settings: prev.active_settings,
        active_tier: prev.active_tier,
        started_at: Some(now.clone()),
        active_at: prev.active_at,
        offboard_started_at: match operation {
            TenantOperation::Offboard => prev.offboard_started_at.or(Some(now)),
            _ => None,
        },
        message: None,
        control_plane: prev.control_plane,
        conditions: prev.conditions,
    }
}

fn running_phase(operation: TenantOperation) -> TenantPhase {
    match operation {
        TenantOperation::Onboard => TenantPhase::Onboarding,
        TenantOperation::Change => TenantPhase::Changing,
        TenantOperation::Offboard => TenantPhase::Offboarding,
    }
}

/// Records `outcome` for step `i` and the phase with it; the last step
/// Done makes the tenant Active (remembering the settings carried out) or
/// Offboarded. Returns whether anything changed.
pub fn record(
    status: &mut TenantStatus,
    i: usize,
    outcome: &Outcome,
    now: &Time,
    spec: &TenantResourceSpec,
) -> bool {
    let before = status.clone();
    let Some((state, message)) = crate::saga::record_step(&mut status.steps, i, outcome, now)
    else {
        return false;
    };
    let operation = status.operation.unwrap_or_default();
    status.current_step = Some(status.steps[i].name.clone());
    status.message = message;
    status.phase = Some(match state {
        StepState::Failed => TenantPhase::Failed,
        StepState::Waiting => TenantPhase::Waiting,
        _ => running_phase(operation),
    });
    if state == StepState::Done && crate::saga::next_step(&status.steps).is_none() {
        status.current_step = None;
        if operation == TenantOperation::Offboard {
            status.phase = Some(TenantPhase::Offboarded);
        } else {
            status.phase = Some(TenantPhase::Active);
            status.active_at = Some(now.clone());
            status.active_settings = Some(spec.settings.clone());
            status.active_tier = spec.tier.clone();
        }
    }
    *status != before
}

/// Whether the namespace of a tenant offboarded since `started` may go at
/// `now`: when confirmed, or once the grace period (`offboardGracePeriod`,
/// default 24h) is over. `Err` holds how long is left.
pub fn namespace_may_go(
    spec: &TenantSpec,
    started: &Time,
    now: &Time,
    confirmed: bool,
) -> Result<(), Duration> {
    if confirmed {
        return Ok(());
    }
    let grace = spec
        .offboard_grace_period
        .as_deref()
        .and_then(|g| crate::duration::parse(g).ok())
        .or_else(|| crate::duration::parse(DEFAULT_OFFBOARD_GRACE).ok())
        .unwrap_or(Duration::from_secs(24 * 3600));
    let elapsed = now
        .0
        .duration_since(started.0)
        .try_into()
        .unwrap_or(Duration::ZERO);
    if elapsed >= grace {
        Ok(())
    } else {
        Err(grace - elapsed)
    }
}

#[cfg(test)]
mod tests;
