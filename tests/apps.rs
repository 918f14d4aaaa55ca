#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Apps end to end against the real apiserver, the hostPath provisioner
//! (which completes an expansion about 2 s after a PVC grows), kwok and
//! the real operator, with `exo fs` on its direct route: an App with a
//! database gets two PVCs and a pod with two containers; both volumes
//! grow through the CLI; a shrink is refused by the shipped admission
//! policy (`deploy/app-admission.yaml`, installed by `install_crds`) naming
//! the field; delete takes both volumes along, or with `retain` keeps them
//! listed as `Retained`; bad input is refused by name; a restarted
//! operator over a settled App writes nothing; the same commands through
//! the control plane (`--deployment`), and only to an operator that
//! advertises `app-storage`.

mod support;
mod upstream_support;

use exo::crd::{AgentFSPhase, App, AppPhase, AppVolumeKind};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use std::time::Duration;

use support::fs::{exo_fs, json, ok, refused};
use support::operator::{
    OperatorProcess, create, restricted_namespace, the_pod, wait_for, wait_gone, wait_no_pod,
};
use support::{env, eventually};

const WORKSPACE: &str = "app-workspace-shop";
const DATABASE: &str = "app-database-shop";

fn app(name: &str, database: bool, retain: bool) -> App {
    let mut spec = serde_json::json!({
        "image": "example.invalid/shop:1",
        "workspace": { "size": "1Gi", "maxSize": "4Gi" },
        "retain": retain,
    });
    if database {
        spec["database"] = serde_json::json!({"postgres": {
            "image": "example.invalid/postgres:16", "size": "1Gi", "maxSize": "8Gi"
        }});
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
        "metadata": { "name": name }, "spec": spec
    }))
    .expect("App fixture")
}

fn request(p: &PersistentVolumeClaim) -> String {
    p.spec
        .as_ref()
        .unwrap()
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()["storage"]
        .0
        .clone()
}

fn owners(p: &PersistentVolumeClaim) -> Vec<String> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

/// The App is Running, its status computed for its current generation,
/// and `kind`'s volume is bound at `size` requested and provisioned.
fn settled(a: &App, sizes: &[(AppVolumeKind, &str)]) -> bool {
    let Some(st) = a.status.as_ref() else {
        return false;
    };
    st.phase == Some(AppPhase::Running)
        && st.observed_generation == a.metadata.generation
        && sizes.iter().all(|(kind, size)| {
            st.volume(*kind).is_some_and(|v| {
                v.phase == Some(AgentFSPhase::Bound)
                    && v.requested.as_ref().map(|q| q.0.as_str()) == Some(*size)
                    && v.provisioned.as_ref().map(|q| q.0.as_str()) == Some(*size)
            })
        })
}

/// The `exo fs list --apps -o json` rows of `app`: (volume, phase, size,
/// maxSize).
fn listed(ns: &str, app: &str) -> Vec<(String, String, String, String)> {
    let v = json(&exo_fs(ns, &["list", "--apps", "-o", "json"]));
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["app"] == app)
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("volume"), s("phase"), s("size"), s("maxSize"))
        })
        .collect()
}

fn row(volume: &str, phase: &str, size: &str, max: &str) -> (String, String, String, String) {
    (volume.into(), phase.into(), size.into(), max.into())
}

