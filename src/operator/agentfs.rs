//! AgentFS reconciler: `AgentFS` -> PVC `agentfs-<name>`.
//!
//! Rules (product agentfs document):
//! - resize is grow-only and capped at `maxSize`; a refused size leaves the
//!   PVC untouched and shows in a `Resizable=False` condition and an Event;
//! - delete is held (finalizer) while any Agent in the namespace mounts the
//!   volume; status and an Event name those Agents. Once deletion has
//!   begun, only Agents that had already mounted it hold it (a volume being
//!   deleted gains no new users, see `fs::holders`);
//! - Agents are read from the operator's Agent cache, never listed;
//! - `retain: true`: the PVC's owner reference is removed before the
//!   finalizer is released, so it outlives the AgentFS with its data;
//! - status shows requested vs provisioned capacity, the PVC and mountedBy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::info;

use super::controller;
use crate::cluster::apply::Ctx;
use crate::cluster::build::{self, Owner, pvc_name};
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::error::{Error, Result};
use crate::cluster::events::Reason;
use crate::cluster::fs::{SizeRefusal, capacities, holders, mounted_by, phase, plan_size};
use crate::cluster::metrics::Controller;

use crate::crd::{AgentFS, AgentFSPhase, AgentFSStatus};
use crate::meta::{ANNOTATION_RETAINED, FINALIZER_AGENTFS};

const C: Controller = Controller::Agentfs;

/// Entry point for the controller; see [`controller::reconcile`].
pub async fn reconcile(fs: Arc<AgentFS>, ctx: Arc<Ctx>) -> Result<Action> {
    controller::reconcile(C, fs.as_ref(), &ctx, reconcile_inner(&fs, &ctx)).await
}

pub fn error_policy(fs: Arc<AgentFS>, err: &Error, ctx: Arc<Ctx>) -> Action {
    controller::error_policy(C, fs, err, ctx)
}

