#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! One fleet repository, two Kubernetes clusters (issue 34): the shared
//! test environment's, and a second one of this binary's own
//! (`support::clusters`: its own etcd, apiserver, kwok and provisioner),
//! each with its own `exo operator run` following the same repository.
//!
//! Tests here run one at a time: the second cluster's ports are fixed.

mod support;

/// Polls (up to 120 s) until `$cond` (which may `.await`) holds.
macro_rules! eventually {
    ($what:expr, $cond:expr) => {{
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        loop {
            if $cond {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {}",
                $what
            );
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
    }};
}

use exo::crd::{Agent, RolloutPhase};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::Api;
use support::clusters::{Cluster, two_clusters};
use support::fleet::{Fixture, Operator, digest_of, example_files};

const OLD: &str = "2026.11.0";

/// The `uid` of `kube-system`: a cluster's identity, for telling two apart.
async fn cluster_uid(c: &Cluster) -> String {
    Api::<Namespace>::all(c.client.clone())
        .get("kube-system")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

/// What one cluster runs for the acme tenant's `assistant`, checked against
/// the release: its Agent's runtime image and its one pod, running.
async fn assistant_runs(c: &Cluster, tenant: &str, runtime: &str) -> Pod {
    let agent: Agent = c.api(tenant).get("assistant").await.unwrap();
    assert_eq!(agent.spec.runtime.image, runtime, "on {}", c.name);
    let pod = support::operator::wait_pod(
        &c.api(tenant),
        "agent",
        "assistant",
        &format!("the assistant's pod running on {}", c.name),
        |p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
    )
    .await;
    let spec = pod.spec.clone().unwrap();
    assert!(
        spec.node_name.is_some_and(|n| n.starts_with("kwok-node-")),
        "on {}: {pod:?}",
        c.name
    );
    let image = spec.containers.iter().find(|c| c.name == "runtime");
    assert_eq!(
        image.and_then(|c| c.image.as_deref()),
        Some(runtime),
        "on {}",
        c.name
    );
    pod
}

#[tokio::test]
async fn one_fleet_rolls_out_on_two_clusters_each_with_its_operator() {
    // Dropped last: after the fixture and the operators that use them.
    let (one, two) = two_clusters().await;
    assert_ne!(
        cluster_uid(&one).await,
        cluster_uid(&two).await,
        "two clusters, not one twice"
    );
    let prefix = format!("mc{}", &support::unique_suffix()[..5]);
    let files = example_files(&prefix);
    let runtime = digest_of(&files[&format!("releases/{OLD}.yaml")], "agent-runtime");
    let fx = Fixture::new(&prefix, files).await;
    two.follow(&fx).await;
    // A repository without clusters/: every tenant on every cluster,
    // whatever name each operator has.
    let ops: Vec<Operator> = [&one, &two]
        .iter()
        .map(|c| c.operator(&fx, "op-0", &["--cluster", &c.name]))
        .collect();

    for (c, op) in [&one, &two].into_iter().zip(&ops) {
        c.wait_all(&fx, OLD, op).await;
    }

    let acme = format!("{prefix}-acme");
    let mut pods = Vec::new();
    for (c, op) in [&one, &two].into_iter().zip(&ops) {
        let ro = c.wait_phase(&acme, OLD, RolloutPhase::Verified, op).await;
        let st = ro.current_status().unwrap();
        assert_eq!(
            st.applied_commit.as_deref(),
            Some(fx.repo.head.to_string().as_str()),
            "on {}: the repository's one commit",
            c.name
        );
        assert!(
            st.verified_releases.iter().any(|r| r == OLD),
            "on {}: {st:?}",
            c.name
        );
        pods.push(assistant_runs(c, &acme, &runtime).await);
    }
    // Each cluster made its own pod: the second operator did not act on
    // the first cluster, nor the first on the second.
    assert_ne!(pods[0].metadata.uid, pods[1].metadata.uid);
}

mod upstream_support;

const NEW: &str = "2026.11.1";

/// A cluster's declaration in the fleet repository.
fn cluster_file(name: &str, region: &str) -> Vec<u8> {
    format!(
        "apiVersion: autonomic.sh/v1alpha1\nkind: Cluster\nmetadata:\n  name: {name}\n  labels: {{env: prod, region: {region}}}\nspec:\n  capacity: {{maxTenants: 10, notes: test}}\n"
    )
    .into_bytes()
}

/// `tenant.yaml` with `placement` (YAML, indented under `spec:`) added.
fn placed(
    files: &std::collections::BTreeMap<String, Vec<u8>>,
    path: &str,
    placement: &str,
) -> Vec<u8> {
    let text = String::from_utf8(files[path].clone()).unwrap();
    let out = text.replacen("spec:\n", &format!("spec:\n  placement:\n{placement}"), 1);
    assert_ne!(out, text, "{path} has a spec");
    out.into_bytes()
}

fn tenant_file(prefix: &str, t: &str) -> String {
    format!("manifests/{prefix}-{t}/tenant.yaml")
}

/// `exo release ARGS --control-plane` in the fixture's clone, with the
/// control plane's admin token in a file.
fn plane_cli(
    fx: &Fixture,
    token_file: &std::path::Path,
    base: &str,
    args: &[&str],
) -> std::process::Output {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--control-plane", base, "--admin-token-file"]);
    let file = token_file.to_str().unwrap();
    all.push(file);
    fx.exo(&all)
}

/// The `Tenant` named `name` on cluster `c`, if any.
async fn tenant_on(c: &Cluster, name: &str) -> Option<exo::crd::tenant::Tenant> {
    Api::<exo::crd::tenant::Tenant>::all(c.client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

/// The scenario on two real clusters, two managed operators, one
/// control plane and one repository: placement (both, one, by selector),
/// the gate across clusters through the control plane (an operator
/// stopped makes its pairs unknown and holds the gate; restarted, the wave
/// completes), a `verify-first` move, and a bad placement refused.
#[tokio::test]
async fn tenants_are_placed_gated_and_moved_across_two_clusters() {
    let (one, two) = two_clusters().await;
    let prefix = format!("mp{}", &support::unique_suffix()[..5]);
    let mut files = example_files(&prefix);
    // Tenant files as the example has them, for the edits below.
    let base = files.clone();
    files.insert(
        "clusters/eu-west.yaml".into(),
        cluster_file("eu-west", "eu"),
    );
    files.insert(
        "clusters/us-east.yaml".into(),
        cluster_file("us-east", "us"),
    );
    for (t, placement) in [
        ("platform", "    clusters: [eu-west, us-east]\n"),
        ("acme", "    selector: {matchLabels: {env: prod}}\n"),
        ("globex", "    clusters: [eu-west]\n"),
        ("initech", "    clusters: [us-east]\n"),
        (
            "umbrella",
            "    clusters: [eu-west]\n    move: verify-first\n",
        ),
    ] {
        let path = tenant_file(&prefix, t);
        let text = placed(&files, &path, placement);
        files.insert(path, text);
    }
    let fx = Fixture::new(&prefix, files.clone()).await;
    let lint = fx.exo(&["release", "lint"]);
    assert!(lint.status.success(), "{}", support::fleet::out(&lint));
    two.follow(&fx).await;

    let cp = upstream_support::ControlPlane::start(&[]);
    let (admin, _) = cp.create_admin_token();
    let admin_file = fx.work.path().join("admin-token");
    std::fs::write(&admin_file, &admin).unwrap();
    let tokens: Vec<String> = [&one, &two]
        .iter()
        .map(|c| cp.create_deployment(&c.name))
        .collect();
    let managed = |c: &Cluster, token: &str, extra: &[&str]| {
        c.operator_env(
            &fx,
            "op",
            extra,
            &[
                ("AUTONOMIC_MANAGED", "true"),
                ("AUTONOMIC_BASE_URL", cp.base.as_str()),
                ("AUTONOMIC_AUTH_TOKEN", token),
            ],
        )
    };
    // eu-west is named by its flag; us-east learns its name from the
    // control plane (its token's deployment).
    let op_eu = managed(&one, &tokens[0], &["--cluster", "eu-west"]);
    let mut op_us = managed(&two, &tokens[1], &[]);
    let t = |name: &str| format!("{prefix}-{name}");

    // Placement: each cluster runs what is placed on it, and nothing else.
    for name in ["platform", "acme", "globex", "umbrella"] {
        one.wait_phase(&t(name), OLD, RolloutPhase::Verified, &op_eu)
            .await;
    }
    for name in ["platform", "acme", "initech"] {
        two.wait_phase(&t(name), OLD, RolloutPhase::Verified, &op_us)
            .await;
    }
    assert!(
        two.rollout(&t("globex")).await.is_none(),
        "globex is placed on eu-west only"
    );
    assert!(tenant_on(&two, &t("globex")).await.is_none());
    assert!(tenant_on(&two, &t("umbrella")).await.is_none());
    assert!(
        one.rollout(&t("initech")).await.is_none(),
        "initech is placed on us-east only"
    );
    assert!(tenant_on(&one, &t("initech")).await.is_none());
    let ns = Api::<Namespace>::all(one.client.clone());
    assert!(
        ns.get_opt(&t("initech")).await.unwrap().is_none(),
        "no namespace for initech on eu-west"
    );

    // A fleet with clusters/ is not gated from one cluster.
    let local = fx.exo(&["release", "promote", NEW, "--wave", "low-risk", "--no-push"]);
    assert!(!local.status.success());
    assert!(
        support::fleet::out(&local).contains("--control-plane"),
        "{}",
        support::fleet::out(&local)
    );

    // The canary (platform, on both) moves to NEW while us-east's operator
    // is down: its pair is unknown, and the gate of low-risk holds.
    op_us.kill9();
    let canary = plane_cli(
        &fx,
        &admin_file,
        &cp.base,
        &["release", "promote", NEW, "--wave", "canary"],
    );
    assert!(canary.status.success(), "{}", support::fleet::out(&canary));
    one.wait_phase(&t("platform"), NEW, RolloutPhase::Verified, &op_eu)
        .await;
    let platform_us = format!("{}@us-east", t("platform"));
    eventually!("the control plane to see us-east offline", {
        let held = plane_cli(
            &fx,
            &admin_file,
            &cp.base,
            &["release", "promote", NEW, "--wave", "low-risk"],
        );
        let text = support::fleet::out(&held);
        !held.status.success()
            && text.contains(&format!(
                "{platform_us} is unknown: cluster us-east is offline"
            ))
    });
    let status = plane_cli(&fx, &admin_file, &cp.base, &["release", "status"]);
    let shown = support::fleet::out(&status);
    assert!(status.status.success(), "{shown}");
    assert!(
        shown.contains("offline") && shown.contains("unknown (offline"),
        "{shown}"
    );
    let before = fx.served_waves();
    assert_eq!(
        before.spec.low_risk.release, OLD,
        "a refused gate commits nothing"
    );

    // Back: us-east rolls its canary and the gate lets low-risk go.
    let op_us = managed(&two, &tokens[1], &[]);
    two.wait_phase(&t("platform"), NEW, RolloutPhase::Verified, &op_us)
        .await;
    eventually!("the gate of low-risk to open", {
        let out = plane_cli(
            &fx,
            &admin_file,
            &cp.base,
            &["release", "promote", NEW, "--wave", "low-risk"],
        );
        out.status.success()
    });
    one.wait_phase(&t("acme"), NEW, RolloutPhase::Verified, &op_eu)
        .await;
    two.wait_phase(&t("acme"), NEW, RolloutPhase::Verified, &op_us)
        .await;

    // verify-first: umbrella moves to us-east. While us-east cannot verify
    // it (its operator is down), eu-west keeps it and says why.
    drop(op_us);
    let moved = placed(
        &base,
        &tenant_file(&prefix, "umbrella"),
        "    clusters: [us-east]\n    move: verify-first\n",
    );
    let commit = fx.push(
        &[(&tenant_file(&prefix, "umbrella"), Some(&moved))],
        "move umbrella to us-east",
    );
    let fleet_eu: Api<exo::crd::Fleet> = one.api(&fx.ns.name);
    eventually!("eu-west to apply the move and hold umbrella", {
        let f = fleet_eu.get("fleet").await.unwrap();
        let st = f.status.unwrap_or_default();
        st.applied_commit.as_deref() == Some(commit.as_str())
            && st.conditions.iter().any(|c| {
                c.type_ == "Ready"
                    && c.message.contains(&format!(
                        "{} stays until it is verified on us-east",
                        t("umbrella")
                    ))
            })
    });
    let kept = tenant_on(&one, &t("umbrella")).await.unwrap();
    assert!(
        !kept.spec.offboarding,
        "held while us-east cannot verify it"
    );
    let op_us = managed(&two, &tokens[1], &[]);
    // Order: once eu-west offboards umbrella, us-east has it verified.
    let name = t("umbrella");
    eventually!("eu-west to offboard umbrella after us-east verified it", {
        let off = tenant_on(&one, &name)
            .await
            .is_none_or(|x| x.spec.offboarding);
        if off {
            let verified = two.rollout(&name).await.is_some_and(|r| {
                r.current_status()
                    .is_some_and(|s| s.phase == Some(RolloutPhase::Verified))
            });
            assert!(
                verified,
                "eu-west offboarded {name} before us-east verified it"
            );
        }
        off
    });
    two.wait_phase(&t("umbrella"), OLD, RolloutPhase::Verified, &op_us)
        .await;

    // Bad input: a tenant placed on an undeclared cluster. Lint names it;
    // the operators apply nothing of that commit.
    let bad = placed(
        &base,
        &tenant_file(&prefix, "globex"),
        "    clusters: [ap-south]\n",
    );
    std::fs::write(fx.root().join(tenant_file(&prefix, "globex")), &bad).unwrap();
    let lint = fx.exo(&["release", "lint"]);
    assert!(!lint.status.success());
    let said = support::fleet::out(&lint);
    assert!(
        said.contains("spec.placement.clusters[0]") && said.contains("[unknown-cluster]"),
        "{said}"
    );
    let refused = fx.push(
        &[(&tenant_file(&prefix, "globex"), Some(&bad))],
        "place globex nowhere known",
    );
    eventually!("eu-west to refuse the commit", {
        let f = fleet_eu.get("fleet").await.unwrap();
        let st = f.status.unwrap_or_default();
        st.conditions.iter().any(|c| {
            c.type_ == "Ready"
                && c.reason == "LintFailed"
                && c.message.contains(&refused[..7])
                && c.message.contains("unknown-cluster")
        }) && st.applied_commit.as_deref() != Some(refused.as_str())
    });
    assert!(
        one.rollout(&t("globex")).await.is_some(),
        "globex stays where it was"
    );
    drop(op_eu);
    drop(op_us);
}
