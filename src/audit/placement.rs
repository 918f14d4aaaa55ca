//! `placement`: every tenant pod that is bound to a node runs on its
//! tenant's tier and never on a control-plane node.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::{Finding, Index, Rule, pod_object};
use crate::cluster::build::placement::node_fits;

pub(super) fn check(ix: &Index<'_>) -> Vec<Finding> {
    let nodes: BTreeMap<String, BTreeMap<String, String>> = ix
        .snap
        .nodes
        .iter()
        .map(|n| (n.name_any(), n.labels().clone()))
        .collect();
    let mut out = Vec::new();
    for (ns, pod) in ix.tenant_pods() {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let tier = ix.tenants[ns].spec.settings.node_tier.as_deref();
        let empty = BTreeMap::new();
        let labels = nodes.get(node).unwrap_or(&empty);
        if let Err(why) = node_fits(labels, tier) {
            out.push(Finding::new(
                Rule::Placement,
                ns,
                pod_object(pod),
                format!("runs on node {node}: {why}"),
            ));
        }
    }
    out
}
