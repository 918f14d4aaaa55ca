use super::*;
use crate::analysis::plan::{BuiltinCheck, Kind};
use crate::analysis::spec::Builtin;

fn check(
    name: &str,
    interval_s: u64,
    count: u32,
    failure_limit: u32,
    inconclusive_limit: u32,
) -> Planned {
    Planned {
        name: name.into(),
        interval: Duration::from_secs(interval_s),
        count,
        failure_limit,
        inconclusive_limit,
        kind: Kind::Builtin(BuiltinCheck {
            signal: Builtin::Crashloops,
            max: 0.0,
            severity: None,
        }),
    }
}

fn plan(checks: Vec<Planned>) -> Plan {
    Plan { checks }
}

const T0: i64 = 1_800_000_000;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(T0 + s).unwrap()
}

fn m(check: &str, slot: u32, verdict: Verdict) -> Measurement {
    Measurement::new(
        check,
        slot,
        at(0),
        Reading {
            value: None,
            verdict,
            detail: format!("{check} slot {slot}"),
        },
    )
}

/// What `step` says at `now` (seconds after the start): the due checks
/// as (name, slot), and the next time as seconds after the start.
fn due_at(plan: &Plan, now: i64, ms: &[Measurement]) -> (Vec<(String, u32)>, i64) {
    match step(plan, at(0), at(now), ms) {
        Step::Running { due, next } => (
            due.iter().map(|d| (d.check.name.clone(), d.slot)).collect(),
            next.as_second() - T0,
        ),
        Step::Done(o) => panic!("done at {now}: {o:?}"),
    }
}

fn names(v: &[(&str, u32)]) -> Vec<(String, u32)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn slots_close_one_interval_apart() {
    let p = plan(vec![check("a", 60, 3, 0, 0), check("b", 90, 2, 0, 0)]);
    // Before the first interval closes nothing is due.
    assert_eq!(due_at(&p, 0, &[]), (vec![], 60));
    assert_eq!(due_at(&p, 59, &[]), (vec![], 60));
    assert_eq!(due_at(&p, 60, &[]), (names(&[("a", 0)]), 90));
    let ms = vec![m("a", 0, Verdict::Pass)];
    assert_eq!(due_at(&p, 61, &ms), (vec![], 90));
    assert_eq!(due_at(&p, 95, &ms), (names(&[("b", 0)]), 120));
    let ms = vec![m("a", 0, Verdict::Pass), m("b", 0, Verdict::Pass)];
    assert_eq!(due_at(&p, 120, &ms), (names(&[("a", 1)]), 180));
}

#[test]
fn every_check_at_its_count_within_limits_passes() {
    let p = plan(vec![check("a", 60, 3, 1, 1), check("b", 60, 1, 0, 0)]);
    let mut ms = vec![
        m("a", 0, Verdict::Pass),
        m("a", 1, Verdict::Fail),
        m("b", 0, Verdict::Pass),
    ];
    // "a" still needs one; "b" is done and not due again.
    assert_eq!(due_at(&p, 200, &ms), (names(&[("a", 2)]), 240));
    ms.push(m("a", 2, Verdict::Inconclusive));
    assert_eq!(step(&p, at(0), at(200), &ms), Step::Done(Outcome::Passed));
}

