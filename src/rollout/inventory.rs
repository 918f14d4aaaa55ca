//! A tenant's inventory: every object its saga applied and has not pruned,
//! held in an `Inventory` object beside the tenant's Rollout (same
//! namespace, same name), and this leadership term's copy of it.
//!
//! Why its own object: every saga step writes the Rollout's status, and
//! the apiserver reads, converts and stores the whole Rollout on each
//! write. With the inventory inside, each write of a 1000-Agent tenant
//! cost four to five times one of a 100-Agent tenant (`BENCHMARKS.md`),
//! for a list that changes only when an object joins or leaves.
//!
//! Guarantees:
//! - it is written only when its entries change: re-pointing, rolling and
//!   verifying objects it already holds writes nothing here;
//! - every write carries the `resourceVersion` last read or written by
//!   this term (the copy), so a write by anyone else in between makes it
//!   conflict instead of being overwritten: the copy is dropped, the pass
//!   fails, and the next one starts from a fresh read. No entry is lost
//!   to a stale copy;
//! - the objects git wants join it before the saga applies anything (see
//!   the engine's `drive`), so whatever was applied is in it;
//! - entries an older operator kept in the Rollout's `status.inventory`
//!   are carried over: the Inventory is created from them before any
//!   status without them is written;
//! - deleting the Inventory by hand loses only the entries of objects git
//!   no longer has (those not yet pruned): the objects git has join it
//!   again at the next pass, as they would a new tenant's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use kube::ResourceExt;

use crate::cluster::apply::Ctx;
use crate::cluster::metrics::Controller;
use crate::cluster::{Error, ErrorCategory};
use crate::crd::{Inventory, InventoryEntry, InventoryKind, InventorySpec, Rollout};
use crate::meta::{LABEL_MANAGED_BY, LABEL_TENANT, MANAGED_BY};

/// `entries` with every object of `desired` in it (one not held yet joins
/// without a uid; the prune pass fills it in from the cache), sorted by
/// kind and name. Pure.
pub fn with_desired(
    entries: &[InventoryEntry],
    desired: &BTreeSet<(InventoryKind, String)>,
) -> Vec<InventoryEntry> {
    // One look per desired object, not a scan of the entries each.
    let held: BTreeSet<(InventoryKind, &str)> =
        entries.iter().map(|e| (e.kind, e.name.as_str())).collect();
    let mut out = entries.to_vec();
    out.extend(
        desired
            .iter()
            .filter(|(kind, name)| !held.contains(&(*kind, name.as_str())))
            .map(|(kind, name)| InventoryEntry {
                kind: *kind,
                name: name.clone(),
                ..InventoryEntry::default()
            }),
    );
    sort(&mut out);
    out
}

/// The one order entries are kept in.
pub fn sort(entries: &mut [InventoryEntry]) {
    entries.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
}

/// Entries carried over from a Rollout's `status.inventory`: sorted, one
/// per (kind, name) (the last one wins, as a later write did). Pure.
pub fn carried_over(legacy: &[InventoryEntry]) -> Vec<InventoryEntry> {
    let by_key: BTreeMap<(InventoryKind, &str), &InventoryEntry> = legacy
        .iter()
        .map(|e| ((e.kind, e.name.as_str()), e))
        .collect();
    by_key.into_values().cloned().collect()
}

