//! The Storage page's App storage section: an App's workspace and
//! database, live from the operator's stream (kind `App`), a grow showing
//! up as it happens, and after a retained App is deleted its volumes
//! listed `Retained` on request (`app_volumes` through the operator).

use super::*;

use exo::crd::App;
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
