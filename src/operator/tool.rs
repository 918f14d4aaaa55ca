//! Tool reconciler: an enabled `Tool` gets an on-demand pod (and a Service
//! when it has a port); a disabled one has no pod and reports `Disabled`.
//! A pod whose template hash differs from the desired one is recreated.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use super::controller;
use super::phase::{PodState, tool_phase};
use super::pod_roll::{self, Roll, Rolled};
use crate::cluster::apply::Ctx;
use crate::cluster::build::{self, Owner, hash_of, tool_service_name};
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::error::{Error, Result};
use crate::cluster::metrics::Controller;
use crate::cluster::pods::PodSet;
use crate::crd::{Tool, ToolPhase, ToolStatus};

const C: Controller = Controller::Tool;

/// Entry point for the controller; see [`controller::reconcile`].
pub async fn reconcile(tool: Arc<Tool>, ctx: Arc<Ctx>) -> Result<Action> {
    controller::reconcile(C, tool.as_ref(), &ctx, reconcile_inner(&tool, &ctx)).await
}

pub fn error_policy(tool: Arc<Tool>, err: &Error, ctx: Arc<Ctx>) -> Action {
    controller::error_policy(C, tool, err, ctx)
}

async fn reconcile_inner(tool: &Tool, ctx: &Ctx) -> Result<Action> {
    if tool.metadata.deletion_timestamp.is_some() {
        // Children go with their owner references.
        return Ok(Action::await_change());
    }
    if !ctx.caches_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let owner = Owner::of(tool)?;
    let ns = owner.namespace.as_str();
    let pods = ctx.owned_pods(ns, &build::tool_labels(&owner.name), &owner.owner_ref.uid);
    let desired = if tool.spec.enabled {
        Some(build::tool_pod(&owner, &tool.spec)?)
    } else {
        None
    };
    let set = PodSet::split(&pods, desired.as_ref());
    let how = Roll {
        removed_because: "the tool is disabled",
        first: tool.status.as_ref().is_none_or(|s| s.pod_name.is_none()),
        restart_failed: false,
    };
    let rolled = pod_roll::roll(ctx, C, tool, ns, &set, desired.as_ref(), how).await?;
    if let (Some(_), Some(port)) = (&desired, tool.spec.port) {
        let svc = build::tool_service(&owner, port)?;
        let live = ctx.service(ns, &tool_service_name(&owner.name));
        if live.as_ref().and_then(|m| hash_of(&m.metadata)) != hash_of(&svc.metadata) {
            ctx.apply(C, &svc).await?;
        }
    }
    let Rolled {
        state,
        shown,
        requeue,
    } = rolled;

    let report = tool_phase(tool.spec.enabled, &state);
    let old = tool.status.clone().unwrap_or_default();
    let generation = tool.metadata.generation;
    let status = ToolStatus {
        phase: Some(report.phase),
        observed_generation: generation,
        conditions: merge(
            &old.conditions,
            &[Cond::new(
                "Ready",
                report.phase == ToolPhase::Ready,
                report.reason,
                report.message.clone(),
            )],
            generation,
            Timestamp::now(),
        ),
        pod_name: if tool.spec.enabled { shown } else { None },
        message: Some(report.message),
    };
    let uid = owner.owner_ref.uid.as_str();
    // Coming up: the first status, or a new generation rolling out.
    let coming_up = tool.spec.enabled
        && report.phase == ToolPhase::Pending
        && matches!(
            state,
            PodState::Missing | PodState::Deleting | PodState::Starting
        )
        && (old.phase.is_none() || old.observed_generation != status.observed_generation);
    let unchanged =
        old.phase == status.phase && old.observed_generation == status.observed_generation;
    let deferred = ctx.holds.wait(
        uid,
        unchanged,
        coming_up,
        &old.conditions,
        &status.conditions,
    );
    if let Some(wait) = deferred {
        return Ok(Action::requeue(requeue.map_or(wait, |r| r.min(wait))));
    }
    if status != old {
        ctx.apply_status::<Tool>(C, ns, &owner.name, &status)
            .await?;
    }
    Ok(match requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}
