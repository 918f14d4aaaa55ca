#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The fleet view across clusters: two real `exo control-plane serve`
//! replicas on the test environment's PostgreSQL, two operators speaking
//! the real protocol (raw clients), one per replica, and
//! `GET /api/v1/fleet/rollouts` read through `exo::upstream::fleet_view`
//! from either replica: both clusters' Rollouts, a delta, a removal, a
//! disconnected cluster `online: false`; a lane-scoped admin token
//! refused, and an operator's deployment token let in for one tenant only.

mod support;
mod upstream_support;

use std::time::Duration;

use exo::upstream::fleet_view::{self, FleetViewError};
use exo::wire::fleet::FleetView;
use exo::wire::token::SecretToken;
use exo::wire::{Delta, DeltaOp, Frame, Resource, ResourceKey, ResourceKind, SnapshotChunk};
use futures::SinkExt;
use serde_json::json;
use support::eventually;
use upstream_support::raw::{self, Socket};
use upstream_support::{ControlPlane, fresh_postgres};

const WAIT: Duration = Duration::from_secs(20);

/// A tenant's Rollout at generation `generation`, its status `phase` for
/// that generation.
fn rollout(tenant: &str, wave: &str, generation: i64, phase: &str) -> Resource {
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
        spec: json!({"tenant": tenant, "wave": wave, "release": "2026.11.1",
                     "commit": "c0ffee", "desiredHash": format!("h{generation}")}),
        status: json!({"phase": phase, "observedGeneration": generation,
                       "desiredHash": format!("h{generation}")}),
    }
}

async fn snapshot(ws: &mut Socket, resources: Vec<Resource>) {
    let f = Frame::Snapshot(SnapshotChunk {
        snapshot_id: exo::wire::random_id(),
        chunk: 0,
        last: true,
        resources,
    });
    raw::send(ws, &f).await;
}

async fn delta(ws: &mut Socket, seq: u64, op: DeltaOp, resource: Resource) {
    raw::send(ws, &Frame::Delta(Delta { seq, op, resource })).await;
}

/// The view from a replica with `token`, tenant-scoped when asked.
async fn read(cp: &ControlPlane, token: &SecretToken, tenant: Option<&str>) -> FleetView {
    fleet_view::fetch(&cp.base, token, tenant)
        .await
        .unwrap_or_else(|e| panic!("fleet view from {}: {e}", cp.base))
}

