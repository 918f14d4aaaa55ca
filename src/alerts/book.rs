//! Stateful alerts: which keyed alerts are firing, so that a condition
//! raised by a periodic check (an audit finding, a health monitor) goes
//! upstream once when it starts and once, as `resolved`, when it ends.
//!
//! Pure: [`AlertBook::reconcile`] takes everything one source finds now and
//! returns the alerts to send; the caller hands them to an
//! [`super::AlertSink`]. Sources are told apart by key prefix, so the audit
//! and the monitors keep one book each or share one.

use std::collections::BTreeMap;

use crate::wire::{Alert, AlertState};

/// The keyed alerts currently firing, by key.
#[derive(Debug, Default, Clone)]
pub struct AlertBook {
    active: BTreeMap<String, Alert>,
}

impl AlertBook {
    pub fn new() -> Self {
        Self::default()
    }

    /// `current` is every condition under `prefix` that holds now (each
    /// keyed, its key starting with `prefix`). Returns what to send: a
    /// firing alert for each key that is new or whose severity or message
    /// changed, and a resolved one for each active key under `prefix` that
    /// is not in `current`.
    pub fn reconcile(&mut self, prefix: &str, current: Vec<Alert>) -> Vec<Alert> {
        let mut out = Vec::new();
        let mut now: BTreeMap<String, Alert> = BTreeMap::new();
        for a in current {
            debug_assert!(a.key.starts_with(prefix) && a.state == AlertState::Firing);
            now.insert(a.key.clone(), a);
        }
        let gone: Vec<String> = self
            .active
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .filter(|(k, _)| !now.contains_key(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if let Some(old) = self.active.remove(&key) {
                out.push(old.resolving("cleared"));
            }
        }
        for (key, a) in now {
            let changed = self
                .active
                .get(&key)
                .is_none_or(|old| old.severity != a.severity || old.message != a.message);
            if changed {
                out.push(a.clone());
                self.active.insert(key, a);
            }
        }
        out
    }

    /// Firing alerts under `prefix`.
    pub fn active(&self, prefix: &str) -> impl Iterator<Item = &Alert> {
        self.active
            .range(prefix.to_string()..)
            .take_while(move |(k, _)| k.starts_with(prefix))
            .map(|(_, a)| a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Severity;

    fn finding(key: &str, msg: &str) -> Alert {
        Alert::new(Severity::Warning, "AuditPlacement", "t1", "Pod/p", msg).keyed(key)
    }

    #[test]
    fn a_condition_fires_once_and_resolves_once() {
        let mut book = AlertBook::new();
        let sent = book.reconcile("audit/", vec![finding("audit/a", "m")]);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].state, AlertState::Firing);
        // Found again unchanged: nothing to send.
        assert!(
            book.reconcile("audit/", vec![finding("audit/a", "m")])
                .is_empty()
        );
        // Its message changed: sent again, still firing.
        let sent = book.reconcile("audit/", vec![finding("audit/a", "m2")]);
        assert_eq!((sent.len(), sent[0].state), (1, AlertState::Firing));
        // Gone: one resolved alert with the same key.
        let sent = book.reconcile("audit/", vec![]);
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (sent[0].key.as_str(), sent[0].state),
            ("audit/a", AlertState::Resolved)
        );
        assert!(book.reconcile("audit/", vec![]).is_empty());
    }

    #[test]
    fn sources_do_not_resolve_each_others_alerts() {
        let mut book = AlertBook::new();
        book.reconcile("audit/", vec![finding("audit/a", "m")]);
        book.reconcile("monitor/", vec![finding("monitor/b", "m")]);
        assert!(book.reconcile("monitor/", vec![]).len() == 1);
        assert_eq!(book.active("audit/").count(), 1);
        assert_eq!(book.active("monitor/").count(), 0);
    }
}
