//! Pure builders of the desired children: the Agent pod, Service and
//! Secret, the Tool pod and Service, the AgentFS PVC; an App's pod and
//! PVCs in `app`.
//!
//! No client here: every function maps CRD data to Kubernetes objects, so
//! the unit tests below cover them without a cluster. Every pod passes the
//! `restricted` Pod Security Standard.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container as K8sContainer, ContainerPort,
    EmptyDirVolumeSource, EnvFromSource, EnvVar as K8sEnvVar, EnvVarSource, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec,
    SeccompProfile, Secret, SecretEnvSource, SecretKeySelector, SecurityContext, Service,
    ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sha2::{Digest, Sha256};

use super::error::{Error, Result};
use crate::names::is_dns1035_label;

use crate::crd::{AgentFS, AgentSpec, Container, FilesystemMount, RestartPolicy, ToolSpec};
use crate::meta::{
    AGENT_AGENTLET_CONTAINER, AGENT_RUNTIME_CONTAINER, ANNOTATION_ACCESS_SCOPES,
    ANNOTATION_DEFAULT_CONTAINER, ANNOTATION_RESTART_REQUESTED, ANNOTATION_SPEC_HASH, LABEL_AGENT,
    LABEL_AGENTFS, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_TOOL, MANAGED_BY, TENANT_ACCESS_SECRET,
    TOKEN_KEY, TOOL_CONTAINER,
};

pub mod app;
pub mod placement;
pub mod tenant;

/// Port the agentlet listens on; the agent's Service points at it.
pub const AGENTLET_PORT: i32 = 8080;
/// UID/GID the pods run as (non-root, as `restricted` requires).
pub const RUN_AS: i64 = 65532;
const BASELINE_VOLUME: &str = "baseline";
const TMP_VOLUME: &str = "tmp";

/// The identity of the owning object, taken from its metadata once.
#[derive(Debug, Clone)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
    pub owner_ref: OwnerReference,
}

impl Owner {
    pub fn of<K: kube::Resource<DynamicType = ()>>(obj: &K) -> Result<Self> {
        let meta = obj.meta();
        Ok(Owner {
            name: meta
                .name
                .clone()
                .ok_or(Error::MissingField("metadata.name"))?,
            namespace: meta
                .namespace
                .clone()
                .ok_or(Error::MissingField("metadata.namespace"))?,
            owner_ref: obj
                .controller_owner_ref(&())
                .ok_or(Error::MissingField("metadata.uid"))?,
        })
    }
}

/// A DNS-1035 label (`[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters)
/// made of `prefix-name`; names that do not fit are shortened and get a
/// hash suffix, so two different names never collide.
pub fn child_name(prefix: &str, name: &str) -> String {
    let plain = format!("{prefix}-{name}");
    if is_dns1035_label(&plain) {
        return plain;
    }
    let hash = short_hash(name.as_bytes());
    let mut cleaned: String = plain
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned.truncate(63 - 9);
    let cleaned = cleaned.trim_end_matches('-');
    format!("{cleaned}-{hash}")
}

/// A label value for a name: the name itself when it fits, else a hash.
pub fn label_value(name: &str) -> String {
    if name.len() <= 63 {
        name.to_owned()
    } else {
        let mut v: String = name.chars().take(63 - 9).collect();
        v = v.trim_end_matches(['-', '.', '_']).to_owned();
        format!("{v}-{}", short_hash(name.as_bytes()))
    }
}

fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..4])
}

/// Hex SHA-256 of the JSON form of `value`.
pub fn spec_hash<T: serde::Serialize>(value: &T) -> Result<String> {
    let bytes = serde_json::to_vec(value).map_err(|source| Error::Serialize {
        what: "spec",
        source,
    })?;
    Ok(hex::encode(Sha256::digest(bytes))[..16].to_owned())
}

/// Length of the template-hash suffix of a pod name.
const POD_HASH_LEN: usize = 8;

