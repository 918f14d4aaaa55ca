//! The request/answer operations on AgentFS: list, create, ls, mkdir,
//! touch, resize, delete. The CLI's direct route and the operator's
//! tunnelled commands both call these.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::FsError;
use super::exec::{self, Target};
use super::helper::{HelperOpts, get_fs, target};
use super::path::VolumePath;
use super::script::{Op, parse_ls};
use crate::cluster::fs::{SizeRefusal, capacities, plan_size};
use crate::crd::{AccessMode, AgentFS};
use crate::names::is_dns1123_label;

use crate::meta::{ANNOTATION_RETAINED, FIELD_MANAGER, LABEL_AGENTFS, LABEL_TENANT};
use crate::wire::Command;
use crate::wire::fs::{FsInfo, FsList, FsListing, FsPhase};

/// Largest `ls` answer read from a pod.
const LS_MAX_BYTES: usize = 8 * 1024 * 1024;

fn info(fs: &AgentFS) -> FsInfo {
    let st = fs.status.clone().unwrap_or_default();
    FsInfo {
        namespace: fs.metadata.namespace.clone().unwrap_or_default(),
        name: fs.metadata.name.clone().unwrap_or_default(),
        phase: st.phase.unwrap_or_default().into(),
        size: fs.spec.size.0.clone(),
        max_size: fs.spec.max_size.0.clone(),
        access_mode: fs.spec.access_mode.as_str().to_owned(),
        retain: fs.spec.retain,
        requested: st.requested.map(|q| q.0),
        provisioned: st.provisioned.map(|q| q.0),
        pvc: st.pvc_name,
        mounted_by: st.mounted_by,
        backup: fs.spec.backup.clone(),
        backup_status: st.backup,
        generation: fs.metadata.generation,
        created: fs
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
    }
}

/// AgentFS volumes, and retained volumes whose AgentFS is gone (phase
/// `Retained`): their PVC and data can be reclaimed.
pub async fn list(client: &Client, namespace: Option<&str>) -> Result<FsList, FsError> {
    let fss: Api<AgentFS> = super::api_in(client, namespace);
    let pvcs: Api<PersistentVolumeClaim> = super::api_in(client, namespace);
    let fss = fss
        .list(&ListParams::default())
        .await
        .map_err(|e| FsError::kube("list AgentFS", e))?;
    let mut items: Vec<FsInfo> = fss.items.iter().map(info).collect();
    let live: BTreeSet<(String, String)> = items
        .iter()
        .map(|i| (i.namespace.clone(), i.name.clone()))
        .collect();
    let pvcs = pvcs
        .list(&ListParams::default().labels(LABEL_AGENTFS))
        .await
        .map_err(|e| FsError::kube("list PersistentVolumeClaims", e))?;
    for pvc in &pvcs.items {
        let Some(from) = pvc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_RETAINED))
        else {
            continue;
        };
        let ns = pvc.metadata.namespace.clone().unwrap_or_default();
        if live.contains(&(ns.clone(), from.clone())) {
            continue;
        }
        let (requested, provisioned) = capacities(pvc);
        items.push(FsInfo {
            namespace: ns,
            name: from.clone(),
            phase: FsPhase::Retained,
            size: requested.clone().unwrap_or_default(),
            requested,
            provisioned,
            pvc: pvc.metadata.name.clone(),
            retain: true,
            access_mode: pvc
                .spec
                .as_ref()
                .and_then(|s| s.access_modes.as_ref())
                .and_then(|m| m.first().cloned())
                .unwrap_or_default(),
            ..FsInfo::default()
        });
    }
    // Volumes an offboarded tenant kept (`storage.retention: retain`):
    // their PersistentVolume outlives the namespace, labelled with the
    // tenant and annotated with the AgentFS it held. Listing volumes needs
    // cluster-wide read access; without it they are not shown.
    let selector = match namespace {
        Some(ns) => format!("{LABEL_TENANT}={ns}"),
        None => LABEL_TENANT.to_owned(),
    };
    if let Ok(pvs) = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
    {
        for pv in &pvs.items {
            let (Some(tenant), Some(from)) = (
                pv.labels().get(LABEL_TENANT),
                pv.annotations().get(ANNOTATION_RETAINED),
            ) else {
                continue;
            };
            if items
                .iter()
                .any(|i| &i.namespace == tenant && &i.name == from)
            {
                continue;
            }
            let size = pv
                .spec
                .as_ref()
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.clone());
            items.push(FsInfo {
                namespace: tenant.clone(),
                name: from.clone(),
                phase: FsPhase::Retained,
                size: size.clone().unwrap_or_default(),
                provisioned: size,
                pvc: pv.metadata.name.as_ref().map(|n| format!("pv/{n}")),
                retain: true,
                ..FsInfo::default()
            });
        }
    }
    items.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(FsList { items })
}

