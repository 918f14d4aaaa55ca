//! The sink every emitter holds ([`Notifier`]) and the queue the delivery
//! task drains ([`Notices`]).
//!
//! Guarantees:
//! - [`Notifier::emit`] and [`Notifier::commit_status`] never block on the
//!   network and never fail: a short in-memory lock, a push, a wake-up;
//! - the queue is bounded: when it is full the oldest notice is dropped
//!   and counted ([`Notifier::dropped`]), so a stuck receiver never holds
//!   memory or a rollout;
//! - notices are taken in the order they were emitted.
//!
//! A notice still queued when the process ends is lost: notifications are
//! at most once per emission (see `docs/notifications.md`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::event::{CommitStatus, Event, Notice};

/// How many notices wait for the delivery task at most.
pub const DEFAULT_CAPACITY: usize = 1024;

#[derive(Debug)]
struct Shared {
    capacity: usize,
    queue: Mutex<VecDeque<Notice>>,
    dropped: AtomicU64,
    queued: Notify,
}

impl Shared {
    /// Every operation leaves the queue consistent, so a panic elsewhere
    /// while holding the lock is ignored.
    fn lock(&self) -> MutexGuard<'_, VecDeque<Notice>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where in-process code (the rollout engine, the audit, the lead's
/// analysis) hands over what happened. Cheap to clone; clones share one
/// queue.
#[derive(Debug, Clone)]
pub struct Notifier {
    shared: Arc<Shared>,
}

/// What the delivery task drains. Clones share the queue; only one task at
/// a time should drain it. The queue outlives a leadership term, so what
/// was emitted just before a term ended goes out in the next one.
#[derive(Debug, Clone)]
pub struct Notices {
    shared: Arc<Shared>,
}

/// A notifier and its queue, holding at most `capacity` notices (at least 1).
pub fn channel(capacity: usize) -> (Notifier, Notices) {
    let shared = Arc::new(Shared {
        capacity: capacity.max(1),
        queue: Mutex::new(VecDeque::new()),
        dropped: AtomicU64::new(0),
        queued: Notify::new(),
    });
    (
        Notifier {
            shared: shared.clone(),
        },
        Notices { shared },
    )
}

impl Notifier {
    /// A notifier whose queue nothing drains (tests, tools that notify
    /// nobody): it holds the newest `1` notice and drops the rest.
    pub fn disconnected() -> Self {
        channel(1).0
    }

    /// Queues `event` for the rules that select it.
    pub fn emit(&self, event: Event) {
        self.push(Notice::Event(event));
    }

    /// Queues a commit status for the commit status providers whose rules
    /// select its tenant.
    pub fn commit_status(&self, status: CommitStatus) {
        self.push(Notice::Status(status));
    }

    fn push(&self, notice: Notice) {
        {
            let mut q = self.shared.lock();
            if q.len() >= self.shared.capacity {
                q.pop_front();
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
            q.push_back(notice);
        }
        self.shared.queued.notify_one();
    }

    /// Notices dropped because the queue was full, since it was made.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Notices waiting.
    pub fn pending(&self) -> usize {
        self.shared.lock().len()
    }
}

impl Notices {
    /// The oldest notice, waiting until there is one.
    pub async fn next(&self) -> Notice {
        loop {
            // Registered before the check, so a push in between still wakes.
            let woken = self.shared.queued.notified();
            if let Some(n) = self.shared.lock().pop_front() {
                return n;
            }
            woken.await;
        }
    }

    /// The oldest notice, if one waits.
    pub fn try_next(&self) -> Option<Notice> {
        self.shared.lock().pop_front()
    }

    /// Notices dropped because the queue was full (the notifier's count).
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::notify::event::EventKind;

    fn event(n: u32) -> Event {
        Event::new(EventKind::Verified, format!("e{n}"))
    }

    fn message(n: Notice) -> String {
        match n {
            Notice::Event(e) => e.message,
            Notice::Status(s) => s.description,
        }
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts() {
        let (notifier, notices) = channel(2);
        for n in 0..5 {
            notifier.emit(event(n));
        }
        assert_eq!((notifier.dropped(), notifier.pending()), (3, 2));
        assert_eq!(notices.try_next().map(message).as_deref(), Some("e3"));
        assert_eq!(notices.try_next().map(message).as_deref(), Some("e4"));
        assert!(notices.try_next().is_none());
    }

    #[tokio::test]
    async fn the_queue_wakes_for_a_notice_emitted_later() {
        let (notifier, notices) = channel(8);
        let waiter = tokio::spawn(async move { message(notices.next().await) });
        tokio::task::yield_now().await;
        notifier.emit(event(7));
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, "e7");
    }
}
