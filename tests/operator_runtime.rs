#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The operator as a process: endpoints, leader election and failover
//! between two replicas, idempotency (a restart over an unchanged fleet
//! writes nothing), and the refusal to start without a CRD.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use exo::crd::{Agent, AgentFS, AgentPhase, Tool};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::Api;
use support::eventually;
use support::operator::{
    OperatorProcess, agent, agentfs, create, mount, restricted_namespace, tool, wait_for,
};
use support::proxy::HidingProxy;

fn phase(a: &Agent) -> Option<AgentPhase> {
    a.status.as_ref()?.phase
}

/// resourceVersions of every object of the fleet and its children.
async fn fleet(ns: &support::TestNamespace) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let prefix = |kind: &str, m: BTreeMap<String, String>| {
        m.into_iter()
            .map(move |(k, v)| (format!("{kind}/{k}"), v))
            .collect::<Vec<_>>()
    };
    all.extend(prefix("agent", support::versions(&ns.api::<Agent>()).await));
    all.extend(prefix("tool", support::versions(&ns.api::<Tool>()).await));
    all.extend(prefix(
        "agentfs",
        support::versions(&ns.api::<AgentFS>()).await,
    ));
    all.extend(prefix("pod", support::versions(&ns.api::<Pod>()).await));
    all.extend(prefix(
        "service",
        support::versions(&ns.api::<Service>()).await,
    ));
    all.extend(prefix(
        "secret",
        support::versions(&ns.api::<Secret>()).await,
    ));
    all.extend(prefix(
        "pvc",
        support::versions(&ns.api::<PersistentVolumeClaim>()).await,
    ));
    all
}

#[tokio::test]
async fn restart_over_an_unchanged_fleet_makes_zero_writes() {
    let ns = restricted_namespace("op-idem").await;
    let mut op = OperatorProcess::start(&ns.name, "first");
    let agents = ns.api::<Agent>();
    create(&ns.api::<AgentFS>(), &agentfs("ws", "1Gi", "2Gi", false)).await;
    for i in 0..5 {
        let mut a = agent(&format!("a{i}"));
        a.spec.filesystems = Some(vec![mount("ws", None, i % 2 == 0)]);
        create(&agents, &a).await;
    }
    create(&ns.api::<Tool>(), &tool("t", true)).await;
    create(&ns.api::<Tool>(), &tool("off", false)).await;
    for i in 0..5 {
        wait_for(&agents, &format!("a{i}"), "Active", |a| {
            phase(a) == Some(AgentPhase::Active)
        })
        .await;
    }
    wait_for(&ns.api::<AgentFS>(), "ws", "all five mounting", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.len() == 5)
    })
    .await;
    wait_for(&ns.api::<Tool>(), "t", "Ready", |t| {
        t.status.as_ref().and_then(|s| s.phase) == Some(exo::crd::ToolPhase::Ready)
    })
    .await;
    assert!(op.writes() > 0, "the first run did write");
    op.terminate();

    let before = fleet(&ns).await;
    let second = OperatorProcess::start(&ns.name, "second");
    second.wait_ready().await;
    second.wait_leader().await;
    // Leadership triggers a full re-reconcile; wait until every object was
    // reconciled at least once by this replica.
    let objects = 5 + 2 + 1;
    eventually(
        "the second replica to reconcile everything",
        Duration::from_secs(30),
        || async {
            let n = second.metric("exo_operator_reconciles_total")?;
            (n >= objects).then_some(())
        },
    )
    .await;
    assert_eq!(
        second.writes(),
        0,
        "a restart over an unchanged fleet wrote:\n{}",
        second.get("/metrics").unwrap().1
    );
    assert_eq!(fleet(&ns).await, before, "resourceVersions changed");
}

#[tokio::test]
async fn endpoints_and_leader_failover_between_two_replicas() {
    let ns = restricted_namespace("op-lead").await;
    let mut one = OperatorProcess::start(&ns.name, "one");
    one.wait_ready().await;
    one.wait_leader().await;
    let two = OperatorProcess::start(&ns.name, "two");
    two.wait_ready().await;

    // Endpoints: health with capabilities, readiness, metrics.
    let (code, body) = two.get("/healthz").unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("mount-filesystems"), "{body}");
    assert_eq!(two.get("/readyz").unwrap().0, 200);
    let (_, metrics) = two.get("/metrics").unwrap();
    assert!(metrics.contains("exo_operator_leader 0"), "{metrics}");
    assert_eq!(two.get("/nope").unwrap().0, 404);

    // The Lease names the leader and advertises the capability.
    let leases: Api<Lease> = ns.api();
    let lease = leases.get("exo-operator").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("one"));
    assert_eq!(
        lease.metadata.annotations.unwrap()["autonomic.sh/capabilities"],
        "mount-filesystems,app-storage"
    );

    // Only the leader reconciles.
    let agents = ns.api::<Agent>();
    create(&agents, &agent("x")).await;
    wait_for(&agents, "x", "Active", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    assert!(one.writes() > 0);
    assert_eq!(two.writes(), 0, "the standby wrote");

    // Kill the leader without a chance to release: the standby takes over
    // once the Lease expires, and reconciles.
    one.kill();
    two.wait_leader().await;
    let lease = leases.get("exo-operator").await.unwrap().spec.unwrap();
    assert_eq!(lease.holder_identity.as_deref(), Some("two"));
    assert!(lease.lease_transitions.unwrap() >= 1);
    create(&agents, &agent("y")).await;
    wait_for(&agents, "y", "Active under the new leader", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    assert!(two.writes() > 0);
}

#[tokio::test]
async fn graceful_stop_releases_the_lease() {
    let ns = restricted_namespace("op-release").await;
    let mut one = OperatorProcess::start(&ns.name, "one");
    one.wait_leader().await;
    let status = one.terminate();
    assert!(status.success(), "exit status {status:?}\n{}", one.log());
    let lease = ns
        .api::<Lease>()
        .get("exo-operator")
        .await
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(lease.holder_identity, None, "the lease was released");
    // `--log-format json`: every line is one JSON object with a level.
    let log = one.log();
    assert!(log.contains("released the lease"), "{log}");
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
    }

    // Stopped right after it starts (watches maybe not synced yet): it
    // still exits, cleanly.
    for i in 0..3 {
        let mut early =
            OperatorProcess::start_with(&ns.name, &format!("early{i}"), &["--lease-name", "early"]);
        eventually(
            "the http endpoint",
            std::time::Duration::from_secs(30),
            || async { early.get("/healthz").map(|_| ()) },
        )
        .await;
        let status = early.terminate();
        assert!(status.success(), "exit status {status:?}\n{}", early.log());
    }
}

