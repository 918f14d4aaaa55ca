//! `manifests/<tenant>/tenant.yaml`: a tenant's own settings, read from the
//! fleet repository (never applied as an object): the node tier its pods
//! run on and what its pods may reach beyond the platform's defaults.
//!
//! ```yaml
//! apiVersion: autonomic.sh/v1alpha1
//! kind: Tenant
//! metadata: {name: acme}          # optional: the folder names the tenant
//! spec:
//!   nodeTier: standard            # nodes labelled autonomic.sh/node-tier=standard
//!   allowedEgress:
//!     - name: github
//!       cidr: 140.82.112.0/20
//!       ports: [{port: 443}]
//!     - name: vector-db
//!       namespace: data           # pods in another namespace
//!       podLabels: {app: qdrant}
//!       ports: [{port: 6333}]
//! ```
//!
//! Pure: types and their checks; the fleet loader ([`crate::fleet`]) reads
//! the file.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::names::{is_dns1123_label, is_label_value};

pub mod lifecycle;
pub mod placement;
mod resource;
pub mod tiers;
pub use lifecycle::{
    DEFAULT_AGENTFS_NAME, DEFAULT_OFFBOARD_GRACE, DefaultAgentFs, MAX_UID, MIN_UID, Retention,
    StorageSpec, SupportSpec, UidRange,
};
pub use resource::{
    ControlPlaneAcks, RegistrationAck, Tenant, TenantOperation, TenantPhase, TenantResourceSpec,
    TenantStatus,
};

pub const KIND_TENANT: &str = "Tenant";
/// The file that holds it, in the tenant's folder.
pub const TENANT_FILE: &str = "tenant.yaml";

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantDoc {
    #[serde(default)]
    pub api_version: String,
    pub kind: String,
    /// Optional: the folder names the tenant.
    #[serde(default)]
    pub metadata: TenantMeta,
    #[serde(default)]
    pub spec: TenantSpec,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TenantMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What a tenant's pods may do, beyond what every tenant gets.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantSpec {
    /// Nodes labelled `autonomic.sh/node-tier=<tier>` (and tainted so, if
    /// the cluster reserves them). Unset: any node but a control-plane one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_tier: Option<String>,
    /// Egress allowed on top of DNS, the tenant's model gateway and broker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_egress: Vec<EgressRule>,
    /// The tier (from `manifests/tiers.yaml`) whose quota and limits the tenant gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// The rollout wave the tenant belongs to: `canary`, `low-risk` or
    /// `fleet` (lint checks it against the releases' waves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
    /// The uids its pods run as; no two tenants share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid_range: Option<UidRange>,
    /// The models its virtual key may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The capabilities its broker token is scoped to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Its support lane and contacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub support: Option<SupportSpec>,
    /// How long an offboarded tenant's namespace stays before it is
    /// deleted, unless confirmed (default 24h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offboard_grace_period: Option<String>,
    /// The clusters it runs on, when the fleet spans clusters. Read from
    /// `tenant.yaml` and taken out by the fleet loader
    /// ([`crate::fleet::Tenant::placement`]): a cluster's `Tenant` and
    /// `Rollout` never carry it, so placing a tenant on one more cluster
    /// changes nothing on the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub placement: Option<placement::Placement>,
}

/// One destination a tenant's pods may reach: a CIDR, or pods in a
/// namespace (optionally by labels); always on the listed ports.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressRule {
    /// For messages and for the policy's rule order.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    pub ports: Vec<EgressPort>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressPort {
    pub port: u16,
    #[serde(default)]
    pub protocol: Protocol,
}

#[derive(
    Debug,
    Clone,
    Copy,
    Deserialize,
    Serialize,
    PartialEq,
    Eq,
    Default,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
pub enum Protocol {
    #[default]
    TCP,
    UDP,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::TCP => "TCP",
            Protocol::UDP => "UDP",
        }
    }
}

/// Why an egress destination is not a usable CIDR; each names the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CidrError {
    #[error("{0:?} is not a CIDR (address/prefix)")]
    NoPrefix(String),
    #[error("{cidr:?}: {ip:?} is not an IP address")]
    BadAddress {
        cidr: String,
        ip: String,
        #[source]
        source: std::net::AddrParseError,
    },
    #[error("{cidr:?}: prefix {bits:?} is not a number")]
    BadPrefix {
        cidr: String,
        bits: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("{cidr:?}: prefix /{bits} is longer than /{max}")]
    TooLong { cidr: String, bits: u8, max: u8 },
    #[error("{0:?} allows every address; name the destinations instead")]
    Everything(String),
}

