//! Upstream alerts: in-process code (the rollout engine) raises an
//! [`Alert`] through an [`AlertSink`]; the upstream connection drains the
//! matching [`AlertQueue`] and sends `alert` frames (`docs/protocol.md`).
//!
//! Guarantees:
//! - [`AlertSink::send`] never blocks on the network and never fails: it
//!   takes a short in-memory lock, queues and returns.
//! - The buffer is bounded ([`DEFAULT_CAPACITY`] unless told otherwise):
//!   when it is full the oldest alert is dropped and counted
//!   ([`AlertSink::dropped`]).
//! - Alerts go out in the order they were raised. One that was sent but not
//!   acknowledged (`alert_ack`) when its connection ended is sent again,
//!   first, on the next connection; the control plane drops duplicates by
//!   id. So an alert is lost only when the buffer overflows.
//! - An alert that would fail the receiver's validation even after cutting
//!   its fields to their bounds is dropped at `send` (logged and counted):
//!   sending it would close the connection, again on every reconnect.
//! - The sink also knows which keyed alerts are active (firing and not yet
//!   resolved) by severity and namespace, whether or not they were
//!   delivered: the analysis' `alerts` check reads [`AlertSink::active`].

pub mod book;
pub use book::AlertBook;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tracing::warn;

use crate::analysis::AlertCounts;
use crate::wire::{Alert, AlertState, Severity};

/// How many alerts wait for the control plane at most.
pub const DEFAULT_CAPACITY: usize = 256;

/// The bounded buffer, pure: queued alerts, then those sent on the current
/// connection and not yet acknowledged.
#[derive(Debug)]
pub struct Buffer {
    capacity: usize,
    /// Sent, not acknowledged, in send order. All are older than `queued`.
    in_flight: VecDeque<Alert>,
    queued: VecDeque<Alert>,
    dropped: u64,
}

impl Buffer {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            in_flight: VecDeque::new(),
            queued: VecDeque::new(),
            dropped: 0,
        }
    }

    /// Queues an alert; returns the alert dropped to make room, if any.
    pub fn push(&mut self, alert: Alert) -> Option<Alert> {
        let evicted = if self.len() >= self.capacity {
            self.dropped += 1;
            self.in_flight
                .pop_front()
                .or_else(|| self.queued.pop_front())
        } else {
            None
        };
        self.queued.push_back(alert);
        evicted
    }

    /// The next alert to send; it stays held until acknowledged.
    pub fn next_to_send(&mut self) -> Option<Alert> {
        let a = self.queued.pop_front()?;
        self.in_flight.push_back(a.clone());
        Some(a)
    }

    /// The control plane stored `id`: stop holding it. Returns whether it
    /// was held.
    pub fn ack(&mut self, id: &str) -> bool {
        match self.in_flight.iter().position(|a| a.id == id) {
            Some(i) => self.in_flight.remove(i).is_some(),
            None => false,
        }
    }

    /// A connection ended: what it sent without an acknowledgement goes
    /// out again first, in the original order.
    pub fn requeue_unacked(&mut self) {
        while let Some(a) = self.in_flight.pop_back() {
            self.queued.push_front(a);
        }
    }

    pub fn has_queued(&self) -> bool {
        !self.queued.is_empty()
    }

    /// Alerts held: queued and in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len() + self.queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Alerts dropped because the buffer was full, since it was made.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[derive(Debug)]
struct Shared {
    buffer: Mutex<Buffer>,
    /// Wakes the connection's writer when an alert is queued.
    queued: Notify,
    /// Alerts refused at `send` for failing validation.
    rejected: std::sync::atomic::AtomicU64,
    /// Keyed alerts firing now: key -> (severity, namespace).
    active: Mutex<BTreeMap<String, (Severity, String)>>,
}

