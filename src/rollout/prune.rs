//! Inventory and prune. A tenant's inventory (`super::inventory`) lists
//! every object the saga applied (kind, name, uid). An entry git no longer
//! has is deleted, and it leaves the inventory only once it is really gone:
//! - the object must still carry `app.kubernetes.io/managed-by: exo` and
//!   the inventory's uid (a same-named object made by hand is not ours);
//! - the delete carries a uid precondition and is made only after a read
//!   shows the object still there, so a restart mid-prune never deletes
//!   anything twice;
//! - a delete that does not finish (a finalizer, a refusal, RBAC) keeps the
//!   entry with the reason, and the `Pruned` condition says so, instead of
//!   forgetting the object and leaving an orphan;
//! - `spec.prune: false` on the Fleet keeps everything, reported the same way.
//!
//! Objects that were never in the inventory are never touched.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use super::desired::TenantDesired;
use crate::cluster::ErrorCategory;
use crate::cluster::apply::Ctx;
use crate::cluster::conditions::set_condition;
use crate::cluster::events::Reason;
use crate::cluster::metrics::{Controller, KindLabels};
use crate::crd::{
    Agent, AgentFS, CONDITION_PRUNED, InventoryEntry, InventoryKind, PENDING_PRUNES_SHOWN, Rollout,
    RolloutStatus, Tool,
};
use crate::meta::{LABEL_MANAGED_BY, MANAGED_BY};

/// What to do with one inventory entry git no longer has, given what the
/// cluster holds now. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Gone (or replaced by another object of the same name): drop it.
    Gone,
    /// No longer carries Exo's label: someone took it over; drop it,
    /// leave the object.
    Released,
    /// Still there: delete it (uid precondition).
    Delete { uid: String },
    /// Being deleted, held only by Exo's own cleanup (an Agent's pod
    /// going first): keep it until it is gone; nothing is wrong.
    Wait(String),
    /// Keep it, and say why: something stops the prune.
    Keep(String),
}

/// Finalizers Exo itself puts on what it manages; they finish on their own.
fn own_finalizer(f: &str) -> bool {
    f.starts_with("autonomic.sh/")
}

