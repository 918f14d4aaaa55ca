//! `Agent` (short name `ag`): an agent pod with an agentlet and a runtime
//! container, a Service and a per-agent Secret.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Where the baseline ConfigMap is mounted when `spec.baseline.mountPath` is omitted.
pub const DEFAULT_BASELINE_MOUNT: &str = "/etc/exo/baseline";
/// Prefix of the default mount path of a file system: `/mnt/fs/<name>`.
pub const DEFAULT_FS_MOUNT_PREFIX: &str = "/mnt/fs";

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Agent",
    namespaced,
    shortname = "ag",
    category = "autonomic",
    status = "AgentStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Baseline",
        type_ = "string",
        json_path = ".spec.baseline.configMap"
    ),
    printcolumn(name = "Pod", type_ = "string", json_path = ".status.podName"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentSpec {
    /// The agent runtime container.
    pub runtime: Container,
    /// The agentlet sidecar that connects the runtime to the platform.
    pub agentlet: Container,
    /// The baseline ConfigMap version mounted read-only into both containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRef>,
    /// Paused agents have no pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// What happens when the runtime exits: `Always` (a long-running agent,
    /// the default), `OnFailure` or `Never` (a run that completes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<RestartPolicy>,
    /// AgentFS volumes to mount. Omitted leaves the current mounts alone, an
    /// empty list detaches every disk, a list replaces the mounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filesystems: Option<Vec<FilesystemMount>>,
    /// The node tier the pod runs on (`autonomic.sh/node-tier=<tier>`,
    /// tolerated if tainted). The GitOps engine sets it from the tenant's
    /// `tenant.yaml`. Pods never run on a control-plane node, tier or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tier: Option<String>,
    /// The hash of the tenant's access scopes (models and capabilities),
    /// set by the GitOps engine when the tenant has any: the runtime then
    /// takes the tenant's keys from its Secret `exo-tenant-access` as env,
    /// and a new hash (new keys) rolls the pod. In the spec, so the change
    /// moves the generation a status is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_scopes: Option<String>,
    /// The uid (and gid) the pod runs as: the first of the tenant's
    /// `uidRange`, set by the GitOps engine (the default is 65532). The
    /// audit checks every tenant pod runs inside its tenant's range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Container {
    /// Image pinned by digest: `repo@sha256:<64 hex>`.
    #[x_kube(validation = Rule::new("self.matches('^[^@ ]+@sha256:[0-9a-f]{64}$')").message("image must be pinned by digest: repo@sha256:<64 hex>"))]
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Plain, non-secret environment variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineRef {
    /// The immutable ConfigMap version, `<name>-<hash>`.
    pub config_map: String,
    /// Where it is mounted; default `/etc/exo/baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
}

impl BaselineRef {
    pub fn mount_path(&self) -> &str {
        self.mount_path.as_deref().unwrap_or(DEFAULT_BASELINE_MOUNT)
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilesystemMount {
    /// The AgentFS in the agent's namespace.
    pub name: String,
    /// Default: `/mnt/fs/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl FilesystemMount {
    pub fn mount_path(&self) -> String {
        self.mount_path
            .clone()
            .unwrap_or_else(|| format!("{DEFAULT_FS_MOUNT_PREFIX}/{}", self.name))
    }
}

/// Agent phases, exactly as the product documents list them.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum AgentPhase {
    #[default]
    Pending,
    Active,
    Paused,
    Error,
    Terminating,
    Succeeded,
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// The AgentFS volumes currently mounted, with their paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<FilesystemMount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
