//! `exo release plan <release> --prune`: what the operator would delete
//! once the local checkout is what the Fleet applies. The candidates are
//! entries of each tenant's `Inventory` (what Exo applied and has not
//! pruned) whose kind and name `manifests/<tenant>/` no longer has. A
//! tenant whose operator has not carried its inventory over yet has it in
//! its Rollout's `status.inventory`, where an older operator kept it.
//! Working them out is pure ([`candidates`], [`plan`]); only reading the
//! Rollouts, Inventories and Fleets touches the cluster.

use std::fmt::Write as _;

use serde::Serialize;

use crate::cli::release::cluster::fleet_rollouts;
use crate::cli::table;
use crate::crd::{Fleet as FleetCr, Inventory, InventoryEntry, InventoryKind, Rollout};
use crate::fleet::{Fleet, Tenant};

/// One object the checkout no longer has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub kind: InventoryKind,
    pub name: String,
    /// Why an earlier delete did not finish, when it is already pending.
    pub blocked: Option<String>,
}

/// One tenant's candidates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantPrune {
    pub tenant: String,
    pub wave: String,
    /// The entries come from the Rollout's `status.inventory`, where an
    /// operator older than the `Inventory` kept them (the next one carries
    /// them over).
    pub legacy_inventory: bool,
    pub prune: Vec<Candidate>,
}

/// A Fleet and whether it prunes at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetPrune {
    pub namespace: String,
    pub name: String,
    /// `spec.prune`; when false nothing is deleted and the candidates
    /// stay, reported as pending.
    pub prune: bool,
}

/// The `--prune` part of a plan (`prune` in `-o json|yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrunePlan {
    pub fleets: Vec<FleetPrune>,
    pub tenants: Vec<TenantPrune>,
}

/// The inventory entries `tenant`'s manifests no longer have, in inventory
/// order.
pub fn candidates(tenant: &Tenant, inventory: &[InventoryEntry]) -> Vec<Candidate> {
    let keep = crate::rollout::desired::declared(tenant);
    inventory
        .iter()
        .filter(|e| !keep.contains(&(e.kind, e.name.clone())))
        .map(|e| Candidate {
            kind: e.kind,
            name: e.name.clone(),
            blocked: e.prune_blocked.clone(),
        })
        .collect()
}

/// The plan for every tenant of the checkout that has a Rollout, from
/// each one's Inventory (the one of the same namespace and name) or,
/// without one, its Rollout's `status.inventory`.
pub fn plan(
    fleet: &Fleet,
    rollouts: &[Rollout],
    inventories: &[Inventory],
    fleets: &[FleetCr],
) -> PrunePlan {
    let mut tenants: Vec<TenantPrune> = rollouts
        .iter()
        .filter_map(|r| {
            let tenant = fleet.tenants.get(&r.spec.tenant)?;
            let own = inventories.iter().find(|i| {
                i.metadata.namespace == r.metadata.namespace && i.metadata.name == r.metadata.name
            });
            // The inventory is a record of what was applied, true whatever
            // spec the Rollout's status was computed for.
            let (entries, legacy_inventory) = match own {
                Some(i) => (&i.spec.entries[..], false),
                None => (
                    r.status.as_ref().map_or(&[][..], |s| &s.inventory[..]),
                    true,
                ),
            };
            Some(TenantPrune {
                tenant: r.spec.tenant.clone(),
                wave: r.spec.wave.clone(),
                legacy_inventory: legacy_inventory && !entries.is_empty(),
                prune: candidates(tenant, entries),
            })
        })
        .collect();
    tenants.sort_by(|a, b| a.tenant.cmp(&b.tenant));
    PrunePlan {
        fleets: fleets
            .iter()
            .map(|f| FleetPrune {
                namespace: f.metadata.namespace.clone().unwrap_or_default(),
                name: f.metadata.name.clone().unwrap_or_default(),
                prune: f.spec.prune,
            })
            .collect(),
        tenants,
    }
}

