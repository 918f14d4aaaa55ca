//! A shell to attach to: an Agent with a running pod (kwok runs the
//! command on this host), and `exo attach` against a control plane.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use exo::crd::Agent;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use super::{ControlPlane, exo};
use crate::support::{TestNamespace, eventually};

/// An Agent `worker` whose status names the running pod `worker-pod`.
pub async fn agent_with_pod(ns: &TestNamespace) {
    let pods = ns.api::<Pod>();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "worker-pod" },
        "spec": { "containers": [{ "name": "runtime",
            "image": format!("registry.invalid/a@sha256:{}", "0".repeat(64)) }] }
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the pod to be Running", Duration::from_secs(60), || {
        let pods = pods.clone();
        async move {
            let p = pods.get("worker-pod").await.ok()?;
            (p.status?.phase? == "Running").then_some(())
        }
    })
    .await;
    let image = format!("registry.invalid/a@sha256:{}", "a".repeat(64));
    let agents = ns.api::<Agent>();
    let a: Agent = serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "Agent",
        "metadata": { "name": "worker" },
        "spec": { "runtime": { "image": image }, "agentlet": { "image": image } }
    }))
    .unwrap();
    agents.create(&PostParams::default(), &a).await.unwrap();
    // What the reconciler will write; set here by hand.
    agents
        .patch_status(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": { "podName": "worker-pod" } })),
        )
        .await
        .unwrap();
}

/// `exo attach AGENT -n NS --deployment shell` against `cp`.
pub fn attach_cmd(
    cp: &ControlPlane,
    ns: &str,
    agent: &str,
    extra: &[&str],
) -> std::process::Command {
    let mut c = exo();
    c.args(["attach", agent, "-n", ns, "--deployment", "shell"])
        .args(["--control-plane", &cp.base])
        .args(extra);
    c
}

/// `exo attach worker --no-tty` with a script on stdin that prints
/// `exo-42` and exits 0: the output and both streams as text.
pub fn shell_script(cp: &ControlPlane, ns: &str) -> (std::process::Output, String, String) {
    let mut child = attach_cmd(cp, ns, "worker", &["--no-tty"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo \"exo-$((6 * 7))\"\nexit 0\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}
