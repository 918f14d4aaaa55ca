//! The `Tenant` resource (cluster-scoped): the operator's record of one
//! tenant's lifecycle saga. Its spec is the tenant's `tenant.yaml` spec as
//! git has it; its status holds the saga's steps, each with its owner and
//! state, and says which spec (hash, commit, generation) it is about.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::TenantSpec;
use super::tiers::Tier;
use crate::crd::saga::SagaStep;

/// The resource. The fleet folder's name is its name.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema,
)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Tenant",
    shortname = "tn",
    category = "autonomic",
    status = "TenantStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(name = "Wave", type_ = "string", json_path = ".spec.settings.wave"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct TenantResourceSpec {
    /// The tenant's settings, as `manifests/<tenant>/tenant.yaml` has them.
    #[serde(default)]
    pub settings: TenantSpec,
    /// The tier `settings.tier` names, as `manifests/tiers.yaml` defines it
    /// at `commit`: a change of the tier's quota is a change of the tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// The fleet commit they were read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Git no longer has the tenant's folder: the offboarding saga runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offboarding: bool,
}

/// Where the tenant is in its life.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum TenantPhase {
    #[default]
    Pending,
    Onboarding,
    /// Every onboarding (or change) step is Done for the current spec.
    Active,
    /// A change of `tenant.yaml` is being carried out.
    Changing,
    /// A step's actuator is missing or cannot act; retried, never skipped.
    Waiting,
    Failed,
    Offboarding,
    /// Everything is gone but what `storage.retention` keeps.
    Offboarded,
}

/// Which saga the steps belong to.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum TenantOperation {
    #[default]
    Onboard,
    Change,
    Offboard,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TenantPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<TenantOperation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SagaStep>,
    /// The sha256 of the settings the steps are for (`spec.settings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_hash: Option<String>,
    /// The fleet commit of those settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_commit: Option<String>,
    /// The resource's generation the steps are for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The settings the last completed saga carried out: what a change is
    /// measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_settings: Option<TenantSpec>,
    /// The tier definition the last completed saga provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tier: Option<Tier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_at: Option<Time>,
    /// When offboarding began (the grace period counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offboard_started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The control plane's acknowledgements of the tenant's records
    /// (managed installations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneAcks>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// What the control plane acknowledged storing for this tenant, newest
/// per record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneAcks {
    /// The tenant's enrollment (or its withdrawal, when offboarded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrollment: Option<RegistrationAck>,
    /// Its support lane (or that it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support_lane: Option<RegistrationAck>,
}

/// One acknowledged record.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationAck {
    /// The record's id, as the control plane acknowledged it.
    pub id: String,
    /// The Tenant generation the record is for.
    pub generation: i64,
    /// What was registered: `enrolled`, `withdrawn`, `lane <name>` or
    /// `no lane`.
    pub record: String,
    pub acked_at: Time,
}
