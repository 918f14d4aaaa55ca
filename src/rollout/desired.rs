//! What one tenant should run, as a pure function of (commit, release):
//! its workloads re-pointed to the release, its AgentFS volumes and the
//! baseline versions the workloads mount, plus one content hash over all
//! of it. The engine writes the hash into the tenant's Rollout spec; the
//! saga runs again whenever it changes, whether a release moved or a
//! manifest did.
//!
//! Guarantees:
//! - the hash is a function of the release's name, each desired object
//!   (kind/name, labels, annotations, spec) and the baselines: the same
//!   input gives the same hash, any change of one of them a new one;
//! - it is made of one sha256 per object, so a render that is told which
//!   source files did not change ([`Earlier`]) takes their re-pointed
//!   workloads and hashes over from the last render instead of doing them
//!   again: a one-file change serializes and hashes one object, whatever
//!   the tenant's size. A reused object is the one a fresh render would
//!   give (same file bytes, same release, same tenant settings; checked).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use k8s_openapi::api::networking::v1::NetworkPolicy;

use super::isolation::{self, Platform};
use super::saga::{Workload, baselines_needed, desired_agent, desired_tool};
use crate::crd::{AgentFS, BackupPolicy, InventoryKind};
use crate::fleet::Tenant;
use crate::release::{Release, WaveName};

/// Everything rendered for one tenant.
#[derive(Debug, Clone)]
pub struct TenantDesired {
    pub workloads: Vec<Workload>,
    /// Per workload, in the same order: its source file (relative to the
    /// repository root) and the sha256 of its desired object.
    sources: Vec<(PathBuf, [u8; 32])>,
    pub filesystems: Vec<AgentFS>,
    /// The tenant's `tenant.yaml` (node tier, allowed egress).
    pub settings: crate::crd::tenant::TenantSpec,
    /// The tenant's tier's default backup policy (`manifests/tiers.yaml`),
    /// which each AgentFS declaring none got, its placeholders filled.
    pub backup_default: Option<BackupPolicy>,
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

/// What a render may take over: the tenant's last target, and which of
/// its source files (paths relative to the repository root) hold the same
/// bytes now (by their git id, say).
pub struct Earlier<'a> {
    pub target: &'a TenantTarget,
    pub same_file: &'a dyn Fn(&Path) -> bool,
}

/// The canonical form hashed: ordered maps, one sha256 per object, so the
/// same input always gives the same bytes.
#[derive(Serialize)]
struct Canonical<'a> {
    release: &'a str,
    /// kind/name -> sha256 (hex) of (labels, annotations, spec)
    objects: BTreeMap<String, String>,
    baselines: &'a BTreeMap<String, Option<String>>,
}