pub fn decide(entry: &InventoryEntry, live: Option<&ObjectMeta>, prune_enabled: bool) -> Decision {
    let Some(meta) = live else {
        return Decision::Gone;
    };
    let uid = meta.uid.clone().unwrap_or_default();
    if !entry.uid.is_empty() && uid != entry.uid {
        return Decision::Gone;
    }
    let ours = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .map(String::as_str)
        == Some(MANAGED_BY);
    if !ours {
        return Decision::Released;
    }
    if meta.deletion_timestamp.is_some() {
        let finalizers = meta.finalizers.clone().unwrap_or_default();
        let foreign: Vec<&String> = finalizers.iter().filter(|f| !own_finalizer(f)).collect();
        if foreign.is_empty() {
            return Decision::Wait(BEING_DELETED.to_owned());
        }
        return Decision::Keep(format!(
            "deletion waits on finalizer(s) {}",
            foreign
                .iter()
                .map(|f| f.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !prune_enabled {
        return Decision::Keep("pruning is off (the Fleet's spec.prune is false)".to_owned());
    }
    Decision::Delete { uid }
}

/// What an entry that is only waiting for its own cleanup says.
const BEING_DELETED: &str = "being deleted";

/// How many pending prunes the `Pruned` condition names.
const CONDITION_NAMES: usize = 10;

/// The `Pruned` condition for an inventory. Pure.
pub fn condition(inventory: &[InventoryEntry], generation: Option<i64>) -> Condition {
    let pending: Vec<(&InventoryEntry, &String)> = inventory
        .iter()
        .filter_map(|e| e.prune_blocked.as_ref().map(|why| (e, why)))
        .collect();
    let mut message = pending
        .iter()
        .take(CONDITION_NAMES)
        .map(|(e, why)| format!("{} {}: {why}", e.kind, e.name))
        .collect::<Vec<_>>()
        .join("; ");
    if pending.len() > CONDITION_NAMES {
        let _ = write!(message, "; and {} more", pending.len() - CONDITION_NAMES);
    }
    let (status, reason, message) = if pending.is_empty() {
        (
            "True",
            "InSync",
            "every object git dropped is gone".to_owned(),
        )
    } else if pending.iter().all(|(_, why)| why.as_str() == BEING_DELETED) {
        ("False", "Pruning", message)
    } else {
        ("False", "PruneBlocked", message)
    };
    Condition {
        type_: CONDITION_PRUNED.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: crate::rollout::now(),
        observed_generation: generation,
    }
}

fn cached_meta(op: &Ctx, kind: InventoryKind, ns: &str, name: &str) -> Option<ObjectMeta> {
    match kind {
        InventoryKind::Agent => op
            .agents
            .get(&ObjectRef::new(name).within(ns))
            .map(|o| o.metadata.clone()),
        InventoryKind::Tool => op
            .tools
            .get(&ObjectRef::new(name).within(ns))
            .map(|o| o.metadata.clone()),
        InventoryKind::AgentFS => op
            .filesystems
            .get(&ObjectRef::new(name).within(ns))
            .map(|o| o.metadata.clone()),
    }
}

/// A fresh read of one object's metadata (prune acts on what is there now,
/// not on a cache that may lag).
async fn read_meta(
    op: &Ctx,
    kind: InventoryKind,
    ns: &str,
    name: &str,
) -> Result<Option<ObjectMeta>, kube::Error> {
    Ok(match kind {
        InventoryKind::Agent => op.api::<Agent>(ns).get_opt(name).await?.map(|o| o.metadata),
        InventoryKind::Tool => op.api::<Tool>(ns).get_opt(name).await?.map(|o| o.metadata),
        InventoryKind::AgentFS => op
            .api::<AgentFS>(ns)
            .get_opt(name)
            .await?
            .map(|o| o.metadata),
    })
}

async fn delete(
    op: &Ctx,
    kind: InventoryKind,
    ns: &str,
    name: &str,
    uid: String,
) -> crate::cluster::error::Result<()> {
    let c = Controller::Rollout;
    match kind {
        InventoryKind::Agent => op.delete::<Agent>(c, ns, name, Some(uid)).await,
        InventoryKind::Tool => op.delete::<Tool>(c, ns, name, Some(uid)).await,
        InventoryKind::AgentFS => op.delete::<AgentFS>(c, ns, name, Some(uid)).await,
    }
}

/// Records that `entry` was pruned: a count and a log line. Its Event
/// waits for [`announce`].
fn pruned(op: &Ctx, ro: &Rollout, entry: &InventoryEntry) {
    op.metrics
        .pruned
        .get_or_create(&KindLabels {
            kind: entry.kind.as_str(),
        })
        .inc();
    info!(namespace = ?ro.metadata.namespace, kind = %entry.kind, name = %entry.name, "pruned");
}

/// The `Pruned` Events of a pass, published once the status without those
/// entries is written: an operator killed in between never announced them,
/// so the one that finishes the prune announces each exactly once.
pub async fn announce(op: &Ctx, ro: &Rollout, pruned: &[InventoryEntry]) {
    for entry in pruned {
        op.event(
            ro,
            EventType::Normal,
            Reason::Pruned,
            format!("{} {} is no longer in git: deleted", entry.kind, entry.name),
        )
        .await;
    }
}

/// What a prune pass left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// The status changed (write it).
    pub changed: bool,
    /// The inventory's entries changed (write them first).
    pub inventory_changed: bool,
    /// Something is still going (an object being deleted): look again soon.
    pub pending: bool,
    /// Entries deleted and dropped by this pass: [`announce`] them once the
    /// status is written.
    pub pruned: Vec<InventoryEntry>,
}

/// What happened to one entry git no longer has.
enum Settled {
    /// It left the inventory (`pruned`: because it was deleted).
    Dropped { pruned: bool },
    /// It stays, with why (a warning when something stops it).
    Stays { why: String, warn: bool },
}

/// Acts on one entry git no longer has: reads it, deletes it when it is
/// ours and still there, and says whether it stays in the inventory.
async fn act(op: &Ctx, ns: &str, entry: &InventoryEntry, prune_enabled: bool) -> Settled {
    // A cache miss is no proof of absence: read before acting.
    let live = match read_meta(op, entry.kind, ns, &entry.name).await {
        Ok(m) => m,
        Err(e) => {
            return Settled::Stays {
                why: format!("cannot read it: {e}"),
                warn: false,
            };
        }
    };
    let uid = match decide(entry, live.as_ref(), prune_enabled) {
        // Deleted earlier (by this pass before a restart, or once its
        // cleanup finished): it leaves the inventory now.
        Decision::Gone => {
            return Settled::Dropped {
                pruned: !entry.uid.is_empty(),
            };
        }
        Decision::Released => {
            warn!(namespace = %ns, kind = %entry.kind, name = %entry.name, "no longer labelled managed-by=exo; left in place and dropped from the inventory");
            return Settled::Dropped { pruned: false };
        }
        Decision::Wait(why) => return Settled::Stays { why, warn: false },
        Decision::Keep(why) => return Settled::Stays { why, warn: true },
        Decision::Delete { uid } => uid,
    };
    if let Err(e) = delete(op, entry.kind, ns, &entry.name, uid).await {
        let why = if e.category() == ErrorCategory::Forbidden {
            "delete forbidden for the operator's service account".to_owned()
        } else {
            format!("delete failed: {e}")
        };
        return Settled::Stays { why, warn: true };
    }
    // Gone now, or held by a finalizer: look again.
    let after = read_meta(op, entry.kind, ns, &entry.name)
        .await
        .ok()
        .flatten();
    match decide(entry, after.as_ref(), prune_enabled) {
        Decision::Gone | Decision::Released => Settled::Dropped { pruned: true },
        Decision::Wait(why) => Settled::Stays { why, warn: false },
        Decision::Keep(why) => Settled::Stays { why, warn: true },
        Decision::Delete { .. } => Settled::Stays {
            why: "delete accepted; waiting for it to go".to_owned(),
            warn: false,
        },
    }
}

/// Applies [`act`]'s answer: the entry to keep, or `None` once it left.
async fn settle(
    op: &Ctx,
    ro: &Rollout,
    ns: &str,
    mut entry: InventoryEntry,
    prune_enabled: bool,
    done: &mut Vec<InventoryEntry>,
) -> Option<InventoryEntry> {
    match act(op, ns, &entry, prune_enabled).await {
        Settled::Dropped { pruned: true } => {
            pruned(op, ro, &entry);
            done.push(entry);
            None
        }
        Settled::Dropped { pruned: false } => None,
        Settled::Stays { why, warn } => {
            // One Event per new reason, not one per look.
            if warn && entry.prune_blocked.as_deref() != Some(why.as_str()) {
                op.event(
                    ro,
                    EventType::Warning,
                    Reason::PruneBlocked,
                    format!("{} {}: {why}", entry.kind, entry.name),
                )
                .await;
            }
            entry.prune_blocked = Some(why);
            Some(entry)
        }
    }
}

/// Brings the inventory's `entries` up to date with `desired` and prunes
/// what git dropped; `status` gets the `Pruned` condition and the pending
/// prunes. The caller writes the entries (when [`Pass::inventory_changed`])
/// and then the status.
pub async fn run(
    op: &Ctx,
    ro: &Rollout,
    entries: &mut Vec<InventoryEntry>,
    status: &mut RolloutStatus,
    desired: &TenantDesired,
    prune_enabled: bool,
) -> Pass {
    let ns = ro.namespace().unwrap_or_default();
    let want: BTreeSet<(InventoryKind, String)> = desired.keys();
    let mut kept = Vec::with_capacity(entries.len());
    let mut done = Vec::new();
    let mut inventory_changed = false;
    let mut held: BTreeSet<(InventoryKind, String)> = BTreeSet::new();
    for entry in std::mem::take(entries) {
        let k = (entry.kind, entry.name.clone());
        if want.contains(&k) {
            // Desired: held with the uid the cache shows.
            let uid = cached_uid(op, entry.kind, &ns, &entry.name);
            let fresh = InventoryEntry {
                uid: uid.unwrap_or_else(|| entry.uid.clone()),
                prune_blocked: None,
                ..entry.clone()
            };
            inventory_changed |= fresh != entry;
            held.insert(k);
            kept.push(fresh);
            continue;
        }
        let before = entry.clone();
        match settle(op, ro, &ns, entry, prune_enabled, &mut done).await {
            Some(stays) => {
                inventory_changed |= stays != before;
                kept.push(stays);
            }
            None => inventory_changed = true,
        }
    }
    // Desired objects it did not hold yet.
    for (kind, name) in want.iter().filter(|k| !held.contains(*k)) {
        kept.push(InventoryEntry {
            kind: *kind,
            name: name.clone(),
            uid: cached_uid(op, *kind, &ns, name).unwrap_or_default(),
            prune_blocked: None,
        });
        inventory_changed = true;
    }
    super::inventory::sort(&mut kept);
    *entries = kept;
    let changed = record(status, entries, ro.meta().generation);
    let pending = entries
        .iter()
        .any(|e| e.prune_blocked.as_deref() == Some(BEING_DELETED));
    Pass {
        changed,
        inventory_changed,
        pending,
        pruned: done,
    }
}

/// Puts what `entries` say about pending prunes into `status`: the
/// `Pruned` condition and the first [`PENDING_PRUNES_SHOWN`] pending
/// entries. Returns whether the status changed. Pure.
pub fn record(
    status: &mut RolloutStatus,
    entries: &[InventoryEntry],
    generation: Option<i64>,
) -> bool {
    let pending: Vec<InventoryEntry> = entries
        .iter()
        .filter(|e| e.prune_blocked.is_some())
        .take(PENDING_PRUNES_SHOWN)
        .cloned()
        .collect();
    let mut changed = status.pending_prunes != pending;
    status.pending_prunes = pending;
    changed |= set_condition(&mut status.conditions, condition(entries, generation));
    changed
}

fn cached_uid(op: &Ctx, kind: InventoryKind, ns: &str, name: &str) -> Option<String> {
    cached_meta(op, kind, ns, name)
        .and_then(|m| m.uid)
        .filter(|u| !u.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(uid: &str, ours: bool, deleting: Option<&[&str]>) -> ObjectMeta {
        ObjectMeta {
            uid: Some(uid.into()),
            labels: ours
                .then(|| BTreeMap::from([(LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned())])),
            deletion_timestamp: deleting.map(|_| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                )
            }),
            finalizers: deleting.map(|f| f.iter().map(|s| (*s).to_owned()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn decisions() {
        let e = InventoryEntry {
            kind: InventoryKind::Agent,
            name: "a".into(),
            uid: "u1".into(),
            prune_blocked: None,
        };
        let unknown_uid = InventoryEntry {
            uid: String::new(),
            ..e.clone()
        };
        let cases: Vec<(&str, &InventoryEntry, Option<ObjectMeta>, bool, Decision)> = vec![
            ("gone", &e, None, true, Decision::Gone),
            (
                "same name, another object",
                &e,
                Some(meta("u2", true, None)),
                true,
                Decision::Gone,
            ),
            (
                "ours: delete",
                &e,
                Some(meta("u1", true, None)),
                true,
                Decision::Delete { uid: "u1".into() },
            ),
            (
                "uid not known yet: the live one",
                &unknown_uid,
                Some(meta("u9", true, None)),
                true,
                Decision::Delete { uid: "u9".into() },
            ),
            (
                "label removed: released",
                &e,
                Some(meta("u1", false, None)),
                true,
                Decision::Released,
            ),
            (
                "prune off",
                &e,
                Some(meta("u1", true, None)),
                false,
                Decision::Keep("pruning is off (the Fleet's spec.prune is false)".into()),
            ),
            (
                "finalizer",
                &e,
                Some(meta("u1", true, Some(&["x.io/hold"]))),
                true,
                Decision::Keep("deletion waits on finalizer(s) x.io/hold".into()),
            ),
        ];
        for (what, entry, live, prune, want) in cases {
            assert_eq!(decide(entry, live.as_ref(), prune), want, "{what}");
        }
    }

    #[test]
    fn the_condition_names_what_is_blocked() {
        let mut inv = vec![InventoryEntry {
            kind: InventoryKind::Tool,
            name: "t".into(),
            uid: "u".into(),
            prune_blocked: None,
        }];
        let c = condition(&inv, Some(3));
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "InSync"));
        inv[0].prune_blocked = Some(BEING_DELETED.into());
        let c = condition(&inv, Some(3));
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "Pruning"));
        inv[0].prune_blocked = Some("deletion waits on finalizer(s) f".into());
        let c = condition(&inv, Some(3));
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "PruneBlocked")
        );
        assert!(
            c.message
                .contains("Tool t: deletion waits on finalizer(s) f"),
            "{}",
            c.message
        );
        let mut conditions = vec![];
        assert!(set_condition(&mut conditions, c.clone()));
        assert!(
            !set_condition(&mut conditions, c),
            "same condition, no change"
        );
    }

    #[test]
    fn many_pending_prunes_are_counted_not_all_named() {
        let inv: Vec<InventoryEntry> = (0..45)
            .map(|i| InventoryEntry {
                kind: InventoryKind::Agent,
                name: format!("a{i:02}"),
                uid: "u".into(),
                prune_blocked: (i % 3 != 0).then(|| "deletion waits on finalizer(s) f".into()),
            })
            .collect();
        let mut status = RolloutStatus::default();
        assert!(record(&mut status, &inv, Some(2)));
        assert_eq!(status.pending_prunes.len(), PENDING_PRUNES_SHOWN);
        assert!(
            status
                .pending_prunes
                .iter()
                .all(|e| e.prune_blocked.is_some())
        );
        assert_eq!(status.pending_prunes[0].name, "a01");
        let c = &status.conditions[0];
        assert_eq!(c.observed_generation, Some(2));
        assert_eq!(c.message.matches("Agent a").count(), CONDITION_NAMES);
        assert!(c.message.ends_with("; and 20 more"), "{}", c.message);
        assert!(
            !record(&mut status, &inv, Some(2)),
            "the same again: no change"
        );
        // All pruned: nothing pending, in sync.
        let done: Vec<InventoryEntry> = inv
            .into_iter()
            .map(|e| InventoryEntry {
                prune_blocked: None,
                ..e
            })
            .collect();
        assert!(record(&mut status, &done, Some(2)));
        assert!(status.pending_prunes.is_empty());
        assert_eq!(status.conditions[0].reason, "InSync");
    }
}
