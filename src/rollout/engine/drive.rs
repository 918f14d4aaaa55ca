//! Driving each tenant's saga, and keeping a verified tenant equal to git.
//!
//! A Rollout whose status is for another `desiredHash` starts a fresh
//! saga; one in progress runs its next step; a verified one gets, at each
//! Fleet interval, the drift check and the prune retry, and, when due, the
//! live re-check. A drift revert or a healed pod runs the saga again for
//! the same spec, so `Verified` always means verified after the last change.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::{Instrument, info, warn};

use super::notices::{self, Subject};
use super::waits::{DoneSteps, Waits, run_id, wait_id, wait_is_durable};
use super::{EngineConfig, Error, Loaded, State, namespace_of, now};
use crate::cluster::apply::Ctx;
use crate::cluster::feeds::Touch;
use crate::cluster::metrics::Controller as Writer;
use crate::crd::{Inventory, Rollout, RolloutPhase, RolloutStatus, StepState};
use crate::rollout::actuate::execute;
use crate::rollout::desired::TenantTarget;
use crate::rollout::inventory::{self, Inventories};
use crate::rollout::saga::{self, Outcome, StartedFor, Step, StepKind, Workload};
use crate::rollout::signed::{self, SignatureChecks};
use crate::rollout::workload::StepCtx;
use crate::rollout::{changed, drift, prune, reverify};

pub(super) struct DriveCtx {
    pub op: Arc<Ctx>,
    pub cfg: EngineConfig,
    pub state: Arc<State>,
    /// When each Rollout's status last got a progress-only write.
    progress: crate::saga::ProgressWrites,
    /// Per Rollout, the wait it is in that its status does not show yet.
    waits: Waits,
    /// Per Rollout, the steps this term did that its status does not show
    /// yet: a pass that waits does not run them again.
    done: DoneSteps,
    /// This term's copies of the tenants' Inventories.
    inventories: Inventories,
    /// This term's image signature checks, shared by every tenant.
    signatures: SignatureChecks,
}

/// The Rollout controller of one leadership term, over the operator's one
/// Rollout watch (`cluster::feeds`): `rollouts` is its cache (the sync
/// compares Rollout specs with it too) and the Rollout hub wakes it for
/// each changed Rollout. Every Rollout is reconciled when the term starts
/// (the hub is subscribed first, so no change falls in between) and again
/// after each relist of the watch, as a controller with a watch of its own
/// would.
pub(super) fn controller(op: &Ctx, rollouts: Store<Rollout>) -> Controller<Rollout> {
    let hub = &op.hubs.rollouts;
    let changed = hub.touches().filter_map(|t| {
        futures::future::ready(match t {
            Touch::Applied(r) => Some(r),
            // Nothing is left to drive; the sync re-creates it from git.
            Touch::Deleted(_) | Touch::Relisted => None,
        })
    });
    let relisted = hub
        .touches()
        .filter_map(|t| futures::future::ready(matches!(t, Touch::Relisted).then_some(())));
    let waiting = super::wake::waits_woken(op, rollouts.clone());
    Controller::for_stream(futures::stream::pending(), rollouts)
        .reconcile_on(changed)
        .reconcile_on(waiting)
        .reconcile_all_on(futures::stream::once(futures::future::ready(())).chain(relisted))
}

pub(super) async fn run(
    controller: Controller<Rollout>,
    op: Arc<Ctx>,
    cfg: EngineConfig,
    state: Arc<State>,
) {
    let signatures = SignatureChecks::new(cfg.registry_credentials.clone());
    let ctx = Arc::new(DriveCtx {
        op,
        cfg,
        state,
        progress: crate::saga::ProgressWrites::default(),
        waits: Waits::default(),
        done: DoneSteps::default(),
        inventories: Inventories::default(),
        signatures,
    });
    controller
        .run(
            reconcile,
            |_, e: &Error, _| {
                warn!(error = %e, "rollout reconcile failed");
                Action::requeue(Duration::from_secs(2))
            },
            ctx,
        )
        .for_each_concurrent(16, |_| async {})
        .await;
}

