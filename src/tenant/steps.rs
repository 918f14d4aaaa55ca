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
use crate::crd::tenant::{Retention, Tenant, TenantStatus};
use crate::crd::{Rollout, RolloutPhase};
use crate::meta::{
    ANNOTATION_OFFBOARD_CONFIRM, ANNOTATION_RETAINED, ANNOTATION_SYNC_REQUESTED, LABEL_FLEET,
    LABEL_FLEET_NAMESPACE, LABEL_TENANT, ROLLOUT_NAME,
};
use crate::saga::Outcome;

/// What a step sees.
pub struct StepCx<'a> {
    pub op: &'a Ctx,
    pub tenant: &'a Tenant,
    pub name: &'a str,
    pub status: &'a TenantStatus,
    pub operator_namespace: &'a str,
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
pub async fn run(cx: &StepCx<'_>, step: TenantStep) -> Outcome {
    let r = match step {
        TenantStep::Enroll => enroll(cx).await,
        TenantStep::Provision => provision(cx).await,
        TenantStep::MintAccess => mint_access(cx).await,
        TenantStep::RolloutVerified => rollout_verified(cx).await,
        TenantStep::RegisterSupport => Ok(register_support(cx)),
        TenantStep::RevokeOldKeys => revoke(cx, &[RETIRING_SECRET]).await,
        TenantStep::Project | TenantStep::UnregisterSupport => Ok(Outcome::Done),
        TenantStep::StopRollout => stop_rollout(cx).await,
        TenantStep::RevokeKeys => revoke(cx, &[ACCESS_SECRET, RETIRING_SECRET]).await,
        TenantStep::Data(retention) => data(cx, retention).await,
        TenantStep::DeleteNamespace => delete_namespace(cx).await,
    };
    r.unwrap_or_else(StepError::outcome)
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
async fn enroll(cx: &StepCx<'_>) -> StepResult {
    let ns = build::namespace(cx.name, &cx.tenant.spec.settings);
    let live = cx.op.apply_cluster(Writer::Tenant, &ns).await?;
    if live.metadata.deletion_timestamp.is_some() {
        return Ok(Outcome::Pending(format!(
            "namespace {} is still being deleted; enrolling again once it is gone",
            cx.name
        )));
    }
    let want = ns.metadata.labels.unwrap_or_default();
    let has = live.labels();
    if let Some((k, v)) = want.iter().find(|(k, v)| has.get(*k) != Some(*v)) {
        return Ok(Outcome::Failed(format!(
            "namespace {}: label {k}={v} did not stick",
            cx.name
        )));
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
        )));
    }
    Ok(Outcome::Done)
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
    Ok(if in_force {
        Outcome::Done
    } else {
        Outcome::Pending(format!(
            "ResourceQuota {}/{} not yet in force",
            cx.name,
            build::TENANT_OBJECT
        ))
    })
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

async fn actuator(cx: &StepCx<'_>) -> Result<Actuator, StepError> {
    let secret = cx
        .op
        .api::<Secret>(cx.operator_namespace)
        .get_opt(ACTUATOR_SECRET)
        .await
        .map_err(|e| {
            StepError::kube(
                format!("get Secret {}/{ACTUATOR_SECRET}", cx.operator_namespace),
                e,
            )
        })?;
    Ok(Actuator::from_secret(
        cx.operator_namespace,
        secret.as_ref().and_then(|s| s.data.as_ref()),
    )?)
}

fn key_server(a: &Actuator) -> Result<Option<(KeyServer, Option<f64>)>, AccessError> {
    match a {
        Actuator::Kubernetes => Ok(None),
        Actuator::Http {
            url,
            token,
            max_budget,
        } => Ok(Some((KeyServer::new(url, token)?, *max_budget))),
    }
}

async fn get_secret(cx: &StepCx<'_>, name: &str) -> Result<Option<Secret>, StepError> {
    cx.op
        .api::<Secret>(cx.name)
        .get_opt(name)
        .await
        .map_err(|e| StepError::kube(format!("get Secret {}/{name}", cx.name), e))
}

