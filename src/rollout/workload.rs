//! What every saga step and every pass over a verified tenant share: the
//! step's context ([`StepCtx`]), how a failed write or read becomes a
//! step's outcome (forbidden means a missing permission, `Waiting`;
//! anything else is transient, `Pending`), the one way Exo applies a
//! workload (its manifest's metadata plus the managed-by and tenant labels,
//! server-side, through the operator's fenced write path), and the checks
//! of a workload's pod (which pod is current, whether it runs the pinned
//! digests). Nothing here decides what a step does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use sha2::{Digest, Sha256};

use super::saga::{Outcome, Workload, digest_of_image_id};
use crate::cluster::apply::Ctx;
use crate::cluster::build::{agent_labels, tool_labels};
use crate::cluster::metrics::Controller;
use crate::cluster::{Error as OpError, ErrorCategory};
use crate::crd::{Agent, AgentFS, Tool};
use crate::fleet::Fleet;
use crate::meta::{ANNOTATION_APPLIED_HASH, LABEL_MANAGED_BY, LABEL_TENANT};
use crate::release::{ImageRef, Release};

/// What a step runs with: the tenant, what it should run, and the
/// operator's write path.
pub struct StepCtx<'a> {
    /// The operator's counted, leader-only write path and watch caches.
    pub op: &'a Ctx,
    pub namespace: &'a str,
    pub release: &'a Release,
    pub fleet: &'a Fleet,
    pub workloads: &'a [Workload],
    /// The tenant namespace's NetworkPolicies.
    pub policies: &'a [k8s_openapi::api::networking::v1::NetworkPolicy],
    /// Baseline version -> the release's sha256, for these workloads.
    pub baselines: &'a BTreeMap<String, Option<String>>,
    /// How long the step has been running; live content may lag a pod's
    /// start by a moment (the kubelet writes volumes asynchronously).
    pub step_age: std::time::Duration,
    /// How long a content mismatch is retried before the step fails.
    pub verify_grace: std::time::Duration,
}

pub fn is_forbidden(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 403,
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
            code,
        )) => code.as_u16() == 403,
        _ => false,
    }
}

/// Classifies an error of the write path like [`blocked`].
pub fn blocked_op(what: &str, e: &OpError) -> Outcome {
    if e.category() == ErrorCategory::Forbidden {
        Outcome::Waiting(format!(
            "{what}: forbidden for the operator's service account (missing RBAC)"
        ))
    } else {
        Outcome::Pending(format!("{what}: {e}"))
    }
}

/// Classifies a kube error: forbidden means a missing actuator (Waiting),
/// anything else is transient (Pending).
pub fn blocked(what: &str, e: &kube::Error) -> Outcome {
    if is_forbidden(e) {
        Outcome::Waiting(format!(
            "{what}: forbidden for the operator's service account (missing RBAC)"
        ))
    } else {
        Outcome::Pending(format!("{what}: {e}"))
    }
}

/// `meta` as Exo applies it in `namespace`: the manifest's name, labels
/// and annotations, plus the managed-by and tenant labels that the drift
/// check and pruning rely on.
pub fn owned_meta(meta: &kube::api::ObjectMeta, namespace: &str) -> kube::api::ObjectMeta {
    let mut labels = meta.labels.clone().unwrap_or_default();
    labels.insert(LABEL_MANAGED_BY.to_owned(), "exo".to_owned());
    labels.insert(LABEL_TENANT.to_owned(), namespace.to_owned());
    kube::api::ObjectMeta {
        name: meta.name.clone(),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels),
        annotations: Some(meta.annotations.clone().unwrap_or_default()),
        ..kube::api::ObjectMeta::default()
    }
}

/// The AgentFS the sync, and the drift revert, apply for git's `fs` in
/// `namespace`: its spec, owned metadata, and the sha256 of that body in
/// `autonomic.sh/applied-hash` (so a restarted operator's cache tells it is
/// applied). Returned with the hash.
pub fn agentfs_body(fs: &AgentFS, namespace: &str) -> (AgentFS, String) {
    let mut obj = AgentFS::new(&fs.name_any(), fs.spec.clone());
    obj.metadata = owned_meta(&fs.metadata, namespace);
    let hash = hex::encode(Sha256::digest(serde_json::to_vec(&obj).unwrap_or_default()));
    obj.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_APPLIED_HASH.to_owned(), hash.clone());
    (obj, hash)
}

