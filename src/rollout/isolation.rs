//! Tenant network isolation, by construction: the NetworkPolicies every
//! tenant namespace holds, built from its `tenant.yaml` and its Tools
//! (pure), applied by the saga's first step (`actuate`), drift-reverted and
//! pruned like the rest of a tenant's desired state (`drift`).
//!
//! The policies (all labelled `app.kubernetes.io/managed-by: exo`):
//! - `exo-default-deny`: every pod, no ingress and no egress;
//! - `exo-egress`: every pod may reach DNS (kube-system's `k8s-app:
//!   kube-dns`, 53 UDP/TCP), the tenant's Tools on their ports (its model
//!   gateway and broker), the operator's check-in endpoint, and each
//!   `allowedEgress` destination on its ports;
//! - `exo-tools-ingress` (when the tenant has Tools with a port): the
//!   Tools accept their own namespace's pods on those ports.
//!
//! NetworkPolicies are additive, so any other policy that allows traffic
//! widens this; the audit's `network` rule reports those.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::saga::Workload;
use crate::crd::tenant::{EgressRule, Protocol, TenantSpec};
use crate::meta::{LABEL_COMPONENT, LABEL_MANAGED_BY, MANAGED_BY};

pub const POLICY_DEFAULT_DENY: &str = "exo-default-deny";
pub const POLICY_EGRESS: &str = "exo-egress";
pub const POLICY_TOOLS_INGRESS: &str = "exo-tools-ingress";
/// The namespace label every namespace carries (set by the apiserver).
const LABEL_NS_NAME: &str = "kubernetes.io/metadata.name";

/// Where the platform's shared endpoints are; the same for every tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    /// The cluster DNS: namespace and pod labels.
    pub dns_namespace: String,
    pub dns_labels: BTreeMap<String, String>,
    /// The operator (agents check in with it): namespace, pod labels, port.
    pub operator_namespace: String,
    pub operator_labels: BTreeMap<String, String>,
    pub operator_port: u16,
}

impl Default for Platform {
    fn default() -> Self {
        Platform {
            dns_namespace: "kube-system".into(),
            dns_labels: BTreeMap::from([("k8s-app".into(), "kube-dns".into())]),
            // Where `deploy/` installs it.
            operator_namespace: "exo-system".into(),
            operator_labels: BTreeMap::from([(
                "app.kubernetes.io/name".into(),
                "exo-operator".into(),
            )]),
            operator_port: 8080,
        }
    }
}

fn selector(labels: &BTreeMap<String, String>) -> LabelSelector {
    LabelSelector {
        match_labels: Some(labels.clone()),
        match_expressions: None,
    }
}

fn in_namespace(ns: &str, pods: Option<&BTreeMap<String, String>>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(selector(&BTreeMap::from([(
            LABEL_NS_NAME.to_owned(),
            ns.to_owned(),
        )]))),
        pod_selector: pods.filter(|p| !p.is_empty()).map(selector),
        ip_block: None,
    }
}

fn port(p: u16, protocol: Protocol) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(p))),
        protocol: Some(protocol.as_str().to_owned()),
        end_port: None,
    }
}

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        labels: Some(BTreeMap::from([
            (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
            (crate::meta::LABEL_TENANT.to_owned(), ns.to_owned()),
        ])),
        ..ObjectMeta::default()
    }
}

fn tool_selector() -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_COMPONENT.to_owned(), "tool".to_owned()),
    ])
}

fn allowed(rule: &EgressRule) -> NetworkPolicyEgressRule {
    let peer = match (&rule.cidr, &rule.namespace) {
        (Some(cidr), _) => NetworkPolicyPeer {
            ip_block: Some(IPBlock {
                cidr: cidr.clone(),
                except: None,
            }),
            ..NetworkPolicyPeer::default()
        },
        (None, ns) => in_namespace(ns.as_deref().unwrap_or_default(), Some(&rule.pod_labels)),
    };
    NetworkPolicyEgressRule {
        to: Some(vec![peer]),
        ports: Some(
            rule.ports
                .iter()
                .map(|p| port(p.port, p.protocol))
                .collect(),
        ),
    }
}