/// sha256 of one object's labels, annotations and spec, as serialized.
fn object_hash<S: Serialize>(meta: &kube::core::ObjectMeta, spec: &S) -> [u8; 32] {
    let value = serde_json::json!([meta.labels, meta.annotations, spec]);
    // Serializing maps of strings and JSON values cannot fail.
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

fn workload_hash(w: &Workload) -> [u8; 32] {
    match w {
        Workload::Agent(a) => object_hash(&a.metadata, &a.spec),
        Workload::Tool(t) => object_hash(&t.metadata, &t.spec),
    }
}

impl TenantDesired {
    pub fn new(tenant: &Tenant, release: &Release) -> Self {
        Self::render(tenant, release, None, None)
    }

    /// [`TenantDesired::new`] with the tier's default backup policy
    /// `backup_default` for the AgentFS that declare none, taking over
    /// from `earlier` the workloads of the files it says did not change.
    /// `earlier` is used only when it was rendered for the same release
    /// and the same tenant settings.
    pub fn render(
        tenant: &Tenant,
        release: &Release,
        backup_default: Option<&BackupPolicy>,
        earlier: Option<Earlier<'_>>,
    ) -> Self {
        let earlier = earlier.filter(|e| {
            e.target.release == *release && e.target.desired.settings == tenant.settings
        });
        let reusable: HashMap<&Path, usize> = earlier
            .as_ref()
            .map(|e| {
                let d = &e.target.desired;
                d.sources
                    .iter()
                    .enumerate()
                    .map(|(i, (p, _))| (p.as_path(), i))
                    .collect()
            })
            .unwrap_or_default();
        let take = |path: &Path, kind: &str| -> Option<(Workload, [u8; 32])> {
            let e = earlier.as_ref()?;
            let d = &e.target.desired;
            let i = *reusable.get(path)?;
            let w = d.workloads.get(i).filter(|w| w.kind() == kind)?;
            (e.same_file)(path).then(|| (w.clone(), d.sources[i].1))
        };
        let mut workloads = Vec::with_capacity(tenant.tools.len() + tenant.agents.len());
        let mut sources = Vec::with_capacity(workloads.capacity());
        let mut push = |path: &Path, (w, h): (Workload, [u8; 32])| {
            workloads.push(w);
            sources.push((path.to_owned(), h));
        };
        // The order of `saga::desired_workloads`: Tools, then Agents.
        for t in &tenant.tools {
            let made = take(&t.path, "Tool").unwrap_or_else(|| {
                let w = desired_tool(&t.value, tenant, release);
                let h = workload_hash(&w);
                (w, h)
            });
            push(&t.path, made);
        }
        for a in &tenant.agents {
            let made = take(&a.path, "Agent").unwrap_or_else(|| {
                let w = desired_agent(&a.value, tenant, release);
                let h = workload_hash(&w);
                (w, h)
            });
            push(&a.path, made);
        }
        let filesystems: Vec<AgentFS> = tenant
            .filesystems
            .iter()
            .map(|f| {
                let mut fs = f.value.clone();
                fs.status = None;
                if fs.spec.backup.is_none()
                    && let Some(d) = backup_default
                {
                    let name = fs.metadata.name.as_deref().unwrap_or_default();
                    fs.spec.backup = Some(d.for_volume(&tenant.name, name));
                }
                fs
            })
            .collect();
        let baselines = baselines_needed(&workloads, release);
        let mut objects = BTreeMap::new();
        for (w, (_, h)) in workloads.iter().zip(&sources) {
            objects.insert(format!("{}/{}", w.kind(), w.name()), hex::encode(h));
        }
        for fs in &filesystems {
            objects.insert(
                format!(
                    "AgentFS/{}",
                    fs.metadata.name.as_deref().unwrap_or_default()
                ),
                hex::encode(object_hash(&fs.metadata, &fs.spec)),
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
                hex::encode(object_hash(&p.metadata, &p.spec)),
            );
        }
        let canonical = Canonical {
            release: &release.metadata.name,
            objects,
            baselines: &baselines,
        };
        let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
        let hash = hex::encode(Sha256::digest(&bytes));
        TenantDesired {
            workloads,
            sources,
            filesystems,
            settings: tenant.settings.clone(),
            backup_default: backup_default.cloned(),
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
        let mut edited = crate::fleet::Tenant::clone(acme);
        let agent = &mut edited.agents[0].value;
        agent.spec.runtime.env.push(crate::crd::EnvVar {
            name: "X".into(),
            value: "1".into(),
        });
        assert_ne!(a.hash, TenantDesired::new(&edited, new).hash);

        // A removed Agent leaves the inventory keys.
        let mut removed = crate::fleet::Tenant::clone(acme);
        let gone = removed.agents.remove(0).value.metadata.name.unwrap();
        let d = TenantDesired::new(&removed, new);
        assert_ne!(a.hash, d.hash);
        assert_eq!(a.keys(), declared(acme), "re-pointing never changes names");
        assert!(a.keys().contains(&(InventoryKind::Agent, gone.clone())));
        assert!(!d.keys().contains(&(InventoryKind::Agent, gone)));
    }

    /// The objects of a changed tenant's unchanged files come from the
    /// last render (here planted with a marker, to show they are taken and
    /// not rendered); the changed file is rendered; with another release
    /// or other settings nothing is taken; a render with nothing to take
    /// over is the plain render.
    #[test]
    fn a_render_takes_over_the_unchanged_files_only() {
        let f = example();
        let old = &f.release("2026.11.0").unwrap().value;
        let new = &f.release("2026.11.1").unwrap().value;
        // acme with a second Agent, in a file of its own.
        let mut acme = crate::fleet::Tenant::clone(&f.tenants["acme"]);
        let mut second = acme.agents[0].clone();
        second.value.metadata.name = Some("second".into());
        second.path = second.path.with_file_name("second.yaml");
        acme.agents.push(second);
        let acme = &acme;
        let fresh = TenantDesired::new(acme, new);
        let mut planted = TenantTarget {
            wave: WaveName::Canary,
            release: new.clone(),
            desired: fresh.clone(),
        };
        let marked = |w: &Workload| match w {
            Workload::Agent(a) => a
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("planted")),
            Workload::Tool(_) => false,
        };
        for w in &mut planted.desired.workloads {
            if let Workload::Agent(a) = w {
                a.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert("planted".into(), "yes".into());
            }
        }
        let changed = acme.agents[0].path.clone();
        let same_file = |p: &Path| p != changed;
        let again = TenantDesired::render(
            acme,
            new,
            None,
            Some(Earlier {
                target: &planted,
                same_file: &same_file,
            }),
        );
        let agents: Vec<&Workload> = again
            .workloads
            .iter()
            .filter(|w| w.kind() == "Agent")
            .collect();
        assert!(!marked(agents[0]), "the changed file is rendered again");
        assert!(
            agents[1..].iter().all(|w| marked(w)),
            "the others are taken over"
        );
        assert_eq!(again.hash, fresh.hash, "the hashes are taken over too");

        // Nothing to take: the plain render.
        let none = |_: &Path| false;
        let plain = TenantDesired::render(
            acme,
            new,
            None,
            Some(Earlier {
                target: &planted,
                same_file: &none,
            }),
        );
        assert!(!plain.workloads.iter().any(marked));
        assert_eq!(plain.hash, fresh.hash);

        // Another release, or other settings: the last render is not used.
        let all = |_: &Path| true;
        let other = TenantDesired::render(
            acme,
            old,
            None,
            Some(Earlier {
                target: &planted,
                same_file: &all,
            }),
        );
        assert!(!other.workloads.iter().any(marked));
        assert_eq!(other.hash, TenantDesired::new(acme, old).hash);
        let mut moved = crate::fleet::Tenant::clone(acme);
        moved.settings.node_tier = Some("gpu".into());
        let resettled = TenantDesired::render(
            &moved,
            new,
            None,
            Some(Earlier {
                target: &planted,
                same_file: &all,
            }),
        );
        assert!(!resettled.workloads.iter().any(marked));
        assert_eq!(resettled.hash, TenantDesired::new(&moved, new).hash);
    }

    /// An AgentFS that declares no backup gets its tier's default, for its
    /// own namespace and name; one that declares a policy keeps it; the
    /// default is part of the hash.
    #[test]
    fn an_agentfs_without_a_policy_gets_the_tiers_default() {
        let f = example();
        let new = &f.release("2026.11.1").unwrap().value;
        let mut globex = crate::fleet::Tenant::clone(&f.tenants["globex"]);
        assert!(!globex.filesystems.is_empty(), "the example declares one");
        let mut own = globex.filesystems[0].clone();
        own.value.metadata.name = Some("own".into());
        own.value.spec.backup = Some(BackupPolicy {
            every: "1d".into(),
            keep: 2,
            repository: "r.example.com/mine".into(),
            ..BackupPolicy::default()
        });
        globex.filesystems.push(own);
        let default = BackupPolicy {
            every: "6h".into(),
            keep: 14,
            repository: "r.example.com/backups/{namespace}/{name}".into(),
            ..BackupPolicy::default()
        };
        let plain = TenantDesired::new(&globex, new);
        let d = TenantDesired::render(&globex, new, Some(&default), None);
        let first = globex.filesystems[0].value.metadata.name.clone().unwrap();
        let got: Vec<(String, String)> = d
            .filesystems
            .iter()
            .map(|fs| {
                let b = fs.spec.backup.clone().unwrap();
                (fs.metadata.name.clone().unwrap(), b.repository)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    first.clone(),
                    format!("r.example.com/backups/globex/{first}")
                ),
                ("own".into(), "r.example.com/mine".into()),
            ]
        );
        assert_eq!(d.filesystems[0].spec.backup.as_ref().unwrap().keep, 14);
        assert_eq!(d.backup_default.as_ref(), Some(&default));
        assert_ne!(d.hash, plain.hash, "the default is in the hash");
        assert!(plain.filesystems[0].spec.backup.is_none());
    }
}
