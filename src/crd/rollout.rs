//! `Fleet` (the git repository a cluster follows) and `Rollout` (one
//! tenant's durable saga towards the release its wave points at).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The fleet repository the operator syncs, like Flux's GitRepository.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Fleet",
    namespaced,
    shortname = "fl",
    category = "autonomic",
    status = "FleetStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url"),
    printcolumn(name = "Commit", type_ = "string", json_path = ".status.appliedCommit"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetSpec {
    /// `https://…` (or, with `allowInsecure`, `http://`, `git://`, or a
    /// local-network address).
    pub url: String,
    #[serde(default = "default_branch")]
    pub branch: String,
    /// How often to fetch, e.g. `1m`. An annotation
    /// `autonomic.sh/sync-requested-at` asks for a fetch at once.
    #[serde(default = "default_interval")]
    pub interval: String,
    /// A Secret in this namespace with `username` and `password` (or a
    /// token as `password`) for HTTPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<String>,
    /// Allow non-HTTPS URLs and loopback or private-network hosts.
    #[serde(default)]
    pub allow_insecure: bool,
    /// Largest file the checkout may hold, in bytes (default 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<i64>,
}

fn default_branch() -> String {
    "main".into()
}
fn default_interval() -> String {
    "1m".into()
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The commit whose manifests and releases are applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_commit: Option<String>,
    /// The newest commit fetched (differs from `appliedCommit` when it was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// Wave -> release, as `releases/waves.yaml` said at `appliedCommit`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub waves: std::collections::BTreeMap<String, String>,
}

/// One tenant's rollout saga. Created and updated by the operator from the
/// fleet repository; its status is the durable saga state.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Rollout",
    namespaced,
    shortname = "ro",
    category = "autonomic",
    status = "RolloutStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Wave", type_ = "string", json_path = ".spec.wave"),
    printcolumn(name = "Release", type_ = "string", json_path = ".spec.release"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    pub tenant: String,
    pub wave: String,
    pub release: String,
    /// The fleet commit the release was read at.
    pub commit: String,
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum RolloutPhase {
    #[default]
    Pending,
    Progressing,
    /// A step's actuator is missing (e.g. no RBAC for pods/exec); it is
    /// retried, never skipped.
    Waiting,
    Verified,
    Failed,
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum StepState {
    #[default]
    Pending,
    Running,
    Waiting,
    Done,
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SagaStep {
    /// e.g. `configmaps-published`, `repointed/broker`, `verified/agent-runtime`.
    pub name: String,
    /// Who carries the step out (the actuator).
    pub owner: String,
    pub state: StepState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RolloutPhase>,
    /// The release the steps below belong to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SagaStep>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_at: Option<Time>,
    /// Releases verified in this tenant, newest first (bounded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verified_releases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