/// `exo operator run` stops at once when a CRD is not installed: exit code
/// 2 and a message naming exactly the missing CRD.
#[tokio::test]
async fn a_missing_crd_stops_the_operator_with_a_message_naming_it() {
    let ns = restricted_namespace("op-nocrd").await;
    let crds = [
        ("agents", "agents.autonomic.sh"),
        ("tools", "tools.autonomic.sh"),
        ("agentfs", "agentfs.autonomic.sh"),
    ];
    for (plural, crd) in crds {
        let proxy = HidingProxy::start(ns.client.clone(), plural).await;
        let dir = support::scratch();
        let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_exo"))
            .args(["operator", "run", "--namespace", &ns.name])
            .args(["--lease-namespace", &ns.name, "--identity", "nocrd"])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .env("KUBECONFIG", proxy.kubeconfig(&dir))
            .env("RUST_LOG", "info,kube=warn")
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), run)
            .await
            .unwrap_or_else(|_| panic!("the operator kept running without the {crd} CRD"))
            .expect("run exo operator run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{crd}: {stderr}");
        let line = stderr
            .lines()
            .find(|l| l.starts_with("exo operator: "))
            .unwrap_or_else(|| panic!("{crd}: no error line in\n{stderr}"));
        assert!(
            line.contains(&format!("the {crd} CRD is not installed")),
            "{line}"
        );
        for (_, other) in crds.iter().filter(|(_, c)| *c != crd) {
            assert!(
                !stderr.contains(other),
                "{crd} missing, {other} named:\n{stderr}"
            );
        }
        assert!(
            proxy.hidden_hits.load(Ordering::SeqCst) > 0,
            "{crd}: the operator never asked for it"
        );
    }
}

/// A Tool in a fresh namespace, and an operator that cannot see `plural`
/// (a proxy answers the apiserver's own 404 for it), ready, leading, and
/// with the Tool reconciled. Bound in this order, the operator is dropped
/// (stopped) before the namespace.
async fn running_without(
    prefix: &str,
    plural: &'static str,
) -> (support::TestNamespace, OperatorProcess, HidingProxy) {
    let ns = restricted_namespace(prefix).await;
    // Created first: the proxy answers a watch only when it ends, so the
    // operator sees what its first lists return.
    create(&ns.api::<Tool>(), &tool("gateway", true)).await;
    let proxy = HidingProxy::start(ns.client.clone(), plural).await;
    let dir = support::scratch();
    let op = OperatorProcess::start_as(&ns.name, prefix, &ns.name, &proxy.kubeconfig(&dir));
    op.wait_ready().await;
    op.wait_leader().await;
    wait_for(&ns.api::<Tool>(), "gateway", "the Tool reconciled", |t| {
        t.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == Some(1))
    })
    .await;
    (ns, op, proxy)
}

/// The Rollout CRD is optional: without it `exo operator run` gets ready
/// and reconciles, and only the GitOps engine says it cannot start.
#[tokio::test]
async fn without_the_rollout_crd_the_operator_runs_without_the_engine() {
    let (_ns, op, proxy) = running_without("op-noro", "rollouts").await;
    eventually("the engine's refusal", Duration::from_secs(30), || async {
        op.log().contains("gitops engine not started").then_some(())
    })
    .await;
    let log = op.log();
    assert!(log.contains("Rollouts cannot be listed"), "{log}");
    assert!(!log.contains("gitops engine started"), "{log}");
    assert!(proxy.hidden_hits.load(Ordering::SeqCst) > 0, "{log}");
}

/// The AnalysisRun CRD is optional too: without it `exo operator run` gets
/// ready and reconciles; only the runs are not watched (nor streamed).
#[tokio::test]
async fn without_the_analysis_run_crd_the_operator_runs() {
    let (_ns, op, proxy) = running_without("op-noar", "analysisruns").await;
    let log = op.log();
    assert!(
        log.contains("AnalysisRuns cannot be listed")
            && log.contains("the waves' analysis runs are not streamed upstream"),
        "{log}"
    );
    assert!(proxy.hidden_hits.load(Ordering::SeqCst) > 0, "{log}");
}
