#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! A change costs what it changes, end to end on the real apiserver, kwok,
//! the git daemon and `exo operator run`: a run records its changed set
//! before it acts, and rolls, execs into and writes only that set. Counted
//! through the operator's metrics and the apiserver's objects (pod uids,
//! annotations), never by timing.
//!
//! - one Agent edited in a tenant of several: one pod rolled, one exec, one
//!   Agent stamped;
//! - a baseline change: every Agent that mounts the map is rolled and
//!   exec'd, and no other workload;
//! - kill -9 after the set is recorded and before it is verified: the
//!   successor verifies the same set;
//! - a restarted operator with nothing changed writes nothing.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use exo::crd::{Agent, ChangedSet, Rollout, RolloutPhase, StepState};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use support::fleet::{Fixture, Operator, add_env, example_files};

const OLD: &str = "2026.11.0";
const VERIFY_EXECS: &str = "exo_operator_verify_execs_total";

/// Current, verified, and for commit `commit`.
fn verified_at(r: &Rollout, commit: &str) -> bool {
    r.current_status().is_some_and(|s| {
        s.phase == Some(RolloutPhase::Verified) && s.applied_commit.as_deref() == Some(commit)
    })
}

fn changed(r: &Rollout) -> ChangedSet {
    r.current_status()
        .and_then(|s| s.changed.clone())
        .expect("a current status records its changed set")
}

/// The manifest of an extra Agent `name`, made from `tenant`'s assistant;
/// without its baseline mount when `baseline` is false.
fn extra_agent(
    files: &BTreeMap<String, Vec<u8>>,
    tenant: &str,
    name: &str,
    baseline: bool,
) -> Vec<u8> {
    let text =
        String::from_utf8(files[&format!("manifests/{tenant}/assistant.yaml")].clone()).unwrap();
    assert!(text.contains("name: assistant"));
    let mut text = text.replace("name: assistant", &format!("name: {name}"));
    if !baseline {
        let start = text
            .find("  baseline:\n")
            .expect("the assistant mounts a baseline");
        let rest = &text[start + "  baseline:\n".len()..];
        // The block's indented lines.
        let len = rest
            .lines()
            .take_while(|l| l.starts_with("    "))
            .map(|l| l.len() + 1)
            .sum::<usize>();
        text.replace_range(start..start + "  baseline:\n".len() + len, "");
        assert!(!text.contains("baseline"), "{text}");
    }
    text.into_bytes()
}

/// Pod uid by workload name (`autonomic.sh/agent` or `autonomic.sh/tool`).
async fn pod_uids(pods: &Api<Pod>) -> BTreeMap<String, String> {
    pods.list(&ListParams::default().labels("app.kubernetes.io/managed-by=exo"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let labels = p.labels();
            let owner = labels
                .get("autonomic.sh/agent")
                .or_else(|| labels.get("autonomic.sh/tool"))?
                .clone();
            Some((owner, p.uid()?))
        })
        .collect()
}

/// Each Agent's `resourceVersion`: what was written to it.
async fn versions(agents: &Api<Agent>) -> BTreeMap<String, String> {
    agents
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|a| (a.name_any(), a.resource_version().unwrap_or_default()))
        .collect()
}