#[tokio::test]
async fn an_app_with_a_database_gets_two_volumes_and_a_sidecar_grows_and_goes() {
    let ns = restricted_namespace("apps").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let apps = ns.api::<App>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    let pods = ns.api::<Pod>();
    create(&apps, &app("shop", true, false)).await;
    let both = [
        (AppVolumeKind::Workspace, "1Gi"),
        (AppVolumeKind::Database, "1Gi"),
    ];
    wait_for(&apps, "shop", "Running with both volumes bound", |a| {
        settled(a, &both)
    })
    .await;

    // Two PVCs, owned by the App.
    for name in [WORKSPACE, DATABASE] {
        let p = pvcs.get(name).await.unwrap();
        assert_eq!(owners(&p), ["App/shop"], "{name}");
        assert_eq!(request(&p), "1Gi", "{name}");
    }
    // One pod, owned, with the app and the Postgres sidecar, each with
    // its own volume.
    let pod = the_pod(&pods, "app", "shop").await;
    let spec = pod.spec.clone().unwrap();
    let containers: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(containers, ["app", "postgres"]);
    let claim_of = |container: &str, path: &str| {
        let c = spec
            .containers
            .iter()
            .find(|c| c.name == container)
            .unwrap();
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == path)?;
        let v = spec.volumes.iter().flatten().find(|v| v.name == m.name)?;
        v.persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.clone())
    };
    assert_eq!(claim_of("app", "/workspace").as_deref(), Some(WORKSPACE));
    assert_eq!(
        claim_of("postgres", "/var/lib/postgresql/data").as_deref(),
        Some(DATABASE)
    );
    assert_eq!(owners_of_pod(&pod), ["App/shop"]);

    // Listed with both volumes.
    assert_eq!(
        listed(&ns.name, "shop"),
        [
            row("workspace", "Bound", "1Gi", "4Gi"),
            row("database", "Bound", "1Gi", "8Gi")
        ]
    );

    // Grow both through the CLI; the PVCs follow, and so does the status.
    let out = ok(&exo_fs(
        &ns.name,
        &[
            "resize",
            "app/shop",
            "--workspace",
            "2Gi",
            "--database",
            "3Gi",
        ],
    ));
    assert!(
        out.contains("workspace") && out.contains("database"),
        "{out}"
    );
    let grown = [
        (AppVolumeKind::Workspace, "2Gi"),
        (AppVolumeKind::Database, "3Gi"),
    ];
    wait_for(&apps, "shop", "both expansions to finish", |a| {
        settled(a, &grown)
    })
    .await;
    assert_eq!(request(&pvcs.get(WORKSPACE).await.unwrap()), "2Gi");
    assert_eq!(request(&pvcs.get(DATABASE).await.unwrap()), "3Gi");
    assert_eq!(
        listed(&ns.name, "shop"),
        [
            row("workspace", "Bound", "2Gi", "4Gi"),
            row("database", "Bound", "3Gi", "8Gi")
        ]
    );

    // A shrink past the CLI, straight to the apiserver: the admission
    // policy refuses it, naming the field.
    let shrink = |patch: serde_json::Value| {
        let apps = apps.clone();
        async move {
            match apps
                .patch("shop", &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Err(kube::Error::Api(s)) => *s,
                other => panic!("a shrink was not refused: {other:?}"),
            }
        }
    };
    let s = shrink(serde_json::json!({"spec": {"workspace": {"size": "1Gi"}}})).await;
    assert_eq!(s.code, 422, "{s:?}");
    assert!(
        s.message
            .contains("spec.workspace.size 1Gi is smaller than the current 2Gi of App shop: app volumes are grow-only"),
        "{s:?}"
    );
    assert!(
        s.message
            .contains("ValidatingAdmissionPolicy 'exo-app-volumes-grow-only'"),
        "{s:?}"
    );
    let s = shrink(serde_json::json!({"spec": {"database": {"postgres": {"size": "2Gi"}}}})).await;
    assert!(
        s.message
            .contains("spec.database.postgres.size 2Gi is smaller than the current 3Gi"),
        "{s:?}"
    );
    let s = shrink(serde_json::json!({"spec": {"database": null}})).await;
    assert!(
        s.message
            .contains("spec.database of App shop cannot be removed"),
        "{s:?}"
    );
    // Real kubectl sees the same words.
    let (done, out) = support::kubectl(&[
        "patch",
        "app",
        "shop",
        "-n",
        &ns.name,
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"workspace":{"size":"512Mi"}}}"#,
    ]);
    assert!(!done, "{out}");
    assert!(
        out.contains("spec.workspace.size 512Mi is smaller"),
        "{out}"
    );
    // The CLI refuses before the apiserver, naming its flag.
    refused(
        &exo_fs(&ns.name, &["resize", "app/shop", "--database", "1Gi"]),
        &[
            "App ",
            "/shop",
            "--database 1Gi",
            "current database size 3Gi",
            "grow-only",
        ],
    );
    assert_eq!(request(&pvcs.get(DATABASE).await.unwrap()), "3Gi");

    // Delete without retain: the pod and both volumes go.
    apps.delete("shop", &DeleteParams::default()).await.unwrap();
    wait_gone(&apps, "shop", "the App to be deleted").await;
    wait_no_pod(&pods, "app", "shop", "the App's pod to be deleted").await;
    wait_gone(&pvcs, WORKSPACE, "the workspace PVC to be deleted").await;
    wait_gone(&pvcs, DATABASE, "the database PVC to be deleted").await;
    assert_eq!(listed(&ns.name, "shop"), []);
}

