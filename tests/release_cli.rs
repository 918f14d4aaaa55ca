#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo release suspend|resume`, `status` and `plan --prune` as a user runs
//! them: the real binary against the real apiserver, on Fleets and Rollouts
//! made by hand in fresh namespaces (statuses written through the status
//! subresource), with no operator running, so what the CLI reads is exactly
//! what the test wrote.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use exo::crd::{Fleet, FleetSpec, Rollout, RolloutSpec};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{TestNamespace, copy_tree};

const EXO: &str = env!("CARGO_BIN_EXE_exo");

fn exo(dir: &Path, args: &[&str]) -> Output {
    Command::new(EXO)
        .args(args)
        .current_dir(dir)
        .env("KUBECONFIG", &support::env().kubeconfig)
        .output()
        .expect("run exo")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_of(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}

async fn create_fleet(ns: &TestNamespace, name: &str, prune: bool) {
    let mut f = Fleet::new(
        name,
        FleetSpec {
            url: "git://127.0.0.1:1/none.git".into(),
            branch: "main".into(),
            interval: "1h".into(),
            allow_insecure: true,
            prune,
            reverify_interval: "10m".into(),
            ..FleetSpec::default()
        },
    );
    f.metadata.namespace = Some(ns.name.clone());
    ns.api::<Fleet>()
        .create(&PostParams::default(), &f)
        .await
        .expect("create Fleet");
}

async fn fleet(ns: &TestNamespace, name: &str) -> Fleet {
    ns.api::<Fleet>().get(name).await.expect("get Fleet")
}

/// Creates the Rollout `release` of tenant `ns` (its namespace), asking for
/// `release` with desired hash `hash`.
async fn create_rollout(ns: &TestNamespace, wave: &str, release: &str, hash: &str) -> Rollout {
    let mut r = Rollout::new(
        "release",
        RolloutSpec {
            tenant: ns.name.clone(),
            wave: wave.into(),
            release: release.into(),
            commit: "0123456789abcdef0123456789abcdef01234567".into(),
            desired_hash: hash.into(),
            settings: Default::default(),
        },
    );
    r.metadata.namespace = Some(ns.name.clone());
    ns.api::<Rollout>()
        .create(&PostParams::default(), &r)
        .await
        .expect("create Rollout")
}

/// Writes `status` (merged over a Verified one for `release`) through the
/// status subresource, computed for generation `generation` and `hash`.
async fn write_status(
    ns: &TestNamespace,
    generation: i64,
    hash: &str,
    release: &str,
    extra: Value,
) {
    let mut status = json!({
        "phase": "Verified",
        "release": release,
        "observedGeneration": generation,
        "desiredHash": hash,
        "appliedCommit": "0123456789abcdef0123456789abcdef01234567",
        "verifiedAt": "2026-01-01T00:00:00Z",
        "steps": [{"name": "configmaps-published", "owner": "operator", "state": "Done"}],
    });
    if let (Some(s), Some(x)) = (status.as_object_mut(), extra.as_object()) {
        for (k, v) in x {
            s.insert(k.clone(), v.clone());
        }
    }
    ns.api::<Rollout>()
        .patch_status(
            "release",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("patch Rollout status");
}

/// The tenant entry of `exo release status -o json` for namespace `ns`.
fn tenant_of<'a>(status: &'a Value, ns: &str) -> &'a Value {
    status["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["namespace"] == ns)
        .unwrap_or_else(|| panic!("no tenant {ns} in {status:#}"))
}

#[tokio::test]
async fn suspend_and_resume_patch_the_fleet_and_refuse_unclear_input() {
    let ns = TestNamespace::new("rcli-sus").await;
    support::install_crds(&ns.client).await;
    create_fleet(&ns, "alpha", true).await;
    let dir = support::scratch();
    let here = dir.path();
    let id = format!("{}/alpha", ns.name);

    // The only Fleet in the namespace, without --fleet.
    let o = exo(here, &["release", "suspend", "-n", &ns.name]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("suspended Fleet {id}")),
        "{}",
        text(&o)
    );
    assert!(fleet(&ns, "alpha").await.spec.suspend);
    let o = exo(here, &["release", "suspend", "-n", &ns.name]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("Fleet {id} is already suspended")),
        "{}",
        text(&o)
    );

    // Status says so, in the table and in JSON.
    let status = json_of(&exo(here, &["release", "status", "-o", "json"]));
    let mine = status["fleets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["namespace"] == ns.name.as_str())
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(mine["suspended"], true, "{mine:#}");
    assert_eq!(mine["ready"], Value::Null, "never synced: {mine:#}");
    let o = exo(here, &["release", "status"]);
    assert!(
        text(&o).contains(&format!(
            "Fleet {id}: git://127.0.0.1:1/none.git (main), suspended"
        )),
        "{}",
        text(&o)
    );

    // Resume by name: suspend is off and a sync is requested.
    let o = exo(
        here,
        &["release", "resume", "--fleet", "alpha", "-n", &ns.name],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("resumed Fleet {id}")),
        "{}",
        text(&o)
    );
    let f = fleet(&ns, "alpha").await;
    assert!(!f.spec.suspend);
    assert!(
        f.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(exo::meta::ANNOTATION_SYNC_REQUESTED)
    );

    // Two Fleets: which one must be said; an unknown one is refused.
    create_fleet(&ns, "beta", true).await;
    let o = exo(here, &["release", "suspend", "-n", &ns.name]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "exo release suspend: 2 Fleets in namespace \"{}\": {id}, {}/beta; say which with --fleet NAME -n NAMESPACE",
            ns.name, ns.name
        )),
        "{}",
        text(&o)
    );
    let o = exo(
        here,
        &["release", "suspend", "--fleet", "nope", "-n", &ns.name],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "exo release suspend: no Fleet named \"nope\" in namespace \"{}\" (Fleets: {id}, {}/beta)",
            ns.name, ns.name
        )),
        "{}",
        text(&o)
    );
    assert!(!fleet(&ns, "alpha").await.spec.suspend);
    assert!(!fleet(&ns, "beta").await.spec.suspend);
}

