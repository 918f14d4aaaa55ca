//! `placement`: every tenant pod that is bound to a node runs on its
//! tenant's tier and never on a control-plane node; and every tenant pod
//! of a tenant with a `uidRange` runs as a uid inside it (each container's
//! `runAsUser`, or the pod's).

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
        if let Some(range) = ix.tenants[ns].spec.settings.uid_range {
            out.extend(uid_findings(ns, pod, range));
        }
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

/// The containers of `pod` that run as a uid outside `range` (or as no
/// uid the pod says, which is the image's: outside it too).
fn uid_findings(
    ns: &str,
    pod: &k8s_openapi::api::core::v1::Pod,
    range: crate::crd::tenant::UidRange,
) -> Vec<Finding> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let pod_uid = spec.security_context.as_ref().and_then(|s| s.run_as_user);
    let (first, last) = (
        i64::from(range.start),
        range.end().map_or(i64::MAX, i64::from),
    );
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| {
            let uid = c
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .or(pod_uid);
            let inside = uid.is_some_and(|u| (first..=last).contains(&u));
            (!inside).then(|| {
                Finding::new(
                    Rule::Placement,
                    ns,
                    pod_object(pod),
                    format!(
                        "container {} runs as {}, outside the tenant's uidRange {first}-{last}",
                        c.name,
                        uid.map_or_else(|| "the image's user".to_owned(), |u| format!("uid {u}"))
                    ),
                )
            })
        })
        .collect()
}