fn owners_of_pod(p: &Pod) -> Vec<String> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

#[tokio::test]
async fn a_retained_app_leaves_both_volumes_listed_retained() {
    let ns = restricted_namespace("apps-retain").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let apps = ns.api::<App>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    let pods = ns.api::<Pod>();
    create(&apps, &app("shop", true, true)).await;
    let both = [
        (AppVolumeKind::Workspace, "1Gi"),
        (AppVolumeKind::Database, "1Gi"),
    ];
    wait_for(&apps, "shop", "Running with both volumes bound", |a| {
        settled(a, &both)
    })
    .await;
    // Retained volumes have no owner and say where they came from; the
    // pod is owned all the same.
    for name in [WORKSPACE, DATABASE] {
        let p = pvcs.get(name).await.unwrap();
        assert!(owners(&p).is_empty(), "{name}: {:?}", owners(&p));
        assert_eq!(
            p.metadata.annotations.unwrap()["autonomic.sh/retained-from"],
            "shop",
            "{name}"
        );
    }
    assert_eq!(
        owners_of_pod(&the_pod(&pods, "app", "shop").await),
        ["App/shop"]
    );
    // While the App lives its volumes are listed with it, not as retained.
    assert_eq!(
        listed(&ns.name, "shop"),
        [
            row("workspace", "Bound", "1Gi", "4Gi"),
            row("database", "Bound", "1Gi", "8Gi")
        ]
    );
    ok(&exo_fs(
        &ns.name,
        &["resize", "app/shop", "--workspace", "2Gi"],
    ));
    wait_for(&apps, "shop", "the workspace to grow", |a| {
        settled(
            a,
            &[
                (AppVolumeKind::Workspace, "2Gi"),
                (AppVolumeKind::Database, "1Gi"),
            ],
        )
    })
    .await;

    apps.delete("shop", &DeleteParams::default()).await.unwrap();
    wait_gone(&apps, "shop", "the App to be deleted").await;
    wait_no_pod(&pods, "app", "shop", "the App's pod to be deleted").await;
    // Kept, with their sizes, and listed as Retained.
    for (name, size) in [(WORKSPACE, "2Gi"), (DATABASE, "1Gi")] {
        let p = pvcs.get(name).await.expect("a retained PVC");
        assert!(p.metadata.deletion_timestamp.is_none(), "{name}");
        assert_eq!(request(&p), size);
    }
    assert_eq!(
        listed(&ns.name, "shop"),
        [
            row("workspace", "Retained", "2Gi", ""),
            row("database", "Retained", "1Gi", "")
        ]
    );
    let table = ok(&exo_fs(&ns.name, &["list", "--apps"]));
    let shop: Vec<&str> = table.lines().filter(|l| l.contains(" shop ")).collect();
    assert_eq!(shop.len(), 2, "{table}");
    assert!(shop.iter().all(|l| l.contains("Retained")), "{table}");

    // An App made again under the name takes its volumes back (the
    // workspace keeps its grown size: a smaller spec does not shrink it).
    create(&apps, &app("shop", true, false)).await;
    wait_for(&apps, "shop", "the App back on its volumes", |a| {
        settled(
            a,
            &[
                (AppVolumeKind::Workspace, "2Gi"),
                (AppVolumeKind::Database, "1Gi"),
            ],
        )
    })
    .await;
    for name in [WORKSPACE, DATABASE] {
        assert_eq!(
            owners(&pvcs.get(name).await.unwrap()),
            ["App/shop"],
            "{name}"
        );
    }
}