async fn write_status(op: &Ctx, ro: &Rollout, status: &RolloutStatus) -> Result<(), Error> {
    let ns = namespace_of(ro)?;
    op.apply_status::<Rollout>(Writer::Rollout, &ns, &ro.name_any(), status)
        .await?;
    Ok(())
}

/// [`write_status`] for a run in progress: this term's done steps are
/// shown by it from now on.
async fn write_run_status(
    ctx: &DriveCtx,
    key: &str,
    ro: &Rollout,
    status: &RolloutStatus,
) -> Result<(), Error> {
    write_status(&ctx.op, ro, status).await?;
    ctx.done.written(key);
    Ok(())
}

async fn reconcile(cached: Arc<Rollout>, ctx: Arc<DriveCtx>) -> Result<Action, Error> {
    let ns = namespace_of(cached.as_ref())?;
    // Read the saga state from the apiserver, not the watch cache: a cached
    // copy can lag our own last status write, and acting on it would run a
    // completed step again.
    let ro = match ctx.op.api::<Rollout>(&ns).get_opt(&cached.name_any()).await {
        Ok(Some(r)) => r,
        Ok(None) => return Ok(Action::await_change()),
        Err(e) => return Err(Error::Read(e)),
    };
    let Some((loaded, target)) = ctx.state.tenant(&ro.spec.tenant).await else {
        // Not synced yet since this leader started: look again soon. Once
        // a sync has loaded, a tenant no fleet holds (removed from git, or
        // another engine's) is looked at rarely; the Fleet's next sync
        // touches its Rollout if git brings it back.
        let synced = !ctx.state.loaded.read().await.is_empty();
        let again = if synced { 60 } else { 2 };
        return Ok(Action::requeue(Duration::from_secs(again)));
    };
    if target.desired.hash != ro.spec.desired_hash {
        // The spec is from another commit than this leader's last sync:
        // the sync writes the new spec (or a refused commit keeps it).
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let kinds = saga::steps(&target.desired.workloads, &target.release);
    let mut status = ro.status.clone().unwrap_or_default();
    // The inventory: this term's copy, or its own object (carried over
    // from the status where an older operator kept it, before any status
    // without it is written).
    let mut inventory = ctx.inventories.load(&ctx.op, &ro).await?;
    let carried = !status.inventory.is_empty();
    status.inventory.clear();
    let unknown_step = status
        .steps
        .iter()
        .any(|s| StepKind::parse(&s.name).is_none());
    if status.desired_hash.as_deref() != Some(ro.spec.desired_hash.as_str())
        || status.steps.is_empty()
        || unknown_step
    {
        // What this run changes, from the caches, stored with the run's
        // first write before any step acts.
        let set = changed::compute(
            &target.desired.workloads,
            |w| holds_desired(&ctx.op, &ns, w),
            ro.status.as_ref(),
        );
        let scope = changed::describe(Some(&set), target.desired.workloads.len());
        info!(tenant = %ro.spec.tenant, wave = %ro.spec.wave, release = %target.release.metadata.name, %scope, "saga started");
        // What git wants joins the inventory before anything is applied
        // (written only when something joins).
        let entries = inventory::with_desired(&inventory.spec.entries, &target.desired.keys());
        inventory = ctx.inventories.store(&ctx.op, &inventory, entries).await?;
        status = saga::start(
            ro.status.as_ref(),
            &target.release.metadata.name,
            &kinds,
            now(),
            StartedFor {
                desired_hash: &ro.spec.desired_hash,
                commit: &ro.spec.commit,
                generation: ro.metadata.generation,
            },
            set,
        );
        write_status(&ctx.op, &ro, &status).await?;
        ctx.cfg
            .notifier
            .commit_status(notices::started(Subject::of(&ro, &target)));
    } else if status.observed_generation != ro.metadata.generation || carried {
        // Same desired state, a new generation (the wave moved, say): the
        // saga's result still holds for it. (Or the same status without
        // the inventory just carried over.)
        status.observed_generation = ro.metadata.generation;
        write_status(&ctx.op, &ro, &status).await?;
    }
    if loaded.policy.suspend {
        return Ok(Action::requeue(loaded.policy.interval));
    }
    match status.phase {
        Some(RolloutPhase::Verified) => {
            return maintain(&ctx, &ro, status, inventory, &loaded, &target, &kinds).await;
        }
        // A saga failed on its release's signatures looks again (see
        // `rollout::signed`); any other failure waits for a new spec.
        Some(RolloutPhase::Failed)
            if status.current_step.as_deref() != Some(saga::STEP_SIGNATURES) =>
        {
            return Ok(Action::await_change());
        }
        _ => {}
    }
    run_steps(&ctx, &ro, status, inventory, &loaded, &target).await
}

/// A prune pass (`prune::run`) whose inventory entries, when they
/// changed, are written before the caller writes the status.
async fn prune_pass(
    ctx: &DriveCtx,
    ro: &Rollout,
    inventory: &mut Arc<Inventory>,
    status: &mut RolloutStatus,
    target: &TenantTarget,
    prune_enabled: bool,
) -> Result<prune::Pass, Error> {
    let mut entries = inventory.spec.entries.clone();
    let pass = prune::run(
        &ctx.op,
        ro,
        &mut entries,
        status,
        &target.desired,
        prune_enabled,
    )
    .await;
    if pass.inventory_changed {
        *inventory = ctx.inventories.store(&ctx.op, inventory, entries).await?;
    }
    Ok(pass)
}

async fn run_steps(
    ctx: &DriveCtx,
    ro: &Rollout,
    mut status: RolloutStatus,
    mut inventory: Arc<Inventory>,
    loaded: &Loaded,
    target: &TenantTarget,
) -> Result<Action, Error> {
    let ns = namespace_of(ro)?;
    // The steps that act per workload act on the run's changed set only.
    let workloads: Cow<'_, [Workload]> = if changed::is_full(status.changed.as_ref()) {
        Cow::Borrowed(&target.desired.workloads)
    } else {
        Cow::Owned(changed::select(
            status.changed.as_ref(),
            &target.desired.workloads,
        ))
    };
    // Steps done in one pass are written together (see `durable_now`).
    let mut unwritten = false;
    let key = format!("{ns}/{}", ro.name_any());
    let run = run_id(&status);
    while let Some(i) = saga::next_step(&status) {
        if let Some(at) = ctx.done.done_at(&key, &run, &status.steps[i].name) {
            // Done by an earlier pass of this term, not written yet.
            unwritten |= saga::record(&mut status, i, &Outcome::Done, &at);
            continue;
        }
        // A wait not written yet began when it was first seen.
        let wait_id = wait_id(&status, &status.steps[i].name);
        let started = status.steps[i]
            .started_at
            .clone()
            .or_else(|| ctx.waits.since(&key, &wait_id))
            .map(|t| t.0.as_second());
        let step_age = started
            .map(|s| Duration::from_secs(u64::try_from(now().0.as_second() - s).unwrap_or(0)))
            .unwrap_or_default();
        let Some(kind) = StepKind::parse(&status.steps[i].name) else {
            break;
        };
        let span = tracing::info_span!("saga_step", tenant = %ro.spec.tenant, step = %kind.name());
        // Instrument, never enter, across an await: an entered span would
        // leak onto whatever else runs on this thread.
        let mut pruned = Vec::new();
        let outcome = if kind == StepKind::Prune {
            // Removals never hold the saga: what they wait for shows on
            // the `Pruned` condition, and a verified tenant retries them.
            pruned = prune_pass(
                ctx,
                ro,
                &mut inventory,
                &mut status,
                target,
                loaded.policy.prune,
            )
            .instrument(span)
            .await?
            .pruned;
            Outcome::Done
        } else if kind == StepKind::VerifySignatures {
            let (outcome, verified) = ctx.signatures.check(&target.release).instrument(span).await;
            if status.signatures != verified {
                status.signatures = verified;
                unwritten = true;
            }
            outcome
        } else {
            let step_ctx = StepCtx {
                op: &ctx.op,
                namespace: &ns,
                release: &target.release,
                fleet: &loaded.fleet,
                workloads: &workloads,
                policies: &target.desired.policies,
                baselines: &target.desired.baselines,
                step_age,
                verify_grace: ctx.cfg.verify_grace,
            };
            execute(&kind, &step_ctx).instrument(span).await
        };
        let was_running = status.steps[i].state == StepState::Running;
        let mut changed = saga::record(&mut status, i, &outcome, &now());
        if status.phase == Some(RolloutPhase::Verified) {
            // Verified after a heal: the drift it healed is over.
            changed |= reverify::clear_healed(&mut status, ro.metadata.generation);
        }
        let progress_only = !unwritten && was_running && matches!(outcome, Outcome::Pending(_));
        unwritten |= changed;
        let mut write = unwritten
            && durable_now(&kind, &outcome, &pruned, &status)
            && (!progress_only || ctx.progress.due(&key));
        if write && !was_running && matches!(outcome, Outcome::Pending(_)) {
            // A new wait: written once it has lasted, from when it began.
            let (since, waited) = ctx.waits.seen(&key, &wait_id);
            status.steps[i].started_at = Some(since);
            write = wait_is_durable(waited);
        }
        if write {
            write_run_status(ctx, &key, ro, &status).await?;
            unwritten = false;
        } else if matches!(outcome, Outcome::Done) {
            let at = status.steps[i].finished_at.clone().unwrap_or_else(now);
            ctx.done.remember(&key, &run, &status.steps[i].name, at);
        }
        // Once the inventory and the status without them are written (a
        // Done step always is).
        prune::announce(&ctx.op, ro, &pruned).await;
        match outcome {
            Outcome::Done => {
                info!(tenant = %ro.spec.tenant, step = %kind.name(), "step done");
                continue;
            }
            Outcome::Pending(_) => {
                return Ok(Action::requeue(saga::next_look(ctx.cfg.poll, step_age)));
            }
            Outcome::Waiting(m) => {
                warn!(tenant = %ro.spec.tenant, step = %kind.name(), reason = %m, "saga waiting");
                return Ok(Action::requeue(Duration::from_secs(5)));
            }
            Outcome::Failed(m) => {
                if changed {
                    warn!(tenant = %ro.spec.tenant, step = %kind.name(), reason = %m, "saga failed");
                    let failed = notices::failed(Subject::of(ro, target), &kind.name(), &m);
                    ctx.cfg.notifier.commit_status(failed);
                }
                if kind == StepKind::VerifySignatures {
                    // Signing the image is the fix: look again.
                    return Ok(Action::requeue(signed::RETRY));
                }
                return Ok(Action::await_change());
            }
        }
    }
    if unwritten {
        write_run_status(ctx, &key, ro, &status).await?;
    }
    info!(tenant = %ro.spec.tenant, release = %target.release.metadata.name, "tenant verified");
    // Once the status says so. Where the wave has an analysis, it tells
    // the commit's success or failure when it ends.
    let analysed = target
        .release
        .spec
        .wave(target.wave)
        .is_some_and(|w| !w.analysis.is_empty());
    let (event, success) = notices::verified(Subject::of(ro, target), analysed);
    ctx.cfg.notifier.emit(event);
    ctx.cfg.notifier.commit_status(success);
    Ok(Action::requeue(
        loaded.policy.interval.min(Duration::from_secs(60)),
    ))
}

