#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Upstream alerts end to end: the operator-side connection
//! (`exo::upstream::run_with_alerts`, in this process, against the real test
//! apiserver) sends what an `AlertSink` raised to `exo control-plane serve`
//! (real process), which stores it and shows it in its API and status page;
//! an alert raised while the control plane is down arrives after it is back.
//! A raw WebSocket client checks the server's side of the frame: ack,
//! de-duplication by id, and the close for an invalid alert.
//! `exo operator connect --send-test-alert` (real process) checks the CLI.

mod support;
mod upstream_support;

use std::time::Duration;

use exo::alerts::AlertSink;
use exo::upstream::{self, Alert, Severity, UpstreamConfig};
use exo::wire::token::SecretToken;
use exo::wire::{self, Frame};
use serde_json::Value;
use support::{TestNamespace, eventually};
use upstream_support::raw::{next_close, next_frame, raw_client, send};
use upstream_support::{ControlPlane, install_crds};

/// The deployment's alerts as the API lists them (newest first).
fn listed(cp: &ControlPlane, dep: &str) -> Vec<Value> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{dep}/alerts"));
    assert_eq!(status, 200, "{v}");
    v["alerts"].as_array().cloned().unwrap_or_default()
}

async fn until_listed(cp: &ControlPlane, dep: &str, what: &str, n: usize) -> Vec<Value> {
    eventually(what, Duration::from_secs(30), || async {
        let a = listed(cp, dep);
        (a.len() >= n).then_some(a)
    })
    .await
}

fn drift(pod: &str, message: &str) -> Alert {
    Alert::new(
        Severity::Critical,
        "ContentDrift",
        "t1",
        format!("Pod/{pod}"),
        message,
    )
}

/// Starts the operator side in this process; the returned sender stops it.
fn operator_side(
    client: kube::Client,
    cp: &ControlPlane,
    token: &str,
    namespace: &str,
) -> (
    AlertSink,
    upstream::HealthHandle,
    tokio::sync::oneshot::Sender<()>,
) {
    let mut cfg = UpstreamConfig::new(cp.base.clone(), SecretToken::new(token));
    cfg.namespace = Some(namespace.to_owned());
    // Redial quickly after the control plane comes back.
    cfg.backoff_base = Duration::from_millis(100);
    cfg.backoff_max = Duration::from_millis(500);
    cfg.reconnect_spread = Duration::from_millis(200);
    let (sink, queue) = exo::alerts::channel(exo::alerts::DEFAULT_CAPACITY);
    let health = upstream::health_handle();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let h = health.clone();
    tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        upstream::run_with_alerts(client, cfg, h, queue, shutdown)
            .await
            .unwrap();
    });
    (sink, health, stop)
}

fn connected(h: &upstream::HealthHandle) -> bool {
    h.report().is_some_and(|r| r.connected)
}