fn differing(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut out: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn a_change_rolls_checks_and_writes_only_what_it_changes() {
    let mut files = example_files("gq");
    let t = "gq-acme";
    for (name, baseline) in [("h1", true), ("h2", true), ("h3", false)] {
        let body = extra_agent(&files, t, name, baseline);
        files.insert(format!("manifests/{t}/{name}.yaml"), body);
    }
    let fx = Fixture::new("gq", files.clone()).await;
    let kubeconfig = support::env().kubeconfig.clone();
    let mut op = Operator::start(&fx.ns.name, &kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let first = fx.rollout(t).await.unwrap();
    assert!(changed(&first).all, "a first run changes everything");
    let full_check = first.status.as_ref().unwrap().last_full_check.clone();
    assert!(
        full_check.is_some(),
        "a run over everything is a full check"
    );

    let pods: Api<Pod> = Api::namespaced(fx.ns.client.clone(), t);
    let agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), t);

    // 1. One Agent edited: one pod rolled, one exec, one Agent written.
    let uids = pod_uids(&pods).await;
    let written = versions(&agents).await;
    let execs = op.metric(VERIFY_EXECS).unwrap();
    let path = format!("manifests/{t}/h2.yaml");
    let mut edit = files.clone();
    add_env(&mut edit, &path, "runtime", "EDIT", "1");
    let c1 = fx.push(&[(path.as_str(), Some(edit[&path].as_slice()))], "edit h2");
    fx.request_sync().await;
    let r = fx
        .wait_until(t, "h2's edit verified", &op, |r| verified_at(r, &c1))
        .await;
    let set = changed(&r);
    assert!(!set.all, "{set:?}");
    assert_eq!(set.agents, ["h2"], "{set:?}");
    assert!(set.tools.is_empty(), "{set:?}");
    assert_eq!(
        op.metric(VERIFY_EXECS).unwrap() - execs,
        1,
        "one exec for one changed pod"
    );
    assert_eq!(differing(&uids, &pod_uids(&pods).await), ["h2"]);
    // Only the edited Agent is written (its spec, its status); the run's
    // result is in the Rollout's status, not stamped on every Agent.
    assert_eq!(differing(&written, &versions(&agents).await), ["h2"]);
    let status = r.status.as_ref().unwrap();
    assert_eq!(status.release.as_deref(), Some(OLD), "{status:?}");
    assert!(status.verified_at.is_some(), "{status:?}");
    assert_eq!(
        r.status.as_ref().unwrap().last_full_check,
        full_check,
        "a run over one Agent is not a full check"
    );

    // 2. A baseline change (a release that moves only the agent baseline):
    // every Agent that mounts it rolls and is exec'd, and nothing else.
    let uids = pod_uids(&pods).await;
    let execs = op.metric(VERIFY_EXECS).unwrap();
    let old = String::from_utf8(files["releases/2026.11.0.yaml"].clone()).unwrap();
    let new = String::from_utf8(files["releases/2026.11.1.yaml"].clone()).unwrap();
    let pinned = |text: &str, key: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap()
            .to_owned()
    };
    let release = old
        .replace("2026.11.0", "2026.11.2")
        .replace(
            &pinned(&old, "version: agent-baseline"),
            &pinned(&new, "version: agent-baseline"),
        )
        .replace(&pinned(&old, "sha256: "), &pinned(&new, "sha256: "));
    let waves = String::from_utf8(files["releases/waves.yaml"].clone()).unwrap();
    let waves = waves.replacen(
        "  low-risk:\n    release: 2026.11.0",
        "  low-risk:\n    release: 2026.11.2",
        1,
    );
    assert!(waves.contains("2026.11.2"), "{waves}");
    let c2 = fx.push(
        &[
            ("releases/2026.11.2.yaml", Some(release.as_bytes())),
            ("releases/waves.yaml", Some(waves.as_bytes())),
        ],
        "a baseline-only release for low-risk",
    );
    fx.request_sync().await;
    let r = fx
        .wait_until(t, "the baseline change verified", &op, |r| {
            verified_at(r, &c2)
        })
        .await;
    let set = changed(&r);
    assert_eq!(set.agents, ["assistant", "h1", "h2"], "{set:?}");
    assert!(set.tools.is_empty(), "{set:?}");
    assert_eq!(set.config_maps.len(), 1, "{set:?}");
    assert_eq!(
        op.metric(VERIFY_EXECS).unwrap() - execs,
        3,
        "one exec per pod that mounts the map"
    );
    assert_eq!(
        differing(&uids, &pod_uids(&pods).await),
        ["assistant", "h1", "h2"]
    );

    // 3. kill -9 once the set is recorded and before it is verified: the
    // successor verifies the same set. An attempt whose kill came after the
    // run ended is made again with another edit.
    let path = format!("manifests/{t}/h1.yaml");
    let mut attempt = 0;
    let (op, c3) = loop {
        attempt += 1;
        assert!(
            attempt <= 5,
            "no kill landed between the record and the verification"
        );
        add_env(&mut edit, &path, "runtime", &format!("EDIT{attempt}"), "2");
        let commit = fx.push(&[(path.as_str(), Some(edit[&path].as_slice()))], "edit h1");
        fx.request_sync().await;
        let recorded = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                if let Some(r) = fx.rollout(t).await
                    && let Some(s) = r.current_status()
                    && s.applied_commit.as_deref() == Some(commit.as_str())
                {
                    return r;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the run for h1's edit started");
        op.kill9();
        assert_eq!(changed(&recorded).agents, ["h1"], "{:?}", recorded.status);
        // Read again now that nothing writes it: did the run end before?
        let after = fx.rollout(t).await.unwrap();
        let landed = after.status.as_ref().unwrap().phase != Some(RolloutPhase::Verified);
        op = Operator::start(&fx.ns.name, &kubeconfig, &format!("b{attempt}"));
        if landed {
            break (op, commit);
        }
        fx.wait_until(t, "h1's edit verified", &op, |r| verified_at(r, &commit))
            .await;
    };
    let r = fx
        .wait_until(t, "h1's edit verified by the successor", &op, |r| {
            verified_at(r, &c3)
        })
        .await;
    assert_eq!(changed(&r).agents, ["h1"]);
    assert!(
        r.status
            .as_ref()
            .unwrap()
            .steps
            .iter()
            .all(|s| s.state == StepState::Done)
    );
    assert_eq!(
        op.metric(VERIFY_EXECS).unwrap(),
        1,
        "the successor execs into the one pod of the recorded set"
    );

    // 4. Restarted with nothing changed: nothing written. The operator
    // watches every namespace, and another suite's tenants may still be
    // going away (their Agents' and AgentFS' finalizers are any operator's
    // to remove), so this tenant's Agents, pods, Tenant and Rollout are
    // checked at the apiserver, and the GitOps engine's writes (its own
    // Fleet only) by its metrics.
    let tenants: Api<exo::crd::tenant::Tenant> = Api::all(fx.ns.client.clone());
    let versions = || async {
        let mut v: Vec<String> = Vec::new();
        for a in agents.list(&ListParams::default()).await.unwrap() {
            v.push(format!(
                "Agent/{}@{}",
                a.name_any(),
                a.resource_version().unwrap()
            ));
        }
        for p in pods.list(&ListParams::default()).await.unwrap() {
            v.push(format!(
                "Pod/{}@{}",
                p.name_any(),
                p.resource_version().unwrap()
            ));
        }
        let tenant = tenants.get(t).await.unwrap();
        v.push(format!("Tenant/{t}@{}", tenant.resource_version().unwrap()));
        let ro = fx.rollout(t).await.unwrap();
        v.push(format!("Rollout/{t}@{}", ro.resource_version().unwrap()));
        v.sort();
        v
    };
    let before = versions().await;
    let mut op = op;
    op.kill9();
    let op = Operator::start(&fx.ns.name, &kubeconfig, "c");
    support::eventually(
        "the restarted operator synced",
        Duration::from_secs(60),
        || async { (op.metric("exo_operator_ready") == Some(1)).then_some(()) },
    )
    .await;
    // Two Fleet intervals (2 s each): a sync and a drift check each.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (_, page) = support::operator::http_get(&op.addr, "/metrics").unwrap();
    let engine: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("exo_operator_api_writes_total{"))
        .filter(|l| l.contains("controller=\"Rollout\""))
        .collect();
    assert!(
        engine.is_empty(),
        "a restarted operator with nothing to change writes nothing:\n{}",
        engine.join("\n")
    );
    assert_eq!(
        versions().await,
        before,
        "a restarted operator leaves the tenant's Agents and pods as they were"
    );
    let r = fx.rollout(t).await.unwrap();
    assert!(verified_at(&r, &c3));
}