/// Whether the status must be written now, after `kind` ended with
/// `outcome`: when the saga stops to wait (or fails), when the step removed
/// objects (their Events follow the written inventory), when the images'
/// signatures verified, and when the saga is over. Steps done in between are written with the next of these:
/// every step is idempotent (server-side apply of the same body, create
/// if absent, deletes preconditioned on the uid, checks), so a crash
/// before that write repeats only what changes nothing. Pure.
fn durable_now(
    kind: &StepKind,
    outcome: &Outcome,
    pruned: &[crate::crd::InventoryEntry],
    status: &RolloutStatus,
) -> bool {
    match outcome {
        // The signatures' record is in the status alone: a later pass that
        // finds the step done by this term (`DoneSteps`) does not check again.
        Outcome::Done => {
            (*kind == StepKind::Prune && !pruned.is_empty())
                || *kind == StepKind::VerifySignatures
                || saga::next_step(status).is_none()
        }
        Outcome::Pending(_) | Outcome::Waiting(_) | Outcome::Failed(_) => true,
    }
}

/// A verified tenant between changes: put back drift, retry blocked
/// prunes, and re-check live content when due. Writes only what changed.
async fn maintain(
    ctx: &DriveCtx,
    ro: &Rollout,
    mut status: RolloutStatus,
    mut inventory: Arc<Inventory>,
    loaded: &Loaded,
    target: &TenantTarget,
    kinds: &[StepKind],
) -> Result<Action, Error> {
    let ns = namespace_of(ro)?;
    let interval = loaded.policy.interval;
    // Drift: from the caches; acted on only after a fresh read confirms it.
    let reverted = drift::revert(&ctx.op, &ns, &target.desired, &loaded.fleet).await;
    if let Some(last) = reverted.record {
        let event = notices::drift_reverted(Subject::of(ro, target), &last);
        ctx.cfg.notifier.emit(event);
        status.last_drift = Some(last);
    }
    if let Some(why) = reverted.rerun {
        // The reverted workloads roll: verify them again before `Verified`
        // is true again.
        let restarted = saga::restart(&status, kinds, now(), why);
        write_status(&ctx.op, ro, &restarted).await?;
        return Ok(Action::requeue(ctx.cfg.poll));
    }
    let mut changed = reverted.changed;
    // The namespace's NetworkPolicies: restored, narrowed back, pruned.
    // Pods do not roll for it, so the saga does not run again.
    let policies = drift::revert_policies(&ctx.op, &ns, &target.desired.policies).await;
    if let Some(last) = policies.record {
        let event = notices::drift_reverted(Subject::of(ro, target), &last);
        ctx.cfg.notifier.emit(event);
        status.last_drift = Some(last);
    }
    changed |= policies.changed;
    // Prunes that were blocked, and the inventory's uids.
    let pass = prune_pass(
        ctx,
        ro,
        &mut inventory,
        &mut status,
        target,
        loaded.policy.prune,
    )
    .await?;
    changed |= pass.changed;
    // The live re-check, when due.
    let mut next = if pass.pending {
        interval.min(Duration::from_secs(2))
    } else {
        interval
    };
    let due_in = reverify::due_in(&status, &ns, loaded.policy.reverify, now());
    if due_in.is_zero() {
        let result = reverify::run(&ctx.op, &ns, target, &status.signatures).await;
        let heal = reverify::record(
            &ctx.op,
            ro,
            &mut status,
            &result,
            loaded.policy.drift,
            &ctx.cfg.alerts,
        )
        .await;
        changed = true;
        if let Some(why) = heal {
            let mut restarted = saga::restart(&status, kinds, now(), why);
            restarted.conditions.clone_from(&status.conditions);
            write_status(&ctx.op, ro, &restarted).await?;
            prune::announce(&ctx.op, ro, &pass.pruned).await;
            return Ok(Action::requeue(ctx.cfg.poll));
        }
        next = next.min(loaded.policy.reverify);
    } else {
        next = next.min(due_in);
    }
    if changed {
        write_status(&ctx.op, ro, &status).await?;
    }
    prune::announce(&ctx.op, ro, &pass.pruned).await;
    Ok(Action::requeue(next.max(Duration::from_secs(1))))
}

/// Whether the operator's cache holds `w` in namespace `ns` with its
/// desired spec (what [`changed::compute`] asks).
fn holds_desired(op: &Ctx, ns: &str, w: &Workload) -> bool {
    match w {
        Workload::Agent(a) => op
            .agents
            .get(&ObjectRef::new(w.name()).within(ns))
            .is_some_and(|l| l.spec == a.spec),
        Workload::Tool(t) => op
            .tools
            .get(&ObjectRef::new(w.name()).within(ns))
            .is_some_and(|l| l.spec == t.spec),
    }
}
