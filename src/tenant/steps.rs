//! The tenant saga's steps: each one's actuator and postcondition. Every
//! step is idempotent (server-side apply, deletes where NotFound is
//! success, keys registered only after asking whether the server knows
//! them), so a step cut short by a crash is safe to run again; a step
//! recorded Done is never run again for the same spec.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    LimitRange, Namespace, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    ResourceQuota, Secret,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tracing::warn;

use super::access::{
    self, ACCESS_SECRET, ACTUATOR_SECRET, AccessError, Actuator, KeyServer, RETIRING_SECRET,
    STATE_MINTED, STATE_PENDING, Scopes,
};
use super::plan::{TenantStep, namespace_may_go};
use crate::cluster::apply::Ctx;
use crate::cluster::build::tenant as build;
use crate::cluster::error::ErrorCategory;
use crate::cluster::metrics::Controller as Writer;
use crate::crd::tenant::{RegistrationAck, Retention, Tenant, TenantStatus};
use crate::crd::{AgentFS, Rollout, RolloutPhase};
use crate::meta::{
    ANNOTATION_OFFBOARD_CONFIRM, ANNOTATION_RETAINED, ANNOTATION_TENANT_GATE_OPENED, LABEL_FLEET,
    LABEL_FLEET_NAMESPACE, LABEL_TENANT, ROLLOUT_NAME,
};
use crate::saga::Outcome;
use crate::upstream::registrations::{Progress, Registrations};
use crate::wire::{RecordKind, Registration};

mod keys;
mod offboard;

use keys::{mint_access, revoke};
use offboard::{data, delete_namespace, stop_rollout};

/// What a step sees.
pub struct StepCx<'a> {
    pub op: &'a Ctx,
    pub tenant: &'a Tenant,
    pub name: &'a str,
    pub status: &'a TenantStatus,
    pub operator_namespace: &'a str,
    /// The control plane's tenant registry, through the upstream
    /// connection; `None` when the installation is unmanaged.
    pub registrations: Option<&'a Registrations>,
}

/// What a step concluded, and what the control plane acknowledged in it
/// (to be kept in the status with the step's outcome).
pub struct Ran {
    pub outcome: Outcome,
    pub ack: Option<(RecordKind, RegistrationAck)>,
}

impl From<Outcome> for Ran {
    fn from(outcome: Outcome) -> Self {
        Ran { outcome, ack: None }
    }
}

/// Why a step could not finish this time: a cluster call failed.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Cluster(#[from] crate::cluster::error::Error),
    #[error(transparent)]
    Access(#[from] AccessError),
}

impl StepError {
    fn kube(what: impl Into<String>, e: kube::Error) -> Self {
        StepError::Cluster(crate::cluster::error::Error::kube(what, e))
    }

    /// Missing RBAC, a missing or wrong actuator: waiting on someone.
    /// Anything else is looked at again soon.
    fn outcome(self) -> Outcome {
        match &self {
            StepError::Cluster(e)
                if matches!(
                    e.category(),
                    ErrorCategory::Forbidden | ErrorCategory::CrdMissing
                ) =>
            {
                Outcome::Waiting(self.to_string())
            }
            StepError::Access(
                AccessError::NoActuator { .. }
                | AccessError::BadActuator { .. }
                | AccessError::OtherActuator { .. },
            ) => Outcome::Waiting(self.to_string()),
            _ => Outcome::Pending(self.to_string()),
        }
    }
}

type StepResult = Result<Outcome, StepError>;

/// Runs `step` once and says what its postcondition concluded.
pub async fn run(cx: &StepCx<'_>, step: TenantStep) -> Ran {
    let r = match step {
        TenantStep::Enroll => enroll(cx).await,
        TenantStep::Provision => provision(cx).await.map(Ran::from),
        TenantStep::MintAccess => mint_access(cx).await.map(Ran::from),
        TenantStep::RolloutVerified => rollout_verified(cx).await.map(Ran::from),
        TenantStep::RegisterSupport => Ok(register_support(cx)),
        TenantStep::UnregisterSupport => Ok(unregister_support(cx)),
        TenantStep::RevokeOldKeys => revoke(cx, &[RETIRING_SECRET]).await.map(Ran::from),
        TenantStep::Project => Ok(Outcome::Done.into()),
        TenantStep::StopRollout => stop_rollout(cx).await.map(Ran::from),
        TenantStep::RevokeKeys => revoke(cx, &[ACCESS_SECRET, RETIRING_SECRET])
            .await
            .map(Ran::from),
        TenantStep::Data(retention) => data(cx, retention).await.map(Ran::from),
        TenantStep::DeleteNamespace => delete_namespace(cx).await.map(Ran::from),
        TenantStep::Withdraw => Ok(withdraw(cx)),
    };
    r.unwrap_or_else(|e| e.outcome().into())
}

