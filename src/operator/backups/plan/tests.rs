//! The schedule and the staleness rules, over fixed times.

use super::*;
use crate::crd::{BackupFailure, BackupPolicy, BackupRecord, DrillRecord};

const T0: i64 = 1_800_000_000;

fn at(secs: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .unwrap()
        .to_string()
}

fn policy() -> BackupPolicy {
    BackupPolicy {
        every: "1h".into(),
        keep: 3,
        repository: "127.0.0.1:5000/backups/acme-work".into(),
        drill_every: Some("1d".into()),
        ..BackupPolicy::default()
    }
}

fn settings() -> Settings {
    Settings::of(&policy()).unwrap()
}

fn ok_at(secs: i64) -> BackupStatus {
    BackupStatus {
        last_success: Some(BackupRecord {
            time: at(secs),
            digest: "sha256:aa".into(),
            ..BackupRecord::default()
        }),
        ..BackupStatus::default()
    }
}

type Edit = Box<dyn Fn(&mut BackupPolicy)>;

#[test]
fn a_policy_is_checked_naming_its_field() {
    let s = settings();
    assert_eq!(s.every, Duration::from_secs(3600));
    assert_eq!(s.stale_after, Duration::from_secs(7200), "twice every");
    assert_eq!(
        (s.registry.as_str(), s.path.as_str()),
        ("127.0.0.1:5000", "backups/acme-work")
    );
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|p| p.every = "soon".into()), "spec.backup.every"),
        (
            Box::new(|p| p.every = "0s".into()),
            "spec.backup.every: must be more",
        ),
        (Box::new(|p| p.keep = 0), "spec.backup.keep"),
        (
            Box::new(|p| p.drill_every = Some("7".into())),
            "spec.backup.drillEvery",
        ),
        (
            Box::new(|p| p.stale_after = Some("x".into())),
            "spec.backup.staleAfter",
        ),
        (
            Box::new(|p| p.repository = "just-a-name".into()),
            "spec.backup.repository",
        ),
        (
            Box::new(|p| p.repository = "host/".into()),
            "spec.backup.repository",
        ),
    ];
    for (edit, want) in cases {
        let mut p = policy();
        edit(&mut p);
        let e = Settings::of(&p).unwrap_err().to_string();
        assert!(e.contains(want), "{e} should name {want}");
    }
}

#[test]
fn the_schedule() {
    let s = settings();
    let key = "acme/work";
    // Never backed up: now.
    assert_eq!(
        next(key, T0, &s, None, None),
        Next::Backup { request: None }
    );
    // Backed up 10 minutes ago, never drilled: the first drill follows.
    let done = ok_at(T0 - 600);
    assert_eq!(
        next(key, T0, &s, Some(&done), None),
        Next::Drill {
            digest: "sha256:aa".into()
        }
    );
    // Drilled just now: wait for the next backup (50 minutes).
    let mut drilled = done.clone();
    drilled.last_drill = Some(DrillRecord {
        time: at(T0),
        digest: "sha256:aa".into(),
        passed: true,
        last_passed: Some(at(T0)),
        message: None,
    });
    assert_eq!(
        next(key, T0, &s, Some(&drilled), None),
        Next::Wait(Duration::from_secs(3000))
    );
    // An hour after the last: due.
    assert_eq!(
        next(key, T0 + 3000, &s, Some(&drilled), None),
        Next::Backup { request: None }
    );
    // An on-demand request comes first, once.
    assert_eq!(
        next(key, T0, &s, Some(&drilled), Some("r1")),
        Next::Backup {
            request: Some("r1".into())
        }
    );
    let mut answered = drilled.clone();
    answered.answered_request = Some("r1".into());
    assert!(matches!(
        next(key, T0, &s, Some(&answered), Some("r1")),
        Next::Wait(_)
    ));
}

#[test]
fn a_failure_is_retried_after_a_minute_at_most() {
    let s = settings();
    let mut failed = ok_at(T0 - 7200);
    failed.last_error = Some(BackupFailure {
        time: at(T0 - 10),
        reason: "unreachable".into(),
        message: "connection refused".into(),
    });
    failed.last_drill = Some(DrillRecord {
        time: at(T0),
        passed: true,
        ..DrillRecord::default()
    });
    assert_eq!(
        next("a/b", T0, &s, Some(&failed), None),
        Next::Wait(Duration::from_secs(50))
    );
    assert_eq!(
        next("a/b", T0 + 50, &s, Some(&failed), None),
        Next::Backup { request: None }
    );
    // With `every` shorter than a minute, `every`.
    let mut quick = policy();
    quick.every = "10s".into();
    let q = Settings::of(&quick).unwrap();
    assert_eq!(
        next("a/b", T0, &q, Some(&failed), None),
        Next::Backup { request: None }
    );
}

#[test]
fn drills_spread_within_a_tenth_and_stay_put() {
    let s = settings();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..50 {
        let key = format!("t{i}/work");
        let j = jitter(&key, s.drill_every);
        assert!(j.abs() <= 8640, "{j}");
        assert_eq!(j, jitter(&key, s.drill_every), "stable");
        seen.insert(j);
    }
    assert!(seen.len() > 40, "spread: {}", seen.len());
}

#[test]
fn staleness() {
    let s = settings();
    // Never backed up, watched for 3 hours: stale, and no drill for 3 h is fine (limit 2 d).
    assert_eq!(
        stale(T0, &s, None, T0 - 3 * 3600),
        vec![Stale::Backup { since: None }]
    );
    // A backup an hour ago: not stale.
    assert!(
        stale(T0, &s, Some(&ok_at(T0 - 3600)), T0 - 10 * 86400)
            .iter()
            .all(|a| a.kind() != "backup/stale")
    );
    // No passing drill in 2 days: drill-stale; a failed drill: drill-failed.
    let mut st = ok_at(T0 - 60);
    st.last_drill = Some(DrillRecord {
        time: at(T0 - 30),
        digest: "sha256:aa".into(),
        passed: false,
        message: Some("notes/a.txt differs".into()),
        last_passed: Some(at(T0 - 3 * 86400)),
    });
    let kinds: Vec<_> = stale(T0, &s, Some(&st), T0 - 10 * 86400)
        .iter()
        .map(Stale::kind)
        .collect();
    assert_eq!(kinds, vec!["backup/drill-failed", "backup/drill-stale"]);
    // Resumed: both clear.
    st.last_drill = Some(DrillRecord {
        time: at(T0),
        digest: "sha256:aa".into(),
        passed: true,
        message: None,
        last_passed: Some(at(T0)),
    });
    assert!(stale(T0, &s, Some(&st), T0 - 10 * 86400).is_empty());
}
