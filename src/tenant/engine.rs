//! The tenant engine, run by the leader only: one controller over the
//! cluster-scoped `Tenant` resources the fleet sync writes (one per tenant
//! folder in git; `spec.offboarding` once the folder is gone). For each it
//! decides the saga ([`super::plan::decide`]), runs the next step through
//! its actuator ([`super::steps`]), checks the step's postcondition, and
//! records the outcome in the Tenant's status before the next step starts.
//!
//! Guarantees:
//! - the status is written after every step that changed, stamped with
//!   the spec it is for (`desiredHash`, `observedGeneration`), so a killed
//!   operator resumes at the step it was on and no step recorded Done runs
//!   again;
//! - a step whose actuator is missing is `Waiting` with the reason and is
//!   looked at again, never skipped;
//! - once the steps before `rollout-verified` are done, the Fleet is told
//!   (`autonomic.sh/tenant-gate-opened-at`), and its sync applies the
//!   commit it has again, which writes the tenant's Rollout without
//!   fetching anything newer (the sync holds the Rollout back
//!   until then: [`super::plan::rollout_may_run`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self};
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use tracing::{info, warn};

use super::plan::{self, Decision, StartedFor, TenantStep};
use super::steps::{self, StepCx};
use crate::cluster::apply::Ctx;
use crate::cluster::events::Reason;
use crate::cluster::metrics::Controller as Writer;
use crate::crd::tenant::{Tenant, TenantOperation, TenantStatus};
use crate::saga::{Outcome, Step};
use crate::wire::RecordKind;

#[derive(Debug, Clone)]
pub struct TenantConfig {
    /// How often a step still running is looked at again (at first).
    pub poll: Duration,
    /// How often a waiting step (no actuator) is tried again.
    pub retry: Duration,
    /// Where the key actuator's Secret lives: the operator's namespace.
    pub operator_namespace: String,
    /// Drive only the Tenants of the Fleets in this namespace (label
    /// `autonomic.sh/fleet-namespace`), as the sync follows only those.
    pub fleet_namespace: Option<String>,
    /// The control plane's tenant registry (through the upstream
    /// connection); `None` when the installation is unmanaged.
    pub registrations: Option<crate::upstream::registrations::Registrations>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Tenant {tenant}: cannot write its status: {source}")]
    Status {
        tenant: String,
        #[source]
        source: crate::cluster::error::Error,
    },
}

struct EngineCx {
    op: Arc<Ctx>,
    cfg: TenantConfig,
    /// When each Tenant's status last got a progress-only write.
    progress: crate::saga::ProgressWrites,
}

/// Runs until aborted (the operator aborts it when the Lease is lost).
pub async fn run(op: Arc<Ctx>, cfg: TenantConfig) {
    let api: Api<Tenant> = Api::all(op.client.clone());
    if let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await {
        warn!(error = %e, "tenant engine not started: Tenants cannot be listed (install the tenants.autonomic.sh CRD and its RBAC, then restart the operator)");
        return;
    }
    info!("tenant engine started");
    let (reader, writer) = reflector::store();
    // A new spec (generation) or new annotations (an offboarding confirmed)
    // wake a Tenant; the engine's own status writes do not.
    let mut wc = watcher::Config::default();
    if let Some(ns) = &cfg.fleet_namespace {
        wc = wc.labels(&format!("{}={ns}", crate::meta::LABEL_FLEET_NAMESPACE));
    }
    let tenants = crate::cluster::slim::watch(api, wc)
        .reflect(writer)
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::annotations),
            Default::default(),
        );
    let ctx = Arc::new(EngineCx {
        op,
        cfg,
        progress: crate::saga::ProgressWrites::default(),
    });
    Controller::for_stream(tenants, reader)
        .run(
            reconcile,
            |t, e: &Error, _| {
                warn!(tenant = %t.name_any(), error = %e, "tenant saga step failed");
                Action::requeue(Duration::from_secs(5))
            },
            ctx,
        )
        .for_each(|_| futures::future::ready(()))
        .await;
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

async fn write_status(op: &Ctx, name: &str, status: &TenantStatus) -> Result<(), Error> {
    op.apply_cluster_status::<Tenant>(Writer::Tenant, name, status)
        .await
        .map_err(|source| Error::Status {
            tenant: name.to_owned(),
            source,
        })
}

