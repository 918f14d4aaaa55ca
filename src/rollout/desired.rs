//! What one tenant should run, as a pure function of (commit, release):
//! its workloads re-pointed to the release, its AgentFS volumes and the
//! baseline versions the workloads mount, plus one content hash over all
//! of it. The engine writes the hash into the tenant's Rollout spec; the
//! saga runs again whenever it changes, whether a release moved or a
//! manifest did.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use sha2::{Digest, Sha256};

use k8s_openapi::api::networking::v1::NetworkPolicy;

use super::isolation::{self, Platform};
use super::saga::{Workload, baselines_needed, desired_workloads};
use crate::crd::{AgentFS, InventoryKind};
use crate::fleet::Tenant;
use crate::release::{Release, WaveName};

/// Everything rendered for one tenant.
#[derive(Debug, Clone)]
pub struct TenantDesired {
    pub workloads: Vec<Workload>,
    pub filesystems: Vec<AgentFS>,
    /// The tenant's `tenant.yaml` (node tier, allowed egress).
    pub settings: crate::crd::tenant::TenantSpec,
    /// The tenant namespace's NetworkPolicies ([`super::isolation`]).
    pub policies: Vec<NetworkPolicy>,
    /// Baseline version -> the release's content sha256 (`None`: the
    /// release does not pin that version; the publish step fails on it).
    pub baselines: BTreeMap<String, Option<String>>,
    /// sha256 (hex) over the release name and all of the above.
    pub hash: String,
}

/// One tenant at a synced commit: the wave it is in, the release that
/// wave points at, and what it should run there. What the engine drives
/// each tenant's saga towards, and what the steps check against.
#[derive(Debug, Clone)]
pub struct TenantTarget {
    pub wave: WaveName,
    pub release: Release,
    pub desired: TenantDesired,
}

/// The canonical form hashed: ordered maps and the specs as serialized,
/// so the same input always gives the same bytes.
#[derive(Serialize)]
struct Canonical<'a> {
    release: &'a str,
    /// kind/name -> (labels, annotations, spec)
    objects: BTreeMap<String, serde_json::Value>,
    baselines: &'a BTreeMap<String, Option<String>>,
}

impl TenantDesired {
    pub fn new(tenant: &Tenant, release: &Release) -> Self {
        let workloads = desired_workloads(tenant, release);
        let filesystems: Vec<AgentFS> = tenant
            .filesystems
            .iter()
            .map(|f| {
                let mut fs = f.value.clone();
                fs.status = None;
                fs
            })
            .collect();
        let baselines = baselines_needed(&workloads, release);
        let mut objects = BTreeMap::new();
        for w in &workloads {
            let (meta, spec) = match w {
                Workload::Agent(a) => (&a.metadata, serde_json::to_value(&a.spec)),
                Workload::Tool(t) => (&t.metadata, serde_json::to_value(&t.spec)),
            };
            objects.insert(
                format!("{}/{}", w.kind(), w.name()),
                serde_json::json!([meta.labels, meta.annotations, spec.ok()]),
            );
        }
        for fs in &filesystems {
            objects.insert(
                format!(
                    "AgentFS/{}",
                    fs.metadata.name.as_deref().unwrap_or_default()
                ),
                serde_json::json!([
                    fs.metadata.labels,
                    fs.metadata.annotations,
                    serde_json::to_value(&fs.spec).ok()
                ]),
            );
        }
        let ns = tenant.name.as_str();
        let policies = isolation::policies(ns, &tenant.settings, &workloads, &Platform::default());
        for p in &policies {
            objects.insert(
                format!(
                    "NetworkPolicy/{}",
                    p.metadata.name.as_deref().unwrap_or_default()
                ),
                serde_json::to_value(&p.spec).unwrap_or_default(),
            );
        }
        let canonical = Canonical {
            release: &release.metadata.name,
            objects,
            baselines: &baselines,
        };
        // Serializing maps of strings and JSON values cannot fail; an
        // empty input would still hash to a stable value.
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        let hash = hex::encode(Sha256::digest(&bytes));
        TenantDesired {
            workloads,
            filesystems,
            settings: tenant.settings.clone(),
            policies,
            baselines,
            hash,
        }
    }

    /// The (kind, name) of every object the tenant's inventory should hold.
    pub fn keys(&self) -> BTreeSet<(InventoryKind, String)> {
        let mut out: BTreeSet<(InventoryKind, String)> = self
            .workloads
            .iter()
            .map(|w| {
                let kind = match w {
                    Workload::Agent(_) => InventoryKind::Agent,
                    Workload::Tool(_) => InventoryKind::Tool,
                };
                (kind, w.name().to_owned())
            })
            .collect();
        out.extend(self.filesystems.iter().map(|fs| {
            (
                InventoryKind::AgentFS,
                fs.metadata.name.clone().unwrap_or_default(),
            )
        }));
        out
    }
}

/// The (kind, name) of every object `manifests/<tenant>/` declares: the
/// inventory a tenant's saga keeps, whatever the release (re-pointing
/// changes specs, never names). `exo release plan --prune` compares with it.
pub fn declared(tenant: &Tenant) -> BTreeSet<(InventoryKind, String)> {
    let name = |n: &Option<String>| n.clone().unwrap_or_default();
    let agents = tenant
        .agents
        .iter()
        .map(|a| (InventoryKind::Agent, name(&a.value.metadata.name)));
    let tools = tenant
        .tools
        .iter()
        .map(|t| (InventoryKind::Tool, name(&t.value.metadata.name)));
    let filesystems = tenant
        .filesystems
        .iter()
        .map(|f| (InventoryKind::AgentFS, name(&f.value.metadata.name)));
    agents.chain(tools).chain(filesystems).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> crate::fleet::Fleet {
        crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn the_hash_follows_release_and_manifests_and_nothing_else() {
        let f = example();
        let old = &f.release("2026.11.0").unwrap().value;
        let new = &f.release("2026.11.1").unwrap().value;
        let acme = &f.tenants["acme"];
        let a = TenantDesired::new(acme, new);
        assert_eq!(a.hash.len(), 64);
        assert_eq!(a.hash, TenantDesired::new(acme, new).hash, "stable");
        assert_ne!(
            a.hash,
            TenantDesired::new(acme, old).hash,
            "release moves it"
        );
        assert_ne!(
            a.hash,
            TenantDesired::new(&f.tenants["globex"], new).hash,
            "per tenant"
        );

        // A manifest edit (one env var) moves it too.
        let mut edited = acme.clone();
        let agent = &mut edited.agents[0].value;
        agent.spec.runtime.env.push(crate::crd::EnvVar {
            name: "X".into(),
            value: "1".into(),
        });
        assert_ne!(a.hash, TenantDesired::new(&edited, new).hash);

        // A removed Agent leaves the inventory keys.
        let mut removed = acme.clone();
        let gone = removed.agents.remove(0).value.metadata.name.unwrap();
        let d = TenantDesired::new(&removed, new);
        assert_ne!(a.hash, d.hash);
        assert_eq!(a.keys(), declared(acme), "re-pointing never changes names");
        assert!(a.keys().contains(&(InventoryKind::Agent, gone.clone())));
        assert!(!d.keys().contains(&(InventoryKind::Agent, gone)));
    }
}
