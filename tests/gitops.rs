#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! Git is the truth between releases too, end to end: a real git server
//! holds the fleet, a real `exo operator run` follows it, kwok runs the
//! pods and their exec. Every commit is applied and verified without a new
//! release; removals are pruned from the inventory; hand edits and deletes
//! are reverted; live content is checked again and healed or reported;
//! `prune: false` and `suspend: true` hold; a killed operator finishes a
//! prune without deleting anything twice; an inventory an older operator
//! kept in the Rollout's status is carried over and pruned from.
//!
//! Tests here run one at a time (each runs an operator that watches the
//! whole cluster), with tenant namespaces prefixed per test.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use exo::crd::{
    Agent, CONDITION_CONTENT_DRIFT, CONDITION_PRUNED, Inventory, InventoryEntry, InventoryKind,
    Rollout, RolloutPhase,
};
use exo::meta::ROLLOUT_NAME;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use support::eventually;
use support::fleet::{Fixture, Operator, example_files};
use support::operator::{pod_name, the_pod, wait_gone};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
const OLD: &str = "2026.11.0";

/// Current, verified, and for commit `commit`.
fn verified_at(r: &Rollout, commit: &str) -> bool {
    r.current_status().is_some_and(|s| {
        s.phase == Some(RolloutPhase::Verified) && s.applied_commit.as_deref() == Some(commit)
    })
}

/// The tenant's inventory: the entries of its `Inventory` (beside the
/// Rollout, same name), empty when there is none.
async fn inventory(ns: &str) -> Vec<InventoryEntry> {
    let client = support::client().await;
    Api::<Inventory>::namespaced(client, ns)
        .get_opt(ROLLOUT_NAME)
        .await
        .unwrap()
        .map(|i| i.spec.entries)
        .unwrap_or_default()
}

fn holds(entries: &[InventoryEntry], kind: InventoryKind, name: &str) -> bool {
    entries.iter().any(|e| e.kind == kind && e.name == name)
}

/// Waits until the tenant's inventory satisfies `pred`.
async fn wait_inventory(
    ns: &str,
    what: &str,
    pred: impl Fn(&[InventoryEntry]) -> bool,
) -> Vec<InventoryEntry> {
    let pred = &pred;
    eventually(what, Duration::from_secs(60), || async move {
        let entries = inventory(ns).await;
        pred(&entries).then_some(entries)
    })
    .await
}

fn condition<'a>(
    r: &'a Rollout,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    r.current_status()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Events with `reason` in `ns` whose note contains every one of `words`.
async fn events(ns: &str, reason: &str, words: &[&str]) -> Vec<Event> {
    support::events(ns, reason)
        .await
        .into_iter()
        .filter(|e| {
            let note = e.note.clone().unwrap_or_default();
            words.iter().all(|w| note.contains(w))
        })
        .collect()
}

/// The manifest of an extra Agent `name`, made from `tenant`'s assistant.
fn extra_agent(fx: &Fixture, tenant: &str, name: &str) -> String {
    let text =
        String::from_utf8(fx.served_file(&format!("manifests/{tenant}/assistant.yaml"))).unwrap();
    assert!(text.contains("name: assistant"));
    text.replace("name: assistant", &format!("name: {name}"))
}

