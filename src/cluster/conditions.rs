//! Status conditions: built fresh each reconcile, then merged with the
//! previous ones so `lastTransitionTime` only moves when `status` flips.
//! Keeping it stable is what makes a no-op reconcile write nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// How long a not-ready status may stand while only its reason moves on
/// (a pod rolling, then being created, then starting). Those steps last
/// about a second each; writing every one costs the apiserver three status
/// writes per pod at fleet scale, so they are folded into the next real
/// change, or written once they have lasted this long.
pub const SETTLE: Duration = Duration::from_secs(5);

/// A condition without its timestamp; [`merge`] adds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Cond {
    pub fn new(
        type_: &'static str,
        status: bool,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Cond {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// `Some(wait)` when a status whose conditions go from `old` to `new` can
/// wait `wait` before it is written: no condition flipped, `Ready` is
/// `False` in both, and it turned `False` less than [`SETTLE`] ago. The
/// caller checks that nothing else (phase, generation, mounts) changed and
/// requeues after `wait`, so a step that lasts is still shown.
pub fn defer_progress(old: &[Condition], new: &[Condition], now: Timestamp) -> Option<Duration> {
    let flipped = new.iter().any(|n| {
        old.iter()
            .find(|o| o.type_ == n.type_)
            .is_none_or(|o| o.status != n.status)
    });
    let ready = old.iter().find(|o| o.type_ == "Ready")?;
    if flipped || ready.status != "False" {
        return None;
    }
    let age = now.duration_since(ready.last_transition_time.0);
    let age = Duration::try_from(age).ok()?;
    SETTLE.checked_sub(age).filter(|w| !w.is_zero())
}

/// Statuses held back while a workload comes up: its first status, or a
/// new generation rolling out. Each object (by uid) is held from the first
/// reconcile that would have written until [`SETTLE`] has passed; the
/// write that ends the hold (ready, an error, or the time running out)
/// releases it. At fleet scale this turns "creating, starting, active"
/// into one write per object. The hold lives in memory only: after a
/// restart an object is held at most one more [`SETTLE`].
#[derive(Debug, Default)]
pub struct Holds(Mutex<HashMap<String, Instant>>);

impl Holds {
    /// `Some(wait)` while `key` has been held less than [`SETTLE`]
    /// (starting the hold now if it is new); `None` once it is up.
    pub fn hold(&self, key: &str, now: Instant) -> Option<Duration> {
        let mut map = self.0.lock().ok()?;
        let since = *map.entry(key.to_owned()).or_insert(now);
        SETTLE
            .checked_sub(now.saturating_duration_since(since))
            .filter(|w| !w.is_zero())
    }

    /// How long the status write of `key` may wait, if at all: a
    /// reason-only move while not ready (`unchanged`: phase, generation and
    /// mounts as before) waits by [`defer_progress`]; a workload
    /// `coming_up` is held by [`Holds::hold`]. Any other write ends the
    /// hold.
    pub fn wait(
        &self,
        key: &str,
        unchanged: bool,
        coming_up: bool,
        old: &[Condition],
        new: &[Condition],
    ) -> Option<Duration> {
        let wait = if unchanged {
            defer_progress(old, new, Timestamp::now())
        } else if coming_up {
            self.hold(key, Instant::now())
        } else {
            None
        };
        if wait.is_none() {
            self.release(key);
        }
        wait
    }

    /// Ends the hold of `key` (its status was written).
    pub fn release(&self, key: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(key);
        }
    }

    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Turns `want` into Conditions, keeping the old `lastTransitionTime` of a
/// condition whose status did not change.
pub fn merge(
    old: &[Condition],
    want: &[Cond],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = want
        .iter()
        .map(|c| Condition {
            type_: c.type_.to_owned(),
            status: if c.status { "True" } else { "False" }.to_owned(),
            reason: c.reason.to_owned(),
            message: c.message.clone(),
            observed_generation: generation,
            last_transition_time: Time(now),
        })
        .collect();
    keep_transitions(&mut out, old);
    out
}

/// The one transition rule: a condition in `new` whose type had the same
/// status in `old` keeps the old `lastTransitionTime`; one that is new or
/// changed status keeps the time it was built with (now).
pub fn keep_transitions(new: &mut [Condition], old: &[Condition]) {
    for c in new {
        if let Some(o) = old
            .iter()
            .find(|o| o.type_ == c.type_ && o.status == c.status)
        {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}

/// Sets `c` in `conditions` (by type), under [`keep_transitions`]' rule.
/// Returns whether anything but the time changed; when nothing did, the
/// list is left as it was.
pub fn set_condition(conditions: &mut Vec<Condition>, mut c: Condition) -> bool {
    match conditions.iter_mut().find(|x| x.type_ == c.type_) {
        Some(x) => {
            let same = x.status == c.status
                && x.reason == c.reason
                && x.message == c.message
                && x.observed_generation == c.observed_generation;
            if same {
                return false;
            }
            keep_transitions(std::slice::from_mut(&mut c), std::slice::from_ref(x));
            *x = c;
            true
        }
        None => {
            conditions.push(c);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_while_not_ready_waits_but_flips_do_not() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let at = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        let rolling = merge(
            &[],
            &[Cond::new("Ready", false, "PodRolling", "a")],
            Some(1),
            t0,
        );
        let starting = merge(
            &rolling,
            &[Cond::new("Ready", false, "PodStarting", "b")],
            Some(1),
            at(1),
        );
        // Only the reason moved, one second in: wait the rest of SETTLE.
        assert_eq!(
            defer_progress(&rolling, &starting, at(1)),
            Some(SETTLE - Duration::from_secs(1))
        );
        // Once it has lasted SETTLE, it is written.
        assert_eq!(defer_progress(&rolling, &starting, at(5)), None);
        // A flip to ready is written at once.
        let active = merge(
            &rolling,
            &[Cond::new("Ready", true, "Active", "c")],
            Some(1),
            at(1),
        );
        assert_eq!(defer_progress(&rolling, &active, at(1)), None);
        // So is the first status, and a flip to not ready.
        assert_eq!(defer_progress(&[], &rolling, t0), None);
        let ready = merge(&[], &[Cond::new("Ready", true, "Active", "c")], Some(1), t0);
        assert_eq!(defer_progress(&ready, &rolling, t0), None);
        // A new condition type is a change too.
        let more = merge(
            &rolling,
            &[
                Cond::new("Ready", false, "PodStarting", "b"),
                Cond::new("FilesystemsReady", true, "Mounted", "m"),
            ],
            Some(1),
            at(1),
        );
        assert_eq!(defer_progress(&rolling, &more, at(1)), None);
    }

    #[test]
    fn holds_last_settle_from_the_first_and_end_on_release() {
        let holds = Holds::default();
        let t0 = Instant::now();
        assert_eq!(holds.hold("a", t0), Some(SETTLE));
        // Later reconciles keep the first start.
        let later = t0 + Duration::from_secs(2);
        assert_eq!(
            holds.hold("a", later),
            Some(SETTLE - Duration::from_secs(2))
        );
        assert_eq!(holds.hold("b", later), Some(SETTLE));
        // Up: the caller writes, and releases.
        assert_eq!(holds.hold("a", t0 + SETTLE), None);
        holds.release("a");
        assert_eq!(holds.len(), 1);
        // A new hold starts afresh.
        assert_eq!(holds.hold("a", t0 + SETTLE), Some(SETTLE));
        // A write that is neither progress nor coming up ends it.
        assert_eq!(holds.wait("a", false, false, &[], &[]), None);
        assert_eq!(holds.len(), 1);
        assert!(holds.wait("c", false, true, &[], &[]).is_some());
    }

    #[test]
    fn keeps_transition_time_when_status_is_unchanged() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let t1 = Timestamp::from_second(2_000).unwrap();
        let first = merge(
            &[],
            &[Cond::new("Ready", true, "Active", "ok")],
            Some(1),
            t0,
        );
        let again = merge(
            &first,
            &[Cond::new("Ready", true, "Active", "still ok")],
            Some(2),
            t1,
        );
        assert_eq!(again[0].last_transition_time, Time(t0));
        let flipped = merge(
            &again,
            &[Cond::new("Ready", false, "Error", "bad")],
            Some(2),
            t1,
        );
        assert_eq!(flipped[0].last_transition_time, Time(t1));
        assert_eq!(flipped[0].status, "False");
    }

    #[test]
    fn set_condition_keeps_the_time_of_a_held_status_and_reports_changes() {
        let at = |secs| Time(Timestamp::from_second(secs).unwrap());
        let cond = |status: &str, reason: &str, t| Condition {
            type_: "Pruned".into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: at(t),
        };
        let mut list = Vec::new();
        assert!(set_condition(&mut list, cond("False", "Pruning", 10)));
        // Same everything but the time: no change, the old time stays.
        assert!(!set_condition(&mut list, cond("False", "Pruning", 20)));
        assert_eq!(list[0].last_transition_time, at(10));
        // New reason, same status: a change, and the time is kept.
        assert!(set_condition(&mut list, cond("False", "PruneBlocked", 30)));
        assert_eq!(
            (list[0].reason.as_str(), &list[0].last_transition_time),
            ("PruneBlocked", &at(10))
        );
        // The status flips: the new time.
        assert!(set_condition(&mut list, cond("True", "Pruned", 40)));
        assert_eq!(list[0].last_transition_time, at(40));
        assert_eq!(list.len(), 1);
    }
}
