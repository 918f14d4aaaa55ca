//! Tables for `exo fs` (`-o json` prints the answers as they are).

use crate::cli::table;
use crate::operator::backups::{plan, watch};
use crate::wire::fs::{AppVolumeInfo, AppVolumeList, FsInfo, FsList, FsListing, Transferred};

fn or_dash(s: Option<&str>) -> String {
    s.filter(|s| !s.is_empty()).unwrap_or("-").to_owned()
}

/// The BACKUP column at `now` (seconds): `-` without a policy; `pending`
/// before any outcome, or while the status is for an older generation of
/// the policy; `stale` when the staleness rule holds (the operator's,
/// [`plan::stale`]); `failing (<reason>)` when the last attempt failed;
/// else the age of the last good backup (`3h`).
pub fn backup_cell(i: &FsInfo, now: i64) -> String {
    let Some(policy) = &i.backup else {
        return "-".into();
    };
    let status = i.backup_status.as_ref();
    let behind = match (status.and_then(|s| s.observed_generation), i.generation) {
        (Some(seen), Some(generation)) => seen < generation,
        (None, Some(_)) => true,
        _ => false,
    };
    let outcome = status.is_some_and(|s| s.last_success.is_some() || s.last_error.is_some());
    if behind || !outcome {
        return "pending".into();
    }
    let created = i.created.as_deref().and_then(plan::seconds).unwrap_or(now);
    let stale = plan::Settings::of(policy).is_ok_and(|s| {
        plan::stale(now, &s, status, created)
            .iter()
            .any(|a| matches!(a, plan::Stale::Backup { .. }))
    });
    match (stale, watch::failing(status)) {
        (true, Some(reason)) => format!("stale, failing ({reason})"),
        (true, None) => "stale".into(),
        (false, Some(reason)) => format!("failing ({reason})"),
        (false, None) => table::age(
            status
                .and_then(|s| s.last_success.as_ref())
                .and_then(|b| plan::seconds(&b.time))
                .map(|t| now - t),
        ),
    }
}

/// The DRILL column at `now`: `passed 2d` (since the last drill, which
/// passed), `FAILED`, or `-` (no policy, or no drill yet).
pub fn drill_cell(i: &FsInfo, now: i64) -> String {
    let drill = i
        .backup
        .as_ref()
        .and(i.backup_status.as_ref())
        .and_then(|s| s.last_drill.as_ref());
    match drill {
        None => "-".into(),
        Some(d) if !d.passed => "FAILED".into(),
        Some(d) => format!(
            "passed {}",
            table::age(plan::seconds(&d.time).map(|t| now - t))
        ),
    }
}

fn row(i: &FsInfo, now: i64) -> Vec<String> {
    vec![
        i.namespace.clone(),
        i.name.clone(),
        i.phase.to_string(),
        or_dash(i.requested.as_deref()),
        or_dash(i.provisioned.as_deref()),
        or_dash(Some(&i.max_size)),
        or_dash(i.pvc.as_deref()),
        backup_cell(i, now),
        drill_cell(i, now),
        if i.mounted_by.is_empty() {
            "-".into()
        } else {
            i.mounted_by.join(",")
        },
    ]
}

const HEAD: [&str; 10] = [
    "NAMESPACE",
    "NAME",
    "STATUS",
    "REQUESTED",
    "PROVISIONED",
    "MAX",
    "PVC",
    "BACKUP",
    "DRILL",
    "MOUNTED-BY",
];

fn now() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_second()
}

pub fn list(v: &serde_json::Value) -> String {
    match serde_json::from_value::<FsList>(v.clone()) {
        Ok(l) if l.items.is_empty() => "no file systems\n".into(),
        Ok(l) => {
            let now = now();
            let rows: Vec<_> = l.items.iter().map(|i| row(i, now)).collect();
            table::render_trimmed(&HEAD, &rows)
        }
        Err(_) => format!("{v}\n"),
    }
}

pub fn one(v: &serde_json::Value) -> String {
    match serde_json::from_value::<FsInfo>(v.clone()) {
        Ok(i) => table::render_trimmed(&HEAD, &[row(&i, now())]),
        Err(_) => format!("{v}\n"),
    }
}

const APP_HEAD: [&str; 10] = [
    "NAMESPACE",
    "APP",
    "VOLUME",
    "STATUS",
    "SIZE",
    "MAX",
    "REQUESTED",
    "PROVISIONED",
    "PVC",
    "BACKUP",
];

/// The age of the volume's last good backup at `now` (seconds), and the
/// reason of a failure since: `5m`, `2h (hook)`, `- (registry)`, `-`.
fn app_backup_cell(i: &AppVolumeInfo, now: i64) -> String {
    let at = i
        .last_backup
        .as_deref()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .map(|t| t.as_second());
    let age = table::age(at.map(|t| now - t));
    match &i.backup_error {
        Some(reason) => format!("{age} ({reason})"),
        None => age,
    }
}

