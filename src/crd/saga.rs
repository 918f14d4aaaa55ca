//! What every saga records in its resource's status (`Rollout`,
//! `Tenant`): one entry per step, with its owner and state.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

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
