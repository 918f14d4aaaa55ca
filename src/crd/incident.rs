//! `Incident` (short name `inc`): something an agent reported for its
//! tenant, kept in the operator's own namespace until support has it.
//!
//! Why there and not in the tenant's namespace: the record holds the
//! technical detail, which must never reach a tenant, and a platform may
//! grant a tenant's admins read access to their namespace. The operator's
//! namespace is the platform's alone. A resource survives a restart and a
//! leader change, is readable with `kubectl get incidents -n exo-system`,
//! and any replica can store one before it answers (the apiserver, not a
//! replica's memory, is the store).
//!
//! The spec is written once, when the incident is received, and never
//! changed (a CEL rule refuses an edit); the status follows it: routed to
//! the tenant's support lane, acknowledged, resolved.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Incident",
    namespaced,
    shortname = "inc",
    category = "autonomic",
    status = "IncidentStatus",
    derive = "PartialEq",
    printcolumn(name = "Tenant", type_ = "string", json_path = ".spec.tenant"),
    printcolumn(name = "Severity", type_ = "string", json_path = ".spec.severity"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Lane", type_ = "string", json_path = ".status.lane"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("an incident's spec is written once"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IncidentSpec {
    /// The tenant (its namespace).
    pub tenant: String,
    /// The Agent that reported it, by name, as its token proved.
    pub agent: String,
    pub severity: Severity,
    /// What the tenant is shown: the agent's summary with every URL,
    /// address, hostname, path, token and key taken out.
    pub summary: String,
    /// For support only: the agent's technical detail with secrets masked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The agent's id for the request or conversation it is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub correlation_id: String,
    /// The agent's key for this report: the same key again is the same
    /// incident.
    pub idempotency_key: String,
    pub received_at: Time,
}

/// How bad it is, as the agent says (also a notification's severity,
/// `crd::notify`: ordered from `info` to `critical`).
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    #[default]
    Warning,
    Error,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 4] = [
        Severity::Info,
        Severity::Warning,
        Severity::Error,
        Severity::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        }
    }
}

/// Where an incident is, as its tenant is told.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub enum IncidentState {
    /// Stored by the operator; not with support yet.
    #[default]
    Received,
    /// In the tenant's support lane (the control plane acknowledged it).
    Routed,
    /// Someone in support took it.
    Acknowledged,
    Resolved,
}

impl IncidentState {
    /// Its place in the order an incident moves through (never back).
    pub fn rank(self) -> u8 {
        match self {
            IncidentState::Received => 0,
            IncidentState::Routed => 1,
            IncidentState::Acknowledged => 2,
            IncidentState::Resolved => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IncidentState::Received => "received",
            IncidentState::Routed => "routed",
            IncidentState::Acknowledged => "acknowledged",
            IncidentState::Resolved => "resolved",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct IncidentStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<IncidentState>,
    /// The support lane it was routed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routed_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<Time>,
    /// The `metadata.generation` this status is for (the spec never
    /// changes, so it is 1 once written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Incident {
    /// When it last moved (routed, acknowledged or resolved), if ever.
    pub fn last_moved(&self) -> Option<&Time> {
        let s = self.status.as_ref()?;
        [&s.routed_at, &s.acknowledged_at, &s.resolved_at]
            .into_iter()
            .flatten()
            .max_by_key(|t| t.0)
    }

    /// The state the tenant is told: `received` until a status for this
    /// spec says otherwise.
    pub fn state(&self) -> IncidentState {
        self.status
            .as_ref()
            .filter(|s| s.observed_generation == self.metadata.generation)
            .and_then(|s| s.state)
            .unwrap_or_default()
    }
}
