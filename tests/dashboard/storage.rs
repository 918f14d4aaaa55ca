//! The Storage page's App storage section: an App's workspace and
//! database, live from the operator's stream (kind `App`), a grow showing
//! up as it happens, and after a retained App is deleted its volumes
//! listed `Retained` on request (`app_volumes` through the operator).
//! The File systems table's Backup and Drill columns: the age of the last
//! good backup and the last drill from the AgentFS's status, and a stale
//! backup and a failed drill marked from the operator's active alerts.

use super::*;

use exo::crd::{AgentFS, App};
use kube::api::{DeleteParams, Patch, PatchParams};

/// The row of one App volume with `phase`.
fn volume_row(ns: &str, app: &str, volume: &str, phase: &str) -> String {
    format!(
        r#"table#app-storage tr[data-namespace="{ns}"][data-app="{app}"][data-volume="{volume}"][data-phase="{phase}"]"#
    )
}

#[tokio::test]
async fn the_storage_page_lists_each_apps_two_volumes_and_the_retained_ones() {
    let _cluster = CLUSTER.read().await;
    let ns = support::operator::restricted_namespace("dash-apps").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "apps").await;
    let apps = ns.api::<App>();
    let app: App = serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "App", "metadata": {"name": "shop"},
        "spec": {"image": "example.invalid/shop:1", "retain": true,
            "workspace": {"size": "1Gi", "maxSize": "4Gi"},
            "database": {"postgres": {"image": "example.invalid/postgres:16",
                "size": "1Gi", "maxSize": "8Gi"}}}
    }))
    .unwrap();
    apps.create(&PostParams::default(), &app).await.unwrap();

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/apps/storage").await;
    s.wait_for(r#"body[data-page="storage"]"#).await;
    let (n, wait) = (ns.name.as_str(), Duration::from_secs(40));
    s.wait_for_in(&volume_row(n, "shop", "workspace", "Bound"), wait)
        .await;
    s.wait_for_in(&volume_row(n, "shop", "database", "Bound"), wait)
        .await;
    assert_eq!(
        s.text(&format!(
            "{} .size",
            volume_row(n, "shop", "database", "Bound")
        ))
        .await,
        "1Gi (8Gi)"
    );

    // A grow arrives as a delta: the row's requested size follows.
    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"workspace": {"size": "2Gi"}}})),
    )
    .await
    .unwrap();
    let requested = format!("{} .requested", volume_row(n, "shop", "workspace", "Bound"));
    s.wait_js(
        "the workspace row to show 2Gi requested",
        wait,
        "const e = document.querySelector(arguments[0]);
         return e && e.textContent === '2Gi';",
        vec![json!(requested)],
    )
    .await;

    // Deleted with retain: the live rows go, and the operator lists the
    // kept volumes as Retained on request.
    apps.delete("shop", &DeleteParams::default()).await.unwrap();
    s.wait_js(
        "the App's live rows to go",
        wait,
        "return document.querySelectorAll('table#app-storage tr[data-app]').length === 0;",
        vec![],
    )
    .await;
    s.click(r#"button[data-action="retained"]"#).await;
    s.wait_for_in(&volume_row(n, "shop", "workspace", "Retained"), wait)
        .await;
    s.wait_for_in(&volume_row(n, "shop", "database", "Retained"), wait)
        .await;
    s.screenshot("storage-apps").await;
    s.close().await;
}

