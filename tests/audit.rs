#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Tenant isolation end to end, on the real apiserver, kwok, git server and
//! a real `exo operator run` following the example fleet: every tenant
//! namespace gets its NetworkPolicies (a deleted one comes back, a widened
//! one is reverted), pods land on their tier, `exo audit` is clean on the
//! fleet as deployed and finds each planted breach (exit 1) without ever
//! printing a planted credential, the operator's scheduled audit reports
//! the same as Events, a metric and the Fleet's conditions, and all of it
//! clears when the breaches go.

mod support;

use std::process::Command;
use std::time::Duration;

use exo::crd::Fleet;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::eventually;
use support::fleet::{Fixture, Operator, example_files};

const OLD: &str = "2026.11.0";
const EXO: &str = env!("CARGO_BIN_EXE_exo");
/// Planted credentials: none may appear in any output, Event, log or status.
const CANARY_ANTHROPIC: &str = "sk-ant-exotest-canary-7f3a9c1e5b2d4f6a8c0e";
const CANARY_OPENAI: &str = "sk-proj-exotestcanary0123456789abcdefghij";
const CANARY_AWS: &str = "AKIAEXOTESTCANARY001";
const CANARIES: [&str; 3] = [CANARY_ANTHROPIC, CANARY_OPENAI, CANARY_AWS];