#[tokio::test]
async fn bad_input_is_refused_by_name() {
    let ns = restricted_namespace("apps-bad").await;
    let apps = ns.api::<App>();
    let refusal = |obj: serde_json::Value| {
        let apps = apps.clone();
        async move {
            let a: App = serde_json::from_value(obj.clone()).unwrap();
            match apps.create(&PostParams::default(), &a).await {
                Err(kube::Error::Api(s)) => s.message,
                other => panic!("{obj} was not refused: {other:?}"),
            }
        }
    };
    let base = |spec: serde_json::Value| {
        serde_json::json!({"apiVersion": "autonomic.sh/v1alpha1", "kind": "App",
            "metadata": {"name": "bad"}, "spec": spec})
    };
    // (spec, words the refusal must hold)
    let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
        (
            serde_json::json!({"image": "x", "workspace": {"size": "5Gi", "maxSize": "4Gi"}}),
            vec!["spec.workspace", "size must not exceed maxSize"],
        ),
        (
            serde_json::json!({"image": "x", "workspace": {"size": "1Gi", "maxSize": "4Gi"},
                "database": {"postgres": {"image": "pg", "size": "9Gi", "maxSize": "8Gi"}}}),
            vec!["spec.database.postgres", "size must not exceed maxSize"],
        ),
        (
            serde_json::json!({"image": "", "workspace": {"size": "1Gi", "maxSize": "4Gi"}}),
            vec!["spec.image", "image must be a non-empty image reference"],
        ),
        (
            serde_json::json!({"image": "x", "workspace": {"size": "1Gi", "maxSize": "4Gi"},
                "database": {"postgres": {"image": "", "size": "1Gi", "maxSize": "8Gi"}}}),
            vec!["spec.database.postgres.image", "non-empty image reference"],
        ),
    ];
    for (spec, words) in cases {
        let msg = refusal(base(spec.clone())).await;
        for w in words {
            assert!(msg.contains(w), "{spec}: {msg:?} lacks {w:?}");
        }
    }
    // A missing image cannot even be held by the Rust type: send it raw.
    let (done, out) = {
        let dir = support::scratch();
        let file = dir.path().join("no-image.json");
        std::fs::write(
            &file,
            base(serde_json::json!({"workspace": {"size": "1Gi", "maxSize": "4Gi"}})).to_string(),
        )
        .unwrap();
        support::kubectl(&["create", "-n", &ns.name, "-f", file.to_str().unwrap()])
    };
    assert!(!done, "{out}");
    assert!(out.contains("spec.image: Required value"), "{out}");

    // maxSize is fixed once set.
    create(&apps, &app("fixed", false, false)).await;
    let err = apps
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"workspace": {"maxSize": "40Gi"}}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("maxSize is immutable"), "{err}");
    // The CLI: above maxSize, a database the App does not have, an App
    // that does not exist, and the grammar's mix-ups.
    refused(
        &exo_fs(&ns.name, &["resize", "app/fixed", "--workspace", "5Gi"]),
        &["--workspace 5Gi exceeds its workspace maxSize 4Gi"],
    );
    refused(
        &exo_fs(&ns.name, &["resize", "app/fixed", "--database", "2Gi"]),
        &["has no database"],
    );
    refused(
        &exo_fs(&ns.name, &["resize", "app/nope", "--workspace", "2Gi"]),
        &["App ", "/nope not found"],
    );
    refused(
        &exo_fs(&ns.name, &["resize", "app/fixed", "--size", "2Gi"]),
        &["not --size"],
    );
    refused(
        &exo_fs(&ns.name, &["resize", "fixed", "--workspace", "2Gi"]),
        &["name it app/fixed"],
    );
}

