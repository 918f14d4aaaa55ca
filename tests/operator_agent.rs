#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Agent reconcile against the real apiserver (namespace enforcing the
//! `restricted` Pod Security Standard): every phase, rolls on digest and
//! baseline changes, pause, deletion through Terminating, bad input.

mod support;

use exo::crd::{Agent, AgentPhase, RestartPolicy};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use support::operator::{
    OperatorProcess, agent, create, image, pod_name, pods_of, restricted_namespace, the_pod,
    wait_for, wait_gone, wait_no_pod, wait_pod,
};

fn phase(a: &Agent) -> Option<AgentPhase> {
    a.status.as_ref()?.phase
}

async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
}

async fn set_pod_status(pods: &Api<Pod>, name: &str, status: serde_json::Value) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .expect("patch pod status");
}

#[tokio::test]
async fn agent_gets_a_restricted_pod_service_and_secret_and_rolls_on_changes() {
    let ns = restricted_namespace("op-agent").await;
    let op = OperatorProcess::start(&ns.name, "a");
    let agents = ns.api::<Agent>();
    let pods = ns.api::<Pod>();
    // The namespace really enforces `restricted`: a plain pod is refused.
    let plain: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "c", "image": image("x", 1)}]}
    }))
    .unwrap();
    let err = pods.create(&Default::default(), &plain).await.unwrap_err();
    assert!(err.to_string().contains("violates PodSecurity"), "{err}");
    create(&agents, &agent("writer")).await;

    let a = wait_for(&agents, "writer", "Active", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    let status = a.status.unwrap();
    // The pod's name carries its template hash; the status names it.
    let pod = the_pod(&pods, "agent", "writer").await;
    let first = pod.metadata.name.clone().unwrap();
    assert!(first.starts_with("agent-writer-"), "{first}");
    assert_eq!(status.pod_name.as_deref(), Some(first.as_str()));
    assert_eq!(status.observed_generation, a.metadata.generation);
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(ready.status, "True");

    // The pod: both containers, baseline read-only in both, labels, owner.
    let spec = pod.spec.clone().unwrap();
    let names: Vec<_> = spec.containers.iter().map(|c| c.name.clone()).collect();
    assert_eq!(names, ["agentlet", "runtime"]);
    for c in &spec.containers {
        let m = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.mount_path == "/etc/exo/baseline")
            .expect("baseline mount");
        assert_eq!(m.read_only, Some(true), "{}", c.name);
    }
    assert_eq!(
        spec.containers[1].image.as_deref(),
        Some(image("runtime", 1).as_str())
    );
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "exo");
    assert_eq!(labels["autonomic.sh/agent"], "writer");
    let owner = &pod.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Agent", "writer")
    );

    // Service and Secret, owned and labelled; a non-empty token.
    let svc = ns.api::<Service>().get("agent-writer").await.unwrap();
    assert_eq!(svc.metadata.owner_references.unwrap()[0].name, "writer");
    assert_eq!(
        svc.spec.unwrap().cluster_ip.as_deref(),
        Some("None"),
        "headless"
    );
    let secret = ns.api::<Secret>().get("agent-token-writer").await.unwrap();
    assert_eq!(
        secret.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "exo"
    );
    let token = secret.data.unwrap()["token"].0.clone();
    assert_eq!(token.len(), 64);
    // The token never reaches the operator's log.
    assert!(!op.log().contains(std::str::from_utf8(&token).unwrap()));

    // A new image digest rolls the pod.
    let uid0 = pod.metadata.uid.clone().unwrap();
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"runtime": {"image": image("runtime", 2)}}}),
    )
    .await;
    let rolled = wait_pod(&pods, "agent", "writer", "a pod with the new digest", |p| {
        p.metadata.uid.as_deref() != Some(&uid0)
            && p.spec.as_ref().unwrap().containers[1].image.as_deref()
                == Some(image("runtime", 2).as_str())
    })
    .await;
    // A new baseline version rolls it again.
    let uid1 = rolled.metadata.uid.clone().unwrap();
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"baseline": {"configMap": "persona-0002"}}}),
    )
    .await;
    wait_pod(
        &pods,
        "agent",
        "writer",
        "a pod with the new baseline",
        |p| {
            p.metadata.uid.as_deref() != Some(&uid1)
                && p.spec
                    .as_ref()
                    .unwrap()
                    .volumes
                    .iter()
                    .flatten()
                    .any(|v| v.config_map.as_ref().map(|c| c.name.as_str()) == Some("persona-0002"))
        },
    )
    .await;
    // A restart request (what `exo` pod control stamps) rolls it too, under
    // a new name: a rolled pod never reuses its predecessor's name.
    let before = the_pod(&pods, "agent", "writer").await;
    merge(
        &agents,
        "writer",
        serde_json::json!({"metadata": {"annotations": {
            "autonomic.sh/restart-requested-at": "2026-11-29T10:00:00Z"}}}),
    )
    .await;
    let restarted = wait_pod(&pods, "agent", "writer", "a restarted pod", |p| {
        p.metadata.uid != before.metadata.uid
    })
    .await;
    assert_ne!(restarted.metadata.name, before.metadata.name);
    assert_eq!(
        restarted.metadata.annotations.unwrap()["autonomic.sh/restart-requested-at"],
        "2026-11-29T10:00:00Z"
    );
    let a = wait_for(&agents, "writer", "Active after rolls", |a| {
        phase(a) == Some(AgentPhase::Active)
            && a.status.as_ref().unwrap().observed_generation == a.metadata.generation
    })
    .await;
    assert_eq!(a.metadata.generation, Some(3));

    // Paused: no pod, phase Paused; unpaused: Active again.
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"paused": true}}),
    )
    .await;
    wait_for(&agents, "writer", "Paused", |a| {
        phase(a) == Some(AgentPhase::Paused)
    })
    .await;
    wait_no_pod(&pods, "agent", "writer", "the paused agent's pod to go").await;
    let a = agents.get("writer").await.unwrap();
    assert_eq!(a.status.unwrap().pod_name, None);
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"paused": false}}),
    )
    .await;
    wait_for(&agents, "writer", "Active after unpause", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;

    // A crash-looping container: Error, and Ready=False.
    set_pod_status(
        &pods,
        &pod_name(&pods, "agent", "writer").await,
        serde_json::json!({"phase": "Running", "containerStatuses": [{
            "name": "runtime", "image": image("runtime", 2), "imageID": "", "ready": false, "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}}]}),
    )
    .await;
    let a = wait_for(&agents, "writer", "Error", |a| {
        phase(a) == Some(AgentPhase::Error)
    })
    .await;
    let ready = a
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "False");
    assert!(
        ready.message.contains("CrashLoopBackOff"),
        "{}",
        ready.message
    );

    // Deletion passes through Terminating while the pod is still there.
    let last = pod_name(&pods, "agent", "writer").await;
    merge(
        &pods,
        &last,
        serde_json::json!({"metadata": {"finalizers": ["exo.test/hold"]}}),
    )
    .await;
    agents
        .delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(&agents, "writer", "Terminating", |a| {
        phase(a) == Some(AgentPhase::Terminating)
    })
    .await;
    merge(
        &pods,
        &last,
        serde_json::json!({"metadata": {"finalizers": null}}),
    )
    .await;
    wait_gone(&agents, "writer", "the agent to be deleted").await;
    wait_no_pod(&pods, "agent", "writer", "the pod to be deleted").await;
}

#[tokio::test]
async fn runs_complete_or_fail_by_restart_policy() {
    let ns = restricted_namespace("op-run").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let agents = ns.api::<Agent>();
    let pods = ns.api::<Pod>();
    for (name, policy) in [
        ("ok", RestartPolicy::Never),
        ("bad", RestartPolicy::Never),
        ("retry", RestartPolicy::OnFailure),
    ] {
        let mut a = agent(name);
        a.spec.restart_policy = Some(policy);
        create(&agents, &a).await;
        wait_for(&agents, name, "Active", |a| {
            phase(a) == Some(AgentPhase::Active)
        })
        .await;
    }
    set_pod_status(
        &pods,
        &pod_name(&pods, "agent", "ok").await,
        serde_json::json!({"phase": "Succeeded"}),
    )
    .await;
    set_pod_status(
        &pods,
        &pod_name(&pods, "agent", "bad").await,
        serde_json::json!({"phase": "Failed", "reason": "Error"}),
    )
    .await;
    wait_for(&agents, "ok", "Succeeded", |a| {
        phase(a) == Some(AgentPhase::Succeeded)
    })
    .await;
    let bad = wait_for(&agents, "bad", "Failed", |a| {
        phase(a) == Some(AgentPhase::Failed)
    })
    .await;
    assert!(
        bad.status
            .unwrap()
            .message
            .unwrap()
            .contains("restartPolicy is Never")
    );
    // A completed or failed run is not restarted.
    let p = the_pod(&pods, "agent", "ok").await;
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Succeeded"));

    // A restartable pod that fails is reported as Error and recreated.
    let uid = the_pod(&pods, "agent", "retry").await.metadata.uid.unwrap();
    set_pod_status(
        &pods,
        &pod_name(&pods, "agent", "retry").await,
        serde_json::json!({"phase": "Failed", "reason": "Evicted"}),
    )
    .await;
    wait_pod(&pods, "agent", "retry", "a recreated pod", |p| {
        p.metadata.uid.as_deref() != Some(&uid)
    })
    .await;
    wait_for(&agents, "retry", "Active again", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_or_reported_and_never_crashes_the_operator() {
    let ns = restricted_namespace("op-bad").await;
    let mut op = OperatorProcess::start(&ns.name, "a");
    let agents = ns.api::<Agent>();

    // Schema/CEL: an unpinned image never reaches the operator.
    let mut unpinned = agent("unpinned");
    unpinned.spec.runtime.image = "example.invalid/runtime:latest".into();
    let err = agents
        .create(&Default::default(), &unpinned)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("pinned by digest"), "{err}");

    // Valid for the schema but not buildable: reported in a condition.
    let mut clash = agent("clash");
    clash.spec.filesystems = Some(vec![
        support::operator::mount("a", Some("/data"), false),
        support::operator::mount("b", Some("/data"), false),
    ]);
    create(&agents, &clash).await;
    let a = wait_for(&agents, "clash", "Error for the mount clash", |a| {
        phase(a) == Some(AgentPhase::Error)
    })
    .await;
    let ready = a
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "InvalidSpec");
    assert!(
        ready.message.contains("\"/data\" is used by another mount"),
        "{}",
        ready.message
    );
    assert!(pods_of(&ns.api::<Pod>(), "agent", "clash").await.is_empty());

    // A mount of an AgentFS that does not exist: Pending with the reason.
    let mut missing = agent("missing");
    missing.spec.filesystems = Some(vec![support::operator::mount("nope", None, false)]);
    create(&agents, &missing).await;
    let a = wait_for(&agents, "missing", "Pending on the missing AgentFS", |a| {
        a.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.reason == "FilesystemNotFound")
        })
    })
    .await;
    assert_eq!(phase(&a), Some(AgentPhase::Pending));

    // The operator is still alive and reconciling others.
    create(&agents, &agent("fine")).await;
    wait_for(&agents, "fine", "Active", |a| {
        phase(a) == Some(AgentPhase::Active)
    })
    .await;
    assert!(op.is_running(), "{}", op.log());
}
