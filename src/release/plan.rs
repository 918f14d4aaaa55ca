//! `exo release plan` and `exo release diff`: what a release changes, per
//! wave and per tenant, in dependency order. Pure over a loaded fleet.
//!
//! A workload's container belongs to the release component whose image has
//! the same repository (the way image automation in Flux or Kargo matches
//! images). An Agent's baseline `<name>-<hash>` belongs to the release's
//! ConfigMap entry of that `<name>`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::repoint;
use crate::fleet::cluster::Placed;
use crate::fleet::configmap::baseline_name;
use crate::fleet::release::{ImageRef, Layer, Release, WaveName};
use crate::fleet::{Fleet, Tenant};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub release: String,
    /// The release compared against (diff), or `None` for the fleet's
    /// current manifests (plan).
    pub from: Option<String>,
    /// In apply order: capabilities before their consumers.
    pub components: Vec<ComponentChange>,
    pub config_maps: Vec<ConfigMapChange>,
    pub waves: Vec<WavePlan>,
    /// Per cluster of a fleet that spans clusters (`clusters/`): what the
    /// rollout changes there. Empty for a single-cluster fleet.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterPlan>,
}

/// What rolling out the release changes on one cluster: its placed
/// tenants, and those of them with workloads to re-point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPlan {
    pub cluster: String,
    pub tenants: Vec<String>,
    /// The placed tenants the release changes (at least one re-point).
    pub changing: Vec<String>,
    /// Re-points on this cluster, all its changing tenants together.
    pub repoints: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Added,
    Removed,
    Changed,
    Unchanged,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentChange {
    pub name: String,
    pub layer: Layer,
    pub change: Change,
    pub from: Option<ImageVersion>,
    pub to: Option<ImageVersion>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageVersion {
    pub image: String,
    pub tag: Option<String>,
}

impl ImageVersion {
    /// `1.5.0 (90208be6)`: the tag for people, the digest prefix for truth.
    pub fn short(&self) -> String {
        let d = ImageRef::parse(&self.image).digest.unwrap_or_default();
        let hex = d.strip_prefix("sha256:").unwrap_or(&d);
        let hex = &hex[..hex.len().min(8)];
        match &self.tag {
            Some(t) => format!("{t} ({hex})"),
            None => hex.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapChange {
    pub name: String,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The version does not exist yet and gets published (immutable).
    pub create: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WavePlan {
    pub wave: WaveName,
    pub tenants: Vec<TenantPlan>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantPlan {
    pub tenant: String,
    /// The clusters it is placed on (empty for a single-cluster fleet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// In dependency order; empty when the tenant is already there.
    pub steps: Vec<Repoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repoint {
    pub kind: String,
    pub name: String,
    /// The component this workload belongs to (its last in apply order).
    pub component: String,
    pub changes: Vec<String>,
}

/// Components of `r` in apply order: a stable topological sort that keeps
/// the listed order where dependencies allow. Unknown dependencies and cycles
/// are lint's business; they are ignored here.
pub fn apply_order(r: &Release) -> Vec<&crate::fleet::release::Component> {
    let comps = &r.spec.components;
    let names: BTreeSet<&str> = comps.iter().map(|c| c.name.as_str()).collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::with_capacity(comps.len());
    while out.len() < comps.len() {
        let next = comps.iter().find(|c| {
            !done.contains(c.name.as_str())
                && c.depends_on.iter().all(|d| {
                    done.contains(d.as_str()) || !names.contains(d.as_str()) || *d == c.name
                })
        });
        // A cycle: take the first remaining in listed order to make progress.
        let c = next.or_else(|| comps.iter().find(|c| !done.contains(c.name.as_str())));
        let Some(c) = c else { break };
        done.insert(&c.name);
        out.push(c);
    }
    out
}

/// Which tenants each wave of `r` selects, given the fleet's tenants.
pub fn wave_tenants(
    r: &Release,
    tenants: &BTreeMap<String, std::sync::Arc<Tenant>>,
) -> Vec<(WaveName, Vec<String>)> {
    let explicit: BTreeSet<&String> = r.spec.waves.iter().flat_map(|w| &w.tenants).collect();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    for w in &r.spec.waves {
        let mut sel: Vec<String> = w
            .tenants
            .iter()
            .filter(|t| tenants.contains_key(*t))
            .cloned()
            .collect();
        if w.remaining {
            sel.extend(
                tenants
                    .keys()
                    .filter(|t| !explicit.contains(t) && !taken.contains(*t))
                    .cloned(),
            );
        }
        sel.retain(|t| taken.insert(t.clone()));
        out.push((w.name, sel));
    }
    out
}

/// One workload's pinned inputs: container images and baseline version.
#[derive(Debug, Clone, PartialEq)]
struct WorkloadState {
    kind: &'static str,
    name: String,
    /// (container, image)
    images: Vec<(String, String)>,
    baseline: Option<String>,
}

fn workloads(t: &Tenant) -> Vec<WorkloadState> {
    let mut out = Vec::new();
    for tool in &t.tools {
        out.push(WorkloadState {
            kind: "Tool",
            name: tool.value.metadata.name.clone().unwrap_or_default(),
            images: vec![("tool".into(), tool.value.spec.container.image.clone())],
            baseline: None,
        });
    }
    for a in &t.agents {
        out.push(WorkloadState {
            kind: "Agent",
            name: a.value.metadata.name.clone().unwrap_or_default(),
            images: vec![
                ("agentlet".into(), a.value.spec.agentlet.image.clone()),
                ("runtime".into(), a.value.spec.runtime.image.clone()),
            ],
            baseline: a.value.spec.baseline.as_ref().map(|b| b.config_map.clone()),
        });
    }
    out
}

/// The workload as `r` wants it: images and baseline re-pointed.
fn repointed(w: &WorkloadState, r: &Release) -> WorkloadState {
    let mut out = w.clone();
    for (_, image) in &mut out.images {
        *image = repoint::image(image, r);
    }
    if let Some(b) = &mut out.baseline {
        *b = repoint::baseline(b, r);
    }
    out
}

fn component_of<'r>(r: &'r Release, image: &str) -> Option<&'r crate::fleet::release::Component> {
    repoint::component_for(r, image)
}

fn describe(r: &Release, image: &str) -> String {
    match component_of(r, image) {
        Some(c) if c.image == image => c.tag.clone().unwrap_or_else(|| short_digest(image)),
        _ => short_digest(image),
    }
}

fn short_digest(image: &str) -> String {
    let d = ImageRef::parse(image)
        .digest
        .unwrap_or_else(|| image.to_owned());
    d.strip_prefix("sha256:")
        .map(|h| h[..h.len().min(8)].to_owned())
        .unwrap_or(d)
}

/// Image -> tag, from every release in the repository, so old digests are
/// shown with the tag they were pinned from.
fn known_tags(fleet: &Fleet) -> BTreeMap<String, String> {
    fleet
        .releases
        .iter()
        .flat_map(|r| &r.value.spec.components)
        .filter_map(|c| c.tag.clone().map(|t| (c.image.clone(), t)))
        .collect()
}

fn tenant_steps(
    tenant: &Tenant,
    from: Option<&Release>,
    to: &Release,
    tags: &BTreeMap<String, String>,
) -> Vec<Repoint> {
    let order: BTreeMap<&str, usize> = apply_order(to)
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut steps: Vec<(usize, Repoint)> = Vec::new();
    for w in workloads(tenant) {
        let before = match from {
            Some(f) => repointed(&w, f),
            None => w.clone(),
        };
        let after = repointed(&w, to);
        let mut changes = Vec::new();
        let mut rank = 0usize;
        let mut component = String::new();
        for ((container, old), (_, new)) in before.images.iter().zip(&after.images) {
            let Some(c) = component_of(to, new) else {
                continue;
            };
            let idx = order.get(c.name.as_str()).copied().unwrap_or(0);
            if idx >= rank || component.is_empty() {
                rank = rank.max(idx);
                component = c.name.clone();
            }
            if old != new {
                let old_desc = tags.get(old).cloned().unwrap_or_else(|| {
                    from.map_or_else(|| short_digest(old), |f| describe(f, old))
                });
                changes.push(format!(
                    "{container}: {} {old_desc} -> {}",
                    c.name,
                    describe(to, new)
                ));
            }
        }
        if before.baseline != after.baseline {
            changes.push(format!(
                "baseline: {} -> {}",
                before.baseline.as_deref().unwrap_or("none"),
                after.baseline.as_deref().unwrap_or("none")
            ));
        }
        if !changes.is_empty() {
            steps.push((
                rank,
                Repoint {
                    kind: w.kind.to_owned(),
                    name: w.name,
                    component,
                    changes,
                },
            ));
        }
    }
    // Stable: equal ranks keep Tools before Agents, then file order.
    steps.sort_by_key(|(rank, _)| *rank);
    steps.into_iter().map(|(_, s)| s).collect()
}

fn component_changes(from: &BTreeMap<String, ImageVersion>, to: &Release) -> Vec<ComponentChange> {
    let mut out: Vec<ComponentChange> = apply_order(to)
        .into_iter()
        .map(|c| {
            let now = ImageVersion {
                image: c.image.clone(),
                tag: c.tag.clone(),
            };
            let before = from.get(&c.name).cloned();
            let change = match &before {
                None => Change::Added,
                Some(b) if b.image == now.image => Change::Unchanged,
                Some(_) => Change::Changed,
            };
            ComponentChange {
                name: c.name.clone(),
                layer: c.layer,
                change,
                from: before,
                to: Some(now),
            }
        })
        .collect();
    for (name, v) in from {
        if !to.spec.components.iter().any(|c| &c.name == name) {
            out.push(ComponentChange {
                name: name.clone(),
                layer: Layer::Consumer,
                change: Change::Removed,
                from: Some(v.clone()),
                to: None,
            });
        }
    }
    out
}

fn waves(fleet: &Fleet, from: Option<&Release>, to: &Release) -> Vec<WavePlan> {
    let tags = known_tags(fleet);
    wave_tenants(to, &fleet.tenants)
        .into_iter()
        .map(|(wave, tenants)| WavePlan {
            wave,
            tenants: tenants
                .iter()
                .filter_map(|t| fleet.tenants.get(t))
                .map(|t| TenantPlan {
                    tenant: t.name.clone(),
                    clusters: match fleet.placed(t) {
                        Placed::Everywhere => Vec::new(),
                        Placed::On(on) => on.into_iter().collect(),
                    },
                    steps: tenant_steps(t, from, to, &tags),
                })
                .collect(),
        })
        .collect()
}

/// Per declared cluster, from the waves' tenant plans.
fn per_cluster(fleet: &Fleet, waves: &[WavePlan]) -> Vec<ClusterPlan> {
    let mut out: Vec<ClusterPlan> = fleet
        .clusters
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|c| ClusterPlan {
            cluster: c.value.name().to_owned(),
            tenants: Vec::new(),
            changing: Vec::new(),
            repoints: 0,
        })
        .collect();
    for t in waves.iter().flat_map(|w| &w.tenants) {
        for c in out.iter_mut().filter(|c| t.clusters.contains(&c.cluster)) {
            c.tenants.push(t.tenant.clone());
            if !t.steps.is_empty() {
                c.changing.push(t.tenant.clone());
                c.repoints += t.steps.len();
            }
        }
    }
    for c in &mut out {
        c.tenants.sort();
        c.changing.sort();
    }
    out
}

impl Plan {
    fn with_clusters(mut self, fleet: &Fleet) -> Self {
        self.clusters = per_cluster(fleet, &self.waves);
        self
    }
}

/// Rolling out `to` from the fleet's current manifests.
pub fn plan(fleet: &Fleet, to: &Release) -> Plan {
    // Current component versions: the images the manifests run, by component.
    let mut current: BTreeMap<String, ImageVersion> = BTreeMap::new();
    let mut current_baselines: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for t in fleet.tenants.values() {
        for w in workloads(t) {
            for (_, image) in &w.images {
                if let Some(c) = component_of(to, image) {
                    current
                        .entry(c.name.clone())
                        .or_insert_with(|| ImageVersion {
                            image: image.clone(),
                            tag: fleet
                                .releases
                                .iter()
                                .flat_map(|r| &r.value.spec.components)
                                .find(|rc| rc.image == *image)
                                .and_then(|rc| rc.tag.clone()),
                        });
                }
            }
            if let Some(b) = w.baseline {
                current_baselines
                    .entry(baseline_name(&b).to_owned())
                    .or_default()
                    .insert(b);
            }
        }
    }
    let config_maps = to
        .spec
        .config_maps
        .iter()
        .map(|cm| {
            let used = current_baselines.get(&cm.name);
            ConfigMapChange {
                name: cm.name.clone(),
                from: used.map(|s| s.iter().cloned().collect::<Vec<_>>().join(", ")),
                to: Some(cm.version.clone()),
                create: used.is_none_or(|s| !s.contains(&cm.version)),
            }
        })
        .collect();
    Plan {
        release: to.metadata.name.clone(),
        from: None,
        components: component_changes(&current, to),
        config_maps,
        clusters: Vec::new(),
        waves: waves(fleet, None, to),
    }
    .with_clusters(fleet)
}

/// What changes from release `a` to release `b`.
pub fn diff(fleet: &Fleet, a: &Release, b: &Release) -> Plan {
    let from: BTreeMap<String, ImageVersion> = a
        .spec
        .components
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                ImageVersion {
                    image: c.image.clone(),
                    tag: c.tag.clone(),
                },
            )
        })
        .collect();
    let mut config_maps: Vec<ConfigMapChange> = b
        .spec
        .config_maps
        .iter()
        .map(|cm| {
            let old = a
                .spec
                .config_maps
                .iter()
                .find(|o| o.name == cm.name)
                .map(|o| o.version.clone());
            ConfigMapChange {
                name: cm.name.clone(),
                create: old.as_deref() != Some(cm.version.as_str()),
                from: old,
                to: Some(cm.version.clone()),
            }
        })
        .collect();
    for old in &a.spec.config_maps {
        if !b.spec.config_maps.iter().any(|cm| cm.name == old.name) {
            config_maps.push(ConfigMapChange {
                name: old.name.clone(),
                from: Some(old.version.clone()),
                to: None,
                create: false,
            });
        }
    }
    Plan {
        release: b.metadata.name.clone(),
        from: Some(a.metadata.name.clone()),
        components: component_changes(&from, b),
        config_maps,
        clusters: Vec::new(),
        waves: waves(fleet, Some(a), b),
    }
    .with_clusters(fleet)
}

#[cfg(test)]
mod cluster_tests {
    use super::*;
    use crate::crd::tenant::placement::Placement;
    use crate::fleet::cluster::ClusterDoc;

    /// A plan of a placed fleet says, per cluster, which of its tenants the
    /// release changes; a single-cluster fleet's plan has no cluster part.
    #[test]
    fn a_placed_fleet_plans_per_cluster() {
        let mut fleet =
            crate::fleet::load(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let release = fleet.release("2026.11.1").unwrap().value.clone();
        assert!(plan(&fleet, &release).clusters.is_empty());
        let doc = |name: &str| ClusterDoc::sourced(name, &[]);
        fleet.clusters = Some(vec![doc("eu"), doc("us")]);
        let names: Vec<String> = fleet.tenants.keys().cloned().collect();
        for t in &names {
            let on = if t == "acme" {
                vec!["eu", "us"]
            } else {
                vec!["us"]
            };
            std::sync::Arc::make_mut(fleet.tenants.get_mut(t).unwrap()).placement =
                Some(Placement {
                    clusters: on.into_iter().map(Into::into).collect(),
                    ..Placement::default()
                });
        }
        let p = plan(&fleet, &release);
        let eu = &p.clusters[0];
        assert_eq!(eu.cluster, "eu");
        assert_eq!(eu.tenants, ["acme"]);
        let us = &p.clusters[1];
        assert_eq!(us.tenants, names);
        let steps: usize = p
            .waves
            .iter()
            .flat_map(|w| &w.tenants)
            .map(|t| t.steps.len())
            .sum();
        assert_eq!(us.repoints, steps, "every tenant is on us");
        let acme = p
            .waves
            .iter()
            .flat_map(|w| &w.tenants)
            .find(|t| t.tenant == "acme")
            .unwrap();
        assert_eq!(acme.clusters, ["eu", "us"]);
        assert_eq!(eu.changing.is_empty(), acme.steps.is_empty());
    }
}
