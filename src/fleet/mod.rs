//! Reading a fleet repository: `manifests/`, `releases/`, `configmaps/` and
//! the wave-pointer file `releases/waves.yaml`.
//!
//! Layout:
//! - `manifests/<tenant>/*.yaml`: one Agent, Tool or AgentFS per file; the
//!   folder name is the tenant and its namespace; `tenant.yaml` (kind
//!   Tenant, [`tenant`]) holds the tenant's node tier and allowed egress.
//! - `releases/<name>.yaml`: one Release per file, named like the file.
//! - `releases/waves.yaml`: the WavePointers document.
//! - `configmaps/<name>/` or `configmaps/<name>@<label>/`: baseline sources.
//! - `clusters/<name>.yaml`: the clusters the fleet spans, when it spans
//!   several ([`cluster`]); a tenant's `tenant.yaml` then places it.
//!
//! Loading is all-or-nothing: every unusable file is reported, and nothing is
//! returned unless all of them parsed.
//!
//! Submodules, everything about the fleet repository in one place:
//! - [`yaml`]: strict YAML reading with budgets and positioned errors (pure);
//! - [`configmap`]: baseline folders -> immutable content-hashed ConfigMaps;
//! - [`gitsync`]: fetch and materialise one commit (git I/O, for the engine);
//! - [`repo`]: the user's checkout: commit a file and push (for the CLI);
//! - [`pin`]: tag -> digest against the registry;
//! - [`verify`]: signed commits: trusted keys, SSH and OpenPGP signatures.

pub mod cluster;
pub mod configmap;
pub mod gitsync;
pub mod pin;
pub mod release;
pub mod repo;
pub mod verify;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::crd::{Agent, AgentFS, Tool, tenant};
use configmap::Baseline;
use release::{KIND_RELEASE, KIND_WAVES, Release, WavePointers};

pub const WAVES_FILE: &str = "waves.yaml";

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// Files that could not be used at all, one message per file.
    #[error("{}", .0.join("\n"))]
    Unusable(Vec<String>),
}

/// A file that was read, for messages that name it. A tenant's objects
/// carry their path relative to the repository root
/// (`manifests/acme/router.yaml`): a tenant taken over from the load of
/// another checkout is then shared as it is, not copied and moved.
#[derive(Debug, Clone)]
pub struct Sourced<T> {
    pub path: PathBuf,
    pub value: T,
}

#[derive(Debug, Clone, Default)]
pub struct Tenant {
    pub name: String,
    pub agents: Vec<Sourced<Agent>>,
    pub tools: Vec<Sourced<Tool>>,
    pub filesystems: Vec<Sourced<AgentFS>>,
    /// `tenant.yaml`: node tier and allowed egress (defaults when absent),
    /// without its placement.
    pub settings: tenant::TenantSpec,
    /// `tenant.yaml`'s `spec.placement`: the clusters it runs on, when the
    /// fleet spans clusters ([`cluster`]). Kept apart from `settings`, which
    /// a cluster's `Tenant` and `Rollout` carry.
    pub placement: Option<tenant::placement::Placement>,
}

#[derive(Debug, Clone)]
pub struct Fleet {
    pub root: PathBuf,
    /// Sorted by file name.
    pub releases: Vec<Sourced<Release>>,
    pub waves: Option<Sourced<WavePointers>>,
    /// Shared: a sync takes an unchanged tenant over from its last load
    /// without copying it (its cost is the change, not the fleet).
    pub tenants: BTreeMap<String, Arc<Tenant>>,
    /// Every baseline source folder, sorted by folder.
    pub baselines: Vec<Sourced<Baseline>>,
    /// `manifests/tiers.yaml`, when the repository has one.
    pub tiers: Option<Sourced<tenant::tiers::TiersDoc>>,
    /// `clusters/*.yaml`, sorted by file; `None` without a `clusters/`
    /// folder (a single-cluster fleet).
    pub clusters: Option<Vec<Sourced<cluster::ClusterDoc>>>,
}

impl Fleet {
    pub fn release(&self, name: &str) -> Option<&Sourced<Release>> {
        self.releases.iter().find(|r| r.value.metadata.name == name)
    }

