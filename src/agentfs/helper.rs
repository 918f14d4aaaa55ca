//! Which pod a volume is reached through. An agent pod that mounts it is
//! used when one is running; otherwise a short-lived helper pod is
//! started (restricted Pod Security, no service account token, read-only
//! root), kept while it is busy and deleted by the operator once idle.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimVolumeSource, Pod, PodSpec, ResourceRequirements, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

use super::FsError;
use super::exec::Target;
use crate::cluster::build::{
    child_name, pvc_name, restricted_container_security, restricted_pod_security,
};
use crate::crd::AgentFS;
use crate::meta::{
    ANNOTATION_FS_HELPER_LAST_USED, FIELD_MANAGER, HELPER_CONTAINER, LABEL_COMPONENT,
    LABEL_FS_HELPER, LABEL_MANAGED_BY, MANAGED_BY,
};

/// A helper outlives no operator forever: the kubelet stops it after this.
const HELPER_DEADLINE_S: i64 = 6 * 3600;

#[derive(Debug, Clone)]
pub struct HelperOpts {
    /// Any image with busybox-like tools (`sh`, `tar`, `df`, `sha256sum`).
    pub image: String,
    /// How long an unused helper is kept (the operator's reaper applies
    /// its own setting; a copy marks its helper used at least this often
    /// and every 10 s).
    pub idle: Duration,
    /// How long to wait for a new helper to be Running and Ready.
    pub ready_timeout: Duration,
}

impl Default for HelperOpts {
    fn default() -> Self {
        HelperOpts {
            image: "busybox:1.37".into(),
            idle: Duration::from_secs(300),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

pub fn helper_name(fs: &str) -> String {
    child_name("exo-fs", fs)
}

fn ready(pod: &Pod) -> bool {
    let st = pod.status.as_ref();
    pod.metadata.deletion_timestamp.is_none()
        && st.and_then(|s| s.phase.as_deref()) == Some("Running")
        && st
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod to run in (pure): Running and Ready, mounting claim `pvc`
/// (writable when `write`), agents' pods before the helper, then by name.
pub fn choose(pods: &[Pod], pvc: &str, write: bool) -> Option<Target> {
    let mut found: Vec<Target> = Vec::new();
    for pod in pods.iter().filter(|p| ready(p)) {
        let Some(spec) = &pod.spec else { continue };
        let vols: Vec<&str> = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == pvc)
            })
            .map(|v| v.name.as_str())
            .collect();
        if vols.is_empty() {
            continue;
        }
        let helper = pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(LABEL_FS_HELPER));
        for c in &spec.containers {
            let m = c.volume_mounts.iter().flatten().find(|m| {
                vols.contains(&m.name.as_str())
                    && m.sub_path.as_deref().unwrap_or_default().is_empty()
                    && !(write && m.read_only == Some(true))
            });
            if let Some(m) = m {
                found.push(Target {
                    namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                    pod: pod.metadata.name.clone().unwrap_or_default(),
                    container: c.name.clone(),
                    mount_path: m.mount_path.clone(),
                    helper,
                });
                break;
            }
        }
    }
    found.sort_by(|a, b| (a.helper, &a.pod).cmp(&(b.helper, &b.pod)));
    found.into_iter().next()
}

/// The pods that mount claim `pvc`, but for `fs`'s own helper pod, by
/// name (pure): whoever a restore into the volume would write under. A pod
/// that has ended (Succeeded, Failed) mounts nothing any more; one still
/// starting or being deleted does.
pub fn others_mounting(pods: &[Pod], pvc: &str, fs: &str) -> Vec<String> {
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
        .filter(|p| {
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == pvc)
                })
        })
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let helper = name == helper_name(fs)
                && p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_FS_HELPER))
                    .is_some_and(|v| v == fs);
            (!helper).then_some(name)
        })
        .collect();
    names.sort();
    names
}

