#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Backup staleness end to end: the real apiserver, a real managed
//! `exo operator run` (its backup watch every second), kwok's exec over the
//! volume's folder, the real registry behind a proxy that can stop
//! listening, and a real control plane. A volume backed up every 10 s
//! whose registry becomes unreachable goes stale 20 s after its last good
//! backup: the `backup/stale` alert reaches the control plane (warning,
//! keyed), an Event `BackupStale` says since when and what to do, the
//! gauges say so and `exo fs list` shows it; once the registry is back,
//! the next backup resolves it everywhere.

mod support;
mod upstream_support;

use std::time::Duration;

use exo::crd::{AgentFS, BackupStatus};
use k8s_openapi::api::events::v1::Event;
use serde_json::Value;
use support::eventually;
use support::operator::{OperatorProcess, create, restricted_namespace, wait_for};
use support::registry_proxy::RegistryProxy;
use upstream_support::ControlPlane;

const DEPLOYMENT: &str = "backups";

fn backup_of(fs: &AgentFS) -> BackupStatus {
    fs.status
        .as_ref()
        .and_then(|s| s.backup.clone())
        .unwrap_or_default()
}

/// The deployment's stored alerts about AgentFS `name` (newest first).
fn alerts_about(cp: &ControlPlane, name: &str) -> Vec<Value> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{DEPLOYMENT}/alerts"));
    assert_eq!(status, 200, "{v}");
    v["alerts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["reason"] == "BackupStale" && a["object"] == format!("AgentFS/{name}"))
        .collect()
}

fn active_keys(cp: &ControlPlane) -> Vec<String> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{DEPLOYMENT}/alerts/active"));
    assert_eq!(status, 200, "{v}");
    v["active"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a["key"].as_str().map(str::to_owned))
        .collect()
}

/// The Events with `reason` on the AgentFS `name`.
async fn events(ns: &str, reason: &str, name: &str) -> Vec<Event> {
    support::events(ns, reason)
        .await
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("AgentFS") && r.name.as_deref() == Some(name)
            })
        })
        .collect()
}

async fn until_event(ns: &str, reason: &str, name: &str) -> Event {
    eventually(
        &format!("a {reason} Event on AgentFS {name}"),
        Duration::from_secs(60),
        || async { events(ns, reason, name).await.into_iter().next() },
    )
    .await
}

/// `exo fs list`'s BACKUP column for `name`.
fn backup_column(ns: &str, name: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
        .args(["fs", "list", "-n", ns])
        .env("KUBECONFIG", &support::env().kubeconfig)
        .env_remove("EXO_DEPLOYMENT")
        .output()
        .expect("run exo fs list");
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = table.lines();
    let head = lines.next().unwrap_or_default();
    let (start, end) = (head.find("BACKUP").unwrap(), head.find("DRILL").unwrap());
    lines
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .map(|l| l.get(start..end).unwrap_or_default().trim().to_owned())
        .unwrap_or_else(|| panic!("no row for {name} in\n{table}"))
}