pub fn render(p: &PrunePlan) -> String {
    let mut out = String::new();
    for f in &p.fleets {
        let _ = writeln!(
            out,
            "Fleet {}/{}: {}",
            f.namespace,
            f.name,
            if f.prune {
                "prunes what git drops"
            } else {
                "pruning is off (spec.prune: false): nothing below is deleted"
            }
        );
    }
    if p.fleets.is_empty() {
        out.push_str("no Fleet in the cluster\n");
    }
    let mut rows = Vec::new();
    for t in &p.tenants {
        for c in &t.prune {
            let mut note = c
                .blocked
                .as_ref()
                .map(|b| format!("pending: {b}"))
                .unwrap_or_default();
            if t.legacy_inventory {
                if !note.is_empty() {
                    note.push_str("; ");
                }
                note.push_str("from the Rollout's status (an older operator's)");
            }
            rows.push(vec![
                t.wave.clone(),
                t.tenant.clone(),
                c.kind.to_string(),
                c.name.clone(),
                note,
            ]);
        }
    }
    if p.tenants.is_empty() {
        out.push_str("nothing to prune: no tenant of this checkout has a Rollout in the cluster\n");
        return out;
    }
    if rows.is_empty() {
        let _ = writeln!(
            out,
            "nothing to prune: every inventory entry of {} tenant(s) is still in manifests/",
            p.tenants.len()
        );
        return out;
    }
    out.push_str(&table::render(
        &["WAVE", "TENANT", "PRUNE", "NAME", "NOTE"],
        &rows,
    ));
    out
}

