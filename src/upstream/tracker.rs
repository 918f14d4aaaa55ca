//! What the operator has seen of the watched kinds, and the deltas each
//! watch event implies. Pure: it takes watch events and returns changes.
//!
//! Guarantees: an event that does not change an object's resourceVersion
//! produces no delta; a re-list (`Init` .. `InitDone`) produces `remove`s for
//! objects that vanished meanwhile and `upsert`s for new or changed ones, so
//! the control plane's view converges without a full snapshot. A kind is
//! "ready" after its first complete list; the first snapshot waits for all.
//!
//! Each object is held once, as its packed wire text ([`Packed`]): what a
//! snapshot or delta sends is that text, shared, not a copy.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::packed::Packed;
use crate::wire::{DeltaOp, ResourceKey, ResourceKind};

/// A watch event reduced to what the tracker needs.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Init,
    InitApply(Packed),
    InitDone,
    Apply(Packed),
    Delete(Packed),
}

/// What the tracker keeps of an object beside its key.
#[derive(Debug)]
struct Held {
    resource_version: Box<str>,
    json: Arc<str>,
}

#[derive(Debug, Default)]
pub struct Tracker {
    objects: BTreeMap<ResourceKey, Held>,
    relisting: BTreeMap<ResourceKind, BTreeMap<ResourceKey, Packed>>,
    ready: BTreeSet<ResourceKind>,
    kinds: BTreeSet<ResourceKind>,
}

/// A delta to send: the op and the object's packed text (for a remove,
/// its last state as the watch had it).
pub type Change = (DeltaOp, Packed);

impl Tracker {
    pub fn new(kinds: impl IntoIterator<Item = ResourceKind>) -> Self {
        Self {
            kinds: kinds.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Every kind has been listed once.
    pub fn ready(&self) -> bool {
        self.kinds.iter().all(|k| self.ready.contains(k))
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The current content, for a snapshot: each object's kind and its
    /// packed text (shared, not copied), in key order.
    pub fn all(&self) -> impl Iterator<Item = (ResourceKind, &Arc<str>)> + '_ {
        self.objects.iter().map(|(k, h)| (k.kind, &h.json))
    }

    pub fn on_event(&mut self, kind: ResourceKind, ev: WatchEvent) -> Vec<Change> {
        match ev {
            WatchEvent::Init => {
                self.relisting.insert(kind, BTreeMap::new());
                Vec::new()
            }
            WatchEvent::InitApply(r) => {
                self.relisting
                    .entry(kind)
                    .or_default()
                    .insert(r.key.clone(), r);
                Vec::new()
            }
            WatchEvent::InitDone => {
                let listed = self.relisting.remove(&kind).unwrap_or_default();
                self.ready.insert(kind);
                let mut changes = Vec::new();
                let gone: Vec<ResourceKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.kind == kind && !listed.contains_key(*k))
                    .cloned()
                    .collect();
                for key in gone {
                    if let Some(h) = self.objects.remove(&key) {
                        let last = Packed::from_parts(key, h.resource_version.into(), h.json);
                        changes.push((DeltaOp::Remove, last));
                    }
                }
                for (_, r) in listed {
                    changes.extend(self.upsert(r));
                }
                changes
            }
            WatchEvent::Apply(r) => self.upsert(r).into_iter().collect(),
            WatchEvent::Delete(r) => match self.objects.remove(&r.key) {
                Some(_) => vec![(DeltaOp::Remove, r)],
                None => Vec::new(),
            },
        }
    }

    fn upsert(&mut self, r: Packed) -> Option<Change> {
        match self.objects.get(&r.key) {
            Some(old) if *old.resource_version == r.resource_version => None,
            _ => {
                let held = Held {
                    resource_version: r.resource_version.as_str().into(),
                    json: r.json().clone(),
                };
                self.objects.insert(r.key.clone(), held);
                Some((DeltaOp::Upsert, r))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: ResourceKind, name: &str, rv: &str) -> Packed {
        Packed::new(&crate::wire::Resource::bare(kind, name, rv)).unwrap()
    }

    fn ops(c: &[Change]) -> Vec<(DeltaOp, String, String)> {
        c.iter()
            .map(|(op, r)| (*op, r.key.name.clone(), r.resource_version.clone()))
            .collect()
    }

    use ResourceKind::{Agent, Tool};

    #[test]
    fn ready_after_every_kind_listed() {
        let mut t = Tracker::new([Agent, Tool]);
        assert!(!t.ready());
        t.on_event(Agent, WatchEvent::Init);
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "a", "1")));
        let c = t.on_event(Agent, WatchEvent::InitDone);
        assert_eq!(ops(&c), [(DeltaOp::Upsert, "a".into(), "1".into())]);
        assert!(!t.ready());
        t.on_event(Tool, WatchEvent::Init);
        t.on_event(Tool, WatchEvent::InitDone);
        assert!(t.ready());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn unchanged_resource_version_is_not_a_delta() {
        let mut t = Tracker::new([Agent]);
        assert_eq!(
            t.on_event(Agent, WatchEvent::Apply(r(Agent, "a", "1")))
                .len(),
            1
        );
        assert!(
            t.on_event(Agent, WatchEvent::Apply(r(Agent, "a", "1")))
                .is_empty()
        );
        let c = t.on_event(Agent, WatchEvent::Delete(r(Agent, "a", "2")));
        assert_eq!(ops(&c), [(DeltaOp::Remove, "a".into(), "2".into())]);
        assert!(
            t.on_event(Agent, WatchEvent::Delete(r(Agent, "a", "2")))
                .is_empty()
        );
    }

    #[test]
    fn relist_removes_vanished_and_keeps_other_kinds() {
        let mut t = Tracker::new([Agent, Tool]);
        t.on_event(Agent, WatchEvent::Apply(r(Agent, "gone", "1")));
        t.on_event(Agent, WatchEvent::Apply(r(Agent, "kept", "1")));
        t.on_event(Tool, WatchEvent::Apply(r(Tool, "tool", "1")));
        t.on_event(Agent, WatchEvent::Init);
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "kept", "1")));
        t.on_event(Agent, WatchEvent::InitApply(r(Agent, "new", "3")));
        let c = t.on_event(Agent, WatchEvent::InitDone);
        assert_eq!(
            ops(&c),
            [
                (DeltaOp::Remove, "gone".into(), "1".into()),
                (DeltaOp::Upsert, "new".into(), "3".into())
            ]
        );
        let names: Vec<String> = t
            .all()
            .map(|(_, j)| {
                serde_json::from_str::<crate::wire::Resource>(j)
                    .unwrap()
                    .key
                    .name
            })
            .collect();
        assert_eq!(names, ["kept", "new", "tool"]);
    }
}