/// Applies `w` as git wants it (server-side, the one field manager,
/// counted).
pub async fn apply_workload(op: &Ctx, namespace: &str, w: &Workload) -> Result<Workload, OpError> {
    match w {
        Workload::Agent(a) => {
            let mut obj = Agent::new(w.name(), a.spec.clone());
            obj.metadata = owned_meta(&a.metadata, namespace);
            op.apply(Controller::Rollout, &obj)
                .await
                .map(Workload::Agent)
        }
        Workload::Tool(t) => {
            let mut obj = Tool::new(w.name(), t.spec.clone());
            obj.metadata = owned_meta(&t.metadata, namespace);
            op.apply(Controller::Rollout, &obj)
                .await
                .map(Workload::Tool)
        }
    }
}

/// The labels the operator puts on `w`'s pods.
pub fn pod_labels(w: &Workload) -> BTreeMap<String, String> {
    match w {
        Workload::Agent(_) => agent_labels(w.name()),
        Workload::Tool(_) => tool_labels(w.name()),
    }
}

/// The one pod `w` runs now. Pod names change with the template, so the
/// pod is found by its labels; while an older pod is still there the roll
/// is not over.
pub fn current_pod<'a, P: std::borrow::Borrow<Pod>>(
    w: &Workload,
    pods: &'a [P],
) -> Result<&'a Pod, Outcome> {
    let want = pod_labels(w);
    let mine: Vec<&Pod> = pods
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|p: &&Pod| {
            let labels = p.metadata.labels.as_ref();
            want.iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .collect();
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    match mine.as_slice() {
        [] => Err(Outcome::Pending(format!(
            "{} {} has no pod yet",
            w.kind(),
            w.name()
        ))),
        [p] if p.metadata.deletion_timestamp.is_some() => Err(Outcome::Pending(format!(
            "pod {} of {} {} is terminating",
            name(p),
            w.kind(),
            w.name()
        ))),
        [p] => Ok(p),
        many => Err(Outcome::Pending(format!(
            "{} {} has {} pods ({}); waiting for the old ones to go",
            w.kind(),
            w.name(),
            many.len(),
            many.iter().map(|p| name(p)).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// Whether the workload is meant to have a pod at all.
pub fn expects_pod(w: &Workload) -> bool {
    match w {
        Workload::Agent(a) => !a.spec.paused,
        Workload::Tool(t) => t.spec.enabled,
    }
}

/// Whether `pod` is `w`'s pod rolled to the release: the new spec, Ready,
/// and every container's imageID carrying the pinned digest.
pub fn pod_rolled(w: &Workload, pod: &Pod) -> Outcome {
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    {
        let spec_images: BTreeMap<String, String> = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
            .collect();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        for (container, image) in w.images() {
            let Some(spec_image) = spec_images.get(container) else {
                return Outcome::Pending(format!("pod {name} has no container {container} yet"));
            };
            if spec_image != image {
                return Outcome::Pending(format!(
                    "pod {name} still runs the old {container} image; rolling"
                ));
            }
            let pinned = ImageRef::parse(image).digest.unwrap_or_default();
            let Some(st) = statuses.iter().find(|s| s.name == container) else {
                return Outcome::Pending(format!(
                    "pod {name} reports no status for {container} yet"
                ));
            };
            match digest_of_image_id(&st.image_id) {
                None => {
                    return Outcome::Pending(format!(
                        "pod {name} container {container} has no imageID yet"
                    ));
                }
                Some(d) if d != pinned => {
                    return Outcome::Failed(format!(
                        "pod {name} container {container} runs {d}, but the release pins {pinned}"
                    ));
                }
                Some(_) => {}
            }
        }
        if !ready {
            return Outcome::Pending(format!("pod {name} is not Ready"));
        }
    }
    Outcome::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agentfs_body_carries_the_hash_of_itself_without_it() {
        let fs: AgentFS = serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": {"name": "ws", "labels": {"team": "a"}},
            "spec": {"size": "1Gi", "maxSize": "5Gi"}
        }))
        .unwrap();
        let (obj, hash) = agentfs_body(&fs, "t1");
        assert_eq!(obj.annotations().get(ANNOTATION_APPLIED_HASH), Some(&hash));
        assert_eq!(
            obj.labels().get(LABEL_TENANT).map(String::as_str),
            Some("t1")
        );
        // Stable, and another spec is another hash.
        assert_eq!(agentfs_body(&fs, "t1").1, hash);
        let mut bigger = fs.clone();
        bigger.spec.size = k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into());
        assert_ne!(agentfs_body(&bigger, "t1").1, hash);
        assert_ne!(agentfs_body(&fs, "t2").1, hash);
    }
}