/// Asks the control plane to store `r`; `None` when the installation is
/// unmanaged. Done once it acknowledged the record, with the ack;
/// waiting (someone must upgrade it) when the control plane connected
/// takes no registrations; running while it is on its way.
fn register(cx: &StepCx<'_>, r: Registration, record: String) -> Option<Ran> {
    let registry = cx.registrations?;
    // For this Tenant resource: one made again after a delete counts its
    // generations anew, and the control plane tells them apart by uid.
    let r = r.with_uid(cx.tenant.metadata.uid.as_deref().unwrap_or_default());
    let (kind, id, generation) = (r.kind(), r.id().to_owned(), r.generation());
    Some(match registry.request(r) {
        Progress::Acked(_) => Ran {
            outcome: Outcome::Done,
            ack: Some((
                kind,
                RegistrationAck {
                    id,
                    generation,
                    record,
                    acked_at: Time(k8s_openapi::jiff::Timestamp::now()),
                },
            )),
        },
        Progress::InFlight(m) => Outcome::Pending(format!("control plane: {m}")).into(),
        Progress::Refused(m) => Outcome::Waiting(m).into(),
    })
}

fn generation(cx: &StepCx<'_>) -> i64 {
    cx.tenant.metadata.generation.unwrap_or(0)
}

/// The tenant's record in the control plane's registry: enrolled (or
/// withdrawn), with the tier and wave of `settings`.
fn tenant_record(cx: &StepCx<'_>, enrolled: bool) -> Registration {
    let s = settings(cx.tenant);
    Registration::tenant(
        cx.name,
        generation(cx),
        enrolled,
        s.tier.as_deref().unwrap_or_default(),
        s.wave.as_deref().unwrap_or_default(),
    )
}

/// When a pending step is worth a look before the usual backoff: the end
/// of the offboarding grace period.
pub fn wake_for(
    step: TenantStep,
    t: &Tenant,
    status: &TenantStatus,
    now: &Time,
) -> Option<Duration> {
    if step != TenantStep::DeleteNamespace {
        return None;
    }
    let started = status.offboard_started_at.as_ref()?;
    namespace_may_go(&settings(t), started, now, confirmed(t))
        .err()
        .map(|left| left.min(Duration::from_secs(60)))
}

fn settings(t: &Tenant) -> crate::crd::tenant::TenantSpec {
    t.status
        .as_ref()
        .and_then(|s| s.active_settings.clone())
        .filter(|_| t.spec.offboarding)
        .unwrap_or_else(|| t.spec.settings.clone())
}

fn confirmed(t: &Tenant) -> bool {
    t.annotations()
        .get(ANNOTATION_OFFBOARD_CONFIRM)
        .is_some_and(|v| v == "true")
}

/// Identity and enrollment: the namespace (labels, Pod Security
/// `restricted`, the uid range) and the tenant's ServiceAccount, read back.
async fn enroll(cx: &StepCx<'_>) -> Result<Ran, StepError> {
    let ns = build::namespace(cx.name, &cx.tenant.spec.settings);
    let live = cx.op.apply_cluster(Writer::Tenant, &ns).await?;
    if live.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Pending(format!(
            "namespace {} is still being deleted; enrolling again once it is gone",
            cx.name
        ))
        .into());
    }
    let want = ns.metadata.labels.unwrap_or_default();
    let has = live.labels();
    if let Some((k, v)) = want.iter().find(|(k, v)| has.get(*k) != Some(*v)) {
        return Ok(Outcome::Failed(format!(
            "namespace {}: label {k}={v} did not stick",
            cx.name
        ))
        .into());
    }
    let sa = cx
        .op
        .apply(Writer::Tenant, &build::service_account(cx.name))
        .await?;
    if sa.automount_service_account_token != Some(false) {
        return Ok(Outcome::Failed(format!(
            "ServiceAccount {}/{}: token automount is not off",
            cx.name,
            build::TENANT_OBJECT
        ))
        .into());
    }
    // Managed: the control plane's registry has the tenant (and said so).
    Ok(register(cx, tenant_record(cx, true), "enrolled".into())
        .unwrap_or_else(|| Outcome::Done.into()))
}

