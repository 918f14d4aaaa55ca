#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Signals stop every long-running verb cleanly (real processes, real
//! apiserver): `control-plane serve` closes every operator socket with 1001
//! and records it, `operator connect` and `operator run` close theirs with
//! 1000, `operator run` releases its Lease, and each exits 0. Losing the
//! lead closes the upstream socket cleanly too.

mod support;
mod upstream_support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use support::operator::OperatorProcess;
use support::{TestNamespace, eventually};
use tokio_tungstenite::tungstenite::{self, Message};
use upstream_support::raw::{Socket, raw_client};
use upstream_support::{Connector, ControlPlane, closes, install_crds};

/// Reads until the server's close frame and returns its code, or `None`
/// when the socket ended without one (a 1006 to the client). Reading on
/// to the end also sends the client's answering close.
async fn close_code(mut ws: Socket) -> Option<u16> {
    let mut code = None;
    while let Some(m) = ws.next().await {
        match m {
            Ok(Message::Close(c)) => code = c.map(|c| u16::from(c.code)),
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed) => break,
            Err(_) => break,
        }
    }
    code
}

#[tokio::test]
async fn sigint_closes_every_operator_socket_with_1001_every_time() {
    const SOCKETS: usize = 20;
    const ROUNDS: usize = 50;
    let mut cp = ControlPlane::start(&[]);
    let tokens: Vec<(String, String)> = (0..SOCKETS)
        .map(|i| {
            let name = format!("sig-{i}");
            let token = cp.create_deployment(&name);
            (name, token)
        })
        .collect();
    for round in 0..ROUNDS {
        if round > 0 {
            cp.start_again();
        }
        let sockets =
            futures::future::join_all(tokens.iter().map(|(_, t)| raw_client(&cp, t))).await;
        let codes = tokio::spawn(futures::future::join_all(
            sockets.into_iter().map(close_code),
        ));
        let status = cp.signal("-INT");
        let codes = codes.await.unwrap();
        assert!(
            status.success(),
            "round {round}: exit {status}\n{}",
            cp.log()
        );
        let wrong: Vec<_> = codes.iter().filter(|c| **c != Some(1001)).collect();
        assert!(
            wrong.is_empty(),
            "round {round}: {} of {SOCKETS} sockets got {wrong:?}, not 1001",
            wrong.len()
        );
    }
    // Every connection was recorded closed with 1001, by the server that
    // closed it: the record is written before the process exits.
    cp.start_again();
    for (name, _) in &tokens {
        let got = closes(&cp, name);
        assert_eq!(got.len(), ROUNDS, "{name}: {got:?}");
        assert!(
            got.iter().all(|o| o == "1001 control plane shutting down"),
            "{name}: {got:?}"
        );
    }
}

#[tokio::test]
async fn sigterm_stops_serve_and_connect_cleanly() {
    let ns = TestNamespace::new("sig-connect").await;
    install_crds(&ns.client).await;
    let mut cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("sigterm");
    let mut c = Connector::start(&cp.base, &token, &ns.name, &[]);
    eventually("the connector online", Duration::from_secs(30), || async {
        connected_online(&cp, "sigterm").then_some(())
    })
    .await;

    // SIGTERM to the server: exit 0, the operator told 1001, and recorded.
    let status = cp.signal("-TERM");
    assert!(status.success(), "serve exit {status}\n{}", cp.log());
    cp.start_again();
    assert_eq!(
        closes(&cp, "sigterm"),
        ["1001 control plane shutting down"],
        "{}",
        cp.log()
    );
    // The connector dials again, then SIGTERM to it: exit 0, and the
    // server records its goodbye (1000), not a dropped socket. (On
    // PostgreSQL the row keeps the last frame's time across the restart,
    // so the state alone is online before the operator is back.)
    eventually("the connector back", Duration::from_secs(30), || async {
        connected_online(&cp, "sigterm").then_some(())
    })
    .await;
    let status = c.signal("-TERM");
    assert!(status.success(), "connect exit {status}\n{}", c.log());
    let got = eventually("the close record", Duration::from_secs(10), || async {
        let got = closes(&cp, "sigterm");
        (got.len() == 2).then_some(got)
    })
    .await;
    assert_eq!(
        got[1], "closed by peer: 1000 operator shutting down",
        "{got:?}"
    );
    let d = cp.deployment("sigterm");
    assert!(
        d["active_alerts"].as_array().is_none_or(|a| a.is_empty()),
        "{d}"
    );
}

/// Whether the deployment has a live connection and is judged online.
fn connected_online(cp: &ControlPlane, name: &str) -> bool {
    let d = cp.deployment(name);
    d["connected"] == true && d["state"] == "online"
}

/// The Lease's holder, `None` when released.
async fn holder(leases: &Api<Lease>) -> Option<String> {
    let l = leases.get("exo-operator").await.unwrap();
    l.spec
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn operator_run_closes_upstream_on_lost_lead_and_on_sigterm() {
    let ns = TestNamespace::new("sig-run").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("sigrun");
    let mut op = OperatorProcess::start_managed(&ns.name, "sig-a", &[], &cp.base, &token);
    op.wait_leader().await;
    // `connections` counts the sockets accepted so far.
    let dialled = |n: u64| {
        let cp = &cp;
        move || async move { (cp.deployment("sigrun")["connections"].as_u64() == Some(n)).then_some(()) }
    };
    eventually("the leader connected", Duration::from_secs(30), dialled(1)).await;

    // Another holder takes the Lease: the old leader steps down and closes
    // its upstream socket with a goodbye, not a drop.
    let leases: Api<Lease> = ns.api();
    let mut lease = leases.get("exo-operator").await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("someone-else".into());
    spec.lease_duration_seconds = Some(8);
    spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    leases
        .replace("exo-operator", &PostParams::default(), &lease)
        .await
        .unwrap();
    let got = eventually("the step-down close", Duration::from_secs(20), || async {
        let got = closes(&cp, "sigrun");
        (!got.is_empty()).then_some(got)
    })
    .await;
    assert_eq!(
        got,
        ["closed by peer: 1000 operator shutting down"],
        "{}",
        op.log()
    );

    // The stolen Lease expires; the operator leads and connects again.
    eventually("the leader back", Duration::from_secs(40), dialled(2)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("sig-a"));

    // SIGTERM: exit 0, a goodbye upstream, and the Lease released.
    let status = op.terminate();
    assert!(status.success(), "operator exit {status}\n{}", op.log());
    let got = eventually("the shutdown close", Duration::from_secs(10), || async {
        let got = closes(&cp, "sigrun");
        (got.len() == 2).then_some(got)
    })
    .await;
    assert_eq!(
        got,
        [
            "closed by peer: 1000 operator shutting down",
            "closed by peer: 1000 operator shutting down"
        ],
        "{}",
        op.log()
    );
    assert_eq!(holder(&leases).await, None, "the Lease is released");
}