impl Shared {
    /// A panic elsewhere while holding the lock leaves the buffer usable
    /// (every operation keeps it consistent), so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where in-process code raises alerts. Cheap to clone; every clone feeds
/// the same buffer.
#[derive(Debug, Clone)]
pub struct AlertSink {
    shared: Arc<Shared>,
}

/// What the upstream connection drains; give it to
/// [`super::run_with_alerts`]. Clones share the buffer: the buffer outlives a
/// connection (and a leadership term) so held alerts wait for the next one.
/// Only one connection at a time should drain it.
#[derive(Debug, Clone)]
pub struct AlertQueue {
    shared: Arc<Shared>,
}

/// A sink and its queue, with a buffer of `capacity` alerts (at least 1).
pub fn channel(capacity: usize) -> (AlertSink, AlertQueue) {
    let shared = Arc::new(Shared {
        buffer: Mutex::new(Buffer::new(capacity)),
        queued: Notify::new(),
        rejected: std::sync::atomic::AtomicU64::new(0),
        active: Mutex::new(BTreeMap::new()),
    });
    (
        AlertSink {
            shared: shared.clone(),
        },
        AlertQueue { shared },
    )
}

impl AlertSink {
    /// Queues `alert` for the control plane. Fields longer than the
    /// protocol allows are cut; an alert still invalid (empty reason or
    /// object, a reason that is not an identifier) is dropped with a
    /// warning.
    pub fn send(&self, alert: Alert) {
        let alert = alert.bounded();
        if let Err(e) = alert.validate() {
            self.shared
                .rejected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            warn!(error = %e, reason = %alert.reason, object = %alert.object, "invalid alert dropped");
            return;
        }
        if !alert.key.is_empty() {
            let mut active = self
                .shared
                .active
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match alert.state {
                AlertState::Firing => {
                    active.insert(alert.key.clone(), (alert.severity, alert.namespace.clone()));
                }
                AlertState::Resolved => {
                    active.remove(&alert.key);
                }
            }
        }
        let (evicted, dropped) = {
            let mut b = self.shared.lock();
            let evicted = b.push(alert);
            (evicted, b.dropped())
        };
        // Logged at 1, 2, 4, 8, ... drops: a long outage does not flood the log.
        if let Some(old) = evicted
            && dropped.is_power_of_two()
        {
            warn!(dropped, oldest_reason = %old.reason, oldest_object = %old.object, "alert buffer full; dropping the oldest alerts");
        }
        self.shared.queued.notify_one();
    }

    /// Alerts dropped because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.shared.lock().dropped()
    }

    /// The keyed alerts raised through this sink that are active now (not
    /// resolved since), about objects in `namespaces`, by severity.
    pub fn active<S: AsRef<str>>(&self, namespaces: &[S]) -> AlertCounts {
        let active = self
            .shared
            .active
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut counts = AlertCounts::default();
        for (severity, ns) in active.values() {
            if namespaces.iter().any(|n| n.as_ref() == ns) {
                match severity {
                    Severity::Warning => counts.warning += 1,
                    Severity::Critical => counts.critical += 1,
                }
            }
        }
        counts
    }

    /// Alerts dropped at `send` for failing validation.
    pub fn rejected(&self) -> u64 {
        self.shared
            .rejected
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Alerts waiting: queued or sent and not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.shared.lock().len()
    }
}

impl AlertQueue {
    pub(super) fn next_to_send(&self) -> Option<Alert> {
        self.shared.lock().next_to_send()
    }

    pub(super) fn ack(&self, id: &str) -> bool {
        self.shared.lock().ack(id)
    }

    /// Called when a connection starts: what the last one left
    /// unacknowledged is sent again.
    pub(super) fn requeue_unacked(&self) {
        self.shared.lock().requeue_unacked();
    }

    pub(super) fn len(&self) -> usize {
        self.shared.lock().len()
    }