/// A pod name that changes with the pod template: `prefix-name-<hash8>`,
/// like a ReplicaSet's pods. A rolled pod never reuses its predecessor's
/// name, so nothing aimed at the old pod by name (a kubelet's or kwok's
/// queued delete, a stale exec) can land on the new one.
pub fn pod_name(prefix: &str, name: &str, template_hash: &str) -> String {
    let hash = &template_hash[..template_hash.len().min(POD_HASH_LEN)];
    let plain = format!("{prefix}-{name}-{hash}");
    if is_dns1035_label(&plain) {
        return plain;
    }
    let base = child_name(prefix, name);
    let keep = 63 - POD_HASH_LEN - 1;
    if base.len() <= keep {
        return format!("{base}-{hash}");
    }
    // `base` ends in the name's hash; keep that, shorten the text before.
    let (text, name_hash) = base.split_at(base.len() - 8);
    let mut text = text.trim_end_matches('-').to_owned();
    text.truncate(keep - 8 - 1);
    let text = text.trim_end_matches('-');
    format!("{text}-{name_hash}-{hash}")
}

pub fn agent_pod_name(agent: &str, template_hash: &str) -> String {
    pod_name("agent", agent, template_hash)
}
pub fn agent_service_name(agent: &str) -> String {
    child_name("agent", agent)
}
pub fn agent_secret_name(agent: &str) -> String {
    child_name("agent-token", agent)
}
pub fn tool_pod_name(tool: &str, template_hash: &str) -> String {
    pod_name("tool", tool, template_hash)
}
pub fn tool_service_name(tool: &str) -> String {
    child_name("tool", tool)
}
pub fn pvc_name(fs: &str) -> String {
    child_name("agentfs", fs)
}

fn labels(component: &str, key: &str, name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_COMPONENT.to_owned(), component.to_owned()),
        (key.to_owned(), label_value(name)),
    ])
}

/// Selector labels of an agent's pod (what its Service selects).
pub fn agent_labels(agent: &str) -> BTreeMap<String, String> {
    labels("agent", LABEL_AGENT, agent)
}
pub fn tool_labels(tool: &str) -> BTreeMap<String, String> {
    labels("tool", LABEL_TOOL, tool)
}
pub fn agentfs_labels(fs: &str) -> BTreeMap<String, String> {
    labels("agentfs", LABEL_AGENTFS, fs)
}

fn meta(owner: &Owner, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(owner.namespace.clone()),
        labels: Some(labels),
        owner_references: Some(vec![owner.owner_ref.clone()]),
        ..ObjectMeta::default()
    }
}

/// Puts the hash of the object (without the annotation) into the
/// annotation [`ANNOTATION_SPEC_HASH`].
fn stamp<T: serde::Serialize>(mut obj: T, meta_of: fn(&mut T) -> &mut ObjectMeta) -> Result<T> {
    let hash = spec_hash(&obj)?;
    meta_of(&mut obj)
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(ANNOTATION_SPEC_HASH.to_owned(), hash);
    Ok(obj)
}

/// The hash a live object carries, if any.
pub fn hash_of(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(ANNOTATION_SPEC_HASH)
        .map(String::as_str)
}

pub fn restricted_container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        run_as_non_root: Some(true),
        read_only_root_filesystem: Some(true),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..SecurityContext::default()
    }
}

/// The pod security context every tenant pod gets, running as `run_as`
/// (the tenant's first uid) or [`RUN_AS`].
pub fn restricted_pod_security(run_as: Option<i64>) -> PodSecurityContext {
    let uid = run_as.unwrap_or(RUN_AS);
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..PodSecurityContext::default()
    }
}

fn container(
    name: &str,
    c: &Container,
    mounts: Vec<VolumeMount>,
    extra_env: Vec<K8sEnvVar>,
) -> K8sContainer {
    let mut env: Vec<K8sEnvVar> = c
        .env
        .iter()
        .map(|e| K8sEnvVar {
            name: e.name.clone(),
            value: Some(e.value.clone()),
            value_from: None,
        })
        .collect();
    env.extend(extra_env);
    K8sContainer {
        name: name.to_owned(),
        image: Some(c.image.clone()),
        command: (!c.command.is_empty()).then(|| c.command.clone()),
        args: (!c.args.is_empty()).then(|| c.args.clone()),
        env: (!env.is_empty()).then_some(env),
        volume_mounts: Some(mounts),
        security_context: Some(restricted_container_security()),
        ..K8sContainer::default()
    }
}

fn plain_env(name: &str, value: &str) -> K8sEnvVar {
    K8sEnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

fn restart_policy(p: Option<RestartPolicy>) -> &'static str {
    match p.unwrap_or(RestartPolicy::Always) {
        RestartPolicy::Always => "Always",
        RestartPolicy::OnFailure => "OnFailure",
        RestartPolicy::Never => "Never",
    }
}

