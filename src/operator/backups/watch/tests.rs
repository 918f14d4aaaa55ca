//! The pure mapping: a volume's status to its alerts, messages, Events'
//! texts and gauges, over fixed times.

use super::*;
use crate::crd::{BackupFailure, BackupPolicy, BackupRecord, DrillRecord};

const T0: i64 = 1_800_000_000;
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

fn at(secs: i64) -> String {
    rfc3339(secs)
}

fn settings() -> Settings {
    Settings::of(&BackupPolicy {
        every: "1h".into(),
        keep: 3,
        repository: "registry.example.com/backups/acme/work".into(),
        drill_every: Some("1d".into()),
        ..BackupPolicy::default()
    })
    .unwrap()
}

fn look<'a>(s: &'a Settings, status: Option<&'a BackupStatus>, created: i64) -> Look<'a> {
    Look {
        kind: "AgentFS",
        namespace: "acme",
        name: "work",
        settings: s,
        status,
        created,
        first_seen: created,
    }
}

fn ok_at(secs: i64) -> BackupStatus {
    BackupStatus {
        last_success: Some(BackupRecord {
            time: at(secs),
            digest: "sha256:aa".into(),
            bytes_uploaded: 10,
            bytes_total: 1000,
            ..BackupRecord::default()
        }),
        last_drill: Some(DrillRecord {
            time: at(secs),
            digest: "sha256:aa".into(),
            passed: true,
            message: None,
            last_passed: Some(at(secs)),
        }),
        ..BackupStatus::default()
    }
}

fn failed(mut st: BackupStatus, secs: i64, reason: &str) -> BackupStatus {
    st.last_error = Some(BackupFailure {
        time: at(secs),
        reason: reason.into(),
        message: "connection refused".into(),
    });
    st
}

fn kinds(found: &[Finding]) -> Vec<&'static str> {
    found.iter().map(|f| f.stale.kind()).collect()
}

#[test]
fn a_stale_backup_is_a_keyed_warning_on_the_agentfs_saying_since_when_and_what_to_do() {
    let s = settings();
    // The last good backup 3 h ago (staleAfter 2 h), attempts failing since.
    let st = failed(ok_at(T0 - 3 * HOUR), T0 - 60, "unreachable");
    let found = findings(T0, &look(&s, Some(&st), T0 - 10 * DAY));
    assert_eq!(kinds(&found), ["backup/stale"]);
    let f = &found[0];
    assert_eq!(f.key(), "backup/stale/acme/work");
    let a = f.alert();
    assert_eq!(
        (
            a.severity,
            a.reason.as_str(),
            a.namespace.as_str(),
            a.object.as_str(),
            a.key.as_str()
        ),
        (
            Severity::Warning,
            "BackupStale",
            "acme",
            "AgentFS/work",
            "backup/stale/acme/work"
        )
    );
    assert!(a.validate().is_ok(), "{a:?}");
    for words in [
        &format!("no good backup since {}", at(T0 - 3 * HOUR)) as &str,
        "staleAfter (2h)",
        "last attempt failed (unreachable)",
        "registry.example.com",
        "autonomic.sh/backup-requested-at",
    ] {
        assert!(f.message.contains(words), "{words:?} in {}", f.message);
    }
    // Stable while it holds: a later look says the same (no live age).
    let later = findings(T0 + HOUR, &look(&s, Some(&st), T0 - 10 * DAY));
    assert_eq!(later, found);
    // A good backup: nothing holds.
    assert!(findings(T0, &look(&s, Some(&ok_at(T0 - 60)), T0 - 10 * DAY)).is_empty());
}

/// Before anything is on record the clock starts when the policy was
/// first seen (an old volume given a policy is not stale at once); once
/// an attempt failed, at the volume's creation.
#[test]
fn the_clock_of_a_volume_never_backed_up() {
    let s = settings();
    let created = T0 - 30 * DAY;
    let new_policy = Look {
        first_seen: T0 - 60,
        ..look(&s, None, created)
    };
    assert!(findings(T0, &new_policy).is_empty(), "seen a minute ago");
    let found = findings(T0 + 3 * HOUR, &new_policy);
    assert_eq!(kinds(&found), ["backup/stale"]);
    assert!(
        found[0].message.contains(&format!(
            "never had a good backup (counted from {})",
            at(T0 - 60)
        )),
        "{}",
        found[0].message
    );
    // An attempt failed: stale from the creation, now.
    let tried = failed(BackupStatus::default(), T0 - 10, "auth");
    let found = findings(
        T0,
        &Look {
            first_seen: T0 - 60,
            ..look(&s, Some(&tried), created)
        },
    );
    assert_eq!(kinds(&found), ["backup/stale"]);
    assert!(
        found[0].message.contains("failed (auth)"),
        "{}",
        found[0].message
    );
    // A refused (invalid) policy is not an attempt.
    let refused = failed(BackupStatus::default(), T0 - 10, INVALID);
    assert!(
        findings(
            T0,
            &Look {
                first_seen: T0 - 60,
                ..look(&s, Some(&refused), created)
            }
        )
        .is_empty()
    );
}