#[tokio::test]
async fn status_reports_stale_and_in_sync_from_the_status_the_spec_was_computed_for() {
    let client = support::client().await;
    support::install_crds(&client).await;
    let synced = TestNamespace::new("rcli-ok").await;
    let stale = TestNamespace::new("rcli-stale").await;
    let drifting = TestNamespace::new("rcli-drift").await;
    let dir = support::scratch();
    let here = dir.path();

    let r = create_rollout(&synced, "canary", "2026.11.1", "h2").await;
    let generation = r.metadata.generation.unwrap();
    write_status(
        &synced,
        generation,
        "h2",
        "2026.11.1",
        json!({"lastLiveCheck": {"at": "2026-01-01T00:00:00Z", "pods": 2, "ok": true}}),
    )
    .await;
    // Verified on the release, but for the previous desired hash.
    let r = create_rollout(&stale, "low-risk", "2026.11.1", "h2").await;
    write_status(
        &stale,
        r.metadata.generation.unwrap(),
        "h1",
        "2026.11.1",
        json!({}),
    )
    .await;
    let r = create_rollout(&drifting, "fleet", "2026.11.1", "h2").await;
    write_status(
        &drifting,
        r.metadata.generation.unwrap(),
        "h2",
        "2026.11.1",
        json!({
            "conditions": [{"type": "ContentDrift", "status": "True", "reason": "Mismatch",
                "message": "pod agent-a: AGENTS.md differs", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "pendingPrunes": [
                {"kind": "Tool", "name": "old", "uid": "2", "pruneBlocked": "finalizer example.com/hold"}
            ],
            "lastDrift": {"at": "2026-01-01T00:00:00Z", "object": "Agent/a", "fields": ["spec.runtime.image"]},
        }),
    )
    .await;

    let status = json_of(&exo(here, &["release", "status", "-o", "json"]));
    let t = tenant_of(&status, &synced.name);
    assert_eq!(t["state"]["phase"], "Verified", "{t:#}");
    assert_eq!(t["inSync"], true, "{t:#}");
    assert_eq!(t["appliedRelease"], "2026.11.1", "{t:#}");
    assert_eq!(
        t["appliedCommit"], "0123456789abcdef0123456789abcdef01234567",
        "{t:#}"
    );
    assert_eq!(t["lastLiveCheck"]["ok"], true, "{t:#}");

    let t = tenant_of(&status, &stale.name);
    assert_eq!(t["state"]["phase"], "Stale", "{t:#}");
    assert_eq!(t["state"]["statusHash"], "h1", "{t:#}");
    assert_eq!(t["state"]["desiredHash"], "h2", "{t:#}");
    assert_eq!(t["inSync"], false, "{t:#}");
    assert_eq!(t["outOfSync"], json!(["stale"]), "{t:#}");
    assert_eq!(
        t["appliedRelease"],
        Value::Null,
        "a stale status applied nothing we know of: {t:#}"
    );

    let t = tenant_of(&status, &drifting.name);
    assert_eq!(t["state"]["phase"], "Verified", "{t:#}");
    assert_eq!(
        t["outOfSync"],
        json!(["contentDrift", "pendingPrune"]),
        "{t:#}"
    );
    assert_eq!(t["contentDrift"], "pod agent-a: AGENTS.md differs", "{t:#}");
    assert_eq!(
        t["pendingPrunes"],
        json!([{"kind": "Tool", "name": "old", "reason": "finalizer example.com/hold"}]),
        "{t:#}"
    );
    assert_eq!(t["lastDrift"]["object"], "Agent/a", "{t:#}");

    // A new spec (another desired hash) makes the verified status stale.
    synced
        .api::<Rollout>()
        .patch(
            "release",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"desiredHash": "h3"}})),
        )
        .await
        .unwrap();
    let status = json_of(&exo(here, &["release", "status", "-o", "json"]));
    let t = tenant_of(&status, &synced.name);
    assert_eq!(t["state"]["phase"], "Stale", "{t:#}");
    assert_eq!(t["state"]["statusGeneration"], generation, "{t:#}");
    assert_eq!(t["state"]["generation"], generation + 1, "{t:#}");

    // The table: one row each, and why not in sync below it.
    let o = exo(here, &["release", "status"]);
    let table = text(&o);
    assert_eq!(o.status.code(), Some(0), "{table}");
    let row = |ns: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(ns))
            .unwrap_or_else(|| panic!("no row for {ns} in\n{table}"))
            .to_owned()
    };
    assert!(row(&stale.name).contains("no: stale"), "{table}");
    assert!(row(&synced.name).contains("no: stale"), "{table}");
    assert!(
        row(&drifting.name).contains("Verified 1/1")
            && row(&drifting.name).contains("no: drift, prune"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "fleet/{}: 1 pending prune(s): Tool/old (finalizer example.com/hold)",
            drifting.name
        )),
        "{table}"
    );
    assert!(
        table.contains(&format!("fleet/{}: drift reverted", drifting.name))
            && table.contains("Agent/a (spec.runtime.image)"),
        "{table}"
    );
}