/// The tenant's NetworkPolicies, sorted by name.
pub fn policies(
    ns: &str,
    tenant: &TenantSpec,
    workloads: &[Workload],
    platform: &Platform,
) -> Vec<NetworkPolicy> {
    let all_pods = LabelSelector::default();
    let tool_ports: BTreeSet<u16> = workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Tool(t) if t.spec.enabled => t.spec.port,
            _ => None,
        })
        .filter_map(|p| u16::try_from(p).ok())
        .collect();
    let deny = NetworkPolicy {
        metadata: meta(ns, POLICY_DEFAULT_DENY),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(all_pods.clone()),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: None,
            egress: None,
        }),
    };
    let mut egress = vec![
        NetworkPolicyEgressRule {
            to: Some(vec![in_namespace(
                &platform.dns_namespace,
                Some(&platform.dns_labels),
            )]),
            ports: Some(vec![port(53, Protocol::UDP), port(53, Protocol::TCP)]),
        },
        NetworkPolicyEgressRule {
            to: Some(vec![in_namespace(
                &platform.operator_namespace,
                Some(&platform.operator_labels),
            )]),
            ports: Some(vec![port(platform.operator_port, Protocol::TCP)]),
        },
    ];
    if !tool_ports.is_empty() {
        egress.push(NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                pod_selector: Some(selector(&tool_selector())),
                ..NetworkPolicyPeer::default()
            }]),
            ports: Some(tool_ports.iter().map(|p| port(*p, Protocol::TCP)).collect()),
        });
    }
    egress.extend(tenant.allowed_egress.iter().map(allowed));
    let egress = NetworkPolicy {
        metadata: meta(ns, POLICY_EGRESS),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(all_pods.clone()),
            policy_types: Some(vec!["Egress".into()]),
            egress: Some(egress),
            ingress: None,
        }),
    };
    let mut out = vec![deny, egress];
    if !tool_ports.is_empty() {
        out.push(NetworkPolicy {
            metadata: meta(ns, POLICY_TOOLS_INGRESS),
            spec: Some(NetworkPolicySpec {
                pod_selector: Some(selector(&tool_selector())),
                policy_types: Some(vec!["Ingress".into()]),
                ingress: Some(vec![NetworkPolicyIngressRule {
                    from: Some(vec![NetworkPolicyPeer {
                        pod_selector: Some(all_pods),
                        ..NetworkPolicyPeer::default()
                    }]),
                    ports: Some(tool_ports.iter().map(|p| port(*p, Protocol::TCP)).collect()),
                }]),
                egress: None,
            }),
        });
    }
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// The fields (`spec.egress`) where a live policy differs from `want`;
/// empty when they agree. Compared as JSON with empty lists and absent
/// fields alike (the apiserver drops empty lists).
pub fn differs(live: &NetworkPolicy, want: &NetworkPolicy) -> Vec<String> {
    let norm = |p: &NetworkPolicy| normalized(serde_json::to_value(&p.spec).unwrap_or_default());
    super::diff::diff_paths(&norm(live), &norm(want), "spec")
}

fn normalized(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, normalized(v)))
                .filter(|(_, v)| {
                    !matches!(v, Value::Null)
                        && v != &Value::Array(vec![])
                        && v != &Value::Object(Default::default())
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(normalized).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::tenant::EgressPort;

    fn example() -> crate::fleet::Fleet {
        crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn every_tenant_is_denied_by_default_and_allowed_only_its_destinations() {
        let f = example();
        let release = &f.release("2026.11.1").unwrap().value;
        let globex = &f.tenants["globex"];
        let ws = super::super::saga::desired_workloads(globex, release);
        let ps = policies("globex", &globex.settings, &ws, &Platform::default());
        let names: Vec<_> = ps
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            [POLICY_DEFAULT_DENY, POLICY_EGRESS, POLICY_TOOLS_INGRESS]
        );
        let deny = ps[0].spec.as_ref().unwrap();
        assert_eq!(deny.policy_types.as_deref().unwrap(), ["Ingress", "Egress"]);
        assert!(deny.ingress.is_none() && deny.egress.is_none());
        let egress = ps[1].spec.as_ref().unwrap().egress.as_ref().unwrap();
        // DNS, the operator, the tools, and globex's object store.
        assert_eq!(egress.len(), 4, "{egress:?}");
        let last = &egress[3];
        let block = last.to.as_ref().unwrap()[0].ip_block.as_ref().unwrap();
        assert_eq!(block.cidr, "10.20.0.0/16");
        assert_eq!(
            last.ports.as_ref().unwrap()[0].port,
            Some(IntOrString::Int(443))
        );
        // Every policy carries the managed-by label (prune and audit key on it).
        for p in &ps {
            assert_eq!(
                p.metadata.labels.as_ref().unwrap()[LABEL_MANAGED_BY],
                MANAGED_BY
            );
        }
    }

    #[test]
    fn a_widened_policy_names_its_fields_and_empty_lists_are_no_difference() {
        let mut spec = TenantSpec::default();
        spec.allowed_egress.push(EgressRule {
            name: "db".into(),
            namespace: Some("data".into()),
            ports: vec![EgressPort {
                port: 5432,
                protocol: Protocol::TCP,
            }],
            ..EgressRule::default()
        });
        let want = policies("t", &spec, &[], &Platform::default());
        assert_eq!(want.len(), 2, "no tools: no ingress policy");
        let mut live = want[1].clone();
        assert!(differs(&live, &want[1]).is_empty());
        live.spec.as_mut().unwrap().ingress = Some(vec![]);
        assert!(
            differs(&live, &want[1]).is_empty(),
            "an empty list is absent"
        );
        live.spec
            .as_mut()
            .unwrap()
            .egress
            .as_mut()
            .unwrap()
            .push(NetworkPolicyEgressRule::default());
        assert_eq!(differs(&live, &want[1]), ["spec.egress"]);
    }
}