async fn reconcile(t: Arc<Tenant>, ctx: Arc<EngineCx>) -> Result<Action, Error> {
    let op = &ctx.op;
    let name = t.name_any();
    // The watch may hand over an object older than the last status this
    // process wrote: read the current one before deciding.
    let fresh = Api::<Tenant>::all(op.client.clone())
        .get_opt(&name)
        .await
        .ok()
        .flatten();
    let Some(t) = fresh else {
        return Ok(Action::await_change());
    };
    let spec = &t.spec;
    let hash = plan::settings_hash(spec);
    let mut status = t.status.clone().unwrap_or_default();
    let started = Time(k8s_openapi::jiff::Timestamp::now());
    match plan::decide(spec, t.status.as_ref()) {
        Decision::Idle => return Ok(Action::requeue(Duration::from_secs(600))),
        Decision::Start(operation, steps) => {
            info!(tenant = %name, ?operation, steps = steps.len(), "tenant saga started");
            status = plan::start(
                t.status.as_ref(),
                operation,
                &steps,
                started,
                StartedFor {
                    desired_hash: &hash,
                    commit: spec.commit.as_deref(),
                    generation: t.metadata.generation,
                },
            );
            write_status(op, &name, &status).await?;
        }
        Decision::Run(_) => {}
    }
    // Run steps while they complete; stop at the first that does not.
    let mut gate_open = plan::rollout_may_run(&hash, Some(&status));
    loop {
        let Some(i) = crate::saga::next_step(&status.steps) else {
            return Ok(Action::requeue(Duration::from_secs(600)));
        };
        let Some(step) = TenantStep::parse(&status.steps[i].name) else {
            let outcome = Outcome::Failed(format!(
                "step {} is not a tenant saga step",
                status.steps[i].name
            ));
            plan::record(&mut status, i, &outcome, &now(), spec);
            write_status(op, &name, &status).await?;
            return Ok(Action::requeue(Duration::from_secs(60)));
        };
        let cx = StepCx {
            op,
            tenant: &t,
            name: &name,
            status: &status,
            operator_namespace: &ctx.cfg.operator_namespace,
            registrations: ctx.cfg.registrations.as_ref(),
        };
        let ran = steps::run(&cx, step).await;
        let outcome = ran.outcome;
        let at = now();
        // Kept with the step's Done, in the same status write.
        if let Some((kind, ack)) = ran.ack {
            let acks = status.control_plane.get_or_insert_default();
            match kind {
                RecordKind::Tenant => acks.enrollment = Some(ack),
                RecordKind::Support => acks.support_lane = Some(ack),
            }
        }
        let before = status.steps[i].state;
        let changed = plan::record(&mut status, i, &outcome, &at, spec);
        // A step still running that only has a new progress message is
        // written at most every PROGRESS_WRITE_EVERY: its state is what
        // readers act on.
        let progress_only =
            changed && matches!(outcome, Outcome::Pending(_)) && before == status.steps[i].state;
        if changed && (!progress_only || ctx.progress.due(&name)) {
            write_status(op, &name, &status).await?;
            announce(op, &t, step, &outcome, &status).await;
        }
        if !gate_open && plan::rollout_may_run(&hash, Some(&status)) {
            gate_open = true;
            steps::request_sync(op, &t).await;
        }
        match outcome {
            Outcome::Done => continue,
            Outcome::Pending(_) => {
                let age = status.steps[i]
                    .started_at
                    .as_ref()
                    .and_then(|s| at.0.duration_since(s.0).try_into().ok())
                    .unwrap_or(Duration::ZERO);
                let look = crate::saga::next_look(ctx.cfg.poll, age);
                let look = steps::wake_for(step, &t, &status, &at).map_or(look, |w| w.min(look));
                return Ok(Action::requeue(look));
            }
            Outcome::Waiting(_) => return Ok(Action::requeue(ctx.cfg.retry)),
            Outcome::Failed(_) => return Ok(Action::requeue(Duration::from_secs(30))),
        }
    }
}

/// One Event per step done, per wait, and at the end of a saga.
async fn announce(
    op: &Ctx,
    t: &Tenant,
    step: TenantStep,
    outcome: &Outcome,
    status: &TenantStatus,
) {
    match outcome {
        Outcome::Done => {
            let note = format!("{} done ({})", step.name(), step.owner());
            op.event(t, EventType::Normal, Reason::TenantStepDone, note)
                .await;
            if crate::saga::next_step(&status.steps).is_none() {
                let (reason, note) = match status.operation {
                    Some(TenantOperation::Offboard) => {
                        (Reason::TenantOffboarded, "offboarded".to_owned())
                    }
                    _ => (Reason::TenantActive, "every step done: Active".to_owned()),
                };
                op.event(t, EventType::Normal, reason, note).await;
            }
        }
        Outcome::Waiting(m) => {
            let note = format!("{} waits: {m}", step.name());
            op.event(t, EventType::Warning, Reason::TenantWaiting, note)
                .await;
        }
        Outcome::Pending(_) | Outcome::Failed(_) => {}
    }
}
