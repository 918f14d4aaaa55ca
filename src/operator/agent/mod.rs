//! Agent reconciler: `Agent` -> pod (agentlet + runtime), Service and a
//! per-agent Secret; status phase, conditions and effective mounts.
//!
//! Pipeline: observe (pod, AgentFS) -> validate (pure) -> build (pure) ->
//! apply (only what differs) -> status (only when it changed).
//! Guarantees: a pod whose template hash differs from the desired one is
//! deleted and recreated (pod specs are immutable); the token in the Secret
//! is generated once and never logged; the Agent passes through
//! `Terminating` until its pod is gone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::controller;
use super::pod_roll::{self, Roll};
use crate::cluster::apply::Ctx;
use crate::cluster::build::{self, Owner, agent_secret_name, agent_service_name, hash_of};
use crate::cluster::conditions::{Cond, merge};
use crate::cluster::error::{Error, Result};
use crate::cluster::events::Reason;
use crate::cluster::fs::mount_applied;
use crate::cluster::metrics::Controller;
mod plan;

use super::phase::{PodState, agent_phase, pod_state};
use crate::cluster::pods::PodSet;

use crate::crd::{Agent, AgentFS, AgentStatus, FilesystemMount, RestartPolicy};
use crate::meta::FINALIZER_AGENT;

const C: Controller = Controller::Agent;

/// Entry point for the controller; see [`controller::reconcile`].
pub async fn reconcile(agent: Arc<Agent>, ctx: Arc<Ctx>) -> Result<Action> {
    controller::reconcile(C, agent.as_ref(), &ctx, reconcile_inner(&agent, &ctx)).await
}

pub fn error_policy(agent: Arc<Agent>, err: &Error, ctx: Arc<Ctx>) -> Action {
    controller::error_policy(C, agent, err, ctx)
}

async fn reconcile_inner(agent: &Agent, ctx: &Ctx) -> Result<Action> {
    if !ctx.caches_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let owner = Owner::of(agent)?;
    let ns = owner.namespace.as_str();
    let pods = ctx.owned_pods(ns, &build::agent_labels(&owner.name), &owner.owner_ref.uid);
    let finalizers = agent.metadata.finalizers.clone().unwrap_or_default();

    if agent.metadata.deletion_timestamp.is_some() {
        return finalize(agent, ctx, &owner, &pods, &finalizers).await;
    }
    // Sent together with the Secret and the Service below (or alone for
    // an invalid spec): three round trips in the time of one.
    let finalizer = ctx.set_finalizer(C, agent, FINALIZER_AGENT, true);

    let mounts = match plan::validate(agent) {
        Ok(mounts) => mounts,
        Err(message) => {
            finalizer.await?;
            let old = agent.status.clone().unwrap_or_default();
            let status = plan::invalid_status(agent, &pods, &message, Timestamp::now());
            if write_status(ctx, &owner, &old, &status).await? {
                ctx.event(agent, EventType::Warning, Reason::InvalidSpec, message)
                    .await;
            }
            // Permanent: wait for the spec to change.
            return Ok(Action::await_change());
        }
    };

    let missing = missing_filesystems(ctx, ns, &mounts).await?;
    let (finalized, secret, service) = tokio::join!(
        finalizer,
        ensure_secret(ctx, &owner, pods.is_empty()),
        ensure_service(ctx, &owner)
    );
    finalized?;
    secret?;
    service?;
    let closing = closing_filesystems(ctx, ns, &mounts, &missing, agent.status.as_ref()).await?;
    let desired = plan::build(agent, &owner, mounts, &missing, &closing)?;
    let set = plan::pod_set(agent, &pods, &desired);
    let how = Roll {
        removed_because: "spec.paused is set",
        first: agent.status.as_ref().is_none_or(|s| s.pod_name.is_none()),
        restart_failed: agent.spec.restart_policy != Some(RestartPolicy::Never),
    };
    let rolled = pod_roll::roll(ctx, C, agent, ns, &set, desired.pod.as_ref(), how).await?;
    if matches!(rolled.state, PodState::Broken { .. }) {
        forget_secret(ctx, &owner);
    }
    let next = plan::status(
        agent,
        ns,
        desired,
        &missing,
        &closing,
        rolled,
        Timestamp::now(),
    );
    if let Some(note) = &next.terminating {
        ctx.event(
            agent,
            EventType::Warning,
            Reason::FilesystemTerminating,
            note.clone(),
        )
        .await;
    }
    let old = agent.status.clone().unwrap_or_default();
    let deferred = ctx.holds.wait(
        &owner.owner_ref.uid,
        next.same,
        next.coming_up,
        &old.conditions,
        &next.status.conditions,
    );
    if let Some(wait) = deferred {
        // Progress while not ready: shown if it lasts, folded otherwise.
        return Ok(Action::requeue(next.requeue.map_or(wait, |r| r.min(wait))));
    }
    if write_status(ctx, &owner, &old, &next.status).await? && !missing.is_empty() {
        ctx.event(
            agent,
            EventType::Warning,
            Reason::FilesystemNotFound,
            next.status.message.clone().unwrap_or_default(),
        )
        .await;
    }
    Ok(match next.requeue {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    })
}

