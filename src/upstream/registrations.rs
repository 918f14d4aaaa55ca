//! Tenant registrations on their way to the control plane
//! (`tenant_register`, `support_lane`; docs/protocol.md): the tenant
//! sagas ask through a [`Registrations`] handle, the upstream connection
//! sends what is held and hands back each `register_ack`.
//!
//! Guarantees:
//! - [`Registrations::request`] never blocks on the network: it records
//!   the wish and says where it stands ([`Progress`]).
//! - One record per tenant and kind is held: a newer one replaces what
//!   was held for its key (the control plane keeps the newest generation
//!   anyway), so the book is bounded by the tenants.
//! - A record sent but not acknowledged when its connection ends is sent
//!   again, first, on the next one; so a record is acknowledged at least
//!   once, and a step that asks again after a restart gets its ack then
//!   (the same record has the same id).
//! - Acks not yet collected are bounded ([`MAX_ACKED`], oldest dropped):
//!   a dropped one only means the step asks, and is acknowledged, again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::wire::{RecordKind, Registration};

/// Acknowledged ids kept for the steps to collect.
pub const MAX_ACKED: usize = 4096;

/// Where a registration stands, for the step that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The control plane stored it.
    Acked,
    /// On its way (queued or sent): look again soon.
    InFlight(String),
    /// The control plane connected does not take registrations: someone
    /// has to upgrade it.
    Refused(String),
}

/// Whether a connection is up, and whether its control plane takes
/// registrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down,
    Up { accepts: bool },
}

/// The pure part: what is held, sent and acknowledged.
#[derive(Debug)]
pub struct Book {
    queued: BTreeMap<(String, RecordKind), Registration>,
    in_flight: BTreeMap<(String, RecordKind), Registration>,
    acked: VecDeque<String>,
    link: Link,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            queued: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            acked: VecDeque::new(),
            link: Link::Down,
        }
    }
}

fn key(r: &Registration) -> (String, RecordKind) {
    (r.tenant_name().to_owned(), r.kind())
}

impl Book {
    /// A step wants `r` registered. Collects its ack if there is one.
    pub fn request(&mut self, r: Registration) -> Progress {
        if let Some(i) = self.acked.iter().position(|id| id == r.id()) {
            self.acked.remove(i);
            return Progress::Acked;
        }
        let k = key(&r);
        let held = self.in_flight.get(&k).or_else(|| self.queued.get(&k));
        if held.is_none_or(|h| h.id() != r.id()) {
            self.in_flight.remove(&k);
            self.queued.insert(k, r);
        }
        match self.link {
            Link::Down => Progress::InFlight("waiting for the connection to the control plane".into()),
            Link::Up { accepts: false } => Progress::Refused(
                "the control plane does not take tenant registrations (it is older than this operator); upgrade it".into(),
            ),
            Link::Up { accepts: true } => {
                Progress::InFlight("sent to the control plane; waiting for its ack".into())
            }
        }
    }

    /// A connection came up; what the last one sent without an ack goes
    /// out again.
    pub fn connected(&mut self, accepts: bool) {
        self.link = Link::Up { accepts };
        for (k, r) in std::mem::take(&mut self.in_flight) {
            self.queued.entry(k).or_insert(r);
        }
    }

    pub fn disconnected(&mut self) {
        self.link = Link::Down;
    }

    /// The next record to send on a connection that takes them.
    pub fn next_to_send(&mut self) -> Option<Registration> {
        if self.link != (Link::Up { accepts: true }) {
            return None;
        }
        let (k, r) = self.queued.pop_first()?;
        self.in_flight.insert(k, r.clone());
        Some(r)
    }

    /// The control plane stored `id`. Returns whether it was held.
    pub fn ack(&mut self, id: &str) -> bool {
        let held = self
            .in_flight
            .iter()
            .find(|(_, r)| r.id() == id)
            .map(|(k, _)| k.clone());
        let Some(k) = held else {
            return false;
        };
        self.in_flight.remove(&k);
        if self.acked.len() >= MAX_ACKED {
            self.acked.pop_front();
        }
        self.acked.push_back(id.to_owned());
        true
    }

    /// Records held: queued and in flight.
    pub fn len(&self) -> usize {
        self.queued.len() + self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug, Default)]