#[tokio::test]
async fn commits_between_releases_are_applied_verified_and_pruned() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("gs", example_files("gs")).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let acme = "gs-acme";
    let agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), acme);
    let pods: Api<Pod> = Api::namespaced(fx.ns.client.clone(), acme);
    let mut before = BTreeMap::new();
    for t in fx.tenants() {
        before.insert(t.clone(), fx.rollout(&t).await.unwrap());
    }
    let other_agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), "gs-globex");
    let globex_before = other_agents.get("assistant").await.unwrap();

    // An Agent added in git, no new release: applied and verified.
    let helper = extra_agent(&fx, acme, "helper");
    let c1 = fx.push(
        &[("manifests/gs-acme/helper.yaml", Some(helper.as_bytes()))],
        "add helper",
    );
    fx.request_sync().await;
    let ro = fx
        .wait_until(acme, "helper applied and verified", &op, |r| {
            verified_at(r, &c1)
        })
        .await;
    let entries = inventory(acme).await;
    assert!(
        holds(&entries, InventoryKind::Agent, "helper"),
        "{entries:?}"
    );
    assert!(
        ro.status.as_ref().unwrap().inventory.is_empty(),
        "the inventory is not in the Rollout: {:?}",
        ro.status
    );
    assert_eq!(ro.spec.release, OLD, "no new release");
    let first_pod = pod_name(&pods, "agent", "helper").await;
    // The other tenants saw no write: same spec, generation and status.
    for t in fx.tenants().iter().filter(|t| t.as_str() != acme) {
        let now = fx.rollout(t).await.unwrap();
        let was = &before[t];
        assert_eq!(now.spec, was.spec, "{t}");
        assert_eq!(now.metadata.generation, was.metadata.generation, "{t}");
        assert_eq!(
            now.metadata.resource_version, was.metadata.resource_version,
            "{t}"
        );
    }
    assert_eq!(
        other_agents
            .get("assistant")
            .await
            .unwrap()
            .metadata
            .resource_version,
        globex_before.metadata.resource_version
    );

    // Edited in git: its pod rolls and is verified.
    let edited = helper.replacen(
        "  runtime:\n",
        "  runtime:\n    env:\n      - name: MODE\n        value: edited\n",
        1,
    );
    let c2 = fx.push(
        &[("manifests/gs-acme/helper.yaml", Some(edited.as_bytes()))],
        "edit helper",
    );
    fx.request_sync().await;
    fx.wait_until(acme, "the edit verified", &op, |r| verified_at(r, &c2))
        .await;
    let rolled = the_pod(&pods, "agent", "helper").await;
    assert_ne!(
        rolled.metadata.name.as_deref(),
        Some(first_pod.as_str()),
        "the pod rolled"
    );
    let runtime = rolled
        .spec
        .unwrap()
        .containers
        .into_iter()
        .find(|c| c.name == "runtime")
        .unwrap();
    assert!(
        runtime
            .env
            .unwrap_or_default()
            .iter()
            .any(|e| e.name == "MODE")
    );

    // Removed from git: pruned.
    let c3 = fx.push(&[("manifests/gs-acme/helper.yaml", None)], "remove helper");
    fx.request_sync().await;
    wait_gone(&agents, "helper", "helper pruned").await;
    // The deletion may still be finishing when the saga verifies (a prune
    // never holds it); the verified tenant's next pass sees it gone.
    fx.wait_until(acme, "verified, helper pruned", &op, |r| {
        verified_at(r, &c3) && condition(r, CONDITION_PRUNED).is_some_and(|c| c.status == "True")
    })
    .await;
    wait_inventory(acme, "helper out of the inventory", |e| {
        !holds(e, InventoryKind::Agent, "helper")
    })
    .await;
    assert!(!events(acme, "Pruned", &["Agent helper"]).await.is_empty());

    // Removed while a finalizer blocks deletion: kept in the inventory and
    // the condition says why; released, it goes.
    let c4 = fx.push(
        &[(
            "manifests/gs-acme/keeper.yaml",
            Some(extra_agent(&fx, acme, "keeper").as_bytes()),
        )],
        "add keeper",
    );
    fx.request_sync().await;
    fx.wait_until(acme, "keeper verified", &op, |r| verified_at(r, &c4))
        .await;
    let keeper = agents.get("keeper").await.unwrap();
    let mut finalizers = keeper.metadata.finalizers.clone().unwrap_or_default();
    finalizers.push("test.exo.invalid/hold".into());
    agents
        .patch(
            "keeper",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": finalizers}})),
        )
        .await
        .unwrap();
    let c5 = fx.push(&[("manifests/gs-acme/keeper.yaml", None)], "remove keeper");
    fx.request_sync().await;
    let ro = fx
        .wait_until(acme, "the blocked prune reported", &op, |r| {
            r.current_status()
                .is_some_and(|s| s.applied_commit.as_deref() == Some(c5.as_str()))
                && r.status.as_ref().is_some_and(|s| {
                    s.pending_prunes.iter().any(|e| {
                        e.name == "keeper"
                            && e.prune_blocked
                                .as_deref()
                                .is_some_and(|w| w.contains("test.exo.invalid/hold"))
                    })
                })
                && condition(r, CONDITION_PRUNED)
                    .is_some_and(|c| c.status == "False" && c.reason == "PruneBlocked")
        })
        .await;
    assert!(
        condition(&ro, CONDITION_PRUNED)
            .unwrap()
            .message
            .contains("Agent keeper")
    );
    // The inventory keeps it, with the same reason.
    let entries = inventory(acme).await;
    assert!(
        entries.iter().any(|e| e.name == "keeper"
            && e.prune_blocked
                .as_deref()
                .is_some_and(|w| w.contains("test.exo.invalid/hold"))),
        "{entries:?}"
    );
    assert!(
        agents
            .get("keeper")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let held = agents.get("keeper").await.unwrap();
    let rest: Vec<String> = held
        .metadata
        .finalizers
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != "test.exo.invalid/hold")
        .collect();
    agents
        .patch(
            "keeper",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": rest}})),
        )
        .await
        .unwrap();
    wait_gone(&agents, "keeper", "keeper gone once released").await;
    fx.wait_until(acme, "the prune no longer blocked", &op, |r| {
        condition(r, CONDITION_PRUNED).is_some_and(|c| c.status == "True")
            && r.status
                .as_ref()
                .is_some_and(|s| s.pending_prunes.is_empty())
    })
    .await;
    wait_inventory(acme, "keeper out of the inventory", |e| {
        !holds(e, InventoryKind::Agent, "keeper")
    })
    .await;

    // prune: false holds: what git drops stays, reported.
    fx.patch_fleet(serde_json::json!({"prune": false})).await;
    let c6 = fx.push(
        &[("manifests/gs-acme/assistant.yaml", None)],
        "drop assistant",
    );
    fx.request_sync().await;
    fx.wait_until(acme, "the kept object reported", &op, |r| {
        r.current_status()
            .is_some_and(|s| s.applied_commit.as_deref() == Some(c6.as_str()))
            && r.status.as_ref().is_some_and(|s| {
                s.pending_prunes.iter().any(|e| {
                    e.name == "assistant"
                        && e.prune_blocked
                            .as_deref()
                            .is_some_and(|w| w.contains("pruning is off"))
                })
            })
    })
    .await;
    let kept = agents.get("assistant").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "prune: false deletes nothing"
    );
    fx.patch_fleet(serde_json::json!({"prune": true})).await;
    wait_gone(&agents, "assistant", "pruned once pruning is back on").await;

    // suspend: true holds: a commit is fetched but not applied.
    fx.patch_fleet(serde_json::json!({"suspend": true})).await;
    let fleets = fx.ns.api::<exo::crd::Fleet>();
    eventually(
        "the Fleet reports suspended",
        Duration::from_secs(30),
        || async {
            let f = fleets.get("fleet").await.ok()?;
            f.status?
                .conditions
                .iter()
                .any(|c| c.reason == "Suspended")
                .then_some(())
        },
    )
    .await;
    let globex_edit = String::from_utf8(fx.served_file("manifests/gs-globex/assistant.yaml"))
        .unwrap()
        .replacen(
            "  runtime:\n",
            "  runtime:\n    env:\n      - name: MODE\n        value: suspended\n",
            1,
        );
    let c7 = fx.push(
        &[(
            "manifests/gs-globex/assistant.yaml",
            Some(globex_edit.as_bytes()),
        )],
        "edit globex",
    );
    fx.request_sync().await;
    eventually(
        "the suspended Fleet fetched the commit",
        Duration::from_secs(30),
        || async {
            let f = fleets.get("fleet").await.ok()?;
            (f.status?.fetched_commit.as_deref() == Some(c7.as_str())).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_ne!(
        fx.rollout("gs-globex").await.unwrap().spec.commit,
        c7,
        "nothing applied while suspended"
    );
    let a = other_agents.get("assistant").await.unwrap();
    assert!(
        a.spec.runtime.env.iter().all(|e| e.name != "MODE"),
        "the Agent is untouched"
    );
    fx.patch_fleet(serde_json::json!({"suspend": false})).await;
    fx.wait_until("gs-globex", "applied once resumed", &op, |r| {
        verified_at(r, &c7)
    })
    .await;

    // A Fleet spec that does not parse: refused, naming the field.
    fx.patch_fleet(serde_json::json!({"reverifyInterval": "soon"}))
        .await;
    let message = eventually("the bad spec refused", Duration::from_secs(30), || async {
        let f = fleets.get("fleet").await.ok()?;
        let c = f
            .status?
            .conditions
            .into_iter()
            .find(|c| c.reason == "InvalidSpec")?;
        Some(c.message)
    })
    .await;
    assert!(
        message.contains("spec.reverifyInterval") && message.contains("soon"),
        "{message}"
    );
}

#[tokio::test]
async fn hand_edits_and_deletes_are_reverted_within_an_interval() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("gd", example_files("gd")).await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let t = "gd-acme";
    let agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), t);
    let pinned = agents.get("assistant").await.unwrap().spec.runtime.image;
    // Another digest of the same repository, as a hand edit would pin.
    let hand_edit = format!(
        "{}@sha256:{}",
        pinned.split('@').next().unwrap(),
        "0".repeat(64)
    );

    // `kubectl edit` of the image, by another field manager.
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..PatchParams::default()
    };
    agents
        .patch(
            "assistant",
            &edit,
            &Patch::Merge(serde_json::json!({"spec": {"runtime": {"image": hand_edit}}})),
        )
        .await
        .unwrap();
    eventually(
        "the hand edit reverted",
        Duration::from_secs(20),
        || async {
            let a = agents.get("assistant").await.ok()?;
            (a.spec.runtime.image == pinned).then_some(())
        },
    )
    .await;
    let evs = events(
        t,
        "DriftReverted",
        &["Agent gd-acme/assistant", "spec.runtime.image"],
    )
    .await;
    assert!(
        !evs.is_empty(),
        "a DriftReverted Event names the object and the field"
    );
    fx.wait_until(t, "verified again after the revert", &op, |r| {
        r.current_status().is_some_and(|s| {
            s.phase == Some(RolloutPhase::Verified)
                && s.last_drift.as_ref().is_some_and(|d| {
                    d.object == "Agent/assistant" && d.fields == ["spec.runtime.image"]
                })
        })
    })
    .await;
    assert!(op.metric("exo_operator_drift_reverted_total").unwrap() >= 1);

    // `kubectl delete` of a managed Agent: restored.
    let uid = agents.get("assistant").await.unwrap().metadata.uid;
    agents
        .delete("assistant", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the deleted Agent restored",
        Duration::from_secs(40),
        || async {
            let a = agents.get_opt("assistant").await.ok()??;
            (a.metadata.uid != uid && a.metadata.deletion_timestamp.is_none()).then_some(())
        },
    )
    .await;
    assert!(
        !events(t, "DriftReverted", &["Agent gd-acme/assistant", "deleted"])
            .await
            .is_empty()
    );

    // A deleted baseline ConfigMap: restored with its content.
    let cms: Api<ConfigMap> = Api::namespaced(fx.ns.client.clone(), t);
    let version = agents
        .get("assistant")
        .await
        .unwrap()
        .spec
        .baseline
        .unwrap()
        .config_map;
    let data = cms.get(&version).await.unwrap().data;
    cms.delete(&version, &DeleteParams::default())
        .await
        .unwrap();
    let back = eventually("the baseline restored", Duration::from_secs(20), || async {
        let cm = cms.get_opt(&version).await.ok()??;
        cm.metadata.deletion_timestamp.is_none().then_some(cm)
    })
    .await;
    assert_eq!(back.data, data);
    assert_eq!(back.immutable, Some(true));

    // A tier's default backup policy: an AgentFS of a tenant of that tier
    // (acme: standard) that declares none is applied with it, filled in
    // for the volume; a change of `manifests/tiers.yaml` alone renders it
    // again.
    let tiers = String::from_utf8(fx.served_file("manifests/tiers.yaml")).unwrap();
    let anchor = "      containerDefaults: {cpu: 250m, memory: 256Mi}\n    - name: platform";
    assert!(tiers.contains(anchor), "{tiers}");
    let with_default = |keep: u32| {
        tiers.replace(
            anchor,
            &format!(
                "      containerDefaults: {{cpu: 250m, memory: 256Mi}}\n      backup: {{every: 1h, keep: {keep}, repository: \"127.0.0.1:1/backups/{{namespace}}/{{name}}\", insecure: true}}\n    - name: platform"
            ),
        )
    };
    let notes = b"apiVersion: autonomic.sh/v1alpha1\nkind: AgentFS\nmetadata:\n  name: notes\nspec:\n  size: 1Gi\n  maxSize: 2Gi\n";
    let volumes: Api<exo::crd::AgentFS> = Api::namespaced(fx.ns.client.clone(), t);
    let policy_kept = |keep: u32| {
        let volumes = volumes.clone();
        async move {
            eventually(
                &format!("acme's volume with the tier's default, keep {keep}"),
                Duration::from_secs(60),
                || async {
                    let b = volumes.get_opt("notes").await.ok()??.spec.backup?;
                    (b.keep == keep).then_some(b)
                },
            )
            .await
        }
    };
    fx.push(
        &[
            ("manifests/tiers.yaml", Some(with_default(14).as_bytes())),
            ("manifests/gd-acme/notes.yaml", Some(notes)),
        ],
        "a volume for acme, and the standard tier's backup default",
    );
    fx.request_sync().await;
    let policy = policy_kept(14).await;
    assert_eq!(policy.repository, "127.0.0.1:1/backups/gd-acme/notes");
    assert_eq!(policy.every, "1h");
    fx.push(
        &[("manifests/tiers.yaml", Some(with_default(7).as_bytes()))],
        "the standard tier keeps 7",
    );
    fx.request_sync().await;
    policy_kept(7).await;
}

