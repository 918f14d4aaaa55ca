#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! The cluster's own control plane failing under the operator, on a test
//! environment of this binary's own (`support::private_env`: the shared one
//! serves the other suites), with the real etcd, kube-apiserver and kwok:
//!
//! 1. **The apiserver down for a minute in the middle of a wave**, then
//!    back, and then etcd restarted under it. The operator (the same
//!    process throughout) steps down while it cannot renew its lease, takes
//!    it again, and its saga resumes: the steps done before the outage keep
//!    their finish times, and `exo release rollout` waits the outage out
//!    and ends with every wave verified.
//! 2. **Watches expired.** With the operator frozen, the apiserver is
//!    restarted, an agent's pod and a baseline ConfigMap version it mounts
//!    are deleted, etcd is compacted and the apiserver restarted again, so
//!    that every watch resumes from a revision that is gone (410 Gone).
//!    The operator relists and misses neither delete: the pod and the
//!    ConfigMap are back.
//!
//! `EXO_CHAOS_APISERVER_DOWN` sets the outage in seconds (60).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use exo::crd::{Rollout, RolloutPhase, StepState};

use exo::meta::{LABEL_AGENT, LABEL_MANAGED_BY, MANAGED_BY};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use support::fleet::{Fixture, Operator, example_files, out, tail};
use support::private_env::PrivateEnv;

const OLD: &str = "2026.11.0";
const NEW: &str = "2026.11.1";

fn still_runs(op: &mut Operator) {
    assert!(
        op.child.try_wait().unwrap().is_none(),
        "the operator exited; it must ride the outage out\n{}",
        tail(&op.log())
    );
}

/// Every tenant's done steps on `release` for its current spec, with their
/// finish times.
async fn done_steps(fx: &Fixture, release: &str) -> BTreeMap<(String, String), String> {
    let mut done = BTreeMap::new();
    for t in fx.tenants() {
        let Some(ro) = fx.rollout(&t).await else {
            continue;
        };
        let Some(st) = ro.current_status() else {
            continue;
        };
        if st.release.as_deref() != Some(release) {
            continue;
        }
        for s in st.steps.iter().filter(|s| s.state == StepState::Done) {
            let at = s.finished_at.as_ref().map(|t| t.0.to_string());
            done.insert((t.clone(), s.name.clone()), at.unwrap_or_default());
        }
    }
    done
}

