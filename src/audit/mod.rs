//! `exo audit` and the operator's scheduled audit: checks that the tenant
//! isolation invariants hold in the cluster, because construction is not
//! proof.
//!
//! Shape: [`collect`] reads the cluster with one LIST per kind (paged), no
//! per-object GET; [`check`] is pure over that [`Snapshot`] and returns
//! every [`Finding`], each naming the rule, the resource and what is wrong.
//! A finding never carries a Secret's value: only names (of the Secret,
//! the key, the env var) and the kind of credential a value looks like.
//!
//! The tenants are the namespaces that hold a Rollout (`release`): its
//! spec carries the tenant's settings (node tier, allowed egress) from git.
//! The collection lists the Rollouts first and keeps of the other kinds
//! only what the rules can read ([`Scope`]): the tenants' namespaces.

pub mod collect;
pub mod credentials;
mod mounts;
mod network;
mod placement;
pub mod report;
pub mod schedule;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use serde::Serialize;

use crate::crd::{Fleet, Rollout, Tool};

pub use collect::{AuditError, collect};

/// The audit's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// A pod on the wrong node tier, or on a control-plane node.
    Placement,
    /// A tenant namespace without its NetworkPolicies, or with policies
    /// that allow more than Exo's.
    Network,
    /// Provider credentials in a tenant pod, or another tenant's token.
    Credentials,
    /// A writable baseline or skills mount; a volume outside the allowlist.
    Mounts,
    /// A baseline ConfigMap that is not immutable; a pod mounting a
    /// version no release pins.
    Immutability,
}

impl Rule {
    pub const ALL: [Rule; 5] = [
        Rule::Placement,
        Rule::Network,
        Rule::Credentials,
        Rule::Mounts,
        Rule::Immutability,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Placement => "placement",
            Rule::Network => "network",
            Rule::Credentials => "credentials",
            Rule::Mounts => "mounts",
            Rule::Immutability => "immutability",
        }
    }

    pub fn parse(s: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The Fleet condition type that reports the rule (`True`: clean).
    pub fn condition(self) -> &'static str {
        match self {
            Rule::Placement => "Placement",
            Rule::Network => "Network",
            Rule::Credentials => "Credentials",
            Rule::Mounts => "Mounts",
            Rule::Immutability => "Immutability",
        }
    }

    /// The upstream alert reason and Event reason suffix.
    pub fn reason(self) -> &'static str {
        match self {
            Rule::Placement => "AuditPlacement",
            Rule::Network => "AuditNetwork",
            Rule::Credentials => "AuditCredentials",
            Rule::Mounts => "AuditMounts",
            Rule::Immutability => "AuditImmutability",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    pub rule: Rule,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    /// `Kind/name`, e.g. `Pod/agent-x-1234`.
    pub object: String,
    /// What is wrong, naming fields, never a Secret's value.
    pub message: String,
}

impl Finding {
    fn new(rule: Rule, namespace: &str, object: String, message: String) -> Self {
        Finding {
            rule,
            namespace: namespace.to_owned(),
            object,
            message,
        }
    }

    /// A stable identity (rule, object and what), for alert keys.
    pub fn key(&self) -> String {
        let mut h = crate::cluster::build::spec_hash(&self.message).unwrap_or_default();
        h.truncate(8);
        format!("audit/{}/{}/{}/{h}", self.rule, self.namespace, self.object)
    }
}

/// Everything the audit reads, one list per kind.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub rollouts: Vec<Rollout>,
    pub fleets: Vec<Fleet>,
    pub pods: Vec<Pod>,
    pub nodes: Vec<Node>,
    pub policies: Vec<NetworkPolicy>,
    pub secrets: Vec<Secret>,
    pub configmaps: Vec<ConfigMap>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub tools: Vec<Tool>,
}

/// The tenant a Rollout makes of its namespace: a Rollout named `release`
/// ([`crate::meta::ROLLOUT_NAME`]) is one tenant's.
fn tenant_of(r: &Rollout) -> Option<String> {
    (r.name_any() == crate::meta::ROLLOUT_NAME)
        .then(|| r.namespace())
        .flatten()
}

/// What the collection keeps of each page of the namespaced kinds, so a
/// cluster's other objects (10,000 Tools of a namespace that is no
/// tenant's, say) are never held: the rules read Pods, Tools, Secrets,
/// PersistentVolumeClaims and NetworkPolicies only in tenant namespaces
/// (by namespace, or through a tenant pod's own namespace), and ConfigMaps
/// there or wherever one is a baseline version (any namespace's name the
/// baseline sources the immutability rule knows). Pure.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    tenants: BTreeSet<String>,
}

