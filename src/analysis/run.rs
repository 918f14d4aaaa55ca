//! An analysis run, pure: its measurements, which are due, and the outcome.
//!
//! Time is cut into slots per check: slot `k` closes at `started + (k + 1) *
//! interval`, and a measurement records the slot it was taken for. A check
//! is due when its latest closed slot has no measurement yet (nor a later
//! one), so a slot is measured at most once. Slots missed while nobody
//! measured (the operator was down) are skipped, never back-filled with
//! what is seen now: the run then takes longer, as a check needs `count`
//! measurements. Measurements of one slot beyond the first, and of checks
//! the plan no longer has, are ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::plan::{Plan, Planned};

/// The longest detail a measurement keeps, in bytes.
pub const DETAIL_MAX: usize = 256;

/// What one measurement says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

/// A value and its verdict, before it is stamped with check, slot and
/// time: what evaluating a built-in or a query gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub value: Option<f64>,
    pub verdict: Verdict,
    pub detail: String,
}

impl Reading {
    pub fn inconclusive(detail: impl Into<String>) -> Reading {
        Reading {
            value: None,
            verdict: Verdict::Inconclusive,
            detail: detail.into(),
        }
    }
}

/// One measurement of one check, as kept in the run's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// The check's name.
    pub check: String,
    /// The slot it was taken for (see the module's doc).
    pub slot: u32,
    /// When it was taken.
    pub at: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    pub verdict: Verdict,
    /// Why, for people; at most [`DETAIL_MAX`] bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Measurement {
    /// A reading stamped for `check`'s `slot`, its detail bounded. A
    /// non-finite value is not kept (JSON has none), the verdict is.
    pub fn new(check: &str, slot: u32, at: Timestamp, reading: Reading) -> Measurement {
        Measurement {
            check: check.to_owned(),
            slot,
            at: Time(at),
            value: reading.value.filter(|v| v.is_finite()),
            verdict: reading.verdict,
            detail: super::clip(&reading.detail, DETAIL_MAX).to_owned(),
        }
    }
}

/// Adds `m` unless its check already has a measurement for its slot.
/// Whether it was added.
pub fn record(measurements: &mut Vec<Measurement>, m: Measurement) -> bool {
    if measurements
        .iter()
        .any(|x| x.check == m.check && x.slot == m.slot)
    {
        return false;
    }
    measurements.push(m);
    true
}

/// A check to measure now, for `slot`.
#[derive(Debug, Clone, PartialEq)]
pub struct Due<'a> {
    pub check: &'a Planned,
    pub slot: u32,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Outcome {
    /// Every check made its count within its limits.
    Passed,
    /// A check failed more than its `failureLimit`.
    Failed { check: String, reason: String },
    /// A check was inconclusive more than its `inconclusiveLimit`.
    Inconclusive { check: String, reason: String },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Passed => f.write_str("analysis passed"),
            Outcome::Failed { check, reason } => {
                write!(f, "analysis failed: check {check}: {reason}")
            }
            Outcome::Inconclusive { check, reason } => {
                write!(f, "analysis inconclusive: check {check}: {reason}")
            }
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<'a> {
    /// Measure `due` now (it may be empty), and look again at `next` at the
    /// latest.
    Running {
        due: Vec<Due<'a>>,
        next: Timestamp,
    },
    Done(Outcome),
}

/// One check's counts so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub check: String,
    /// Slots measured (at most `count`).
    pub measured: u32,
    pub count: u32,
    pub passed: u32,
    pub failed: u32,
    pub inconclusive: u32,
    pub failure_limit: u32,
    pub inconclusive_limit: u32,
}

/// Each check's counts, in the plan's order.
pub fn tally(plan: &Plan, measurements: &[Measurement]) -> Vec<Tally> {
    plan.checks
        .iter()
        .map(|c| {
            let slots = counted(c, measurements);
            let n = |v: Verdict| {
                u32::try_from(slots.values().filter(|m| m.verdict == v).count()).unwrap_or(u32::MAX)
            };
            Tally {
                check: c.name.clone(),
                measured: u32::try_from(slots.len()).unwrap_or(u32::MAX),
                count: c.count,
                passed: n(Verdict::Pass),
                failed: n(Verdict::Fail),
                inconclusive: n(Verdict::Inconclusive),
                failure_limit: c.failure_limit,
                inconclusive_limit: c.inconclusive_limit,
            }
        })
        .collect()
}

