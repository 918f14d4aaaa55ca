#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The tenants' lifecycle sagas (`Tenant`, cluster-scoped) upstream, real
//! processes and a real apiserver: under `exo operator connect` and `exo
//! operator run` against `exo control-plane serve`, only the Tenants of the
//! operator's Fleet namespace, without the Tenant CRD, and towards a control
//! plane older than the kind.

mod support;
mod upstream_support;

use std::time::Duration;

use exo::crd::tenant::{Tenant, TenantResourceSpec};
use exo::meta::LABEL_FLEET_NAMESPACE;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{TestNamespace, eventually};
use upstream_support::{
    Connector, ControlPlane, an_older_peer_gets_no, install_crds, streams_the_rest_without,
};

/// A Tenant's spec as the sync writes it, with settings the wire form
/// leaves out.
fn spec() -> TenantResourceSpec {
    TenantResourceSpec {
        settings: serde_json::from_value(json!({ "nodeTier": "gpu", "wave": "canary" })).unwrap(),
        commit: Some("c1".into()),
        ..Default::default()
    }
}

/// Tenants are cluster-scoped: the namespace of the test does not take them
/// along, so each test deletes its own when it ends, also on a panic.
struct Tenants {
    names: Vec<String>,
}

impl Drop for Tenants {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.names);
        support::cleanup(move |client| async move {
            let api = Api::<Tenant>::all(client);
            for n in names {
                let _ = api.delete(&n, &DeleteParams::default()).await;
            }
        });
    }
}

/// Creates Tenant `name` of the Fleets in `fleet_ns` with `status`.
async fn create_tenant(
    api: &Api<Tenant>,
    cleanup: &mut Tenants,
    name: &str,
    fleet_ns: &str,
    status: Value,
) -> Tenant {
    let mut t = Tenant::new(name, spec());
    t.metadata.labels = Some([(LABEL_FLEET_NAMESPACE.to_owned(), fleet_ns.to_owned())].into());
    api.create(&PostParams::default(), &t).await.unwrap();
    cleanup.names.push(name.to_owned());
    set_status(api, name, status).await
}

async fn set_status(api: &Api<Tenant>, name: &str, status: Value) -> Tenant {
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .unwrap()
}

/// The control plane's wire form of Tenant `t`, once it is at the
/// apiserver's `resourceVersion` of `t`.
async fn shown_tenant(cp: &ControlPlane, dep: &str, t: &Tenant, what: &str) -> Value {
    let (name, rv) = (
        t.metadata.name.clone().unwrap(),
        t.metadata.resource_version.clone().unwrap(),
    );
    eventually(what, Duration::from_secs(40), || async {
        let (_, v) = cp.get(&format!("/api/v1/deployments/{dep}/resources"));
        v["resources"].as_array()?.iter().find_map(|r| {
            (r["kind"] == "Tenant"
                && r["namespace"] == ""
                && r["name"] == name.as_str()
                && r["resourceVersion"] == rv.as_str())
            .then(|| r.clone())
        })
    })
    .await
}

/// A saga in progress: the first step done, the second running.
fn onboarding() -> Value {
    json!({ "phase": "Onboarding", "operation": "onboard", "observedGeneration": 1,
            "desiredHash": "h1", "currentStep": "quota-applied", "message": "onboarding",
            "activeSettings": { "nodeTier": "gpu" },
            "steps": [
                { "name": "namespace-created", "owner": "operator", "state": "Done" },
                { "name": "quota-applied", "owner": "operator", "state": "Running",
                  "message": "waiting for the quota" }] })
}

