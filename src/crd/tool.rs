//! `Tool` (short name `tl`): an on-demand pod.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::Container;

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Tool",
    namespaced,
    shortname = "tl",
    category = "autonomic",
    status = "ToolStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Enabled", type_ = "boolean", json_path = ".spec.enabled"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    pub container: Container,
    /// A disabled Tool has no pod.
    #[serde(default = "enabled_default")]
    pub enabled: bool,
    /// Port the tool listens on, exposed through a Service when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// The node tier the pod runs on (`autonomic.sh/node-tier=<tier>`,
    /// tolerated if tainted). The GitOps engine sets it from the tenant's
    /// `tenant.yaml`. Pods never run on a control-plane node, tier or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tier: Option<String>,
    /// The uid (and gid) the pod runs as: the first of the tenant's
    /// `uidRange`, set by the GitOps engine (the default is 65532). The
    /// audit checks every tenant pod runs inside its tenant's range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
}

fn enabled_default() -> bool {
    true
}

/// Tool phases, exactly as the product documents list them.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum ToolPhase {
    #[default]
    Pending,
    Ready,
    Error,
    Disabled,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ToolPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
