#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Liveness of the upstream connection, end to end with real components:
//! - a wedged upstream: a WebSocket peer written here accepts
//!   `exo operator connect`, answers `hello` with a proper `welcome`, then
//!   never reads or sends again and never closes; the connector's `/health`
//!   goes from 200 to 503, and the connection gives the socket up itself
//!   after its read timeout and dials again;
//! - against `exo control-plane serve`: a keyed alert is active until its
//!   resolution; `kill -9` of a connector raises the control plane's own
//!   disconnect alert, and connecting again clears it;
//! - `exo operator run` (managed) behind a TCP proxy that stops forwarding:
//!   503, the `UpstreamWedged` Event and the gauges while wedged, then the
//!   `monitor/wedged-upstream` alert active on the control plane once bytes
//!   flow again, resolved after a healthy while; a lost control plane gives
//!   an `UpstreamDisconnected` Event and counts a disconnect;
//! - an unmanaged `exo operator run` answers 200 on the upstream `/health`,
//!   so the liveness probe of `deploy/operator.yaml` fits it too.

mod support;
mod upstream_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use exo::upstream::{self, Alert, Severity, UpstreamConfig};
use exo::wire::token::SecretToken;
use exo::wire::{Frame, PROTOCOL_VERSION, Welcome};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::events::v1::Event;
use serde_json::Value;
use support::blackhole::Blackhole;
use support::operator::{OperatorProcess, free_port, restricted_namespace};
use support::{TestNamespace, eventually};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use upstream_support::{Connector, ControlPlane, http, install_crds};

/// The connector's `/health`: status and body.
fn health(addr: &str) -> (u16, Value) {
    http(addr, "GET", "/health", None)
}

/// A WebSocket peer that welcomes every connection and then goes silent
/// without closing. Returns its base URL and the connection ids it saw.
async fn wedging_peer() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    tokio::spawn(async move {
        // Held, never read: the sockets stay open and silent.
        let mut held = Vec::new();
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                continue;
            };
            let hello = loop {
                match ws.next().await {
                    Some(Ok(Message::Text(t))) => match Frame::from_json(t.as_str()) {
                        Ok(Frame::Hello(h)) => break Some(h),
                        other => panic!("expected hello, got {other:?}"),
                    },
                    Some(Ok(_)) => continue,
                    _ => break None,
                }
            };
            let Some(hello) = hello else { continue };
            let welcome = Frame::Welcome(Welcome {
                protocol: PROTOCOL_VERSION,
                deployment: "wedged".into(),
                connection_id: hello.connection_id.clone(),
                heartbeat_interval_ms: 15_000,
                accepts_alerts: false,
                accepts_rollouts: false,
                accepts_tenants: false,
                accepts_registrations: false,
                accepts_incidents: false,
                accepts_apps: false,
                accepts_analysis_runs: false,
            });
            ws.send(Message::Text(welcome.to_json().unwrap().into()))
                .await
                .unwrap();
            seen2.lock().unwrap().push(hello.connection_id);
            held.push(ws);
        }
    });
    (base, seen)
}

