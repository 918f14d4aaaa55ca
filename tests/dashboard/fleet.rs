//! The fleet's Waves page (`/fleet/waves`): one row per tenant, one cell
//! per cluster, from the control plane's fleet view, with two operators
//! speaking the real protocol (raw clients) and a third cluster never
//! connected; a delta and a lost connection reach the open page live.

use super::*;
use exo::wire::{Delta, DeltaOp, Frame, Resource, ResourceKey, ResourceKind, SnapshotChunk};
use futures::SinkExt;
use upstream_support::raw;

/// A tenant's Rollout at `generation`, its status `phase` for
/// `observed`.
fn rollout(tenant: &str, wave: &str, generation: i64, observed: i64, phase: &str) -> Resource {
    Resource {
        key: ResourceKey {
            kind: ResourceKind::Rollout,
            namespace: tenant.into(),
            name: "rollout".into(),
        },
        uid: format!("uid-{tenant}"),
        resource_version: format!("{generation}{phase}"),
        generation: Some(generation),
        created: None,
        phase: Some(phase.into()),
        labels: Default::default(),
        spec: json!({"tenant": tenant, "wave": wave, "release": NEW, "commit": "c0ffee1",
                     "desiredHash": format!("h{generation}")}),
        status: json!({"phase": phase, "observedGeneration": observed,
                       "desiredHash": format!("h{observed}"), "release": NEW}),
    }
}

async fn snapshot(ws: &mut raw::Socket, resources: Vec<Resource>) {
    let f = Frame::Snapshot(SnapshotChunk {
        snapshot_id: exo::wire::random_id(),
        chunk: 0,
        last: true,
        resources,
    });
    raw::send(ws, &f).await;
}

/// The states of the given `(wave, tenant, cluster)` cells, `null` for a
/// missing one.
const CELLS: &str = "return arguments[0].map(([w, t, c]) => {
      const td = document.querySelector(
        `section.wave[data-wave=\"${w}\"] tr.tenant[data-tenant=\"${t}\"] td.fleet-cell[data-cluster=\"${c}\"]`);
      return td ? td.dataset.state : null;
    });";

async fn wait_cells(b: &Session, what: &str, want: &[(&str, &str, &str, &str)]) {
    let cells: Vec<Value> = want.iter().map(|(w, t, c, _)| json!([w, t, c])).collect();
    let states: Vec<&str> = want.iter().map(|(_, _, _, s)| *s).collect();
    let script = format!(
        "const got = (function() {{ {CELLS} }})(...arguments); \
         return JSON.stringify(got) === JSON.stringify(arguments[1]) ? got : null;"
    );
    b.wait_js(
        what,
        Duration::from_secs(20),
        &script,
        vec![json!(cells), json!(states)],
    )
    .await;
}

#[tokio::test]
async fn the_fleet_waves_page_has_a_cell_per_cluster() {
    let cp = ControlPlane::start(&[]);
    let eu_token = cp.create_deployment("eu-west");
    let us_token = cp.create_deployment("us-east");
    cp.create_deployment("ap-south"); // known, never connected
    let mut eu = raw::raw_client(&cp, &eu_token).await;
    let mut us = raw::raw_client(&cp, &us_token).await;
    snapshot(
        &mut eu,
        vec![
            rollout("acme", "canary", 1, 1, "Verified"),
            // A status for the previous spec: stale, not Progressing.
            rollout("beta", "fleet", 2, 1, "Progressing"),
        ],
    )
    .await;
    snapshot(
        &mut us,
        vec![rollout("acme", "canary", 1, 1, "Progressing")],
    )
    .await;

    let b = Session::open(&cp.base).await;
    b.goto("/fleet/waves").await;
    wait_cells(
        &b,
        "the first picture",
        &[
            ("canary", "acme", "eu-west", "verified"),
            ("canary", "acme", "us-east", "progressing"),
            ("canary", "acme", "ap-south", "unknown"),
            ("fleet", "beta", "eu-west", "stale"),
            ("fleet", "beta", "us-east", "empty"),
        ],
    )
    .await;
    let cell = r#"section.wave[data-wave="canary"] tr.tenant[data-tenant="acme"] td.fleet-cell[data-cluster="eu-west"]"#;
    assert_eq!(b.text(&format!("{cell} .release")).await.trim(), NEW);
    assert_eq!(b.text(&format!("{cell} .phase")).await.trim(), "Verified");
    let empty = r#"section.wave[data-wave="fleet"] tr.tenant[data-tenant="beta"] td.fleet-cell[data-cluster="us-east"]"#;
    assert_eq!(
        b.text(empty).await.trim(),
        "",
        "no Rollout there: an empty cell"
    );
    assert_eq!(
        b.attr(r#"#nav a[href="/fleet/waves"]"#, "aria-current")
            .await
            .as_deref(),
        Some("page")
    );
    // The canary wave comes before the fleet wave.
    let order = b
        .js(
            "return Array.from(document.querySelectorAll('section.wave')).map(s => s.dataset.wave);",
            vec![],
        )
        .await;
    assert_eq!(order, json!(["canary", "fleet"]));

    // The last pair turns Verified: the open page follows.
    raw::send(
        &mut us,
        &Frame::Delta(Delta {
            seq: 1,
            op: DeltaOp::Upsert,
            resource: rollout("acme", "canary", 1, 1, "Verified"),
        }),
    )
    .await;
    wait_cells(
        &b,
        "the delta",
        &[
            ("canary", "acme", "eu-west", "verified"),
            ("canary", "acme", "us-east", "verified"),
        ],
    )
    .await;

    // A cluster whose operator went away: its cells are unknown, never
    // its last phase.
    eu.close(None).await.unwrap();
    wait_cells(
        &b,
        "eu-west offline",
        &[
            ("canary", "acme", "eu-west", "unknown"),
            ("fleet", "beta", "eu-west", "unknown"),
            ("canary", "acme", "us-east", "verified"),
        ],
    )
    .await;
    // (badges are upper case by the style sheet)
    assert_eq!(
        b.text(r#"th[data-cluster="eu-west"] .badge.offline"#)
            .await
            .trim()
            .to_lowercase(),
        "offline"
    );
    b.screenshot("fleet-waves").await;
    b.close().await;
    let _ = us.flush().await;
}
