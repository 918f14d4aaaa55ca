#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! GitOps wave rollouts end to end: a real git server holds the fleet, a
//! real `exo operator run` process follows it, kwok runs the pods and their
//! exec, and the `exo release` CLI promotes, rolls out and rolls back.
//!
//! Tests here run one at a time (each runs an operator that watches the
//! whole cluster), with tenant namespaces prefixed per test.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use exo::crd::{Agent, Fleet as FleetCr, RolloutPhase, StepState};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use support::fleet::{Fixture, Operator, add_env, digest_of, example_files, out, repo_root, tail};
use support::{TestNamespace, eventually};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";

#[tokio::test]
async fn three_waves_roll_out_then_the_canary_rolls_back() {
    let _serial = SERIAL.lock().await;
    let files = example_files("rw");
    let new_runtime = digest_of(&files[&format!("releases/{NEW}.yaml")], "agent-runtime");
    let fx = Fixture::new("rw", files).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");

    // The initial state: every wave on the old release, verified.
    fx.wait_all(OLD, &op).await;

    let o = fx.exo(&["release", "rollout", NEW, "--timeout", "2m"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", tail(&op.log()));
    for w in ["canary", "low-risk", "fleet"] {
        assert!(
            text.contains(&format!("== wave {w}: verified on {NEW}")),
            "{text}"
        );
    }
    let waves = fx.served_waves();
    assert_eq!(waves.spec.fleet.release, NEW);
    assert_eq!(waves.spec.canary.history, [OLD]);

    for t in fx.tenants() {
        let ro = fx.wait_phase(&t, NEW, RolloutPhase::Verified, &op).await;
        let status = ro.status.unwrap();
        assert!(status.steps.iter().all(|s| s.state == StepState::Done));
        assert_eq!(status.verified_releases, [NEW, OLD]);
        // The pod really runs the new image, and only the new baseline is left.
        let pods: Api<Pod> = Api::namespaced(fx.ns.client.clone(), &t);
        let agent_pod = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("agent-"))
            })
            .expect("an agent pod");
        let runtime = agent_pod
            .spec
            .unwrap()
            .containers
            .into_iter()
            .find(|c| c.name == "runtime")
            .unwrap();
        assert_eq!(runtime.image.as_deref(), Some(new_runtime.as_str()));
    }
    let acme_cms: Vec<String> = Api::<ConfigMap>::namespaced(fx.ns.client.clone(), "rw-acme")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("agent-baseline-"))
        .collect();
    assert_eq!(
        acme_cms,
        ["agent-baseline-10c9acf82b"],
        "the old version is collected once no pod uses it"
    );

    // Rollback: the canary returns to the release it verified before.
    let o = fx.exo(&["release", "rollback", "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("rolled back canary from {NEW} to {OLD}")),
        "{}",
        out(&o)
    );
    assert_eq!(fx.served_waves().spec.canary.release, OLD);
    fx.wait_phase("rw-platform", OLD, RolloutPhase::Verified, &op)
        .await;
    let agent: Agent = Api::namespaced(fx.ns.client.clone(), "rw-platform")
        .get("fleet-ops")
        .await
        .unwrap();
    assert!(
        agent
            .spec
            .runtime
            .image
            .ends_with("480077eb0b3371e681147d241bb265481446f4848f96f31b71bf9fd078a8dabf")
    );
    // The other waves stay where they were.
    assert_eq!(fx.served_waves().spec.fleet.release, NEW);
}