struct Shared {
    book: Mutex<Book>,
    /// Wakes the connection's writer when a record is queued.
    queued: Notify,
}

/// The handle the tenant sagas and the upstream connection share. Cheap
/// to clone; it outlives connections and leadership terms.
#[derive(Debug, Clone, Default)]
pub struct Registrations {
    shared: Arc<Shared>,
}

impl Registrations {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every operation keeps the book consistent, so a panic elsewhere
    /// while holding the lock is ignored.
    fn lock(&self) -> MutexGuard<'_, Book> {
        self.shared
            .book
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// See [`Book::request`]; wakes the writer when the record is new.
    pub fn request(&self, r: Registration) -> Progress {
        let p = self.lock().request(r);
        if matches!(p, Progress::InFlight(_)) {
            self.shared.queued.notify_one();
        }
        p
    }

    pub fn connected(&self, accepts: bool) {
        self.lock().connected(accepts);
        self.shared.queued.notify_one();
    }

    pub fn disconnected(&self) {
        self.lock().disconnected();
    }

    pub fn next_to_send(&self) -> Option<Registration> {
        self.lock().next_to_send()
    }

    pub fn ack(&self, id: &str) -> bool {
        self.lock().ack(id)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves when a record may have been queued.
    pub async fn queued(&self) {
        self.shared.queued.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enroll(generation: i64) -> Registration {
        Registration::tenant("acme", generation, true, "standard", "canary")
    }

    #[test]
    fn a_record_is_acked_after_it_was_sent_and_the_ack_collected_once() {
        let mut b = Book::default();
        let r = enroll(1);
        assert!(matches!(b.request(r.clone()), Progress::InFlight(m) if m.contains("connection")));
        assert_eq!(b.next_to_send(), None, "no connection");
        b.connected(true);
        assert!(matches!(b.request(r.clone()), Progress::InFlight(m) if m.contains("ack")));
        assert_eq!(b.next_to_send(), Some(r.clone()));
        assert_eq!(b.next_to_send(), None, "sent once");
        assert!(!b.ack("other"));
        assert!(b.ack(r.id()));
        assert!(b.is_empty());
        assert_eq!(b.request(r.clone()), Progress::Acked);
        // Collected: asking again sends it again (a restart does this).
        assert!(matches!(b.request(r.clone()), Progress::InFlight(_)));
        assert_eq!(b.next_to_send(), Some(r));
    }

    #[test]
    fn unacked_records_go_again_on_the_next_connection_and_newer_replace_older() {
        let mut b = Book::default();
        b.connected(true);
        b.request(enroll(1));
        let lane = Registration::support("acme", 1, Some("gold"), &[]);
        b.request(lane.clone());
        assert!(b.next_to_send().is_some());
        assert!(b.next_to_send().is_some());
        b.disconnected();
        // Generation 2 replaces generation 1 of the same record.
        b.request(enroll(2));
        assert_eq!(b.len(), 2);
        b.connected(true);
        let mut sent = vec![b.next_to_send().unwrap(), b.next_to_send().unwrap()];
        sent.sort_by_key(|r| r.kind());
        assert_eq!(sent, [enroll(2), lane]);
        // A late ack of generation 1 is for nothing held.
        assert!(!b.ack(enroll(1).id()));
    }

    #[test]
    fn an_older_control_plane_refuses_and_nothing_is_sent() {
        let mut b = Book::default();
        b.connected(false);
        assert!(matches!(b.request(enroll(1)), Progress::Refused(m) if m.contains("older")));
        assert_eq!(b.next_to_send(), None);
        b.disconnected();
        b.connected(true);
        assert_eq!(
            b.next_to_send(),
            Some(enroll(1)),
            "held for an upgraded one"
        );
    }

    #[test]
    fn uncollected_acks_are_bounded() {
        let mut b = Book::default();
        b.connected(true);
        for i in 0..(MAX_ACKED + 5) {
            let r = Registration::tenant(&format!("t{i}"), 1, true, "", "");
            b.request(r.clone());
            b.next_to_send();
            assert!(b.ack(r.id()));
        }
        assert_eq!(b.acked.len(), MAX_ACKED);
    }
}
