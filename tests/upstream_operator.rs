#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo operator connect` (real process, real apiserver) against
//! `exo control-plane serve` (real process): snapshot and deltas, eviction,
//! control-plane restart, tunnelled commands and pod control (the tenants'
//! Rollouts: `upstream_rollout.rs`).

mod support;
mod upstream_support;

use std::time::Duration;

use exo::crd::{Agent, AgentFS};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, agent, agentfs, connector_until, install_crds};

/// `(name, resourceVersion)` of every AgentFS in the namespace, sorted.
async fn apiserver_fs(api: &Api<AgentFS>) -> Vec<(String, String)> {
    let mut v: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|f| {
            (
                f.metadata.name.unwrap(),
                f.metadata.resource_version.unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Waits until the control plane's AgentFS view equals the apiserver's.
async fn converges(
    cp: &ControlPlane,
    dep: &str,
    api: &Api<AgentFS>,
    what: &str,
) -> Vec<(String, String)> {
    eventually(what, Duration::from_secs(30), || async {
        let want = apiserver_fs(api).await;
        (cp.resources(dep, "AgentFS") == want).then_some(want)
    })
    .await
}

#[tokio::test]
async fn snapshot_then_deltas_reach_the_control_plane() {
    let ns = TestNamespace::new("up-stream").await;
    install_crds(&ns.client).await;
    let fs = ns.api::<AgentFS>();
    for i in 0..5 {
        fs.create(&PostParams::default(), &agentfs(&format!("pre-{i}"), "1Gi"))
            .await
            .unwrap();
    }
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("stream");
    // One resource per chunk: the snapshot is five chunks.
    let c = Connector::start(
        &cp.base,
        &token,
        &ns.name,
        &["--chunk-max-resources", "1", "--snapshot-interval", "1s"],
    );
    let got = converges(&cp, "stream", &fs, "the initial snapshot").await;
    assert_eq!(got.len(), 5);

    // Changes arrive as deltas: create, update, delete.
    fs.create(&PostParams::default(), &agentfs("later", "1Gi"))
        .await
        .unwrap();
    fs.delete("pre-0", &DeleteParams::default()).await.unwrap();
    let mut grown = fs.get("pre-1").await.unwrap();
    grown.spec.size = k8s_openapi::apimachinery::pkg::api::resource::Quantity("2Gi".into());
    fs.replace("pre-1", &PostParams::default(), &grown)
        .await
        .unwrap();
    let got = converges(&cp, "stream", &fs, "the deltas").await;
    assert!(got.iter().any(|(n, _)| n == "later"));
    assert!(!got.iter().any(|(n, _)| n == "pre-0"));
    let d = cp.deployment("stream");
    assert!(d["deltas_applied"].as_u64().unwrap() >= 3, "{d}");

    // The periodic snapshot backstops the stream.
    let first = d["snapshots_completed"].as_u64().unwrap();
    eventually("a periodic snapshot", Duration::from_secs(30), || async {
        (cp.deployment("stream")["snapshots_completed"]
            .as_u64()
            .unwrap()
            > first)
            .then_some(())
    })
    .await;
    let h = c.health();
    assert_eq!(h["state"], "connected");
    assert_eq!(h["deployment"], "stream");
    assert!(h["last_event_age_ms"].as_u64().is_some(), "{h}");
}

#[tokio::test]
async fn a_second_connector_evicts_the_first_without_a_status_flap() {
    let ns = TestNamespace::new("up-evict").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("evict");
    let first = Connector::start(&cp.base, &token, &ns.name, &["--fatal-retry", "1h"]);
    let h1 = connector_until(&first, "the first connection", |h| {
        h["state"] == "connected"
    })
    .await;

    let second = Connector::start(&cp.base, &token, &ns.name, &["--fatal-retry", "1h"]);
    let mut samples = Vec::new();
    let h2 = eventually("the second connection", Duration::from_secs(30), || {
        let d = cp.deployment("evict");
        samples.push((d["connected"].clone(), d["state"].clone()));
        let h = second.health();
        async move { (h["state"] == "connected").then_some(h) }
    })
    .await;
    let evicted = connector_until(&first, "the eviction", |h| h["state"] == "evicted").await;
    assert!(
        evicted["last_close"]
            .as_str()
            .unwrap()
            .ends_with("4000 evicted by newer connection"),
        "{evicted}"
    );
    let d = cp.deployment("evict");
    assert_eq!(d["connection_id"], h2["connection_id"]);
    assert_ne!(d["connection_id"], h1["connection_id"]);
    assert_eq!(d["evictions"], 1);
    // The evicted socket's cleanup did not unregister its successor.
    assert_eq!(d["disconnects"], 0, "{d}");
    assert_eq!(d["connected"], true);
    assert!(
        samples.iter().all(|(c, s)| c == true && s == "online"),
        "{samples:?}"
    );
    // The evicted connector does not fight back.
    assert_eq!(first.health()["dial_attempts"], 1);
    assert_eq!(cp.deployment("evict")["connections"], 2);
}

#[tokio::test]
async fn control_plane_restart_reconnects_and_converges() {
    let ns = TestNamespace::new("up-restart").await;
    install_crds(&ns.client).await;
    let fs = ns.api::<AgentFS>();
    fs.create(&PostParams::default(), &agentfs("before", "1Gi"))
        .await
        .unwrap();
    let mut cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("restart");
    let c = Connector::start(
        &cp.base,
        &token,
        &ns.name,
        &["--backoff-base", "100ms", "--backoff-max", "500ms"],
    );
    converges(&cp, "restart", &fs, "the first snapshot").await;

    cp.kill();
    connector_until(&c, "the connector to notice", |h| h["state"] != "connected").await;
    // Changes while the control plane is away.
    fs.delete("before", &DeleteParams::default()).await.unwrap();
    fs.create(&PostParams::default(), &agentfs("during", "1Gi"))
        .await
        .unwrap();
    cp.restart();
    let got = converges(&cp, "restart", &fs, "the snapshot after the restart").await;
    assert_eq!(
        got.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
        ["during"]
    );
    let h = connector_until(&c, "the reconnect", |h| h["state"] == "connected").await;
    assert!(h["connects"].as_u64().unwrap() >= 2, "{h}");
    assert!(
        c.log().contains("alert=\"upstream_disconnected\""),
        "ops alert missing from the log"
    );
}

#[tokio::test]
async fn commands_and_pod_control_are_carried_out_through_the_crds() {
    let ns = TestNamespace::new("up-cmd").await;
    install_crds(&ns.client).await;
    let agents = ns.api::<Agent>();
    agents
        .create(&PostParams::default(), &agent("worker"))
        .await
        .unwrap();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("cmd");
    let mut c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;

    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/commands",
        &json!({ "command": { "name": "agentfs_create", "namespace": ns.name,
                 "fs_name": "scratch", "size": "1Gi", "max_size": "5Gi" } }),
    );
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["ok"], true);
    let created = ns.api::<AgentFS>().get("scratch").await.unwrap();
    assert_eq!(created.spec.max_size.0, "5Gi");

    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/commands",
        &json!({ "command": { "name": "agentfs_list", "namespace": ns.name } }),
    );
    assert_eq!(status, 200, "{res}");
    assert_eq!(res["result"]["items"][0]["name"], "scratch");

    // A refused create reports the apiserver's reason.
    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/commands",
        &json!({ "command": { "name": "agentfs_create", "namespace": ns.name,
                 "fs_name": "scratch", "size": "1Gi", "max_size": "5Gi" } }),
    );
    assert_eq!(status, 422, "{res}");
    assert!(
        res["error"].as_str().unwrap().contains("already exists"),
        "{res}"
    );

    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/pod-control",
        &json!({ "action": "pause", "namespace": ns.name, "agent": "worker", "actor": "alice" }),
    );
    assert_eq!(status, 200, "{res}");
    assert!(agents.get("worker").await.unwrap().spec.paused);
    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/pod-control",
        &json!({ "action": "restart", "namespace": ns.name, "agent": "worker" }),
    );
    assert_eq!(status, 200, "{res}");
    let a = agents.get("worker").await.unwrap();
    assert!(
        a.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(exo::meta::ANNOTATION_RESTART_REQUESTED)
    );
    // The operator's audit records reached the control plane's store.
    eventually(
        "the operator's audit records",
        Duration::from_secs(30),
        || async {
            let (_, audit) = cp.get("/api/v1/deployments/cmd/audit");
            audit["audit"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| {
                    a["source"] == "operator"
                        && a["actor"] == "alice"
                        && a["action"] == "pod_control.pause"
                })
                .then_some(())
        },
    )
    .await;

    // Offline: refused by the control plane, not queued.
    c.kill();
    eventually("the disconnect", Duration::from_secs(30), || async {
        (cp.deployment("cmd")["connected"] == false).then_some(())
    })
    .await;
    let (status, res) = cp.post(
        "/api/v1/deployments/cmd/commands",
        &json!({ "command": { "name": "agentfs_create", "namespace": ns.name,
                 "fs_name": "nope", "size": "1Gi", "max_size": "5Gi" } }),
    );
    assert_eq!(status, 409, "{res}");
    assert!(res["error"].as_str().unwrap().contains("offline"), "{res}");
    assert!(ns.api::<AgentFS>().get_opt("nope").await.unwrap().is_none());
}