/// The agent pod: `agentlet` and `runtime` containers, the baseline
/// ConfigMap read-only in both, the AgentFS `mounts` (already resolved, see
/// [`super::fs::effective_mounts`]), the token for the agentlet only.
pub fn agent_pod(owner: &Owner, spec: &AgentSpec, mounts: &[FilesystemMount]) -> Result<Pod> {
    agent_pod_restarted(owner, spec, mounts, None)
}

/// The agent pod; `restart_requested_at` (the Agent's restart annotation)
/// is carried into the pod's annotations, so a new request changes the
/// template hash and rolls the pod. With `spec.accessScopes`, the runtime
/// takes the tenant's keys from its access Secret as env, and the hash of
/// those scopes is in the pod's annotations: new keys roll the pod.
pub fn agent_pod_restarted(
    owner: &Owner,
    spec: &AgentSpec,
    mounts: &[FilesystemMount],
    restart_requested_at: Option<&str>,
) -> Result<Pod> {
    let mut volumes = vec![Volume {
        name: TMP_VOLUME.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    }];
    let mut shared_mounts = vec![VolumeMount {
        name: TMP_VOLUME.to_owned(),
        mount_path: "/tmp".to_owned(),
        ..VolumeMount::default()
    }];
    if let Some(baseline) = &spec.baseline {
        volumes.push(Volume {
            name: BASELINE_VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: baseline.config_map.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
        shared_mounts.push(VolumeMount {
            name: BASELINE_VOLUME.to_owned(),
            mount_path: baseline.mount_path().to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    for m in mounts {
        let volume = child_name("fs", &m.name);
        volumes.push(Volume {
            name: volume.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name(&m.name),
                read_only: m.read_only.then_some(true),
            }),
            ..Volume::default()
        });
        shared_mounts.push(VolumeMount {
            name: volume,
            mount_path: m.mount_path(),
            read_only: m.read_only.then_some(true),
            ..VolumeMount::default()
        });
    }
    let token_env = K8sEnvVar {
        name: "EXO_AGENT_TOKEN".to_owned(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: agent_secret_name(&owner.name),
                key: TOKEN_KEY.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    };
    let mut agentlet = container(
        AGENT_AGENTLET_CONTAINER,
        &spec.agentlet,
        shared_mounts.clone(),
        vec![
            plain_env("EXO_AGENT_NAME", &owner.name),
            plain_env("EXO_AGENT_NAMESPACE", &owner.namespace),
            token_env,
        ],
    );
    agentlet.ports = Some(vec![ContainerPort {
        name: Some("agentlet".to_owned()),
        container_port: AGENTLET_PORT,
        ..ContainerPort::default()
    }]);
    let runtime = container(
        AGENT_RUNTIME_CONTAINER,
        &spec.runtime,
        shared_mounts,
        vec![],
    );
    let mut pod = restricted_pod(
        pod_meta(
            owner,
            "agent",
            agent_labels(&owner.name),
            AGENT_RUNTIME_CONTAINER,
        ),
        vec![agentlet, runtime],
        volumes,
        restart_policy(spec.restart_policy),
        spec.node_tier.as_deref(),
        spec.run_as_user,
    );
    if let Some(at) = restart_requested_at {
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_RESTART_REQUESTED.to_owned(), at.to_owned());
    }
    if let Some(scopes) = &spec.access_scopes {
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ANNOTATION_ACCESS_SCOPES.to_owned(), scopes.clone());
        if let Some(runtime) = pod.spec.as_mut().and_then(|s| {
            s.containers
                .iter_mut()
                .find(|c| c.name == AGENT_RUNTIME_CONTAINER)
        }) {
            runtime.env_from = Some(vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: TENANT_ACCESS_SECRET.to_owned(),
                    optional: Some(false),
                }),
                ..EnvFromSource::default()
            }]);
        }
    }
    named_by_hash(stamp(pod, |p| &mut p.metadata)?, "agent", &owner.name)
}

/// A pod's metadata before it is stamped and named by its hash, with the
/// annotation naming its default container, so `kubectl exec` and
/// `exo attach` without `-c` pick the same one.
fn pod_meta(
    owner: &Owner,
    prefix: &str,
    labels: BTreeMap<String, String>,
    default_container: &str,
) -> ObjectMeta {
    ObjectMeta {
        annotations: Some(BTreeMap::from([(
            ANNOTATION_DEFAULT_CONTAINER.to_owned(),
            default_container.to_owned(),
        )])),
        ..meta(owner, child_name(prefix, &owner.name), labels)
    }
}

