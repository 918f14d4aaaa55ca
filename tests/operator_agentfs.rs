#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a test failure
//! AgentFS rules one by one against the real apiserver and the hostPath
//! provisioner (which completes an expansion about 2 s after a PVC grows),
//! and Agent mounts: defaults, read-only, omitted-preserves, and no new
//! mounts of a volume being deleted. The delete refusal itself is the
//! shipped admission policy's (tests/agentfs_admission.rs); the finalizer
//! is its backstop.

mod support;

use std::time::Duration;

use exo::crd::{Agent, AgentFS, AgentFSPhase, AgentPhase};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use support::eventually;
use support::operator::{
    OperatorProcess, agent, agentfs, create, delete_refused, mount, pods_of, restricted_namespace,
    the_pod, wait_for, wait_gone, wait_pod,
};

fn fs_phase(f: &AgentFS) -> Option<AgentFSPhase> {
    f.status.as_ref()?.phase
}

fn quantity(q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>) -> Option<&str> {
    q.as_ref().map(|q| q.0.as_str())
}

fn pvc_request(p: &PersistentVolumeClaim) -> String {
    p.spec
        .as_ref()
        .unwrap()
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()["storage"]
        .0
        .clone()
}

async fn merge<K>(api: &Api<K>, name: &str, patch: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
}

/// Waits for an Event with `reason` about `name` and returns its note.
async fn event(ns: &support::TestNamespace, name: &str, reason: &str) -> String {
    let events: Api<Event> = ns.api();
    eventually(
        &format!("a {reason} Event for {name}"),
        Duration::from_secs(30),
        || {
            let events = events.clone();
            async move {
                let list = events.list(&ListParams::default()).await.ok()?;
                list.items.into_iter().find_map(|e| {
                    let about = e.regarding.as_ref()?.name.as_deref()? == name;
                    (about && e.reason.as_deref() == Some(reason))
                        .then(|| e.note.unwrap_or_default())
                })
            }
        },
    )
    .await
}

#[tokio::test]
async fn resize_is_grow_only_capped_and_shows_requested_vs_provisioned() {
    let ns = restricted_namespace("op-fs-size").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let fss = ns.api::<AgentFS>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    create(&fss, &agentfs("data", "20Gi", "100Gi", false)).await;
    let f = wait_for(&fss, "data", "Bound", |f| {
        fs_phase(f) == Some(AgentFSPhase::Bound)
    })
    .await;
    let st = f.status.unwrap();
    assert_eq!(st.pvc_name.as_deref(), Some("agentfs-data"));
    assert_eq!(
        (quantity(&st.requested), quantity(&st.provisioned)),
        (Some("20Gi"), Some("20Gi"))
    );
    let pvc = pvcs.get("agentfs-data").await.unwrap();
    assert_eq!(pvc.metadata.owner_references.unwrap()[0].name, "data");
    assert_eq!(
        pvc.metadata.labels.unwrap()["app.kubernetes.io/managed-by"],
        "exo"
    );

    // Shrink: refused with a condition and an Event; the PVC is untouched.
    merge(&fss, "data", serde_json::json!({"spec": {"size": "10Gi"}})).await;
    let f = wait_for(&fss, "data", "a ShrinkRefused condition", |f| {
        f.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Resizable" && c.status == "False" && c.reason == "ShrinkRefused"
            })
        })
    })
    .await;
    assert_eq!(quantity(&f.status.unwrap().requested), Some("20Gi"));
    let note = event(&ns, "data", "ShrinkRefused").await;
    assert!(note.contains("grow-only"), "{note}");
    assert_eq!(
        pvc_request(&pvcs.get("agentfs-data").await.unwrap()),
        "20Gi"
    );

    // Above maxSize: the CRD's CEL rule refuses it at admission.
    let err = fss
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"size": "200Gi"}})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("size must not exceed maxSize"),
        "{err}"
    );

    // Grow: requested moves first, provisioned follows when the expansion is done.
    merge(&fss, "data", serde_json::json!({"spec": {"size": "30Gi"}})).await;
    wait_for(&fss, "data", "an expansion in flight", |f| {
        let s = f.status.as_ref().unwrap();
        fs_phase(f) == Some(AgentFSPhase::Resizing)
            && quantity(&s.requested) == Some("30Gi")
            && quantity(&s.provisioned) == Some("20Gi")
    })
    .await;
    let f = wait_for(&fss, "data", "the expansion to finish", |f| {
        let s = f.status.as_ref().unwrap();
        fs_phase(f) == Some(AgentFSPhase::Bound) && quantity(&s.provisioned) == Some("30Gi")
    })
    .await;
    let resizable = f
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Resizable")
        .unwrap();
    assert_eq!(resizable.status, "True");
    assert_eq!(
        pvc_request(&pvcs.get("agentfs-data").await.unwrap()),
        "30Gi"
    );
    event(&ns, "data", "VolumeResized").await;
}