/// `a.b.c.d/n` or an IPv6 CIDR, with the host bits clear.
fn check_cidr(s: &str) -> Result<(), CidrError> {
    let (ip, bits) = s
        .split_once('/')
        .ok_or_else(|| CidrError::NoPrefix(s.to_owned()))?;
    let ip: IpAddr = ip.parse().map_err(|source| CidrError::BadAddress {
        cidr: s.to_owned(),
        ip: ip.to_owned(),
        source,
    })?;
    let bits: u8 = bits.parse().map_err(|source| CidrError::BadPrefix {
        cidr: s.to_owned(),
        bits: bits.to_owned(),
        source,
    })?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return Err(CidrError::TooLong {
            cidr: s.to_owned(),
            bits,
            max,
        });
    }
    if bits == 0 {
        return Err(CidrError::Everything(s.to_owned()));
    }
    Ok(())
}

impl TenantDoc {
    /// Every problem, each naming its field; `tenant` is the folder name.
    pub fn problems(&self, tenant: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.kind != KIND_TENANT {
            out.push(format!("kind must be {KIND_TENANT}, not {:?}", self.kind));
        }
        if let Some(name) = &self.metadata.name
            && name != tenant
        {
            out.push(format!(
                "metadata.name must be {tenant:?} (the tenant folder) or omitted, not {name:?}"
            ));
        }
        if let Some(tier) = &self.spec.node_tier
            && (tier.is_empty() || !is_label_value(tier))
        {
            out.push(format!(
                "spec.nodeTier {tier:?} is not a label value (at most 63 letters, digits, '-', '_', '.')"
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, r) in self.spec.allowed_egress.iter().enumerate() {
            let at = format!("spec.allowedEgress[{i}]");
            if r.name.is_empty() {
                out.push(format!("{at}.name is empty"));
            } else if !names.insert(r.name.as_str()) {
                out.push(format!("{at}.name {:?} is used twice", r.name));
            }
            match (&r.cidr, &r.namespace) {
                (Some(_), Some(_)) => out.push(format!("{at}: set cidr or namespace, not both")),
                (None, None) => out.push(format!("{at}: set cidr or namespace")),
                (Some(c), None) => {
                    if let Err(e) = check_cidr(c) {
                        out.push(format!("{at}.cidr: {e}"));
                    }
                    if !r.pod_labels.is_empty() {
                        out.push(format!("{at}.podLabels needs namespace, not cidr"));
                    }
                }
                (None, Some(ns)) => {
                    if !is_dns1123_label(ns) {
                        out.push(format!("{at}.namespace {ns:?} is not a namespace name"));
                    }
                }
            }
            for (k, v) in &r.pod_labels {
                if k.is_empty() || !is_label_value(v) {
                    out.push(format!("{at}.podLabels {k:?}: {v:?} is not a label"));
                }
            }
            if r.ports.is_empty() {
                out.push(format!("{at}.ports is empty; name the ports it may use"));
            }
            for (j, p) in r.ports.iter().enumerate() {
                if p.port == 0 {
                    out.push(format!("{at}.ports[{j}].port must be 1-65535"));
                }
            }
        }
        lifecycle::problems(&self.spec, &mut out);
        if let Some(p) = &self.spec.placement {
            out.extend(p.problems());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(yaml: &str) -> TenantDoc {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_good_tenant_has_no_problems() {
        let d = doc(
            "kind: Tenant\nmetadata: {name: acme}\nspec:\n  nodeTier: standard\n  allowedEgress:\n  - {name: gh, cidr: 140.82.112.0/20, ports: [{port: 443}]}\n  - {name: db, namespace: data, podLabels: {app: qdrant}, ports: [{port: 6333, protocol: UDP}]}\n",
        );
        assert_eq!(d.problems("acme"), Vec::<String>::new());
        assert_eq!(d.spec.allowed_egress[1].ports[0].protocol, Protocol::UDP);
        let full = doc(
            "kind: Tenant\nspec:\n  tier: standard\n  wave: canary\n  storage: {storageClass: fast, quota: 20Gi, retention: delete}\n  uidRange: {start: 200000, size: 10000}\n  models: [gpt-4o, claude-sonnet]\n  capabilities: [search]\n  support: {lane: acme-support, contacts: [ops@acme.example]}\n  offboardGracePeriod: 48h\n",
        );
        assert_eq!(full.problems("acme"), Vec::<String>::new());
        assert_eq!(full.spec.storage.unwrap().retention, Retention::Delete);
    }

    #[test]
    fn every_problem_names_its_field() {
        let cases = [
            ("kind: Tenant\nmetadata: {name: other}\n", "metadata.name"),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec: {nodeTier: 'a b'}\n",
                "spec.nodeTier",
            ),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec:\n  allowedEgress: [{name: x, ports: [{port: 1}]}]\n",
                "spec.allowedEgress[0]: set cidr or namespace",
            ),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec:\n  allowedEgress: [{name: x, cidr: 0.0.0.0/0, ports: [{port: 1}]}]\n",
                "spec.allowedEgress[0].cidr",
            ),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec:\n  allowedEgress: [{name: x, cidr: 10.0.0.0/33, ports: [{port: 1}]}]\n",
                "/32",
            ),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec:\n  allowedEgress: [{name: x, namespace: data, ports: []}]\n",
                "spec.allowedEgress[0].ports is empty",
            ),
            (
                "kind: Tenant\nmetadata: {name: acme}\nspec:\n  allowedEgress: [{name: x, namespace: Data, ports: [{port: 1}]}, {name: x, namespace: d, ports: [{port: 0}]}]\n",
                "spec.allowedEgress[1].name \"x\" is used twice",
            ),
        ];
        let lifecycle = [
            ("spec: {tier: Gold}", "spec.tier \"Gold\""),
            ("spec: {wave: ''}", "spec.wave is empty"),
            (
                "spec: {storage: {storageClass: 'fast ssd'}}",
                "spec.storage.storageClass",
            ),
            (
                "spec: {storage: {quota: lots}}",
                "spec.storage.quota \"lots\"",
            ),
            ("spec: {storage: {quota: '0'}}", "spec.storage.quota \"0\""),
            (
                "spec: {uidRange: {start: 100, size: 10}}",
                "spec.uidRange.start 100 is below",
            ),
            (
                "spec: {uidRange: {start: 20000, size: 0}}",
                "spec.uidRange.size",
            ),
            (
                "spec: {uidRange: {start: 2147483000, size: 10000}}",
                "goes past the last uid",
            ),
            (
                "spec: {models: [gpt-4o, gpt-4o]}",
                "spec.models[1] \"gpt-4o\" is listed twice",
            ),
            ("spec: {capabilities: ['a/b']}", "spec.capabilities[0]"),
            ("spec: {support: {lane: 'Ops Lane'}}", "spec.support.lane"),
            (
                "spec: {support: {lane: ops, contacts: ['']}}",
                "spec.support.contacts[0]",
            ),
            (
                "spec: {offboardGracePeriod: soon}",
                "spec.offboardGracePeriod",
            ),
        ];
        for (spec, want) in lifecycle {
            let yaml = format!("kind: Tenant\n{spec}\n");
            let p = doc(&yaml).problems("acme");
            assert!(p.iter().any(|m| m.contains(want)), "{yaml}: {p:?}");
        }
        for (yaml, want) in cases {
            let p = doc(yaml).problems("acme");
            assert!(p.iter().any(|m| m.contains(want)), "{yaml}: {p:?}");
        }
    }

    /// The messages a tenant's author reads, word for word.
    #[test]
    fn cidr_refusals_name_the_text() {
        let cases = [
            ("10.0.0.0", "\"10.0.0.0\" is not a CIDR (address/prefix)"),
            ("10.0.0/8", "\"10.0.0/8\": \"10.0.0\" is not an IP address"),
            ("10.0.0.0/x", "\"10.0.0.0/x\": prefix \"x\" is not a number"),
            (
                "10.0.0.0/33",
                "\"10.0.0.0/33\": prefix /33 is longer than /32",
            ),
            (
                "::/0",
                "\"::/0\" allows every address; name the destinations instead",
            ),
        ];
        for (cidr, want) in cases {
            assert_eq!(check_cidr(cidr).unwrap_err().to_string(), want);
        }
        assert!(check_cidr("fd00::/8").is_ok());
    }
}
