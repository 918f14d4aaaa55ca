#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Tool reconcile: an on-demand pod while enabled, none while disabled.

mod support;

use exo::crd::{Tool, ToolPhase};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Patch, PatchParams};
use support::operator::{
    OperatorProcess, create, pod_name, pods_of, restricted_namespace, tool, wait_for, wait_no_pod,
};

fn phase(t: &Tool) -> Option<ToolPhase> {
    t.status.as_ref()?.phase
}

#[tokio::test]
async fn tool_phases_follow_enabled_and_its_pod() {
    let ns = restricted_namespace("op-tool").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let tools = ns.api::<Tool>();
    let pods = ns.api::<Pod>();
    create(&tools, &tool("search", true)).await;
    create(&tools, &tool("idle", false)).await;

    let t = wait_for(&tools, "search", "Ready", |t| {
        phase(t) == Some(ToolPhase::Ready)
    })
    .await;
    let pod = pod_name(&pods, "tool", "search").await;
    assert!(pod.starts_with("tool-search-"), "{pod}");
    assert_eq!(t.status.unwrap().pod_name.as_deref(), Some(pod.as_str()));
    let svc = ns.api::<Service>().get("tool-search").await.unwrap();
    assert_eq!(svc.spec.unwrap().ports.unwrap()[0].port, 9000);
    wait_for(&tools, "idle", "Disabled", |t| {
        phase(t) == Some(ToolPhase::Disabled)
    })
    .await;
    assert!(pods_of(&pods, "tool", "idle").await.is_empty());

    // Running but not ready: Pending.
    pods.patch_status(
        &pod_name(&pods, "tool", "search").await,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}]}})),
    )
    .await
    .unwrap();
    wait_for(&tools, "search", "Pending", |t| {
        phase(t) == Some(ToolPhase::Pending)
    })
    .await;

    // A broken container: Error.
    pods.patch_status(
        &pod_name(&pods, "tool", "search").await,
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"status": {"phase": "Running", "containerStatuses": [{
            "name": "tool", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&tools, "search", "Error", |t| {
        phase(t) == Some(ToolPhase::Error)
    })
    .await;

    // Disabling removes the pod; enabling brings a fresh one.
    let toggle = |enabled: bool| serde_json::json!({"spec": {"enabled": enabled}});
    tools
        .patch(
            "search",
            &PatchParams::default(),
            &Patch::Merge(toggle(false)),
        )
        .await
        .unwrap();
    wait_for(&tools, "search", "Disabled", |t| {
        phase(t) == Some(ToolPhase::Disabled)
    })
    .await;
    wait_no_pod(&pods, "tool", "search", "the disabled tool's pod to go").await;
    tools
        .patch("idle", &PatchParams::default(), &Patch::Merge(toggle(true)))
        .await
        .unwrap();
    wait_for(&tools, "idle", "Ready", |t| {
        phase(t) == Some(ToolPhase::Ready)
    })
    .await;
}
