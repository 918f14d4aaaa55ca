//! The data side of the writer: turns queued snapshots and deltas into
//! frames, in an order the protocol allows. Pure.
//!
//! Guarantees:
//! - A snapshot's chunk 0 goes out before any delta queued after it, so the
//!   control plane replays those deltas on top of the snapshot.
//! - While a snapshot is being sent, queued deltas go out between its chunks
//!   (one chunk, then up to `DELTAS_PER_CHUNK` deltas), so a big snapshot
//!   does not hold changes back and a stream of changes does not starve the
//!   snapshot.
//! - Delta `seq` is strictly increasing per connection (the Outbox is made
//!   anew for every connection).
//! - A newer snapshot supersedes everything queued before it.
//!
//! Heartbeats and command results do not pass through here: the writer
//! sends them before any data frame.
//!
//! Resources arrive packed (`upstream::packed`): each is its wire text,
//! shared with the tracker, and a chunk's byte budget counts that text.

use std::collections::VecDeque;
use std::sync::Arc;

use super::packed::DataFrame;
use crate::wire::{DeltaOp, random_id};

pub const DELTAS_PER_CHUNK: usize = 16;

#[derive(Debug)]
pub enum DataItem {
    /// An object's packed wire text.
    Delta(DeltaOp, Arc<str>),
    Snapshot(Vec<Arc<str>>),
}

#[derive(Debug)]
struct Active {
    id: String,
    next: u32,
    chunks: VecDeque<Vec<Arc<str>>>,
    deltas_since_chunk: usize,
}

#[derive(Debug)]
pub struct Outbox {
    queue: VecDeque<DataItem>,
    active: Option<Active>,
    seq: u64,
    max_resources: usize,
    max_bytes: usize,
    pub snapshots_started: u64,
    pub deltas_sent: u64,
}

