#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `deploy/`: the kustomization is accepted by the apiserver, and the RBAC
//! in it is enough for the operator to do its whole job (it runs here as
//! the ServiceAccount, with a token from the TokenRequest API).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use exo::crd::{Agent, AgentFS, AgentFSPhase, AgentPhase, Tool, ToolPhase};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::config::{AuthInfo, Kubeconfig};
use support::kubectl;
use support::operator::{
    OperatorProcess, agent, agentfs, create, delete_refused, mount, restricted_namespace, tool,
    wait_for, wait_gone,
};

/// A kubeconfig for the operator's ServiceAccount (token in a file beside it).
fn service_account_kubeconfig(dir: &Path) -> PathBuf {
    let (ok, token) = kubectl(&[
        "create",
        "token",
        "exo-operator",
        "-n",
        "exo-system",
        "--duration",
        "1h",
    ]);
    assert!(ok, "TokenRequest failed");
    let token_file = dir.join("token");
    std::fs::write(&token_file, token.trim()).unwrap();
    let mut kc = Kubeconfig::read_from(&support::env().kubeconfig).unwrap();
    for named in &mut kc.auth_infos {
        named.auth_info = Some(AuthInfo {
            token_file: Some(token_file.display().to_string()),
            ..AuthInfo::default()
        });
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_json::to_vec(&kc).unwrap()).unwrap();
    path
}

#[tokio::test]
async fn kustomization_applies_and_its_rbac_is_enough_to_operate() {
    let ns = restricted_namespace("op-deploy").await;
    // The namespace first: a server-side dry run cannot place objects in a
    // namespace that the same dry run only pretends to create.
    let (ok, out) = kubectl(&["apply", "-f", "deploy/namespace.yaml"]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&["apply", "-k", "deploy/", "--dry-run=server"]);
    assert!(
        ok,
        "kubectl apply -k deploy/ --dry-run=server failed:\n{out}"
    );
    assert!(out.contains("deployment.apps/exo-operator"), "{out}");

    // The audit's role (list Secrets and Nodes) is separate and withheld
    // at first (an earlier run may have left it bound).
    let (ok, out) = kubectl(&[
        "delete",
        "-f",
        "deploy/rbac-audit.yaml",
        "--ignore-not-found",
    ]);
    assert!(ok, "{out}");
    let (ok, out) = kubectl(&[
        "apply",
        "-f",
        "deploy/rbac.yaml",
        "-f",
        "deploy/rbac-gitops.yaml",
        "-f",
        "deploy/rbac-notify.yaml",
    ]);
    assert!(ok, "{out}");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = service_account_kubeconfig(dir.path());
    // Without the audit's role the ServiceAccount cannot enumerate Secrets.
    let out = Command::new("kubectl")
        .args(["get", "secrets", "-A"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the operator's account can list every Secret"
    );
    // The push receiver reads a Fleet and its webhook Secret by name, and
    // stamps the Fleet's sync-requested annotation. AgentFS file commands
    // exec in pods, and start, mark and delete helper pods. Apps are
    // watched, and grown by a tunnelled `app_resize`. A restore drill
    // creates and deletes its scratch AgentFS. Notifications watch their
    // providers and rules and write their status.
    for (verb, resource) in [
        ("create", "agentfs.autonomic.sh"),
        ("delete", "agentfs.autonomic.sh"),
        ("get", "fleets.autonomic.sh"),
        ("patch", "fleets.autonomic.sh"),
        ("watch", "apps.autonomic.sh"),
        ("patch", "apps.autonomic.sh"),
        ("get", "secrets"),
        ("create", "pods/exec"),
        ("patch", "pods"),
        ("patch", "persistentvolumeclaims"),
        ("watch", "notificationrules.autonomic.sh"),
        ("list", "notificationproviders.autonomic.sh"),
    ] {
        let out = Command::new("kubectl")
            .args(["auth", "can-i", verb, resource, "-n", &ns.name])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the operator's account cannot {verb} {resource}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    // With it (what `kubectl apply -k deploy/` installs), the scheduled
    // audit can list what it reads; an RBAC apply takes a moment to hold.
    let (ok, out) = kubectl(&["apply", "-f", "deploy/rbac-audit.yaml"]);
    assert!(ok, "{out}");
    for resource in ["secrets", "nodes"] {
        support::eventually(
            &format!("the audit may list {resource}"),
            std::time::Duration::from_secs(20),
            || {
                let kubeconfig = kubeconfig.clone();
                async move {
                    Command::new("kubectl")
                        .args(["auth", "can-i", "list", resource, "-A"])
                        .env("KUBECONFIG", &kubeconfig)
                        .output()
                        .unwrap()
                        .status
                        .success()
                        .then_some(())
                }
            },
        )
        .await;
    }
    let op = OperatorProcess::start_as(&ns.name, "rbac", "exo-system", &kubeconfig);
    op.wait_ready().await;
    op.wait_leader().await;

    let fss = ns.api::<AgentFS>();
    let agents = ns.api::<Agent>();
    create(&fss, &agentfs("ws", "1Gi", "4Gi", false)).await;
    let mut a = agent("worker");
    a.spec.filesystems = Some(vec![mount("ws", None, false)]);
    create(&agents, &a).await;
    create(&ns.api::<Tool>(), &tool("t", true)).await;
    wait_for(&agents, "worker", "Active", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
    wait_for(&ns.api::<Tool>(), "t", "Ready", |t| {
        t.status.as_ref().and_then(|s| s.phase) == Some(ToolPhase::Ready)
    })
    .await;
    wait_for(&fss, "ws", "Bound", |f| {
        f.status.as_ref().and_then(|s| s.phase) == Some(AgentFSPhase::Bound)
    })
    .await;

    // Grow, roll, delete refusal, detach, delete: every write kind.
    fss.patch(
        "ws",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"size": "2Gi"}})),
    )
    .await
    .unwrap();
    agents
        .patch("worker", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"runtime": {"image": support::operator::image("runtime", 9)}}})))
        .await
        .unwrap();
    // Mounted: the shipped admission policy refuses the delete.
    let refused = delete_refused(&fss, "ws").await;
    assert!(refused.message.contains("worker"), "{refused:?}");
    agents
        .delete("worker", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&agents, "worker", "the agent to be deleted").await;
    wait_for(&fss, "ws", "no longer mounted", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.is_empty())
    })
    .await;
    fss.delete("ws", &DeleteParams::default()).await.unwrap();
    wait_gone(&fss, "ws", "the AgentFS to be deleted").await;
    wait_gone(
        &ns.api::<PersistentVolumeClaim>(),
        "agentfs-ws",
        "the PVC to be deleted",
    )
    .await;

    let (_, metrics) = op.get("/metrics").unwrap();
    assert!(
        !metrics.contains("result=\"forbidden\""),
        "some call was forbidden:\n{metrics}\n{}",
        op.log()
    );
    assert!(!op.log().contains("forbidden"), "{}", op.log());
}
