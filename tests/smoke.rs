#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Smoke tests: each proves one real component of the test environment works
//! from Rust, through the same libraries the product uses.

mod support;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{AttachParams, PostParams};
use oci_client::secrets::RegistryAuth;
use support::{TestNamespace, eventually};
use tokio::io::AsyncReadExt;

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": {
            "containers": [{
                "name": "main",
                "image": "registry.invalid/smoke@sha256:0000000000000000000000000000000000000000000000000000000000000000"
            }]
        }
    }))
    .expect("pod")
}

async fn running_pod(ns: &TestNamespace, name: &str) -> Pod {
    let pods = ns.api::<Pod>();
    pods.create(&PostParams::default(), &pod(name))
        .await
        .expect("create pod");
    eventually("the pod to be Running", Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let p = pods.get(name).await.ok()?;
            let phase = p.status.as_ref()?.phase.clone()?;
            (phase == "Running").then_some(p)
        }
    })
    .await
}

#[tokio::test]
async fn pod_reaches_running_on_a_kwok_node() {
    let ns = TestNamespace::new("smoke-pod").await;
    let p = running_pod(&ns, "smoke").await;
    let node = p.spec.and_then(|s| s.node_name).expect("scheduled");
    assert!(node.starts_with("kwok-node-"), "scheduled on {node}");
}

#[tokio::test]
async fn exec_over_websocket_returns_stdout() {
    let ns = TestNamespace::new("smoke-exec").await;
    running_pod(&ns, "smoke").await;
    let pods = ns.api::<Pod>();
    let mut attached = pods
        .exec(
            "smoke",
            ["sh", "-c", "printf 'exo-%s' \"$((6 * 7))\""],
            &AttachParams::default().stdout(true).stderr(false),
        )
        .await
        .expect("exec");
    let mut out = String::new();
    attached
        .stdout()
        .expect("stdout")
        .read_to_string(&mut out)
        .await
        .expect("read stdout");
    let status = attached.take_status().expect("status").await;
    attached.join().await.expect("join");
    assert_eq!(out, "exo-42");
    assert_eq!(status.and_then(|s| s.status).as_deref(), Some("Success"));
}

#[tokio::test]
async fn pvc_binds_through_the_provisioner() {
    let ns = TestNamespace::new("smoke-pvc").await;
    let pvcs = ns.api::<PersistentVolumeClaim>();
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "data" },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } }
    }))
    .expect("pvc");
    pvcs.create(&PostParams::default(), &claim)
        .await
        .expect("create pvc");
    let bound = eventually("the claim to bind", Duration::from_secs(60), || {
        let pvcs = pvcs.clone();
        async move {
            let c = pvcs.get("data").await.ok()?;
            (c.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(c)
        }
    })
    .await;
    assert_eq!(
        bound.spec.and_then(|s| s.storage_class_name).as_deref(),
        Some("exo-hostpath"),
        "the default StorageClass applies"
    );
}

#[tokio::test]
async fn pushed_image_resolves_to_its_digest() {
    let env = support::env();
    let pushed = support::push_image(
        &env.registry,
        "smoke/hello",
        "v1",
        b"hello layer",
        &RegistryAuth::Anonymous,
    )
    .await;
    let client = support::oci_client();
    let resolved = client
        .fetch_manifest_digest(
            &pushed.reference.parse().expect("ref"),
            &RegistryAuth::Anonymous,
        )
        .await
        .expect("resolve tag");
    assert_eq!(resolved, pushed.digest);
}

#[tokio::test]
async fn cloned_repository_has_the_served_head() {
    let repo = support::create_git_repo(
        "smoke",
        &[
            ("README.md", b"fleet\n"),
            ("releases/r1.yaml", b"kind: Release\n"),
        ],
    );
    let dir = support::scratch();
    let clone = tokio::task::spawn_blocking({
        let url = repo.url.clone();
        let path = dir.path().join("clone");
        move || git2::Repository::clone(&url, &path).map(|r| r.head().ok().and_then(|h| h.target()))
    })
    .await
    .expect("join")
    .expect("clone over git://");
    assert_eq!(clone, Some(repo.head));
    assert_eq!(
        std::fs::read(dir.path().join("clone/releases/r1.yaml")).expect("file"),
        b"kind: Release\n"
    );
}

#[tokio::test]
async fn watch_sees_pod_events() {
    // The operator is built on watches; prove the apiserver streams them.
    let ns = TestNamespace::new("smoke-watch").await;
    let pods = ns.api::<Pod>();
    let mut stream = pods
        .watch(&kube::api::WatchParams::default().timeout(20), "0")
        .await
        .expect("watch")
        .boxed();
    pods.create(&PostParams::default(), &pod("watched"))
        .await
        .expect("create");
    let first = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match stream.next().await {
                Some(Ok(kube::api::WatchEvent::Bookmark(_))) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("an event within 20s")
    .expect("stream open")
    .expect("event");
    assert!(
        matches!(first, kube::api::WatchEvent::Added(_)),
        "{first:?}"
    );
}