/// The helper pod for `fs` (pure), placed like the tenant's own pods: on
/// `tier`'s nodes when there is one, never on a control-plane node.
/// The helper pod of `fs`: on the tenant's node `tier`, as its first uid
/// `run_as` (both from the tenant's settings, when it has them).
pub fn helper_pod(
    fs: &AgentFS,
    image: &str,
    last_used: u64,
    tier: Option<&str>,
    run_as: Option<i64>,
) -> Pod {
    let name = fs.metadata.name.clone().unwrap_or_default();
    let labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_COMPONENT.to_owned(), "fs-helper".to_owned()),
        (LABEL_FS_HELPER.to_owned(), name.clone()),
    ]);
    let owner = fs.controller_owner_ref(&()).map(|o| OwnerReference {
        controller: Some(false),
        block_owner_deletion: Some(false),
        ..o
    });
    let small = BTreeMap::from([
        ("cpu".to_owned(), Quantity("10m".into())),
        ("memory".to_owned(), Quantity("32Mi".into())),
    ]);
    let mut pod = Pod {
        metadata: ObjectMeta {
            name: Some(helper_name(&name)),
            namespace: fs.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_FS_HELPER_LAST_USED.to_owned(),
                last_used.to_string(),
            )])),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            active_deadline_seconds: Some(HELPER_DEADLINE_S),
            termination_grace_period_seconds: Some(1),
            security_context: Some(restricted_pod_security(run_as)),
            containers: vec![Container {
                name: HELPER_CONTAINER.into(),
                image: Some(image.to_owned()),
                command: Some(vec!["sleep".into(), HELPER_DEADLINE_S.to_string()]),
                security_context: Some(restricted_container_security()),
                resources: Some(ResourceRequirements {
                    requests: Some(small.clone()),
                    limits: Some(small),
                    ..ResourceRequirements::default()
                }),
                volume_mounts: Some(vec![VolumeMount {
                    name: "fs".into(),
                    mount_path: crate::crd::FilesystemMount {
                        name: name.clone(),
                        ..Default::default()
                    }
                    .mount_path(),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "fs".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: pvc_name(&name),
                    read_only: None,
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        status: None,
    };
    if let Some(spec) = pod.spec.as_mut() {
        crate::cluster::build::placement::place(spec, tier);
    }
    pod
}

/// Whether a helper pod has been unused for `idle` (pure; for the reaper).
pub fn expired(pod: &Pod, now_s: u64, idle: Duration) -> bool {
    let is_helper = pod
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_FS_HELPER));
    let last = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_FS_HELPER_LAST_USED))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    is_helper
        && pod.metadata.deletion_timestamp.is_none()
        && last.saturating_add(idle.as_secs()) <= now_s
}

fn now_s() -> u64 {
    crate::wire::now_ms() / 1000
}

/// Reads an AgentFS, naming it when it is missing.
pub async fn get_fs(client: &Client, namespace: &str, name: &str) -> Result<AgentFS, FsError> {
    let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
    api.get_opt(name)
        .await
        .map_err(|e| FsError::kube(format!("get AgentFS {namespace}/{name}"), e))?
        .ok_or_else(|| FsError::NotFound {
            namespace: namespace.into(),
            name: name.into(),
        })
}