/// The cell `class` (`backup` or `drill`) of the AgentFS `name`'s row.
fn fs_cell(ns: &str, name: &str, class: &str) -> String {
    format!(r#"table#storage tr[data-namespace="{ns}"][data-name="{name}"] td.{class}"#)
}

/// Three volumes: one without a policy; one whose last backup just
/// succeeded and whose drill passed an hour ago; one whose backups fail
/// (its registry is a port nobody listens on) an hour after its last good
/// one, with a failed drill. The page shows `—`, the age and `passed 1h`,
/// and marks the third `stale` and `FAILED` once the operator's
/// `backup/stale` alert is active. The outcomes are planted in the status
/// (what the backup task and the drills write), so the states do not wait
/// on a registry; `tests/backup_alerts.rs` drives real backups.
#[tokio::test]
async fn the_storage_page_shows_backups_and_drills_and_marks_stale_and_failed() {
    let _cluster = CLUSTER.read().await;
    let ns = support::operator::restricted_namespace("dash-backup").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "backups").await;
    let api = ns.api::<AgentFS>();
    let dead = format!("127.0.0.1:{}", support::operator::free_port());
    let volume = |name: &str, every: Option<&str>| -> AgentFS {
        let mut spec = json!({"size": "1Gi", "maxSize": "2Gi"});
        if let Some(every) = every {
            spec["backup"] = json!({
                "every": every, "keep": 1, "repository": format!("{dead}/b/{name}"),
                "insecure": true
            });
        }
        serde_json::from_value(json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": {"name": name}, "spec": spec
        }))
        .unwrap()
    };
    for (name, every) in [("plain", None), ("good", Some("1h")), ("bad", Some("10s"))] {
        api.create(&PostParams::default(), &volume(name, every))
            .await
            .unwrap();
    }
    // The first attempt of each fails at once (nothing listens); what is
    // planted comes after it, so it is not overwritten.
    let now = k8s_openapi::jiff::Timestamp::now();
    let ago = |secs: i64| {
        now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
            .unwrap()
            .to_string()
    };
    for (name, planted) in [
        (
            "good",
            json!({"lastError": null,
                "lastSuccess": {"time": now.to_string(), "digest": "sha256:aa", "bytesUploaded": 10,
                    "bytesTotal": 1000, "files": 1, "treeHash": "t"},
                "lastDrill": {"time": ago(3600), "digest": "sha256:aa", "passed": true,
                    "lastPassed": ago(3600)}}),
        ),
        (
            "bad",
            json!({"lastSuccess": {"time": ago(3600), "digest": "sha256:bb", "bytesUploaded": 10,
                    "bytesTotal": 1000, "files": 1, "treeHash": "t"},
                "lastDrill": {"time": ago(1800), "digest": "sha256:bb", "passed": false,
                    "message": "restored file \"vol/notes.md\" differs from the backup"}}),
        ),
    ] {
        let tried = support::operator::wait_for(&api, name, "the first attempt", |f| {
            f.status
                .as_ref()
                .and_then(|s| s.backup.as_ref())
                .is_some_and(|b| b.last_error.is_some())
        })
        .await;
        let err = tried.status.unwrap().backup.unwrap().last_error.unwrap();
        assert_eq!(err.reason, "unreachable", "{err:?}");
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"backup": planted}})),
        )
        .await
        .unwrap();
    }

    let (_admin, s) = logged_in(&cp).await;
    s.goto("/deployments/backups/storage").await;
    s.wait_for(r#"body[data-page="storage"]"#).await;
    let (n, wait) = (ns.name.as_str(), Duration::from_secs(40));
    let state = |name: &str, class: &str, state: &str| {
        format!(r#"{}[data-state="{state}"]"#, fs_cell(n, name, class))
    };
    s.wait_for_in(&state("plain", "backup", "none"), wait).await;
    assert_eq!(s.text(&fs_cell(n, "plain", "backup")).await, "—");
    s.wait_for_in(&state("good", "backup", "ok"), wait).await;
    let age = s.text(&fs_cell(n, "good", "backup")).await;
    assert!(
        age.ends_with('s') && age[..age.len() - 1].parse::<u32>().is_ok(),
        "an age in seconds: {age:?}"
    );
    s.wait_for_in(&state("good", "drill", "passed"), wait).await;
    assert_eq!(s.text(&fs_cell(n, "good", "drill")).await, "passed 60m");
    // The operator's alert makes it stale; its message is the title.
    s.wait_for_in(&state("bad", "backup", "stale"), wait).await;
    assert_eq!(
        s.text(&fs_cell(n, "bad", "backup")).await,
        "stale, failing (unreachable)"
    );
    let title = s
        .attr(&fs_cell(n, "bad", "backup"), "title")
        .await
        .unwrap_or_default();
    assert!(title.contains(&format!("AgentFS {n}/bad")), "{title}");
    s.wait_for_in(&state("bad", "drill", "failed"), wait).await;
    assert_eq!(s.text(&fs_cell(n, "bad", "drill")).await, "FAILED");
    // Marked so that it shows: the error colour, not the plain text's.
    let (bad, plain) = (
        s.computed_style(&fs_cell(n, "bad", "backup"), "color")
            .await,
        s.computed_style(&fs_cell(n, "plain", "backup"), "color")
            .await,
    );
    assert_ne!(bad, plain);
    s.screenshot("storage-backups").await;
    s.close().await;
}