/// State provisioning: the namespace's uid range, the tier's quota and
/// limits (removed when the tier sets none). Done once the quota is in
/// force: the quota controller reports the same hard limits.
async fn provision(cx: &StepCx<'_>) -> StepResult {
    let settings = &cx.tenant.spec.settings;
    let tier = cx.tenant.spec.tier.as_ref();
    // The uid range is on the namespace: a change saga (no enrollment in
    // it) applies the namespace again; an onboarding just did.
    let enrolled_now = cx
        .status
        .steps
        .iter()
        .any(|s| s.name == crate::saga::Step::name(&TenantStep::Enroll));
    if !enrolled_now {
        cx.op
            .apply_cluster(Writer::Tenant, &build::namespace(cx.name, settings))
            .await?;
    }
    let quota = build::resource_quota(cx.name, settings, tier);
    let in_force = match &quota {
        Some(q) => {
            // Read first: a quota already as wanted (this step looked
            // before, waiting for the quota controller) is not written again.
            let get = |what| {
                let api = cx.op.api::<ResourceQuota>(cx.name);
                async move {
                    api.get_opt(build::TENANT_OBJECT).await.map_err(|e| {
                        StepError::kube(format!("{what} ResourceQuota {}", cx.name), e)
                    })
                }
            };
            let want = q.spec.as_ref().and_then(|s| s.hard.clone());
            let mut live = get("get").await?;
            let spec_of = |l: &Option<ResourceQuota>| {
                l.as_ref()
                    .and_then(|l| l.spec.as_ref())
                    .and_then(|s| s.hard.clone())
            };
            if !same_quantities(want.as_ref(), spec_of(&live).as_ref()) {
                live = Some(cx.op.apply(Writer::Tenant, q).await?);
            }
            let has = live.and_then(|l| l.status).and_then(|s| s.hard);
            same_quantities(want.as_ref(), has.as_ref())
        }
        None => {
            cx.op
                .delete::<ResourceQuota>(Writer::Tenant, cx.name, build::TENANT_OBJECT, None)
                .await?;
            true
        }
    };
    match build::limit_range(cx.name, tier) {
        Some(lr) => {
            let live = cx
                .op
                .api::<LimitRange>(cx.name)
                .get_opt(build::TENANT_OBJECT)
                .await
                .map_err(|e| StepError::kube(format!("get LimitRange {}", cx.name), e))?;
            if live.and_then(|l| l.spec) != lr.spec {
                cx.op.apply(Writer::Tenant, &lr).await?;
            }
        }
        None => {
            cx.op
                .delete::<LimitRange>(Writer::Tenant, cx.name, build::TENANT_OBJECT, None)
                .await?;
        }
    }
    let workspace = workspace(cx).await?;
    Ok(if in_force {
        workspace.map_or(Outcome::Done, Outcome::Pending)
    } else {
        Outcome::Pending(format!(
            "ResourceQuota {}/{} not yet in force",
            cx.name,
            build::TENANT_OBJECT
        ))
    })
}

/// `storage.agentFS`: the AgentFS the tenant asked for, created once and
/// grown when `tenant.yaml` asks for more (never shrunk: an AgentFS is
/// grow-only; never deleted when the field goes: its data is the
/// tenant's). `Some(why)` while it is not there yet.
async fn workspace(cx: &StepCx<'_>) -> Result<Option<String>, StepError> {
    let settings = &cx.tenant.spec.settings;
    let Some(want) = settings.storage.as_ref().and_then(|s| s.agent_fs.as_ref()) else {
        return Ok(None);
    };
    let name = want.name();
    let api = cx.op.api::<AgentFS>(cx.name);
    let live = api
        .get_opt(name)
        .await
        .map_err(|e| StepError::kube(format!("get AgentFS {}/{name}", cx.name), e))?;
    let apply = match &live {
        None => true,
        Some(l) => matches!(
            (
                crate::quantity::to_bytes(&want.size),
                crate::quantity::to_bytes(&l.spec.size.0)
            ),
            (Ok(w), Ok(h)) if w > h
        ),
    };
    if apply
        && let Some(fs) = build::agentfs(cx.name, settings, live.as_ref().map(|l| &l.spec.max_size))
    {
        cx.op.apply(Writer::Tenant, &fs).await?;
        return Ok(api
            .get_opt(name)
            .await
            .map_err(|e| StepError::kube(format!("get AgentFS {}/{name}", cx.name), e))?
            .is_none()
            .then(|| format!("AgentFS {}/{name} not yet readable", cx.name)));
    }
    Ok(None)
}

