//! The saga engine's pure core, shared by every saga (a tenant's rollout,
//! a tenant's lifecycle): typed steps run in order, each with an owner
//! (the actuator that carries it out) and a postcondition checked before
//! the next step starts, and a durable record of each step in the owning
//! resource's status ([`SagaStep`]).
//!
//! Guarantees:
//! - A step is Done only when its postcondition held; the next step starts
//!   only then ([`next_step`] is the first step not Done).
//! - A missing actuator is an explicit `Waiting` with the reason, never a
//!   skip ([`Outcome::Waiting`]).
//! - Recording is idempotent: the same outcome recorded twice changes
//!   nothing, so a resumed saga (after a crash) does not rewrite history,
//!   and a step's `startedAt` is its first start.
//!
//! What a saga is for (its steps, what Done means for the whole, the
//! phase of its resource) stays with that saga; this module only moves
//! steps.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::{SagaStep, StepState};

/// A saga's step: its name in the status and the actuator that owns it.
pub trait Step {
    fn name(&self) -> String;
    fn owner(&self) -> &'static str;
}

/// What a step's actuator and postcondition concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The postcondition holds.
    Done,
    /// Not yet; look again soon (e.g. a pod is still rolling).
    Pending(String),
    /// The actuator cannot act (missing RBAC, missing source, none
    /// configured); retried.
    Waiting(String),
    /// The postcondition is violated in a way waiting cannot fix.
    Failed(String),
}

/// Combines the outcomes of one step over many objects: any failure
/// fails the step, then a missing actuator, then anything still pending;
/// only all-done is done.
pub fn combine(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
    let mut worst = Outcome::Done;
    let rank = |o: &Outcome| match o {
        Outcome::Done => 0,
        Outcome::Pending(_) => 1,
        Outcome::Waiting(_) => 2,
        Outcome::Failed(_) => 3,
    };
    for o in outcomes {
        if rank(&o) > rank(&worst) {
            worst = o;
        }
    }
    worst
}

/// Every step Pending, in order.
pub fn fresh<S: Step>(kinds: &[S]) -> Vec<SagaStep> {
    kinds
        .iter()
        .map(|k| SagaStep {
            name: k.name(),
            owner: k.owner().to_owned(),
            state: StepState::Pending,
            ..SagaStep::default()
        })
        .collect()
}

/// Index of the step to run: the first that is not Done.
pub fn next_step(steps: &[SagaStep]) -> Option<usize> {
    steps.iter().position(|s| s.state != StepState::Done)
}

/// Records `outcome` on step `i`: its state and message, its first start
/// and, once Done or Failed, its end. Returns the state and message
/// recorded (`None` when there is no step `i`).
pub fn record_step(
    steps: &mut [SagaStep],
    i: usize,
    outcome: &Outcome,
    now: &Time,
) -> Option<(StepState, Option<String>)> {
    let step = steps.get_mut(i)?;
    let (state, message) = match outcome {
        Outcome::Done => (StepState::Done, None),
        Outcome::Pending(m) => (StepState::Running, Some(m.clone())),
        Outcome::Waiting(m) => (StepState::Waiting, Some(m.clone())),
        Outcome::Failed(m) => (StepState::Failed, Some(m.clone())),
    };
    if step.started_at.is_none() {
        step.started_at = Some(now.clone());
    }
    if (state == StepState::Done || state == StepState::Failed) && step.state != state {
        step.finished_at = Some(now.clone());
    }
    step.state = state;
    step.message = message.clone();
    Some((state, message))
}

/// The longest wait between two looks at a step still running.
const MAX_LOOK_INTERVAL: Duration = Duration::from_secs(2);

/// When to look at a running step again: every `poll` at first, then a
/// tenth of the step's age so far (up to [`MAX_LOOK_INTERVAL`]). A step that
/// waits on hundreds of pods is not re-listed five times a second for a
/// minute, and a quick one is still seen done within `poll`.
pub fn next_look(poll: Duration, step_age: Duration) -> Duration {
    (step_age / 10).clamp(poll, MAX_LOOK_INTERVAL.max(poll))
}