/// The run of `plan` started at `started`, at `now`, given what was
/// measured: the outcome once it is decided, else what is due.
///
/// A check fails the run as soon as its failures exceed its limit, even
/// while others still run; failures are looked at before inconclusives.
pub fn step<'a>(
    plan: &'a Plan,
    started: Timestamp,
    now: Timestamp,
    measurements: &[Measurement],
) -> Step<'a> {
    let tallies = tally(plan, measurements);
    let last = |c: &Planned, v: Verdict| {
        counted(c, measurements)
            .values()
            .rev()
            .find(|m| m.verdict == v)
            .map(|m| m.detail.clone())
            .unwrap_or_default()
    };
    for (c, t) in plan.checks.iter().zip(&tallies) {
        if t.failed > c.failure_limit {
            return Step::Done(Outcome::Failed {
                check: c.name.clone(),
                reason: limit_reason(t.failed, c.failure_limit, "failed", &last(c, Verdict::Fail)),
            });
        }
    }
    for (c, t) in plan.checks.iter().zip(&tallies) {
        if t.inconclusive > c.inconclusive_limit {
            return Step::Done(Outcome::Inconclusive {
                check: c.name.clone(),
                reason: limit_reason(
                    t.inconclusive,
                    c.inconclusive_limit,
                    "inconclusive",
                    &last(c, Verdict::Inconclusive),
                ),
            });
        }
    }
    let elapsed = now.duration_since(started);
    let mut due = Vec::new();
    let mut next: Option<Timestamp> = None;
    for (c, t) in plan.checks.iter().zip(&tallies) {
        if t.measured >= c.count {
            continue;
        }
        let closed = closed_slots(elapsed, c.interval);
        let newest = measurements
            .iter()
            .filter(|m| m.check == c.name)
            .map(|m| m.slot)
            .max();
        if let Some(slot) = closed.checked_sub(1)
            && newest.is_none_or(|n| n < slot)
        {
            due.push(Due { check: c, slot });
        }
        let at = slot_end(started, c.interval, closed);
        next = Some(next.map_or(at, |n| n.min(at)));
    }
    match next {
        None => Step::Done(Outcome::Passed),
        Some(next) => Step::Running { due, next },
    }
}

fn limit_reason(n: u32, limit: u32, what: &str, last: &str) -> String {
    let times = if n == 1 { "time" } else { "times" };
    let mut s = format!("{what} {n} {times}, more than the limit of {limit}");
    if !last.is_empty() {
        s.push_str("; last: ");
        s.push_str(last);
    }
    s
}

/// A check's measurements by slot, the first for each slot, at most
/// `count` of them (the lowest slots).
fn counted<'m>(c: &Planned, measurements: &'m [Measurement]) -> BTreeMap<u32, &'m Measurement> {
    let mut slots = BTreeMap::new();
    for m in measurements.iter().filter(|m| m.check == c.name) {
        slots.entry(m.slot).or_insert(m);
    }
    slots.into_iter().take(c.count as usize).collect()
}

/// How many slots of `interval` have closed after `elapsed` (none before
/// the start).
fn closed_slots(elapsed: SignedDuration, interval: Duration) -> u32 {
    let Ok(elapsed) = Duration::try_from(elapsed) else {
        return 0;
    };
    let n = elapsed.as_millis() / interval.as_millis().max(1);
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// When slot `k` closes: `started + (k + 1) * interval`.
fn slot_end(started: Timestamp, interval: Duration, k: u32) -> Timestamp {
    let ms = i64::try_from(interval.as_millis())
        .unwrap_or(i64::MAX)
        .saturating_mul(i64::from(k) + 1);
    started
        .checked_add(SignedDuration::from_millis(ms))
        .unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