/// Whether two quantity maps say the same (the quota controller writes
/// `8` back as `8`, `16Gi` as `16Gi`; compared by their parsed value).
fn same_quantities(
    want: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    has: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> bool {
    let (Some(want), Some(has)) = (want, has) else {
        return want.is_none_or(BTreeMap::is_empty);
    };
    want.len() == has.len()
        && want.iter().all(|(k, v)| {
            has.get(k).is_some_and(|h| {
                h.0 == v.0
                    || matches!(
                        (crate::quantity::to_bytes(&h.0), crate::quantity::to_bytes(&v.0)),
                        (Ok(a), Ok(b)) if a == b
                    )
            })
        })
}

/// The tenant's Rollout, written by the fleet sync once the steps before
/// this one are done, is Verified for the settings of this saga.
async fn rollout_verified(cx: &StepCx<'_>) -> StepResult {
    let live = match &cx.op.rollouts {
        Some(store) => store.get(
            &kube::runtime::reflector::ObjectRef::<Rollout>::new(ROLLOUT_NAME).within(cx.name),
        ),
        None => cx
            .op
            .api::<Rollout>(cx.name)
            .get_opt(ROLLOUT_NAME)
            .await
            .map_err(|e| StepError::kube(format!("get Rollout {}", cx.name), e))?
            .map(std::sync::Arc::new),
    };
    let Some(r) = live else {
        return Ok(Outcome::Pending(
            "waiting for the fleet sync to write the tenant's Rollout".into(),
        ));
    };
    if r.spec.settings != cx.tenant.spec.settings {
        return Ok(Outcome::Pending(
            "the tenant's Rollout is for older settings; waiting for the fleet sync".into(),
        ));
    }
    Ok(match r.current_status().and_then(|s| s.phase) {
        Some(RolloutPhase::Verified) => Outcome::Done,
        Some(RolloutPhase::Failed) => Outcome::Failed(format!(
            "Rollout {}/{ROLLOUT_NAME} failed: {}",
            cx.name,
            r.current_status()
                .and_then(|s| s.message.clone())
                .unwrap_or_default()
        )),
        Some(p) => Outcome::Pending(format!("Rollout {}/{ROLLOUT_NAME} is {p:?}", cx.name)),
        None => Outcome::Pending(format!(
            "Rollout {}/{ROLLOUT_NAME} has no status for its spec yet",
            cx.name
        )),
    })
}

/// The support lane registered with the control plane, which stores it
/// and acknowledges. Unmanaged there is nobody to register it with: the
/// step waits, saying so, rather than pretending.
fn register_support(cx: &StepCx<'_>) -> Ran {
    let Some(support) = settings(cx.tenant).support else {
        return unregister_support(cx);
    };
    let r = Registration::support(
        cx.name,
        generation(cx),
        Some(&support.lane),
        &support.contacts,
    );
    register(cx, r, format!("lane {}", support.lane)).unwrap_or_else(|| {
        Outcome::Waiting(format!(
            "support lane {:?}: this operator is not connected to a control plane (AUTONOMIC_MANAGED), where support lanes live",
            support.lane
        ))
        .into()
    })
}

/// The lane unregistered (offboarding, or a lane removed from
/// `tenant.yaml`). Unmanaged, none was registered.
fn unregister_support(cx: &StepCx<'_>) -> Ran {
    let r = Registration::support(cx.name, generation(cx), None, &[]);
    register(cx, r, "no lane".into()).unwrap_or_else(|| Outcome::Done.into())
}

/// The tenant withdrawn from the control plane's registry, last of its
/// offboarding. Unmanaged, it was never registered.
fn withdraw(cx: &StepCx<'_>) -> Ran {
    register(cx, tenant_record(cx, false), "withdrawn".into())
        .unwrap_or_else(|| Outcome::Done.into())
}

/// Tells the tenant's Fleet that its rollout gate opened: the sync applies
/// the commit it has again and writes the Rollout the gate held back (it
/// fetches nothing new for this).
pub async fn request_sync(op: &Ctx, t: &Tenant) {
    let labels = t.labels();
    let (Some(fleet), Some(ns)) = (labels.get(LABEL_FLEET), labels.get(LABEL_FLEET_NAMESPACE))
    else {
        return;
    };
    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
    let annotations = serde_json::json!({"annotations": {ANNOTATION_TENANT_GATE_OPENED: stamp}});
    if let Err(e) = op
        .patch_metadata::<crate::crd::Fleet>(Writer::Tenant, ns, fleet, None, annotations)
        .await
    {
        warn!(tenant = %t.name_any(), error = %e, "cannot ask the Fleet to sync");
    }
}

#[cfg(test)]
mod tests {
    use super::offboard::human;
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn a_quota_is_in_force_when_the_controller_reports_the_same_limits() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect::<BTreeMap<_, _>>()
        };
        let want = q(&[("requests.cpu", "8"), ("requests.memory", "16Gi")]);
        assert!(same_quantities(Some(&want), Some(&want)));
        assert!(same_quantities(
            Some(&want),
            Some(&q(&[
                ("requests.cpu", "8"),
                ("requests.memory", "17179869184")
            ]))
        ));
        assert!(!same_quantities(Some(&want), None), "not yet reported");
        assert!(!same_quantities(
            Some(&want),
            Some(&q(&[("requests.cpu", "4"), ("requests.memory", "16Gi")]))
        ));
        assert!(same_quantities(None, None));
        assert_eq!(human(Duration::from_secs(3720)), "1h2m");
        assert_eq!(human(Duration::from_secs(40)), "40s");
    }
}