#[tokio::test]
async fn alerts_reach_the_control_plane_and_wait_out_its_downtime() {
    let ns = TestNamespace::new("up-alert").await;
    install_crds(&ns.client).await;
    let mut cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("alerts");
    let (sink, health, stop) = operator_side(ns.client.clone(), &cp, &token, &ns.name);

    // Raised before the connection exists: it waits, and goes out after the
    // connection's first snapshot.
    sink.send(drift("agent-x-1", "live content differs from the release"));
    let got = until_listed(&cp, "alerts", "the first alert", 1).await;
    let d = cp.deployment("alerts");
    assert!(d["snapshots_completed"].as_u64().unwrap() >= 1, "{d}");
    let a = &got[0];
    assert_eq!(a["severity"], "critical");
    assert_eq!(a["reason"], "ContentDrift");
    assert_eq!(a["namespace"], "t1");
    assert_eq!(a["object"], "Pod/agent-x-1");
    assert_eq!(a["message"], "live content differs from the release");
    assert_eq!(a["boot_id"], health.report().unwrap().boot_id.as_str());
    assert!(
        a["at"]
            .as_str()
            .unwrap()
            .parse::<k8s_openapi::jiff::Timestamp>()
            .is_ok(),
        "{a}"
    );

    // While connected, newest first.
    sink.send(Alert::new(
        Severity::Warning,
        "VerifyLagging",
        "t1",
        "Agent/x",
        "é".repeat(5000),
    ));
    let got = until_listed(&cp, "alerts", "the second alert", 2).await;
    assert_eq!(got[0]["reason"], "VerifyLagging");
    assert_eq!(got[1]["reason"], "ContentDrift");
    let msg = got[0]["message"].as_str().unwrap();
    assert_eq!(
        msg.len(),
        wire::alert_limits::MESSAGE,
        "cut on a char boundary"
    );

    // The status page shows the count and the newest alert.
    let (status, page) = cp.get("/status");
    assert_eq!(status, 200);
    let page = page.as_str().unwrap_or_default().to_owned();
    assert!(
        page.contains("/api/v1/deployments/alerts/alerts\">2</a>"),
        "{page}"
    );
    assert!(page.contains("VerifyLagging"), "{page}");

    // The control plane goes away; an alert raised meanwhile is held and
    // sent once it is back (same database, same address).
    cp.kill();
    eventually(
        "the operator to notice",
        Duration::from_secs(30),
        || async { (!connected(&health)).then_some(()) },
    )
    .await;
    sink.send(drift(
        "agent-x-2",
        "raised while the control plane was down",
    ));
    assert_eq!(sink.pending(), 1);
    cp.restart();
    let got = until_listed(&cp, "alerts", "the held alert after the restart", 3).await;
    assert_eq!(got[0]["object"], "Pod/agent-x-2");
    eventually(
        "the held alert to be acknowledged",
        Duration::from_secs(10),
        || async { (sink.pending() == 0).then_some(()) },
    )
    .await;
    let (_, v) = cp.get("/api/v1/deployments/alerts/alerts?limit=2");
    assert_eq!(v["total"], 3, "each alert stored once: {v}");
    assert_eq!(v["alerts"].as_array().unwrap().len(), 2);
    let before = v["next_before"].as_i64().unwrap();
    let (_, rest) = cp.get(&format!(
        "/api/v1/deployments/alerts/alerts?limit=2&before={before}"
    ));
    assert_eq!(rest["alerts"][0]["reason"], "ContentDrift");
    assert_eq!(rest["alerts"][0]["object"], "Pod/agent-x-1");
    assert!(rest["next_before"].is_null(), "{rest}");
    assert_eq!(sink.dropped(), 0);

    let (status, _) = cp.get("/api/v1/deployments/nope/alerts");
    assert_eq!(status, 404);
    let _ = stop.send(());
}

#[tokio::test]
async fn the_control_plane_acknowledges_dedups_and_refuses_bad_alerts() {
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("raw");
    let mut ws = raw_client(&cp, &token).await;
    let a = drift("p", "m");
    for _ in 0..2 {
        send(&mut ws, &Frame::Alert(a.clone())).await;
        match next_frame(&mut ws).await {
            Frame::AlertAck(ack) => assert_eq!(ack.id, a.id),
            other => panic!("expected alert_ack, got {other:?}"),
        }
    }
    let got = listed(&cp, "raw");
    assert_eq!(got.len(), 1, "a resent id is stored once: {got:?}");
    assert_eq!(got[0]["alert_id"], a.id.as_str());
    assert_eq!(got[0]["boot_id"], "raw-boot");

    // An alert that breaks the limits closes the connection like any
    // malformed frame, naming the field.
    let mut bad = drift("p", "m");
    bad.reason = "not an identifier".into();
    send(&mut ws, &Frame::Alert(bad)).await;
    let close = next_close(&mut ws).await;
    assert_eq!(u16::from(close.code), wire::close::PROTOCOL_ERROR);
    assert!(
        close.reason.as_str().starts_with("bad alert: field reason"),
        "{:?}",
        close.reason.as_str()
    );
    assert_eq!(cp.stats()["frames_rejected"], 1);
    // The close is an unclean end: the control plane may have added its own
    // `plane/disconnected` alert; of the operator's, still one.
    let from_operator = listed(&cp, "raw")
        .into_iter()
        .filter(|a| !a["key"].as_str().unwrap_or_default().starts_with("plane/"))
        .count();
    assert_eq!(from_operator, 1);
}

#[tokio::test]
async fn operator_connect_can_send_a_test_alert() {
    let ns = TestNamespace::new("up-alert-cli").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("cli");
    let c = upstream_support::Connector::start(&cp.base, &token, &ns.name, &["--send-test-alert"]);
    let got = until_listed(&cp, "cli", "the test alert", 1).await;
    assert_eq!(got[0]["reason"], "TestAlert", "{}", c.log());
    assert_eq!(got[0]["severity"], "warning");
    assert_eq!(got[0]["namespace"], ns.name.as_str());
}