/// A checkout whose tenant `tenant` has the example acme's manifests
/// (Agent assistant, Tools broker and router), minus `drop`.
fn checkout(tenant: &str, drop: &str) -> tempfile::TempDir {
    let dir = support::scratch();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for d in ["releases", "configmaps"] {
        copy_tree(&repo.join(d), &dir.path().join(d));
    }
    copy_tree(
        &repo.join("manifests/acme"),
        &dir.path().join("manifests").join(tenant),
    );
    std::fs::remove_file(dir.path().join("manifests").join(tenant).join(drop)).unwrap();
    dir
}

/// `exo release plan 2026.11.1 --prune -o json` in `root`, and the part
/// of its prune plan about `tenant`.
fn prune_plan_of(root: &std::path::Path, tenant: &str) -> (Value, Value) {
    let plan = json_of(&exo(
        root,
        &["release", "plan", "2026.11.1", "--prune", "-o", "json"],
    ));
    let mine = plan["prune"]["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == tenant)
        .cloned()
        .unwrap_or_else(|| panic!("{plan:#}"));
    (plan, mine)
}

#[tokio::test]
async fn plan_prune_lists_the_inventory_the_checkout_no_longer_has() {
    let client = support::client().await;
    support::install_crds(&client).await;
    let tenant = TestNamespace::new("rcli-prune").await;
    let fleet_ns = TestNamespace::new("rcli-prunefl").await;
    create_fleet(&fleet_ns, "kept", false).await;
    let r = create_rollout(&tenant, "fleet", "2026.11.0", "h1").await;
    write_status(
        &tenant,
        r.metadata.generation.unwrap(),
        "h1",
        "2026.11.0",
        json!({"inventory": [
            {"kind": "Agent", "name": "assistant", "uid": "1"},
            {"kind": "Tool", "name": "broker", "uid": "2"},
            {"kind": "Tool", "name": "router", "uid": "3"},
            {"kind": "AgentFS", "name": "scratch", "uid": "4", "pruneBlocked": "mounted by agent assistant"}
        ]}),
    )
    .await;
    let co = checkout(&tenant.name, "router.yaml");
    let root = co.path();

    let (status, mine) = prune_plan_of(root, &tenant.name);
    assert_eq!(status["release"], "2026.11.1", "the plan is still there");
    assert_eq!(
        mine["prune"],
        json!([
            {"kind": "Tool", "name": "router", "blocked": null},
            {"kind": "AgentFS", "name": "scratch", "blocked": "mounted by agent assistant"}
        ]),
        "{mine:#}"
    );
    assert_eq!(
        mine["legacyInventory"], true,
        "from the status an older operator wrote: {mine:#}"
    );
    let fl = status["prune"]["fleets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["namespace"] == fleet_ns.name.as_str())
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(fl["prune"], false);

    let o = exo(root, &["release", "plan", "2026.11.1", "--prune"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(
        t.contains(&format!(
            "Fleet {}/kept: pruning is off (spec.prune: false): nothing below is deleted",
            fleet_ns.name
        )),
        "{t}"
    );
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(tenant.name.as_str()))
        .filter(|l| l.contains("Tool  ") || l.contains("AgentFS"))
        .collect();
    assert_eq!(rows.len(), 2, "{t}");
    assert!(rows[0].contains("router"), "{t}");
    assert!(
        rows[1].contains("scratch") && rows[1].contains("pending: mounted by agent assistant"),
        "{t}"
    );

    // Once the tenant has an Inventory (what the operator writes), it is
    // what counts, not the status.
    let mut inv = exo::crd::Inventory::new(
        exo::meta::ROLLOUT_NAME,
        exo::crd::InventorySpec {
            entries: vec![exo::crd::InventoryEntry {
                kind: exo::crd::InventoryKind::Agent,
                name: "retired-bot".into(),
                uid: "9".into(),
                prune_blocked: None,
            }],
        },
    );
    inv.metadata.namespace = Some(tenant.name.clone());
    kube::Api::<exo::crd::Inventory>::namespaced(client.clone(), &tenant.name)
        .create(&kube::api::PostParams::default(), &inv)
        .await
        .unwrap();
    let (_, mine) = prune_plan_of(root, &tenant.name);
    assert_eq!(
        mine["prune"],
        json!([{"kind": "Agent", "name": "retired-bot", "blocked": null}]),
        "{mine:#}"
    );
    assert_eq!(mine["legacyInventory"], false, "{mine:#}");

    // Without --prune the plan never reads the cluster.
    let o = Command::new(EXO)
        .args(["release", "plan", "2026.11.1"])
        .current_dir(root)
        .env("KUBECONFIG", root.join("no-such-kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = Command::new(EXO)
        .args(["release", "plan", "2026.11.1", "--prune"])
        .current_dir(root)
        .env("KUBECONFIG", root.join("no-such-kubeconfig"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot reach the cluster"),
        "{}",
        text(&o)
    );
}