/// How often a step still running may rewrite only its progress message:
/// a saga is looked at every `poll`, and writing each new message (a
/// different pod is the one still rolling) would cost a status write per
/// look.
pub const PROGRESS_WRITE_EVERY: Duration = Duration::from_secs(2);

/// Per saga (keyed by its resource), when its status last got a
/// progress-only write: such a write is due at most every
/// [`PROGRESS_WRITE_EVERY`]. Writes that change a step's state are never
/// held back by it.
#[derive(Default)]
pub struct ProgressWrites(std::sync::Mutex<std::collections::BTreeMap<String, std::time::Instant>>);

impl ProgressWrites {
    /// Whether a progress-only write for `key` is due now (and, if so,
    /// records it).
    pub fn due(&self, key: &str) -> bool {
        let Ok(mut map) = self.0.lock() else {
            return true;
        };
        match map.get(key) {
            Some(at) if at.elapsed() < PROGRESS_WRITE_EVERY => false,
            _ => {
                map.insert(key.to_owned(), std::time::Instant::now());
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    struct S(&'static str);
    impl Step for S {
        fn name(&self) -> String {
            self.0.to_owned()
        }
        fn owner(&self) -> &'static str {
            "test/actuator"
        }
    }

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn a_progress_write_is_due_once_per_period_and_key() {
        let w = ProgressWrites::default();
        assert!(w.due("a"));
        assert!(!w.due("a"), "the second within the period");
        assert!(w.due("b"), "another key has its own period");
    }

    #[test]
    fn steps_run_in_order_and_record_their_first_start_and_their_end() {
        let mut steps = fresh(&[S("a"), S("b")]);
        assert_eq!(next_step(&steps), Some(0));
        record_step(&mut steps, 0, &Outcome::Pending("rolling".into()), &at(1));
        record_step(&mut steps, 0, &Outcome::Pending("rolling".into()), &at(2));
        assert_eq!(steps[0].started_at, Some(at(1)));
        assert_eq!(steps[0].state, StepState::Running);
        record_step(&mut steps, 0, &Outcome::Done, &at(3));
        // Done again (a resumed saga): the end stays the first one.
        record_step(&mut steps, 0, &Outcome::Done, &at(9));
        assert_eq!(steps[0].finished_at, Some(at(3)));
        assert_eq!(next_step(&steps), Some(1));
        let (state, message) = record_step(
            &mut steps,
            1,
            &Outcome::Waiting("no actuator".into()),
            &at(4),
        )
        .unwrap();
        assert_eq!(
            (state, message.as_deref()),
            (StepState::Waiting, Some("no actuator"))
        );
        assert_eq!(steps[1].owner, "test/actuator");
        assert!(record_step(&mut steps, 2, &Outcome::Done, &at(5)).is_none());
    }

    #[test]
    fn the_worst_outcome_wins() {
        use Outcome::*;
        assert_eq!(combine([]), Done);
        assert_eq!(combine([Done, Pending("p".into())]), Pending("p".into()));
        assert_eq!(
            combine([Pending("p".into()), Waiting("w".into()), Done]),
            Waiting("w".into())
        );
        assert_eq!(
            combine([Failed("f".into()), Waiting("w".into())]),
            Failed("f".into())
        );
    }

    #[test]
    fn a_long_running_step_is_looked_at_less_often() {
        let poll = Duration::from_millis(200);
        assert_eq!(next_look(poll, Duration::ZERO), poll);
        assert_eq!(next_look(poll, Duration::from_secs(1)), poll);
        assert_eq!(
            next_look(poll, Duration::from_secs(10)),
            Duration::from_secs(1)
        );
        assert_eq!(
            next_look(poll, Duration::from_secs(300)),
            Duration::from_secs(2)
        );
        // A poll set above the cap is kept.
        let slow = Duration::from_secs(5);
        assert_eq!(next_look(slow, Duration::from_secs(300)), slow);
    }
}