#[tokio::test]
async fn an_unreachable_registry_makes_backups_stale_and_its_return_resolves_it() {
    let ns = restricted_namespace("bk-alert").await;
    let n = ns.name.as_str();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment(DEPLOYMENT);
    let op = OperatorProcess::start_managed(
        n,
        "a",
        &["--backup-watch-interval", "1s"],
        &cp.base,
        &token,
    );
    op.wait_leader().await;
    let mut proxy = RegistryProxy::start(&support::env().registry).await;
    let api = ns.api::<AgentFS>();
    let volume: AgentFS = serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": {"name": "work"},
        "spec": {"size": "1Gi", "maxSize": "2Gi", "backup": {
            "every": "10s", "keep": 2, "insecure": true,
            "repository": format!("{}/exo-test/bk-alert-{n}", proxy.addr)}}
    }))
    .unwrap();
    create(&api, &volume).await;

    // Backups run: a good one, its gauges, nothing stale.
    let first = wait_for(&api, "work", "a good backup", |f| {
        backup_of(f).last_success.is_some()
    })
    .await;
    let ok = backup_of(&first).last_success.unwrap();
    let volume_labels = format!("namespace=\"{n}\",name=\"work\"");
    let stale_labels = format!("{volume_labels},alert=\"backup/stale\"");
    // (The watch looks every second; the volume does not change, so each
    // backup's stream is as long as the first's.)
    let total = format!("{volume_labels},kind=\"total\"");
    op.until_sample(
        "exo_fs_backup_last_bytes",
        &total,
        ok.bytes_total as f64,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(op.sample("exo_fs_backup_stale", &stale_labels), Some(0.0));
    assert!(
        op.sample("exo_fs_backup_age_seconds", &volume_labels)
            .is_some()
    );
    assert!(
        op.sample("exo_fs_backups_total", "outcome=\"ok\",reason=\"none\"")
            .unwrap_or(0.0)
            >= 1.0
    );
    assert!(alerts_about(&cp, "work").is_empty());

    // The registry goes away: attempts fail, and 20 s (twice `every`)
    // after the last good backup it is stale.
    proxy.stop();
    let failed = wait_for(&api, "work", "a failed attempt", |f| {
        backup_of(f).last_error.is_some()
    })
    .await;
    assert_eq!(backup_of(&failed).last_error.unwrap().reason, "unreachable");
    let fired = eventually(
        "the backup/stale alert upstream",
        Duration::from_secs(60),
        || async {
            let a = alerts_about(&cp, "work");
            (!a.is_empty()).then_some(a)
        },
    )
    .await;
    let last_ok = backup_of(&api.get("work").await.unwrap())
        .last_success
        .unwrap();
    let a = &fired[0];
    assert_eq!(a["severity"], "warning", "{a}");
    assert_eq!(a["namespace"], n, "{a}");
    assert_eq!(a["key"], format!("backup/stale/{n}/work"), "{a}");
    let message = a["message"].as_str().unwrap();
    for words in [
        &format!("no good backup since {}", last_ok.time) as &str,
        "failed (unreachable)",
        &proxy.addr,
    ] {
        assert!(message.contains(words), "{words:?} in {message}");
    }
    assert!(active_keys(&cp).contains(&format!("backup/stale/{n}/work")));
    let event = until_event(n, "BackupStale", "work").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("no good backup since"),
        "{event:?}"
    );
    op.until_sample(
        "exo_fs_backup_stale",
        &stale_labels,
        1.0,
        Duration::from_secs(60),
    )
    .await;
    assert!(
        op.sample("exo_fs_backup_age_seconds", &volume_labels)
            .unwrap()
            >= 20.0
    );
    assert!(
        op.sample(
            "exo_fs_backups_total",
            "outcome=\"failed\",reason=\"unreachable\""
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    assert_eq!(backup_column(n, "work"), "stale, failing (unreachable)");
    // Sent once while it holds (the watch looks every second).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(alerts_about(&cp, "work").len(), 1);
    assert_eq!(events(n, "BackupStale", "work").await.len(), 1);

    // The registry is back: the next backup succeeds and it resolves.
    proxy.resume().await;
    let resolved = eventually(
        "the backup/stale alert resolved upstream",
        Duration::from_secs(90),
        || async {
            let a = alerts_about(&cp, "work");
            (a.len() >= 2).then_some(a)
        },
    )
    .await;
    assert_eq!(resolved[0]["state"], "resolved", "{resolved:?}");
    assert!(!active_keys(&cp).contains(&format!("backup/stale/{n}/work")));
    let cleared = until_event(n, "BackupStaleCleared", "work").await;
    assert_eq!(cleared.type_.as_deref(), Some("Normal"));
    assert!(
        cleared
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("a backup succeeded at"),
        "{cleared:?}"
    );
    op.until_sample(
        "exo_fs_backup_stale",
        &stale_labels,
        0.0,
        Duration::from_secs(60),
    )
    .await;
    let after = backup_of(&api.get("work").await.unwrap());
    assert_ne!(after.last_success.as_ref().unwrap().time, last_ok.time);
    assert!(after.last_error.is_none(), "{after:?}");
    let column = backup_column(n, "work");
    assert!(column.ends_with('s'), "an age: {column:?}");
}
