//! The rules over where tenants run: every cluster a `tenant.yaml` names
//! is declared in `clusters/`, every selector matches one, every tenant of
//! a fleet that spans clusters is placed somewhere, and no cluster gets
//! more tenants than its `capacity.maxTenants`. (What one file shows on
//! its own is checked when it is read: [`crate::fleet::cluster`],
//! [`crate::crd::tenant::placement`].)

use std::collections::BTreeMap;

use super::{Findings, Rule};
use crate::crd::tenant::TENANT_FILE;
use crate::fleet::cluster::{Placed, resolve};

pub(super) fn lint_placement(f: &mut Findings<'_>) {
    let fleet = f.fleet;
    let declared: Vec<String> = fleet
        .clusters
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|c| c.value.name().to_owned())
        .collect();
    let shown = if declared.is_empty() {
        "this repository declares none (no clusters/*.yaml)".to_owned()
    } else {
        format!("declared: {}", declared.join(", "))
    };
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    for (name, t) in &fleet.tenants {
        let file = fleet.root.join("manifests").join(name).join(TENANT_FILE);
        let mut refused = false;
        if let Some(p) = &t.placement {
            for (i, c) in p.clusters.iter().enumerate() {
                if fleet.cluster(c).is_none() {
                    refused = true;
                    f.add(
                        &file,
                        format!("spec.placement.clusters[{i}]"),
                        Rule::UnknownCluster,
                        format!("cluster {c:?} is not declared in clusters/ ({shown})"),
                    );
                }
            }
            if let Some(s) = &p.selector
                && resolve(
                    &crate::crd::tenant::placement::Placement {
                        clusters: Vec::new(),
                        selector: Some(s.clone()),
                        move_policy: p.move_policy,
                    },
                    fleet.clusters.as_deref().unwrap_or_default(),
                )
                .is_empty()
            {
                refused = true;
                f.add(
                    &file,
                    "spec.placement.selector",
                    Rule::SelectorMatchesNothing,
                    format!("selector {s} matches no cluster ({shown})"),
                );
            }
        }
        match fleet.placed(t) {
            Placed::Everywhere => {}
            Placed::On(on) if on.is_empty() && !refused => f.add(
                &file,
                "spec.placement",
                Rule::TenantUnplaced,
                format!(
                    "tenant {name:?} runs on no cluster: the fleet spans clusters, so say where with spec.placement.clusters or a selector ({shown})"
                ),
            ),
            Placed::On(on) => {
                for c in on {
                    *load.entry(c).or_default() += 1;
                }
            }
        }
    }
    for c in fleet.clusters.as_deref().unwrap_or_default() {
        let placed = load.get(c.value.name()).copied().unwrap_or(0);
        if let Some(max) = c.value.spec.capacity.as_ref().and_then(|k| k.max_tenants)
            && placed > max as usize
        {
            f.add(
                &c.path,
                "spec.capacity.maxTenants",
                Rule::ClusterCapacity,
                format!(
                    "{placed} tenants are placed on cluster {:?}, more than its maxTenants {max}",
                    c.value.name()
                ),
            );
        }
    }
}
