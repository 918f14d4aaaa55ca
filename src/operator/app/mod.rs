//! App reconciler: `App` -> PVC `app-workspace-<name>`, PVC
//! `app-database-<name>` (with `database`), and one pod running the app
//! image with a Postgres sidecar (with `database`).
//!
//! Pipeline: observe (the PVCs by name, the pods from the cache), `plan`
//! (pure: sizes, the PVCs to write, the pod), apply (through the one
//! fenced write path of `cluster::apply`), status (pure, written only when
//! it changed).
//!
//! Rules (product agentfs document, "App storage"):
//! - sizes are grow-only and capped at `maxSize`, as an AgentFS's; a
//!   refused size leaves the PVC untouched and shows in `Resizable=False`
//!   and an Event (the admission policy refuses a shrink before it gets
//!   here; this is the backstop);
//! - the pod is owned by the App; the PVCs are too, unless `retain`, so
//!   deleting the App removes them through the garbage collector, and a
//!   retained PVC (no owner, annotated with the App's name) outlives it;
//! - nothing happens at deletion: no finalizer is needed.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::info;

use super::controller;
use super::pod_roll::{self, Roll};
use crate::cluster::apply::Ctx;
use crate::cluster::build::Owner;
use crate::cluster::build::app::{app_labels, app_pvc_name};
use crate::cluster::error::{Error, Result};
use crate::cluster::events::Reason;
use crate::cluster::fs::{SizeRefusal, capacities};
use crate::cluster::metrics::Controller;
use crate::cluster::pods::PodSet;
use crate::crd::{App, AppPhase, AppStatus};

pub mod plan;

const C: Controller = Controller::App;

/// Entry point for the controller; see [`controller::reconcile`].
pub async fn reconcile(app: Arc<App>, ctx: Arc<Ctx>) -> Result<Action> {
    controller::reconcile(C, app.as_ref(), &ctx, reconcile_inner(&app, &ctx)).await
}

pub fn error_policy(app: Arc<App>, err: &Error, ctx: Arc<Ctx>) -> Action {
    controller::error_policy(C, app, err, ctx)
}

async fn reconcile_inner(app: &App, ctx: &Ctx) -> Result<Action> {
    if app.metadata.deletion_timestamp.is_some() {
        // Owned children go with their owner references; retained PVCs
        // have none and stay.
        return Ok(Action::await_change());
    }
    if !ctx.caches_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let owner = Owner::of(app)?;
    let ns = owner.namespace.as_str();
    let pvcs: Api<PersistentVolumeClaim> = ctx.api(ns);

    // Volumes first: the pod mounts them (apply order).
    let mut outcomes = Vec::new();
    for (kind, vol) in app.spec.volumes() {
        let name = app_pvc_name(&owner.name, kind);
        let live = pvcs
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(format!("get PVC {ns}/{name}"), e))?;
        let p = plan::volume(&owner, kind, &vol, app.spec.retain, live.as_ref())?;
        let before = live.as_ref().and_then(|l| capacities(l).0);
        let pvc = match &p.write {
            Some(desired) => {
                let applied = ctx.apply(C, desired).await?;
                announce(ctx, app, &p.pvc_name, before.as_deref(), &p.size).await;
                Some(applied)
            }
            None => live,
        };
        outcomes.push(plan::Outcome {
            kind,
            pvc_name: p.pvc_name,
            refusal: p.refusal,
            pvc,
        });
    }

    let desired = plan::pod(&owner, &app.spec, &outcomes)?;
    let pods = ctx.owned_pods(ns, &app_labels(&owner.name), &owner.owner_ref.uid);
    let set = PodSet::split(&pods, desired.as_ref());
    let how = Roll {
        removed_because: "a volume of the app was refused",
        first: app.status.as_ref().is_none_or(|s| s.pod_name.is_none()),
        restart_failed: true,
    };
    let rolled = pod_roll::roll(ctx, C, app, ns, &set, desired.as_ref(), how).await?;

    // Compared without `backup`: the backup task writes it, this apply
    // never lists it (so an App with backups is not rewritten each time).
    let old = AppStatus {
        backup: None,
        ..app.status.clone().unwrap_or_default()
    };
    let status = plan::status(
        app,
        &outcomes,
        &rolled.state,
        rolled.shown.clone(),
        Timestamp::now(),
    );
    if status != old {
        ctx.apply_status::<App>(C, ns, &owner.name, &status).await?;
        refusal_event(ctx, app, &old, &status, &outcomes).await;
    }
    // Pending (a bind, a pod starting) or an expansion in flight; an
    // Error waits for a change of the App or its pod.
    let settling = status.phase == Some(AppPhase::Pending)
        || [&status.workspace, &status.database]
            .into_iter()
            .flatten()
            .any(|v| v.requested != v.provisioned);
    Ok(match rolled.requeue {
        Some(d) => Action::requeue(d),
        // The PVC and pod watches bring the end of a bind or an
        // expansion; this is a backstop.
        None if settling => Action::requeue(Duration::from_secs(5)),
        None => Action::await_change(),
    })
}

/// One Event per PVC written: made, or grown.
async fn announce(ctx: &Ctx, app: &App, pvc: &str, before: Option<&str>, size: &str) {
    match before {
        None => {
            ctx.event(
                app,
                EventType::Normal,
                Reason::VolumeCreated,
                format!("created PVC {pvc} ({size})"),
            )
            .await;
            info!(%pvc, %size, "app PVC created");
        }
        Some(b) if b != size => {
            ctx.event(
                app,
                EventType::Normal,
                Reason::VolumeResized,
                format!("PVC {pvc} grows from {b} to {size}"),
            )
            .await;
            info!(%pvc, %size, "app PVC resized");
        }
        // Ownership or the retained mark changed; the size did not.
        Some(_) => {}
    }
}

/// A Warning Event when a refusal is new (not on every reconcile).
async fn refusal_event(
    ctx: &Ctx,
    app: &App,
    old: &AppStatus,
    new: &AppStatus,
    outcomes: &[plan::Outcome],
) {
    let resizable = |s: &AppStatus| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "Resizable")
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };
    if resizable(old) == resizable(new) {
        return;
    }
    if let Some((r, message)) = plan::first_refusal(outcomes) {
        let reason = match r {
            SizeRefusal::Shrink { .. } => Reason::ShrinkRefused,
            _ => Reason::AboveMaxSize,
        };
        ctx.event(app, EventType::Warning, reason, message).await;
    }
}