/// Deletion: report `Terminating`, delete the pod, and release the Agent
/// only once the pod is gone (so AgentFS `mountedBy` stays truthful).
async fn finalize(
    agent: &Agent,
    ctx: &Ctx,
    owner: &Owner,
    pods: &[Pod],
    finalizers: &[String],
) -> Result<Action> {
    if !finalizers.iter().any(|f| f == FINALIZER_AGENT) {
        return Ok(Action::await_change());
    }
    let ns = owner.namespace.as_str();
    let old = agent.status.clone().unwrap_or_default();
    let report = agent_phase(true, false, None, &pod_state(pods.first()));
    let status = AgentStatus {
        phase: Some(report.phase),
        observed_generation: agent.metadata.generation,
        conditions: merge(
            &old.conditions,
            &[Cond::new(
                "Ready",
                false,
                report.reason,
                report.message.clone(),
            )],
            agent.metadata.generation,
            Timestamp::now(),
        ),
        message: Some(report.message),
        ..old.clone()
    };
    ctx.holds.release(&owner.owner_ref.uid);
    write_status(ctx, owner, &old, &status).await?;
    if !pods.is_empty() {
        for p in PodSet::split(pods, None).to_delete() {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            ctx.delete::<Pod>(C, ns, name, p.metadata.uid.clone())
                .await?;
        }
        // The pod's deletion triggers the next reconcile; requeue as backstop.
        return Ok(Action::requeue(Duration::from_secs(5)));
    }
    ctx.set_finalizer(C, agent, FINALIZER_AGENT, false).await?;
    Ok(Action::await_change())
}

/// Writes the status if it differs; `true` when it wrote.
async fn write_status(
    ctx: &Ctx,
    owner: &Owner,
    old: &AgentStatus,
    new: &AgentStatus,
) -> Result<bool> {
    if old == new {
        return Ok(false);
    }
    ctx.apply_status::<Agent>(C, &owner.namespace, &owner.name, new)
        .await?;
    Ok(true)
}

async fn missing_filesystems(
    ctx: &Ctx,
    ns: &str,
    mounts: &[FilesystemMount],
) -> Result<Vec<String>> {
    let api: Api<AgentFS> = ctx.api(ns);
    let mut missing = Vec::new();
    for m in mounts {
        let found = api
            .get_metadata_opt(&m.name)
            .await
            .map_err(|e| Error::kube("get AgentFS", e))?;
        if found.is_none() {
            missing.push(m.name.clone());
        }
    }
    Ok(missing)
}

/// The new mounts (not applied before, see `fs::mount_applied`) whose
/// AgentFS is being deleted. They are refused: a volume being deleted
/// gains no new users, while Agents that already mount it keep it, and
/// hold its deletion, until they detach. Mounts already applied cost no
/// read, so a steady Agent makes none here.
async fn closing_filesystems(
    ctx: &Ctx,
    ns: &str,
    mounts: &[FilesystemMount],
    missing: &[String],
    status: Option<&AgentStatus>,
) -> Result<Vec<String>> {
    let api: Api<AgentFS> = ctx.api(ns);
    let mut closing = Vec::new();
    let new = mounts
        .iter()
        .filter(|m| !missing.contains(&m.name) && !mount_applied(status, &m.name));
    for m in new {
        let found = api
            .get_metadata_opt(&m.name)
            .await
            .map_err(|e| Error::kube("get AgentFS", e))?;
        if found.is_some_and(|f| f.metadata.deletion_timestamp.is_some()) {
            closing.push(m.name.clone());
        }
    }
    Ok(closing)
}

/// Creates the per-agent Secret with a fresh random token when it is
/// missing. An existing token is never replaced (or read into logs).
/// Without a pod (`fresh`: a new Agent, most likely) the create is tried
/// first, its conflict meaning the Secret exists; with a pod it is looked
/// up first, so a restart over a running fleet writes nothing.
async fn ensure_secret(ctx: &Ctx, owner: &Owner, fresh: bool) -> Result<()> {
    let key = secret_key(owner);
    if ctx
        .secrets_seen
        .lock()
        .is_ok_and(|seen| seen.contains(&key))
    {
        return Ok(());
    }
    let exists = !fresh && {
        let api: Api<Secret> = ctx.api(&owner.namespace);
        api.get_metadata_opt(&agent_secret_name(&owner.name))
            .await
            .map_err(|e| Error::kube("get agent secret", e))?
            .is_some()
    };
    if !exists {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(Error::Random)?;
        let token = hex::encode(bytes);
        ctx.create(C, &build::agent_secret(owner, &token)).await?;
    }
    if let Ok(mut seen) = ctx.secrets_seen.lock() {
        seen.insert(key);
    }
    Ok(())
}

fn secret_key(owner: &Owner) -> String {
    format!("{}/{}/{}", owner.namespace, owner.name, owner.owner_ref.uid)
}

/// Forgets that the Agent's Secret exists, so the next reconcile reads it
/// again (its pod cannot start: the Secret may have been deleted).
fn forget_secret(ctx: &Ctx, owner: &Owner) {
    if let Ok(mut seen) = ctx.secrets_seen.lock() {
        seen.remove(&secret_key(owner));
    }
}

async fn ensure_service(ctx: &Ctx, owner: &Owner) -> Result<()> {
    let desired = build::agent_service(owner)?;
    let live = ctx.service(&owner.namespace, &agent_service_name(&owner.name));
    if live.as_ref().and_then(|m| hash_of(&m.metadata)) != hash_of(&desired.metadata) {
        ctx.apply(C, &desired).await?;
    }
    Ok(())
}