/// Reads the cluster and works out the prune plan; prints why it cannot.
pub async fn read(client: &kube::Client, fleet: &Fleet) -> Result<PrunePlan, u8> {
    let rollouts = fleet_rollouts(client, fleet).await?;
    // Without the Inventory CRD (an operator older than it), every
    // inventory is still in its Rollout's status.
    let inventories = match kube::Api::<Inventory>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await
    {
        Ok(l) => l.items,
        Err(e) if crate::cluster::error::api_code(&e) == Some(404) => Vec::new(),
        Err(e) => {
            eprintln!("exo release plan: cannot list Inventories: {e}");
            return Err(crate::cli::exit::UNUSABLE);
        }
    };
    let fleets = kube::Api::<FleetCr>::all(client.clone())
        .list(&kube::api::ListParams::default())
        .await
        .map_err(|e| {
            eprintln!("exo release plan: cannot list Fleets: {e}");
            crate::cli::exit::UNUSABLE
        })?
        .items;
    Ok(plan(fleet, &rollouts, &inventories, &fleets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{Agent, AgentFS, AgentFSSpec, AgentSpec, FleetSpec, Tool, ToolSpec};
    use crate::fleet::Sourced;
    use crate::rollout::summary::fixtures::{RolloutExt, rollout};

    fn sourced<T>(value: T) -> Sourced<T> {
        Sourced {
            path: "manifests/acme/x.yaml".into(),
            value,
        }
    }

    fn tenant() -> Tenant {
        Tenant {
            name: "acme".into(),
            agents: vec![sourced(Agent::new("analyst", AgentSpec::default()))],
            tools: vec![sourced(Tool::new("search", ToolSpec::default()))],
            filesystems: vec![sourced(AgentFS::new("shared", AgentFSSpec::default()))],
            settings: Default::default(),
            placement: None,
        }
    }

    fn entry(kind: InventoryKind, name: &str, blocked: Option<&str>) -> InventoryEntry {
        InventoryEntry {
            kind,
            name: name.into(),
            uid: "u".into(),
            prune_blocked: blocked.map(str::to_owned),
        }
    }

    #[test]
    fn candidates_are_what_the_manifests_no_longer_have() {
        use InventoryKind::{Agent as A, AgentFS as F, Tool as T};
        // Name, the inventory, what would be pruned (kind/name).
        let cases: Vec<(&str, Vec<InventoryEntry>, Vec<&str>)> = vec![
            ("empty inventory", vec![], vec![]),
            (
                "everything still declared",
                vec![
                    entry(A, "analyst", None),
                    entry(T, "search", None),
                    entry(F, "shared", None),
                ],
                vec![],
            ),
            (
                "a dropped agent and filesystem",
                vec![
                    entry(A, "analyst", None),
                    entry(A, "old-bot", None),
                    entry(F, "scratch", None),
                ],
                vec!["Agent/old-bot", "AgentFS/scratch"],
            ),
            (
                "same name, other kind: the kind counts",
                vec![entry(T, "analyst", None)],
                vec!["Tool/analyst"],
            ),
        ];
        for (name, inventory, want) in cases {
            let got: Vec<String> = candidates(&tenant(), &inventory)
                .into_iter()
                .map(|c| format!("{}/{}", c.kind, c.name))
                .collect();
            assert_eq!(got, want, "{name}");
        }
        let blocked = candidates(&tenant(), &[entry(A, "old", Some("finalizer x"))]);
        assert_eq!(blocked[0].blocked.as_deref(), Some("finalizer x"));
    }

    #[test]
    fn pruning_off_and_legacy_inventories_are_said() {
        let mut fleet_cr = FleetCr::new(
            "example",
            FleetSpec {
                prune: false,
                ..FleetSpec::default()
            },
        );
        fleet_cr.metadata.namespace = Some("exo-system".into());
        let fleet = Fleet {
            root: ".".into(),
            releases: vec![],
            waves: None,
            tenants: [("acme".to_owned(), std::sync::Arc::new(tenant()))]
                .into_iter()
                .collect(),
            baselines: vec![],
            tiers: None,
            clusters: None,
        };
        let mut ro =
            rollout("acme", "low-risk", "r2").stale(crate::crd::RolloutPhase::Verified, "r1");
        ro.status_mut()
            .inventory
            .push(entry(InventoryKind::Agent, "old-bot", Some("finalizer x")));
        let other = rollout("not-in-checkout", "fleet", "r2");
        let p = plan(&fleet, &[ro.clone(), other], &[], &[fleet_cr.clone()]);
        assert_eq!(p.tenants.len(), 1, "only tenants of the checkout");
        assert!(p.tenants[0].legacy_inventory);
        let text = render(&p);
        assert!(
            text.contains("Fleet exo-system/example: pruning is off (spec.prune: false)"),
            "{text}"
        );
        assert!(
            text.contains(
                "low-risk  acme    Agent  old-bot  pending: finalizer x; from the Rollout's status (an older operator's)"
            ),
            "{text}"
        );
        let j = serde_json::to_value(&p).unwrap_or_default();
        assert_eq!(j["fleets"][0]["prune"], false);
        assert_eq!(j["tenants"][0]["prune"][0]["kind"], "Agent");
        assert_eq!(j["tenants"][0]["legacyInventory"], true);

        // An Inventory of the same name wins over the status.
        let mut inv = Inventory::new(
            ro.metadata.name.as_deref().unwrap_or_default(),
            crate::crd::InventorySpec {
                entries: vec![entry(InventoryKind::Tool, "gone-tool", None)],
            },
        );
        inv.metadata.namespace.clone_from(&ro.metadata.namespace);
        let mut elsewhere = inv.clone();
        elsewhere.metadata.namespace = Some("another".into());
        elsewhere.spec.entries = vec![entry(InventoryKind::Agent, "not-this", None)];
        let p = plan(&fleet, &[ro], &[elsewhere, inv], &[fleet_cr]);
        assert!(!p.tenants[0].legacy_inventory);
        let names: Vec<&str> = p.tenants[0].prune.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["gone-tool"]);
    }
}
