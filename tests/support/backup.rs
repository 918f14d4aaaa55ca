//! What the backup tests share: volumes with a policy, their backup
//! status, bytes that do not compress, and the test registry's storage.

use std::collections::BTreeMap;
use std::path::PathBuf;

use exo::agentfs::tarstream::Limits;
use exo::backup::Repository;
use exo::crd::{AgentFS, BackupStatus};

/// The files of a backup, restored from the registry: path (under the
/// volume folder's own name, which is left out) -> bytes.
pub async fn restored(repo: &Repository, reference: &str) -> BTreeMap<String, Vec<u8>> {
    let mut tar = Vec::new();
    exo::backup::restore(repo, reference, &mut tar, Limits::default())
        .await
        .expect("restore from the registry");
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(tar.as_slice());
    for e in archive.entries().expect("a tar") {
        let mut e = e.expect("a tar entry");
        if e.header().entry_type().is_file() {
            let path = e.path().expect("a path").display().to_string();
            let rel = path
                .split_once('/')
                .map(|(_, r)| r.to_owned())
                .expect("under the volume folder");
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut data).expect("the file's bytes");
            out.insert(rel, data);
        }
    }
    out
}

/// Bytes that do not compress or repeat (a fixed LCG from `seed`).
pub fn noise_from(seed: u64, n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) as u8
        })
        .collect()
}

/// [`noise_from`] the one fixed seed.
pub fn noise(n: usize) -> Vec<u8> {
    noise_from(0, n)
}

/// The volume's `status.backup` (empty when it has none yet).
pub fn backup_of(fs: &AgentFS) -> BackupStatus {
    fs.status
        .as_ref()
        .and_then(|s| s.backup.clone())
        .unwrap_or_default()
}

/// An AgentFS `name` of 1Gi (max 2Gi) with the backup `policy`.
pub fn volume(name: &str, policy: serde_json::Value) -> AgentFS {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "autonomic.sh/v1alpha1", "kind": "AgentFS",
        "metadata": { "name": name },
        "spec": { "size": "1Gi", "maxSize": "2Gi", "backup": policy }
    }))
    .expect("AgentFS fixture")
}

/// Where the open test registry keeps the bytes of blob `digest`
/// (`sha256:…`): the distribution registry's filesystem layout under the
/// test environment's state folder.
pub fn blob_file(digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    let state = super::testenv_var("EXO_TESTENV_DIR")
        .expect("EXO_TESTENV_DIR: the test environment's state folder (scripts/testenv env)");
    PathBuf::from(state)
        .join("registry/open/data/docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

/// Asks for a backup of the AgentFS `name` now: the on-demand annotation
/// set to `request` (answered in `status.backup.answeredRequest`).
pub async fn request_backup(api: &kube::Api<AgentFS>, name: &str, request: &str) {
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
            exo::meta::ANNOTATION_BACKUP_REQUESTED: request
        }}})),
    )
    .await
    .expect("the backup request annotation");
}
