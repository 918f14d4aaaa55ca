#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Delete of a mounted AgentFS is refused at the API server by the shipped
//! `deploy/agentfs-admission.yaml` (installed by `install_crds`), for real
//! `kubectl` and for the kube client alike, with a message naming the
//! agents; once detached, delete goes through, and `retain` decides whether
//! the PVC stays. Also the test environment's volume seam: an exec through
//! the apiserver into a kwok pod mounting the volume writes into the PV's
//! hostPath folder, and another pod mounting it reads it back.

mod support;

use std::time::Duration;

use exo::crd::{Agent, AgentFS, AgentPhase};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Patch, PatchParams};
use support::operator::{
    OperatorProcess, agent, agentfs, create, create_baseline, delete_refused, mount, pod_name,
    restricted_namespace, volume_folder, wait_for, wait_gone,
};
use support::{eventually, kubectl};

fn mounted_by(f: &AgentFS) -> Vec<String> {
    f.status
        .as_ref()
        .map(|s| s.mounted_by.clone())
        .unwrap_or_default()
}

/// `sh -c script` in the runtime container of `pod`, through the apiserver
/// and kwok's exec (which sets EXO_POD_ROOT).
fn exec(ns: &str, pod: &str, script: &str) -> (bool, String) {
    kubectl(&[
        "exec", "-n", ns, pod, "-c", "runtime", "--", "sh", "-c", script,
    ])
}

#[tokio::test]
async fn delete_refused_while_mounted_then_detach_delete_and_retain() {
    let ns = restricted_namespace("fs-admission").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let fss = ns.api::<AgentFS>();
    let agents = ns.api::<Agent>();
    let pods = ns.api::<Pod>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    // The agents' baseline: like the kubelet, the seam materialises a pod
    // only once every volume it mounts is there.
    create_baseline(&ns).await;
    create(&fss, &agentfs("shared", "1Gi", "2Gi", true)).await;
    create(&fss, &agentfs("scratch", "1Gi", "2Gi", false)).await;
    let mut alpha = agent("alpha");
    alpha.spec.filesystems = Some(vec![
        mount("shared", None, false),
        mount("scratch", None, false),
    ]);
    let mut beta = agent("beta");
    beta.spec.filesystems = Some(vec![mount("shared", None, true)]);
    create(&agents, &alpha).await;
    create(&agents, &beta).await;
    for name in ["alpha", "beta"] {
        wait_for(&agents, name, "Active", |a| {
            a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
        })
        .await;
    }
    wait_for(&fss, "shared", "mountedBy alpha, beta", |f| {
        mounted_by(f) == ["alpha", "beta"]
    })
    .await;
    wait_for(&fss, "scratch", "mountedBy alpha", |f| {
        mounted_by(f) == ["alpha"]
    })
    .await;

    // The kube client: what the apiserver returns for the policy's
    // `reason: Forbidden`.
    let want = "AgentFS shared is mounted by agent(s) alpha, beta; detach it from each agent first";
    let refused = delete_refused(&fss, "shared").await;
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (403, "Forbidden"),
        "{refused:?}"
    );
    assert!(refused.message.contains(want), "{refused:?}");
    assert!(
        refused
            .message
            .contains("ValidatingAdmissionPolicy 'exo-agentfs-delete-while-mounted'"),
        "{refused:?}"
    );
    // Real kubectl: the same words on stderr, a failed exit.
    let (ok, out) = kubectl(&["delete", "agentfs", "shared", "-n", &ns.name]);
    assert!(!ok, "kubectl delete of a mounted AgentFS succeeded: {out}");
    assert!(out.contains("(Forbidden)") && out.contains(want), "{out}");
    let (ok, out) = kubectl(&["delete", "agentfs", "scratch", "-n", &ns.name]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(
            "AgentFS scratch is mounted by agent(s) alpha; detach it from each agent first"
        ),
        "{out}"
    );
    // Refused, not held: no deletion began.
    for name in ["shared", "scratch"] {
        let f = fss.get(name).await.unwrap();
        assert!(f.metadata.deletion_timestamp.is_none(), "{name}: {f:?}");
    }

    // The seam: alpha writes through its mount, the file is in the volume,
    // and beta (read-only, not enforced by the seam) reads it.
    let alpha_pod = pod_name(&pods, "agent", "alpha").await;
    let beta_pod = pod_name(&pods, "agent", "beta").await;
    let at = |pod: &str| format!("\"$EXO_POD_ROOT/{}/{pod}/mnt/fs/shared\"", ns.name);
    let write = format!("echo hi > {}/x", at(&alpha_pod));
    eventually(
        "alpha's exec to write through its mount",
        Duration::from_secs(30),
        || async { exec(&ns.name, &alpha_pod, &write).0.then_some(()) },
    )
    .await;
    let folder = volume_folder(&ns, "agentfs-shared").await;
    assert_eq!(std::fs::read_to_string(folder.join("x")).unwrap(), "hi\n");
    let read = format!("cat {}/x", at(&beta_pod));
    let seen = eventually(
        "beta's exec to read the file",
        Duration::from_secs(30),
        || async {
            let (ok, out) = exec(&ns.name, &beta_pod, &read);
            ok.then_some(out)
        },
    )
    .await;
    assert_eq!(seen, "hi\n");

    // Detach every disk: mountedBy empties and delete goes through.
    for name in ["alpha", "beta"] {
        agents
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"filesystems": []}})),
            )
            .await
            .unwrap();
    }
    for name in ["shared", "scratch"] {
        wait_for(&fss, name, "no longer mounted", |f| {
            f.status.as_ref().is_some_and(|s| s.mounted_by.is_empty())
        })
        .await;
        let (ok, out) = kubectl(&["delete", "agentfs", name, "-n", &ns.name, "--wait=false"]);
        assert!(ok, "kubectl delete of a detached AgentFS failed: {out}");
        wait_gone(&fss, name, "the AgentFS to be deleted").await;
    }

    // retain: true keeps the PVC, released, with its data; retain: false
    // takes it along.
    let pvc = pvcs.get("agentfs-shared").await.expect("retained PVC");
    assert!(pvc.metadata.deletion_timestamp.is_none());
    assert!(pvc.metadata.owner_references.unwrap_or_default().is_empty());
    assert_eq!(
        pvc.metadata.annotations.unwrap()["autonomic.sh/retained-from"],
        "shared"
    );
    assert_eq!(std::fs::read_to_string(folder.join("x")).unwrap(), "hi\n");
    wait_gone(
        &pvcs,
        "agentfs-scratch",
        "the non-retained PVC to be deleted",
    )
    .await;
}
