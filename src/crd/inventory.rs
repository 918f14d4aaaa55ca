//! `Inventory` (short name `inv`): what Exo applied for one tenant and has
//! not pruned, kept beside the tenant's Rollout (same namespace, same
//! name). It is an object of its own, not a field of the Rollout's status,
//! so that the Rollout stays small: every saga step writes the Rollout,
//! and the apiserver reads, converts and stores the whole object on each
//! write, while the inventory changes only when an object joins or leaves
//! the tenant (see `rollout::inventory`).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "autonomic.sh",
    version = "v1alpha1",
    kind = "Inventory",
    plural = "inventories",
    namespaced,
    shortname = "inv",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventorySpec {
    /// Every object the tenant's saga applied and has not pruned, sorted
    /// by kind and name. Written by the operator alone.
    #[serde(default)]
    pub entries: Vec<InventoryEntry>,
}

/// One object in a tenant's inventory.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    pub kind: InventoryKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Set while git no longer has the object and deleting it did not
    /// finish: why (a finalizer, a refusal). It stays here until it is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune_blocked: Option<String>,
}

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
    Hash,
    Default,
    schemars::JsonSchema,
)]
pub enum InventoryKind {
    #[default]
    Agent,
    Tool,
    AgentFS,
}

impl InventoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InventoryKind::Agent => "Agent",
            InventoryKind::Tool => "Tool",
            InventoryKind::AgentFS => "AgentFS",
        }
    }
}

impl std::fmt::Display for InventoryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