/// What every Tenant test checks from the first listing on: the wire form
/// (empty namespace, generation, phase, the saga's steps with owners and
/// states; no settings), a status write arriving as a delta (no snapshot
/// in between), and the deletion removing it.
async fn tenant_streams(
    cp: &ControlPlane,
    dep: &str,
    api: &Api<Tenant>,
    created: &Tenant,
    next: Value,
) {
    let name = created.metadata.name.clone().unwrap();
    let r = shown_tenant(cp, dep, created, "the Tenant upstream").await;
    let status = created.status.clone().unwrap();
    assert_eq!(r["uid"].as_str(), created.metadata.uid.as_deref(), "{r}");
    assert_eq!(r["generation"], 1, "{r}");
    assert_eq!(r["phase"], json!(status.phase), "{r}");
    assert_eq!(r["status"]["phase"], r["phase"], "{r}");
    assert_eq!(r["status"]["operation"], "onboard", "{r}");
    assert_eq!(r["status"]["observedGeneration"], 1, "{r}");
    assert_eq!(r["spec"]["commit"], "c1", "{r}");
    assert!(r["spec"].get("settings").is_none(), "{r}");
    assert!(r["status"].get("activeSettings").is_none(), "{r}");
    let labels = created.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        r["labels"][LABEL_FLEET_NAMESPACE],
        labels[LABEL_FLEET_NAMESPACE].as_str(),
        "{r}"
    );
    let steps = r["status"]["steps"].as_array().expect("the saga's steps");
    assert_eq!(steps.len(), status.steps.len(), "{r}");
    for (wire, step) in steps.iter().zip(&status.steps) {
        assert_eq!(wire["name"], step.name.as_str(), "{r}");
        assert_eq!(wire["owner"], step.owner.as_str(), "{r}");
        assert_eq!(wire["state"], json!(step.state), "{r}");
    }

    let before = cp.deployment(dep);
    let changed = set_status(api, &name, next).await;
    let r = shown_tenant(cp, dep, &changed, "the status change upstream").await;
    let status = changed.status.clone().unwrap();
    assert_eq!(r["phase"], json!(status.phase), "{r}");
    assert_eq!(r["status"]["message"], json!(status.message), "{r}");
    assert_eq!(
        r["status"]["currentStep"],
        json!(status.current_step),
        "{r}"
    );
    let states: Vec<&Value> = r["status"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["state"])
        .collect();
    assert!(states.iter().all(|s| *s == "Done"), "{r}");
    let after = cp.deployment(dep);
    assert_eq!(
        after["snapshots_completed"], before["snapshots_completed"],
        "the status came as a delta, not in a snapshot: {before} -> {after}"
    );
    assert!(
        after["deltas_applied"].as_u64() > before["deltas_applied"].as_u64(),
        "{before} -> {after}"
    );

    api.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually(
        "the deleted Tenant to leave the control plane",
        Duration::from_secs(40),
        || async { (!cp.resources(dep, "Tenant").iter().any(|(n, _)| *n == name)).then_some(()) },
    )
    .await;
}

#[tokio::test]
async fn operator_connect_streams_the_tenants_saga_of_its_fleet_namespace() {
    let ns = TestNamespace::new("up-tn").await;
    install_crds(&ns.client).await;
    let api = Api::<Tenant>::all(ns.client.clone());
    let mut cleanup = Tenants { names: Vec::new() };
    let created = create_tenant(&api, &mut cleanup, &ns.name, &ns.name, onboarding()).await;
    // Another Fleet namespace's Tenant: not this operator's to stream.
    let other = format!("{}-other", ns.name);
    create_tenant(
        &api,
        &mut cleanup,
        &other,
        &format!("{}-elsewhere", ns.name),
        onboarding(),
    )
    .await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("tn-connect");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    shown_tenant(&cp, "tn-connect", &created, "the Tenant upstream").await;
    assert_eq!(
        cp.resources("tn-connect", "Tenant"),
        [(
            ns.name.clone(),
            created.metadata.resource_version.clone().unwrap()
        )],
        "only the Tenant of the operator's namespace"
    );
    let active = json!({ "phase": "Active", "currentStep": null, "message": "active",
        "steps": [
            { "name": "namespace-created", "owner": "operator", "state": "Done" },
            { "name": "quota-applied", "owner": "operator", "state": "Done" }] });
    tenant_streams(&cp, "tn-connect", &api, &created, active).await;
    assert!(cp.resources("tn-connect", "Tenant").is_empty());
    assert!(!c.log().contains("Tenants cannot be listed"), "{}", c.log());
}

