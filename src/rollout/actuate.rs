//! The saga's actuators and postconditions against the cluster. Each step
//! acts (idempotently: server-side apply, create-if-absent) and then checks
//! its postcondition; only a held postcondition completes a step.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;

use futures::StreamExt;

use super::isolation::differs;
use super::saga::{Outcome, StepKind, Workload, combine, groups};
use super::verify::{ContentError, check_content};
use super::workload::{
    StepCtx, apply_workload, blocked, blocked_op, current_pod, expects_pod, pod_rolled,
};
use crate::cluster::metrics::Controller;
use crate::crd::{Agent, Tool};
use crate::fleet::configmap;
use crate::meta::{
    ANNOTATION_CONTENT_SHA256, LABEL_BASELINE, LABEL_FLEET, LABEL_FLEET_NAMESPACE,
    LABEL_MANAGED_BY, MANAGED_BY,
};

/// Whether `labels` (a Rollout's) name the Fleet `name` in `namespace`.
pub fn follows_fleet(
    labels: &std::collections::BTreeMap<String, String>,
    name: &str,
    namespace: &str,
) -> bool {
    labels.get(LABEL_FLEET).map(String::as_str) == Some(name)
        && labels.get(LABEL_FLEET_NAMESPACE).map(String::as_str) == Some(namespace)
}

/// Workloads of one step handled at once, per tenant.
const STEP_CONCURRENCY: usize = 16;

/// Runs the per-workload futures a bounded number at a time and combines
/// their outcomes (the worst wins).
async fn each<Fut>(futures: Vec<Fut>) -> Outcome
where
    Fut: std::future::Future<Output = Outcome>,
{
    let outcomes: Vec<Outcome> = futures::stream::iter(futures)
        .buffer_unordered(STEP_CONCURRENCY)
        .collect()
        .await;
    combine(outcomes)
}

pub async fn execute(kind: &StepKind, ctx: &StepCtx<'_>) -> Outcome {
    match kind {
        StepKind::Isolate => isolate(ctx).await,
        StepKind::PublishConfigMaps => publish_configmaps(ctx).await,
        StepKind::Repoint(c) => repoint(ctx, &group(ctx, c)).await,
        StepKind::PodsRolled(c) => pods_rolled(ctx, &group(ctx, c)).await,
        StepKind::Verified(c) => verify_live(ctx, &group(ctx, c)).await,
        StepKind::ProjectStatus => project(ctx).await,
        // The engine runs these: the first moves the inventory in the
        // status, the second records the signatures there.
        StepKind::Prune | StepKind::VerifySignatures => Outcome::Done,
    }
}

fn group(ctx: &StepCtx<'_>, component: &str) -> Vec<Workload> {
    groups(ctx.workloads, ctx.release)
        .into_iter()
        .find(|(c, _)| c == component)
        .map(|(_, ws)| ws)
        .unwrap_or_default()
}

/// Exo's NetworkPolicies (the tenant's isolation) in a namespace.
fn managed_policies() -> ListParams {
    ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"))
}

/// The `network-isolated` step: apply every desired policy, delete Exo's policies that are
/// not desired, then check from one list that the namespace holds exactly
/// the desired ones, as built.
async fn isolate(ctx: &StepCtx<'_>) -> Outcome {
    let ns = ctx.namespace;
    if isolated_in_cache(ctx) {
        // The watch already shows exactly what git builds: nothing to
        // write (a one-Agent edit does not touch the tenant's policies).
        return Outcome::Done;
    }
    for p in ctx.policies {
        if let Err(e) = ctx.op.apply(Controller::Rollout, p).await {
            return blocked_op(&format!("apply NetworkPolicy {ns}/{}", p.name_any()), &e);
        }
    }
    let api = ctx.op.api::<NetworkPolicy>(ns);
    let live = match api.list(&managed_policies()).await {
        Ok(l) => l.items,
        Err(e) => return blocked(&format!("list NetworkPolicies in {ns}"), &e),
    };
    for l in &live {
        if !ctx.policies.iter().any(|p| p.name_any() == l.name_any()) {
            if let Err(e) = ctx.op.delete_unchanged(Controller::Rollout, l).await {
                return blocked_op(&format!("delete NetworkPolicy {ns}/{}", l.name_any()), &e);
            }
            tracing::info!(namespace = %ns, policy = %l.name_any(), "NetworkPolicy git no longer builds deleted");
        }
    }
    for p in ctx.policies {
        let name = p.name_any();
        let Some(l) = live.iter().find(|l| l.name_any() == name) else {
            return Outcome::Pending(format!("NetworkPolicy {ns}/{name} not there yet"));
        };
        let fields = differs(l, p);
        if !fields.is_empty() {
            return Outcome::Pending(format!(
                "NetworkPolicy {ns}/{name} differs in {}",
                fields.join(", ")
            ));
        }
    }
    Outcome::Done
}

