//! Where a tenant's pods may run, by construction: on its tier's nodes
//! (`nodeSelector` plus a toleration of the tier's taint), and never on a
//! node labelled `node-role.kubernetes.io/control-plane`, whatever the tier.

use std::collections::BTreeMap;

use crate::meta::{LABEL_CONTROL_PLANE, LABEL_NODE_TIER};

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    Toleration,
};

/// Sets the pod's placement for `tier` (`None`: any worker node).
pub fn place(spec: &mut PodSpec, tier: Option<&str>) {
    spec.affinity = Some(Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: LABEL_CONTROL_PLANE.to_owned(),
                        operator: "DoesNotExist".to_owned(),
                        values: None,
                    }]),
                    match_fields: None,
                }],
            }),
            ..NodeAffinity::default()
        }),
        ..Affinity::default()
    });
    if let Some(tier) = tier {
        spec.node_selector = Some(BTreeMap::from([(
            LABEL_NODE_TIER.to_owned(),
            tier.to_owned(),
        )]));
        spec.tolerations = Some(vec![Toleration {
            key: Some(LABEL_NODE_TIER.to_owned()),
            operator: Some("Equal".to_owned()),
            value: Some(tier.to_owned()),
            effect: Some("NoSchedule".to_owned()),
            toleration_seconds: None,
        }]);
    }
}

/// Why a node may not run a tenant's pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misplaced {
    #[error("the node is a control-plane node ({})", LABEL_CONTROL_PLANE)]
    ControlPlane,
    #[error("the node is tier {have:?}, the tenant's is {want:?}")]
    OtherTier { have: String, want: String },
    #[error(
        "the node has no {} label; the tenant's tier is {want:?}",
        LABEL_NODE_TIER
    )]
    NoTier { want: String },
}

/// Whether a node may run a pod of `tier`: not a control-plane node, and
/// labelled with the tier when there is one. The audit's placement rule.
pub fn node_fits(
    node_labels: &BTreeMap<String, String>,
    tier: Option<&str>,
) -> Result<(), Misplaced> {
    if node_labels.contains_key(LABEL_CONTROL_PLANE) {
        return Err(Misplaced::ControlPlane);
    }
    match tier {
        Some(t) => match node_labels.get(LABEL_NODE_TIER) {
            Some(have) if have == t => Ok(()),
            Some(have) => Err(Misplaced::OtherTier {
                have: have.clone(),
                want: t.to_owned(),
            }),
            None => Err(Misplaced::NoTier { want: t.to_owned() }),
        },
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_selects_and_tolerates_and_control_planes_are_excluded_always() {
        let mut s = PodSpec::default();
        place(&mut s, None);
        assert!(s.node_selector.is_none() && s.tolerations.is_none());
        let expr = &s
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms[0]
            .match_expressions
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            (expr.key.as_str(), expr.operator.as_str()),
            (LABEL_CONTROL_PLANE, "DoesNotExist")
        );
        place(&mut s, Some("gpu"));
        assert_eq!(s.node_selector.as_ref().unwrap()[LABEL_NODE_TIER], "gpu");
        assert_eq!(
            s.tolerations.as_ref().unwrap()[0].value.as_deref(),
            Some("gpu")
        );
    }

    #[test]
    fn nodes_fit_by_tier_and_role() {
        let labels = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let std_node = labels(&[(LABEL_NODE_TIER, "standard")]);
        assert!(node_fits(&std_node, Some("standard")).is_ok());
        assert!(node_fits(&std_node, None).is_ok());
        assert_eq!(
            node_fits(&std_node, Some("gpu")).unwrap_err().to_string(),
            "the node is tier \"standard\", the tenant's is \"gpu\""
        );
        assert_eq!(
            node_fits(&labels(&[]), Some("gpu"))
                .unwrap_err()
                .to_string(),
            "the node has no autonomic.sh/node-tier label; the tenant's tier is \"gpu\""
        );
        let cp = labels(&[(LABEL_CONTROL_PLANE, ""), (LABEL_NODE_TIER, "standard")]);
        assert_eq!(
            node_fits(&cp, Some("standard")).unwrap_err().to_string(),
            "the node is a control-plane node (node-role.kubernetes.io/control-plane)"
        );
        assert!(node_fits(&cp, None).is_err());
    }
}
