#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The tenants' Rollouts upstream (real processes, real apiserver): under
//! `exo operator connect` and `exo operator run` against `exo control-plane
//! serve`, without the Rollout CRD, and towards a control plane older than
//! the kind; the same for the waves' AnalysisRuns.

mod support;
mod upstream_support;

use std::time::Duration;

use exo::crd::{AnalysisRun, Rollout, RolloutSpec};

use exo::meta::ROLLOUT_NAME;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{TestNamespace, eventually};
use upstream_support::{
    Connector, ControlPlane, an_older_peer_gets_no, install_crds, streams_the_rest_without,
};

/// A tenant's Rollout as the engine writes it, with a status for
/// generation 1 (phase Progressing) and an inventory and settings the wire
/// form leaves out.
async fn create_rollout(ns: &TestNamespace) -> Rollout {
    let api = ns.api::<Rollout>();
    let spec = RolloutSpec {
        tenant: ns.name.clone(),
        wave: "canary".into(),
        release: "r1".into(),
        commit: "c1".into(),
        desired_hash: "h1".into(),
        settings: serde_json::from_value(json!({ "nodeTier": "gpu" })).unwrap(),
    };
    api.create(&PostParams::default(), &Rollout::new(ROLLOUT_NAME, spec))
        .await
        .unwrap();
    set_status(
        &api,
        json!({ "phase": "Progressing", "release": "r1", "observedGeneration": 1,
                "desiredHash": "h1", "appliedCommit": "c1",
                "currentStep": "configmaps-published",
                "steps": [{ "name": "configmaps-published", "owner": "operator", "state": "Running" }],
                "inventory": [{ "kind": "Agent", "name": "worker" }] }),
    )
    .await
}

async fn set_status(api: &Api<Rollout>, status: serde_json::Value) -> Rollout {
    api.patch_status(
        ROLLOUT_NAME,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap()
}

/// The control plane's wire form of the namespace's Rollout, once it is at
/// the apiserver's `resourceVersion` of `ro`.
async fn shown_rollout(
    cp: &ControlPlane,
    dep: &str,
    ro: &Rollout,
    what: &str,
) -> serde_json::Value {
    let (ns, rv) = (
        ro.metadata.namespace.clone(),
        ro.metadata.resource_version.clone(),
    );
    eventually(what, Duration::from_secs(40), || async {
        let (_, v) = cp.get(&format!("/api/v1/deployments/{dep}/resources"));
        v["resources"].as_array()?.iter().find_map(|r| {
            (r["kind"] == "Rollout"
                && r["namespace"].as_str() == ns.as_deref()
                && r["name"] == ROLLOUT_NAME
                && r["resourceVersion"].as_str() == rv.as_deref())
            .then(|| r.clone())
        })
    })
    .await
}

/// A Rollout read back from its wire form alone, to apply the one
/// staleness rule (`Rollout::current_status`) to what a dashboard sees.
fn from_wire(r: &serde_json::Value) -> Rollout {
    let mut ro = Rollout::new(
        ROLLOUT_NAME,
        serde_json::from_value(r["spec"].clone()).unwrap(),
    );
    ro.metadata.generation = r["generation"].as_i64();
    ro.status = Some(serde_json::from_value(r["status"].clone()).unwrap());
    ro
}

/// What every Rollout test checks, from the first listing on: the wire form
/// (generation, phase, saga status; no settings, no inventory), a status
/// write arriving as a delta (no snapshot in between), and a spec change
/// showing the old status as stale.
async fn rollout_streams(cp: &ControlPlane, dep: &str, ns: &TestNamespace, created: &Rollout) {
    let api = ns.api::<Rollout>();
    let r = shown_rollout(cp, dep, created, "the Rollout upstream").await;
    assert_eq!(r["uid"].as_str(), created.metadata.uid.as_deref(), "{r}");
    assert_eq!(r["generation"], 1, "{r}");
    assert_eq!(r["phase"], "Progressing", "{r}");
    assert_eq!(r["spec"]["desiredHash"], "h1", "{r}");
    assert_eq!(r["spec"]["wave"], "canary", "{r}");
    assert_eq!(r["status"]["observedGeneration"], 1, "{r}");
    assert_eq!(r["status"]["steps"][0]["state"], "Running", "{r}");
    assert!(r["spec"].get("settings").is_none(), "{r}");
    assert!(r["status"].get("inventory").is_none(), "{r}");
    assert!(from_wire(&r).current_status().is_some(), "current: {r}");

    let before = cp.deployment(dep);
    let verified = set_status(
        &api,
        json!({ "phase": "Verified", "currentStep": null,
                "steps": [{ "name": "configmaps-published", "owner": "operator", "state": "Done" }] }),
    )
    .await;
    let r = shown_rollout(cp, dep, &verified, "the status change upstream").await;
    assert_eq!(r["phase"], "Verified", "{r}");
    assert_eq!(r["status"]["steps"][0]["state"], "Done", "{r}");
    let after = cp.deployment(dep);
    assert_eq!(
        after["snapshots_completed"], before["snapshots_completed"],
        "the status came as a delta, not in a snapshot: {before} -> {after}"
    );
    assert!(
        after["deltas_applied"].as_u64() > before["deltas_applied"].as_u64(),
        "{before} -> {after}"
    );

    // A new spec: the generation moves on, the status (still for 1) is stale.
    let respec = api
        .patch(
            ROLLOUT_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "desiredHash": "h2", "release": "r2" } })),
        )
        .await
        .unwrap();
    assert_eq!(respec.metadata.generation, Some(2));
    let r = shown_rollout(cp, dep, &respec, "the spec change upstream").await;
    assert_eq!(r["generation"], 2, "{r}");
    assert_eq!(r["status"]["observedGeneration"], 1, "{r}");
    assert_eq!(r["phase"], "Verified", "{r}");
    assert!(from_wire(&r).current_status().is_none(), "stale: {r}");
}

