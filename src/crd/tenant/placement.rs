//! Where a tenant runs when its fleet spans clusters: `spec.placement` of
//! its `tenant.yaml`.
//!
//! ```yaml
//! spec:
//!   placement:
//!     clusters: [eu-west-prod, us-east-prod]   # names from clusters/*.yaml
//!     selector: {matchLabels: {env: prod}}     # and/or their labels
//!     move: verify-first                       # or immediate (the default)
//! ```
//!
//! The clusters a placement means are the union of those it names and
//! those its selector matches ([`crate::fleet::cluster`] resolves it
//! against the repository's `clusters/`). `move` says what happens on a
//! cluster the tenant leaves: `immediate` offboards it there at once;
//! `verify-first` keeps it there until the tenant is verified on every
//! cluster it is placed on now.
//!
//! Pure: types and the checks one file can make on its own.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::names::{is_dns1123_label, is_label_key, is_label_value};

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Placement {
    /// Clusters by name (the file stem of `clusters/<name>.yaml`, which is
    /// the control plane's deployment name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// Clusters by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ClusterSelector>,
    /// What happens on a cluster the tenant leaves.
    #[serde(default, rename = "move")]
    pub move_policy: MovePolicy,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    /// Every one of these labels, with this value.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl ClusterSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    }
}

impl std::fmt::Display for ClusterSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// What a cluster the tenant is no longer placed on does with it.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum MovePolicy {
    /// Offboard it there at the next sync.
    #[default]
    Immediate,
    /// Keep it there until it is verified on every cluster it is placed
    /// on now (as the control plane sees them).
    VerifyFirst,
}

impl Placement {
    /// Every problem one file shows, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for (i, c) in self.clusters.iter().enumerate() {
            if !is_dns1123_label(c) {
                out.push(format!(
                    "spec.placement.clusters[{i}] {c:?} is not a cluster name (a DNS label: lowercase letters, digits and '-', at most 63)"
                ));
            } else if !seen.insert(c.as_str()) {
                out.push(format!("spec.placement.clusters[{i}] {c:?} is named twice"));
            }
        }
        if let Some(s) = &self.selector {
            if s.match_labels.is_empty() {
                out.push(
                    "spec.placement.selector.matchLabels is empty: it would match every cluster; name the labels, or list the clusters"
                        .to_owned(),
                );
            }
            for (k, v) in &s.match_labels {
                if !is_label_key(k) {
                    out.push(format!(
                        "spec.placement.selector.matchLabels: {k:?} is not a label key"
                    ));
                }
                if !is_label_value(v) {
                    out.push(format!(
                        "spec.placement.selector.matchLabels.{k}: {v:?} is not a label value"
                    ));
                }
            }
        }
        if self.clusters.is_empty() && self.selector.is_none() {
            out.push(
                "spec.placement names no cluster: set clusters, a selector, or both".to_owned(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Placement {
        crate::yaml::from_str(std::path::Path::new("t.yaml"), text).unwrap()
    }

    #[test]
    fn reads_names_selector_and_move() {
        let p = parse(
            "clusters: [eu-west-prod]\nselector: {matchLabels: {env: prod}}\nmove: verify-first\n",
        );
        assert_eq!(p.clusters, ["eu-west-prod"]);
        assert_eq!(p.move_policy, MovePolicy::VerifyFirst);
        let s = p.selector.as_ref().unwrap();
        assert!(s.matches(&BTreeMap::from([
            ("env".into(), "prod".into()),
            ("region".into(), "eu".into())
        ])));
        assert!(!s.matches(&BTreeMap::from([("env".into(), "staging".into())])));
        assert!(p.problems().is_empty());
        assert_eq!(parse("clusters: [a]").move_policy, MovePolicy::Immediate);
    }

    #[test]
    fn refuses_unknown_moves_and_fields() {
        let path = std::path::Path::new("t.yaml");
        assert!(crate::yaml::from_str::<Placement>(path, "move: later").is_err());
        assert!(crate::yaml::from_str::<Placement>(path, "cluster: [a]").is_err());
    }

    #[test]
    fn problems_name_the_field() {
        let p = parse("clusters: [Bad_Name, a, a]\nselector: {matchLabels: {'-x': 'y y'}}");
        let found = p.problems().join("\n");
        assert!(
            found.contains("spec.placement.clusters[0] \"Bad_Name\""),
            "{found}"
        );
        assert!(
            found.contains("spec.placement.clusters[2] \"a\" is named twice"),
            "{found}"
        );
        assert!(found.contains("\"-x\" is not a label key"), "{found}");
        assert!(found.contains("\"y y\" is not a label value"), "{found}");
        let empty = parse("move: immediate");
        assert!(empty.problems()[0].contains("names no cluster"));
        let everything = parse("selector: {matchLabels: {}}");
        assert!(everything.problems()[0].contains("would match every cluster"));
    }
}
