//! What a saga's status does not show yet: its waits, and its steps done
//! in this term. A wait is written once it has lasted [`WAIT_WRITE_AFTER`]:
//! a small change's waits (the one Agent's new generation, its pod Ready)
//! mostly end sooner, woken by the watch event that ends them, and the
//! run's next written status covers them, so a one-Agent edit costs no
//! status write for them. The steps done before such a wait are not
//! written either; [`DoneSteps`] keeps them for the term, so the passes
//! that wait do not run them again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::RolloutStatus;
use crate::rollout::now;

/// Per Rollout, the one wait it is in that its status does not show yet:
/// which run and step (see [`wait_id`]), and since when.
#[derive(Default)]
pub(super) struct Waits(std::sync::Mutex<BTreeMap<String, (String, Instant, Time)>>);

impl Waits {
    /// When the wait `id` of Rollout `key` began, if it is the one seen.
    pub(super) fn since(&self, key: &str, id: &str) -> Option<Time> {
        let map = self.0.lock().ok()?;
        map.get(key)
            .filter(|(seen, _, _)| seen == id)
            .map(|(_, _, since)| since.clone())
    }

    /// When the wait `id` of Rollout `key` began and how long ago: now,
    /// the first time; an earlier wait's entry is replaced.
    pub(super) fn seen(&self, key: &str, id: &str) -> (Time, Duration) {
        let Ok(mut map) = self.0.lock() else {
            return (now(), WAIT_WRITE_AFTER);
        };
        match map.get(key) {
            Some((seen, at, since)) if seen == id => (since.clone(), at.elapsed()),
            _ => {
                let since = now();
                map.insert(
                    key.to_owned(),
                    (id.to_owned(), Instant::now(), since.clone()),
                );
                (since, Duration::ZERO)
            }
        }
    }
}

/// Per Rollout, the steps of its current run (see [`run_id`]) that this
/// term has done and its status does not show yet, with when each was
/// done.
///
/// Guarantees: a step is skipped only for the same Rollout and the same
/// run (its start and desired hash), so a new run, or a drift revert that
/// starts one, runs every step again; nothing here outlives the term, so a
/// successor after a crash repeats, from the last written status, the
/// steps it does not show (each is idempotent, as [`wait_is_durable`]
/// says); once the status is written, the entry is dropped.
#[derive(Default)]
pub(super) struct DoneSteps(std::sync::Mutex<BTreeMap<String, RunSteps>>);

/// One Rollout's entry in [`DoneSteps`]: its run, and each step's time.
type RunSteps = (String, BTreeMap<String, Time>);

impl DoneSteps {
    /// When this term did `step` of run `run` of Rollout `key`, if it did.
    pub(super) fn done_at(&self, key: &str, run: &str, step: &str) -> Option<Time> {
        let map = self.0.lock().ok()?;
        let (seen, steps) = map.get(key)?;
        if seen != run {
            return None;
        }
        steps.get(step).cloned()
    }

    /// Remembers that `step` of run `run` of Rollout `key` was done at
    /// `at`; another run's entries are dropped.
    pub(super) fn remember(&self, key: &str, run: &str, step: &str, at: Time) {
        let Ok(mut map) = self.0.lock() else {
            return;
        };
        let entry = map
            .entry(key.to_owned())
            .or_insert_with(|| (run.to_owned(), BTreeMap::new()));
        if entry.0 != run {
            *entry = (run.to_owned(), BTreeMap::new());
        }
        entry.1.insert(step.to_owned(), at);
    }

    /// The status of Rollout `key` was written: it shows them all now.
    pub(super) fn written(&self, key: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(key);
        }
    }
}

/// Which run of a Rollout a status is for: its start and desired hash.
pub(super) fn run_id(status: &RolloutStatus) -> String {
    format!("{:?}/{:?}", status.started_at, status.desired_hash)
}

