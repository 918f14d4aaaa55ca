//! The shell shared by the `Agent`, `Tool`, `AgentFS` and `App` controllers: the
//! timed wrapper around a reconcile and the one error policy.
//!
//! Guarantees: only the Lease holder reconciles (others wait for a change);
//! each reconcile runs in one span and is counted once under its
//! controller with `ok` or its bounded [`ErrorCategory`] name; a failure
//! requeues after its category's delay and leaves one Warning Event.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use tracing::{Instrument, Span, info_span, warn};

use crate::cluster::apply::Ctx;
use crate::cluster::error::{Error, ErrorCategory, Result};
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller;

/// Runs one controller's reconcile of `obj`, timed and counted under `c`.
pub async fn reconcile<K: Resource>(
    c: Controller,
    obj: &K,
    ctx: &Ctx,
    inner: impl Future<Output = Result<Action>>,
) -> Result<Action> {
    if !ctx.is_leader() {
        return Ok(Action::await_change());
    }
    let start = Instant::now();
    let out = inner.instrument(span(c, obj)).await;
    let result = match &out {
        Ok(_) => "ok",
        Err(e) => e.category().as_str(),
    };
    ctx.metrics.reconciled(c, result, start.elapsed());
    out
}

/// After a failed reconcile: log it, leave a Warning Event (without
/// holding up the controller) and requeue after the category's delay.
pub fn error_policy<K>(c: Controller, obj: Arc<K>, err: &Error, ctx: Arc<Ctx>) -> Action
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    let cat = err.category();
    warn_failed(c, obj.meta().name.as_deref().unwrap_or(""), cat, err);
    let note = format!("reconcile failed ({}): {err}", cat.as_str());
    tokio::spawn(async move {
        ctx.event(
            obj.as_ref(),
            EventType::Warning,
            Reason::ReconcileError,
            note,
        )
        .await;
    });
    Action::requeue(cat.requeue_after())
}

// Field names in tracing are static: one arm per controller keeps each
// controller's own key (`agent = …`) in spans and logs.
fn span<K: Resource>(c: Controller, obj: &K) -> Span {
    let ns = obj.meta().namespace.as_deref();
    let name = obj.meta().name.as_deref();
    match c {
        Controller::Agent => info_span!("reconcile_inner", namespace = ns, agent = name),
        Controller::Tool => info_span!("reconcile_inner", namespace = ns, tool = name),
        Controller::Agentfs => info_span!("reconcile_inner", namespace = ns, agentfs = name),
        Controller::App => info_span!("reconcile_inner", namespace = ns, app = name),
        Controller::Rollout
        | Controller::Tenant
        | Controller::Leader
        | Controller::Incident
        | Controller::Notify => info_span!("reconcile_inner", namespace = ns, name = name),
    }
}

fn warn_failed(c: Controller, name: &str, cat: ErrorCategory, err: &Error) {
    let category = cat.as_str();
    match c {
        Controller::Agent => {
            warn!(agent = %name, category, error = %err, "agent reconcile failed");
        }
        Controller::Tool => warn!(tool = %name, category, error = %err, "tool reconcile failed"),
        Controller::Agentfs => {
            warn!(agentfs = %name, category, error = %err, "agentfs reconcile failed");
        }
        Controller::App => warn!(app = %name, category, error = %err, "app reconcile failed"),
        Controller::Rollout => {
            warn!(name = %name, category, error = %err, "rollout reconcile failed");
        }
        Controller::Tenant => {
            warn!(tenant = %name, category, error = %err, "tenant reconcile failed");
        }
        Controller::Leader => {
            warn!(lease = %name, category, error = %err, "lease round failed");
        }
        Controller::Incident => {
            warn!(incident = %name, category, error = %err, "incident dispatch failed");
        }
        Controller::Notify => {
            warn!(name = %name, category, error = %err, "notification status failed");
        }
    }
}