/// Under `operator run` the Tenants come from the operator's one shared
/// Tenant watch. The leading tenant engine drives the same Tenant, so its
/// saga is complete for its spec (the engine has nothing to do and writes
/// nothing): every status write here is the test's.
#[tokio::test]
async fn operator_run_streams_the_tenants_saga_from_its_cache() {
    let ns = TestNamespace::new("up-tn-fed").await;
    install_crds(&ns.client).await;
    let api = Api::<Tenant>::all(ns.client.clone());
    let mut cleanup = Tenants { names: Vec::new() };
    let hash = exo::tenant::plan::settings_hash(&spec());
    let steps = json!([
        { "name": "namespace-created", "owner": "operator", "state": "Done" },
        { "name": "quota-applied", "owner": "operator", "state": "Done" }]);
    let created = create_tenant(
        &api,
        &mut cleanup,
        &ns.name,
        &ns.name,
        json!({ "phase": "Active", "operation": "onboard", "observedGeneration": 1,
                "desiredHash": hash, "message": "active", "steps": steps }),
    )
    .await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("tn-run");
    let op =
        support::operator::OperatorProcess::start_managed(&ns.name, "tn-a", &[], &cp.base, &token);
    op.wait_leader().await;
    let next = json!({ "message": "checked again", "steps": steps });
    tenant_streams(&cp, "tn-run", &api, &created, next).await;
    let log = op.log();
    assert!(
        log.contains("streaming the operator's caches") && log.contains(r#"\"Tenant\""#),
        "the upstream reads the operator's Tenant cache:\n{log}"
    );
    assert!(!log.contains("Tenants cannot be listed"), "{log}");
}

/// Without the Tenant CRD (the proxy answers the apiserver's own 404 for
/// it) `operator connect` streams every other kind: the first snapshot
/// does not wait for a kind it cannot list.
#[tokio::test]
async fn operator_connect_without_the_tenant_crd_streams_the_rest() {
    streams_the_rest_without("up-tn-none", "tenants", "Tenant", "Tenants").await;
}

#[tokio::test]
async fn a_control_plane_older_than_the_kind_gets_no_tenants() {
    let ns = TestNamespace::new("up-tn-old").await;
    install_crds(&ns.client).await;
    let api = Api::<Tenant>::all(ns.client.clone());
    let mut cleanup = Tenants { names: Vec::new() };
    create_tenant(&api, &mut cleanup, &ns.name, &ns.name, onboarding()).await;
    let change = set_status(&api, &ns.name, json!({ "phase": "Active" }));
    an_older_peer_gets_no(&ns, "Tenant", "Tenants", change).await;
}

/// The Tenant `name`, once `check` holds (panics with the operator's log
/// after `secs`).
async fn tenant_when(
    api: &Api<Tenant>,
    name: &str,
    what: &str,
    op: &support::fleet::Operator,
    secs: u64,
    check: impl Fn(&Tenant) -> bool,
) -> Tenant {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(Some(t)) = api.get_opt(name).await
            && check(&t)
        {
            return t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Tenant {name} {what}: {:#?}\n{}",
            api.get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|t| t.status),
            support::fleet::tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Managed, an onboarding registers the tenant with the control plane
/// (its identity step) and then its support lane, each step Done only
/// once the control plane acknowledged storing the record, and the acks
/// are kept in the Tenant's status; the control plane lists the tenant.
/// Offboarding unregisters the lane and withdraws the tenant last.
#[tokio::test]
async fn a_managed_tenant_is_registered_with_its_lane_and_withdrawn_when_offboarded() {
    use exo::crd::tenant::TenantPhase;
    use support::fleet::{Fixture, Operator, example_files};
    let mut files = example_files("ur");
    let path = "manifests/ur-initech/tenant.yaml";
    let text = String::from_utf8(files[path].clone()).unwrap()
        + "  support: {lane: initech-desk, contacts: [\"ops@initech.test\"]}\n";
    files.insert(path.into(), text.into_bytes());
    let folder: Vec<String> = files
        .keys()
        .filter(|k| k.starts_with("manifests/ur-initech/"))
        .cloned()
        .collect();
    let fx = Fixture::new("ur", files).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("ur");
    let op = Operator::start_env(
        &fx.ns.name,
        &support::env().kubeconfig,
        "ur-a",
        &[],
        &[
            ("AUTONOMIC_MANAGED", "true"),
            ("AUTONOMIC_BASE_URL", &cp.base),
            ("AUTONOMIC_AUTH_TOKEN", &token),
        ],
    );
    let api = Api::<Tenant>::all(fx.ns.client.clone());
    let name = "ur-initech";
    let t = tenant_when(&api, name, "Active", &op, 150, |t| {
        t.status
            .as_ref()
            .is_some_and(|s| s.phase == Some(TenantPhase::Active))
    })
    .await;
    let st = t.status.unwrap();
    let names: Vec<&str> = st.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "identity-enrolled",
            "state-provisioned",
            "rollout-verified",
            "support-registered",
            "status-projected"
        ]
    );
    let acks = st.control_plane.expect("the control plane's acks");
    let enrolled = acks.enrollment.expect("the enrollment's ack");
    let lane = acks.support_lane.expect("the lane's ack");
    assert_eq!(enrolled.record, "enrolled");
    assert_eq!(lane.record, "lane initech-desk");
    assert_eq!(Some(enrolled.generation), t.metadata.generation);
    assert_eq!(enrolled.id.len(), 32);
    // What the control plane stored.
    let (code, body) = cp.get("/api/v1/deployments/ur/tenants");
    assert_eq!(code, 200, "{body}");
    let row = body["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tenant"] == name)
        .unwrap_or_else(|| panic!("{name} is not listed: {body}"))
        .clone();
    assert_eq!(row["enrolled"], true, "{row}");
    assert_eq!(row["support"]["lane"], "initech-desk", "{row}");
    assert_eq!(
        row["support"]["contacts"],
        json!(["ops@initech.test"]),
        "{row}"
    );
    // Every tenant of the fleet is enrolled, not only the one with a lane.
    for other in ["ur-acme", "ur-globex", "ur-platform", "ur-umbrella"] {
        tenant_when(&api, other, "Active", &op, 150, |t| {
            t.status
                .as_ref()
                .is_some_and(|s| s.phase == Some(TenantPhase::Active))
        })
        .await;
    }
    let (_, body) = cp.get("/api/v1/deployments/ur/tenants");
    assert_eq!(body["count"], 5, "{body}");
    assert!(
        body["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["enrolled"] == true),
        "{body}"
    );

    // Offboarding: the folder goes from git; the namespace is let go at
    // once; the lane is unregistered and the tenant withdrawn.
    let gone: Vec<(&str, Option<&[u8]>)> = folder.iter().map(|p| (p.as_str(), None)).collect();
    fx.push(&gone, "offboard initech");
    fx.request_sync().await;
    tenant_when(&api, name, "offboarding", &op, 60, |t| t.spec.offboarding).await;
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {exo::meta::ANNOTATION_OFFBOARD_CONFIRM: "true"}}}),
        ),
    )
    .await
    .unwrap();
    let t = tenant_when(&api, name, "Offboarded", &op, 150, |t| {
        t.status
            .as_ref()
            .is_some_and(|s| s.phase == Some(TenantPhase::Offboarded))
    })
    .await;
    let st = t.status.unwrap();
    let names: Vec<&str> = st.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "rollout-stopped",
            "keys-revoked",
            "support-unregistered",
            "data-retained",
            "namespace-deleted",
            "enrollment-withdrawn",
            "status-projected"
        ]
    );
    let acks = st.control_plane.unwrap();
    assert_eq!(acks.enrollment.unwrap().record, "withdrawn");
    assert_eq!(acks.support_lane.unwrap().record, "no lane");
    let (_, body) = cp.get("/api/v1/deployments/ur/tenants");
    let row = body["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tenant"] == name)
        .unwrap()
        .clone();
    assert_eq!(row["enrolled"], false, "{row}");
    assert!(row["support"].is_null(), "{row}");
}