/// What `create` asks for.
#[derive(Debug, Clone)]
pub struct NewFs {
    pub namespace: String,
    pub name: String,
    pub size: String,
    pub max_size: String,
    pub access_mode: Option<String>,
    pub retain: bool,
}

fn access_mode(raw: Option<&str>) -> Result<AccessMode, FsError> {
    let Some(raw) = raw else {
        return Ok(AccessMode::default());
    };
    [
        AccessMode::ReadWriteOnce,
        AccessMode::ReadWriteMany,
        AccessMode::ReadOnlyMany,
        AccessMode::ReadWriteOncePod,
    ]
    .into_iter()
    .find(|m| m.as_str() == raw)
    .ok_or_else(|| {
        FsError::Invalid(format!(
            "--access-mode {raw:?}: expected ReadWriteOnce, ReadWriteMany, ReadOnlyMany or ReadWriteOncePod"
        ))
    })
}

pub async fn create(client: &Client, new: &NewFs) -> Result<FsInfo, FsError> {
    if !is_dns1123_label(&new.name) {
        return Err(FsError::Invalid(format!(
            "{:?} is not a valid AgentFS name (lowercase letters, digits and '-', at most 63)",
            new.name
        )));
    }
    let plan = plan_size(&new.size, &new.max_size, None);
    if let Some(r) = plan.refusal {
        return Err(FsError::Refused(match r {
            SizeRefusal::AboveMax { requested, max } => {
                format!("--size {requested} exceeds --max-size {max}")
            }
            other => other.message(),
        }));
    }
    let obj: AgentFS = serde_json::from_value(json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": new.name, "namespace": new.namespace },
        "spec": {
            "size": new.size, "maxSize": new.max_size, "retain": new.retain,
            "accessMode": access_mode(new.access_mode.as_deref())?,
        }
    }))
    .map_err(|e| FsError::Invalid(format!("AgentFS {}/{}: {e}", new.namespace, new.name)))?;
    let api: Api<AgentFS> = Api::namespaced(client.clone(), &new.namespace);
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let created = api
        .create(&pp, &obj)
        .await
        .map_err(|e| FsError::kube(format!("create AgentFS {}/{}", new.namespace, new.name), e))?;
    Ok(info(&created))
}

/// The pod to run a browse op in.
async fn reach(
    client: &Client,
    namespace: &str,
    name: &str,
    write: bool,
    opts: &HelperOpts,
) -> Result<Target, FsError> {
    let fs = get_fs(client, namespace, name).await?;
    target(client, &fs, write, opts).await
}

pub async fn ls(
    client: &Client,
    namespace: &str,
    name: &str,
    path: &str,
    opts: &HelperOpts,
) -> Result<FsListing, FsError> {
    let path = VolumePath::parse(path)?;
    let t = reach(client, namespace, name, false, opts).await?;
    let out = exec::output(client, &t, Op::Ls, &[path.as_str()], LS_MAX_BYTES).await?;
    let (usage, entries) = parse_ls(&out).map_err(|e| FsError::InPod {
        pod: format!("{}/{}", t.namespace, t.pod),
        message: e.to_string(),
    })?;
    Ok(FsListing {
        namespace: namespace.into(),
        fs_name: name.into(),
        path: path.to_string(),
        pod: t.pod,
        entries,
        usage,
    })
}

pub async fn mkdir(
    client: &Client,
    namespace: &str,
    name: &str,
    path: &str,
    opts: &HelperOpts,
) -> Result<serde_json::Value, FsError> {
    let path = VolumePath::parse(path)?;
    path.split()?;
    let t = reach(client, namespace, name, true, opts).await?;
    exec::output(client, &t, Op::Mkdir, &[path.as_str()], 4096).await?;
    Ok(json!({ "namespace": namespace, "fs_name": name, "path": path.as_str(), "pod": t.pod }))
}

pub async fn touch(
    client: &Client,
    namespace: &str,
    name: &str,
    path: &str,
    opts: &HelperOpts,
) -> Result<serde_json::Value, FsError> {
    let path = VolumePath::parse(path)?;
    let (parent, base) = path.split()?;
    let t = reach(client, namespace, name, true, opts).await?;
    exec::output(client, &t, Op::Touch, &[parent.as_str(), base], 4096).await?;
    Ok(json!({ "namespace": namespace, "fs_name": name, "path": path.as_str(), "pod": t.pod }))
}