#[tokio::test]
async fn tampered_live_content_is_healed_or_reported() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::with_spec(
        "gc",
        example_files("gc"),
        serde_json::json!({"reverifyInterval": "2s"}),
    )
    .await;
    let op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let t = "gc-acme";
    let pods: Api<Pod> = Api::namespaced(fx.ns.client.clone(), t);

    // Change a file of the live baseline where the pod reads it (the kwok
    // node's copy: a node serving the wrong content).
    let tamper = |pod: &Pod| {
        let name = pod.metadata.name.clone().unwrap();
        let dir = support::env()
            .exec_dir
            .join("pods")
            .join(t)
            .join(&name)
            .join(exo::crd::DEFAULT_BASELINE_MOUNT.trim_start_matches('/'));
        let file = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .min()
            .unwrap();
        let mut content = std::fs::read(&file).unwrap();
        content.extend_from_slice(b"\ntampered\n");
        std::fs::write(&file, content).unwrap();
        (
            name,
            file.file_name().unwrap().to_string_lossy().into_owned(),
        )
    };

    // heal (the default): reported, the pod replaced and verified again.
    let pod = the_pod(&pods, "agent", "assistant").await;
    let (name, file) = tamper(&pod);
    eventually("ContentDrift reported", Duration::from_secs(30), || async {
        (!events(t, "ContentDrift", &[&name, &file]).await.is_empty()).then_some(())
    })
    .await;
    let healed = fx
        .wait_until(t, "healed and verified again", &op, |r| {
            r.current_status()
                .is_some_and(|s| s.phase == Some(RolloutPhase::Verified))
                && condition(r, CONDITION_CONTENT_DRIFT)
                    .is_some_and(|c| c.status == "False" && c.reason == "Healed")
        })
        .await;
    let new_pod = the_pod(&pods, "agent", "assistant").await;
    assert_ne!(
        new_pod.metadata.uid, pod.metadata.uid,
        "the drifted pod was replaced"
    );
    assert!(healed.status.unwrap().last_live_check.is_some());
    assert!(op.metric("exo_operator_content_drift_total").unwrap() >= 1);
    assert!(op.metric("exo_operator_live_check_execs_total").unwrap() >= 1);

    // alert: reported on the Rollout, naming pod and file; nothing replaced.
    fx.patch_fleet(serde_json::json!({"driftPolicy": "alert"}))
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (name, file) = tamper(&new_pod);
    let ro = fx
        .wait_until(t, "ContentDrift condition", &op, |r| {
            condition(r, CONDITION_CONTENT_DRIFT)
                .is_some_and(|c| c.status == "True" && c.reason == "Detected")
        })
        .await;
    let message = condition(&ro, CONDITION_CONTENT_DRIFT)
        .unwrap()
        .message
        .clone();
    assert!(
        message.contains(&name) && message.contains(&file),
        "{message}"
    );
    let checked = ro.status.unwrap().last_live_check.unwrap().at;
    // Two more re-checks later it is still the same pod, still reported.
    fx.wait_until(t, "re-checked again", &op, |r| {
        r.status
            .as_ref()
            .and_then(|s| s.last_live_check.as_ref())
            .is_some_and(|c| c.at != checked && !c.ok)
    })
    .await;
    let still = the_pod(&pods, "agent", "assistant").await;
    assert_eq!(
        still.metadata.uid, new_pod.metadata.uid,
        "alert replaces nothing"
    );
    let ro = fx.rollout(t).await.unwrap();
    assert!(ro.content_drift().is_some(), "{:?}", ro.status);
}