#[test]
fn drills_that_failed_or_went_stale() {
    let s = settings();
    let mut st = ok_at(T0 - 60);
    st.last_drill = Some(DrillRecord {
        time: at(T0 - 30),
        digest: "sha256:aa".into(),
        passed: false,
        message: Some("restored file \"work/notes/a.md\" differs".into()),
        last_passed: Some(at(T0 - 3 * DAY)),
    });
    let found = findings(T0, &look(&s, Some(&st), T0 - 10 * DAY));
    assert_eq!(kinds(&found), ["backup/drill-failed", "backup/drill-stale"]);
    let failed = &found[0];
    let a = failed.alert();
    assert_eq!(
        (a.severity, a.reason.as_str(), a.key.as_str()),
        (
            Severity::Critical,
            "BackupDrillFailed",
            "backup/drill-failed/acme/work"
        )
    );
    assert!(
        failed.message.contains("work/notes/a.md") && failed.message.contains("sha256:aa"),
        "{}",
        failed.message
    );
    let stale = &found[1];
    assert_eq!(stale.alert().severity, Severity::Warning);
    assert!(
        stale
            .message
            .contains(&format!("passed since {}", at(T0 - 3 * DAY)))
            && stale.message.contains("twice drillEvery (48h)"),
        "{}",
        stale.message
    );
    // The failed drill's Event is the drill's own; this watch tells its end.
    assert_eq!(
        failed.reasons(),
        (
            None,
            crate::cluster::events::Reason::BackupDrillFailedCleared
        )
    );
    // Never drilled, the policy seen just now: no drill alert yet.
    let mut undrilled = ok_at(T0 - 60);
    undrilled.last_drill = None;
    assert!(
        findings(
            T0,
            &Look {
                first_seen: T0 - 60,
                ..look(&s, Some(&undrilled), T0 - 30 * DAY)
            }
        )
        .is_empty()
    );
}

#[test]
fn the_clearing_note_says_why() {
    let s = settings();
    let st = failed(ok_at(T0 - 3 * HOUR), T0 - 60, "unreachable");
    let f = findings(T0, &look(&s, Some(&st), T0 - DAY)).remove(0);
    assert_eq!(
        f.cleared(Some(Some(&ok_at(T0)))),
        format!("backup/stale cleared: a backup succeeded at {}", at(T0))
    );
    assert_eq!(
        f.cleared(None),
        "backup/stale cleared: the volume has no backup policy any more"
    );
}

#[test]
fn gauges_show_the_age_bytes_and_what_fires() {
    let s = settings();
    let st = ok_at(T0 - 3 * HOUR);
    let found = findings(T0, &look(&s, Some(&st), T0 - DAY));
    assert_eq!(
        gauges(T0, Some(&st), &found),
        VolumeGauges {
            age_seconds: Some(3 * HOUR),
            bytes: Some((10, 1000)),
            firing: vec!["backup/stale"],
        }
    );
    assert_eq!(
        gauges(T0, None, &[]),
        VolumeGauges {
            age_seconds: None,
            bytes: None,
            firing: vec![],
        }
    );
}

/// Through the monitors' transition set: started once, cleared once.
#[test]
fn an_alert_starts_once_and_clears_once() {
    let s = settings();
    let st = ok_at(T0 - 3 * HOUR);
    let mut firing = Firing::<Finding>::default();
    let t = firing.update(findings(T0, &look(&s, Some(&st), T0 - DAY)));
    assert_eq!((t.started.len(), t.cleared.len()), (1, 0));
    let t = firing.update(findings(T0 + 60, &look(&s, Some(&st), T0 - DAY)));
    assert_eq!((t.started.len(), t.cleared.len()), (0, 0));
    let t = firing.update(findings(T0, &look(&s, Some(&ok_at(T0)), T0 - DAY)));
    assert_eq!((t.started.len(), t.cleared.len()), (0, 1));
    assert_eq!(t.cleared[0].key(), "backup/stale/acme/work");
}

/// An App's volume is watched as an AgentFS is: its alert names the App
/// and the volume (`App/<app>/<volume>`), and so does its key.
#[test]
fn an_app_volume_is_named_by_its_app_and_volume() {
    let s = settings();
    let st = ok_at(T0 - 3 * HOUR);
    let v = Look {
        kind: "App",
        name: "shop/database",
        ..look(&s, Some(&st), T0 - 10 * DAY)
    };
    let found = findings(T0, &v);
    assert_eq!(kinds(&found), ["backup/stale"]);
    assert_eq!(found[0].key(), "backup/stale/acme/shop/database");
    assert_eq!(found[0].alert().object, "App/shop/database");
    assert!(
        found[0].message.starts_with("App acme/shop/database "),
        "{}",
        found[0].message
    );
    assert!(found[0].alert().validate().is_ok());
}