/// Grow-only, capped at `maxSize`; a refusal names both sizes.
pub async fn resize(
    client: &Client,
    namespace: &str,
    name: &str,
    size: &str,
) -> Result<FsInfo, FsError> {
    let fs = get_fs(client, namespace, name).await?;
    let current = fs.spec.size.0.clone();
    let plan = plan_size(size, &fs.spec.max_size.0, Some(&current));
    if let Some(r) = plan.refusal {
        let what = format!("AgentFS {namespace}/{name}");
        return Err(FsError::Refused(match r {
            SizeRefusal::Shrink { requested, current } => format!(
                "{what}: {requested} is smaller than its current size {current}; resize is grow-only"
            ),
            SizeRefusal::AboveMax { requested, max } => {
                format!("{what}: {requested} exceeds its maxSize {max}")
            }
            SizeRefusal::Unparsable(q) => format!("--size {q:?} is not a valid quantity"),
        }));
    }
    let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
    let patched = api
        .patch(
            name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&json!({ "spec": { "size": size } })),
        )
        .await
        .map_err(|e| FsError::kube(format!("resize AgentFS {namespace}/{name}"), e))?;
    Ok(info(&patched))
}

/// Refused while agents mount it (checked here, and again by the
/// apiserver's admission policy, and held by the finalizer).
pub async fn delete(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<serde_json::Value, FsError> {
    let fs = get_fs(client, namespace, name).await?;
    let mounted = fs
        .status
        .as_ref()
        .map(|s| s.mounted_by.clone())
        .unwrap_or_default();
    if !mounted.is_empty() {
        return Err(FsError::Refused(format!(
            "AgentFS {namespace}/{name} is mounted by agent(s) {}; detach it from each agent first",
            mounted.join(", ")
        )));
    }
    let api: Api<AgentFS> = Api::namespaced(client.clone(), namespace);
    api.delete(name, &DeleteParams::default())
        .await
        .map_err(|e| FsError::kube(format!("delete AgentFS {namespace}/{name}"), e))?;
    Ok(json!({
        "namespace": namespace, "name": name, "retain": fs.spec.retain,
        "pvc": fs.status.and_then(|s| s.pvc_name),
    }))
}

/// Carries out a request/answer command (the copies, `agentfs_write` and
/// `agentfs_read`, stream: see `transfer`), the App volume commands
/// included. Both routes call this.
pub async fn run(
    client: &kube::Client,
    cmd: &Command,
    helper: &HelperOpts,
) -> Result<serde_json::Value, FsError> {
    fn v<T: serde::Serialize>(r: Result<T, FsError>) -> Result<serde_json::Value, FsError> {
        serde_json::to_value(r?).map_err(|e| FsError::Invalid(e.to_string()))
    }
    match cmd {
        Command::AgentfsCreate {
            namespace,
            fs_name,
            size,
            max_size,
            retain,
            access_mode,
        } => {
            let new = NewFs {
                namespace: namespace.clone(),
                name: fs_name.clone(),
                size: size.clone(),
                max_size: max_size.clone(),
                access_mode: access_mode.clone(),
                retain: *retain,
            };
            v(create(client, &new).await)
        }
        Command::AgentfsList { namespace } => v(list(client, namespace.as_deref()).await),
        Command::AgentfsLs {
            namespace,
            fs_name,
            path,
        } => v(ls(client, namespace, fs_name, path, helper).await),
        Command::AgentfsMkdir {
            namespace,
            fs_name,
            path,
        } => v(mkdir(client, namespace, fs_name, path, helper).await),
        Command::AgentfsTouch {
            namespace,
            fs_name,
            path,
        } => v(touch(client, namespace, fs_name, path, helper).await),
        Command::AgentfsResize {
            namespace,
            fs_name,
            size,
        } => v(resize(client, namespace, fs_name, size).await),
        Command::AgentfsDelete { namespace, fs_name } => {
            v(delete(client, namespace, fs_name).await)
        }
        Command::AppVolumes { namespace } => {
            v(super::apps::list(client, namespace.as_deref()).await)
        }
        Command::AppResize {
            namespace,
            app_name,
            workspace,
            database,
        } => v(super::apps::resize(
            client,
            namespace,
            app_name,
            workspace.as_deref(),
            database.as_deref(),
        )
        .await),
        Command::AgentfsWrite { .. } | Command::AgentfsRead { .. } => Err(FsError::Invalid(
            "a copy streams its bytes; it is not a plain command".into(),
        )),
    }
}
