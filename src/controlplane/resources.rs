//! A deployment's resource view, built from Snapshot and Delta frames.
//!
//! Guarantees: a snapshot replaces the view atomically when its last chunk
//! arrives, never partially; deltas that arrive while a snapshot is being
//! received are applied at once to the current view *and* replayed, in
//! order, on top of the snapshot's content when it completes, so they are
//! neither lost nor reordered. Assumption (the protocol's rule): every delta
//! sent after a snapshot's first chunk is newer than the snapshot's content.

use std::collections::BTreeMap;

use crate::wire::{Delta, DeltaOp, Resource, ResourceKey, SnapshotChunk};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResourceError {
    #[error("snapshot {id}: expected chunk {expected}, got {got}")]
    ChunkOrder { id: String, expected: u32, got: u32 },
    #[error("delta seq {got} is not after {last}")]
    SeqOrder { last: u64, got: u64 },
}

#[derive(Debug, Default)]
struct Pending {
    id: String,
    next_chunk: u32,
    content: BTreeMap<ResourceKey, Resource>,
    deltas: Vec<Delta>,
}

#[derive(Debug, Default)]
pub struct ResourceView {
    live: BTreeMap<ResourceKey, Resource>,
    pending: Option<Pending>,
    last_seq: u64,
    pub snapshots_completed: u64,
    pub deltas_applied: u64,
}

fn apply(map: &mut BTreeMap<ResourceKey, Resource>, d: &Delta) {
    match d.op {
        DeltaOp::Upsert => {
            map.insert(d.resource.key.clone(), d.resource.clone());
        }
        DeltaOp::Remove => {
            map.remove(&d.resource.key);
        }
    }
}

impl ResourceView {
    /// A new connection starts its own delta sequence and snapshot; the
    /// current view stays until that snapshot completes.
    pub fn new_connection(&mut self) {
        self.pending = None;
        self.last_seq = 0;
    }

    pub fn apply_chunk(&mut self, chunk: SnapshotChunk) -> Result<(), ResourceError> {
        if chunk.chunk == 0 {
            // A new snapshot; an unfinished older one is abandoned.
            self.pending = Some(Pending {
                id: chunk.snapshot_id.clone(),
                ..Pending::default()
            });
        }
        let Some(p) = self.pending.as_mut() else {
            return Err(ResourceError::ChunkOrder {
                id: chunk.snapshot_id,
                expected: 0,
                got: chunk.chunk,
            });
        };
        if p.id != chunk.snapshot_id || p.next_chunk != chunk.chunk {
            return Err(ResourceError::ChunkOrder {
                id: chunk.snapshot_id,
                expected: p.next_chunk,
                got: chunk.chunk,
            });
        }
        p.next_chunk += 1;
        for r in chunk.resources {
            p.content.insert(r.key.clone(), r);
        }
        if chunk.last
            && let Some(mut p) = self.pending.take()
        {
            for d in &p.deltas {
                apply(&mut p.content, d);
            }
            self.live = p.content;
            self.snapshots_completed += 1;
        }
        Ok(())
    }

    pub fn apply_delta(&mut self, d: Delta) -> Result<(), ResourceError> {
        if d.seq <= self.last_seq {
            return Err(ResourceError::SeqOrder {
                last: self.last_seq,
                got: d.seq,
            });
        }
        self.last_seq = d.seq;
        apply(&mut self.live, &d);
        self.deltas_applied += 1;
        if let Some(p) = self.pending.as_mut() {
            p.deltas.push(d);
        }
        Ok(())
    }

    pub fn snapshot_in_progress(&self) -> bool {
        self.pending.is_some()
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        self.live.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ResourceKind;

    fn res(name: &str, rv: &str) -> Resource {
        Resource::bare(ResourceKind::Agent, name, rv)
    }

    fn chunk(id: &str, n: u32, last: bool, rs: Vec<Resource>) -> SnapshotChunk {
        SnapshotChunk {
            snapshot_id: id.into(),
            chunk: n,
            last,
            resources: rs,
        }
    }

    fn delta(seq: u64, op: DeltaOp, r: Resource) -> Delta {
        Delta {
            seq,
            op,
            resource: r,
        }
    }

    fn names(v: &ResourceView) -> Vec<(String, String)> {
        v.resources()
            .map(|r| (r.key.name.clone(), r.resource_version.clone()))
            .collect()
    }

    #[test]
    fn snapshot_swaps_only_at_the_last_chunk() {
        let mut v = ResourceView::default();
        v.apply_chunk(chunk("s1", 0, true, vec![res("old", "1")]))
            .unwrap();
        v.new_connection();
        v.apply_chunk(chunk("s2", 0, false, vec![res("a", "1")]))
            .unwrap();
        assert_eq!(names(&v), [("old".into(), "1".into())]);
        v.apply_chunk(chunk("s2", 1, true, vec![res("b", "1")]))
            .unwrap();
        assert_eq!(
            names(&v),
            [("a".into(), "1".into()), ("b".into(), "1".into())]
        );
        assert_eq!(v.snapshots_completed, 2);
    }

    #[test]
    fn deltas_mid_snapshot_are_neither_lost_nor_reordered() {
        let mut v = ResourceView::default();
        v.apply_chunk(chunk("s", 0, false, vec![res("x", "1"), res("y", "1")]))
            .unwrap();
        v.apply_delta(delta(1, DeltaOp::Upsert, res("x", "2")))
            .unwrap();
        v.apply_delta(delta(2, DeltaOp::Remove, res("y", "1")))
            .unwrap();
        v.apply_delta(delta(3, DeltaOp::Upsert, res("z", "5")))
            .unwrap();
        v.apply_delta(delta(4, DeltaOp::Upsert, res("z", "6")))
            .unwrap();
        // The chunk after the deltas still carries the older copy of w.
        v.apply_chunk(chunk("s", 1, true, vec![res("w", "1")]))
            .unwrap();
        assert_eq!(
            names(&v),
            [
                ("w".into(), "1".into()),
                ("x".into(), "2".into()),
                ("z".into(), "6".into())
            ]
        );
    }

    #[test]
    fn out_of_order_input_is_refused() {
        let mut v = ResourceView::default();
        assert!(v.apply_chunk(chunk("s", 1, true, vec![])).is_err());
        v.apply_chunk(chunk("s", 0, false, vec![])).unwrap();
        assert!(v.apply_chunk(chunk("t", 1, true, vec![])).is_err());
        v.apply_delta(delta(3, DeltaOp::Upsert, res("a", "1")))
            .unwrap();
        assert_eq!(
            v.apply_delta(delta(3, DeltaOp::Upsert, res("a", "2"))),
            Err(ResourceError::SeqOrder { last: 3, got: 3 })
        );
    }
}