#[tokio::test]
async fn a_wedged_upstream_turns_health_503_and_is_redialled() {
    let ns = TestNamespace::new("live-wedge").await;
    install_crds(&ns.client).await;
    let (base, seen) = wedging_peer().await;
    let c = Connector::start(
        &base,
        "exo_dt_not_checked_by_this_peer",
        &ns.name,
        &[
            "--wedged-after",
            "4s",
            "--read-timeout",
            "20s",
            "--reconnect-spread",
            "0s",
            "--backoff-base",
            "100ms",
            "--backoff-max",
            "500ms",
        ],
    );
    // Connected and healthy first.
    let first = eventually(
        "the connector to be connected",
        Duration::from_secs(30),
        || {
            let (status, h) = health(&c.health_addr);
            async move { (h["state"] == "connected").then_some((status, h)) }
        },
    )
    .await;
    assert_eq!(first.0, 200, "{}", first.1);
    assert_eq!(first.1["wedged"], false, "{}", first.1);
    assert_eq!(first.1["wedged_after_ms"], 4000, "{}", first.1);

    // Nothing arrives: 503, and the body says why.
    let (status, h) = eventually("/health to answer 503", Duration::from_secs(30), || {
        let (status, h) = health(&c.health_addr);
        async move { (status == 503).then_some((status, h)) }
    })
    .await;
    assert_eq!(status, 503);
    assert_eq!(
        (h["wedged"].as_bool(), h["state"].as_str()),
        (Some(true), Some("connected")),
        "{h}"
    );
    assert!(h["last_event_age_ms"].as_u64().unwrap() > 4000, "{h}");
    assert_eq!(seen.lock().unwrap().len(), 1);

    // The connection gives the silent socket up itself and dials again.
    let h = eventually(
        "a silent drop and a second connection",
        Duration::from_secs(90),
        || {
            let (_, h) = health(&c.health_addr);
            let n = seen.lock().unwrap().len();
            async move { (n >= 2 && h["silent_drops"].as_u64() >= Some(1)).then_some(h) }
        },
    )
    .await;
    assert!(h["disconnects"].as_u64() >= Some(1), "{h}");
    let log = c.log();
    assert!(
        log.contains("nothing from the control plane for 20 s"),
        "{log}"
    );
}

/// The deployment's active alerts.
fn active(cp: &ControlPlane, dep: &str) -> Vec<Value> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{dep}/alerts/active"));
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["count"].as_u64(),
        v["active"].as_array().map(|a| a.len() as u64),
        "{v}"
    );
    v["active"].as_array().cloned().unwrap_or_default()
}

fn listed_active_count(cp: &ControlPlane, dep: &str) -> u64 {
    let (_, v) = cp.get("/api/v1/deployments");
    v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == dep)
        .and_then(|d| d["active_alerts"].as_u64())
        .expect("active_alerts in the listing")
}

async fn until_active(
    cp: &ControlPlane,
    dep: &str,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    eventually(what, Duration::from_secs(30), || {
        let a = active(cp, dep);
        let ok = pred(&a);
        async move { ok.then_some(a) }
    })
    .await
}

