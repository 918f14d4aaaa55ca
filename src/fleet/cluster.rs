//! `clusters/<name>.yaml`: the clusters a fleet spans, and where each
//! tenant runs among them.
//!
//! ```yaml
//! apiVersion: autonomic.sh/v1alpha1
//! kind: Cluster
//! metadata:
//!   name: eu-west-prod          # the file's name, and the control plane's deployment name
//!   labels: {region: eu-west, env: prod}
//! spec:
//!   capacity: {maxTenants: 200, notes: "16 nodes, GPU pool b"}   # optional
//! ```
//!
//! A repository without a `clusters/` folder is a single-cluster fleet:
//! every tenant runs wherever an operator follows it, as before clusters
//! existed. With the folder, every tenant says where it runs
//! (`spec.placement` of its `tenant.yaml`, [`crate::crd::tenant::placement`])
//! and an operator applies only the tenants placed on its own cluster.
//!
//! Pure, but [`load`] (reads the folder).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Fleet, Sourced, Tenant};
use crate::crd::tenant::placement::{MovePolicy, Placement};
use crate::names::{is_dns1123_label, is_label_key, is_label_value};

pub const KIND_CLUSTER: &str = "Cluster";
/// The folder under the repository root.
pub const CLUSTERS_DIR: &str = "clusters";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterDoc {
    #[serde(default)]
    pub api_version: String,
    pub kind: String,
    pub metadata: ClusterMeta,
    #[serde(default)]
    pub spec: ClusterSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterMeta {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
}

/// Notes for whoever places tenants; `maxTenants` is checked by lint.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capacity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tenants: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

impl ClusterDoc {
    /// A declaration of `name` with `labels` (what a file would hold).
    pub fn new(name: &str, labels: &[(&str, &str)]) -> Self {
        ClusterDoc {
            api_version: crate::fleet::release::API_VERSION.to_owned(),
            kind: KIND_CLUSTER.to_owned(),
            metadata: ClusterMeta {
                name: name.to_owned(),
                labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
            spec: ClusterSpec::default(),
        }
    }

    /// [`ClusterDoc::new`] as loaded from `clusters/<name>.yaml`.
    pub fn sourced(name: &str, labels: &[(&str, &str)]) -> Sourced<Self> {
        Sourced {
            path: Path::new(CLUSTERS_DIR).join(format!("{name}.yaml")),
            value: ClusterDoc::new(name, labels),
        }
    }

    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Every problem the file shows on its own; `stem` is its file name
    /// without `.yaml`.
    pub fn problems(&self, stem: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.kind != KIND_CLUSTER {
            out.push(format!("kind must be {KIND_CLUSTER}, not {:?}", self.kind));
        }
        let name = &self.metadata.name;
        if !is_dns1123_label(name) {
            out.push(format!(
                "metadata.name {name:?} is not a cluster name (a DNS label: lowercase letters, digits and '-', at most 63)"
            ));
        } else if name != stem {
            out.push(format!(
                "metadata.name {name:?} must match the file's name ({stem:?})"
            ));
        }
        for (k, v) in &self.metadata.labels {
            if !is_label_key(k) {
                out.push(format!("metadata.labels: {k:?} is not a label key"));
            }
            if !is_label_value(v) {
                out.push(format!("metadata.labels.{k}: {v:?} is not a label value"));
            }
        }
        out
    }
}

/// Reads `clusters/` under `root`: `None` when there is no such folder
/// (a single-cluster fleet). Each unusable file is a problem.
pub(super) fn load(root: &Path, problems: &mut Vec<String>) -> Option<Vec<Sourced<ClusterDoc>>> {
    let dir = root.join(CLUSTERS_DIR);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let mut out = Vec::new();
    for path in super::yaml_files(&dir, problems) {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        match crate::yaml::from_file::<ClusterDoc>(&path) {
            Ok(value) => {
                let found = value.problems(&stem);
                if found.is_empty() {
                    out.push(Sourced { path, value });
                } else {
                    problems.extend(
                        found
                            .into_iter()
                            .map(|p| format!("{}: {p}", path.display())),
                    );
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    Some(out)
}

/// Where one tenant runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// A single-cluster fleet: wherever an operator follows it.
    Everywhere,
    /// On these clusters (empty: nowhere, which lint refuses).
    On(BTreeSet<String>),
}

impl Placed {
    pub fn includes(&self, cluster: &str) -> bool {
        match self {
            Placed::Everywhere => true,
            Placed::On(set) => set.contains(cluster),
        }
    }
}

/// The clusters `placement` means among `clusters`: those it names that
/// exist, and those its selector matches.
pub fn resolve(placement: &Placement, clusters: &[Sourced<ClusterDoc>]) -> BTreeSet<String> {
    let known: BTreeSet<&str> = clusters.iter().map(|c| c.value.name()).collect();
    let named = placement
        .clusters
        .iter()
        .filter(|c| known.contains(c.as_str()))
        .cloned();
    let selected = placement.selector.iter().flat_map(|s| {
        clusters
            .iter()
            .filter(|c| s.matches(&c.value.metadata.labels))
            .map(|c| c.value.name().to_owned())
    });
    named.chain(selected).collect()
}

impl Fleet {
    /// Whether the repository declares clusters (`clusters/`).
    pub fn spans_clusters(&self) -> bool {
        self.clusters.is_some()
    }

    /// The declared cluster named `name`.
    pub fn cluster(&self, name: &str) -> Option<&Sourced<ClusterDoc>> {
        self.clusters
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|c| c.value.name() == name)
    }

    /// Where `tenant` runs.
    pub fn placed(&self, tenant: &Tenant) -> Placed {
        match &self.clusters {
            None => Placed::Everywhere,
            Some(clusters) => Placed::On(
                tenant
                    .placement
                    .as_ref()
                    .map(|p| resolve(p, clusters))
                    .unwrap_or_default(),
            ),
        }
    }

    /// Every (tenant, cluster) pair of the fleet, by tenant; a
    /// single-cluster fleet's tenants are `Everywhere`.
    pub fn placements(&self) -> BTreeMap<String, Placed> {
        self.tenants
            .iter()
            .map(|(name, t)| (name.clone(), self.placed(t)))
            .collect()
    }

    /// The tenants placed on `cluster`, by name.
    pub fn tenants_on(&self, cluster: &str) -> BTreeSet<String> {
        self.tenants
            .iter()
            .filter(|(_, t)| self.placed(t).includes(cluster))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// A tenant's move policy (`immediate` when it has no placement).
pub fn move_policy(tenant: &Tenant) -> MovePolicy {
    tenant
        .placement
        .as_ref()
        .map(|p| p.move_policy)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::placement::ClusterSelector;

    fn cluster(name: &str, labels: &[(&str, &str)]) -> Sourced<ClusterDoc> {
        ClusterDoc::sourced(name, labels)
    }

    #[test]
    fn resolves_names_and_selectors_as_a_union() {
        let clusters = [
            cluster("staging", &[("env", "staging")]),
            cluster("eu-west-prod", &[("env", "prod"), ("region", "eu")]),
            cluster("us-east-prod", &[("env", "prod"), ("region", "us")]),
        ];
        let by_name = Placement {
            clusters: vec!["staging".into(), "nowhere".into()],
            ..Placement::default()
        };
        assert_eq!(
            resolve(&by_name, &clusters),
            BTreeSet::from(["staging".into()])
        );
        let by_labels = Placement {
            clusters: vec!["staging".into()],
            selector: Some(ClusterSelector {
                match_labels: BTreeMap::from([("env".into(), "prod".into())]),
            }),
            ..Placement::default()
        };
        assert_eq!(
            resolve(&by_labels, &clusters),
            BTreeSet::from([
                "eu-west-prod".into(),
                "staging".into(),
                "us-east-prod".into()
            ])
        );
        let none = Placement {
            selector: Some(ClusterSelector {
                match_labels: BTreeMap::from([("env".into(), "dev".into())]),
            }),
            ..Placement::default()
        };
        assert!(resolve(&none, &clusters).is_empty());
    }

    #[test]
    fn a_file_names_what_is_wrong() {
        let mut c = cluster("eu", &[("bad key!", "v"), ("env", "not ok")]).value;
        c.kind = "Clustr".into();
        let found = c.problems("us").join("\n");
        assert!(found.contains("kind must be Cluster"), "{found}");
        assert!(
            found.contains("must match the file's name (\"us\")"),
            "{found}"
        );
        assert!(found.contains("\"bad key!\" is not a label key"), "{found}");
        assert!(found.contains("metadata.labels.env: \"not ok\""), "{found}");
        assert!(cluster("eu", &[]).value.problems("eu").is_empty());
    }
}