#[test]
fn failures_over_the_limit_fail_at_once_naming_the_check() {
    let p = plan(vec![check("a", 60, 10, 1, 5), check("b", 60, 10, 0, 0)]);
    let ms = vec![
        m("a", 0, Verdict::Fail),
        m("b", 0, Verdict::Pass),
        m("a", 1, Verdict::Fail),
    ];
    match step(&p, at(0), at(120), &ms) {
        Step::Done(Outcome::Failed { check, reason }) => {
            assert_eq!(check, "a");
            assert!(
                reason.contains("failed 2 times, more than the limit of 1"),
                "{reason}"
            );
            assert!(reason.contains("a slot 1"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Within the limit it runs on.
    assert!(matches!(
        step(&p, at(0), at(120), &ms[..2]),
        Step::Running { .. }
    ));
}

#[test]
fn inconclusives_over_the_limit_hold_and_failures_win() {
    let p = plan(vec![check("a", 60, 5, 0, 1), check("b", 60, 5, 0, 0)]);
    let ms = vec![
        m("a", 0, Verdict::Inconclusive),
        m("a", 1, Verdict::Inconclusive),
    ];
    match step(&p, at(0), at(120), &ms) {
        Step::Done(Outcome::Inconclusive { check, reason }) => {
            assert_eq!(check, "a");
            assert!(reason.contains("inconclusive 2 times"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let mut both = ms.clone();
    both.push(m("b", 0, Verdict::Fail));
    assert!(matches!(
        step(&p, at(0), at(120), &both),
        Step::Done(Outcome::Failed { check, .. }) if check == "b"
    ));
}

#[test]
fn the_same_measurement_fed_twice_counts_once() {
    let p = plan(vec![check("a", 60, 3, 1, 0)]);
    let mut ms = Vec::new();
    assert!(record(&mut ms, m("a", 0, Verdict::Fail)));
    assert!(!record(&mut ms, m("a", 0, Verdict::Fail)));
    // A second verdict for a slot already measured is not taken either.
    assert!(!record(&mut ms, m("a", 0, Verdict::Pass)));
    assert_eq!(ms.len(), 1);
    // Even a list that holds a slot twice (two writers) counts it once.
    let twice = vec![m("a", 0, Verdict::Fail), m("a", 0, Verdict::Fail)];
    assert!(matches!(
        step(&p, at(0), at(60), &twice),
        Step::Running { .. }
    ));
    assert_eq!(tally(&p, &twice)[0].failed, 1);
    assert_eq!(
        step(&p, at(0), at(61), &twice),
        step(&p, at(0), at(61), &ms)
    );
}

#[test]
fn a_resumed_run_measures_the_current_slot_once_and_skips_missed_ones() {
    let p = plan(vec![check("a", 60, 3, 0, 0)]);
    let before_crash = vec![m("a", 0, Verdict::Pass)];
    // Down from 90s to 330s: slots 1 to 3 closed unmeasured. Only the
    // latest (4, closed at 300s) is due; none is back-filled.
    assert_eq!(due_at(&p, 330, &before_crash), (names(&[("a", 4)]), 360));
    let mut ms = before_crash.clone();
    assert!(record(&mut ms, m("a", 4, Verdict::Pass)));
    // A second restart in the same slot measures nothing again.
    assert_eq!(due_at(&p, 350, &ms), (vec![], 360));
    // The run needs its count, so it goes on past the missed slots.
    assert_eq!(due_at(&p, 360, &ms), (names(&[("a", 5)]), 420));
    assert!(record(&mut ms, m("a", 5, Verdict::Pass)));
    assert_eq!(step(&p, at(0), at(361), &ms), Step::Done(Outcome::Passed));
    let t = &tally(&p, &ms)[0];
    assert_eq!((t.measured, t.passed, t.count), (3, 3, 3));
}

#[test]
fn only_the_first_count_slots_count() {
    let p = plan(vec![check("a", 60, 2, 0, 0)]);
    let ms = vec![
        m("a", 0, Verdict::Pass),
        m("a", 1, Verdict::Pass),
        m("a", 2, Verdict::Fail),
    ];
    assert_eq!(step(&p, at(0), at(200), &ms), Step::Done(Outcome::Passed));
}

#[test]
fn measurements_of_checks_no_longer_planned_are_ignored() {
    let p = plan(vec![check("a", 60, 1, 0, 0)]);
    let ms = vec![m("gone", 0, Verdict::Fail), m("a", 0, Verdict::Pass)];
    assert_eq!(step(&p, at(0), at(60), &ms), Step::Done(Outcome::Passed));
}

#[test]
fn a_clock_before_the_start_waits_for_the_first_slot() {
    let p = plan(vec![check("a", 60, 1, 0, 0)]);
    assert_eq!(due_at(&p, -30, &[]), (vec![], 60));
}

#[test]
fn an_empty_plan_passes() {
    assert_eq!(
        step(&plan(vec![]), at(0), at(0), &[]),
        Step::Done(Outcome::Passed)
    );
}

#[test]
fn measurements_are_bounded_and_serialize_small() {
    let long = "é".repeat(DETAIL_MAX);
    let x = Measurement::new(
        "a",
        7,
        at(0),
        Reading {
            value: Some(f64::INFINITY),
            verdict: Verdict::Fail,
            detail: long,
        },
    );
    assert!(x.detail.len() <= DETAIL_MAX);
    assert_eq!(x.value, None);
    let json = serde_json::to_value(&x).unwrap();
    assert_eq!(json["slot"], 7);
    assert_eq!(json["verdict"], "Fail");
    assert_eq!(json["at"], "2027-01-15T08:00:00Z");
    let back: Measurement = serde_json::from_value(json).unwrap();
    assert_eq!(back, x);
    let o = Outcome::Failed {
        check: "a".into(),
        reason: "r".into(),
    };
    assert_eq!(
        serde_json::to_value(&o).unwrap(),
        serde_json::json!({"result": "failed", "check": "a", "reason": "r"})
    );
}