impl Outbox {
    pub fn new(max_resources: usize, max_bytes: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            active: None,
            seq: 0,
            max_resources: max_resources.max(1),
            max_bytes: max_bytes.max(1),
            snapshots_started: 0,
            deltas_sent: 0,
        }
    }

    pub fn push(&mut self, item: DataItem) {
        if matches!(item, DataItem::Snapshot(_)) {
            self.queue.clear();
            self.active = None;
        }
        self.queue.push_back(item);
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.active.is_none()
    }

    fn chunk(&self, resources: Vec<Arc<str>>) -> VecDeque<Vec<Arc<str>>> {
        let mut chunks = VecDeque::new();
        let mut cur = Vec::new();
        let mut bytes = 0usize;
        for r in resources {
            let size = r.len();
            if !cur.is_empty() && (cur.len() >= self.max_resources || bytes + size > self.max_bytes)
            {
                chunks.push_back(std::mem::take(&mut cur));
                bytes = 0;
            }
            bytes += size;
            cur.push(r);
        }
        chunks.push_back(cur);
        chunks
    }

    fn delta(&mut self, op: DeltaOp, resource: Arc<str>) -> DataFrame {
        self.seq += 1;
        self.deltas_sent += 1;
        DataFrame::Delta {
            seq: self.seq,
            op,
            resource,
        }
    }

    fn next_chunk(&mut self) -> Option<DataFrame> {
        let a = self.active.as_mut()?;
        let resources = a.chunks.pop_front().unwrap_or_default();
        let frame = DataFrame::Snapshot {
            snapshot_id: a.id.clone(),
            chunk: a.next,
            last: a.chunks.is_empty(),
            resources,
        };
        a.next += 1;
        a.deltas_since_chunk = 0;
        if a.chunks.is_empty() {
            self.active = None;
        }
        Some(frame)
    }

    /// The next data frame to send, if any.
    pub fn next_frame(&mut self) -> Option<DataFrame> {
        if let Some(a) = self.active.as_mut() {
            let delta_first = a.deltas_since_chunk < DELTAS_PER_CHUNK
                && matches!(self.queue.front(), Some(DataItem::Delta(..)));
            if delta_first {
                a.deltas_since_chunk += 1;
                if let Some(DataItem::Delta(op, r)) = self.queue.pop_front() {
                    return Some(self.delta(op, r));
                }
            }
            return self.next_chunk();
        }
        match self.queue.pop_front()? {
            DataItem::Delta(op, r) => Some(self.delta(op, r)),
            DataItem::Snapshot(resources) => {
                self.snapshots_started += 1;
                let chunks = self.chunk(resources);
                self.active = Some(Active {
                    id: random_id(),
                    next: 0,
                    chunks,
                    // chunk 0 goes first, before any delta queued after it
                    deltas_since_chunk: DELTAS_PER_CHUNK,
                });
                self.next_chunk()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controlplane::resources::ResourceView;
    use crate::upstream::packed::Packed;
    use crate::wire::{Frame, Resource, ResourceKind};

    fn r(name: &str, rv: &str) -> Arc<str> {
        Packed::new(&Resource::bare(ResourceKind::Agent, name, rv))
            .unwrap()
            .into_json()
    }

    /// The frames as the control plane reads them off the wire.
    fn drain(o: &mut Outbox) -> Vec<Frame> {
        std::iter::from_fn(|| o.next_frame())
            .map(|f| Frame::from_json(&f.to_json().unwrap()).unwrap())
            .collect()
    }

    fn shape(frames: &[Frame]) -> Vec<String> {
        frames
            .iter()
            .map(|f| match f {
                Frame::Snapshot(c) => format!("chunk{}{}", c.chunk, if c.last { "!" } else { "" }),
                Frame::Delta(d) => format!("delta{}:{}", d.seq, d.resource.key.name),
                other => other.kind().into(),
            })
            .collect()
    }

    #[test]
    fn deltas_queued_during_a_snapshot_interleave_after_chunk_zero() {
        let mut o = Outbox::new(1, 1 << 20);
        o.push(DataItem::Snapshot(vec![
            r("a", "1"),
            r("b", "1"),
            r("c", "1"),
        ]));
        o.push(DataItem::Delta(DeltaOp::Upsert, r("b", "2")));
        o.push(DataItem::Delta(DeltaOp::Remove, r("c", "1")));
        let frames = drain(&mut o);
        assert_eq!(
            shape(&frames),
            ["chunk0", "delta1:b", "delta2:c", "chunk1", "chunk2!"]
        );
        // What the control plane makes of it: the deltas win.
        let mut v = ResourceView::default();
        for f in frames {
            match f {
                Frame::Snapshot(c) => v.apply_chunk(c).unwrap(),
                Frame::Delta(d) => v.apply_delta(d).unwrap(),
                _ => unreachable!(),
            }
        }
        let got: Vec<_> = v
            .resources()
            .map(|r| (r.key.name.clone(), r.resource_version.clone()))
            .collect();
        assert_eq!(got, [("a".into(), "1".into()), ("b".into(), "2".into())]);
    }

    #[test]
    fn a_delta_stream_cannot_starve_the_snapshot() {
        let mut o = Outbox::new(1, 1 << 20);
        o.push(DataItem::Snapshot(vec![r("a", "1"), r("b", "1")]));
        for i in 0..40 {
            o.push(DataItem::Delta(DeltaOp::Upsert, r("x", &i.to_string())));
        }
        let s = shape(&drain(&mut o));
        let last_chunk = s.iter().position(|x| x == "chunk1!").unwrap();
        assert_eq!(last_chunk, 1 + DELTAS_PER_CHUNK);
        assert_eq!(s.len(), 42);
    }

    #[test]
    fn a_newer_snapshot_supersedes_queued_items_and_empty_snapshots_send_one_chunk() {
        let mut o = Outbox::new(10, 1 << 20);
        o.push(DataItem::Delta(DeltaOp::Upsert, r("x", "1")));
        o.push(DataItem::Snapshot(vec![]));
        assert_eq!(shape(&drain(&mut o)), ["chunk0!"]);
        assert!(o.is_idle());
    }

    #[test]
    fn chunks_respect_the_byte_budget() {
        let one = serde_json::to_vec(&Resource::bare(ResourceKind::Agent, "a", "1"))
            .unwrap()
            .len();
        let mut o = Outbox::new(100, one * 2);
        o.push(DataItem::Snapshot(vec![
            r("a", "1"),
            r("b", "1"),
            r("c", "1"),
        ]));
        assert_eq!(shape(&drain(&mut o)), ["chunk0", "chunk1!"]);
    }
}