/// `(kind, name)` of every resource the control plane shows.
fn shown(cp: &ControlPlane, dep: &str) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for kind in ["Agent", "Tool", "AgentFS", "Pod", "AnalysisRun"] {
        for (name, _) in cp.resources(dep, kind) {
            all.push((kind.to_owned(), name));
        }
    }
    all.sort();
    all
}

#[tokio::test]
async fn operator_run_streams_its_own_caches_upstream() {
    let ns = TestNamespace::new("up-fed").await;
    install_crds(&ns.client).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("fed");
    let op =
        support::operator::OperatorProcess::start_managed(&ns.name, "fed-a", &[], &cp.base, &token);
    let pp = PostParams::default();
    ns.api::<Agent>()
        .create(&pp, &agent("early"))
        .await
        .unwrap();
    op.wait_leader().await;

    // Listed from the caches: the Agent, its pod, and what comes later.
    let tools = ns.api::<exo::crd::Tool>();
    tools
        .create(&pp, &support::operator::tool("gateway", true))
        .await
        .unwrap();
    ns.api::<AgentFS>()
        .create(&pp, &agentfs("scratch", "1Gi"))
        .await
        .unwrap();
    ns.api::<Agent>().create(&pp, &agent("late")).await.unwrap();
    let run: exo::crd::AnalysisRun = serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": "prod-canary-r1"},
        "spec": {"fleet": "prod", "wave": "canary", "release": "r1", "commit": "c1",
                 "tenants": [], "checks": []}
    }))
    .unwrap();
    ns.api::<exo::crd::AnalysisRun>()
        .create(&pp, &run)
        .await
        .unwrap();
    let has = |all: &[(String, String)], kind: &str, name: &str| {
        all.iter().any(|(k, n)| k == kind && n.starts_with(name))
    };
    eventually("every kind upstream", Duration::from_secs(40), || async {
        let all = shown(&cp, "fed");
        (has(&all, "Agent", "early")
            && has(&all, "Agent", "late")
            && has(&all, "Tool", "gateway")
            && has(&all, "AgentFS", "scratch")
            && has(&all, "Pod", "agent-early-")
            && has(&all, "Pod", "agent-late-")
            && has(&all, "Pod", "tool-gateway-")
            && has(&all, "AnalysisRun", "prod-canary-r1"))
        .then_some(())
    })
    .await;
    // A delete reaches it as a delta.
    ns.api::<Agent>()
        .delete("late", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the delete upstream", Duration::from_secs(40), || async {
        let all = shown(&cp, "fed");
        (!has(&all, "Agent", "late") && !has(&all, "Pod", "agent-late-")).then_some(())
    })
    .await;
    let log = op.log();
    assert!(
        log.contains("streaming the operator's caches")
            && log.contains(
                r#"[\"Agent\", \"Tool\", \"AgentFS\", \"Rollout\", \"Tenant\", \"App\", \"AnalysisRun\", \"Pod\"]"#
            ),
        "the upstream reads the operator's caches, no watches of its own:\n{log}"
    );
}