/// Finds (or starts) the pod to reach `fs` through.
pub async fn target(
    client: &Client,
    fs: &AgentFS,
    write: bool,
    opts: &HelperOpts,
) -> Result<Target, FsError> {
    let ns = fs.metadata.namespace.clone().unwrap_or_default();
    let name = fs.metadata.name.clone().unwrap_or_default();
    let pvc = fs
        .status
        .as_ref()
        .and_then(|s| s.pvc_name.clone())
        .unwrap_or_else(|| pvc_name(&name));
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    let list = pods
        .list(&lp)
        .await
        .map_err(|e| FsError::kube(format!("list pods in {ns}"), e))?;
    if let Some(t) = choose(&list.items, &pvc, write) {
        if t.helper {
            keep_busy(client, &t).await?;
        }
        return Ok(t);
    }
    // The tenant's tier and uid range, from its Rollout (absent: not a
    // GitOps tenant).
    let settings = Api::<crate::crd::Rollout>::namespaced(client.clone(), &ns)
        .get_opt(crate::meta::ROLLOUT_NAME)
        .await
        .ok()
        .flatten()
        .map(|r| r.spec.settings);
    let tier = settings.as_ref().and_then(|s| s.node_tier.clone());
    let run_as = settings
        .as_ref()
        .and_then(|s| s.uid_range)
        .map(|r| i64::from(r.start));
    let want = helper_pod(fs, &opts.image, now_s(), tier.as_deref(), run_as);
    let hname = helper_name(&name);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match pods.create(&pp, &want).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(FsError::kube(format!("create helper pod {ns}/{hname}"), e)),
    }
    let deadline = tokio::time::Instant::now() + opts.ready_timeout;
    loop {
        let pod = pods
            .get_opt(&hname)
            .await
            .map_err(|e| FsError::kube(format!("get helper pod {ns}/{hname}"), e))?;
        if let Some(p) = &pod
            && let Some(t) = choose(std::slice::from_ref(p), &pvc, write)
        {
            keep_busy(client, &t).await?;
            return Ok(t);
        }
        if tokio::time::Instant::now() >= deadline {
            let phase = pod
                .and_then(|p| p.status.and_then(|s| s.phase))
                .unwrap_or_else(|| "missing".into());
            return Err(FsError::NoPod(format!(
                "no running pod mounts AgentFS {ns}/{name}, and the helper pod {hname} is not \
                 ready after {} s (phase {phase})",
                opts.ready_timeout.as_secs()
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Marks a helper used now (no-op for agents' pods).
pub async fn keep_busy(client: &Client, t: &Target) -> Result<(), FsError> {
    if !t.helper {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &t.namespace);
    let now = now_s().to_string();
    let patch = json!({ "metadata": { "annotations": { ANNOTATION_FS_HELPER_LAST_USED: now } } });
    pods.patch(
        &t.pod,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|e| FsError::kube(format!("mark helper pod {}/{} busy", t.namespace, t.pod), e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs(name: &str) -> AgentFS {
        let mut f = AgentFS::new(name, Default::default());
        f.metadata.namespace = Some("t1".into());
        f.metadata.uid = Some("u1".into());
        f
    }

    fn running(mut p: Pod) -> Pod {
        p.status = Some(
            serde_json::from_value(json!({
                "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]
            }))
            .unwrap(),
        );
        p
    }

    fn agent_pod(name: &str, ro: bool) -> Pod {
        let mut p = helper_pod(&fs("data"), "img", 0, None, None);
        p.metadata.name = Some(name.into());
        p.metadata.labels = None;
        let spec = p.spec.as_mut().unwrap();
        spec.containers[0].name = "runtime".into();
        spec.containers[0].volume_mounts.as_mut().unwrap()[0].read_only = Some(ro);
        p
    }

    #[test]
    fn agents_pods_come_before_the_helper_and_writes_need_rw() {
        let helper = running(helper_pod(&fs("data"), "img", 0, None, None));
        let ro = running(agent_pod("agent-a", true));
        let pods = vec![helper.clone(), ro.clone()];
        let t = choose(&pods, "agentfs-data", false).unwrap();
        assert_eq!((t.pod.as_str(), t.helper), ("agent-a", false));
        assert_eq!(t.container, "runtime");
        let t = choose(&pods, "agentfs-data", true).unwrap();
        assert!(t.helper, "a read-only mount does not take writes");
        assert!(choose(&pods, "agentfs-other", false).is_none());
        // Not ready: not chosen.
        assert!(choose(&[agent_pod("agent-b", false)], "agentfs-data", false).is_none());
    }

    #[test]
    fn others_mounting_leaves_out_the_volumes_own_helper_and_ended_pods() {
        let helper = running(helper_pod(&fs("data"), "img", 0, None, None));
        let agent = agent_pod("agent-a", true);
        let mut done = running(agent_pod("job-1", false));
        done.status.as_mut().unwrap().phase = Some("Succeeded".into());
        // Another volume's helper that mounts this claim is someone else.
        let mut stranger = helper_pod(&fs("data"), "img", 0, None, None);
        stranger.metadata.name = Some("exo-fs-other".into());
        let pods = [helper, agent, done, stranger];
        assert_eq!(
            others_mounting(&pods, "agentfs-data", "data"),
            ["agent-a", "exo-fs-other"]
        );
        assert!(others_mounting(&pods, "agentfs-else", "else").is_empty());
        assert!(others_mounting(&pods[..1], "agentfs-data", "data").is_empty());
    }

    #[test]
    fn helper_is_restricted_and_expires() {
        let p = helper_pod(&fs("data"), "img", 100, Some("gpu"), Some(200_000));
        let spec = p.spec.as_ref().unwrap();
        // Placed like the tenant's pods: its tier, never a control-plane node.
        assert_eq!(
            spec.node_selector.as_ref().unwrap()["autonomic.sh/node-tier"],
            "gpu"
        );
        assert!(spec.affinity.is_some());
        assert_eq!(spec.automount_service_account_token, Some(false));
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_non_root,
            Some(true)
        );
        // Inside the tenant's uid range.
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_user,
            Some(200_000)
        );
        let c = &spec.containers[0];
        assert_eq!(
            c.security_context
                .as_ref()
                .unwrap()
                .allow_privilege_escalation,
            Some(false)
        );
        assert_eq!(
            c.volume_mounts.as_ref().unwrap()[0].mount_path,
            "/mnt/fs/data"
        );
        let idle = Duration::from_secs(30);
        assert!(!expired(&p, 129, idle));
        assert!(expired(&p, 130, idle));
        assert!(!expired(&agent_pod("agent-a", false), 1_000, idle));
    }
}