/// Waits until some tenant's saga runs `release` and has not finished: the
/// middle of a wave. Its first status write (the run's changed set, before
/// any step acts) says so; the steps done since need not be written yet (a
/// wait shows once it has lasted a second, and on kwok a small tenant's
/// steps are done sooner).
async fn mid_wave(fx: &Fixture, release: &str, op: &Operator) -> String {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        for t in fx.tenants() {
            let Some(ro): Option<Rollout> = fx.rollout(&t).await else {
                continue;
            };
            if let Some(st) = ro.current_status()
                && st.release.as_deref() == Some(release)
                && st.phase == Some(RolloutPhase::Progressing)
            {
                return t;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no tenant got to the middle of its saga on {release}\n{}",
            tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_operator_rides_out_the_apiserver_and_etcd_going_down_and_expired_watches() {
    // Dropped last: after the fixture and the operator that use it.
    let env = PrivateEnv::up("chaos-apiserver");
    let outage = Duration::from_secs(
        std::env::var("EXO_CHAOS_APISERVER_DOWN")
            .ok()
            .map(|s| s.parse().expect("EXO_CHAOS_APISERVER_DOWN: seconds"))
            .unwrap_or(60),
    );
    let prefix = format!("ca{}", &support::unique_suffix()[..5]);
    let fx = Fixture::new(&prefix, example_files(&prefix)).await;
    let mut op = Operator::start(&fx.ns.name, &env.kubeconfig(), "op-0");
    fx.wait_all(OLD, &op).await;

    // 1. The apiserver down in the middle of a wave, then etcd restarted.
    let mut cli = fx.rollout_cli(NEW);
    let tenant = mid_wave(&fx, NEW, &op).await;
    let before = done_steps(&fx, NEW).await;
    env.stop("kube-apiserver");
    println!(
        "apiserver stopped with {tenant} mid-saga ({} steps done in all); down for {outage:?}",
        before.len()
    );
    tokio::time::sleep(outage).await;
    still_runs(&mut op);
    assert!(
        cli.try_wait().unwrap().is_none(),
        "exo release rollout gave up during the outage: {}",
        cli.wait_with_output().map(|o| out(&o)).unwrap_or_default()
    );
    env.start("kube-apiserver");
    println!("apiserver back");
    support::eventually(
        "the operator to lead again",
        Duration::from_secs(60),
        || async { (op.metric("exo_operator_leader") == Some(1)).then_some(()) },
    )
    .await;
    env.stop("etcd");
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.start("etcd");
    println!("etcd restarted");

    let deadline = Instant::now() + Duration::from_secs(600);
    let output = loop {
        if cli.try_wait().unwrap().is_some() {
            break out(&cli.wait_with_output().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "no convergence in 10 minutes\n{}",
            tail(&op.log())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        output.contains("== wave fleet: verified on 2026.11.1"),
        "exo release rollout:\n{output}\noperator log tail:\n{}",
        tail(&op.log())
    );
    assert!(
        output.contains("cannot read Rollouts") && output.contains("the cluster answers again"),
        "the CLI did not see the outage:\n{output}"
    );
    still_runs(&mut op);
    fx.wait_all(NEW, &op).await;
    let after = done_steps(&fx, NEW).await;
    for t in fx.tenants() {
        let st = fx.rollout(&t).await.unwrap().status.unwrap();
        assert!(
            st.steps.iter().all(|s| s.state == StepState::Done),
            "{t}: {st:#?}"
        );
    }
    for (key, at) in &before {
        assert_eq!(
            after.get(key),
            Some(at),
            "{key:?} was done again after the outage"
        );
    }
    let log = op.log();
    assert!(
        log.contains("stepping down") && log.matches("became leader").count() >= 2,
        "the operator did not step down and lead again:\n{}",
        tail(&log)
    );

    // 2. Watches resumed from a compacted revision: 410 Gone, a relist, and
    // no delete missed.
    let ns = format!("{prefix}-acme");
    let pods: Api<Pod> = Api::namespaced(fx.ns.client.clone(), &ns);
    let pod = pods
        .list(&ListParams::default().labels(LABEL_AGENT))
        .await
        .unwrap()
        .items
        .into_iter()
        .next()
        .expect("an agent pod in acme");
    let agent = pod.metadata.labels.as_ref().unwrap()[LABEL_AGENT].clone();
    let old_uid = pod.metadata.uid.clone().unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(fx.ns.client.clone(), &ns);
    let managed = cms
        .list(&ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}")))
        .await
        .unwrap();
    let version = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
        .find(|n| {
            managed
                .items
                .iter()
                .any(|c| c.metadata.name.as_ref() == Some(n))
        })
        .expect("the agent mounts a baseline version");
    println!("freezing the operator; then deleting pod of {agent} and ConfigMap {version}");

    op.signal("-STOP");
    env.stop("kube-apiserver");
    env.start("kube-apiserver");
    // A fresh client: the old one's connections went with the apiserver.
    let client = support::client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    pods.delete(
        pod.metadata.name.as_deref().unwrap(),
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    cms.delete(&version, &DeleteParams::default())
        .await
        .unwrap();
    let revision = env.compact();
    env.stop("kube-apiserver");
    env.start("kube-apiserver");
    let seen = op.log().len();
    op.signal("-CONT");
    println!("etcd compacted at revision {revision}; operator resumed");

    let new_pod = support::eventually(
        "a new pod for the agent whose pod was deleted",
        Duration::from_secs(90),
        || {
            let pods = pods.clone();
            let (agent, old_uid) = (agent.clone(), old_uid.clone());
            async move {
                let list = pods
                    .list(&ListParams::default().labels(&format!("{LABEL_AGENT}={agent}")))
                    .await
                    .ok()?;
                list.items.into_iter().find(|p| {
                    p.metadata.uid.as_deref() != Some(old_uid.as_str())
                        && p.metadata.deletion_timestamp.is_none()
                })
            }
        },
    )
    .await;
    support::eventually(
        "the deleted baseline version back",
        Duration::from_secs(90),
        || {
            let (cms, version) = (cms.clone(), version.clone());
            async move { cms.get_opt(&version).await.ok().flatten() }
        },
    )
    .await;
    still_runs(&mut op);
    let log = op.log();
    let resumed = &log[seen.min(log.len())..];
    assert!(
        resumed.contains("too old resource version") || resumed.contains("410"),
        "no watch was told its revision is gone (410); the scenario did not happen:\n{}",
        tail(resumed)
    );
    println!(
        "relisted: pod {} replaces the deleted one, ConfigMap {version} is back",
        new_pod.metadata.name.unwrap_or_default()
    );
    drop(fx);
    drop(op);
    drop(env);
}