    /// Paths relative to the repository root, for messages.
    pub fn rel<'a>(&self, path: &'a Path) -> &'a Path {
        path.strip_prefix(&self.root).unwrap_or(path)
    }
}

#[derive(Deserialize)]
struct Kinded {
    kind: Option<String>,
}

fn yaml_files(dir: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            problems.push(format!("{}: cannot read: {e}", dir.display()));
            return out;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            problems.push(format!(
                "{}: symlinks are not allowed in a fleet repository",
                path.display()
            ));
            continue;
        }
        let is_yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "yaml" || e == "yml");
        if meta.is_file() && is_yaml {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn load_releases(
    root: &Path,
    problems: &mut Vec<String>,
) -> (Vec<Sourced<Release>>, Option<Sourced<WavePointers>>) {
    let mut releases = Vec::new();
    let mut waves = None;
    for path in yaml_files(&root.join("releases"), problems) {
        let kind = match crate::yaml::from_file::<Kinded>(&path) {
            Ok(k) => k.kind.unwrap_or_default(),
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        match kind.as_str() {
            KIND_RELEASE => match crate::yaml::from_file::<Release>(&path) {
                Ok(value) => releases.push(Sourced { path, value }),
                Err(e) => problems.push(e.to_string()),
            },
            KIND_WAVES => match crate::yaml::from_file::<WavePointers>(&path) {
                Ok(value) => waves = Some(Sourced { path, value }),
                Err(e) => problems.push(e.to_string()),
            },
            other => problems.push(format!(
                "{}: kind {other:?} does not belong in releases/; expected {KIND_RELEASE} or {KIND_WAVES}",
                path.display()
            )),
        }
    }
    (releases, waves)
}

fn load_tenants(
    root: &Path,
    reuse: &Reuse<'_>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, Arc<Tenant>> {
    let mut tenants = BTreeMap::new();
    let dir = root.join("manifests");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return tenants;
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    dirs.sort();
    for tdir in dirs {
        let Some(name) = tdir.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !crate::names::is_dns1123_label(&name) {
            problems.push(format!(
                "{}: the folder names the tenant and its namespace, and {name:?} is not a DNS label (lowercase letters, digits and '-', at most 63)",
                tdir.display()
            ));
            continue;
        }
        if let Some(t) = reuse.tenant(&name) {
            tenants.insert(name, t);
            continue;
        }
        let mut tenant = Tenant {
            name: name.clone(),
            ..Tenant::default()
        };
        // The folder changed; the files in it that did not are taken over.
        let earlier = reuse.files(&name);
        for full in yaml_files(&tdir, problems) {
            // Kept relative to the root (see `Sourced`); read by its full path.
            let rel = full.strip_prefix(root).unwrap_or(&full).to_owned();
            if let Some(e) = rel
                .file_name()
                .and_then(|f| earlier.get(f))
                .filter(|_| reuse.file_unchanged(&name, &rel))
            {
                e.push_to(&mut tenant, rel);
                continue;
            }
            let path = full;
            let text = match crate::yaml::read(&path) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(e.to_string());
                    continue;
                }
            };
            let kind = match crate::yaml::from_str::<Kinded>(&path, &text) {
                Ok(k) => k.kind.unwrap_or_default(),
                Err(e) => {
                    problems.push(e.to_string());
                    continue;
                }
            };
            let ns_ok = |ns: Option<&String>| ns.is_none_or(|n| *n == name);
            let wrong_ns = |path: &Path| {
                format!(
                    "{}: metadata.namespace must be {name:?} (the tenant folder) or omitted",
                    path.display()
                )
            };
            match kind.as_str() {
                "Agent" => match crate::yaml::from_str::<Agent>(&path, &text) {
                    Ok(mut value) if ns_ok(value.metadata.namespace.as_ref()) => {
                        value.metadata.namespace = Some(name.clone());
                        tenant.agents.push(Sourced { path: rel, value });
                    }
                    Ok(_) => problems.push(wrong_ns(&path)),
                    Err(e) => problems.push(e.to_string()),
                },
                "Tool" => match crate::yaml::from_str::<Tool>(&path, &text) {
                    Ok(mut value) if ns_ok(value.metadata.namespace.as_ref()) => {
                        value.metadata.namespace = Some(name.clone());
                        tenant.tools.push(Sourced { path: rel, value });
                    }
                    Ok(_) => problems.push(wrong_ns(&path)),
                    Err(e) => problems.push(e.to_string()),
                },
                "AgentFS" => match crate::yaml::from_str::<AgentFS>(&path, &text) {
                    Ok(mut value) if ns_ok(value.metadata.namespace.as_ref()) => {
                        value.metadata.namespace = Some(name.clone());
                        tenant.filesystems.push(Sourced { path: rel, value });
                    }
                    Ok(_) => problems.push(wrong_ns(&path)),
                    Err(e) => problems.push(e.to_string()),
                },
                tenant::KIND_TENANT => {
                    match crate::yaml::from_str::<tenant::TenantDoc>(&path, &text) {
                        Ok(doc) => {
                            let named_right =
                                path.file_name().is_some_and(|f| f == tenant::TENANT_FILE);
                            let mut found = doc.problems(&name);
                            if !named_right {
                                found.insert(
                                    0,
                                    format!("a Tenant belongs in {}", tenant::TENANT_FILE),
                                );
                            }
                            if found.is_empty() {
                                let mut spec = doc.spec;
                                tenant.placement = spec.placement.take();
                                tenant.settings = spec;
                            }
                            problems.extend(
                                found
                                    .into_iter()
                                    .map(|p| format!("{}: {p}", path.display())),
                            );
                        }
                        Err(e) => problems.push(e.to_string()),
                    }
                }
                other => problems.push(format!(
                    "{}: kind {other:?} is not an Agent, Tool, AgentFS or Tenant",
                    path.display()
                )),
            }
        }
        tenants.insert(name, Arc::new(tenant));
    }
    tenants
}