/// Model and capability access: the keys for the tenant's current scopes
/// in its access Secret, acknowledged by the actuator. Keys for other
/// scopes are moved to the retiring Secret first (revoked later, once the
/// pods using the new ones are verified).
async fn mint_access(cx: &StepCx<'_>) -> StepResult {
    let scopes = Scopes::of(&cx.tenant.spec.settings);
    let live = get_secret(cx, ACCESS_SECRET).await?;
    let hash = scopes.hash();
    let for_scopes = live
        .as_ref()
        .is_some_and(|s| access::annotation(s, access::ANNOTATION_SCOPES) == Some(hash.as_str()));
    if let Some(old) = live.as_ref().filter(|_| !for_scopes) {
        let retiring = get_secret(cx, RETIRING_SECRET).await?;
        let r = access::retiring_secret(cx.name, old, retiring.as_ref());
        cx.op.apply(Writer::Tenant, &r).await?;
        if scopes.is_empty() {
            cx.op
                .delete::<Secret>(Writer::Tenant, cx.name, ACCESS_SECRET, None)
                .await?;
            return Ok(Outcome::Done);
        }
    }
    if scopes.is_empty() {
        return Ok(Outcome::Done);
    }
    let actuator = actuator(cx).await?;
    let live = match live.filter(|_| for_scopes) {
        Some(s) => s,
        None => {
            // Written before any server hears of the key: a crash from here
            // on finds it and finishes registering this one.
            // With no key server to tell, the Secret is the key store:
            // written minted at once.
            let keys = access::fresh_keys()?;
            let state = match actuator {
                Actuator::Kubernetes => STATE_MINTED,
                Actuator::Http { .. } => STATE_PENDING,
            };
            let secret = access::access_secret(cx.name, &keys, &scopes, actuator.name(), state);
            cx.op.apply(Writer::Tenant, &secret).await?
        }
    };
    let minted_by = access::annotation(&live, access::ANNOTATION_ACTUATOR).unwrap_or_default();
    if access::annotation(&live, access::ANNOTATION_STATE) != Some(STATE_MINTED) {
        if minted_by != actuator.name() {
            return Err(AccessError::OtherActuator {
                secret: format!("{}/{ACCESS_SECRET}", cx.name),
                minted_by: minted_by.to_owned(),
                configured: actuator.name().to_owned(),
            }
            .into());
        }
        if let Some((server, budget)) = key_server(&actuator)? {
            for key in access::model_keys(&live) {
                if !server.exists(&key).await? {
                    server.generate(cx.name, &key, &scopes, budget).await?;
                }
            }
        }
        let patch = serde_json::json!({"metadata": {"annotations": {
            access::ANNOTATION_STATE: STATE_MINTED}}});
        cx.op
            .patch_metadata::<Secret>(
                Writer::Tenant,
                cx.name,
                ACCESS_SECRET,
                live.metadata.resource_version.clone(),
                patch["metadata"].clone(),
            )
            .await?;
    }
    // Postcondition: read back, exactly this tenant's keys for its scopes.
    let Some(back) = get_secret(cx, ACCESS_SECRET).await? else {
        return Ok(Outcome::Pending(format!(
            "Secret {}/{ACCESS_SECRET} not readable yet",
            cx.name
        )));
    };
    Ok(match access::check_access(&back, &scopes) {
        Ok(()) => Outcome::Done,
        Err(why) => Outcome::Pending(why),
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

/// Support lanes live in the control plane, which does not register them
/// yet: the step waits, saying so, rather than pretending.
fn register_support(cx: &StepCx<'_>) -> Outcome {
    let lane = cx
        .tenant
        .spec
        .settings
        .support
        .as_ref()
        .map(|s| s.lane.clone())
        .unwrap_or_default();
    Outcome::Waiting(format!(
        "support lane {lane:?}: no control plane here registers support lanes yet"
    ))
}

/// Revokes every key the Secrets `names` hold at the actuator that
/// minted them, then deletes the Secrets. Done once they are gone.
async fn revoke(cx: &StepCx<'_>, names: &[&str]) -> StepResult {
    for name in names {
        let Some(s) = get_secret(cx, name).await? else {
            continue;
        };
        let minted_by = access::annotation(&s, access::ANNOTATION_ACTUATOR).unwrap_or("kubernetes");
        if minted_by == "http" {
            let actuator = actuator(cx).await?;
            let Some((server, _)) = key_server(&actuator)? else {
                return Err(AccessError::OtherActuator {
                    secret: format!("{}/{name}", cx.name),
                    minted_by: minted_by.to_owned(),
                    configured: actuator.name().to_owned(),
                }
                .into());
            };
            server.delete(&access::model_keys(&s)).await?;
        }
        cx.op
            .delete::<Secret>(Writer::Tenant, cx.name, name, s.metadata.uid.clone())
            .await?;
    }
    for name in names {
        if get_secret(cx, name).await?.is_some() {
            return Ok(Outcome::Pending(format!(
                "Secret {}/{name} is still there",
                cx.name
            )));
        }
    }
    Ok(Outcome::Done)
}

/// Stops the tenant's Rollout: deleted, so nothing re-applies the
/// tenant's workloads (the sync no longer has the tenant).
async fn stop_rollout(cx: &StepCx<'_>) -> StepResult {
    cx.op
        .delete::<Rollout>(Writer::Tenant, cx.name, ROLLOUT_NAME, None)
        .await?;
    let left = cx
        .op
        .api::<Rollout>(cx.name)
        .get_opt(ROLLOUT_NAME)
        .await
        .map_err(|e| StepError::kube(format!("get Rollout {}", cx.name), e))?;
    Ok(match left {
        None => Outcome::Done,
        Some(_) => Outcome::Pending(format!("Rollout {}/{ROLLOUT_NAME} is going", cx.name)),
    })
}

/// `storage.retention`: `retain` keeps every bound volume past the
/// namespace (its PersistentVolume set to `Retain`, labelled with the
/// tenant and annotated with the AgentFS it held, so `exo fs list` shows
/// it Retained); `delete` deletes the claims.
async fn data(cx: &StepCx<'_>, retention: Retention) -> StepResult {
    let claims = cx
        .op
        .api::<PersistentVolumeClaim>(cx.name)
        .list(&ListParams::default())
        .await
        .map_err(|e| StepError::kube(format!("list PersistentVolumeClaims in {}", cx.name), e))?;
    match retention {
        Retention::Delete => {
            for c in &claims.items {
                cx.op
                    .delete::<PersistentVolumeClaim>(Writer::Tenant, cx.name, &c.name_any(), None)
                    .await?;
            }
            Ok(Outcome::Done)
        }
        Retention::Retain => {
            for c in &claims.items {
                let Some(volume) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
                    continue;
                };
                let pv = PersistentVolume {
                    metadata: ObjectMeta {
                        name: Some(volume.clone()),
                        labels: Some(BTreeMap::from([(
                            LABEL_TENANT.to_owned(),
                            cx.name.to_owned(),
                        )])),
                        // The AgentFS it held (`exo fs list` shows it
                        // Retained under the tenant), or the claim.
                        annotations: Some(BTreeMap::from([(
                            ANNOTATION_RETAINED.to_owned(),
                            c.labels()
                                .get(crate::meta::LABEL_AGENTFS)
                                .cloned()
                                .unwrap_or_else(|| c.name_any()),
                        )])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(PersistentVolumeSpec {
                        persistent_volume_reclaim_policy: Some("Retain".to_owned()),
                        ..PersistentVolumeSpec::default()
                    }),
                    ..PersistentVolume::default()
                };
                let back = cx.op.apply_cluster(Writer::Tenant, &pv).await?;
                let policy = back
                    .spec
                    .and_then(|s| s.persistent_volume_reclaim_policy)
                    .unwrap_or_default();
                if policy != "Retain" {
                    return Ok(Outcome::Failed(format!(
                        "PersistentVolume {volume}: reclaim policy is {policy}, not Retain"
                    )));
                }
            }
            Ok(Outcome::Done)
        }
    }
}

/// The namespace goes last, once the grace period is over or the
/// offboarding is confirmed; Done once it is gone.
async fn delete_namespace(cx: &StepCx<'_>) -> StepResult {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let started = cx
        .status
        .offboard_started_at
        .clone()
        .unwrap_or_else(|| now.clone());
    if let Err(left) = namespace_may_go(&settings(cx.tenant), &started, &now, confirmed(cx.tenant))
    {
        return Ok(Outcome::Pending(format!(
            "namespace {} is deleted in {} (offboardGracePeriod), or at once with `exo tenant offboard {} --confirm`; until then, restoring the tenant's folder in git brings it back",
            cx.name,
            human(left),
            cx.name
        )));
    }
    cx.op
        .delete_cluster::<Namespace>(Writer::Tenant, cx.name)
        .await?;
    let left = Api::<Namespace>::all(cx.op.client.clone())
        .get_opt(cx.name)
        .await
        .map_err(|e| StepError::kube(format!("get namespace {}", cx.name), e))?;
    Ok(match left {
        None => Outcome::Done,
        Some(_) => Outcome::Pending(format!("namespace {} is terminating", cx.name)),
    })
}

/// `1h2m`, `5m`, `40s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Asks the tenant's Fleet to sync now (the sync writes the Rollout the
/// gate held back).
pub async fn request_sync(op: &Ctx, t: &Tenant) {
    let labels = t.labels();
    let (Some(fleet), Some(ns)) = (labels.get(LABEL_FLEET), labels.get(LABEL_FLEET_NAMESPACE))
    else {
        return;
    };
    let stamp = k8s_openapi::jiff::Timestamp::now().to_string();
    let annotations = serde_json::json!({"annotations": {ANNOTATION_SYNC_REQUESTED: stamp}});
    if let Err(e) = op
        .patch_metadata::<crate::crd::Fleet>(Writer::Tenant, ns, fleet, None, annotations)
        .await
    {
        warn!(tenant = %t.name_any(), error = %e, "cannot ask the Fleet to sync");
    }
}

#[cfg(test)]
mod tests {
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