async fn reconcile_inner(fs: &AgentFS, ctx: &Ctx) -> Result<Action> {
    // `mountedBy` and the delete hold come from the Agent cache: an empty
    // cache would release a volume that is in use.
    if !ctx.caches_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let owner = Owner::of(fs)?;
    let ns = owner.namespace.as_str();
    let pvc_name = pvc_name(&owner.name);
    let pvcs: Api<PersistentVolumeClaim> = ctx.api(ns);
    let pvc = pvcs
        .get_opt(&pvc_name)
        .await
        .map_err(|e| Error::kube("get PVC", e))?;
    let agents = ctx.agents.state();
    let agents = agents
        .iter()
        .map(|a| a.as_ref())
        .filter(|a| a.metadata.namespace.as_deref() == Some(ns));
    // Being deleted, only Agents that had it mounted hold it: newcomers
    // are refused the mount by the Agent reconciler.
    let mounted = if fs.metadata.deletion_timestamp.is_some() {
        holders(agents, &owner.name)
    } else {
        mounted_by(agents, &owner.name)
    };
    let finalizers = fs.metadata.finalizers.clone().unwrap_or_default();
    // Compared without `backup`: the backup task writes it and this apply
    // never lists it (a volume with backups would otherwise have its status
    // applied again on every reconcile).
    let old = AgentFSStatus {
        backup: None,
        ..fs.status.clone().unwrap_or_default()
    };
    let generation = fs.metadata.generation;
    let (requested, provisioned) = pvc.as_ref().map(capacities).unwrap_or_default();

    if fs.metadata.deletion_timestamp.is_some() {
        if !finalizers.iter().any(|f| f == FINALIZER_AGENTFS) {
            return Ok(Action::await_change());
        }
        if !mounted.is_empty() {
            let message = format!(
                "delete refused: AgentFS {} is mounted by agent(s) {}; detach it from each agent first",
                owner.name,
                mounted.join(", ")
            );
            let status = AgentFSStatus {
                phase: Some(AgentFSPhase::Terminating),
                observed_generation: generation,
                conditions: merge(
                    &old.conditions,
                    &[
                        Cond::new("Ready", false, "DeleteRefused", message.clone()),
                        Cond::new("DeleteBlocked", true, "DeleteRefused", message.clone()),
                    ],
                    generation,
                    Timestamp::now(),
                ),
                requested: requested.map(Quantity),
                provisioned: provisioned.map(Quantity),
                pvc_name: pvc.as_ref().map(|_| pvc_name.clone()),
                mounted_by: mounted,
                // Left out of this apply: the backup task merges it.
                backup: None,
            };
            if status != old {
                ctx.apply_status::<AgentFS>(C, ns, &owner.name, &status)
                    .await?;
                ctx.event(fs, EventType::Warning, Reason::DeleteRefused, message)
                    .await;
            }
            // An Agent detaching triggers the next reconcile (Agents are watched).
            return Ok(Action::await_change());
        }
        if let Some(p) = &pvc {
            if fs.spec.retain {
                release_pvc(ctx, fs, p).await?;
            } else {
                ctx.delete::<PersistentVolumeClaim>(C, ns, &pvc_name, p.metadata.uid.clone())
                    .await?;
            }
        }
        ctx.set_finalizer(C, fs, FINALIZER_AGENTFS, false).await?;
        return Ok(Action::await_change());
    }

    ctx.set_finalizer(C, fs, FINALIZER_AGENTFS, true).await?;

    let plan = plan_size(&fs.spec.size.0, &fs.spec.max_size.0, requested.as_deref());
    let mut pvc_now = pvc.clone();
    let adopt = pvc.as_ref().is_some_and(|p| !owned_by(p, fs));
    if plan.refusal.is_none()
        && (pvc.is_none() || requested.as_deref() != Some(plan.size.as_str()) || adopt)
    {
        let desired = build::agentfs_pvc(&owner, fs, &plan.size);
        let applied = ctx.apply(C, &desired).await?;
        if pvc.is_none() {
            ctx.event(
                fs,
                EventType::Normal,
                Reason::VolumeCreated,
                format!("created PVC {pvc_name} ({})", plan.size),
            )
            .await;
            info!(pvc = %pvc_name, size = %plan.size, "PVC created");
        } else if requested.as_deref() != Some(plan.size.as_str()) {
            ctx.event(
                fs,
                EventType::Normal,
                Reason::VolumeResized,
                format!(
                    "PVC {pvc_name} grows from {} to {}",
                    requested.as_deref().unwrap_or("?"),
                    plan.size
                ),
            )
            .await;
            info!(pvc = %pvc_name, size = %plan.size, "PVC resized");
        }
        pvc_now = Some(applied);
    }

    let (requested, provisioned) = pvc_now.as_ref().map(capacities).unwrap_or_default();
    let failed = plan.refusal.is_some() && pvc_now.is_none();
    let phase = phase(pvc_now.as_ref(), false, failed);
    let resizable = match &plan.refusal {
        None => Cond::new(
            "Resizable",
            true,
            "SizeAccepted",
            format!("spec.size {} is applied", fs.spec.size.0),
        ),
        Some(r) => Cond::new("Resizable", false, r.reason(), r.message()),
    };
    let ready_msg = match phase {
        AgentFSPhase::Bound => format!("PVC {pvc_name} is bound"),
        AgentFSPhase::Resizing => format!(
            "PVC {pvc_name} is expanding from {} to {}",
            provisioned.as_deref().unwrap_or("?"),
            requested.as_deref().unwrap_or("?")
        ),
        AgentFSPhase::Error => plan
            .refusal
            .as_ref()
            .map(SizeRefusal::message)
            .unwrap_or_default(),
        _ => format!("PVC {pvc_name} is not bound yet"),
    };
    let ready_reason = match phase {
        AgentFSPhase::Bound => "Bound",
        AgentFSPhase::Resizing => "Resizing",
        AgentFSPhase::Error => "VolumeRefused",
        _ => "Pending",
    };
    let status = AgentFSStatus {
        phase: Some(phase),
        observed_generation: generation,
        conditions: merge(
            &old.conditions,
            &[
                Cond::new(
                    "Ready",
                    matches!(phase, AgentFSPhase::Bound | AgentFSPhase::Resizing),
                    ready_reason,
                    ready_msg,
                ),
                resizable,
            ],
            generation,
            Timestamp::now(),
        ),
        requested: requested.map(Quantity),
        provisioned: provisioned.map(Quantity),
        pvc_name: pvc_now.as_ref().map(|_| pvc_name.clone()),
        mounted_by: mounted,
        // Left out of this apply: the backup task merges it.
        backup: None,
    };
    if status != old {
        ctx.apply_status::<AgentFS>(C, ns, &owner.name, &status)
            .await?;
        let refusal_changed = old
            .conditions
            .iter()
            .find(|c| c.type_ == "Resizable")
            .map(|c| (c.status.as_str(), c.reason.as_str()))
            != status
                .conditions
                .iter()
                .find(|c| c.type_ == "Resizable")
                .map(|c| (c.status.as_str(), c.reason.as_str()));
        if let Some(r) = &plan.refusal
            && refusal_changed
        {
            let reason = match r {
                SizeRefusal::Shrink { .. } => Reason::ShrinkRefused,
                _ => Reason::AboveMaxSize,
            };
            ctx.event(fs, EventType::Warning, reason, r.message()).await;
        }
    }
    Ok(match phase {
        // The PVC watch brings the end of the expansion; this is a backstop.
        AgentFSPhase::Resizing | AgentFSPhase::Pending => Action::requeue(Duration::from_secs(5)),
        _ => Action::await_change(),
    })
}

fn owned_by(pvc: &PersistentVolumeClaim, fs: &AgentFS) -> bool {
    let uid = fs.metadata.uid.as_deref();
    pvc.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| Some(r.uid.as_str()) == uid)
}

/// `retain: true`: drop this AgentFS's owner reference from the PVC (so the
/// garbage collector leaves it) and mark where it came from.
async fn release_pvc(ctx: &Ctx, fs: &AgentFS, pvc: &PersistentVolumeClaim) -> Result<()> {
    let uid = fs.metadata.uid.as_deref();
    let refs: Vec<_> = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| Some(r.uid.as_str()) != uid)
        .cloned()
        .collect();
    let name = pvc
        .metadata
        .name
        .clone()
        .ok_or(Error::MissingField("metadata.name"))?;
    let ns = pvc
        .metadata
        .namespace
        .clone()
        .ok_or(Error::MissingField("metadata.namespace"))?;
    let from = fs.metadata.name.clone().unwrap_or_default();
    let annotations = BTreeMap::from([(ANNOTATION_RETAINED.to_owned(), from)]);
    ctx.patch_metadata::<PersistentVolumeClaim>(
        C,
        &ns,
        &name,
        pvc.metadata.resource_version.clone(),
        serde_json::json!({ "ownerReferences": refs, "annotations": annotations }),
    )
    .await?;
    ctx.event(
        fs,
        EventType::Normal,
        Reason::VolumeRetained,
        format!("retain is set: PVC {name} is kept with its data after the AgentFS is deleted"),
    )
    .await;
    Ok(())
}
