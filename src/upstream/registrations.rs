//! Records on their way to the control plane that must be acknowledged:
//! tenant registrations (`tenant_register`, `support_lane`, answered by
//! `register_ack`) and incidents (`incident`, answered by `incident_ack`;
//! docs/protocol.md). The tenant sagas and the incident dispatcher ask
//! through an [`Outbox`] handle ([`Registrations`], [`Incidents`]); the
//! upstream connection sends what is held and hands back each ack.
//!
//! Guarantees:
//! - [`Registrations::request`] never blocks on the network: it records
//!   the wish and says where it stands ([`Progress`]).
//! - One record per key is held ([`Record::key`]: a tenant and kind for
//!   a registration, the id for an incident): a newer one replaces what
//!   was held for its key (the control plane keeps the newest generation
//!   anyway), so the book is bounded by the tenants, or by what the
//!   dispatcher asks for.
//! - A record sent but not acknowledged when its connection ends is sent
//!   again, first, on the next one; so a record is acknowledged at least
//!   once, and a step that asks again after a restart gets its ack then
//!   (the same record has the same id).
//! - Acks not yet collected are bounded ([`MAX_ACKED`], oldest dropped):
//!   a dropped one only means the step asks, and is acknowledged, again.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::wire::{IncidentRecord, RecordKind, Registration};

/// What an outbox holds: a record with an id the control plane's ack
/// names, and a key under which a newer record replaces an older one.
pub trait Record: Clone + PartialEq + std::fmt::Debug + Send + 'static {
    type Key: Ord + Clone + std::fmt::Debug + Send;
    fn key(&self) -> Self::Key;
    fn id(&self) -> &str;
    /// What a control plane that does not take them is said not to take.
    const WHAT: &'static str;
}

impl Record for Registration {
    type Key = (String, RecordKind);
    fn key(&self) -> Self::Key {
        (self.tenant_name().to_owned(), self.kind())
    }
    fn id(&self) -> &str {
        Registration::id(self)
    }
    const WHAT: &'static str = "tenant registrations";
}

impl Record for IncidentRecord {
    type Key = String;
    fn key(&self) -> Self::Key {
        self.id.clone()
    }
    fn id(&self) -> &str {
        &self.id
    }
    const WHAT: &'static str = "incidents";
}

/// Tenant registrations' outbox.
pub type Registrations = Outbox<Registration>;
/// Incidents' outbox.
pub type Incidents = Outbox<IncidentRecord>;

/// Acknowledged ids kept for the steps to collect.
pub const MAX_ACKED: usize = 4096;

/// Where a record stands, for the one that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The control plane stored it; what its ack said beside the id (an
    /// incident's lane).
    Acked(Option<String>),
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
pub struct Book<R: Record> {
    queued: BTreeMap<R::Key, R>,
    in_flight: BTreeMap<R::Key, R>,
    acked: VecDeque<(String, Option<String>)>,
    link: Link,
}

impl<R: Record> Default for Book<R> {
    fn default() -> Self {
        Self {
            queued: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            acked: VecDeque::new(),
            link: Link::Down,
        }
    }
}

impl<R: Record> Book<R> {
    /// Someone wants `r` stored. Collects its ack if there is one.
    pub fn request(&mut self, r: R) -> Progress {
        if let Some(i) = self.acked.iter().position(|(id, _)| id == r.id()) {
            let (_, note) = self.acked.remove(i).unwrap_or_default();
            return Progress::Acked(note);
        }
        let k = r.key();
        let held = self.in_flight.get(&k).or_else(|| self.queued.get(&k));
        if held.is_none_or(|h| h.id() != r.id()) {
            self.in_flight.remove(&k);
            self.queued.insert(k, r);
        }
        match self.link {
            Link::Down => {
                Progress::InFlight("waiting for the connection to the control plane".into())
            }
            Link::Up { accepts: false } => Progress::Refused(format!(
                "the control plane does not take {} (it is older than this operator); upgrade it",
                R::WHAT
            )),
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
    pub fn next_to_send(&mut self) -> Option<R> {
        if self.link != (Link::Up { accepts: true }) {
            return None;
        }
        let (k, r) = self.queued.pop_first()?;
        self.in_flight.insert(k, r.clone());
        Some(r)
    }

    /// The control plane stored `id` (with `note`, an incident's lane).
    /// Returns whether it was held.
    pub fn ack(&mut self, id: &str, note: Option<String>) -> bool {
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
        self.acked.push_back((id.to_owned(), note));
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

#[derive(Debug)]
struct Shared<R: Record> {
    book: Mutex<Book<R>>,
    /// Wakes the connection's writer when a record is queued.
    queued: Notify,
}

/// The handle the askers (tenant sagas, the incident dispatcher) and the
/// upstream connection share. Cheap to clone; it outlives connections and
/// leadership terms.
#[derive(Debug)]
pub struct Outbox<R: Record> {
    shared: Arc<Shared<R>>,
}

impl<R: Record> Clone for Outbox<R> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<R: Record> Default for Outbox<R> {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                book: Mutex::new(Book::default()),
                queued: Notify::new(),
            }),
        }
    }
}

impl<R: Record> Outbox<R> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every operation keeps the book consistent, so a panic elsewhere
    /// while holding the lock is ignored.
    fn lock(&self) -> MutexGuard<'_, Book<R>> {
        self.shared
            .book
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// See [`Book::request`]; wakes the writer when the record is new.
    pub fn request(&self, r: R) -> Progress {
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

    pub fn next_to_send(&self) -> Option<R> {
        self.lock().next_to_send()
    }

    pub fn ack(&self, id: &str, note: Option<String>) -> bool {
        self.lock().ack(id, note)
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
        let mut b = Book::<Registration>::default();
        let r = enroll(1);
        assert!(matches!(b.request(r.clone()), Progress::InFlight(m) if m.contains("connection")));
        assert_eq!(b.next_to_send(), None, "no connection");
        b.connected(true);
        assert!(matches!(b.request(r.clone()), Progress::InFlight(m) if m.contains("ack")));
        assert_eq!(b.next_to_send(), Some(r.clone()));
        assert_eq!(b.next_to_send(), None, "sent once");
        assert!(!b.ack("other", None));
        assert!(b.ack(r.id(), None));
        assert!(b.is_empty());
        assert_eq!(b.request(r.clone()), Progress::Acked(None));
        // Collected: asking again sends it again (a restart does this).
        assert!(matches!(b.request(r.clone()), Progress::InFlight(_)));
        assert_eq!(b.next_to_send(), Some(r));
    }

    #[test]
    fn unacked_records_go_again_on_the_next_connection_and_newer_replace_older() {
        let mut b = Book::<Registration>::default();
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
        assert!(!b.ack(enroll(1).id(), None));
    }

    #[test]
    fn an_older_control_plane_refuses_and_nothing_is_sent() {
        let mut b = Book::<Registration>::default();
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
        let mut b = Book::<Registration>::default();
        b.connected(true);
        for i in 0..(MAX_ACKED + 5) {
            let r = Registration::tenant(&format!("t{i}"), 1, true, "", "");
            b.request(r.clone());
            b.next_to_send();
            assert!(b.ack(r.id(), None));
        }
        assert_eq!(b.acked.len(), MAX_ACKED);
    }
}