fn audit(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(EXO)
        .arg("audit")
        .args(args)
        .env("KUBECONFIG", &support::env().kubeconfig)
        .output()
        .expect("run exo audit");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    for c in CANARIES {
        assert!(
            !stdout.contains(c) && !stderr.contains(c),
            "exo audit printed a planted credential:\n{stdout}\n{stderr}"
        );
    }
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn no_canary(what: &str, text: &str) {
    for c in CANARIES {
        assert!(!text.contains(c), "{what} holds a planted credential");
    }
}

/// Deletes the test's control-plane node however the test ends.
struct NodeGuard(String);
impl Drop for NodeGuard {
    fn drop(&mut self) {
        let _ = support::kubectl(&["delete", "node", &self.0, "--wait=false"]);
    }
}

fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

async fn fleet_conditions(fx: &Fixture) -> Vec<(String, String)> {
    let f = fx.ns.api::<Fleet>().get("fleet").await.unwrap();
    let status = serde_json::to_string(&f.status).unwrap();
    no_canary("the Fleet's status", &status);
    f.status
        .and_then(|s| s.audit)
        .map(|a| {
            a.conditions
                .into_iter()
                .map(|c| (c.type_, c.status))
                .collect()
        })
        .unwrap_or_default()
}

fn condition(conds: &[(String, String)], t: &str) -> Option<String> {
    conds.iter().find(|(ty, _)| ty == t).map(|(_, s)| s.clone())
}

#[tokio::test]
async fn isolation_is_built_enforced_and_audited() {
    let fx = Fixture::new("au", example_files("au")).await;
    let op = Operator::start_with(
        &fx.ns.name,
        &support::env().kubeconfig,
        "a",
        &["--audit-interval", "1s"],
    );
    fx.wait_all(OLD, &op).await;
    let client = fx.ns.client.clone();
    let tenants = fx.tenants();
    let (platform, acme, globex) = ("au-platform", "au-acme", "au-globex");

    // Every tenant namespace holds its policies; globex's allowed egress is in.
    for t in &tenants {
        let names: Vec<String> = Api::<NetworkPolicy>::namespaced(client.clone(), t)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        for want in ["exo-default-deny", "exo-egress", "exo-tools-ingress"] {
            assert!(names.iter().any(|n| n == want), "{t}: {names:?}");
        }
    }
    let egress = Api::<NetworkPolicy>::namespaced(client.clone(), globex)
        .get("exo-egress")
        .await
        .unwrap();
    let text = serde_json::to_string(&egress.spec).unwrap();
    assert!(text.contains("10.20.0.0/16"), "{text}");

    // Pods run on their tier: the platform's on the platform node only.
    for (t, tier) in [(platform, "platform"), (acme, "standard")] {
        let pods = Api::<Pod>::namespaced(client.clone(), t)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        assert!(!pods.is_empty(), "{t}");
        for p in pods {
            let spec = p.spec.unwrap();
            assert_eq!(spec.node_selector.unwrap()["autonomic.sh/node-tier"], tier);
            let node = spec.node_name.unwrap();
            assert_eq!(node == "kwok-node-0", tier == "platform", "{t}: on {node}");
            assert!(spec.affinity.is_some(), "control-plane nodes excluded");
        }
    }

    // The fleet as deployed is clean.
    let mut args: Vec<&str> = Vec::new();
    for t in &tenants {
        args.extend(["-n", t.as_str()]);
    }
    let (code, out, err) = audit(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("5 tenant(s), every rule clean"), "{out}");
    let conds = eventually(
        "the operator's audit ran clean",
        Duration::from_secs(60),
        || async {
            let c = fleet_conditions(&fx).await;
            (condition(&c, "Placement").as_deref() == Some("True")
                && condition(&c, "Credentials").as_deref() == Some("True"))
            .then_some(c)
        },
    )
    .await;
    assert_eq!(conds.len(), 5, "{conds:?}");

    // A deleted policy comes back; a widened one is put back and reported.
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), acme);
    let old_uid = policies.get("exo-default-deny").await.unwrap().metadata.uid;
    policies
        .delete("exo-default-deny", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "exo-default-deny restored",
        Duration::from_secs(60),
        || async {
            let p = policies.get_opt("exo-default-deny").await.unwrap()?;
            (p.metadata.uid != old_uid).then_some(())
        },
    )
    .await;
    let wide = json!({"spec": {"egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}]}});
    policies
        .patch("exo-egress", &PatchParams::default(), &Patch::Merge(&wide))
        .await
        .unwrap();
    eventually(
        "exo-egress narrowed back",
        Duration::from_secs(60),
        || async {
            let p = policies.get("exo-egress").await.unwrap();
            let text = serde_json::to_string(&p.spec).unwrap();
            (!text.contains("0.0.0.0/0") && text.contains("kube-dns")).then_some(())
        },
    )
    .await;
    eventually("the revert reported", Duration::from_secs(30), || async {
        let evs = support::events(acme, "DriftReverted").await;
        evs.iter()
            .any(|e| {
                e.note
                    .as_deref()
                    .unwrap_or_default()
                    .contains("NetworkPolicy au-acme/exo-egress differed")
            })
            .then_some(())
    })
    .await;

    // Breaches, planted by hand in acme.
    let cp_node = format!("exo-cp-{}", fx.ns.name.rsplit('-').next().unwrap());
    let _guard = NodeGuard(cp_node.clone());
    Api::<Node>::all(client.clone())
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": cp_node, "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"node-role.kubernetes.io/control-plane": "", "autonomic.sh/node-tier": "standard", "type": "kwok"}}})),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), acme);
    for (name, key, value) in [
        ("leaked", "ANTHROPIC_API_KEY", CANARY_ANTHROPIC),
        ("aws", "config", CANARY_AWS),
    ] {
        secrets
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": name}, "stringData": {key: value}})),
            )
            .await
            .unwrap();
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), acme);
    claims
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "borrowed", "labels": {"autonomic.sh/tenant": globex}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await
        .unwrap();
    let baseline = fx
        .rollout(acme)
        .await
        .and_then(|_| {
            std::fs::read_to_string(support::fleet::repo_root().join("releases/2026.11.0.yaml"))
                .ok()
        })
        .and_then(|t| {
            t.lines()
                .find(|l| l.contains("version: agent-baseline-"))
                .map(|l| l.split_whitespace().last().unwrap().to_owned())
        })
        .unwrap();
    let c = |extra: serde_json::Value| {
        let mut base = json!({"name": "main", "image": "busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000"});
        base.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        base
    };
    // Pod Security `restricted` (the tenant saga labels every tenant
    // namespace so) would refuse these pods; the audit must still find
    // them where admission let them in (a cluster without Pod Security, or
    // pods from before it): the label is lowered for the test.
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            acme,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "privileged"}}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), acme);
    let planted = [
        json!({"metadata": {"name": "on-control-plane"}, "spec": {"nodeName": cp_node, "containers": [c(json!({}))]}}),
        json!({"metadata": {"name": "wrong-tier"}, "spec": {"nodeName": "kwok-node-0", "containers": [c(json!({}))]}}),
        json!({"metadata": {"name": "creds"}, "spec": {"nodeName": "kwok-node-1",
            "containers": [c(json!({"env": [{"name": "LLM_KEY", "value": CANARY_OPENAI}],
                "envFrom": [{"secretRef": {"name": "leaked"}}]}))],
            "volumes": [{"name": "cloud", "secret": {"secretName": "aws"}}]}}),
        json!({"metadata": {"name": "mounts"}, "spec": {"nodeName": "kwok-node-1",
            "containers": [c(json!({"volumeMounts": [
                {"name": "root", "mountPath": "/host"},
                {"name": "baseline", "mountPath": "/etc/exo/baseline"},
                {"name": "data", "mountPath": "/data"}]}))],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}},
                {"name": "baseline", "configMap": {"name": baseline}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "borrowed"}}]}}),
    ];
    // Pod Security admission reads namespaces from the apiserver's own
    // cache, which may not hold the lowered label yet: a refusal is tried
    // again for a while.
    for p in &planted {
        let pod = from::<Pod>(p.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match pods.create(&PostParams::default(), &pod).await {
                Ok(_) => break,
                Err(kube::Error::Api(e))
                    if e.code == 403
                        && e.message.contains("PodSecurity")
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!(
                    "plant {}: {e}",
                    pod.metadata.name.clone().unwrap_or_default()
                ),
            }
        }
    }

    // `exo audit` finds each one, by rule and object, and prints no value.
    let (code, out, err) = audit(&["-n", acme, "-o", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let has = |rule: &str, object: &str, words: &str| {
        findings.iter().any(|f| {
            f["rule"] == rule
                && f["object"] == object
                && f["message"].as_str().unwrap().contains(words)
        })
    };
    let want = [
        ("placement", "Pod/on-control-plane", "control-plane node"),
        ("placement", "Pod/wrong-tier", "tier \"platform\""),
        (
            "credentials",
            "Pod/creds",
            "env LLM_KEY holds what looks like a OpenAI key",
        ),
        (
            "credentials",
            "Pod/creds",
            "envFrom: Secret leaked key ANTHROPIC_API_KEY",
        ),
        (
            "credentials",
            "Pod/creds",
            "volume cloud: Secret aws key config holds what looks like a AWS key",
        ),
        ("mounts", "Pod/mounts", "hostPath volume (path /)"),
        (
            "mounts",
            "Pod/mounts",
            "baseline volume baseline at /etc/exo/baseline writable",
        ),
        ("mounts", "Pod/mounts", &format!("tenant {globex}'s volume")),
    ];
    for (rule, object, words) in want {
        assert!(
            has(rule, object, words),
            "missing {rule} {object} {words:?} in {out}"
        );
    }
    let (code, table, _) = audit(&["-n", acme]);
    assert_eq!(code, 1);
    assert!(
        table.contains("RULE") && table.contains("Pod/on-control-plane"),
        "{table}"
    );

    // The operator reports the same: conditions, Events, the metric.
    eventually(
        "the Fleet's audit conditions turn False",
        Duration::from_secs(60),
        || async {
            let c = fleet_conditions(&fx).await;
            ["Placement", "Credentials", "Mounts"]
                .iter()
                .all(|t| condition(&c, t).as_deref() == Some("False"))
                .then_some(())
        },
    )
    .await;
    let found = eventually("AuditFinding Events", Duration::from_secs(30), || async {
        let evs = support::events(acme, "AuditFinding").await;
        (evs.len() >= want.len()).then_some(evs)
    })
    .await;
    for e in &found {
        no_canary("an Event", &serde_json::to_string(e).unwrap());
    }
    assert!(op.metric("exo_operator_audit_findings").unwrap() >= want.len() as u64);

    // Gone: clean everywhere.
    for p in ["on-control-plane", "wrong-tier", "creds", "mounts"] {
        pods.delete(
            p,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
        .unwrap();
    }
    for s in ["leaked", "aws"] {
        secrets.delete(s, &DeleteParams::default()).await.unwrap();
    }
    claims
        .delete("borrowed", &DeleteParams::default())
        .await
        .unwrap();
    eventually("exo audit clean again", Duration::from_secs(60), || async {
        (audit(&["-n", acme]).0 == 0).then_some(())
    })
    .await;
    eventually(
        "the Fleet's audit conditions clear",
        Duration::from_secs(60),
        || async {
            let c = fleet_conditions(&fx).await;
            (c.len() == 5 && c.iter().all(|(_, s)| s == "True")).then_some(())
        },
    )
    .await;
    eventually(
        "AuditCleared Events and a zero metric",
        Duration::from_secs(30),
        || async {
            let cleared = support::events(acme, "AuditCleared").await.len();
            (cleared >= want.len() && op.metric("exo_operator_audit_findings") == Some(0))
                .then_some(())
        },
    )
    .await;
    no_canary("the operator's log", &op.log());
}

/// The cluster verbs take kubectl's `--kubeconfig` and `--context`, and
/// name the one at fault.
#[test]
fn kubeconfig_and_context_flags_choose_the_cluster() {
    // The audit lists exo's kinds: on a fresh environment this may run
    // before another test installed their CRDs.
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        support::install_crds(&support::client().await).await;
    });
    let kc = support::env().kubeconfig.display().to_string();
    let run = |args: &[&str]| {
        let out = Command::new(EXO)
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .output()
            .expect("run exo");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&[
        "audit",
        "--kubeconfig",
        &kc,
        "--context",
        "exo-testenv",
        "-n",
        "none",
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(&["audit", "--kubeconfig", &kc, "--context", "no-such-context"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no-such-context"), "{err}");
    let (code, err) = run(&["audit", "--kubeconfig", "/no/such/kubeconfig"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--kubeconfig /no/such/kubeconfig"), "{err}");
    let (code, err) = run(&["release", "status", "--kubeconfig", "/no/such/kubeconfig"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--kubeconfig /no/such/kubeconfig"), "{err}");
    let (code, err) = run(&["operator", "run", "--kubeconfig", "/no/such/kubeconfig"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--kubeconfig /no/such/kubeconfig"), "{err}");
}