fn load_baselines(
    root: &Path,
    reuse: &Reuse<'_>,
    problems: &mut Vec<String>,
) -> Vec<Sourced<Baseline>> {
    let dir = root.join("configmaps");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    let mut out = Vec::new();
    for path in dirs {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                problems.push(format!(
                    "{}: symlinks are not allowed under configmaps/",
                    path.display()
                ));
            }
            Ok(m) if m.is_dir() => match reuse.baseline(&path, root) {
                Some(b) => out.push(b),
                None => match configmap::read_source(&path) {
                    Ok(value) => out.push(Sourced { path, value }),
                    Err(e) => problems.push(e.to_string()),
                },
            },
            _ => {}
        }
    }
    out
}

/// `manifests/tiers.yaml`, checked; `None` when there is none.
fn load_tiers(root: &Path, problems: &mut Vec<String>) -> Option<Sourced<tenant::tiers::TiersDoc>> {
    let path = root.join("manifests").join(tenant::tiers::TIERS_FILE);
    if !path.is_file() {
        return None;
    }
    match crate::yaml::from_file::<tenant::tiers::TiersDoc>(&path) {
        Ok(value) => {
            let found = value.problems();
            if found.is_empty() {
                return Some(Sourced { path, value });
            }
            problems.extend(
                found
                    .into_iter()
                    .map(|p| format!("{}: {p}", path.display())),
            );
            None
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    }
}

/// Loads the fleet repository at `root`.
pub fn load(root: &Path) -> Result<Fleet, FleetError> {
    load_reusing(root, &Reuse::nothing())
}

/// One object of an earlier load, taken over for a file that did not
/// change (it was checked when it was loaded).
enum Earlier<'a> {
    Agent(&'a Agent),
    Tool(&'a Tool),
    AgentFS(&'a AgentFS),
}

impl Earlier<'_> {
    fn push_to(&self, tenant: &mut Tenant, path: PathBuf) {
        match self {
            Earlier::Agent(v) => tenant.agents.push(Sourced {
                path,
                value: (*v).clone(),
            }),
            Earlier::Tool(v) => tenant.tools.push(Sourced {
                path,
                value: (*v).clone(),
            }),
            Earlier::AgentFS(v) => tenant.filesystems.push(Sourced {
                path,
                value: (*v).clone(),
            }),
        }
    }
}

/// What a load may take from an earlier load of another checkout instead
/// of reading it again: a tenant folder or a baseline folder that
/// `unchanged` says is the same (by its git tree id, say) in both.
pub struct Reuse<'a> {
    previous: Option<&'a Fleet>,
    unchanged: &'a dyn Fn(&str) -> bool,
}

impl<'a> Reuse<'a> {
    pub fn nothing() -> Reuse<'static> {
        Reuse {
            previous: None,
            unchanged: &|_| false,
        }
    }

    /// Reuse from `previous` what `unchanged` (given a path relative to the
    /// repository, `manifests/acme`, `configmaps/agent-baseline@1`) says is
    /// the same.
    pub fn from(previous: &'a Fleet, unchanged: &'a dyn Fn(&str) -> bool) -> Self {
        Reuse {
            previous: Some(previous),
            unchanged,
        }
    }

    /// `name`'s folder as loaded before: shared, not copied (its paths
    /// are relative to the root, so they hold in any checkout).
    fn tenant(&self, name: &str) -> Option<Arc<Tenant>> {
        let previous = self.previous?;
        if !(self.unchanged)(&format!("manifests/{name}")) {
            return None;
        }
        previous.tenants.get(name).map(Arc::clone)
    }

    /// The objects of tenant `name` as loaded before, by file name: what
    /// a changed folder takes over from the files that did not change.
    fn files(&self, name: &str) -> HashMap<OsString, Earlier<'a>> {
        let Some(t) = self.previous.and_then(|p| p.tenants.get(name)) else {
            return HashMap::new();
        };
        let by_file = |path: &Path| path.file_name().map(ToOwned::to_owned);
        let agents = t
            .agents
            .iter()
            .filter_map(|a| Some((by_file(&a.path)?, Earlier::Agent(&a.value))));
        let tools = t
            .tools
            .iter()
            .filter_map(|x| Some((by_file(&x.path)?, Earlier::Tool(&x.value))));
        let filesystems = t
            .filesystems
            .iter()
            .filter_map(|f| Some((by_file(&f.path)?, Earlier::AgentFS(&f.value))));
        agents.chain(tools).chain(filesystems).collect()
    }

    /// Whether the file at `path` in tenant `name`'s folder is the same as
    /// when it was last loaded.
    fn file_unchanged(&self, name: &str, path: &Path) -> bool {
        path.file_name().and_then(|f| f.to_str()).is_some_and(|f| {
            self.previous.is_some() && (self.unchanged)(&format!("manifests/{name}/{f}"))
        })
    }

    /// The baseline folder at `path` as loaded before.
    fn baseline(&self, path: &Path, root: &Path) -> Option<Sourced<Baseline>> {
        let previous = self.previous?;
        let rel = path.strip_prefix(root).ok()?;
        if !(self.unchanged)(&rel.to_string_lossy()) {
            return None;
        }
        let old = previous.root.join(rel);
        previous
            .baselines
            .iter()
            .find(|b| b.path == old)
            .map(|b| Sourced {
                path: path.to_owned(),
                value: b.value.clone(),
            })
    }
}

/// [`load`], taking what `reuse` allows from an earlier load.
pub fn load_reusing(root: &Path, reuse: &Reuse<'_>) -> Result<Fleet, FleetError> {
    // Messages name `releases/x.yaml`, not `./releases/x.yaml`.
    let root = if root == Path::new(".") {
        Path::new("")
    } else {
        root
    };
    let mut problems = Vec::new();
    if !root.join("releases").is_dir() {
        let shown = if root.as_os_str().is_empty() {
            Path::new(".")
        } else {
            root
        };
        problems.push(format!(
            "{}: not a fleet repository (no releases/ folder)",
            shown.display()
        ));
        return Err(FleetError::Unusable(problems));
    }
    let (releases, waves) = load_releases(root, &mut problems);
    let tenants = load_tenants(root, reuse, &mut problems);
    let baselines = load_baselines(root, reuse, &mut problems);
    let tiers = load_tiers(root, &mut problems);
    let clusters = cluster::load(root, &mut problems);
    if !problems.is_empty() {
        return Err(FleetError::Unusable(problems));
    }
    Ok(Fleet {
        root: root.to_owned(),
        releases,
        waves,
        tenants,
        baselines,
        tiers,
        clusters,
    })
}

#[cfg(test)]
mod tests;
