//! `network`: each tenant namespace holds exactly the NetworkPolicies Exo
//! builds for it, as built, and no other policy allows traffic (policies
//! are additive: any allow rule elsewhere widens the isolation).

use kube::ResourceExt;

use super::{Finding, Index, Rule};

use crate::meta::{LABEL_MANAGED_BY, MANAGED_BY};
use crate::rollout::isolation::{Platform, differs, policies};
use crate::rollout::saga::Workload;

pub(super) fn check(ix: &Index<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    let platform = Platform::default();
    for (ns, ro) in &ix.tenants {
        let tools: Vec<Workload> = ix
            .snap
            .tools
            .iter()
            .filter(|t| t.namespace().as_deref() == Some(ns.as_str()))
            .map(|t| Workload::Tool(t.clone()))
            .collect();
        let want = policies(ns, &ro.spec.settings, &tools, &platform);
        let live: Vec<_> = ix
            .snap
            .policies
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
            .collect();
        for w in &want {
            let name = w.name_any();
            let object = format!("NetworkPolicy/{name}");
            match live.iter().find(|l| l.name_any() == name) {
                None => out.push(Finding::new(
                    Rule::Network,
                    ns,
                    object,
                    "missing: the tenant namespace does not have this policy".into(),
                )),
                Some(l) => {
                    let fields = differs(l, w);
                    if !fields.is_empty() {
                        out.push(Finding::new(
                            Rule::Network,
                            ns,
                            object,
                            format!("differs from what Exo builds in {}", fields.join(", ")),
                        ));
                    }
                }
            }
        }
        for l in &live {
            if want.iter().any(|w| w.name_any() == l.name_any()) {
                continue;
            }
            let spec = l.spec.clone().unwrap_or_default();
            let allows = spec.ingress.as_ref().is_some_and(|r| !r.is_empty())
                || spec.egress.as_ref().is_some_and(|r| !r.is_empty());
            let ours = l.labels().get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY);
            if allows || ours {
                let why = if ours {
                    "an Exo policy git does not build (pruned at the next sync)"
                } else {
                    "allows traffic on top of Exo's policies (policies add up, so this widens the tenant's isolation)"
                };
                out.push(Finding::new(
                    Rule::Network,
                    ns,
                    format!("NetworkPolicy/{}", l.name_any()),
                    why.into(),
                ));
            }
        }
    }
    out
}