/// Whether the NetworkPolicy cache holds exactly the desired policies of the
/// namespace, each as built, and no other of Exo's.
fn isolated_in_cache(ctx: &StepCtx<'_>) -> bool {
    let ns = ctx.namespace;
    let cached: Vec<_> = ctx
        .op
        .network_policies
        .state()
        .into_iter()
        .filter(|l| l.namespace().as_deref() == Some(ns))
        .filter(|l| l.labels().get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY))
        .collect();
    cached.len() == ctx.policies.len()
        && ctx.policies.iter().all(|p| {
            cached
                .iter()
                .find(|l| l.name_any() == p.name_any())
                .is_some_and(|l| differs(l, p).is_empty())
        })
}

/// The content hash of a live ConfigMap's data, computed like the build.
fn live_hash(cm: &ConfigMap) -> String {
    let mut files: Vec<(String, String)> = Vec::new();
    for (k, v) in cm.data.iter().flatten() {
        files.push((k.clone(), configmap::file_hash(v.as_bytes())));
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        files.push((k.clone(), configmap::file_hash(&v.0)));
    }
    configmap::content_hash(files.iter().map(|(k, h)| (k.as_str(), h.clone())))
}

async fn publish_configmaps(ctx: &StepCtx<'_>) -> Outcome {
    let api: Api<ConfigMap> = ctx.op.api(ctx.namespace);
    for (version, sha) in ctx.baselines.clone() {
        let Some(sha) = sha else {
            return Outcome::Failed(format!(
                "baseline {version} is not a ConfigMap version of release {}",
                ctx.release.metadata.name
            ));
        };
        let existing = match api.get_opt(&version).await {
            Ok(e) => e,
            Err(e) => return blocked(&format!("read ConfigMap {version}"), &e),
        };
        let cm = match existing {
            Some(cm) => cm,
            None => {
                let Some(source) = ctx
                    .fleet
                    .baselines
                    .iter()
                    .find(|b| b.value.version() == version && b.value.sha256 == sha)
                else {
                    return Outcome::Waiting(format!(
                        "no source for {version} in the fleet repository at this commit, and it is not published yet"
                    ));
                };
                let mut cm = source.value.to_configmap();
                cm.metadata.namespace = Some(ctx.namespace.to_owned());
                if let Err(e) = ctx.op.create(Controller::Rollout, &cm).await {
                    return blocked_op(&format!("create ConfigMap {version}"), &e);
                }
                // Created now, or by someone a moment ago: read what is there.
                match api.get(&version).await {
                    Ok(c) => c,
                    Err(e) => return blocked(&format!("read ConfigMap {version}"), &e),
                }
            }
        };
        // Postcondition: immutable, and the data really is the release's.
        if cm.immutable != Some(true) {
            return Outcome::Failed(format!(
                "ConfigMap {version} exists but is not immutable; delete it so Exo can publish it"
            ));
        }
        let live = live_hash(&cm);
        if live != sha {
            return Outcome::Failed(format!(
                "ConfigMap {version} holds content hashing to {live}, the release pins {sha}"
            ));
        }
    }
    Outcome::Done
}