#[tokio::test]
async fn active_alerts_and_the_control_planes_disconnect_alert() {
    let ns = TestNamespace::new("live-cp").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let dep = "liveness";
    let token = cp.create_deployment(dep);

    // An operator side in this process raises a keyed alert and resolves it.
    let mut cfg = UpstreamConfig::new(cp.base.clone(), SecretToken::new(&token));
    cfg.namespace = Some(ns.name.clone());
    let (sink, queue) = exo::alerts::channel(exo::alerts::DEFAULT_CAPACITY);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let client = ns.client.clone();
    let side = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        upstream::run_with_alerts(client, cfg, upstream::health_handle(), queue, shutdown)
            .await
            .unwrap();
    });
    let finding = Alert::new(
        Severity::Warning,
        "AuditPlacement",
        &ns.name,
        "Pod/agent-x",
        "on the wrong node tier",
    )
    .keyed("audit/placement/Pod/agent-x");
    sink.send(finding.clone());
    let a = until_active(&cp, dep, "the finding to be active", |a| a.len() == 1).await;
    assert_eq!(a[0]["key"], "audit/placement/Pod/agent-x");
    assert_eq!(
        (a[0]["state"].as_str(), a[0]["reason"].as_str()),
        (Some("firing"), Some("AuditPlacement"))
    );
    assert!(a[0]["since_ms"].as_u64().is_some(), "{}", a[0]);
    assert_eq!(listed_active_count(&cp, dep), 1);
    assert_eq!(cp.deployment(dep)["active_alerts"], 1);

    sink.send(finding.resolving("on the right tier again"));
    until_active(&cp, dep, "the finding to be resolved", |a| a.is_empty()).await;
    assert_eq!(listed_active_count(&cp, dep), 0);
    let (_, hist) = cp.get(&format!("/api/v1/deployments/{dep}/alerts"));
    let newest = &hist["alerts"][0];
    assert_eq!(
        (newest["key"].as_str(), newest["state"].as_str()),
        (Some("audit/placement/Pod/agent-x"), Some("resolved")),
        "{hist}"
    );
    assert_eq!(hist["total"], 2, "both in the history");

    // A goodbye is no disconnect.
    stop.send(()).unwrap();
    side.await.unwrap();
    eventually("the goodbye", Duration::from_secs(30), || async {
        (cp.deployment(dep)["connected"] == false).then_some(())
    })
    .await;
    assert!(active(&cp, dep).is_empty(), "a clean close raises nothing");

    // kill -9: the socket ends without a close frame.
    let mut c = Connector::start(&cp.base, &token, &ns.name, &[]);
    eventually(
        "the connector to be connected",
        Duration::from_secs(30),
        || async { (cp.deployment(dep)["connected"] == true).then_some(()) },
    )
    .await;
    c.kill();
    let a = until_active(&cp, dep, "the disconnect alert", |a| {
        a.iter().any(|x| x["key"] == "plane/disconnected")
    })
    .await;
    let d = a.iter().find(|x| x["key"] == "plane/disconnected").unwrap();
    assert_eq!(
        (d["reason"].as_str(), d["severity"].as_str()),
        (Some("UpstreamDisconnected"), Some("warning")),
        "{d}"
    );
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .starts_with("connection lost: "),
        "{d}"
    );
    assert!(
        d["object"].as_str().unwrap().starts_with("Operator/"),
        "{d}"
    );
    assert_eq!(listed_active_count(&cp, dep), 1);

    // Connected again: cleared, and the history has both.
    let _c2 = Connector::start(&cp.base, &token, &ns.name, &[]);
    until_active(&cp, dep, "the disconnect alert to clear", |a| a.is_empty()).await;
    let (_, hist) = cp.get(&format!("/api/v1/deployments/{dep}/alerts"));
    let plane: Vec<&str> = hist["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["key"] == "plane/disconnected")
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(plane, ["resolved", "firing"], "{hist}");
}

/// Events on the test's Lease with `reason`.
async fn lease_events(ns: &TestNamespace, reason: &str) -> Vec<Event> {
    let events: kube::Api<Event> = ns.api();
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Lease")
        })
        .collect()
}