/// The example from the product's agentfs document, end to end: mount
/// defaults, read-only, omitted-preserves, delete refused while mounted,
/// retain keeps the PVC.
#[tokio::test]
async fn agentfs_document_example_mounts_delete_refusal_and_retain() {
    let ns = restricted_namespace("op-fs-doc").await;
    let _op = OperatorProcess::start(&ns.name, "a");
    let fss = ns.api::<AgentFS>();
    let agents = ns.api::<Agent>();
    let pods = ns.api::<Pod>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    let shared: AgentFS = serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": "shared-workspace", "namespace": ns.name },
        "spec": { "size": "20Gi", "maxSize": "100Gi", "accessMode": "ReadWriteMany", "retain": true }
    }))
    .unwrap();
    create(&fss, &shared).await;
    create(&fss, &agentfs("reference-data", "1Gi", "10Gi", false)).await;
    let mut a = agent("writer");
    a.spec.filesystems = Some(vec![
        mount("shared-workspace", Some("/workspace/shared"), false),
        mount("reference-data", None, true),
    ]);
    create(&agents, &a).await;
    let a = wait_for(&agents, "writer", "Active", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
    let st = a.status.unwrap();
    let paths: Vec<_> = st
        .filesystems
        .iter()
        .map(|m| {
            (
                m.name.as_str(),
                m.mount_path.as_deref().unwrap(),
                m.read_only,
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("shared-workspace", "/workspace/shared", false),
            ("reference-data", "/mnt/fs/reference-data", true)
        ]
    );
    let pod = the_pod(&pods, "agent", "writer").await;
    let uid0 = pod.metadata.uid.clone().unwrap();
    let runtime = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == "runtime")
        .unwrap()
        .clone();
    let mounts: Vec<_> = runtime
        .volume_mounts
        .unwrap()
        .into_iter()
        .map(|m| (m.mount_path, m.read_only.unwrap_or(false)))
        .collect();
    assert!(
        mounts.contains(&("/workspace/shared".into(), false)),
        "{mounts:?}"
    );
    assert!(
        mounts.contains(&("/mnt/fs/reference-data".into(), true)),
        "{mounts:?}"
    );
    let claims: Vec<_> = pod
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim)
        .map(|c| c.claim_name)
        .collect();
    assert_eq!(
        claims,
        ["agentfs-shared-workspace", "agentfs-reference-data"]
    );
    let f = wait_for(&fss, "shared-workspace", "mountedBy writer", |f| {
        f.status
            .as_ref()
            .is_some_and(|s| s.mounted_by == ["writer"])
    })
    .await;
    assert_eq!(quantity(&f.status.unwrap().provisioned), Some("20Gi"));

    // Delete while mounted: refused at the apiserver, naming the agent.
    let refused = delete_refused(&fss, "shared-workspace").await;
    assert!(refused.message.contains("writer"), "{refused:?}");

    // Omitted: the mounts stay as they are, the pod is not rolled.
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"filesystems": null, "paused": false}}),
    )
    .await;
    let a = wait_for(&agents, "writer", "the spec change observed", |a| {
        a.status.as_ref().unwrap().observed_generation == a.metadata.generation
    })
    .await;
    assert!(a.spec.filesystems.is_none());
    assert_eq!(a.status.unwrap().filesystems.len(), 2);
    assert_eq!(
        the_pod(&pods, "agent", "writer")
            .await
            .metadata
            .uid
            .unwrap(),
        uid0
    );
    assert!(
        fss.get_opt("shared-workspace").await.unwrap().is_some(),
        "refused, still there"
    );

    // A list replaces the mounts: shared-workspace is detached, and the
    // deletion goes through; retain keeps the PVC, released.
    merge(&agents, "writer", serde_json::json!({"spec": {"filesystems": [{"name": "reference-data", "readOnly": true}]}})).await;
    wait_for(&fss, "shared-workspace", "no longer mounted", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.is_empty())
    })
    .await;
    fss.delete("shared-workspace", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(
        &fss,
        "shared-workspace",
        "the detached AgentFS to be deleted",
    )
    .await;
    let pvc = pvcs
        .get("agentfs-shared-workspace")
        .await
        .expect("retained PVC");
    assert!(pvc.metadata.deletion_timestamp.is_none());
    assert!(pvc.metadata.owner_references.unwrap_or_default().is_empty());
    assert_eq!(
        pvc.metadata.annotations.unwrap()["autonomic.sh/retained-from"],
        "shared-workspace"
    );
    event(&ns, "shared-workspace", "VolumeRetained").await;
    let pod = wait_pod(&pods, "agent", "writer", "the rolled pod", |p| {
        p.metadata.uid.as_deref() != Some(&uid0)
    })
    .await;
    let claims: Vec<_> = pod
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .filter_map(|v| v.persistent_volume_claim)
        .map(|c| c.claim_name)
        .collect();
    assert_eq!(claims, ["agentfs-reference-data"]);

    // An empty list detaches every disk; then a non-retained AgentFS goes
    // with its PVC.
    merge(
        &agents,
        "writer",
        serde_json::json!({"spec": {"filesystems": []}}),
    )
    .await;
    wait_for(&agents, "writer", "no mounts", |a| {
        a.status.as_ref().is_some_and(|s| s.filesystems.is_empty())
    })
    .await;
    wait_for(&fss, "reference-data", "no longer mounted", |f| {
        f.status.as_ref().is_some_and(|s| s.mounted_by.is_empty())
    })
    .await;
    fss.delete("reference-data", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&fss, "reference-data", "the AgentFS to be deleted").await;
    wait_gone(&pvcs, "agentfs-reference-data", "its PVC to be deleted").await;
    assert!(
        pvcs.get_opt("agentfs-shared-workspace")
            .await
            .unwrap()
            .is_some(),
        "the retained PVC stays"
    );
}