    /// Resolves when an alert was queued since the last call (or now).
    pub(super) async fn queued(&self) {
        self.shared.queued.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_counts_keyed_alerts_active_until_resolved_by_namespace() {
        let (sink, _queue) = channel(4);
        let a =
            |sev, ns: &str, key: &str| Alert::new(sev, "CrashLoop", ns, "Agent/a", "m").keyed(key);
        sink.send(a(Severity::Warning, "t1", "k1"));
        sink.send(a(Severity::Critical, "t1", "k2"));
        sink.send(a(Severity::Warning, "t2", "k3"));
        // A one-off alert (no key) is never active.
        sink.send(Alert::new(Severity::Critical, "Drift", "t1", "Pod/p", "m"));
        assert_eq!(
            sink.active(&["t1"]),
            AlertCounts {
                warning: 1,
                critical: 1
            }
        );
        assert_eq!(sink.active(&["t1", "t2"]).warning, 2);
        let mut resolved = a(Severity::Warning, "t1", "k1");
        resolved.state = AlertState::Resolved;
        sink.send(resolved);
        assert_eq!(
            sink.active(&["t1"]),
            AlertCounts {
                warning: 0,
                critical: 1
            }
        );
        assert_eq!(sink.active::<&str>(&[]), AlertCounts::default());
    }

    fn alert(n: u32) -> Alert {
        let mut a = Alert::new(Severity::Warning, "ContentDrift", "t1", "Pod/p", "m");
        a.id = format!("a{n}");
        a
    }

    fn ids(b: &mut Buffer) -> Vec<String> {
        std::iter::from_fn(|| b.next_to_send())
            .map(|a| a.id)
            .collect()
    }

    #[test]
    fn alerts_go_out_in_order() {
        let mut b = Buffer::new(8);
        for n in 0..3 {
            assert!(b.push(alert(n)).is_none());
        }
        assert_eq!(ids(&mut b), ["a0", "a1", "a2"]);
        assert!(!b.has_queued());
        assert_eq!(b.len(), 3, "held until acknowledged");
    }

    #[test]
    fn a_full_buffer_drops_the_oldest_and_counts() {
        let mut b = Buffer::new(3);
        for n in 0..5 {
            b.push(alert(n));
        }
        assert_eq!(b.dropped(), 2);
        assert_eq!(b.len(), 3);
        assert_eq!(ids(&mut b), ["a2", "a3", "a4"]);
    }

    #[test]
    fn unacknowledged_alerts_are_older_and_dropped_first() {
        let mut b = Buffer::new(3);
        b.push(alert(0));
        b.push(alert(1));
        assert_eq!(b.next_to_send().map(|a| a.id), Some("a0".into()));
        b.push(alert(2));
        let dropped = b.push(alert(3)).map(|a| a.id);
        assert_eq!(dropped.as_deref(), Some("a0"));
        assert_eq!(ids(&mut b), ["a1", "a2", "a3"]);
    }

    #[test]
    fn unacknowledged_alerts_are_resent_first_in_order() {
        let mut b = Buffer::new(8);
        for n in 0..4 {
            b.push(alert(n));
        }
        assert_eq!(ids(&mut b)[..2], ["a0", "a1"]);
        assert!(b.ack("a1"));
        assert!(!b.ack("a1"), "acknowledged once");
        b.push(alert(4));
        // The connection ends: a0, a2 and a3 were not acknowledged.
        b.requeue_unacked();
        assert_eq!(ids(&mut b), ["a0", "a2", "a3", "a4"]);
        for id in ["a0", "a2", "a3", "a4"] {
            assert!(b.ack(id));
        }
        assert!(b.is_empty());
    }

    #[tokio::test]
    async fn the_sink_never_blocks_and_wakes_the_queue() {
        let (sink, queue) = channel(2);
        let clone = sink.clone();
        for n in 0..3 {
            clone.send(alert(n));
        }
        assert_eq!((sink.dropped(), sink.pending()), (1, 2));
        tokio::time::timeout(std::time::Duration::from_secs(1), queue.queued())
            .await
            .unwrap();
        assert_eq!(queue.next_to_send().map(|a| a.id), Some("a1".into()));
    }

    #[test]
    fn invalid_alerts_are_refused_at_send_and_long_fields_cut() {
        let (sink, queue) = channel(4);
        let mut bad = alert(0);
        bad.reason = "not an identifier".into();
        sink.send(bad);
        let mut long = alert(1);
        long.message = "m".repeat(10_000);
        sink.send(long);
        assert_eq!((sink.rejected(), sink.pending()), (1, 1));
        let sent = queue.next_to_send().unwrap();
        assert_eq!(sent.message.len(), crate::wire::alert_limits::MESSAGE);
    }
}