#[tokio::test]
async fn a_killed_operator_finishes_a_prune_without_deleting_twice() {
    let _serial = SERIAL.lock().await;
    let fx = Fixture::new("gk", example_files("gk")).await;
    let mut op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "a");
    fx.wait_all(OLD, &op).await;
    let t = "gk-acme";
    let agents: Api<Agent> = Api::namespaced(fx.ns.client.clone(), t);
    let names = ["h1", "h2", "h3", "h4"];
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| (format!("manifests/{t}/{n}.yaml"), extra_agent(&fx, t, n)))
        .collect();
    let adds: Vec<(&str, Option<&[u8]>)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), Some(c.as_bytes())))
        .collect();
    let c1 = fx.push(&adds, "add four");
    fx.request_sync().await;
    fx.wait_until(t, "four added", &op, |r| verified_at(r, &c1))
        .await;
    let kept_uid = agents.get("assistant").await.unwrap().metadata.uid;

    let removes: Vec<(&str, Option<&[u8]>)> =
        files.iter().map(|(p, _)| (p.as_str(), None)).collect();
    let c2 = fx.push(&removes, "remove four");
    fx.request_sync().await;
    // Kill the operator as soon as the prune has begun.
    eventually("the prune begun", Duration::from_secs(60), || async {
        for n in names {
            match agents.get_opt(n).await.ok()? {
                None => return Some(()),
                Some(a) if a.metadata.deletion_timestamp.is_some() => return Some(()),
                _ => {}
            }
        }
        None
    })
    .await;
    op.kill9();
    let mut op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "b");
    for n in names {
        wait_gone(&agents, n, &format!("{n} pruned")).await;
    }
    fx.wait_until(t, "verified without the four", &op, |r| verified_at(r, &c2))
        .await;
    wait_inventory(t, "the inventory clean", |e| {
        names.iter().all(|n| !holds(e, InventoryKind::Agent, n))
    })
    .await;
    // Deleted once each: at most one Pruned Event per object, and what git
    // still has is the same object as before.
    for n in names {
        let evs = events(t, "Pruned", &[&format!("Agent {n} ")]).await;
        assert!(evs.len() <= 1, "{n}: {} Pruned events", evs.len());
    }
    assert_eq!(
        agents.get("assistant").await.unwrap().metadata.uid,
        kept_uid
    );
    // The successor applied no AgentFS again (globex has one): its cache
    // shows each as applied, by the hash on it.
    let fs = Api::<exo::crd::AgentFS>::namespaced(fx.ns.client.clone(), "gk-globex")
        .get("shared-workspace")
        .await
        .unwrap();
    assert!(
        fs.annotations()
            .contains_key(exo::meta::ANNOTATION_APPLIED_HASH),
        "{:?}",
        fs.metadata.annotations
    );
    // a may have finished the prune before it died, so nothing above
    // waited on b: the check below is about b's own first sync, which runs
    // as b takes the lead (an unchanged commit logs nothing), so b leads
    // and is given a few seconds for it.
    eventually("b to lead", Duration::from_secs(60), || async {
        (op.metric("exo_operator_leader") == Some(1)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, page) = support::operator::http_get(&op.addr, "/metrics").unwrap();
    assert!(
        !page.contains(r#"controller="Rollout",kind="AgentFS""#),
        "the successor applied an AgentFS again:\n{page}"
    );
    op.kill9();

    // What an operator older than the Inventory kind left behind: the
    // inventory in the Rollout's status (applied with the operator's field
    // manager) and no Inventory. One entry there is an Agent git no longer
    // has. The next operator carries the entries over, prunes that Agent,
    // and writes the status without them.
    let client = fx.ns.client.clone();
    let text = extra_agent(&fx, t, "orphan");
    let mut orphan: Agent =
        exo::yaml::from_str(std::path::Path::new("orphan.yaml"), &text).unwrap();
    orphan.metadata.namespace = Some(t.into());
    orphan
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            exo::meta::LABEL_MANAGED_BY.into(),
            exo::meta::MANAGED_BY.into(),
        );
    let orphan = agents
        .create(&kube::api::PostParams::default(), &orphan)
        .await
        .unwrap();
    let mut legacy = inventory(t).await;
    assert!(
        holds(&legacy, InventoryKind::Agent, "assistant"),
        "{legacy:?}"
    );
    legacy.push(InventoryEntry {
        kind: InventoryKind::Agent,
        name: "orphan".into(),
        uid: orphan.metadata.uid.clone().unwrap(),
        prune_blocked: None,
    });
    Api::<Inventory>::namespaced(client.clone(), t)
        .delete(ROLLOUT_NAME, &DeleteParams::default())
        .await
        .unwrap();
    let rollouts: Api<Rollout> = Api::namespaced(client.clone(), t);
    let mut status =
        serde_json::to_value(rollouts.get(ROLLOUT_NAME).await.unwrap().status).unwrap();
    status["inventory"] = serde_json::to_value(&legacy).unwrap();
    rollouts
        .patch_status(
            ROLLOUT_NAME,
            &PatchParams::apply(exo::meta::FIELD_MANAGER).force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "autonomic.sh/v1alpha1",
                "kind": "Rollout",
                "status": status,
            })),
        )
        .await
        .unwrap();
    let mut op = Operator::start(&fx.ns.name, &support::env().kubeconfig, "c");
    wait_gone(&agents, "orphan", "the carried-over orphan pruned").await;
    let entries = wait_inventory(t, "the inventory carried over, without the orphan", |e| {
        holds(e, InventoryKind::Agent, "assistant") && !holds(e, InventoryKind::Agent, "orphan")
    })
    .await;
    assert_eq!(
        entries
            .iter()
            .find(|e| e.name == "assistant")
            .map(|e| e.uid.as_str()),
        kept_uid.as_deref(),
        "carried over with its uid"
    );
    eventually(
        "the status without its inventory",
        Duration::from_secs(60),
        || async {
            let raw = Api::<kube::api::DynamicObject>::namespaced_with(
                client.clone(),
                t,
                &kube::api::ApiResource::erase::<Rollout>(&()),
            )
            .get(ROLLOUT_NAME)
            .await
            .ok()?;
            raw.data["status"].get("inventory").is_none().then_some(())
        },
    )
    .await;
    assert!(verified_at(&fx.rollout(t).await.unwrap(), &c2));
    op.kill9();
}
