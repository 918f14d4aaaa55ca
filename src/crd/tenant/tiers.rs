//! `manifests/tiers.yaml`, beside the tenant folders: the tiers a tenant's
//! `spec.tier` picks from, each with the quota and container defaults its
//! tenants get (like a class of tenant: the platform team writes the
//! tiers once, a tenant names one).
//!
//! ```yaml
//! apiVersion: autonomic.sh/v1alpha1
//! kind: Tiers
//! spec:
//!   tiers:
//!     - name: standard
//!       quota: {cpu: "8", memory: 16Gi, pods: 50, storage: 100Gi}
//!       containerDefaults: {cpu: 250m, memory: 256Mi}
//!       # optional: the backup policy of the tenant's AgentFS that have none
//!       backup:
//!         every: 6h
//!         keep: 14
//!         repository: registry.example.com/backups/{namespace}/{name}
//! ```
//!
//! Pure: types and the checks of the file.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::names::is_dns1123_label;

pub const KIND_TIERS: &str = "Tiers";
/// The file, in `manifests/` beside the tenant folders.
pub const TIERS_FILE: &str = "tiers.yaml";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TiersDoc {
    #[serde(default)]
    pub api_version: String,
    pub kind: String,
    pub spec: TiersSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TiersSpec {
    pub tiers: Vec<Tier>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tier {
    pub name: String,
    /// The tenant namespace's ResourceQuota.
    #[serde(default)]
    pub quota: TierQuota,
    /// The LimitRange's default request and limit per container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_defaults: Option<ContainerDefaults>,
    /// The backup policy an AgentFS of the tenant's fleet folder gets when
    /// it declares none; `{namespace}` and `{name}` in its `repository`
    /// are the volume's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<crate::crd::BackupPolicy>,
}

/// Quantities as Kubernetes writes them (`8`, `16Gi`); unset is unlimited.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TierQuota {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<u32>,
    /// All PVCs' requests together (a tenant's `storage.quota` overrides it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerDefaults {
    pub cpu: String,
    pub memory: String,
}

impl TiersDoc {
    pub fn tier(&self, name: &str) -> Option<&Tier> {
        self.spec.tiers.iter().find(|t| t.name == name)
    }

    /// Everything wrong with the file, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.kind != KIND_TIERS {
            out.push(format!("kind must be {KIND_TIERS}, not {:?}", self.kind));
        }
        let mut names = BTreeSet::new();
        for (i, t) in self.spec.tiers.iter().enumerate() {
            let at = format!("spec.tiers[{i}]");
            if !is_dns1123_label(&t.name) {
                out.push(format!("{at}.name {:?} is not a DNS label", t.name));
            } else if !names.insert(t.name.as_str()) {
                out.push(format!("{at}.name {:?} is used twice", t.name));
            }
            let q = &t.quota;
            for (field, v) in [
                ("cpu", &q.cpu),
                ("memory", &q.memory),
                ("storage", &q.storage),
            ] {
                if let Some(v) = v {
                    quantity(&mut out, &format!("{at}.quota.{field}"), v);
                }
            }
            if let Some(d) = &t.container_defaults {
                quantity(&mut out, &format!("{at}.containerDefaults.cpu"), &d.cpu);
                quantity(
                    &mut out,
                    &format!("{at}.containerDefaults.memory"),
                    &d.memory,
                );
            }
            if let Some(e) = t.backup.as_ref().and_then(|b| b.check_template().err()) {
                out.push(e.at(&format!("{at}.backup")));
            }
        }
        out
    }
}

fn quantity(out: &mut Vec<String>, field: &str, v: &str) {
    if crate::quantity::to_bytes(v).map_or(true, |b| b == 0) {
        out.push(format!(
            "{field} {v:?} is not a positive quantity (e.g. 8, 500m, 16Gi)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_names_its_field() {
        let doc: TiersDoc = serde_saphyr::from_str(
            "kind: Tiers\nspec:\n  tiers:\n  - {name: standard, quota: {cpu: '8', memory: 16Gi, pods: 50, storage: 100Gi}}\n  - {name: standard}\n  - {name: Gold, quota: {memory: lots}, containerDefaults: {cpu: 250m, memory: '0'}}\n",
        )
        .unwrap();
        let p = doc.problems();
        for want in [
            "spec.tiers[1].name \"standard\" is used twice",
            "spec.tiers[2].name \"Gold\" is not a DNS label",
            "spec.tiers[2].quota.memory \"lots\"",
            "spec.tiers[2].containerDefaults.memory \"0\"",
        ] {
            assert!(p.iter().any(|m| m.contains(want)), "{want}: {p:?}");
        }
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(doc.tier("standard").is_some());
        assert!(doc.tier("gold").is_none());
    }

    /// A tier's backup default is checked as a policy (the operator's
    /// check), each problem under the tier's own field.
    #[test]
    fn a_bad_backup_default_names_its_tier_and_field() {
        let doc: TiersDoc = serde_saphyr::from_str(concat!(
            "kind: Tiers\nspec:\n  tiers:\n",
            "  - {name: ok, backup: {every: 6h, keep: 14, repository: 'r.example.com/b/{namespace}/{name}'}}\n",
            "  - {name: soon, backup: {every: soon, keep: 1, repository: r.example.com/b}}\n",
            "  - {name: none, backup: {every: 1h, keep: 0, repository: r.example.com/b}}\n",
            "  - {name: flat, backup: {every: 1h, keep: 1, repository: just-a-host}}\n",
            "  - {name: who, backup: {every: 1h, keep: 1, repository: 'r.example.com/{tenant}/{name}'}}\n",
            "  - {name: slow, backup: {every: 1h, keep: 1, repository: r.example.com/b, drillEvery: '7'}}\n",
        ))
        .unwrap();
        let p = doc.problems();
        for want in [
            "spec.tiers[1].backup.every: \"soon\"",
            "spec.tiers[2].backup.keep: must be at least 1",
            "spec.tiers[3].backup.repository: \"just-a-host\" is not host[:port]/path",
            "spec.tiers[4].backup.repository: \"{tenant}\" in",
            "spec.tiers[5].backup.drillEvery:",
        ] {
            assert!(p.iter().any(|m| m.starts_with(want)), "{want}: {p:?}");
        }
        assert_eq!(p.len(), 5, "{p:?}");
    }
}