fn condition<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The finalizer backstop: a delete admitted before the operator wrote
/// `mountedBy` is held. A volume being deleted gains no new users: an
/// Agent that starts to mount it is refused (a condition and an Event name
/// the AgentFS, no pod is created with it) and does not hold the deletion;
/// the Agent that had it mounted holds it until that Agent goes away, and
/// the status and an Event name it.
#[tokio::test]
async fn agentfs_being_deleted_takes_no_new_mounts() {
    let ns = restricted_namespace("op-fs-closing").await;
    let mut op = OperatorProcess::start(&ns.name, "a");
    let fss = ns.api::<AgentFS>();
    let agents = ns.api::<Agent>();
    let pods = ns.api::<Pod>();
    let pvcs = ns.api::<PersistentVolumeClaim>();
    create(&fss, &agentfs("scratch", "1Gi", "2Gi", false)).await;
    let mut holder = agent("holder");
    holder.spec.filesystems = Some(vec![mount("scratch", None, false)]);
    create(&agents, &holder).await;
    wait_for(&agents, "holder", "Active", |a| {
        a.status.as_ref().and_then(|s| s.phase) == Some(AgentPhase::Active)
    })
    .await;
    wait_for(&fss, "scratch", "mountedBy holder", |f| {
        f.status
            .as_ref()
            .is_some_and(|s| s.mounted_by == ["holder"])
    })
    .await;

    // The apiserver refuses this delete while mountedBy names holder. The
    // window the finalizer guards (mountedBy not written yet) is made here:
    // the operator is stopped and the status cleared, so the delete is
    // admitted; the next operator holds it.
    let refused = delete_refused(&fss, "scratch").await;
    assert!(refused.message.contains("holder"), "{refused:?}");
    op.kill();
    fss.patch_status(
        "scratch",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"mountedBy": []}})),
    )
    .await
    .unwrap();
    fss.delete("scratch", &DeleteParams::default())
        .await
        .unwrap();
    let _op = OperatorProcess::start(&ns.name, "b");
    let f = wait_for(&fss, "scratch", "DeleteBlocked by holder", |f| {
        f.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, "DeleteBlocked").is_some_and(|c| c.status == "True")
        })
    })
    .await;
    assert_eq!(fs_phase(&f), Some(AgentFSPhase::Terminating));
    let note = event(&ns, "scratch", "DeleteRefused").await;
    assert!(note.contains("holder"), "{note}");

    // A newcomer asks for the volume being deleted: refused.
    let mut late = agent("late");
    late.spec.filesystems = Some(vec![mount("scratch", None, false)]);
    create(&agents, &late).await;
    let a = wait_for(
        &agents,
        "late",
        "FilesystemsReady=False (terminating)",
        |a| {
            a.status.as_ref().is_some_and(|s| {
                condition(&s.conditions, "FilesystemsReady")
                    .is_some_and(|c| c.status == "False" && c.reason == "FilesystemTerminating")
            })
        },
    )
    .await;
    let st = a.status.unwrap();
    let c = condition(&st.conditions, "FilesystemsReady").unwrap();
    assert!(c.message.contains("scratch"), "{}", c.message);
    assert_eq!(st.phase, Some(AgentPhase::Pending));
    assert!(
        st.filesystems.is_empty(),
        "a refused mount is recorded: {:?}",
        st.filesystems
    );
    assert!(
        pods_of(&pods, "agent", "late").await.is_empty(),
        "a pod was created for the refused mount"
    );
    let note = event(&ns, "late", "FilesystemTerminating").await;
    assert!(note.contains("scratch"), "{note}");
    let f = fss.get("scratch").await.unwrap();
    let st = f.status.unwrap();
    assert!(!st.mounted_by.contains(&"late".to_owned()), "{st:?}");
    let blocked = condition(&st.conditions, "DeleteBlocked").unwrap();
    assert!(
        blocked.message.contains("holder") && !blocked.message.contains("late"),
        "{}",
        blocked.message
    );

    // The Agent that had it goes away: the deletion goes through although
    // the newcomer still asks for the volume.
    agents
        .delete("holder", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&agents, "holder", "the holder to be deleted").await;
    wait_gone(&fss, "scratch", "the released AgentFS to be deleted").await;
    wait_gone(&pvcs, "agentfs-scratch", "its PVC to be deleted").await;
    wait_for(&agents, "late", "FilesystemNotFound", |a| {
        a.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, "FilesystemsReady")
                .is_some_and(|c| c.status == "False" && c.reason == "FilesystemNotFound")
        })
    })
    .await;
    assert!(pods_of(&pods, "agent", "late").await.is_empty());
}
