#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! One fleet repository, two Kubernetes clusters (issue 34): the shared
//! test environment's, and a second one of this binary's own
//! (`support::clusters`: its own etcd, apiserver, kwok and provisioner),
//! each with its own `exo operator run` following the same repository.
//!
//! Tests here run one at a time: the second cluster's ports are fixed.

mod support;

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