/// Renames a stamped pod to its template-hash name (the hash was taken
/// over the pod with its plain name, so it does not depend on itself).
fn named_by_hash(mut pod: Pod, prefix: &str, owner: &str) -> Result<Pod> {
    let hash = hash_of(&pod.metadata)
        .ok_or(Error::MissingField("metadata.annotations[spec-hash]"))?
        .to_owned();
    pod.metadata.name = Some(pod_name(prefix, owner, &hash));
    Ok(pod)
}

/// The agent's Service: headless (`clusterIP: None`), because it fronts
/// exactly one pod, and a fleet of thousands of agents must not use up
/// the cluster's Service IP range.
pub fn agent_service(owner: &Owner) -> Result<Service> {
    let svc = Service {
        metadata: meta(
            owner,
            agent_service_name(&owner.name),
            agent_labels(&owner.name),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_owned()),
            selector: Some(agent_labels(&owner.name)),
            ports: Some(vec![ServicePort {
                name: Some("agentlet".to_owned()),
                port: AGENTLET_PORT,
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    stamp(svc, |s| &mut s.metadata)
}

/// The per-agent Secret holding `token`. The token is only ever written
/// here, never logged.
pub fn agent_secret(owner: &Owner, token: &str) -> Secret {
    Secret {
        metadata: meta(
            owner,
            agent_secret_name(&owner.name),
            agent_labels(&owner.name),
        ),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([(
            TOKEN_KEY.to_owned(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Every tenant pod's spec around its containers: no service-account
/// token, no service links, the restricted security context, placed on the
/// tenant's node tier.
fn restricted_pod(
    metadata: ObjectMeta,
    containers: Vec<k8s_openapi::api::core::v1::Container>,
    volumes: Vec<Volume>,
    restart_policy: &str,
    node_tier: Option<&str>,
    run_as: Option<i64>,
) -> Pod {
    let mut spec = PodSpec {
        containers,
        volumes: Some(volumes),
        restart_policy: Some(restart_policy.to_owned()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(restricted_pod_security(run_as)),
        ..PodSpec::default()
    };
    placement::place(&mut spec, node_tier);
    Pod {
        metadata,
        spec: Some(spec),
        status: None,
    }
}

pub fn tool_pod(owner: &Owner, spec: &ToolSpec) -> Result<Pod> {
    let mut c = container(
        TOOL_CONTAINER,
        &spec.container,
        vec![VolumeMount {
            name: TMP_VOLUME.to_owned(),
            mount_path: "/tmp".to_owned(),
            ..VolumeMount::default()
        }],
        vec![],
    );
    if let Some(port) = spec.port {
        c.ports = Some(vec![ContainerPort {
            name: Some("tool".to_owned()),
            container_port: port,
            ..ContainerPort::default()
        }]);
    }
    let pod = restricted_pod(
        pod_meta(owner, "tool", tool_labels(&owner.name), TOOL_CONTAINER),
        vec![c],
        vec![Volume {
            name: TMP_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }],
        "Always",
        spec.node_tier.as_deref(),
        spec.run_as_user,
    );
    named_by_hash(stamp(pod, |p| &mut p.metadata)?, "tool", &owner.name)
}

pub fn tool_service(owner: &Owner, port: i32) -> Result<Service> {
    let svc = Service {
        metadata: meta(
            owner,
            tool_service_name(&owner.name),
            tool_labels(&owner.name),
        ),
        spec: Some(ServiceSpec {
            selector: Some(tool_labels(&owner.name)),
            ports: Some(vec![ServicePort {
                name: Some("tool".to_owned()),
                port,
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    stamp(svc, |s| &mut s.metadata)
}

/// The PVC of an AgentFS asking for `size` (already checked against the
/// grow-only and maxSize rules by [`super::fs::plan_size`]).
pub fn agentfs_pvc(owner: &Owner, fs: &AgentFS, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(owner, pvc_name(&owner.name), agentfs_labels(&owner.name)),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![fs.spec.access_mode.as_str().to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.to_owned()),
                )])),
                limits: None,
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;