fn app_row(i: &AppVolumeInfo) -> Vec<String> {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    app_row_at(i, now)
}

fn app_row_at(i: &AppVolumeInfo, now: i64) -> Vec<String> {
    vec![
        i.namespace.clone(),
        i.app.clone(),
        i.volume.clone(),
        i.phase.to_string(),
        or_dash(Some(&i.size)),
        or_dash(Some(&i.max_size)),
        or_dash(i.requested.as_deref()),
        or_dash(i.provisioned.as_deref()),
        or_dash(i.pvc.as_deref()),
        app_backup_cell(i, now),
    ]
}

/// `list --apps` and `resize app/NAME`: one row per App volume.
pub fn app_volumes(v: &serde_json::Value) -> String {
    match serde_json::from_value::<AppVolumeList>(v.clone()) {
        Ok(l) if l.items.is_empty() => "no app volumes\n".into(),
        Ok(l) => table::render_trimmed(&APP_HEAD, &l.items.iter().map(app_row).collect::<Vec<_>>()),
        Err(_) => format!("{v}\n"),
    }
}

/// Binary units, one decimal.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

pub fn listing(v: &serde_json::Value) -> String {
    let Ok(l) = serde_json::from_value::<FsListing>(v.clone()) else {
        return format!("{v}\n");
    };
    let u = l.usage;
    let mut out = format!(
        "{}:{}  used {}, free {}, total {} (df in pod {})\n",
        l.fs_name,
        l.path,
        human(u.used_bytes),
        human(u.free_bytes),
        human(u.total_bytes),
        l.pod
    );
    let rows: Vec<Vec<String>> = l
        .entries
        .iter()
        .map(|e| {
            let when = k8s_openapi::jiff::Timestamp::from_second(e.mtime)
                .map(|t| t.strftime("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_default();
            let name = if e.kind == crate::wire::fs::EntryKind::Dir {
                format!("{}/", e.name)
            } else {
                e.name.clone()
            };
            vec![e.kind.as_str().to_owned(), e.size.to_string(), when, name]
        })
        .collect();
    out.push_str(&table::render_trimmed(
        &["TYPE", "SIZE", "MODIFIED", "NAME"],
        &rows,
    ));
    out
}

pub fn copied(v: &serde_json::Value) -> String {
    let Ok(t) = serde_json::from_value::<Transferred>(v.clone()) else {
        return format!("{v}\n");
    };
    let local = v
        .get("local")
        .and_then(|l| l.as_str())
        .map(|l| format!(" -> {l}"))
        .unwrap_or_default();
    format!(
        "copied {} file(s), {} ({}){local}, sha256 {} verified in pod {}\n",
        t.files,
        human(t.bytes),
        t.path,
        t.sha256,
        t.pod
    )
}

pub fn done(v: &serde_json::Value) -> String {
    let get = |k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let ns = get("namespace");
    let name = if get("fs_name").is_empty() {
        get("name")
    } else {
        get("fs_name")
    };
    let path = get("path");
    if path.is_empty() {
        format!("{ns}/{name}: done\n")
    } else {
        format!("{ns}/{name}:{path}: done\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_app_volume_shows_its_backups_age_and_failure() {
        let now = "2026-01-01T12:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let mut i = AppVolumeInfo::default();
        assert_eq!(app_backup_cell(&i, now), "-");
        i.last_backup = Some("2026-01-01T11:55:00Z".into());
        assert_eq!(app_backup_cell(&i, now), "5m");
        i.backup_error = Some("hook".into());
        assert_eq!(app_backup_cell(&i, now), "5m (hook)");
        assert_eq!(app_row_at(&i, now).last().unwrap(), "5m (hook)");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(12), "12 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(100 << 20), "100.0 MiB");
    }

    #[test]
    fn app_volume_table_has_a_row_per_volume() {
        let v = serde_json::json!({"items": [
            {"namespace": "t1", "app": "shop", "volume": "workspace", "phase": "Bound",
             "size": "2Gi", "maxSize": "5Gi", "requested": "2Gi", "provisioned": "2Gi",
             "pvc": "app-workspace-shop"},
            {"namespace": "t1", "app": "gone", "volume": "database", "phase": "Retained",
             "size": "1Gi", "pvc": "app-database-gone", "retain": true}]});
        let t = app_volumes(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE") && lines[0].contains("VOLUME"));
        assert!(lines[1].contains("workspace") && lines[1].contains("5Gi"));
        assert!(lines[2].contains("Retained") && lines[2].contains("app-database-gone"));
        assert_eq!(
            app_volumes(&serde_json::json!({"items": []})),
            "no app volumes\n"
        );
    }

    #[test]
    fn list_table_has_every_column() {
        let v = serde_json::json!({"items": [{"namespace": "t1", "name": "data", "phase": "Bound",
            "size": "1Gi", "maxSize": "5Gi", "requested": "1Gi", "provisioned": "1Gi",
            "pvc": "agentfs-data", "mountedBy": ["a", "b"]}]});
        let t = list(&v);
        assert!(t.starts_with("NAMESPACE"));
        assert!(t.contains("agentfs-data"));
        assert!(t.contains("a,b"));
    }

    /// The BACKUP and DRILL columns over fixed times: one case per state.
    #[test]
    fn backup_and_drill_columns() {
        use crate::crd::{BackupFailure, BackupPolicy, BackupRecord, BackupStatus, DrillRecord};
        const T0: i64 = 1_800_000_000;
        let at = |s: i64| {
            k8s_openapi::jiff::Timestamp::from_second(s)
                .unwrap()
                .to_string()
        };
        let policy = BackupPolicy {
            every: "1h".into(),
            keep: 3,
            repository: "r.example.com/b".into(),
            ..BackupPolicy::default()
        };
        let ok = |secs: i64| BackupRecord {
            time: at(secs),
            digest: "sha256:aa".into(),
            ..BackupRecord::default()
        };
        let err = |secs: i64, reason: &str| BackupFailure {
            time: at(secs),
            reason: reason.into(),
            message: "m".into(),
        };
        let drill = |secs: i64, passed: bool| DrillRecord {
            time: at(secs),
            digest: "sha256:aa".into(),
            passed,
            ..DrillRecord::default()
        };
        let vol =
            |policy: Option<&BackupPolicy>, status: Option<BackupStatus>, generation: i64| FsInfo {
                backup: policy.cloned(),
                backup_status: status,
                generation: Some(generation),
                created: Some(at(T0 - 30 * 86_400)),
                ..FsInfo::default()
            };
        let st = |success: Option<BackupRecord>,
                  error: Option<BackupFailure>,
                  drill: Option<DrillRecord>| BackupStatus {
            observed_generation: Some(2),
            last_success: success,
            last_error: error,
            last_drill: drill,
            answered_request: None,
        };
        let cases: Vec<(FsInfo, &str, &str)> = vec![
            (vol(None, None, 1), "-", "-"),
            (vol(Some(&policy), None, 1), "pending", "-"),
            (
                vol(Some(&policy), Some(st(None, None, None)), 2),
                "pending",
                "-",
            ),
            // A status for generation 2 of a policy now at 3.
            (
                vol(Some(&policy), Some(st(Some(ok(T0 - 60)), None, None)), 3),
                "pending",
                "-",
            ),
            (
                vol(
                    Some(&policy),
                    Some(st(
                        Some(ok(T0 - 3 * 3600)),
                        None,
                        Some(drill(T0 - 2 * 86_400, true)),
                    )),
                    2,
                ),
                "stale",
                "passed 2d",
            ),
            (
                vol(
                    Some(&policy),
                    Some(st(
                        Some(ok(T0 - 600)),
                        Some(err(T0 - 60, "auth")),
                        Some(drill(T0, false)),
                    )),
                    2,
                ),
                "failing (auth)",
                "FAILED",
            ),
            (
                vol(
                    Some(&policy),
                    Some(st(
                        Some(ok(T0 - 3 * 3600)),
                        Some(err(T0 - 60, "unreachable")),
                        None,
                    )),
                    2,
                ),
                "stale, failing (unreachable)",
                "-",
            ),
            // Never a good backup, the first attempt failed: stale from the
            // volume's creation.
            (
                vol(
                    Some(&policy),
                    Some(st(None, Some(err(T0 - 60, "auth")), None)),
                    2,
                ),
                "stale, failing (auth)",
                "-",
            ),
            // An error older than the last success is over.
            (
                vol(
                    Some(&policy),
                    Some(st(Some(ok(T0 - 1800)), Some(err(T0 - 3600, "auth")), None)),
                    2,
                ),
                "30m",
                "-",
            ),
        ];
        for (i, (v, backup, drill)) in cases.iter().enumerate() {
            assert_eq!(
                (backup_cell(v, T0).as_str(), drill_cell(v, T0).as_str()),
                (*backup, *drill),
                "case {i}"
            );
        }
        // The table has the columns, the JSON the raw fields.
        let raw = serde_json::to_value(FsList {
            items: vec![cases[5].0.clone()],
        })
        .unwrap();
        let table = list(&raw);
        let head: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(head[7..], ["BACKUP", "DRILL", "MOUNTED-BY"], "{table}");
        assert!(
            table.contains("failing (auth)") && table.contains("FAILED"),
            "{table}"
        );
        let item = &raw["items"][0];
        assert_eq!(item["backup"]["every"], "1h", "{item}");
        assert_eq!(
            item["backupStatus"]["lastError"]["reason"], "auth",
            "{item}"
        );
        assert_eq!(item["generation"], 2, "{item}");
    }
}