/// This term's copies of the tenants' Inventories, by `namespace/name`.
/// Only the leader writes them, and one reconcile at a time per Rollout,
/// so a copy is what the apiserver holds unless someone else wrote it;
/// then the guarded write conflicts and the copy is dropped.
/// A copy is kept with the uid of the Rollout it was loaded for: a
/// Rollout deleted and made again (a tenant offboarded and onboarded
/// again within the term) reads its inventory afresh.
#[derive(Default)]
pub struct Inventories {
    held: Mutex<HashMap<String, (String, Arc<Inventory>)>>,
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl Inventories {
    /// The inventory of `ro`'s tenant: this term's copy, or a fresh read.
    /// Without an Inventory, one is created from the Rollout's
    /// `status.inventory` when an older operator left entries there;
    /// otherwise an empty one is returned, created at its first write.
    pub async fn load(&self, op: &Ctx, ro: &Rollout) -> Result<Arc<Inventory>, Error> {
        let ns = ro
            .namespace()
            .ok_or(Error::MissingField("metadata.namespace"))?;
        let name = ro.name_any();
        let k = key(&ns, &name);
        let owner = ro.metadata.uid.clone().unwrap_or_default();
        if let Some((for_uid, held)) = self.copy(&k)
            && for_uid == owner
        {
            return Ok(held);
        }
        let read = op
            .api::<Inventory>(&ns)
            .get_opt(&name)
            .await
            .map_err(|e| Error::kube(format!("get Inventory {k}"), e))?;
        let inv = match read {
            Some(found) => found,
            None => {
                let legacy = ro.status.as_ref().map_or(&[][..], |s| &s.inventory[..]);
                let fresh = new_inventory(ro, &ns, &name, carried_over(legacy));
                if fresh.spec.entries.is_empty() {
                    fresh
                } else {
                    tracing::info!(namespace = %ns, entries = fresh.spec.entries.len(), "inventory carried over from the Rollout's status");
                    op.put_guarded(Controller::Rollout, &fresh).await?
                }
            }
        };
        let inv = Arc::new(inv);
        self.keep(k, owner, inv.clone());
        Ok(inv)
    }

    /// Writes `entries` as the inventory `held` is a copy of, unless they
    /// are what it holds already. Returns the copy to go on with. A
    /// conflict (someone else wrote it) drops this term's copy, so the
    /// next pass reads it afresh.
    pub async fn store(
        &self,
        op: &Ctx,
        held: &Arc<Inventory>,
        entries: Vec<InventoryEntry>,
    ) -> Result<Arc<Inventory>, Error> {
        if entries == held.spec.entries {
            return Ok(held.clone());
        }
        let ns = held.namespace().unwrap_or_default();
        let name = held.name_any();
        let k = key(&ns, &name);
        let mut next = (**held).clone();
        next.spec.entries = entries;
        // The server's own fields are not sent back; the resourceVersion
        // is the guard.
        next.metadata.managed_fields = None;
        match op.put_guarded(Controller::Rollout, &next).await {
            Ok(written) => {
                let written = Arc::new(written);
                let owner = self.copy(&k).map(|(uid, _)| uid).unwrap_or_default();
                self.keep(k, owner, written.clone());
                Ok(written)
            }
            Err(e) => {
                if matches!(
                    e.category(),
                    ErrorCategory::Conflict | ErrorCategory::NotFound
                ) {
                    self.forget(&k);
                }
                Err(e)
            }
        }
    }

    fn copy(&self, k: &str) -> Option<(String, Arc<Inventory>)> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(k)
            .cloned()
    }

    fn keep(&self, k: String, owner: String, inv: Arc<Inventory>) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(k, (owner, inv));
    }

    fn forget(&self, k: &str) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(k);
    }
}

/// A new Inventory for `ro`'s tenant, not written yet.
fn new_inventory(ro: &Rollout, ns: &str, name: &str, entries: Vec<InventoryEntry>) -> Inventory {
    let mut inv = Inventory::new(name, InventorySpec { entries });
    inv.metadata.namespace = Some(ns.to_owned());
    inv.metadata.labels = Some(BTreeMap::from([
        (LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned()),
        (LABEL_TENANT.to_owned(), ro.spec.tenant.clone()),
    ]));
    inv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: InventoryKind, name: &str, uid: &str) -> InventoryEntry {
        InventoryEntry {
            kind,
            name: name.into(),
            uid: uid.into(),
            prune_blocked: None,
        }
    }

    #[test]
    fn desired_objects_join_once_and_held_ones_keep_their_uid() {
        let held = vec![
            entry(InventoryKind::Agent, "b", "u-b"),
            entry(InventoryKind::Tool, "t", "u-t"),
        ];
        let desired = BTreeSet::from([
            (InventoryKind::Agent, "a".to_owned()),
            (InventoryKind::Agent, "b".to_owned()),
            (InventoryKind::AgentFS, "fs".to_owned()),
        ]);
        let out = with_desired(&held, &desired);
        assert_eq!(
            out,
            [
                entry(InventoryKind::Agent, "a", ""),
                entry(InventoryKind::Agent, "b", "u-b"),
                entry(InventoryKind::Tool, "t", "u-t"),
                entry(InventoryKind::AgentFS, "fs", ""),
            ],
            "sorted by kind, then name; a held entry no longer desired stays for the prune"
        );
        assert_eq!(
            with_desired(&out, &desired),
            out,
            "nothing new, nothing changes"
        );
    }

    #[test]
    fn a_legacy_status_inventory_is_carried_over_sorted_and_unique() {
        let legacy = vec![
            entry(InventoryKind::Tool, "t", "u1"),
            entry(InventoryKind::Agent, "a", "old"),
            entry(InventoryKind::Agent, "a", "new"),
        ];
        assert_eq!(
            carried_over(&legacy),
            [
                entry(InventoryKind::Agent, "a", "new"),
                entry(InventoryKind::Tool, "t", "u1")
            ]
        );
        assert!(carried_over(&[]).is_empty());
    }
}