/// `(deployment, tenant, phase)` of every Rollout listed.
fn phases(v: &FleetView) -> Vec<(String, String, String)> {
    v.rollouts
        .iter()
        .map(|r| {
            (
                r.deployment.clone(),
                r.resource.key.namespace.clone(),
                r.resource.status["phase"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn triple(d: &str, t: &str, p: &str) -> (String, String, String) {
    (d.into(), t.into(), p.into())
}

/// Waits until both replicas answer what `want` accepts.
async fn on_both(
    set: &[ControlPlane],
    token: &SecretToken,
    what: &str,
    want: impl Fn(&FleetView) -> bool,
) -> FleetView {
    let mut last = FleetView::default();
    for cp in set {
        last = eventually(what, WAIT, || async {
            let v = read(cp, token, None).await;
            want(&v).then_some(v)
        })
        .await;
    }
    last
}

#[tokio::test]
async fn the_fleet_view_spans_clusters_and_replicas() {
    let db = fresh_postgres("fleetview");
    let set: Vec<ControlPlane> = (0..2)
        .map(|i| {
            let id = format!("r{i}");
            ControlPlane::start_on(
                tempfile::tempdir().unwrap(),
                db.clone(),
                &["--replica-id", &id, "--replica-lease", "3s"],
            )
        })
        .collect();
    let eu_token = set[0].create_deployment("eu-west-prod");
    set[0].create_deployment("us-east-prod");
    let us_token = set[0].create_deployment("us-east-prod-2");
    let (admin, _) = set[0].create_admin_token();
    let admin = SecretToken::new(admin);

    // Known, never connected: listed, offline, with no Rollouts.
    let v = read(&set[1], &admin, None).await;
    assert_eq!(v.clusters.len(), 3, "{v:?}");
    assert!(
        v.clusters
            .iter()
            .all(|c| !c.online && c.last_seen.is_none()),
        "{v:?}"
    );
    assert!(v.rollouts.is_empty());

    // One operator per replica.
    let mut eu = raw::raw_client(&set[0], &eu_token).await;
    let mut us = raw::raw_client(&set[1], &us_token).await;
    snapshot(
        &mut eu,
        vec![
            rollout("acme", "canary", 2, "Progressing"),
            rollout("beta", "fleet", 1, "Verified"),
        ],
    )
    .await;
    snapshot(&mut us, vec![rollout("acme", "canary", 2, "Verified")]).await;
    let v = on_both(&set, &admin, "both clusters' Rollouts", |v| {
        phases(v)
            == [
                triple("eu-west-prod", "acme", "Progressing"),
                triple("eu-west-prod", "beta", "Verified"),
                triple("us-east-prod-2", "acme", "Verified"),
            ]
    })
    .await;
    for name in ["eu-west-prod", "us-east-prod-2"] {
        let c = v.cluster(name).unwrap();
        assert!(c.online && c.last_seen.is_some(), "{c:?}");
    }
    assert!(!v.cluster("us-east-prod").unwrap().online);
    // The whole wire Resource comes through.
    let r = &v.rollouts[0].resource;
    assert_eq!(r, &rollout("acme", "canary", 2, "Progressing"));

    // A delta on one replica's operator, seen from the other replica: the
    // last pair turns Verified.
    delta(
        &mut eu,
        1,
        DeltaOp::Upsert,
        rollout("acme", "canary", 2, "Verified"),
    )
    .await;
    on_both(&set, &admin, "the delta", |v| {
        phases(v).contains(&triple("eu-west-prod", "acme", "Verified"))
    })
    .await;

    // One wave's Rollouts; every cluster still listed.
    let (status, resp) = bearer_get(&set[1], "/api/v1/fleet/rollouts?wave=fleet", &admin);
    assert_eq!(status, 200, "{resp}");
    let body = resp.split_once("\r\n\r\n").unwrap().1;
    let fleet: FleetView = serde_json::from_str(body).unwrap();
    assert_eq!(phases(&fleet), [triple("eu-west-prod", "beta", "Verified")]);
    assert_eq!(fleet.clusters.len(), 3);

    // A removed Rollout is gone everywhere.
    delta(
        &mut eu,
        2,
        DeltaOp::Remove,
        rollout("beta", "fleet", 1, "Verified"),
    )
    .await;
    on_both(&set, &admin, "the removal", |v| {
        phases(v)
            == [
                triple("eu-west-prod", "acme", "Verified"),
                triple("us-east-prod-2", "acme", "Verified"),
            ]
    })
    .await;

    // One tenant's view.
    let acme = read(&set[0], &admin, Some("acme")).await;
    assert_eq!(acme.rollouts.len(), 2);
    assert_eq!(
        acme.clusters.len(),
        3,
        "every cluster, even with no Rollout"
    );

    // A cluster whose operator went away is offline on every replica; its
    // last known Rollout stays, for the reader to treat as unknown.
    us.close(None).await.unwrap();
    drop(us);
    let v = on_both(&set, &admin, "us-east-prod-2 offline", |v| {
        v.cluster("us-east-prod-2").is_some_and(|c| !c.online)
    })
    .await;
    assert!(v.cluster("eu-west-prod").unwrap().online);
    assert!(v.cluster("us-east-prod-2").unwrap().last_seen.is_some());
    assert!(phases(&v).contains(&triple("us-east-prod-2", "acme", "Verified")));

    // An operator's own token reads one tenant, from either replica.
    let eu_token = SecretToken::new(eu_token);
    for cp in &set {
        let v = read(cp, &eu_token, Some("acme")).await;
        assert!(
            v.rollouts
                .iter()
                .all(|r| r.resource.key.namespace == "acme")
        );
        assert_eq!(v.rollouts.len(), 2);
        // ...and nothing without a tenant, nor anything else of the API.
        match fleet_view::fetch(&cp.base, &eu_token, None).await {
            Err(FleetViewError::Refused {
                status: 403,
                message,
                ..
            }) => assert!(message.contains("?tenant="), "{message}"),
            other => panic!("a deployment token without a tenant: {other:?}"),
        }
    }
    let (status, _) = bearer_get(&set[0], "/api/v1/deployments", &eu_token);
    assert_eq!(
        status, 403,
        "a deployment token reaches the fleet view only"
    );

    // A lane-scoped admin token is refused.
    let out = set[0].admin(&["admin-token", "create", "--lane", "desk"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lane = SecretToken::new(String::from_utf8(out.stdout).unwrap().trim());
    match fleet_view::fetch(&set[1].base, &lane, Some("acme")).await {
        Err(FleetViewError::Refused { status: 403, .. }) => {}
        other => panic!("a lane token: {other:?}"),
    }
    // A token nobody issued: 401, and the message does not show it.
    let wrong = SecretToken::new("exo_dt_not-issued-0123456789");
    let e = fleet_view::fetch(&set[0].base, &wrong, Some("acme"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, FleetViewError::Refused { status: 401, .. }),
        "{e}"
    );
    assert!(!format!("{e} {e:?}").contains("not-issued"), "{e}");

    // A revoked deployment token stops reading at once.
    let out = set[0].admin(&["token", "revoke", "eu-west-prod"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    match fleet_view::fetch(&set[1].base, &eu_token, Some("acme")).await {
        Err(FleetViewError::Refused { status: 401, .. }) => {}
        other => panic!("a revoked deployment token: {other:?}"),
    }
    let _ = eu.flush().await;
}

/// A GET with a Bearer token, the status only.
fn bearer_get(cp: &ControlPlane, path: &str, token: &SecretToken) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&cp.addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        cp.addr,
        token.expose()
    )
    .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, resp)
}