#[tokio::test]
async fn operator_connect_streams_the_tenants_rollout() {
    let ns = TestNamespace::new("up-ro").await;
    install_crds(&ns.client).await;
    let created = create_rollout(&ns).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("ro-connect");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    rollout_streams(&cp, "ro-connect", &ns, &created).await;
    assert!(
        !c.log().contains("Rollouts cannot be listed"),
        "{}",
        c.log()
    );
}

/// Under `operator run` the Rollouts come from the operator's one Rollout
/// watch, which the (leading) GitOps engine reads too.
#[tokio::test]
async fn operator_run_streams_the_tenants_rollout_from_its_cache() {
    let ns = TestNamespace::new("up-ro-fed").await;
    install_crds(&ns.client).await;
    let created = create_rollout(&ns).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("ro-run");
    let op =
        support::operator::OperatorProcess::start_managed(&ns.name, "ro-a", &[], &cp.base, &token);
    op.wait_leader().await;
    rollout_streams(&cp, "ro-run", &ns, &created).await;
    let log = op.log();
    assert!(
        log.contains("streaming the operator's caches") && log.contains(r#"\"Rollout\""#),
        "the upstream reads the operator's Rollout cache:\n{log}"
    );
    assert!(
        log.contains("gitops engine started") && !log.contains("Rollouts cannot be listed"),
        "{log}"
    );
}

/// Without the Rollout CRD (the proxy answers the apiserver's own 404 for
/// it) `operator connect` streams every other kind: the first snapshot
/// does not wait for a kind it cannot list.
#[tokio::test]
async fn operator_connect_without_the_rollout_crd_streams_the_rest() {
    streams_the_rest_without("up-ro-none", "rollouts", "Rollout", "Rollouts").await;
}

#[tokio::test]
async fn a_control_plane_older_than_the_kind_gets_no_rollouts() {
    let ns = TestNamespace::new("up-ro-old").await;
    install_crds(&ns.client).await;
    create_rollout(&ns).await;
    let rollouts = ns.api::<Rollout>();
    let change = set_status(&rollouts, json!({ "phase": "Verified" }));
    an_older_peer_gets_no(&ns, "Rollout", "Rollouts", change).await;
}

// ------------------------------------------------------------ AnalysisRuns

/// A wave's run as the engine makes it, in the watched namespace.
fn analysis_run(name: &str) -> AnalysisRun {
    serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {"fleet": "prod", "wave": "canary", "release": "r1", "commit": "c1",
                 "tenants": [], "checks": [{"name": "crashloops", "interval": "1m",
                                            "builtin": "crashloops", "max": 0}]}
    }))
    .unwrap()
}

/// `operator connect` streams a run with its spec, its status and its
/// creation time; a status write arrives as a delta.
#[tokio::test]
async fn operator_connect_streams_analysis_runs_with_their_creation() {
    let ns = TestNamespace::new("up-ar").await;
    install_crds(&ns.client).await;
    let runs = ns.api::<AnalysisRun>();
    let made = runs
        .create(&PostParams::default(), &analysis_run("prod-canary-r1"))
        .await
        .unwrap();
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("ar");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    let shown = |phase: Option<&'static str>| {
        let cp = &cp;
        async move {
            let (_, v) = cp.get("/api/v1/deployments/ar/resources");
            v["resources"].as_array()?.iter().find_map(|r| {
                (r["kind"] == "AnalysisRun"
                    && r["name"] == "prod-canary-r1"
                    && r["phase"].as_str() == phase)
                    .then(|| r.clone())
            })
        }
    };
    let r = eventually("the run, without a status", Duration::from_secs(30), || {
        shown(None)
    })
    .await;
    let created = made.metadata.creation_timestamp.unwrap().0.to_string();
    assert_eq!(r["creationTimestamp"], json!(created), "{r}");
    assert_eq!(
        (&r["generation"], &r["spec"]["wave"]),
        (&json!(1), &json!("canary"))
    );
    runs.patch_status(
        "prod-canary-r1",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"observedGeneration": 1, "phase": "Running",
            "measurements": [{"check": "crashloops", "slot": 0, "at": "2026-11-02T10:00:00Z",
                              "value": 0.0, "verdict": "Pass"}]}}),
        ),
    )
    .await
    .unwrap();
    let r = eventually("the run, measured", Duration::from_secs(30), || {
        shown(Some("Running"))
    })
    .await;
    assert_eq!(r["status"]["measurements"][0]["verdict"], "Pass", "{r}");
    assert_eq!(r["status"]["observedGeneration"], 1, "{r}");
    assert!(
        !c.log().contains("AnalysisRuns cannot be listed"),
        "{}",
        c.log()
    );
}

/// Without the AnalysisRun CRD `operator connect` streams every other kind.
#[tokio::test]
async fn operator_connect_without_the_analysis_run_crd_streams_the_rest() {
    streams_the_rest_without("up-ar-none", "analysisruns", "AnalysisRun", "AnalysisRuns").await;
}

#[tokio::test]
async fn a_control_plane_older_than_the_kind_gets_no_analysis_runs() {
    let ns = TestNamespace::new("up-ar-old").await;
    install_crds(&ns.client).await;
    let runs = ns.api::<AnalysisRun>();
    runs.create(&PostParams::default(), &analysis_run("before"))
        .await
        .unwrap();
    let (pp, during) = (PostParams::default(), analysis_run("during"));
    let change = runs.create(&pp, &during);
    an_older_peer_gets_no(&ns, "AnalysisRun", "AnalysisRuns", change).await;
}
