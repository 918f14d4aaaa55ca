//! `AgentFS`: a persistent volume (PVC) that agents mount.
//!
//! Rules (see the product's agentfs document): resize is grow-only and capped
//! at `maxSize`; delete is refused while an Agent mounts the volume;
//! `retain: true` keeps the PVC after the resource is deleted.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "AgentFS",
    plural = "agentfs",
    singular = "agentfs",
    namespaced,
    shortname = "afs",
    category = "autonomic",
    status = "AgentFSStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Requested", type_ = "string", json_path = ".status.requested"),
    printcolumn(
        name = "Provisioned",
        type_ = "string",
        json_path = ".status.provisioned"
    ),
    printcolumn(name = "Max", type_ = "string", json_path = ".spec.maxSize"),
    printcolumn(name = "PVC", type_ = "string", json_path = ".status.pvcName"),
    printcolumn(name = "Mounted-By", type_ = "string", json_path = ".status.mountedBy"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("quantity(string(self.size)).compareTo(quantity(string(self.maxSize))) <= 0").message("size must not exceed maxSize"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentFSSpec {
    /// Requested capacity, e.g. `20Gi`. Grow-only.
    pub size: Quantity,
    /// The ceiling for `size`. Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("maxSize is immutable"))]
    pub max_size: Quantity,
    #[serde(default)]
    pub access_mode: AccessMode,
    /// Keep the PVC, and its data, after the AgentFS is deleted.
    #[serde(default)]
    pub retain: bool,
    /// Backups to an OCI repository (docs/backups.md). None: no backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<super::BackupPolicy>,
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum AccessMode {
    #[default]
    ReadWriteOnce,
    ReadWriteMany,
    ReadOnlyMany,
    ReadWriteOncePod,
}

impl AccessMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AccessMode::ReadWriteOnce => "ReadWriteOnce",
            AccessMode::ReadWriteMany => "ReadWriteMany",
            AccessMode::ReadOnlyMany => "ReadOnlyMany",
            AccessMode::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum AgentFSPhase {
    #[default]
    Pending,
    Bound,
    Resizing,
    Error,
    Terminating,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentFSStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentFSPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// What the PVC asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Quantity>,
    /// What the volume actually has; differs from `requested` while an
    /// expansion is in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<Quantity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_name: Option<String>,
    /// Agents (in this namespace) whose spec mounts this volume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounted_by: Vec<String>,
    /// What the backups did. Written by the backup task alone, as a merge
    /// patch: the reconciler's apply of the rest never lists it, so it
    /// neither removes nor overwrites it with a stale copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<super::BackupStatus>,
}
