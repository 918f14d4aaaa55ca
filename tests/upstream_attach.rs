#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! `exo attach`: user -> control plane -> operator connection -> kube exec
//! in the agent's pod (kwok runs the command on this host), all real
//! processes.

mod support;
mod upstream_support;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use exo::crd::Agent;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::{TestNamespace, eventually};
use upstream_support::{Connector, ControlPlane, connector_until, exo, install_crds};

async fn agent_with_pod(ns: &TestNamespace) {
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

fn attach_cmd(cp: &ControlPlane, ns: &str, agent: &str, extra: &[&str]) -> std::process::Command {
    let mut c = exo();
    c.args(["attach", agent, "-n", ns, "--deployment", "shell"])
        .args(["--control-plane", &cp.base])
        .args(extra);
    c
}

#[tokio::test]
async fn attach_runs_a_shell_in_the_agents_pod_through_the_control_plane() {
    let ns = TestNamespace::new("up-attach").await;
    install_crds(&ns.client).await;
    agent_with_pod(&ns).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("shell");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;

    let mut child = attach_cmd(&cp, &ns.name, "worker", &["--no-tty"])
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("exo-42"),
        "stdout: {stdout:?} stderr: {stderr:?}"
    );
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(stderr.contains("session ended: exited: 0"), "{stderr}");

    // Audited on the control plane.
    let (_, audit) = cp.get("/api/v1/deployments/shell/audit");
    let actions: Vec<&str> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert!(actions.contains(&"attach.opened"), "{actions:?}");
    assert!(actions.contains(&"attach.closed"), "{actions:?}");

    // An agent without a pod: the operator's reason reaches the user.
    let out = attach_cmd(&cp, &ns.name, "missing", &["--no-tty"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Agent") && stderr.contains("missing"),
        "{stderr}"
    );
}

#[tokio::test]
async fn attach_is_refused_while_offline() {
    let cp = ControlPlane::start(&[]);
    cp.create_deployment("shell");
    let out = attach_cmd(&cp, "default", "worker", &["--no-tty"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("409") && stderr.contains("offline"),
        "{stderr}"
    );
}

#[tokio::test]
async fn attach_allocates_a_terminal_by_default() {
    let ns = TestNamespace::new("up-attach-tty").await;
    install_crds(&ns.client).await;
    agent_with_pod(&ns).await;
    let cp = ControlPlane::start(&[]);
    let token = cp.create_deployment("shell");
    let c = Connector::start(&cp.base, &token, &ns.name, &[]);
    connector_until(&c, "connected", |h| h["state"] == "connected").await;
    let mut child = attach_cmd(&cp, &ns.name, "worker", &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interactive: type `tty`, wait for its answer, then exit. (Typing
    // `exit` at once can lose the last output in kwok's PTY copy.)
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut stdout, &mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    stdin.write_all(b"tty\n").unwrap();
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains("/dev/pts/") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(b) => seen.push_str(&String::from_utf8_lossy(&b)),
            Err(e) => panic!("no terminal name ({e}); output so far: {seen:?}"),
        }
    }
    stdin.write_all(b"exit 0\n").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}
