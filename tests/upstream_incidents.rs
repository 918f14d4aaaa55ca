#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Incidents from the outbox to the control plane, end to end: a managed
//! `exo operator run` on the real apiserver, agents posting with their
//! own tokens, the control plane on SQLite (or PostgreSQL with
//! `EXO_TEST_CP_BACKEND=postgres`). The operator is killed -9 and the
//! control plane restarted while incidents come in: every one arrives in
//! the lane exactly once, every one is marked routed in the cluster, and
//! the canary key planted in the detail is stored nowhere.

mod support;
mod upstream_support;

use std::collections::BTreeSet;
use std::time::Duration;

use exo::crd::{Agent, AgentPhase, Incident, IncidentState};
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::eventually;
use support::operator::{
    OperatorProcess, agent, agent_token, create, restricted_namespace, wait_for,
};
use upstream_support::ControlPlane;

const CANARY_KEY: &str = "sk-ant-api03-CANARYcanaryCANARYcanary0123456789";
const AGENTS: [&str; 3] = ["a1", "a2", "a3"];

/// Posts incident `n` from `agent` to the operator at `addr` until it is
/// stored (the same key again is the same incident).
async fn post(addr: &str, ns: &str, agent: &str, token: &str, n: usize) {
    let body = serde_json::to_vec(&json!({
        "severity": "error",
        "summary": format!("Report {n} could not be sent."),
        "detail": format!("attempt {n} failed with key {CANARY_KEY}"),
        "idempotencyKey": format!("{agent}-{n}"),
    }))
    .unwrap();
    let who = format!("{ns}/{agent}");
    let auth = format!("Bearer {token}");
    eventually(
        &format!("incident {n} of {agent} stored"),
        Duration::from_secs(60),
        || async {
            if std::net::TcpStream::connect(addr).is_ok() {
                let a = support::raw_http::request(
                    addr,
                    "POST",
                    "/v1/incidents",
                    &[("Authorization", &auth), ("X-Exo-Agent", &who)],
                    &body,
                );
                if a.status == 202 || a.status == 200 {
                    return Some(());
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            None
        },
    )
    .await;
}

fn lane(cp: &ControlPlane, dep: &str) -> Vec<Value> {
    let (status, v) = cp.get(&format!("/api/v1/deployments/{dep}/incidents"));
    assert_eq!(status, 200, "{v}");
    v["incidents"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn every_incident_reaches_the_lane_once_across_kills_and_restarts() {
    let mut cp = ControlPlane::start(&[]);
    let dep = "incidents";
    let token = cp.create_deployment(dep);
    let ns = restricted_namespace("upinc").await;
    let base = cp.base.clone();
    let start = |id: &str| {
        OperatorProcess::start_managed(&ns.name, id, &["--incident-rate", "600"], &base, &token)
    };
    let mut op = start("a");
    op.wait_leader().await;
    let agents = ns.api::<Agent>();
    for a in AGENTS {
        create(&agents, &agent(a)).await;
    }
    let mut tokens = Vec::new();
    for a in AGENTS {
        wait_for(&agents, a, "Active", |x| {
            x.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
        })
        .await;
        tokens.push(agent_token(&ns.name, a).await);
    }
    let per_round = 8;
    let mut n = 0;
    let mut round = |op_addr: String| {
        let start_n = n;
        n += per_round;
        (op_addr, start_n)
    };

    // Round 1 with the first operator; then kill -9 it mid-way.
    let (addr, from) = round(op.addr.clone());
    for i in from..from + per_round {
        let k = i % AGENTS.len();
        post(&addr, &ns.name, AGENTS[k], &tokens[k], i).await;
    }
    op.kill(); // SIGKILL
    let mut op = start("b");
    op.wait_ready().await;

    // Round 2 with its successor, the control plane restarted meanwhile.
    let (addr, from) = round(op.addr.clone());
    for i in from..from + per_round {
        if i == from + per_round / 2 {
            cp.restart();
        }
        let k = i % AGENTS.len();
        post(&addr, &ns.name, AGENTS[k], &tokens[k], i).await;
    }
    op.kill(); // SIGKILL
    let op = start("c");
    op.wait_ready().await;

    // Round 3: a retry of round 1's first post is the same incident.
    let (addr, from) = round(op.addr.clone());
    for i in from..from + per_round {
        let k = i % AGENTS.len();
        post(&addr, &ns.name, AGENTS[k], &tokens[k], i).await;
    }
    post(&addr, &ns.name, AGENTS[0], &tokens[0], 0).await;
    let total = n;

    // Every incident in the lane exactly once, and routed in the cluster.
    let rows = eventually(
        "every incident in the lane",
        Duration::from_secs(90),
        || async {
            let rows = lane(&cp, dep);
            (rows.len() >= total).then_some(rows)
        },
    )
    .await;
    let ids: BTreeSet<&str> = rows.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(rows.len(), total, "stored once each: {rows:#?}");
    assert_eq!(ids.len(), total);
    let client = support::client().await;
    let incidents: Api<Incident> = Api::namespaced(client, &ns.name);
    let cluster = eventually("every incident routed", Duration::from_secs(60), || async {
        let list = incidents.list(&ListParams::default()).await.ok()?.items;
        (list.len() == total && list.iter().all(|i| i.state() == IncidentState::Routed))
            .then_some(list)
    })
    .await;
    let names: BTreeSet<String> = cluster
        .iter()
        .filter_map(|i| i.metadata.name.clone())
        .collect();
    assert_eq!(
        names.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        ids,
        "the lane holds the cluster's incidents, by id"
    );
    // The support view: the detail, the key masked; the tenant's summary.
    for r in &rows {
        let detail = r["detail"].as_str().unwrap();
        assert!(detail.contains("[masked: Anthropic key]"), "{r}");
        assert_eq!(r["tenant"], ns.name.as_str());
        assert!(r["summary"].as_str().unwrap().starts_with("Report "), "{r}");
    }
    let text = serde_json::to_string(&rows).unwrap();
    assert!(
        !text.contains(CANARY_KEY),
        "the canary key reached the lane"
    );
    let log = cp.log();
    assert!(
        !log.contains(CANARY_KEY),
        "the canary key reached the control plane's log"
    );
    assert!(
        !op.log().contains(CANARY_KEY),
        "the canary key reached the operator's log"
    );
}