#[tokio::test]
async fn canary_content_mismatch_stops_the_rollout_and_gates_the_next_wave() {
    let _serial = SERIAL.lock().await;
    let mut files = example_files("cm");
    // The new release gets its own platform baseline; the canary's pods will
    // see that version's files with a byte appended (the test environment's
    // stand-in for a node serving the wrong content).
    let mut src = BTreeMap::new();
    for (path, content) in &files {
        if let Some(name) = path.strip_prefix("configmaps/platform-baseline/") {
            src.insert(name.to_owned(), content.clone());
        }
    }
    src.insert("release-notes.md".into(), b"2026.11.1\n".to_vec());
    let baseline = exo::fleet::configmap::Baseline::new("platform-baseline", src.clone());
    for (name, content) in &src {
        files.insert(
            format!("configmaps/platform-baseline@{NEW}/{name}"),
            content.clone(),
        );
    }
    let rel = format!("releases/{NEW}.yaml");
    let text = String::from_utf8(files[&rel].clone()).unwrap();
    let old_cm = exo::fleet::configmap::Baseline::new(
        "platform-baseline",
        files
            .iter()
            .filter_map(|(p, c)| {
                p.strip_prefix("configmaps/platform-baseline/")
                    .map(|n| (n.to_owned(), c.clone()))
            })
            .collect(),
    );
    let text = text
        .replace(&old_cm.version(), &baseline.version())
        .replace(&old_cm.sha256, &baseline.sha256);
    files.insert(rel, text.into_bytes());
    add_env(
        &mut files,
        "manifests/cm-platform/fleet-ops.yaml",
        "runtime",
        "EXO_TEST_TAMPER_CONFIGMAP",
        &baseline.version(),
    );

    let fx = Fixture::new("cm", files).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;

    let o = fx.exo(&["release", "rollout", NEW, "--timeout", "2m"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "== wave canary: tenant cm-platform failed: live content of pod agent-fleet-ops"
        ),
        "{text}"
    );
    assert!(!text.contains("== wave low-risk: promoting"), "{text}");

    let failed = fx
        .wait_phase("cm-platform", NEW, RolloutPhase::Failed, &op)
        .await
        .status
        .unwrap();
    assert_eq!(
        failed.current_step.as_deref(),
        Some("verified/agent-runtime")
    );
    assert!(failed.message.unwrap().contains(&baseline.sha256));
    // Later waves are untouched: still verified on the old release.
    let waves = fx.served_waves();
    assert_eq!(
        (
            waves.spec.low_risk.release.as_str(),
            waves.spec.fleet.release.as_str()
        ),
        (OLD, OLD)
    );
    for t in ["cm-acme", "cm-globex", "cm-initech", "cm-umbrella"] {
        fx.wait_phase(t, OLD, RolloutPhase::Verified, &op).await;
    }

    // The max-failures gate refuses to promote past the failed canary.
    let o = fx.exo(&["release", "promote", NEW, "--wave", "low-risk"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("gate max-failures: 1 tenant(s) of wave canary failed (cm-platform)"),
        "{}",
        out(&o)
    );
    assert_eq!(fx.served_waves().spec.low_risk.release, OLD);
}

#[tokio::test]
async fn promotion_is_refused_until_the_previous_wave_is_verified_and_soaked() {
    let _serial = SERIAL.lock().await;
    let mut files = example_files("gt");
    let rel = format!("releases/{NEW}.yaml");
    let text = String::from_utf8(files[&rel].clone()).unwrap();
    let text = text.replacen(
        "gates: {requireVerification: true, soakTime: 0s, maxFailures: 0}",
        "gates: {requireVerification: true, soakTime: 1h, maxFailures: 0}",
        1,
    );
    files.insert(rel, text.into_bytes());
    let fx = Fixture::new("gt", files).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;

    // Verification gate: the canary has not run the release at all.
    let o = fx.exo(&["release", "promote", NEW, "--wave", "low-risk"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(out(&o).contains("gate verification: wave canary is not verified on 2026.11.1 yet (gt-platform is Verified on 2026.11.0)"), "{}", out(&o));

    let o = fx.exo(&["release", "promote", NEW, "--wave", "canary"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    fx.wait_phase("gt-platform", NEW, RolloutPhase::Verified, &op)
        .await;

    // Soak gate: verified, but not for an hour.
    let o = fx.exo(&["release", "promote", NEW, "--wave", "low-risk"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("gate soak-time: wave canary has been verified for"),
        "{}",
        out(&o)
    );
    assert!(out(&o).contains("3600s required"), "{}", out(&o));
    assert_eq!(fx.served_waves().spec.low_risk.release, OLD);
}

#[tokio::test]
async fn image_id_mismatch_fails_the_pods_rolled_step() {
    let _serial = SERIAL.lock().await;
    let mut files = example_files("im");
    let wrong = format!("127.0.0.1:25000/exo/broker@sha256:{}", "d".repeat(64));
    add_env(
        &mut files,
        "manifests/im-acme/broker.yaml",
        "container",
        "EXO_TEST_IMAGE_ID",
        &wrong,
    );
    let fx = Fixture::new("im", files).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");

    let ro = fx
        .wait_phase("im-acme", OLD, RolloutPhase::Failed, &op)
        .await;
    let status = ro.status.unwrap();
    assert_eq!(status.current_step.as_deref(), Some("pods-rolled/broker"));
    let msg = status.message.unwrap();
    assert!(
        msg.contains(&format!("runs sha256:{}", "d".repeat(64)))
            && msg.contains("but the release pins sha256:f52395d8"),
        "{msg}"
    );
    let done: Vec<&str> = status
        .steps
        .iter()
        .filter(|s| s.state == StepState::Done)
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        done,
        [
            "network-isolated",
            "configmaps-published",
            "repointed/broker"
        ]
    );
    // Other tenants are not held back by one tenant's failure in their wave.
    fx.wait_phase("im-platform", OLD, RolloutPhase::Verified, &op)
        .await;
}

/// A kubeconfig for a ServiceAccount bound to the operator's RBAC from
/// `deploy/`, optionally without the verifier's `pods/exec` role.
async fn operator_kubeconfig(ns: &TestNamespace, dir: &Path, with_exec: bool) -> PathBuf {
    let client = &ns.client;
    let sa_name = "exo-operator";
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": sa_name}})).unwrap();
    let _ = ns
        .api::<ServiceAccount>()
        .create(&PostParams::default(), &sa)
        .await;
    let pp = PatchParams::apply("exo-tests").force();
    let mut docs = Vec::new();
    for f in ["deploy/rbac.yaml", "deploy/rbac-gitops.yaml"] {
        let text = std::fs::read_to_string(repo_root().join(f)).unwrap();
        for doc in text.split("\n---\n") {
            let v: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
            if v.is_object() {
                docs.push(v);
            }
        }
    }
    let suffix = &ns.name;
    for mut d in docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_owned();
        let name = format!("{}-{suffix}", d["metadata"]["name"].as_str().unwrap());
        d["metadata"]["name"] = name.clone().into();
        match kind.as_str() {
            "ClusterRole" => {
                if !with_exec && name.starts_with("exo-operator-verifier") {
                    continue;
                }
                let r: ClusterRole = serde_json::from_value(d).unwrap();
                Api::<ClusterRole>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&r))
                    .await
                    .unwrap();
            }
            "ClusterRoleBinding" => {
                if !with_exec && name.starts_with("exo-operator-verifier") {
                    continue;
                }
                d["roleRef"]["name"] =
                    format!("{}-{suffix}", d["roleRef"]["name"].as_str().unwrap()).into();
                d["subjects"] = serde_json::json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": ns.name}]);
                let b: ClusterRoleBinding = serde_json::from_value(d).unwrap();
                Api::<ClusterRoleBinding>::all(client.clone())
                    .patch(&name, &pp, &Patch::Apply(&b))
                    .await
                    .unwrap();
            }
            "Role" => {
                // The leader-election Role: our Lease name, our namespace.
                d["metadata"]["namespace"] = ns.name.clone().into();
                for rule in d["rules"].as_array_mut().unwrap() {
                    if rule.get("resourceNames").is_some() {
                        rule["resourceNames"] = serde_json::json!(["exo-rollout-test"]);
                    }
                }
                let r: Role = serde_json::from_value(d).unwrap();
                ns.api::<Role>()
                    .patch(&name, &pp, &Patch::Apply(&r))
                    .await
                    .unwrap();
            }
            "RoleBinding" => {
                d["metadata"]["namespace"] = ns.name.clone().into();
                d["roleRef"]["name"] =
                    format!("{}-{suffix}", d["roleRef"]["name"].as_str().unwrap()).into();
                d["subjects"] = serde_json::json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": ns.name}]);
                let b: RoleBinding = serde_json::from_value(d).unwrap();
                ns.api::<RoleBinding>()
                    .patch(&name, &pp, &Patch::Apply(&b))
                    .await
                    .unwrap();
            }
            _ => {}
        }
    }
    let tr = k8s_openapi::api::authentication::v1::TokenRequest {
        spec: Some(k8s_openapi::api::authentication::v1::TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token: k8s_openapi::api::authentication::v1::TokenRequest = ns
        .api::<ServiceAccount>()
        .create_subresource("token", sa_name, &PostParams::default(), &tr)
        .await
        .expect("token request");
    let token = token.status.unwrap().token.unwrap();
    let admin = std::fs::read_to_string(&support::env().kubeconfig).unwrap();
    let server = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .unwrap()
        .to_owned();
    let ca = admin
        .lines()
        .find_map(|l| l.trim().strip_prefix("certificate-authority: "))
        .unwrap()
        .to_owned();
    let path = dir.join(if with_exec {
        "with-exec.kubeconfig"
    } else {
        "no-exec.kubeconfig"
    });
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: {server}, certificate-authority: {ca}}}\nusers:\n- name: u\n  user: {{token: {token}}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    path
}

#[tokio::test]
async fn missing_exec_rbac_waits_and_a_killed_operator_resumes_without_repeating_steps() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("rs", example_files("rs")).await;
    let dir = support::scratch();
    let no_exec = operator_kubeconfig(&fx.ns, dir.path(), false).await;
    let mut op = Operator::start(&fx.ns.name, &no_exec, "first");

    // Without pods/exec the verifier cannot act: Waiting, with the reason.
    let waiting = fx
        .wait_phase("rs-acme", OLD, RolloutPhase::Waiting, &op)
        .await
        .status
        .unwrap();
    assert_eq!(
        waiting.current_step.as_deref(),
        Some("verified/agent-runtime")
    );
    assert!(
        waiting.message.as_deref().unwrap().contains("forbidden")
            && waiting.message.as_deref().unwrap().contains("RBAC"),
        "{waiting:#?}"
    );
    let before: BTreeMap<String, (StepState, Option<String>, Option<String>)> = waiting
        .steps
        .iter()
        .map(|s| {
            let t = |x: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
                x.as_ref().map(|t| t.0.to_string())
            };
            (
                s.name.clone(),
                (s.state, t(&s.started_at), t(&s.finished_at)),
            )
        })
        .collect();
    // Still waiting a while later: not skipped, not failed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = fx.rollout("rs-acme").await.unwrap().status.unwrap();
    assert_eq!(still.phase, Some(RolloutPhase::Waiting));

    // kill -9 in the middle of the step, grant exec, start a new operator.
    op.kill9();
    let with_exec = operator_kubeconfig(&fx.ns, dir.path(), true).await;
    let op2 = Operator::start(&fx.ns.name, &with_exec, "second");
    let done = fx
        .wait_phase("rs-acme", OLD, RolloutPhase::Verified, &op2)
        .await
        .status
        .unwrap();
    for s in &done.steps {
        let (state, started, finished) = &before[&s.name];
        let t = |x: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            x.as_ref().map(|t| t.0.to_string())
        };
        if *state == StepState::Done {
            // Completed before the kill: untouched afterwards.
            assert_eq!(
                (&t(&s.started_at), &t(&s.finished_at)),
                (started, finished),
                "step {} was repeated",
                s.name
            );
        }
        if s.name == "verified/agent-runtime" {
            assert_eq!(
                &t(&s.started_at),
                started,
                "the waiting step resumed rather than restarted"
            );
        }
    }
    assert!(op2.log().contains("step done"), "{}", tail(&op2.log()));
    fx.wait_all(OLD, &op2).await;
}

