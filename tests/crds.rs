#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The checked-in CRDs match the Rust types, and the real apiserver accepts
//! them and enforces their CEL rules.

mod support;

use kube::api::{Patch, PatchParams, PostParams};
use support::{TestNamespace, install_crds};

#[test]
fn deploy_crds_match_the_rust_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    for crd in exo::crd::all() {
        let path = dir.join(exo::crd::file_name(&crd));
        let on_disk = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `exo crd -o deploy/crds`", path.display()));
        assert_eq!(
            on_disk,
            exo::crd::render(&crd).unwrap(),
            "{} is stale; run `cargo run -- crd -o deploy/crds`",
            path.display()
        );
    }
}

#[tokio::test]
async fn apiserver_enforces_cel_rules() {
    let ns = TestNamespace::new("crd-cel").await;
    install_crds(&ns.client).await;
    let fs = ns.api::<exo::crd::AgentFS>();
    let make = |name: &str, size: &str, max: &str| -> exo::crd::AgentFS {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
            "metadata": { "name": name },
            "spec": { "size": size, "maxSize": max }
        }))
        .unwrap()
    };
    let err = fs
        .create(&PostParams::default(), &make("big", "200Gi", "100Gi"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("size must not exceed maxSize"),
        "{err}"
    );

    fs.create(&PostParams::default(), &make("ok", "20Gi", "100Gi"))
        .await
        .expect("valid AgentFS");
    let err = fs
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"maxSize": "200Gi"}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("maxSize is immutable"), "{err}");

    let agents = ns.api::<exo::crd::Agent>();
    let unpinned: exo::crd::Agent = serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
        "metadata": { "name": "a" },
        "spec": { "runtime": { "image": "example/runtime:latest" },
                  "agentlet": { "image": format!("example/agentlet@sha256:{}", "0".repeat(64)) } }
    }))
    .unwrap();
    let err = agents
        .create(&PostParams::default(), &unpinned)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("pinned by digest"), "{err}");
}
