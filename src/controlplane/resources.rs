//! A deployment's resource view, built from Snapshot and Delta frames.
//!
//! Guarantees: a snapshot replaces the view atomically when its last chunk
//! arrives, never partially; deltas that arrive while a snapshot is being
//! received are applied at once to the current view *and* replayed, in
//! order, on top of the snapshot's content when it completes, so they are
//! neither lost nor reordered. Assumption (the protocol's rule): every delta
//! sent after a snapshot's first chunk is newer than the snapshot's content.

use std::collections::BTreeMap;

use crate::wire::{Delta, DeltaOp, Resource, ResourceKey, SnapshotChunk, clip_marked};

/// Longest part of a client's snapshot id quoted in an error: two of them
/// must fit in one close reason.
const ID_SHOWN_BYTES: usize = 20;

fn id(s: &str) -> std::borrow::Cow<'_, str> {
    clip_marked(s, ID_SHOWN_BYTES)
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ResourceError {
    #[error("chunk {got} of snapshot {:?} arrived with no snapshot in progress (chunk 0 starts one)", id(.snapshot))]
    NoSnapshot { snapshot: String, got: u32 },
    #[error("chunk {chunk} has snapshot_id {:?}, but snapshot {:?} is in progress", id(.got), id(.expected))]
    OtherSnapshot {
        expected: String,
        got: String,
        chunk: u32,
    },
    #[error("snapshot {:?}: expected chunk {expected}, got {got}", id(.snapshot))]
    ChunkOrder {
        snapshot: String,
        expected: u32,
        got: u32,
    },
    #[error("delta seq {got} is not after {last} (seq starts at 1 and increases)")]
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
            return Err(ResourceError::NoSnapshot {
                snapshot: chunk.snapshot_id,
                got: chunk.chunk,
            });
        };
        if p.id != chunk.snapshot_id {
            return Err(ResourceError::OtherSnapshot {
                expected: p.id.clone(),
                got: chunk.snapshot_id,
                chunk: chunk.chunk,
            });
        }
        if p.next_chunk != chunk.chunk {
            return Err(ResourceError::ChunkOrder {
                snapshot: chunk.snapshot_id,
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
        assert!(v.apply_chunk(chunk("s", 2, true, vec![])).is_err());
        v.apply_delta(delta(3, DeltaOp::Upsert, res("a", "1")))
            .unwrap();
        assert_eq!(
            v.apply_delta(delta(3, DeltaOp::Upsert, res("a", "2"))),
            Err(ResourceError::SeqOrder { last: 3, got: 3 })
        );
    }

    /// Each refusal says what was wrong, short enough for a close reason
    /// (with the `bad snapshot: ` prefix) and whole.
    #[test]
    fn chunk_errors_name_what_differs() {
        let mut v = ResourceView::default();
        let e = v.apply_chunk(chunk("s1", 1, true, vec![])).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"chunk 1 of snapshot "s1" arrived with no snapshot in progress (chunk 0 starts one)"#
        );
        v.apply_chunk(chunk("s1", 0, false, vec![])).unwrap();
        let e = v.apply_chunk(chunk("s2", 1, true, vec![])).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"chunk 1 has snapshot_id "s2", but snapshot "s1" is in progress"#
        );
        let e = v.apply_chunk(chunk("s1", 2, true, vec![])).unwrap_err();
        assert_eq!(e.to_string(), r#"snapshot "s1": expected chunk 1, got 2"#);
        // Ids as long as the operator's (32 hex) or longer still fit.
        let (a, b) = ("a".repeat(32), "b".repeat(300));
        let mut v = ResourceView::default();
        v.apply_chunk(chunk(&a, 0, false, vec![])).unwrap();
        let e = v.apply_chunk(chunk(&b, 1, true, vec![])).unwrap_err();
        let reason = format!("bad snapshot: {e}");
        assert!(
            reason.len() <= crate::wire::close::MAX_REASON_BYTES,
            "{} bytes: {reason}",
            reason.len()
        );
        assert!(reason.contains("is in progress"), "{reason}");
    }
}