async fn repoint(ctx: &StepCtx<'_>, workloads: &[Workload]) -> Outcome {
    // From the operator's caches, not the apiserver: the step is looked at
    // each time one of its workloads changes while the reconciler catches
    // up, and a wave can hold hundreds of workloads per tenant. A cache a
    // moment behind only costs an apply that changes nothing.
    let live = Live::cached(ctx, workloads);
    let live = &live;
    each(
        workloads
            .iter()
            .map(|w| repoint_one(ctx, w, live))
            .collect(),
    )
    .await
}

/// The live Agents and Tools of `workloads`, by name, from the caches.
#[derive(Default)]
struct Live {
    agents: BTreeMap<String, Agent>,
    tools: BTreeMap<String, Tool>,
}

impl Live {
    fn cached(ctx: &StepCtx<'_>, workloads: &[Workload]) -> Self {
        let mut live = Live::default();
        for w in workloads {
            match w {
                Workload::Agent(_) => {
                    let at = ObjectRef::new(w.name()).within(ctx.namespace);
                    if let Some(a) = ctx.op.agents.get(&at) {
                        live.agents.insert(w.name().to_owned(), Agent::clone(&a));
                    }
                }
                Workload::Tool(_) => {
                    let at = ObjectRef::new(w.name()).within(ctx.namespace);
                    if let Some(t) = ctx.op.tools.get(&at) {
                        live.tools.insert(w.name().to_owned(), Tool::clone(&t));
                    }
                }
            }
        }
        live
    }
}

async fn repoint_one(ctx: &StepCtx<'_>, w: &Workload, live: &Live) -> Outcome {
    let name = w.name().to_owned();
    // Apply only when the spec differs: re-applying while waiting for the
    // reconciler would race its own writes.
    let current = match w {
        Workload::Agent(a) => live
            .agents
            .get(&name)
            .filter(|l| l.spec == a.spec)
            .map(|l| Workload::Agent(l.clone())),
        Workload::Tool(t) => live
            .tools
            .get(&name)
            .filter(|l| l.spec == t.spec)
            .map(|l| Workload::Tool(l.clone())),
    };
    let current = match current {
        Some(c) => c,
        None => match apply_workload(ctx.op, ctx.namespace, w).await {
            Ok(c) => c,
            Err(e) => return blocked_op(&format!("apply {} {name}", w.kind()), &e),
        },
    };
    let observed = match (&current, w) {
        (Workload::Agent(l), Workload::Agent(a)) => {
            l.spec.runtime.image == a.spec.runtime.image
                && l.spec.agentlet.image == a.spec.agentlet.image
                && l.spec.baseline == a.spec.baseline
                && l.status.as_ref().and_then(|s| s.observed_generation) == l.metadata.generation
        }
        (Workload::Tool(l), Workload::Tool(t)) => {
            l.spec.container.image == t.spec.container.image
                && l.status.as_ref().and_then(|s| s.observed_generation) == l.metadata.generation
        }
        _ => false,
    };
    if observed {
        Outcome::Done
    } else {
        Outcome::Pending(format!(
            "{} {name}: waiting for the reconciler to observe the new spec",
            w.kind()
        ))
    }
}

/// The operator's pods in the tenant namespace, from the pod cache: the
/// steps that wait on pods are woken by its changes.
fn managed_pods(ctx: &StepCtx<'_>) -> Vec<Arc<Pod>> {
    ctx.op
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ctx.namespace))
        .collect()
}

async fn pods_rolled(ctx: &StepCtx<'_>, workloads: &[Workload]) -> Outcome {
    if !workloads.iter().any(expects_pod) {
        return Outcome::Done;
    }
    let pods = managed_pods(ctx);
    combine(
        workloads
            .iter()
            .filter(|w| expects_pod(w))
            .map(|w| match current_pod(w, &pods) {
                Ok(p) => pod_rolled(w, p),
                Err(o) => o,
            }),
    )
}