/// How long a step may wait before its status shows the wait. Most waits
/// of a small change (the one Agent's new generation, its pod Ready) end
/// well within it, woken by the watch event that ends them, and the run's
/// next written status covers them; a longer one is written as before.
pub(super) const WAIT_WRITE_AFTER: Duration = Duration::from_secs(1);

/// Which run (its start and desired hash) and step a wait belongs to.
pub(super) fn wait_id(status: &RolloutStatus, step: &str) -> String {
    format!("{}/{step}", run_id(status))
}

/// Whether a new wait, first seen `waited` ago, is written now. A wait
/// needs no write to be safe: every step is idempotent, so a successor
/// after a crash repeats the steps since the last written status, which
/// already holds the run's changed set. It is written so that a person or
/// a gate reading the status sees what a longer wait waits for. Pure.
pub(super) fn wait_is_durable(waited: Duration) -> bool {
    waited >= WAIT_WRITE_AFTER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_written_once_it_has_lasted() {
        assert!(!wait_is_durable(Duration::ZERO));
        assert!(!wait_is_durable(
            WAIT_WRITE_AFTER - Duration::from_millis(1)
        ));
        assert!(wait_is_durable(WAIT_WRITE_AFTER));
    }

    #[test]
    fn a_wait_keeps_its_start_until_another_replaces_it() {
        let waits = Waits::default();
        assert_eq!(waits.since("ns/t", "run1/repointed"), None);
        let (since, waited) = waits.seen("ns/t", "run1/repointed");
        assert_eq!(waited, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(20));
        let (again, waited) = waits.seen("ns/t", "run1/repointed");
        assert_eq!(again, since, "the same wait keeps its start");
        assert!(waited >= Duration::from_millis(20));
        assert_eq!(waits.since("ns/t", "run1/repointed"), Some(since.clone()));
        // Another Rollout's wait is its own.
        assert_eq!(waits.seen("ns/u", "run1/repointed").1, Duration::ZERO);
        // The next step's wait replaces it.
        assert_eq!(waits.seen("ns/t", "run1/pods-rolled").1, Duration::ZERO);
        assert_eq!(waits.since("ns/t", "run1/repointed"), None);
    }

    #[test]
    fn a_done_step_is_skipped_only_in_its_run_until_written() {
        let done = DoneSteps::default();
        let t = now();
        assert_eq!(done.done_at("ns/t", "run1", "network-isolated"), None);
        done.remember("ns/t", "run1", "network-isolated", t.clone());
        done.remember("ns/t", "run1", "configmaps-published", t.clone());
        assert_eq!(
            done.done_at("ns/t", "run1", "network-isolated"),
            Some(t.clone())
        );
        // Another run of the same Rollout, another Rollout: not done.
        assert_eq!(done.done_at("ns/t", "run2", "network-isolated"), None);
        assert_eq!(done.done_at("ns/u", "run1", "network-isolated"), None);
        // A new run replaces the old one's steps.
        done.remember("ns/t", "run2", "network-isolated", t.clone());
        assert_eq!(done.done_at("ns/t", "run1", "configmaps-published"), None);
        assert!(done.done_at("ns/t", "run2", "network-isolated").is_some());
        // Written: the status shows them; nothing is remembered.
        done.written("ns/t");
        assert_eq!(done.done_at("ns/t", "run2", "network-isolated"), None);
    }

    #[test]
    fn a_wait_belongs_to_its_run_and_step() {
        let a = RolloutStatus {
            desired_hash: Some("h1".into()),
            ..RolloutStatus::default()
        };
        let b = RolloutStatus {
            desired_hash: Some("h2".into()),
            ..RolloutStatus::default()
        };
        assert_ne!(wait_id(&a, "repointed"), wait_id(&b, "repointed"));
        assert_ne!(wait_id(&a, "repointed"), wait_id(&a, "pods-rolled"));
        assert_eq!(wait_id(&a, "repointed"), wait_id(&a.clone(), "repointed"));
    }
}