/// Writes a raw tree (bypassing libgit2's name checks, as an attacker's
/// git would) and commits it on top of `main`.
fn commit_raw_tree(
    repo_path: &Path,
    mutate: impl FnOnce(&git2::Repository, git2::Oid) -> git2::Oid,
    message: &str,
) {
    let repo = git2::Repository::open_bare(repo_path).unwrap();
    let head = repo
        .find_reference("refs/heads/main")
        .unwrap()
        .peel_to_commit()
        .unwrap();
    let tree_id = mutate(&repo, head.tree_id());
    let tree = repo.find_tree(tree_id).unwrap();
    let sig = git2::Signature::now("mallory", "m@evil.invalid").unwrap();
    repo.commit(
        Some("refs/heads/main"),
        &sig,
        &sig,
        message,
        &tree,
        &[&head],
    )
    .unwrap();
}

fn raw_tree(entries: &[(&str, &str, git2::Oid)]) -> Vec<u8> {
    let mut body = Vec::new();
    for (mode, name, oid) in entries {
        body.extend_from_slice(format!("{mode} {name}\0").as_bytes());
        body.extend_from_slice(oid.as_bytes());
    }
    body
}

#[tokio::test]
async fn malicious_repositories_are_refused_and_the_last_good_state_stays() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("ev", example_files("ev")).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let fleets = fx.ns.api::<FleetCr>();
    let good = fleets
        .get("fleet")
        .await
        .unwrap()
        .status
        .unwrap()
        .applied_commit
        .unwrap();

    let refused = |expect: &'static str| {
        let fleets = fleets.clone();
        let good = good.clone();
        async move {
            eventually(
                &format!("the Fleet to refuse: {expect}"),
                Duration::from_secs(30),
                || {
                    let fleets = fleets.clone();
                    let good = good.clone();
                    async move {
                        let st = fleets.get("fleet").await.ok()?.status?;
                        let ready = st.conditions.iter().find(|c| c.type_ == "Ready")?.clone();
                        (ready.status == "False"
                            && ready.message.contains(expect)
                            && st.applied_commit.as_deref() == Some(good.as_str()))
                        .then_some(ready)
                    }
                },
            )
            .await
        }
    };

    // A symlink pointing out of the checkout.
    commit_raw_tree(
        &fx.repo.path,
        |repo, base| {
            let link = repo.blob(b"/etc/passwd").unwrap();
            let tree = repo.find_tree(base).unwrap();
            let mut b = repo.treebuilder(Some(&tree)).unwrap();
            b.insert("escape.yaml", link, 0o120000).unwrap();
            b.write().unwrap()
        },
        "add a symlink",
    );
    let c = refused("escape.yaml: symlinks are not allowed").await;
    assert_eq!(c.reason, "CheckoutRefused");

    // A `..` path component, written as raw git objects.
    commit_raw_tree(
        &fx.repo.path,
        |repo, base| {
            let blob = repo.blob(b"kind: Agent\n").unwrap();
            let inner = repo
                .odb()
                .unwrap()
                .write(
                    git2::ObjectType::Tree,
                    &raw_tree(&[("100644", "owned.yaml", blob)]),
                )
                .unwrap();
            let tree = repo.find_tree(base).unwrap();
            let mut entries: Vec<(String, String, git2::Oid)> = tree
                .iter()
                .filter(|e| e.name().ok() != Some("escape.yaml"))
                .map(|e| {
                    (
                        format!("{:o}", e.filemode()),
                        e.name().unwrap().to_owned(),
                        e.id(),
                    )
                })
                .collect();
            entries.insert(0, ("40000".into(), "..".into(), inner));
            let refs: Vec<(&str, &str, git2::Oid)> = entries
                .iter()
                .map(|(m, n, o)| (m.as_str(), n.as_str(), *o))
                .collect();
            repo.odb()
                .unwrap()
                .write(git2::ObjectType::Tree, &raw_tree(&refs))
                .unwrap()
        },
        "add a traversal",
    );
    let c = refused("..: path component leaves the checkout").await;
    assert_eq!(c.reason, "CheckoutRefused");

    // Nothing moved: every tenant is still verified on the good commit.
    for t in fx.tenants() {
        let ro = fx.wait_phase(&t, OLD, RolloutPhase::Verified, &op).await;
        assert_eq!(ro.spec.commit, good);
    }

    // A plain-http URL without allowInsecure is refused by policy.
    fleets
        .patch(
            "fleet",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"allowInsecure": false}})),
        )
        .await
        .unwrap();
    let c = refused("is not allowed; use https://").await;
    assert_eq!(c.reason, "URLRefused");
}