/// Execs into the pod of each workload of the step (the run's changed
/// set) and compares its mounted content with the release's.
async fn verify_live(ctx: &StepCtx<'_>, workloads: &[Workload]) -> Outcome {
    if !workloads.iter().any(expects_pod) {
        return Outcome::Done;
    }
    let pods = managed_pods(ctx);
    let pods = &pods;
    each(
        workloads
            .iter()
            .filter(|w| expects_pod(w))
            .map(|w| async move {
                let pod = match current_pod(w, pods) {
                    Ok(p) => p,
                    Err(o) => return o,
                };
                if matches!(w, Workload::Agent(a) if a.spec.baseline.is_some()) {
                    ctx.op.metrics.verify_execs.inc();
                }
                match check_content(ctx.op, ctx.namespace, ctx.release, ctx.baselines, w, pod).await
                {
                    Ok(()) => Outcome::Done,
                    Err(ContentError::Blocked(o)) => o,
                    Err(ContentError::Mismatch { message, .. }) => {
                        if ctx.step_age < ctx.verify_grace {
                            Outcome::Pending(format!(
                                "{message} (retrying for {}s)",
                                ctx.verify_grace.as_secs()
                            ))
                        } else {
                            Outcome::Failed(message)
                        }
                    }
                }
            })
            .collect(),
    )
    .await
}

/// The run's result is projected where readers look for it: the Rollout's
/// status (written by the engine when the run ends: `Verified`, the
/// release, the commit, the time, the changed set), which the CLI, the
/// gates, the dashboard and the upstream read. No workload is written:
/// a stamp per Agent was one more write per changed workload, and nothing
/// read it. What is left is collecting the baseline versions the release
/// no longer uses.
async fn project(ctx: &StepCtx<'_>) -> Outcome {
    collect_old_configmaps(ctx).await;
    Outcome::Done
}

/// Deletes Exo's baseline ConfigMaps in the namespace that the release does
/// not use and that no pod references any more.
pub async fn collect_old_configmaps(ctx: &StepCtx<'_>) {
    let keep: Vec<String> = ctx.baselines.keys().cloned().collect();
    // The watch cache says whether there is anything to collect at all (a
    // run that changed no baseline leaves none behind); the fresh lists
    // below decide what, so a one-Agent edit lists no pods.
    if !ctx.op.configmaps.state().iter().any(|cm| {
        cm.metadata.namespace.as_deref() == Some(ctx.namespace)
            && cm.labels().contains_key(LABEL_BASELINE)
            && cm.annotations().contains_key(ANNOTATION_CONTENT_SHA256)
            && !keep.contains(&cm.name_any())
    }) {
        return;
    }
    let cms: Api<ConfigMap> = ctx.op.api(ctx.namespace);
    let pods: Api<Pod> = ctx.op.api(ctx.namespace);
    let Ok(list) = cms
        .list(&ListParams::default().labels(&format!("{LABEL_MANAGED_BY}=exo,{LABEL_BASELINE}")))
        .await
    else {
        return;
    };
    let Ok(pod_list) = pods.list(&ListParams::default()).await else {
        return;
    };
    let referenced: Vec<String> = pod_list
        .items
        .iter()
        .flat_map(|p| p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
        .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
        .collect();
    for cm in list.items {
        let name = cm.name_any();
        if cm.annotations().contains_key(ANNOTATION_CONTENT_SHA256)
            && !keep.contains(&name)
            && !referenced.contains(&name)
        {
            match ctx
                .op
                .delete::<ConfigMap>(
                    Controller::Rollout,
                    ctx.namespace,
                    &name,
                    cm.metadata.uid.clone(),
                )
                .await
            {
                Ok(()) => {
                    tracing::info!(namespace = ctx.namespace, configmap = %name, "deleted unused baseline version")
                }
                Err(e) => {
                    tracing::warn!(namespace = ctx.namespace, configmap = %name, error = %e, "cannot delete unused baseline version")
                }
            }
        }
    }
}