#[tokio::test]
async fn a_restart_over_a_settled_app_writes_nothing() {
    let ns = restricted_namespace("apps-idem").await;
    let mut op = OperatorProcess::start(&ns.name, "first");
    let apps = ns.api::<App>();
    create(&apps, &app("shop", true, false)).await;
    create(&apps, &app("kept", false, true)).await;
    for (name, sizes) in [
        (
            "shop",
            &[
                (AppVolumeKind::Workspace, "1Gi"),
                (AppVolumeKind::Database, "1Gi"),
            ][..],
        ),
        ("kept", &[(AppVolumeKind::Workspace, "1Gi")][..]),
    ] {
        wait_for(&apps, name, "Running with its volumes bound", |a| {
            settled(a, sizes)
        })
        .await;
    }
    assert!(op.writes() > 0, "the first run did write");
    op.terminate();
    let versions = || async {
        let mut all = support::versions(&apps).await;
        for (k, v) in support::versions(&ns.api::<PersistentVolumeClaim>()).await {
            all.insert(format!("pvc/{k}"), v);
        }
        for (k, v) in support::versions(&ns.api::<Pod>()).await {
            all.insert(format!("pod/{k}"), v);
        }
        all
    };
    let before = versions().await;
    let second = OperatorProcess::start(&ns.name, "second");
    second.wait_ready().await;
    second.wait_leader().await;
    eventually(
        "the second replica to reconcile both Apps",
        Duration::from_secs(30),
        || async {
            let n = second.metric("exo_operator_reconciles_total")?;
            (n >= 2).then_some(())
        },
    )
    .await;
    assert_eq!(
        second.writes(),
        0,
        "a restart over settled Apps wrote:\n{}",
        second.get("/metrics").unwrap().1
    );
    assert_eq!(versions().await, before, "resourceVersions changed");
}

#[tokio::test]
async fn through_the_control_plane_the_same_commands_reach_the_operator() {
    let ns = restricted_namespace("apps-plane").await;
    let (cp, _op) = upstream_support::managed_operator(&ns.name, "prod").await;
    let apps = ns.api::<App>();
    create(&apps, &app("shop", true, false)).await;
    let both = [
        (AppVolumeKind::Workspace, "1Gi"),
        (AppVolumeKind::Database, "1Gi"),
    ];
    wait_for(&apps, "shop", "Running with both volumes bound", |a| {
        settled(a, &both)
    })
    .await;
    let plane = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_exo"))
            .arg("fs")
            .args(args)
            .args(["-n", &ns.name, "--deployment", "prod"])
            .env("KUBECONFIG", &env().kubeconfig)
            .env("EXO_CONTROL_PLANE", &cp.base)
            .output()
            .expect("run exo fs")
    };
    let v = json(&plane(&["list", "--apps", "-o", "json"]));
    let rows: Vec<_> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["namespace"] == ns.name.as_str())
        .map(|r| (r["volume"].clone(), r["phase"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (serde_json::json!("workspace"), serde_json::json!("Bound")),
            (serde_json::json!("database"), serde_json::json!("Bound"))
        ]
    );
    ok(&plane(&["resize", "app/shop", "--database", "2Gi"]));
    wait_for(&apps, "shop", "the database to grow", |a| {
        settled(
            a,
            &[
                (AppVolumeKind::Workspace, "1Gi"),
                (AppVolumeKind::Database, "2Gi"),
            ],
        )
    })
    .await;
    // The operator's refusal comes back whole.
    refused(
        &plane(&["resize", "app/shop", "--workspace", "9Gi"]),
        &["--workspace 9Gi exceeds its workspace maxSize 4Gi"],
    );
    // The commands were audited on the control plane.
    let (_, audit) = cp.get("/api/v1/deployments/prod/audit");
    assert!(audit.to_string().contains("fs.app_resize"), "{audit}");

    // A deployment whose operator does not advertise `app-storage` is
    // sent no App command.
    let old = cp.create_deployment("old");
    let mut py = upstream_support::python_client(&cp.base, &old, "register")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(py.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("READY"), "{line}");
    }
    let (status, res) = cp.post(
        "/api/v1/deployments/old/commands",
        &serde_json::json!({"command": {"name": "app_volumes"}}),
    );
    assert_eq!(status, 409, "{res}");
    assert!(
        res["error"].as_str().unwrap().contains("app-storage"),
        "{res}"
    );
    let _ = py.kill();
    let _ = py.wait();
}
