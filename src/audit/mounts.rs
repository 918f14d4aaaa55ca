//! `mounts` and `immutability`.
//!
//! `mounts`: a tenant pod's volumes are on the allowlist (ConfigMaps,
//! Secrets, emptyDir, projected and downward API, and its own tenant's
//! AgentFS and App claims); a baseline or skills mount is read-only.
//!
//! `immutability`: every baseline ConfigMap is `immutable`, and a pod
//! mounts only versions some release in git pins (as the Fleets' status
//! lists them).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Volume};
use kube::ResourceExt;

use super::{Finding, Index, Rule, pod_object};
use crate::meta::{LABEL_BASELINE, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_TENANT, MANAGED_BY};

/// Volume types outside the allowlist, by field name.
fn forbidden_type(v: &Volume) -> Option<&'static str> {
    let types: [(&'static str, bool); 21] = [
        ("hostPath", v.host_path.is_some()),
        ("nfs", v.nfs.is_some()),
        ("iscsi", v.iscsi.is_some()),
        ("csi", v.csi.is_some()),
        ("rbd", v.rbd.is_some()),
        ("cephfs", v.cephfs.is_some()),
        ("glusterfs", v.glusterfs.is_some()),
        ("fc", v.fc.is_some()),
        ("flexVolume", v.flex_volume.is_some()),
        ("azureFile", v.azure_file.is_some()),
        ("azureDisk", v.azure_disk.is_some()),
        ("awsElasticBlockStore", v.aws_elastic_block_store.is_some()),
        ("gcePersistentDisk", v.gce_persistent_disk.is_some()),
        ("gitRepo", v.git_repo.is_some()),
        ("image", v.image.is_some()),
        ("cinder", v.cinder.is_some()),
        ("flocker", v.flocker.is_some()),
        ("portworxVolume", v.portworx_volume.is_some()),
        ("quobyte", v.quobyte.is_some()),
        ("scaleIO", v.scale_io.is_some()),
        ("storageos", v.storageos.is_some()),
    ];
    types.into_iter().find(|(_, set)| *set).map(|(n, _)| n)
}

fn is_baseline_cm(cm: &ConfigMap) -> bool {
    cm.labels().contains_key(LABEL_BASELINE)
}

/// Baseline source names known to the cluster and the Fleets (the part of
/// a version before `-<hash>`).
fn sources(ix: &Index<'_>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = ix
        .snap
        .configmaps
        .iter()
        .filter_map(|c| c.labels().get(LABEL_BASELINE).cloned())
        .collect();
    for v in ix.pinned.iter().flatten() {
        if let Some((source, _)) = v.rsplit_once('-') {
            out.insert(source.to_owned());
        }
    }
    out
}

/// Whether a ConfigMap volume in `ns` is a baseline version: labelled so,
/// or named `<source>-<hash>` after a known source.
fn baseline_volume(ix: &Index<'_>, sources: &BTreeSet<String>, ns: &str, name: &str) -> bool {
    if let Some(cm) = ix.configmaps.get(&(ns.to_owned(), name.to_owned()))
        && is_baseline_cm(cm)
    {
        return true;
    }
    name.rsplit_once('-').is_some_and(|(source, hash)| {
        sources.contains(source) && hash.len() >= 6 && hash.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

pub(super) fn check_mounts(ix: &Index<'_>) -> Vec<Finding> {
    let sources = sources(ix);
    let mut out = Vec::new();
    for (ns, pod) in ix.tenant_pods() {
        let Some(spec) = pod.spec.as_ref() else {
            continue;
        };
        let mut found = |message: String| {
            out.push(Finding::new(Rule::Mounts, ns, pod_object(pod), message));
        };
        let volumes = spec.volumes.as_deref().unwrap_or_default();
        for v in volumes {
            if let Some(t) = forbidden_type(v) {
                let path = v.host_path.as_ref().map(|h| format!(" (path {})", h.path));
                found(format!(
                    "volume {} is a {t} volume{}: outside the tenant's allowlist",
                    v.name,
                    path.unwrap_or_default()
                ));
            }
            if let Some(c) = &v.persistent_volume_claim {
                let claim =
                    ix.snap.claims.iter().find(|p| {
                        p.namespace().as_deref() == Some(ns) && p.name_any() == c.claim_name
                    });
                let labels = claim.map(|p| p.labels().clone()).unwrap_or_default();
                let owner = labels.get(LABEL_TENANT).filter(|t| t.as_str() != ns);
                // The tenant's own volumes: an AgentFS's, or an App's
                // workspace or database.
                let agentfs = labels.get(LABEL_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
                    && matches!(
                        labels.get(LABEL_COMPONENT).map(String::as_str),
                        Some("agentfs" | "app")
                    );
                if let Some(owner) = owner {
                    found(format!(
                        "volume {} mounts claim {}, tenant {owner}'s volume",
                        v.name, c.claim_name
                    ));
                } else if !agentfs {
                    found(format!(
                        "volume {} mounts claim {}, which is not one of the tenant's AgentFS or App volumes",
                        v.name, c.claim_name
                    ));
                }
            }
        }
        let guarded = |name: &str| -> Option<&'static str> {
            let v = volumes.iter().find(|v| v.name == name)?;
            if let Some(cm) = &v.config_map
                && baseline_volume(ix, &sources, ns, &cm.name)
            {
                return Some("baseline");
            }
            (name.contains("skills")).then_some("skills")
        };
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            for m in c.volume_mounts.iter().flatten() {
                let what = guarded(&m.name)
                    .or_else(|| m.mount_path.contains("/skills").then_some("skills"));
                if let Some(what) = what
                    && m.read_only != Some(true)
                {
                    found(format!(
                        "container {} mounts {what} volume {} at {} writable (readOnly is not true)",
                        c.name, m.name, m.mount_path
                    ));
                }
            }
        }
    }
    out
}

pub(super) fn check_immutability(ix: &Index<'_>) -> Vec<Finding> {
    let sources = sources(ix);
    let mut out = Vec::new();
    for cm in &ix.snap.configmaps {
        let ns = cm.namespace().unwrap_or_default();
        if ix.tenants.contains_key(&ns) && is_baseline_cm(cm) && cm.immutable != Some(true) {
            out.push(Finding::new(
                Rule::Immutability,
                &ns,
                format!("ConfigMap/{}", cm.name_any()),
                "a baseline version that is not immutable (immutable: true)".into(),
            ));
        }
    }
    let Some(pinned) = &ix.pinned else {
        return out;
    };
    for (ns, pod) in ix.tenant_pods() {
        for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(cm) = &v.config_map else { continue };
            if baseline_volume(ix, &sources, ns, &cm.name) && !pinned.contains(&cm.name) {
                out.push(Finding::new(
                    Rule::Immutability,
                    ns,
                    pod_object(pod),
                    format!(
                        "volume {} mounts baseline {}, a version no release pins",
                        v.name, cm.name
                    ),
                ));
            }
        }
    }
    out
}