#[tokio::test]
async fn a_wedged_operator_alerts_once_connected_again_and_reports_disconnects() {
    let ns = restricted_namespace("live-op").await;
    // Pings more often than the 3 s wedge limit, so a healthy connection is
    // never silent that long; no pong timeout while the proxy holds them.
    let mut cp = ControlPlane::start(&["--ping-interval", "1s", "--pong-timeout", "120s"]);
    let dep = "wedged-op";
    let token = cp.create_deployment(dep);
    let proxy = Blackhole::start(cp.addr.clone()).await;
    let health_addr = format!("127.0.0.1:{}", free_port());
    let op = OperatorProcess::start_env(
        &ns.name,
        "live-1",
        &["--wedged-after", "3s"],
        &[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", &proxy.base),
            ("AUTONOMIC_AUTH_TOKEN", &token),
            ("EXO_UPSTREAM_HEALTH_ADDR", &health_addr),
        ],
    );
    op.wait_leader().await;
    eventually(
        "the operator to connect",
        Duration::from_secs(30),
        || async {
            (cp.deployment(dep)["connected"] == true
                && health(&health_addr).0 == 200
                && op.metric("exo_operator_upstream_connected") == Some(1))
            .then_some(())
        },
    )
    .await;

    // Wedged: 503, the gauge and one UpstreamWedged Event.
    proxy.pause(true);
    let (_, h) = eventually("/health to answer 503", Duration::from_secs(30), || async {
        let (status, h) = health(&health_addr);
        (status == 503).then_some((status, h))
    })
    .await;
    assert_eq!(h["wedged"], true, "{h}");
    eventually("the wedged gauge", Duration::from_secs(30), || async {
        (op.metric("exo_operator_upstream_wedged") == Some(1)).then_some(())
    })
    .await;
    let ev = eventually(
        "an UpstreamWedged Event",
        Duration::from_secs(30),
        || async {
            let e = lease_events(&ns, "UpstreamWedged").await;
            (!e.is_empty()).then_some(e)
        },
    )
    .await;
    assert_eq!(ev[0].type_.as_deref(), Some("Warning"));
    assert!(
        ev[0].note.as_deref().unwrap_or_default().contains("wedged"),
        "{:?}",
        ev[0]
    );

    // Bytes flow again: the alert held meanwhile arrives and is active.
    proxy.pause(false);
    let a = until_active(&cp, dep, "the wedged-upstream alert", |a| {
        a.iter().any(|x| x["key"] == "monitor/wedged-upstream")
    })
    .await;
    let w = a
        .iter()
        .find(|x| x["key"] == "monitor/wedged-upstream")
        .unwrap();
    assert_eq!(
        (w["reason"].as_str(), w["namespace"].as_str()),
        (Some("UpstreamWedged"), Some(ns.name.as_str())),
        "{w}"
    );
    assert_eq!(health(&health_addr).0, 200);
    // Resolved once the connection has been healthy for healthy_after (30 s).
    eventually(
        "the wedged-upstream alert to resolve",
        Duration::from_secs(90),
        || async {
            (!active(&cp, dep)
                .iter()
                .any(|x| x["key"] == "monitor/wedged-upstream"))
            .then_some(())
        },
    )
    .await;
    assert_eq!(op.metric("exo_operator_upstream_wedged"), Some(0));

    // The control plane goes away: one UpstreamDisconnected Event, counted.
    cp.kill();
    eventually(
        "an UpstreamDisconnected Event",
        Duration::from_secs(30),
        || async { (!lease_events(&ns, "UpstreamDisconnected").await.is_empty()).then_some(()) },
    )
    .await;
    assert!(op.metric("exo_operator_upstream_disconnects_total") >= Some(1));
    eventually(
        "the connected gauge to drop",
        Duration::from_secs(30),
        || async { (op.metric("exo_operator_upstream_connected") == Some(0)).then_some(()) },
    )
    .await;
    // Redials are not disconnects: after two failed dials, still one Event,
    // never repeated (the recorder would count a repeat in its series).
    let dials = |h: &Value| h["dial_attempts"].as_u64().unwrap_or(0);
    let before = dials(&health(&health_addr).1);
    eventually("two more dials", Duration::from_secs(120), || async {
        (dials(&health(&health_addr).1) >= before + 2).then_some(())
    })
    .await;
    let ev = lease_events(&ns, "UpstreamDisconnected").await;
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(ev[0].series.is_none(), "{ev:?}");
    assert!(
        ev[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .starts_with("upstream connection to the control plane lost"),
        "{ev:?}"
    );
}

#[tokio::test]
async fn an_unmanaged_operator_passes_the_upstream_liveness_probe() {
    let ns = restricted_namespace("live-unmanaged").await;
    let health_addr = format!("127.0.0.1:{}", free_port());
    let op = OperatorProcess::start_env(
        &ns.name,
        "unmanaged-1",
        &[],
        &[
            ("AUTONOMIC_MANAGED", "false"),
            ("EXO_UPSTREAM_HEALTH_ADDR", &health_addr),
        ],
    );
    op.wait_ready().await;
    let (status, h) = eventually("the upstream /health", Duration::from_secs(30), || async {
        std::net::TcpStream::connect(&health_addr)
            .is_ok()
            .then(|| health(&health_addr))
    })
    .await;
    assert_eq!(status, 200, "{h}");
    assert_eq!(
        (h["managed"].as_bool(), h["wedged"].as_bool()),
        (Some(false), Some(false)),
        "{h}"
    );
    assert_eq!(op.metric("exo_operator_upstream_connected"), Some(0));
}