impl Scope {
    /// The scope of a cluster holding `rollouts`.
    pub fn new(rollouts: &[Rollout]) -> Self {
        Scope {
            tenants: rollouts.iter().filter_map(tenant_of).collect(),
        }
    }

    /// Whether a namespaced object other than a ConfigMap is kept.
    pub fn keeps<K: kube::Resource>(&self, obj: &K) -> bool {
        obj.meta()
            .namespace
            .as_deref()
            .is_some_and(|ns| self.tenants.contains(ns))
    }

    /// Whether a ConfigMap is kept.
    pub fn keeps_configmap(&self, cm: &ConfigMap) -> bool {
        self.keeps(cm) || cm.labels().contains_key(crate::meta::LABEL_BASELINE)
    }

    /// `snap` less what the scope does not keep (what [`collect`] does
    /// page by page).
    pub fn narrow(&self, snap: &mut Snapshot) {
        snap.pods.retain(|o| self.keeps(o));
        snap.tools.retain(|o| self.keeps(o));
        snap.secrets.retain(|o| self.keeps(o));
        snap.claims.retain(|o| self.keeps(o));
        snap.policies.retain(|o| self.keeps(o));
        snap.configmaps.retain(|o| self.keeps_configmap(o));
    }
}

/// Lookups the rules share, built once per check.
pub(crate) struct Index<'a> {
    pub snap: &'a Snapshot,
    /// Tenant namespace -> its Rollout.
    pub tenants: BTreeMap<String, &'a Rollout>,
    pub secrets: BTreeMap<(String, String), &'a Secret>,
    pub configmaps: BTreeMap<(String, String), &'a ConfigMap>,
    /// Every version any Fleet's releases pin; `None` when no Fleet says.
    pub pinned: Option<BTreeSet<String>>,
}

impl<'a> Index<'a> {
    fn new(snap: &'a Snapshot, only: &BTreeSet<String>) -> Self {
        let key = |ns: Option<String>, name: String| (ns.unwrap_or_default(), name);
        let tenants = snap
            .rollouts
            .iter()
            .filter_map(|r| Some((tenant_of(r)?, r)))
            .filter(|(ns, _)| only.is_empty() || only.contains(ns))
            .collect();
        let pinned = (!snap.fleets.is_empty()).then(|| {
            snap.fleets
                .iter()
                .filter_map(|f| f.status.as_ref())
                .flat_map(|s| s.pinned_baselines.iter().cloned())
                .collect()
        });
        Index {
            snap,
            tenants,
            secrets: snap
                .secrets
                .iter()
                .map(|s| (key(s.namespace(), s.name_any()), s))
                .collect(),
            configmaps: snap
                .configmaps
                .iter()
                .map(|c| (key(c.namespace(), c.name_any()), c))
                .collect(),
            pinned,
        }
    }

    /// Pods in tenant namespaces that are not finished.
    pub fn tenant_pods(&self) -> impl Iterator<Item = (&'a str, &'a Pod)> + '_ {
        self.snap.pods.iter().filter_map(|p| {
            let ns = p.metadata.namespace.as_deref()?;
            let done = p
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|ph| ph == "Succeeded" || ph == "Failed");
            (self.tenants.contains_key(ns) && !done).then_some((ns, p))
        })
    }
}

/// How many tenant namespaces an audit with `only` covers.
pub fn tenants(snap: &Snapshot, only: &BTreeSet<String>) -> usize {
    Index::new(snap, only).tenants.len()
}

/// Every finding, sorted; `only` limits the audit to those namespaces
/// (empty: every tenant). Pure.
pub fn check(snap: &Snapshot, only: &BTreeSet<String>, rules: &BTreeSet<Rule>) -> Vec<Finding> {
    let ix = Index::new(snap, only);
    let want = |r: Rule| rules.is_empty() || rules.contains(&r);
    let mut out = Vec::new();
    if want(Rule::Placement) {
        out.extend(placement::check(&ix));
    }
    if want(Rule::Network) {
        out.extend(network::check(&ix));
    }
    if want(Rule::Credentials) {
        out.extend(credentials::check(&ix));
    }
    if want(Rule::Mounts) {
        out.extend(mounts::check_mounts(&ix));
    }
    if want(Rule::Immutability) {
        out.extend(mounts::check_immutability(&ix));
    }
    out.sort();
    out.dedup();
    out
}

/// `Kind/name` of a pod.
pub(crate) fn pod_object(p: &Pod) -> String {
    format!("Pod/{}", p.name_any())
}

#[cfg(test)]
mod tests;
